"""The house is built ground up (docs/design.md): a package imports only from its own
floor or the floors below, its command line (``<pkg>.cli``) included: a package's commands
compose what is on its floor and below. The top (``intcc``), ``__main__`` modules and the
node launcher compose the floors and may import anything; nothing else imports an entry
point or a command line. Imports inside functions count: a lazy import is still a
dependency."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOORS = {
    "int_node": 0, "records": 0,
    "telemetry": 1,
    "broker": 2, "ccp_algs": 2, "estimator": 2,
    "ccp_agent": 3,
    "experiments": 4, "dashboard": 4,
    "intcc": 5,
}
#: Modules that compose the floors (command lines and process entry points).
ENTRY_POINTS = {"broker.node"}


def is_entry_point(module: str) -> bool:
    """Exempt from the floors: the top package, ``__main__`` modules, the node launcher."""
    last = module.rsplit(".", 1)[-1]
    return module in ENTRY_POINTS or last == "__main__" or module.split(".")[0] == "intcc"


def is_command_line(module: str) -> bool:
    """``<pkg>.cli``: bound by its package's floor; only the top imports it."""
    return module.rsplit(".", 1)[-1] == "cli"


def imports_of(path: str, module: str):
    """(imported module, line) of every import in a file, relative ones resolved."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = module.rsplit(".", 1)[0] if not path.endswith("__init__.py") else module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [a.name], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # 'from broker import cli' imports broker.cli
            yield target, [target] + [f"{target}.{a.name}" for a in node.names], node.lineno


def violations(root: str = ROOT):
    found = []
    for pkg in FLOORS:
        base = os.path.join(root, pkg)
        for dirpath, _, files in os.walk(base):
            for f in files:
                if not f.endswith(".py"):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                module = rel[:-len(".__init__")] if rel.endswith(".__init__") else rel
                if is_entry_point(module):
                    continue
                for target, modules, line in imports_of(path, module):
                    top = target.split(".")[0]
                    if top not in FLOORS or top == pkg:
                        continue
                    if FLOORS[top] > FLOORS[pkg]:
                        found.append(f"{rel}.py:{line}: {pkg} (floor {FLOORS[pkg]}) imports {target} "
                                     f"(floor {FLOORS[top]})")
                    else:
                        found += [f"{rel}.py:{line}: imports the entry point {m}" for m in modules
                                  if is_entry_point(m) or is_command_line(m)][:1]
    return found


def test_no_package_imports_from_a_floor_above_it():
    assert violations() == []


def test_an_upward_import_is_caught(tmp_path):
    # the control: the same check on a copy of a ground-floor module given an upward import
    for pkg in FLOORS:
        os.makedirs(tmp_path / pkg, exist_ok=True)
    (tmp_path / "int_node" / "exporters.py").write_text("def f():\n    from broker.publisher import MqttExporter\n")
    (tmp_path / "telemetry" / "schema.py").write_text("from .flowid import FLOW_ID_RE\n")
    (tmp_path / "estimator" / "evaluate.py").write_text("from experiments.runs.estimator_collect import collect\n")
    (tmp_path / "broker" / "x.py").write_text("from estimator import cli\n")
    # a command line is bound by its floor too: estimator's may not reach into experiments
    (tmp_path / "estimator" / "cli.py").write_text("def run():\n    from experiments.runs.estimator_live import live_eval\n")
    found = violations(str(tmp_path))
    assert len(found) == 4, found
    assert any("estimator.cli.py:2: estimator (floor 2) imports experiments.runs.estimator_live" in v for v in found)
    assert any("int_node.exporters.py:2: int_node (floor 0) imports broker.publisher" in v for v in found)
    assert any("estimator (floor 2) imports experiments.runs.estimator_collect" in v for v in found)
    assert any("imports the entry point estimator.cli" in v for v in found)


@pytest.mark.parametrize("pkg", sorted(FLOORS))
def test_every_floor_is_a_package_or_yet_to_come(pkg):
    path = os.path.join(ROOT, pkg)
    assert not os.path.exists(path) or os.path.exists(os.path.join(path, "__init__.py"))


def rust_module_imports(src: str) -> dict:
    """module -> the crate modules it uses (``use crate::m``, ``crate::m::`` paths)."""
    import re
    edges = {}
    for f in os.listdir(src):
        if f.endswith(".rs"):
            text = open(os.path.join(src, f), encoding="utf-8").read()
            edges[f[:-3]] = set(re.findall(r"crate::(\w+)", text)) - {f[:-3]}
    return edges


def cycle(edges: dict):
    """A cycle of modules (as a list) if there is one, else None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        state[m] = "done"
        stack.pop()
        return None
    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_datapath_daemons_modules_import_no_cycle():
    assert cycle(rust_module_imports(os.path.join(ROOT, "datapath", "src"))) is None
    # the control: a cycle planted in the edges is found
    assert cycle({"agent": {"flowctl"}, "flowctl": {"agent", "bpf"}, "bpf": set()}) == ["agent", "flowctl", "agent"]
