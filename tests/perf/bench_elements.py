"""Benchmark: the CPU cost of an INT node's element path, in one process, no network.

The path of bench_forwarding's node (EtherFilter -> Classifier -> INTSource ->
IPv6Lookup -> DecHopLimit -> FlowMeter -> Queue -> Unqueue -> INTTransit ->
EtherRewrite), fed by the benchmark instead of a FromDevice and ending in a Discard
instead of a ToDevice: what the elements cost per packet, without the system calls and
the scheduling noise of a testbed. Frames are pushed in batches of 1 (each frame alone,
as before FromDevice batched) and of FromDevice's default size, rounds interleaved; it
prints packets per second of each and their ratio. Asserts only that every frame came
out stamped (shared machines are noisy).

    python -m tests.perf.bench_elements        (part of make bench)
"""
from __future__ import annotations

import statistics
import time

from int_node.elements.devices import FromDevice
from int_node.packet import Packet
from int_node.router import Router
from tests.helpers import MAC_A, ipv6_frame
from tests.perf import answer_help

MAC = ":".join(f"{b:02x}" for b in MAC_A)
PATH = f"""
src :: Idle -> EtherFilter({MAC}) -> cls :: Classifier(ipv6, -); cls[1] -> Discard;
cls -> INTSource(max_hops 2, mtu 9000) -> rt :: IPv6Lookup(::/0 0) -> DecHopLimit -> m0 :: FlowMeter
 -> q0 :: Queue(1000) -> Unqueue -> tr0 :: INTTransit(node_id 1, queue q0, meter m0)
 -> EtherRewrite(02:00:00:00:00:03, 02:00:00:00:00:04) -> sink :: Discard;
"""
FRAME_PAYLOAD_BYTES = 1500 - 14 - 40 - 20
DEFAULT_BATCH = next(a.default for a in FromDevice.ARGS if a.name == "batch")
ROUNDS, FRAMES_PER_ROUND = 5, 60_000


def _round(router: Router, batch_size: int, frames: int) -> float:
    first, port = router.elements["src"]._out[0]
    template = ipv6_frame(FRAME_PAYLOAD_BYTES)
    sent = 0
    t0 = time.perf_counter()
    while sent < frames:
        batch = [Packet(bytearray(template), time.time_ns(), 1) for _ in range(batch_size)]
        first.push_batch(port, batch)
        sent += batch_size
    return sent / (time.perf_counter() - t0)


def run_benchmark(rounds: int = ROUNDS, frames: int = FRAMES_PER_ROUND) -> dict:
    router = Router(PATH)
    router.initialize()
    pps = {1: [], DEFAULT_BATCH: []}
    for _ in range(rounds):
        for size in pps:
            pps[size].append(_round(router, size, frames))
    stamped = router.elements["tr0"].stamped
    out = router.elements["sink"].dropped
    router.cleanup()
    med = {size: statistics.median(v) for size, v in pps.items()}
    return {"pps": pps, "median_pps": med, "batch": DEFAULT_BATCH,
            "ratio_batch_vs_single": med[DEFAULT_BATCH] / med[1], "stamped": stamped, "out": out,
            "sent": rounds * sum(frames + (-frames) % s for s in pps)}


def report(r: dict) -> str:
    lines = [f"INT node element path, in process ({ROUNDS} interleaved rounds, median):"]
    for size, v in r["median_pps"].items():
        runs = ", ".join(f"{x:,.0f}" for x in r["pps"][size])
        lines.append(f"  batches of {size:3d}: {v:10,.0f} pps   ({runs})")
    lines.append(f"  batches of {r['batch']} / of 1: {r['ratio_batch_vs_single']:.2f}x")
    return "\n".join(lines)


def test_element_path_benchmark():
    r = run_benchmark()
    print("\n" + report(r))
    assert r["out"] == r["stamped"] == r["sent"]       # every frame went through, stamped


if __name__ == "__main__":
    answer_help(__doc__)
    print(report(run_benchmark()))
