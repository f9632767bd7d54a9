"""What a fairness scenario (a [sweep] over the competitor's CCA: fairness_switching)
shows, computed (its tables are written by fairness_tables.py, its plots drawn by
fairness_plots.py): per competitor and mode, the goodput difference D and |D| (the ML-fairness paper Eq. 3) with a
bootstrap 95 % CI, the harm to the competitor against the oracle of the same repeat,
Jain's index, and the switches; and the paper's plots (Fig. 6: D per competitor and
mode, Fig. 7: mean |D|), plus a timeline per adaptive run (both flows' goodput, flow 1's
algorithm as a coloured band).

    intcc exp fairness DIR [DIR ...]

Given the pair runs of fairness_pairs as well (flow 1 on each CCA i against each j, on the
same networks: same seed and repeat), it computes the paper's offline figure beside each
live one: Eqs. 1-2 weigh g1(i, j), g2(i, j) of the run's network by the time the live run's
flow 1 spent on each CCA i (from its trace; the whole run on its CCA for a kernel flow 1),
and Eq. 3 gives D. Networks whose pairs are incomplete are left out of that column.
"""
from __future__ import annotations

import csv
import json
import os
import statistics

import numpy as np

from records import bootstrap

from experiments.reports.fairness import goodput_difference, harm, switched_goodputs
from experiments.runs.metrics import DIFFERENCE_PARTS as PARTS, algorithm_spans, goodput_difference_parts

PAIR_PREFIX = "pair: "          # fairness_pairs.toml's labels: "pair: <flow 1's CCA>"

ORACLE = "oracle"


def _ci(values, resamples: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95 % interval of the mean (the value itself for one run)."""
    return bootstrap.mean_interval(values, resamples, seed)


def _network(r: dict) -> tuple:
    """Runs on the same network and start: same seed, repeat, drawn parameters and the
    competitor's delay (whichever run or results directory they came from: modes of one
    seed run apart pair up; a late mode with the late baselines)."""
    return r.get("seed"), r["repeat"], json.dumps(r.get("params"), sort_keys=True), r.get("competitor_delay_s", 0)


#: a baseline's label for a late start ("not used late", "oracle late")
LATE_SUFFIX = " late"


def _is(mode: str, baseline: str) -> bool:
    """``mode`` is ``baseline`` (``not used``, ``oracle``), of either start."""
    return mode in (baseline, baseline + LATE_SUFFIX)


def offline_d(records: list[dict], out_dir_of=None) -> dict[int, float]:
    """{index of a live record: the paper method's D for it} (Eqs. 1-3), from the pair
    records of the same network and the live run's time shares. ``out_dir_of(record)``:
    the results directory a record came from (its trace is under runs/<run>/trace.csv; without
    it, the record's ``time_on``)."""
    from experiments.reports.fairness import CCAS, time_shares
    pairs: dict = {}
    for r in records:
        if r["algorithm"].startswith(PAIR_PREFIX) and r.get("competitor"):
            i = r["algorithm"][len(PAIR_PREFIX):]
            pairs.setdefault(_network(r), {})[(i, r["competitor"])] = (r["goodput_mbps"], r["competitor_goodput_mbps"])
    out = {}
    for k, r in enumerate(records):
        table = pairs.get(_network(r))
        if table is None or r["algorithm"].startswith(PAIR_PREFIX) or not r.get("competitor"):
            continue
        span = float(r.get("seconds") or 0)
        if "switches" in r:
            trace = os.path.join(out_dir_of(r), "runs", r["run"], "trace.csv") if out_dir_of else None
            spans = algorithm_spans(trace, "cubic", span) if trace and os.path.exists(trace) else []
            shares = dict.fromkeys(CCAS, 0.0)
            for lo, hi, alg in spans:
                shares[alg] = shares.get(alg, 0.0) + max(0.0, min(hi, span) - lo)
            if not spans:       # the run directory is gone (a shipped record): its time on each CCA
                if not r.get("time_on"):
                    continue
                shares.update(r["time_on"])
            total = sum(shares.values())
            shares = {a: v / total for a, v in shares.items()} if total > 0 else {}
        else:
            shares = time_shares([], [], r.get("flow1"), span) if r.get("flow1") in CCAS else {}
        try:
            g1, g2 = switched_goodputs(shares, {k2: v[0] for k2, v in table.items()},
                                       {k2: v[1] for k2, v in table.items()}, r["competitor"])
        except KeyError:
            continue
        d = goodput_difference(g1, g2)
        if d is not None:
            out[k] = d
    return out


def goodput_table(records: list[dict]) -> dict:
    """The best-response table (ccp_agent/switching.py GoodputTable's JSON) from the pair
    runs: each pair's mean goodputs over the networks it ran on, and its mean |D| over them."""
    by_pair: dict = {}
    for r in records:
        if r["algorithm"].startswith(PAIR_PREFIX) and r.get("competitor"):
            by_pair.setdefault((r["algorithm"][len(PAIR_PREFIX):], r["competitor"]), []).append(r)
    return {"goodput_mbps": [
        {"local": i, "competitor": j, "local_mbps": round(statistics.mean(x["goodput_mbps"] for x in runs), 4),
         "competitor_mbps": round(statistics.mean(x["competitor_goodput_mbps"] for x in runs), 4),
         "mean_abs_d": round(statistics.mean(abs(goodput_difference(x["goodput_mbps"], x["competitor_goodput_mbps"]) or 0.0)
                                             for x in runs), 4),
         "networks": len(runs)}
        for (i, j), runs in sorted(by_pair.items())]}


def rows(records: list[dict], offline: dict[int, float] | None = None) -> list[dict]:
    """One row per (competitor, mode): runs, mean D, mean |D| and its CI, harm against the
    oracle (competitor goodput beside the mode over beside the oracle, pooled over the
    repeats both ran), Jain mean, the share of the time flow 1 ran the competitor's CCA,
    median time to the first switch, mean switches."""
    out = []
    offline = offline or {}
    index = {id(r): k for k, r in enumerate(records)}
    records = [r for r in records if not r["algorithm"].startswith(PAIR_PREFIX)]
    competitors = list(dict.fromkeys(r["competitor"] for r in records if r.get("competitor")))
    modes = list(dict.fromkeys(r["algorithm"] for r in records))
    for comp in competitors:
        mine = [r for r in records if r.get("competitor") == comp]
        oracle = {_network(r): r for r in mine if _is(r["algorithm"], ORACLE)}
        for mode in modes:
            runs = [r for r in mine if r["algorithm"] == mode and r.get("goodput_difference") is not None]
            if not runs:
                continue
            d = [r["goodput_difference"] for r in runs]
            abs_d = [abs(x) for x in d]
            paired = [(r, oracle[_network(r)]) for r in runs if _network(r) in oracle]
            h = (harm(sum(r["competitor_goodput_mbps"] for r, _ in paired),
                      sum(o["competitor_goodput_mbps"] for _, o in paired)) if paired else None)
            # per network too: a pooled harm near 0 can hide large harms of either sign
            per_net = [x for x in (harm(r["competitor_goodput_mbps"], o["competitor_goodput_mbps"])
                                   for r, o in paired) if x is not None]
            firsts = [r["first_switch_s"] for r in runs if r.get("first_switch_s") is not None]
            jains = [r["jain_mean"] for r in runs if r.get("jain_mean") is not None]
            queue = [r["queue_delay_ms_mean"] for r in runs if r.get("queue_delay_ms_mean") is not None]
            paper = [abs(offline[index[id(r)]]) for r in runs if index[id(r)] in offline]
            on_comp = [r["time_on"].get(comp, 0.0) if "time_on" in r else float(r["flow1"] == comp)
                       for r in runs if "time_on" in r or "switches" not in r and r.get("flow1")]
            out.append({"competitor": comp, "mode": mode, "runs": len(runs), "mean_d": statistics.mean(d),
                        "mean_abs_d": statistics.mean(abs_d), "abs_d_ci": _ci(abs_d),
                        "paper_mean_abs_d": statistics.mean(paper) if paper else None,
                        "paper_abs_d_ci": _ci(paper) if paper else None, "paper_runs": len(paper),
                        "harm": h, "harm_pairs": len(paired),
                        "harm_network_mean": statistics.mean(per_net) if per_net else None,
                        "harm_network_abs_mean": statistics.mean(map(abs, per_net)) if per_net else None,
                        "harm_networks": per_net,
                        "jain_mean": statistics.mean(jains) if jains else None,
                        "queue_delay_ms": statistics.mean(queue) if queue else None,
                        "time_on_competitors_cca": statistics.mean(on_comp) if on_comp else None,
                        "median_first_switch_s": statistics.median(firsts) if firsts else None,
                        "switched_runs": len(firsts),
                        "mean_switches": (statistics.mean(r.get("switches", 0) for r in runs)
                                          if any("switches" in r for r in runs) else None)})
    return out


NOT_USED = "not used"


def _paired(records: list[dict], comp: str, mode: str, other: str) -> tuple[np.ndarray, np.ndarray]:
    """|D| of ``mode`` and ``other`` on the same networks (repeats) against ``comp``."""
    def by_net(runs):
        return {_network(r): abs(r["goodput_difference"]) for r in runs
                if r.get("competitor") == comp and r.get("goodput_difference") is not None}
    a, b = by_net(r for r in records if r["algorithm"] == mode), by_net(r for r in records if _is(r["algorithm"], other))
    common = sorted(set(a) & set(b), key=str)
    return np.array([a[k] for k in common]), np.array([b[k] for k in common])


def comparisons(records: list[dict], resamples: int = 4000, seed: int = 0, versus: tuple = ()) -> list[dict]:
    """Per competitor and mode, paired by network (the ML-fairness paper's figures):
    the cut in mean |D| against ``not used``, 1 - mean|D|(mode) / mean|D|(not used), and
    the gap to the oracle, mean|D|(mode) - mean|D|(oracle), each with a paired bootstrap
    95 % CI; a row "all" averages the competitors' cuts (each resampled on its own). For
    each mode V of ``versus`` also every other mode's gap to V alike (``gap_to``: V ->
    gap, its CI and networks), averaged over the competitors in the row "all"."""
    rng = np.random.default_rng(seed)

    def boot(a, b, stat):
        """stat(a, b) and its paired bootstrap draws (resampling networks)."""
        return float(stat(a, b)), bootstrap.draws(stat, [a, b], resamples, rng)

    def cut(a, b):
        return 1 - a.mean(axis=-1) / np.maximum(b.mean(axis=-1), 1e-12)

    def gap(a, b):
        return a.mean(axis=-1) - b.mean(axis=-1)

    records = [r for r in records if not r["algorithm"].startswith(PAIR_PREFIX)]
    competitors = list(dict.fromkeys(r["competitor"] for r in records if r.get("competitor")))
    modes = [m for m in dict.fromkeys(r["algorithm"] for r in records) if not _is(m, NOT_USED)]
    labels = list(dict.fromkeys(r["algorithm"] for r in records))
    missing = [v for v in versus if v not in labels]
    if missing:
        raise ValueError(f"no runs of {', '.join(map(repr, missing))}; modes: {', '.join(labels)}")
    out, cut_draws, gap_draws = [], {}, {}
    for mode in modes:
        for comp in competitors:
            row = {"competitor": comp, "mode": mode}
            for other in versus:
                a, v = _paired(records, comp, mode, other) if mode != other else (np.array([]), None)
                if a.size:
                    value, draws = boot(a, v, gap)
                    gap_draws.setdefault((mode, other), []).append(draws)
                    row.setdefault("gap_to", {})[other] = {"gap": value, "ci": bootstrap.interval(draws),
                                                           "networks": int(a.size)}
            a, b = _paired(records, comp, mode, NOT_USED)
            if a.size and b.mean() > 0:
                value, draws = boot(a, b, cut)
                cut_draws.setdefault(mode, []).append(draws)
                row.update(cut_vs_not_used=value, cut_ci=bootstrap.interval(draws),
                           cut_networks=int(a.size))
            a, o = _paired(records, comp, mode, ORACLE) if not _is(mode, ORACLE) else (np.array([]), None)
            if a.size:
                value, draws = boot(a, o, gap)
                row.update(gap_to_oracle=value, gap_ci=bootstrap.interval(draws),
                           gap_networks=int(a.size))
            if len(row) > 2:
                out.append(row)
        if len(cut_draws.get(mode, [])) == len(competitors) > 1:
            cuts = [r["cut_vs_not_used"] for r in out if r["mode"] == mode and "cut_vs_not_used" in r]
            out.append({"competitor": "all", "mode": mode, "cut_vs_not_used": float(np.mean(cuts)),
                        "cut_ci": bootstrap.interval(np.mean(cut_draws[mode], axis=0))})
        for other in versus:
            draws = gap_draws.get((mode, other), [])
            if len(draws) == len(competitors) > 1:
                gaps = [r["gap_to"][other]["gap"] for r in out if r["mode"] == mode and other in r.get("gap_to", {})]
                row = next((r for r in out if r["mode"] == mode and r["competitor"] == "all"), None)
                if row is None:
                    row = {"competitor": "all", "mode": mode}
                    out.append(row)
                networks = sum(r["gap_to"][other]["networks"] for r in out
                               if r["mode"] == mode and other in r.get("gap_to", {}))
                row.setdefault("gap_to", {})[other] = {"gap": float(np.mean(gaps)), "networks": networks,
                                                       "ci": bootstrap.interval(np.mean(draws, axis=0))}
    return out


def verdict_table(records: list[dict]) -> list[dict]:
    """The estimator's live verdicts, pooled over the runs of each adaptive mode (their
    records' ``verdicts``, experiments/metrics.verdict_scores): accuracy by whether flow 1
    had switched yet, whether it was then on the competitor's CCA, and the seconds since
    its last switch (or start); the majority vote's per competitor beside."""
    cells: dict = {}
    for r in records:
        for c in (r.get("verdicts") or {}).get("cells", []):
            key = (r["algorithm"], c["after"], "its CCA" if c["on"] == r["competitor"] else "other",
                   c["since_s"])
            t = cells.setdefault(key, {"rows": 0, "row_rows": 0, "row_right": 0, "vote_right": 0, "by": {}})
            t["rows"] += c["rows"]
            t["vote_right"] += c["vote_right"]
            if c.get("row_right") is not None:
                t["row_rows"] += c["rows"]
                t["row_right"] += c["row_right"]
            b = t["by"].setdefault(r["competitor"], [0, 0])
            b[0] += c["rows"]
            b[1] += c["vote_right"]

    def since_order(label: str) -> float:
        return float(label.split("-")[0].rstrip("+"))
    out = []
    for (mode, after, on, since), t in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] == "switch",
                                                                              kv[0][2], since_order(kv[0][3]))):
        out.append({"mode": mode, "after": after, "on": on, "since_s": since, "rows": t["rows"],
                    "row_accuracy": t["row_right"] / t["row_rows"] if t["row_rows"] else None,
                    "vote_accuracy": t["vote_right"] / t["rows"],
                    "vote_accuracy_by_competitor": {k: v[1] / v[0] for k, v in sorted(t["by"].items())}})
    return out


def fill_parts(records: list[dict], out_dir_of) -> int:
    """Give adaptive records written before runs carried ``goodput_difference_parts`` their
    parts, from the run's series.csv and trace.csv where its directory is still there
    (``out_dir_of(record)``: its results directory). How many were filled."""
    filled = 0
    for r in records:
        if "switches" not in r or r.get("goodput_difference_parts") or not r.get("competitor"):
            continue
        run_dir = os.path.join(out_dir_of(r), "runs", r["run"])
        series_csv, trace_csv = os.path.join(run_dir, "series.csv"), os.path.join(run_dir, "trace.csv")
        if not (os.path.exists(series_csv) and os.path.exists(trace_csv)):
            continue
        with open(series_csv) as f:
            rows = [{k: float(v) if v not in ("", None) else None for k, v in x.items()} for x in csv.DictReader(f)]
        spans = algorithm_spans(trace_csv, "cubic", float(r.get("seconds") or 0) or None)
        if len(rows) < 2 or not spans:
            continue
        interval_s = statistics.median(b["t_s"] - a["t_s"] for a, b in zip(rows, rows[1:]))
        parts = goodput_difference_parts(rows, spans, r["competitor"], interval_s, r.get("competitor_delay_s", 0))
        if parts:
            r["goodput_difference_parts"] = parts
            filled += 1
    return filled


def parts_table(records: list[dict]) -> list[dict]:
    """Where each adaptive mode's D comes from, per competitor: the mean of each part of D
    (experiments/metrics.goodput_difference_parts: before flow 1's first switch, after it on
    the competitor's CCA, after it on another; the parts of a run add up to its D) and
    the mean seconds flow 1 spent in each. An oracle's D is all "right" and ~0: a mode's
    gap to it is the sum of its parts' departures from that."""
    groups: dict = {}
    for r in records:
        p = r.get("goodput_difference_parts")
        if p:
            groups.setdefault((r["competitor"], r["algorithm"]), []).append(p)
    out = []
    for (comp, mode), ps in groups.items():
        out.append({"competitor": comp, "mode": mode, "runs": len(ps),
                    "mean_d": statistics.mean(p["d"] for p in ps),
                    "mean_part": {k: statistics.mean(p["parts"][k] for p in ps) for k in PARTS},
                    "mean_abs_part": {k: statistics.mean(abs(p["parts"][k]) for p in ps) for k in PARTS},
                    "mean_seconds": {k: statistics.mean(p["seconds"][k] for p in ps) for k in PARTS}})
    return out
