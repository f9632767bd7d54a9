"""Per-testbed supervisor: starts the node processes, restarts crashed ones,
stops them all on SIGTERM. Run as ``python -m experiments.testbed.supervisor RUN_DIR``;
``intcc testbed up`` starts it detached. It records pids and restarts in
RUN_DIR/nodes.json (read by ``intcc testbed status``).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from int_node.runtime import node_env

RESTART_LIMIT = 5          # restarts per node within RESTART_WINDOW_S before giving up
RESTART_WINDOW_S = 60.0


def _node_argv(run_dir: str, name: str, info: dict):
    argv = [info.get("python") or sys.executable, "-m", "broker.node", "run", info["config"], "--netns", info["netns"],
            "--control", info["control"], "--counters-out", os.path.join(run_dir, f"{name}.counters.json")]
    if info.get("cpu") is not None:
        argv += ["--cpu", str(info["cpu"])]
        if info.get("poll_idle"):
            argv += ["--poll-idle"]
    if info.get("busy_poll_us"):
        argv += ["--busy-poll-us", str(info["busy_poll_us"])]
    if info.get("rt_priority"):
        argv += ["--rt-priority", str(info["rt_priority"])]
    if info.get("fast_path"):
        argv += ["--fast-path"]
    return argv


def main(run_dir: str) -> int:
    with open(os.path.join(run_dir, "state.json")) as f:
        state = json.load(f)
    stopping = False

    def on_term(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    procs, restarts, history = {}, {}, {}

    def start(name):
        info = state["nodes"][name]
        log = open(info["log"], "ab")
        argv = _node_argv(run_dir, name, info)
        procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=node_env(argv[0]))
        log.close()

    def record():
        tmp = os.path.join(run_dir, "nodes.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"pid": os.getpid(), "nodes": {n: {"pid": p.pid if p.poll() is None else None,
                                                         "restarts": restarts.get(n, 0)}
                                                     for n, p in procs.items()}}, f)
        os.replace(tmp, os.path.join(run_dir, "nodes.json"))

    for name in state["nodes"]:
        start(name)
    record()
    while not stopping:
        time.sleep(0.2)
        for name, p in list(procs.items()):
            if stopping or p.poll() is None:
                continue
            now = time.monotonic()
            recent = [t for t in history.get(name, []) if now - t < RESTART_WINDOW_S]
            if len(recent) >= RESTART_LIMIT:
                print(f"supervisor: node {name} exited {p.returncode}; "
                      f"{RESTART_LIMIT} restarts in {RESTART_WINDOW_S:.0f} s, giving up", flush=True)
                continue
            print(f"supervisor: node {name} exited with {p.returncode}, restarting", flush=True)
            history[name] = recent + [now]
            restarts[name] = restarts.get(name, 0) + 1
            start(name)
            record()
    for p in procs.values():
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 3.0
    for p in procs.values():
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    record()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
