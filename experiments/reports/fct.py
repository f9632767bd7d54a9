"""Flow completion times of a replayed trace, one FIFO against RTT separation
(``intcc exp fct``): every transfer of the trace ran both ways, same CCA, so they pair by
flow. Per CCA: the mean FCT each way and its change with a bootstrap 95 % interval (flows
resampled in pairs), the median and 90th percentile, and the change per RTT quartile (the
testbed's four pairs): the paper's Test 4 reports the mean over long flows (-20 %)."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from experiments.reports.compare import ratio_ci


class FctReportError(ValueError):
    pass


def pairs(summaries: list[dict]) -> dict:
    """{(cca, K): [(FIFO row, separated row) per flow finished both ways]} over the summaries
    (each one trace's replays)."""
    by = defaultdict(dict)           # (trace id, cca) -> {K: {flow: row}}
    for s in summaries:
        if s.get("kind") != "fct_replay":
            raise FctReportError("not an 'intcc exp replay' summary (kind fct_replay)")
        trace = s.get("trace", {}).get("id", "")
        for rec in s["records"]:
            by[(trace, rec["cca"])][rec["separation"]] = {r["flow"]: r for r in rec["flows"]}
    out = defaultdict(list)
    for (trace, cca), ways in by.items():
        if 0 not in ways or len(ways) < 2:
            continue
        for k, sep in ways.items():
            if k == 0:
                continue
            out[(cca, k)] += [(ways[0][f], sep[f]) for f in sorted(set(ways[0]) & set(sep))]
    if not out:
        raise FctReportError("no trace in RESULTS was replayed both through one FIFO (separation 0) and "
                             "separated: run 'intcc exp replay TRACE --separation 0 --separation 4'")
    return dict(out)


def _change(fifo: list, sep: list) -> dict:
    ratio, low, high = ratio_ci(sep, fifo, paired=True)
    return {"flows": len(fifo), "fifo_mean_s": float(np.mean(fifo)), "separated_mean_s": float(np.mean(sep)),
            "change_pct": 100 * (ratio - 1), "change_ci_pct": [100 * (low - 1), 100 * (high - 1)]}


def rows(summaries: list[dict]) -> list[dict]:
    out = []
    for (cca, k), got in sorted(pairs(summaries).items()):
        fifo = [a["fct_s"] for a, _ in got]
        sep = [b["fct_s"] for _, b in got]
        row = {"cca": cca, "queues": k, **_change(fifo, sep),
               "fifo_median_s": float(np.median(fifo)), "separated_median_s": float(np.median(sep)),
               "fifo_p90_s": float(np.percentile(fifo, 90)), "separated_p90_s": float(np.percentile(sep, 90)),
               "faster": sum(b["fct_s"] < a["fct_s"] for a, b in got), "by_pair": []}
        for pair in sorted({a["pair"] for a, _ in got}):
            mine = [(a, b) for a, b in got if a["pair"] == pair]
            if len(mine) >= 2:
                rtts = [a["pair_rtt_ms"] for a, _ in mine]     # pooled traces: each its own quartiles
                row["by_pair"].append({"pair": pair, "rtt_ms": [min(rtts), max(rtts)],
                                       **_change([a["fct_s"] for a, _ in mine], [b["fct_s"] for _, b in mine])})
        out.append(row)
    return out


def failed(summaries: list[dict]) -> dict:
    """{(cca, K): transfers that did not finish} (they are in no pair)."""
    n = defaultdict(int)
    for s in summaries:
        for rec in s["records"]:
            n[(rec["cca"], rec["separation"])] += len(rec.get("failed", []))
    return dict(n)


def _rtt(span: list) -> str:
    low, high = span
    return f"{low:.1f} ms" if low == high else f"{low:.1f}–{high:.1f} ms"


def format_rows(table: list[dict]) -> str:
    lines = [f"{'CCA':8s} {'K':>2s} {'flows':>5s}  {'mean FCT FIFO -> sep':>22s}  {'change (95 % CI)':>24s}  "
             f"{'median':>15s}  {'p90':>15s}  faster"]
    for r in table:
        lo, hi = r["change_ci_pct"]
        lines.append(f"{r['cca']:8s} {r['queues']:2d} {r['flows']:5d}  {r['fifo_mean_s']:9.2f} -> {r['separated_mean_s']:6.2f} s  "
                     f"{r['change_pct']:+7.1f} % ({lo:+6.1f}..{hi:+6.1f})  "
                     f"{r['fifo_median_s']:6.2f} -> {r['separated_median_s']:5.2f}  "
                     f"{r['fifo_p90_s']:6.2f} -> {r['separated_p90_s']:5.2f}  {r['faster']}/{r['flows']}")
        for p in r["by_pair"]:
            lo, hi = p["change_ci_pct"]
            lines.append(f"{'':11s}RTT {_rtt(p['rtt_ms']):>13s}: {p['flows']:3d} flows  {p['fifo_mean_s']:6.2f} -> "
                         f"{p['separated_mean_s']:6.2f} s  {p['change_pct']:+7.1f} % ({lo:+6.1f}..{hi:+6.1f})")
    return "\n".join(lines)


def format_markdown(table: list[dict]) -> str:
    lines = ["| CCA | queues | transfers | mean FCT, FIFO | mean FCT, separated | change (95 % CI) | "
             "p90, FIFO → separated | faster separated |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table:
        lo, hi = r["change_ci_pct"]
        lines.append(f"| {r['cca']} | {r['queues']} | {r['flows']} | {r['fifo_mean_s']:.2f} s | "
                     f"{r['separated_mean_s']:.2f} s | {r['change_pct']:+.1f} % ({lo:+.1f}..{hi:+.1f}) | "
                     f"{r['fifo_p90_s']:.2f} → {r['separated_p90_s']:.2f} s | {r['faster']} of {r['flows']} |")
    return "\n".join(lines)


def format_pair_markdown(table: list[dict]) -> str:
    lines = ["| CCA | host pair's RTT | transfers | mean FCT, FIFO | mean FCT, separated | change (95 % CI) |",
             "|---|---|---|---|---|---|"]
    for r in table:
        for p in r["by_pair"]:
            lo, hi = p["change_ci_pct"]
            lines.append(f"| {r['cca']} | {_rtt(p['rtt_ms'])} | {p['flows']} | {p['fifo_mean_s']:.2f} s | "
                         f"{p['separated_mean_s']:.2f} s | {p['change_pct']:+.1f} % ({lo:+.1f}..{hi:+.1f}) |")
    return "\n".join(lines)


def plot(summaries: list[dict], path: str) -> None:
    """The FCT CDF each way, per CCA (the paper's Fig. 8)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    got = pairs(summaries)
    fig, axes = plt.subplots(1, len(got), figsize=(5 * len(got), 3.6), squeeze=False)
    for ax, ((cca, k), flows) in zip(axes[0], sorted(got.items())):
        for label, values in (("one FIFO", [a["fct_s"] for a, _ in flows]),
                              (f"separated, {k} queues", [b["fct_s"] for _, b in flows])):
            v = np.sort(values)
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("flow completion time (s)")
        ax.set_ylabel("CDF of transfers")
        ax.set_title(f"{cca}: {len(flows)} transfers")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
