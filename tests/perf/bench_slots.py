"""Benchmark: what Dragonfly's per-slot capture costs an INT node's element path.

bench_elements' path (EtherFilter ... FlowMeter -> Queue -> Unqueue -> INTTransit ...) in
one process, no network, batches of FromDevice's default size, four ways in interleaved
rounds: as it is; with SlotTaps before the queue and after the port filling a FlowSlots
table (1 ms slots, first packet per slot); with an ACK tap as well, every frame also
looked up as the acknowledgement of a monitored flow (what a node's other direction pays
per ACK: its reversed key and a lookup); and with the queue's exact per-flow byte count
too. Prints packets per second of each and the ratios to the plain path (the target:
>= 0.9 with the capture on). Asserts only that every frame came out.

    python -m tests.perf.bench_slots          (part of make bench)
"""
from __future__ import annotations

import statistics

from int_node.router import Router
from tests.perf import answer_help
from tests.perf.bench_elements import DEFAULT_BATCH, PATH, _round

ROUNDS, FRAMES_PER_ROUND = 5, 60_000
TAPPED = PATH.replace("-> q0 :: Queue(1000) -> Unqueue ->",
                      "-> SlotTap(slots, in) -> q0 :: Queue(1000{exact}) -> Unqueue -> SlotTap(slots, out) ->") \
    + "slots :: FlowSlots(slot 1ms, keep 2s{queue});\n"
VARIANTS = {"plain": PATH,
            "slots": TAPPED.format(exact="", queue=""),
            "slots + ack tap": TAPPED.format(exact="", queue="").replace(
                "-> SlotTap(slots, in) ->", "-> SlotTap(slots, ack) -> SlotTap(slots, in) ->"),
            "slots + exact bytes": TAPPED.format(exact=", flow_bytes true", queue=", queue q0")}


def run_benchmark(rounds: int = ROUNDS, frames: int = FRAMES_PER_ROUND) -> dict:
    routers = {name: Router(config) for name, config in VARIANTS.items()}
    for r in routers.values():
        r.initialize()
    pps = {name: [] for name in routers}
    for _ in range(rounds):
        for name, r in routers.items():
            pps[name].append(_round(r, DEFAULT_BATCH, frames))
    sent = rounds * (frames + (-frames) % DEFAULT_BATCH)
    out = {name: r.elements["sink"].dropped for name, r in routers.items()}
    entries = routers["slots"].elements["slots"].entries
    for r in routers.values():
        r.cleanup()
    med = {name: statistics.median(v) for name, v in pps.items()}
    return {"pps": pps, "median_pps": med, "sent": sent, "out": out, "slot_entries": entries,
            "ratio": {name: med[name] / med["plain"] for name in med}}


def report(r: dict) -> str:
    lines = [f"Dragonfly slot capture on the element path ({ROUNDS} interleaved rounds, batches of "
             f"{DEFAULT_BATCH}, median):"]
    for name, v in r["median_pps"].items():
        lines.append(f"  {name:20s} {v:10,.0f} pps  {r['ratio'][name]:.2f}x   "
                     f"({', '.join(f'{x:,.0f}' for x in r['pps'][name])})")
    return "\n".join(lines)


def test_slot_capture_benchmark():
    r = run_benchmark()
    print("\n" + report(r))
    assert all(n == r["sent"] for n in r["out"].values()) and r["slot_entries"] > 0


if __name__ == "__main__":
    answer_help(__doc__)
    print(report(run_benchmark()))
