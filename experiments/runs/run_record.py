"""What a run leaves: its record (the metrics of its flows, their D and Jain, the adaptive
agent's switches and verdicts), series.csv, iperf3.json and plot; and the scenario's
summary.json, rewritten after every batch."""
from __future__ import annotations

import csv
import json
import os
import statistics
from dataclasses import dataclass, field
from typing import Dict

from records import stamp

from experiments.reports.fairness import goodput_difference
from experiments.runs.metrics import (algorithm_spans, goodput_difference_parts, jain, slow_start_exit_s, switches,
                      time_to_plateau_s, verdict_scores)
from experiments.reports.plots import plot_series
from experiments.runs.algorithm import Algorithm
from experiments.runs.scenario import Scenario
from experiments.testbed.traffic import RunFailed, series

#: summary.json's layout: {"format": SUMMARY_FORMAT, "scenario": name, "provenance", "records": [...]}
#: (docs/experiments.md gives every field); format 1 was the bare list of records.
SUMMARY_FORMAT = 2


@dataclass
class FlowResult:
    """What a run's flows left: iperf3's output (and the competitor's), link and TCP counters."""
    iperf: dict
    competitor: dict                          # {"outs": [iperf3 output per competing flow]} or {"error": text}; {} without one
    extra: dict
    link_passed: int
    link_lost: int
    link_lost_configured: int
    sender_tcp: Dict[str, int] = field(default_factory=dict)


def merge_competitors(rows: list[dict], crows: list[list[dict]], windows: list[tuple[float, float]],
                      interval_s: float, seconds: float) -> int:
    """Each interval of flow 1's series (``rows``) gets the competitors' goodput together and
    Jain's index of the flows present: competitor k's series (``crows[k]``) runs over its
    window (start, duration: Algorithm.competitor_window_s) of flow 1's intervals; outside
    it the competitor is absent (it starts late, leaves, or is replaced), inside it a missing
    interval is unknown (Jain None). Returns the intervals before the first competitor."""
    spans = [(round(start_s / interval_s), round((start_s + length_s) / interval_s)
              if start_s + length_s < seconds else len(rows)) for start_s, length_s in windows]
    for i, r in enumerate(rows):
        present = [(c, lo) for c, (lo, hi) in zip(crows, spans) if lo <= i < hi]
        if not present:
            r["competitor_goodput_mbps"], r["jain"] = 0.0, None
            continue
        theirs_now = [c[i - lo]["goodput_mbps"] if i - lo < len(c) else None for c, lo in present]
        known = [x for x in theirs_now if x is not None]
        r["competitor_goodput_mbps"] = sum(known) if known else None
        r["jain"] = jain([r["goodput_mbps"]] + theirs_now) if None not in theirs_now else None
    return min((lo for lo, _ in spans), default=0)


def record(alg: Algorithm, sc: Scenario, run_dir: str, res: FlowResult) -> dict:
    """A run's record, series.csv, iperf3.json and plot from what _flow gathered."""
    out, comp, extra = res.iperf, res.competitor, dict(res.extra)
    rows = series(out)
    if alg.competitor:
        if "error" in comp or len(comp.get("outs", [])) != alg.competitors:
            raise RunFailed(f"competitor flow failed: {comp.get('error')}")
        crows = [series(o) for o in comp["outs"]]
        windows = [alg.competitor_window_s(k, sc.seconds) for k in range(len(crows))]
        late = merge_competitors(rows, crows, windows, sc.interval_s, sc.seconds)
        if alg.competitor_replaced_after_s or alg.competitor_leaves_after_s:
            extra["competitor_windows_s"] = [[round(a, 3), round(b, 3)] for a, b in windows]
        warm = [r["jain"] for r in rows if r["t_s"] > 0.2 * sc.seconds and r.get("jain") is not None]
        each = [o["end"]["sum_received"]["bits_per_second"] / 1e6 for o in comp["outs"]]
        extra |= {"competitor": alg.competitor, "competitors": alg.competitors,
                  "competitor_goodput_mbps": sum(each),          # all competing flows together
                  "competitors_goodput_mbps": each,
                  "jain_mean": statistics.mean(warm) if warm else None,
                  "jain_min": min(warm) if warm else None}
        mine = out["end"]["sum_received"]["bits_per_second"] / 1e6
        if late:        # flow 1's goodput while the competitors ran
            while_both = [r["goodput_mbps"] for r in rows[late:] if r["goodput_mbps"] is not None]
            mine = statistics.mean(while_both) if while_both else 0.0
            extra["goodput_mbps_with_competitors"] = mine
        extra["jain_total"] = jain([mine] + each)
        extra["share"] = mine / (mine + sum(each)) if mine + sum(each) > 0 else None     # of all flows' goodput
        if len(each) == 1:              # the ML-fairness paper's goodput difference (Eq. 3) of the pair
            d = goodput_difference(mine, each[0])
            extra["goodput_difference"] = d
            extra["abs_goodput_difference"] = abs(d) if d is not None else None
    if alg.ccp == "adaptive":
        trace_csv = os.path.join(run_dir, "trace.csv")
        extra |= switches(trace_csv, alg.initial) or {}
        if alg.competitor:
            extra["verdicts"] = verdict_scores(trace_csv, alg.competitor, alg.initial)
            spans = algorithm_spans(trace_csv, alg.initial, sc.seconds)
            if spans:
                extra["goodput_difference_parts"] = goodput_difference_parts(
                    rows, spans, alg.competitor, sc.interval_s, alg.competitor_delay_s)
    with open(os.path.join(run_dir, "series.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]) if rows else ["t_s"])
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(run_dir, "iperf3.json"), "w") as f:
        json.dump(out, f)
    plot_series(rows, f"{alg.label}", os.path.join(run_dir, "series.png"))
    passed, lost, lost_configured = res.link_passed, res.link_lost, res.link_lost_configured
    return {"goodput_mbps": out["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": out["end"]["sum_sent"].get("retransmits", 0),
            "seconds": sc.seconds, "link_packets": passed + lost,
            "measured_link_loss_pct": 100 * lost / max(passed + lost, 1),
            "measured_configured_loss_pct": 100 * lost_configured / max(passed + lost, 1),
            "mss": out["start"].get("tcp_mss_default"),
            "slow_start_exit_s": slow_start_exit_s(os.path.join(run_dir, "trace.csv")),
            "plateau_s": time_to_plateau_s(rows),
            "sender_tcp": res.sender_tcp, **extra}


def write_summary(out_dir: str, scenario: str, records: list[dict], provenance: dict | None = None) -> None:
    """OUT/summary.json, format SUMMARY_FORMAT (written whole, then renamed into place),
    with its provenance (date, commit, command: the run's start, else now)."""
    path = os.path.join(out_dir, "summary.json")
    with open(path + ".part", "w") as f:
        json.dump({"format": SUMMARY_FORMAT, "scenario": scenario, "provenance": provenance or stamp(),
                   "records": records}, f, indent=1)
    os.replace(path + ".part", path)
