"""Replay a long-flow trace (experiments/runs/flow_trace.py) on the four-pair dumbbell and
measure each transfer's flow completion time (FCT), once through one FIFO and once with RTT
separation at the bottleneck: the RTT-separation paper's Test 4.

Each of dumbbell4's four sender-receiver pairs carries the trace's flows of one RTT quartile,
at that quartile's geometric-mean RTT; every flow is one iperf3 transfer of its bytes (-n),
started at its time from the trace's start, on a port of its own (FIRST_PORT + flow). The
FCT is the receiver's, to the transfer's last byte, as iperf3's server measures it (its
clock may start after the first window arrived: UNTIMED_FIRST_BYTES). Writes OUT/summary.json:

    {"format": 1, "kind": "fct_replay", "trace": {...}, "provenance": {...},
     "records": [{"cca", "separation", "flows": [{"flow", "start_s", "size_bytes", "rtt_ms",
                  "pair", "pair_rtt_ms", "fct_s", "goodput_mbps", "retransmits"}],
                  "failed": [{"flow", "error"}], "separation_state": {...}}]}

and OUT/runs/<cca>-sep<K>/separation.json (what the node did, as a scenario run's).
"""
from __future__ import annotations

import json
import os
import threading
import time

from experiments.runs.flow_trace import TraceFlow, path_rtts
from experiments.runs.scenario import TOPOLOGIES
from experiments.runs.separation_record import SeparationRecorder
from experiments.testbed.bed import Testbed
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import RunFailed, iperf
from records import stamp

TOPOLOGY = "dumbbell4"
PAIRS = 4
FIRST_PORT = 6000
BOTTLENECK_DELAY_MS = 0.5
#: a transfer still running this long after its start is given up (counted in "failed")
MAX_FCT_S = 300.0
FORMAT = 1


def pair_delays_ms(pair_rtts_ms: list[float]) -> dict:
    """dumbbell4's access delays giving pair k the round trip pair_rtts_ms[k - 1]: its RTT is
    2 x (bottleneck_delay_ms + 2 x delay_ms_k)."""
    return {f"delay_ms_{k + 1}": round(max(0.0, (rtt / 2 - BOTTLENECK_DELAY_MS) / 2), 3)
            for k, rtt in enumerate(pair_rtts_ms)}


#: iperf3's receiver starts its clock when its test starts, which can be after the first
#: window of data arrived: up to this much of a transfer may go untimed (the same in every
#: setting, so paired differences keep it out; a transfer of MBs barely sees it)
UNTIMED_FIRST_BYTES = 64_000


def fct_of(out: dict) -> tuple[float, float]:
    """(FCT in seconds, goodput in Mbit/s) of one iperf3 -n transfer, as its receiver saw it:
    from its test's start (UNTIMED_FIRST_BYTES) to the last byte."""
    received = out.get("server_output_json", {}).get("end", {}).get("sum_received") \
        or out["end"]["sum_received"]
    seconds = received["seconds"]
    return seconds, received["bytes"] * 8 / seconds / 1e6 if seconds > 0 else 0.0


def replay(flows: list[TraceFlow], cca: str, separation: int, run_dir: str, bottleneck_mbps: float = 10.0,
           buffer_bdp: float = 1.0, echo=print, testbed_name: str = "fct") -> dict:
    """One replay of the trace; returns its record."""
    os.makedirs(run_dir, exist_ok=True)
    rtts, pair = path_rtts(flows, PAIRS)
    params = {"bottleneck_mbps": bottleneck_mbps, "bottleneck_delay_ms": BOTTLENECK_DELAY_MS,
              "buffer_bdp": buffer_bdp, "separation": separation, **pair_delays_ms(rtts)}
    results: dict = {}
    failed: list = []
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def transfer(tb, f: TraceFlow, k: int, t0: float):
        time.sleep(max(0.0, t0 + f.start_s - time.monotonic()))
        try:
            out = iperf(tb, f"s{k}", f"r{k}", cca, MAX_FCT_S, 1.0, port=FIRST_PORT + f.flow, size_bytes=f.size_bytes)
            fct_s, goodput = fct_of(out)
            row = {"flow": f.flow, "start_s": f.start_s, "size_bytes": f.size_bytes, "rtt_ms": f.rtt_ms,
                   "pair": k, "pair_rtt_ms": rtts[k - 1], "fct_s": round(fct_s, 4), "goodput_mbps": round(goodput, 4),
                   "retransmits": out["end"].get("sum_sent", {}).get("retransmits")}
            with lock:
                results[f.flow] = row
        except (RunFailed, KeyError, OSError) as e:
            with lock:
                failed.append({"flow": f.flow, "error": str(e)[:300]})
        finally:
            done.release()

    topo = load_topo(os.path.join(TOPOLOGIES, f"{TOPOLOGY}.toml"), params)
    with Testbed(topo, testbed_name).up(exporter="none") as tb:
        ports = [FIRST_PORT + f.flow for f in flows]
        with SeparationRecorder(tb, run_dir, ports) as recorder:
            t0 = time.monotonic()
            threads = [threading.Thread(target=transfer, args=(tb, f, pair[i] + 1, t0), daemon=True,
                                        name=f"fct-{f.flow}") for i, f in enumerate(flows)]
            for th in threads:
                th.start()
            for n in range(1, len(flows) + 1):
                done.acquire()
                if n % max(1, len(flows) // 10) == 0 or n == len(flows):
                    echo(f"  {cca} separation {separation}: {n}/{len(flows)} transfers done "
                         f"({len(failed)} failed), {time.monotonic() - t0:.0f} s")
            for th in threads:
                th.join()
        state = recorder.summary()
    return {"cca": cca, "separation": separation, "pair_rtts_ms": rtts, "params": params,
            "flows": [results[f.flow] for f in flows if f.flow in results],
            "failed": sorted(failed, key=lambda r: r["flow"]), "separation_state": state}


def run(flows: list[TraceFlow], trace_info: dict, out_dir: str, ccas: list[str], separations: list[int],
        command: str, echo=print, **kw) -> dict:
    """Every CCA through every separation setting, one after the other; writes and returns
    the summary (written again after each replay: a stopped run keeps what it finished)."""
    summary = {"format": FORMAT, "kind": "fct_replay", "trace": trace_info, "provenance": stamp(command),
               "records": []}
    os.makedirs(out_dir, exist_ok=True)
    for cca in ccas:
        for k in separations:
            echo(f"{cca}, separation {k}: {len(flows)} transfers ...")
            rec = replay(flows, cca, k, os.path.join(out_dir, "runs", f"{cca}-sep{k}"), echo=echo, **kw)
            summary["records"].append(rec)
            with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
    return summary
