"""Path reconfiguration (the reconfigurable-network paper, 004): a migrated flow (flow 1, moved
every period between a circuit of its own and the main flow's path) against the main flow
(flow 2, always on its path), per algorithm and reconfiguration setting: each flow's goodput,
the migrated flow's share while both run, and the time the migrated flow takes to deliver
its first S megabytes (the paper's FCT, whose flows are transfers of a size) against the
same repeat without reconfiguration (the prolongation), with bootstrap 95 % intervals over
repeats.

The scenario's runs last a fixed time; the FCT of S is read from the receiver's goodput
series (runs/*/series.csv), which the record keeps (``series``) so that the tables and
figures are rebuilt from the committed record alone."""
from __future__ import annotations

import csv
import json
import os
import statistics
from collections import defaultdict

import numpy as np

from int_node.elements.reconfig import setting_ms
from records import bootstrap

NONE = "none"
DEFAULT_FCT_MB = 10.0


class ReconfigReportError(ValueError):
    pass


def period_ms(value) -> float:
    """A reconfig setting's period in ms ("none": 0; "100ms/10ms": 100)."""
    return setting_ms(value)[0]


def downtime_ms(value) -> float:
    return setting_ms(value)[1]


def _series(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, "series.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))

    def num(x):
        return round(float(x), 3) if x not in ("", None) else None
    return {"t_s": [num(r["t_s"]) for r in rows], "migrated_mbps": [num(r["goodput_mbps"]) for r in rows],
            "static_mbps": [num(r.get("competitor_goodput_mbps")) for r in rows]}


def load(results: list[str]) -> list[dict]:
    """The records of RESULTS (directories of ``intcc exp run`` of a scenario with [sweep]
    reconfig, or records this module wrote), each with its goodput series."""
    out = []
    for res in results:
        path = os.path.join(res, "summary.json") if os.path.isdir(res) else res
        with open(path) as f:
            doc = json.load(f)
        for r in doc.get("records", []):
            if "reconfig" not in r or r.get("error"):
                continue
            if "series" not in r and os.path.isdir(res):
                r = dict(r, series=_series(os.path.join(res, "runs", r["run"])))
            out.append(r)
    if not out:
        raise ReconfigReportError(f"no runs with a reconfig setting in {', '.join(results)} "
                                  f"(a scenario with [sweep] reconfig, e.g. reconfiguration)")
    return out


def fct_s(series: dict | None, size_mb: float) -> float | None:
    """When the migrated flow's receiver had its first ``size_mb`` megabytes (10^6 bytes):
    seconds from the start; None where the run ended first or has no series."""
    if not series:
        return None
    got_mb, last_t = 0.0, 0.0
    for t, g in zip(series["t_s"], series["migrated_mbps"]):
        dt = t - last_t
        step = (g or 0.0) * dt / 8
        if got_mb + step >= size_mb and step > 0:
            return last_t + dt * (size_mb - got_mb) / step
        got_mb, last_t = got_mb + step, t
    return None


def _ci(values, seed: int = 0) -> tuple[float, float, float] | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    lo, hi = bootstrap.mean_interval(np.array(values, float), seed=seed) if len(values) > 1 else (values[0], values[0])
    return statistics.mean(values), lo, hi


def rows(records: list[dict], size_mb: float = DEFAULT_FCT_MB) -> list[dict]:
    """Per algorithm and setting (shortest period first, "none" first of all)."""
    by = defaultdict(list)
    for r in records:
        by[(r["algorithm"], r["reconfig"])].append(r)
    base = {(a, r["repeat"]): fct_s(r.get("series"), size_mb) for (a, v), rs in by.items() if v == NONE for r in rs}
    out = []
    algorithms = list(dict.fromkeys(r["algorithm"] for r in records))
    for alg in algorithms:
        settings = sorted({v for a, v in by if a == alg}, key=lambda v: (period_ms(v) != 0, period_ms(v), downtime_ms(v)))
        for v in settings:
            rs = by[(alg, v)]
            fcts = [fct_s(r.get("series"), size_mb) for r in rs]
            prolong = [100 * (f / base[(alg, r["repeat"])] - 1) for f, r in zip(fcts, rs)
                       if f is not None and base.get((alg, r["repeat"]))]
            out.append({"algorithm": alg, "reconfig": v, "period_ms": period_ms(v), "downtime_ms": downtime_ms(v),
                        "n": len(rs), "emulation_off": sum(bool(r.get("emulation_off")) for r in rs),
                        "migrated_mbps": _ci([r["goodput_mbps"] for r in rs]),
                        "static_mbps": _ci([r.get("competitor_goodput_mbps") for r in rs]),
                        "migrated_share": _ci([r.get("share") for r in rs]),
                        "fct_s": _ci(fcts), "fct_missing": sum(f is None for f in fcts),
                        "prolongation_pct": _ci(prolong) if v != NONE else None,
                        "retransmits": statistics.mean(r.get("retransmits", 0) for r in rs)})
    return out


def _fmt(ci, spec: str = "{:.2f}") -> str:
    if ci is None:
        return "–"
    mean, lo, hi = (spec.format(x).replace("-", "−") for x in ci)
    return f"{mean} ({lo} to {hi})"


def _setting(r: dict) -> str:
    return r["reconfig"]


def format_markdown(table: list[dict], size_mb: float = DEFAULT_FCT_MB) -> str:
    head = ["algorithm", "reconfiguration (period/downtime)", "n", "migrated flow Mbit/s", "main flow Mbit/s",
            "migrated share", f"migrated FCT of {size_mb:g} MB, s", "FCT prolongation %", "retransmits"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        lines.append("| " + " | ".join([
            r["algorithm"], _setting(r), str(r["n"]), _fmt(r["migrated_mbps"]), _fmt(r["static_mbps"]),
            _fmt(r["migrated_share"]), _fmt(r["fct_s"]) + (f" ({r['fct_missing']} not reached)" if r["fct_missing"] else ""),
            _fmt(r["prolongation_pct"], "{:+.0f}") if r["prolongation_pct"] else "–", f"{r['retransmits']:.0f}"]) + " |")
    return "\n".join(lines)


def paired(records: list[dict], baseline: str) -> list[dict]:
    """Each other algorithm against ``baseline`` per setting, paired by repeat (the same
    seed's runs): the migrated flow's goodput ratio, both algorithms' prolongation from
    goodput (100 (g_none / g - 1): a long transfer's FCT against its own run without
    reconfiguration; defined where the FCT of a size is censored by the run's end), their
    ratio, and the main flow's goodput beside the candidate minus beside the baseline
    (its harm, signed, and as an absolute value)."""
    by = {(r["algorithm"], r["reconfig"], r["repeat"]): r for r in records}
    algorithms = list(dict.fromkeys(r["algorithm"] for r in records))
    if baseline not in algorithms:
        raise ReconfigReportError(f"no runs of {baseline!r} to pair with (algorithms: {', '.join(algorithms)})")
    settings = sorted({r["reconfig"] for r in records}, key=lambda v: (period_ms(v) != 0, period_ms(v), downtime_ms(v)))
    repeats = sorted({r["repeat"] for r in records})

    def prolong(alg, v, k):
        r, none = by.get((alg, v, k)), by.get((alg, NONE, k))
        if not r or not none or not r["goodput_mbps"]:
            return None
        return 100 * (none["goodput_mbps"] / r["goodput_mbps"] - 1)
    out = []
    for cand in algorithms:
        if cand == baseline:
            continue
        for v in settings:
            pairs = [(by[(baseline, v, k)], by[(cand, v, k)]) for k in repeats
                     if (baseline, v, k) in by and (cand, v, k) in by]
            if not pairs:
                continue
            pb = [prolong(baseline, v, k) for k in repeats if (cand, v, k) in by and (baseline, v, k) in by]
            pc = [prolong(cand, v, k) for k in repeats if (cand, v, k) in by and (baseline, v, k) in by]
            harm = [c.get("competitor_goodput_mbps", 0) - b.get("competitor_goodput_mbps", 0) for b, c in pairs]
            out.append({"candidate": cand, "baseline": baseline, "reconfig": v, "n": len(pairs),
                        "baseline_mbps": _ci([b["goodput_mbps"] for b, _ in pairs]),
                        "candidate_mbps": _ci([c["goodput_mbps"] for _, c in pairs]),
                        "ratio": _ci([c["goodput_mbps"] / b["goodput_mbps"] for b, c in pairs if b["goodput_mbps"]]),
                        "baseline_prolongation_pct": _ci(pb) if v != NONE else None,
                        "candidate_prolongation_pct": _ci(pc) if v != NONE else None,
                        "prolongation_ratio": _ci([c / b for b, c in zip(pb, pc) if b and c is not None and b > 0])
                        if v != NONE else None,
                        "main_harm_mbps": _ci(harm), "main_abs_harm_mbps": _ci([abs(h) for h in harm]),
                        "main_harm_pct": _ci([100 * h / b["competitor_goodput_mbps"] for h, (b, _) in zip(harm, pairs)
                                              if b.get("competitor_goodput_mbps")])})
    return out


def format_paired_markdown(table: list[dict]) -> str:
    if not table:
        return "(no paired runs)"
    b = table[0]["baseline"]
    head = ["migrated flow", "reconfiguration (period/downtime)", "n", f"{b} Mbit/s", "migrated Mbit/s",
            f"ratio to {b}", f"prolongation % ({b})", "prolongation %", "prolongation ratio",
            "main flow Mbit/s beside it − beside " + b, "main flow, absolute difference", "main flow, relative %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        lines.append("| " + " | ".join([
            r["candidate"], r["reconfig"], str(r["n"]), _fmt(r["baseline_mbps"]), _fmt(r["candidate_mbps"]),
            _fmt(r["ratio"]), _fmt(r["baseline_prolongation_pct"], "{:+.0f}"),
            _fmt(r["candidate_prolongation_pct"], "{:+.0f}"), _fmt(r["prolongation_ratio"]),
            _fmt(r["main_harm_mbps"], "{:+.2f}"), _fmt(r["main_abs_harm_mbps"]),
            _fmt(r["main_harm_pct"], "{:+.1f}")]) + " |")
    return "\n".join(lines)


def record_with_series(results_dir: str, out_path: str) -> int:
    """The run's summary (its provenance: the run's date, commit and command) with each
    record's goodput series (runs/*/series.csv), written to ``out_path``: the record the
    docs' tables and figures are rebuilt from. Its run count."""
    with open(os.path.join(results_dir, "summary.json")) as f:
        doc = json.load(f)
    for r in doc["records"]:
        if "run" in r:
            r["series"] = _series(os.path.join(results_dir, "runs", r["run"]))
    with open(out_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    return len(doc["records"])


def plot(records: list[dict], path: str, size_mb: float = DEFAULT_FCT_MB) -> None:
    """Each flow's goodput against the period, one panel per algorithm (the paper's Fig. 4
    and 6 as one summary), and the migrated flow's FCT prolongation."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    table = rows(records, size_mb)
    algorithms = list(dict.fromkeys(r["algorithm"] for r in table))
    fig, axes = plt.subplots(2, len(algorithms), figsize=(4.2 * len(algorithms), 6.4), squeeze=False, sharex=True)
    for k, alg in enumerate(algorithms):
        mine = [r for r in table if r["algorithm"] == alg and r["period_ms"] and not r["downtime_ms"]]
        none = next((r for r in table if r["algorithm"] == alg and r["reconfig"] == NONE), None)
        ax = axes[0][k]
        x = [r["period_ms"] for r in mine]
        for key, label, style in (("migrated_mbps", "migrated flow", "-o"), ("static_mbps", "main flow", "--s")):
            y = [r[key][0] for r in mine]
            ax.plot(x, y, style, label=label)
            ax.fill_between(x, [r[key][1] for r in mine], [r[key][2] for r in mine], alpha=0.2)
            if none:
                ax.axhline(none[key][0], color=ax.lines[-1].get_color(), lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_title(alg)
        ax.set_ylabel("goodput Mbit/s")
        ax.legend(fontsize=8)
        ax = axes[1][k]
        pts = [(r["period_ms"], r["prolongation_pct"]) for r in mine if r["prolongation_pct"]]
        if pts:
            ax.errorbar([p for p, _ in pts], [c[0] for _, c in pts],
                        yerr=[[c[0] - c[1] for _, c in pts], [c[2] - c[0] for _, c in pts]], fmt="-o", capsize=3)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("reconfiguration period (ms)")
        ax.set_ylabel(f"FCT of {size_mb:g} MB: prolongation %")
    fig.suptitle("migrated and main flow against the reconfiguration period (dotted: no reconfiguration)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_series(records: list[dict], path: str, algorithm: str, settings: list[str] | None = None) -> None:
    """Goodput against time of the migrated and the main flow, mean over repeats, one panel
    per setting (the paper's Fig. 4 for one algorithm)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mine = [r for r in records if r["algorithm"] == algorithm and r.get("series")]
    if not mine:
        raise ReconfigReportError(f"no runs of '{algorithm}' with a goodput series")
    settings = settings or sorted({r["reconfig"] for r in mine}, key=lambda v: (period_ms(v) != 0, period_ms(v)))
    fig, axes = plt.subplots(len(settings), 1, figsize=(8, 1.8 * len(settings)), sharex=True, squeeze=False)
    for ax, v in zip(axes[:, 0], settings):
        runs = [r["series"] for r in mine if r["reconfig"] == v]
        n = min(len(s["t_s"]) for s in runs)
        t = runs[0]["t_s"][:n]
        for key, label in (("migrated_mbps", "migrated"), ("static_mbps", "main")):
            y = np.nanmean(np.array([[np.nan if x is None else x for x in s[key][:n]] for s in runs], float), axis=0)
            ax.plot(t, y, label=label, lw=1)
        ax.set_ylabel("Mbit/s")
        ax.set_title(f"{algorithm}, reconfiguration {v} ({len(runs)} runs)", fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1][0].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
