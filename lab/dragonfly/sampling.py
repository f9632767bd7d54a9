"""CBIQ from sequence numbers against the queue's own count, with the capture's random
packet sampling at 1, 1/4 and 1/16 (Dragonfly's interpolation under sampling): kernel BBR
beside kernel CUBIC through the dumbbell (10 Mbit/s, 4 BDP of buffer) with the capture on
the bottleneck, each sampling share its own run of the same network. Per flow, per slot
where the queue's exact bytes of the flow were kept (a sampled packet's), the error of
CBIQ from the sequence numbers in full-sized packets: median, 90th and 99th percentile.
Writes a record (date, commit, command).

    python -m lab.dragonfly.sampling [--seconds 8] [--samples 1 0.25 0.0625] --json-out RECORD
    python -m lab.dragonfly.sampling --table RECORD      # docs/dragonfly.md's table from it
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np

from estimator.identify.bottleneck import FRAME_BYTES
from experiments.runs.slot_record import SlotRecorder, read_slots
from experiments.testbed.bed import Testbed
from experiments.runs.scenario import TOPOLOGIES
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import BackgroundFlow
from lab.dragonfly import print_table
from records.provenance import stamp
from telemetry.cbiq import per_slot, slot_inputs

PAYLOAD_BYTES = 1448
PORTS = {5201: "bbr", 5202: "cubic"}


def one_run(sample: float, seconds: float) -> dict:
    params = {"flow_slots": True, "buffer_bdp": 4.0}
    with Testbed(load_topo(os.path.join(TOPOLOGIES, "dumbbell.toml"), params), "lsamp").up(exporter="none") as tb:
        for node in tb.state["nodes"]:
            for e in tb.node_request(node, {"cmd": "elements"})["elements"]:
                if e["class"] == "FlowSlots":
                    tb.write(node, e["name"], "sample", sample)
        run_dir = tempfile.mkdtemp(prefix="intcc-sampling-")
        with SlotRecorder(tb, run_dir):
            flows = [BackgroundFlow(tb, "s1", "r1", "bbr", seconds, 1.0, port=5201),
                     BackgroundFlow(tb, "s2", "r2", "cubic", seconds, 1.0, port=5202)]
            for f in flows:
                f.join()
    got = read_slots(run_dir)
    out = {}
    for name, table in got["tables"].items():
        if not name.startswith("sw1/"):
            continue                              # sw1: the bottleneck's egress, the data direction
        for f in table.values():
            port = f["flow"][4]
            if port not in PORTS or min(len(f["in"]), len(f["out"])) < 100:
                continue                          # iperf3's control connections
            first = min(f["in"][0][0], f["out"][0][0])
            n = max(f["in"][-1][0], f["out"][-1][0]) - first + 1
            (inseq, exact), (outseq, _) = per_slot(f["in"], first, n), per_slot(f["out"], first, n)
            cbiq, _ = slot_inputs(inseq, outseq, interpolate=sample < 1)
            frames = exact[1:] / FRAME_BYTES
            both = ~np.isnan(cbiq) & ~np.isnan(frames)
            err = np.abs(cbiq[both] / PAYLOAD_BYTES - frames[both])
            out[PORTS[port]] = {"slots_compared": int(both.sum()), "slots": int(n),
                                "queue_max_pkts": round(float(np.nanmax(frames)), 1),
                                "error_pkts_p50_p90_p99": [round(float(v), 2) for v in np.percentile(err, [50, 90, 99])]}
    return out


def table(record: dict) -> list[str]:
    rows = ["| sampling | flow | slots compared | error, packets: median | 90th pct | 99th pct |",
            "|---|---|---|---|---|---|"]
    for sample, flows in record["results"].items():
        for cca, r in flows.items():
            p50, p90, p99 = r["error_pkts_p50_p90_p99"]
            rows.append(f"| {float(sample):g} | {cca} | {r['slots_compared']} | {p50:.2f} | {p90:.2f} | {p99:.2f} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", metavar="RECORD")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--samples", type=float, nargs="+", default=[1.0, 0.25, 0.0625])
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.table:
        return print_table(args.table, table)
    results = {}
    for sample in args.samples:
        results[str(sample)] = one_run(sample, args.seconds)
        print(sample, json.dumps(results[str(sample)]), flush=True)
    if args.json_out:
        made = stamp()
        with open(args.json_out, "w") as f:
            json.dump({"seconds": args.seconds, "network": "dumbbell 10 Mbit/s, 10 ms, 4 BDP; kernel bbr beside cubic",
                       "results": results, "provenance": made}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
