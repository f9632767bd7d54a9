"""``intcc report``: the docs' Results tables (and figures) rebuilt from committed records.

A doc holds a generated table between two markers::

    <!-- report:lossy-link -->
    ...whatever the section renders...
    <!-- /report -->

``update`` rewrites every such block from its section (``report_sections.SECTIONS``);
``check`` lists the blocks whose text differs from what the records give, so a number
edited by hand, or a record changed without regenerating the docs, fails a test.
"""
from __future__ import annotations

import os
import re
from typing import Callable, Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(?P<open><!-- report:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(?P<close><!-- /report -->)", re.S)


class ReportError(ValueError):
    pass


def doc_paths(root: str = ROOT) -> List[str]:
    """README.md and every Markdown file under docs/ (results records included)."""
    paths = [os.path.join(root, "README.md")]
    for folder, _dirs, files in os.walk(os.path.join(root, "docs")):
        paths += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return [p for p in paths if os.path.exists(p)]


def _render_all(text: str, path: str, sections: Dict[str, Callable[[], str]], cache: dict) -> Tuple[str, List[str]]:
    """The text with every block rendered anew, and the names of the blocks that changed."""
    changed: List[str] = []

    def one(m):
        name = m.group("name")
        if name not in sections:
            raise ReportError(f"{os.path.relpath(path, ROOT)}: no report section '{name}' "
                              f"(sections: {', '.join(sorted(sections))})")
        if name not in cache:
            cache[name] = sections[name]().rstrip("\n") + "\n"
        if m.group("body") != cache[name]:
            changed.append(name)
        return m.group("open") + cache[name] + m.group("close")
    return BLOCK.sub(one, text), changed


def check(paths=None, sections=None) -> List[str]:
    """'path: section' for every block that differs from its records (empty: all in step)."""
    from .report_sections import SECTIONS
    sections = sections if sections is not None else SECTIONS
    cache: dict = {}
    stale = []
    for path in paths or doc_paths():
        with open(path, encoding="utf-8") as f:
            _new, changed = _render_all(f.read(), path, sections, cache)
        stale += [f"{os.path.relpath(path, ROOT)}: {name}" for name in changed]
    return stale


def update(paths=None, sections=None, echo=print) -> List[str]:
    """Rewrite every block from its records; returns 'path: section' for those that changed."""
    from .report_sections import SECTIONS
    sections = sections if sections is not None else SECTIONS
    cache: dict = {}
    done = []
    for path in paths or doc_paths():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new, changed = _render_all(text, path, sections, cache)
        if changed:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            for name in changed:
                done.append(f"{os.path.relpath(path, ROOT)}: {name}")
                echo(f"updated {done[-1]}")
    return done
