"""Benchmark: what RTT separation costs an INT node, and how long its re-clustering takes.

1. Forwarding: bench_elements' path (EtherFilter ... FlowMeter -> Queue -> Unqueue ->
   INTTransit ...) in one process, no network, batches of FromDevice's default size,
   against the same path with RTT separation in place of its single queue (RTTTap ->
   FlowSplit -> 4 Queues -> DRR -> Unqueue -> INTTransit stamping each packet's own queue,
   and the control loop run once a round), rounds interleaved, the same TCP segments of 64
   flows through both. Prints packets per second and the ratio (the target: >= 0.85).
   Only the data direction crosses the RTTTap here (a node also taps the ACKs).
2. Re-clustering: Jenks natural breaks over 1,000 and 10,000 flows' RTTs (log-uniform
   1-200 ms, at the control loop's 0.1 ms resolution), and one whole control round with that
   many long flows (classify, weights, buffers); jenkspy's C extension on the same RTTs
   beside it where it is installed (it works on every value, not on distinct ones).

3. Under PyPy (the node's other interpreter, `--node-python pypy`, where `make setup`
   installed it): the forwarding comparison with each variant in processes of its own, as a
   node runs one configuration (a JIT compiles the path it runs; interleaved in one
   process, PyPy's rounds vary twofold), alternating, each process's rounds after its first
   two (warm-up), the median over processes.

Asserts only that every frame came out stamped. As a script it prints the figures on stderr
and as JSON with their provenance on stdout (a record for data/bench/).

    python -m tests.perf.bench_separation      (part of make bench)
"""
from __future__ import annotations

import json
import os
import random
import statistics
import struct
import subprocess
import sys
import time

from int_node.jenks import natural_breaks
from int_node.packet import Packet, flow_key
from int_node.router import Router
from tests.helpers import ipv6_frame
from tests.perf import answer_help
from tests.perf.bench_elements import DEFAULT_BATCH, FRAME_PAYLOAD_BYTES, PATH

ROUNDS, FRAMES_PER_ROUND, FLOWS = 5, 60_000, 64
FLOW_COUNTS = (1_000, 10_000)
QUEUES = 4
SEPARATED = PATH.replace(
    "-> q0 :: Queue(1000) -> Unqueue -> tr0 :: INTTransit(node_id 1, queue q0, meter m0)",
    "-> RTTTap(rtt) -> split :: FlowSplit(queues 4, long_bytes 100000, long_age 1s);\n"
    + "".join(f"split[{j}] -> q{j} :: Queue(250) -> [{j}]drr;\n" for j in range(QUEUES))
    + "drr :: DRR -> Unqueue -> tr0 :: INTTransit(node_id 1, queue drr, meter m0)") + f"""
rtt :: FlowRTT;
ctl :: RTTSeparation(split split, rtt rtt, sched drr, queues {' '.join(f'q{j}' for j in range(QUEUES))});
"""
VARIANTS = {"single queue": PATH, "RTT separation": SEPARATED}
TCP_HEADER = struct.Struct("!HHIIBBHHH")


def segments(n_frames: int, flows: int = FLOWS) -> list:
    """TCP segments of ``flows`` flows in turn, each flow's sequence numbers advancing."""
    frames = []
    for k in range(n_frames):
        flow = k % flows
        f = ipv6_frame(FRAME_PAYLOAD_BYTES, sport=40000 + flow)
        TCP_HEADER.pack_into(f, 54, 40000 + flow, 5201, (k // flows) * FRAME_PAYLOAD_BYTES, 1, 5 << 4, 0x10,
                             65535, 0, 0)
        frames.append(f)
    return frames


def _round(router: Router, frames: list) -> float:
    first, port = router.elements["src"]._out[0]
    ctl = router.elements.get("ctl")
    t0 = time.perf_counter()
    for i in range(0, len(frames), DEFAULT_BATCH):
        now = time.time_ns()
        first.push_batch(port, [Packet(bytearray(f), now, 1) for f in frames[i:i + DEFAULT_BATCH]])
    if ctl is not None:
        ctl.run_round(time.time_ns())                 # the node runs it once a second
    return len(frames) / (time.perf_counter() - t0)


def forwarding(rounds: int = ROUNDS, frames: int = FRAMES_PER_ROUND) -> dict:
    routers = {name: Router(config) for name, config in VARIANTS.items()}
    for r in routers.values():
        r.initialize()
    pps = {name: [] for name in routers}
    for k in range(rounds):
        batch = segments(frames)
        for name, r in routers.items():
            pps[name].append(_round(r, batch))
    out = {name: r.elements["sink"].dropped for name, r in routers.items()}
    stamped = {name: r.elements["tr0"].stamped for name, r in routers.items()}
    sep = routers["RTT separation"]
    tracked = len(sep.elements["split"].tracked)
    for r in routers.values():
        r.cleanup()
    med = {name: statistics.median(v) for name, v in pps.items()}
    return {"pps": pps, "median_pps": med, "sent": rounds * frames, "out": out, "stamped": stamped,
            "tracked_flows": tracked,
            "ratio": med["RTT separation"] / med["single queue"]}


VARIANT_ENV, ROUNDS_ENV = "INTCC_BENCH_SEPARATION_VARIANT", "INTCC_BENCH_SEPARATION_ROUNDS"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_variant(name: str, rounds: int) -> list:
    """pps of each round of one variant in this process (the child of per_process)."""
    r = Router(VARIANTS[name])
    r.initialize()
    out = [_round(r, segments(FRAMES_PER_ROUND)) for _ in range(rounds)]
    r.cleanup()
    return out


def per_process(python: str, rounds: int = 7, processes: int = 3, warmup: int = 2) -> dict:
    pps = {name: [] for name in VARIANTS}
    for _ in range(processes):
        for name in VARIANTS:
            res = subprocess.run([python, "-m", "tests.perf.bench_separation"], cwd=ROOT, capture_output=True,
                                 text=True, check=True, env={**os.environ, VARIANT_ENV: name, ROUNDS_ENV: str(rounds)})
            pps[name].append(statistics.median(json.loads(res.stdout)[warmup:]))
    med = {name: statistics.median(v) for name, v in pps.items()}
    return {"python": python, "pps": pps, "median_pps": med, "rounds": rounds, "warmup_rounds": warmup,
            "ratio": med["RTT separation"] / med["single queue"]}


def pypy_forwarding() -> dict | None:
    from int_node.runtime import PYPY_PYTHON
    return per_process(PYPY_PYTHON) if os.access(PYPY_PYTHON, os.X_OK) else None


def reclustering(flow_counts=FLOW_COUNTS, repeats: int = 3, seed: int = 1) -> list:
    rng = random.Random(seed)
    rows = []
    for n in flow_counts:
        rtts_us = [1000 * 200 ** rng.random() for _ in range(n)]        # 1-200 ms, log-uniform
        ours = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            natural_breaks(rtts_us, QUEUES, resolution=100.0)
            ours.append(time.perf_counter() - t0)
        row = {"flows": n, "distinct_rtts": len({round(v / 100) for v in rtts_us}),
               "jenks_s": statistics.median(ours), "control_round_s": _control_round_s(rtts_us)}
        try:
            import jenkspy
            t0 = time.perf_counter()
            jenkspy.jenks_breaks(rtts_us, n_classes=QUEUES)
            row["jenkspy_s"] = time.perf_counter() - t0
        except ImportError:
            row["jenkspy_s"] = None
        rows.append(row)
    return rows


def _control_round_s(rtts_us: list) -> float:
    """One RTTSeparation round with len(rtts_us) long TCP flows tracked."""
    r = Router(SEPARATED.replace("FlowSplit(queues 4,", f"FlowSplit(max_flows {len(rtts_us)}, queues 4,"))
    r.initialize()
    split, ctl = r.elements["split"], r.elements["ctl"]
    now = time.time_ns()
    by_key = {}
    for i, rtt in enumerate(rtts_us):
        frame = ipv6_frame(100, src=1 + i // 60000 % 200, sport=1024 + i % 60000)
        split._count(key := flow_key(frame), split.long_bytes, now)
        by_key[key] = rtt
    r.elements["rtt"].rtt_us = by_key.get
    t0 = time.perf_counter()
    ctl.run_round(now)
    took = time.perf_counter() - t0
    assert len(split.table) == len(rtts_us)
    r.cleanup()
    return took


def report(fwd: dict, rows: list, pypy: dict | None = None) -> str:
    lines = [f"RTT separation on the element path ({ROUNDS} interleaved rounds, batches of {DEFAULT_BATCH}, "
             f"{FLOWS} TCP flows, median):"]
    for name, v in fwd["median_pps"].items():
        lines.append(f"  {name:16s} {v:10,.0f} pps   ({', '.join(f'{x:,.0f}' for x in fwd['pps'][name])})")
    lines.append(f"  separated / single queue: {fwd['ratio']:.2f}x   (target >= 0.85; "
                 f"{fwd['tracked_flows']} flows tracked as long)")
    if pypy is not None:
        lines.append(f"Under PyPy, each variant in its own processes ({len(pypy['pps']['single queue'])} each, "
                     f"median of rounds after the first {pypy['warmup_rounds']}):")
        for name, v in pypy["median_pps"].items():
            lines.append(f"  {name:16s} {v:10,.0f} pps   ({', '.join(f'{x:,.0f}' for x in pypy['pps'][name])})")
        lines.append(f"  separated / single queue: {pypy['ratio']:.2f}x")
    lines.append("Re-clustering (4 classes):")
    for r in rows:
        theirs = f"{r['jenkspy_s'] * 1e3:9.1f} ms" if r["jenkspy_s"] is not None else "   (not installed)"
        lines.append(f"  {r['flows']:6,d} flows ({r['distinct_rtts']:5,d} distinct RTTs): Jenks "
                     f"{r['jenks_s'] * 1e3:7.1f} ms, whole control round {r['control_round_s'] * 1e3:7.1f} ms; "
                     f"jenkspy on every value {theirs}")
    return "\n".join(lines)


def test_separation_benchmark():
    fwd, rows, pypy = forwarding(), reclustering(), pypy_forwarding()
    print("\n" + report(fwd, rows, pypy))
    assert all(n == fwd["sent"] for n in fwd["out"].values())
    assert all(n == fwd["sent"] for n in fwd["stamped"].values())


if __name__ == "__main__":
    if os.environ.get(VARIANT_ENV):                  # a child of per_process: one variant, its rounds
        print(json.dumps(one_variant(os.environ[VARIANT_ENV], int(os.environ.get(ROUNDS_ENV, "7")))))
        raise SystemExit(0)
    answer_help(__doc__)
    from records import stamp
    fwd, rows, pypy = forwarding(), reclustering(), pypy_forwarding()
    print(report(fwd, rows, pypy), file=sys.stderr)
    print(json.dumps({"forwarding": fwd, "reclustering": rows, "forwarding_pypy": pypy, "provenance": stamp()},
                     indent=1))
