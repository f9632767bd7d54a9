"""Finding and removing testbeds from their names alone: after a killed node, supervisor
or ``up`` as after a clean run. Idempotent."""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from typing import List

from pyroute2 import IPRoute, netns
from pyroute2.netlink.exceptions import NetlinkError

from int_node import runtime
from int_node.runtime import release_poll_idle

RUN_ROOT = runtime.RUN_ROOT


class TestbedError(RuntimeError):
    __test__ = False    # not a test class, where a test module imports it


def run_dir(name: str) -> str:
    return os.path.join(RUN_ROOT, name)


def list_testbeds() -> List[str]:
    names = set()
    if os.path.isdir(RUN_ROOT):
        names |= {d for d in os.listdir(RUN_ROOT) if os.path.exists(os.path.join(RUN_ROOT, d, "state.json"))}
    for ns in netns.listnetns():
        if ns.startswith("intcc-") and ns.count("-") >= 2:
            names.add(ns.split("-")[1])
    return sorted(names)


def _sh(args, check=True, **kw):
    res = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and res.returncode != 0:
        raise TestbedError(f"{' '.join(args)} failed: {res.stderr.strip() or res.stdout.strip()}")
    return res


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _tail(path, n=15) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


_namespace_lock = threading.RLock()
_namespace_depth = 0


@contextmanager
def namespace_changes():
    """One process at a time creates or removes this host's namespaces: two testbeds
    brought up and down at once by different processes (cluster workers sharing a host)
    raced, and a veth went missing from the namespace it was just moved to. Re-entrant
    within a process."""
    global _namespace_depth
    with _namespace_lock:
        if _namespace_depth:
            _namespace_depth += 1
            try:
                yield
            finally:
                _namespace_depth -= 1
            return
        os.makedirs(RUN_ROOT, exist_ok=True)
        with open(os.path.join(RUN_ROOT, "namespaces.lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)       # released with the file
            _namespace_depth = 1
            try:
                yield
            finally:
                _namespace_depth = 0


def _pids_marked(name: str) -> List[int]:
    """Processes of this testbed: nodes and the supervisor carry its run dir in argv."""
    marker = run_dir(name).encode()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(a == marker or a.startswith(marker + b"/") for a in argv):
            pids.append(int(d))
    return pids


def _kill_all(pids: List[int], grace_s: float = 3.0):
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
        time.sleep(0.05)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _remove_fast_path_pins(ns_prefix: str) -> List[str]:
    """BPF a node on the fast path pinned and could not take off (killed): unpinned, it goes
    with the namespace's devices."""
    from int_node.fastpath.loader import PIN_PREFIX, PIN_ROOT
    removed = []
    try:
        names = os.listdir(PIN_ROOT)
    except OSError:
        return removed
    for d in names:
        if d.startswith(PIN_PREFIX + ns_prefix):
            shutil.rmtree(os.path.join(PIN_ROOT, d), ignore_errors=True)
            removed.append(f"bpf pins {d}")
    return removed


def teardown(name: str) -> List[str]:
    """Remove everything of testbed ``name``; returns what was removed. Idempotent."""
    removed = []
    sup = _read_json(os.path.join(run_dir(name), "nodes.json")) or {}
    pids = set(_pids_marked(name))
    if sup.get("pid"):
        pids.add(sup["pid"])
    pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
    _kill_all(pids)
    if pids:
        removed.append(f"{len(pids)} process(es)")
    state = _read_json(os.path.join(run_dir(name), "state.json")) or {}
    for info in state.get("nodes", {}).values():
        if info.get("poll_idle") and info.get("cpu") is not None:
            release_poll_idle(info["cpu"])    # a node killed by SIGKILL could not
    prefix = f"intcc-{name}-"
    removed += _remove_fast_path_pins(prefix)
    for ns in netns.listnetns():
        if not ns.startswith(prefix):
            continue
        res = _sh(["ip", "netns", "pids", ns], check=False)
        _kill_all([int(p) for p in res.stdout.split()], grace_s=1.0)
        # A flow killed mid-transfer leaves its socket to the kernel, which retransmits it
        # for minutes, namespace gone or not: a later run's kernel trace (tracefs sees every
        # namespace) then holds a flow that is not its own. Destroy them with the namespace.
        _sh(["ip", "netns", "exec", ns, "ss", "-K", "-t", "-a"], check=False)
        with namespace_changes():
            netns.remove(ns)   # takes its veths with it
        removed.append(f"netns {ns}")
    tag = hashlib.sha1(name.encode()).hexdigest()[:4]
    with namespace_changes(), IPRoute() as ipr:   # veths left in the root namespace by an interrupted 'up'
        for link in ipr.get_links():
            ifname = link.get_attr("IFLA_IFNAME")
            if ifname.startswith(f"intcc{tag}"):
                try:
                    ipr.link("del", index=link["index"])
                except NetlinkError as e:
                    if e.code != errno.ENODEV:
                        raise
                    continue         # gone with its peer's namespace since the listing
                removed.append(f"link {ifname}")
    if os.path.isdir(run_dir(name)):
        shutil.rmtree(run_dir(name), ignore_errors=True)
        removed.append(f"dir {run_dir(name)}")
    return removed
