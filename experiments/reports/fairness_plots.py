"""The fairness report's plots: D per competitor and mode (the ML-fairness paper's Fig. 6),
mean |D| (Fig. 7), and a timeline per adaptive run (both flows' goodput, flow 1's algorithm
as a coloured band)."""
from __future__ import annotations

import csv
import os

import numpy as np

from experiments.reports.fairness_report import PAIR_PREFIX, rows
from experiments.runs.metrics import algorithm_spans

COLOURS = {"bbr": "tab:blue", "cubic": "tab:orange", "reno": "tab:green", "vegas": "tab:red"}


def _finish(fig, ax, competitors, ylabel, title, path) -> str:
    import matplotlib.pyplot as plt
    ax.set_xticks(range(len(competitors)), [f"vs {c}" for c in competitors])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot(records: list[dict], out_dir: str, title: str, timelines: bool = True) -> list[str]:
    """d_box.png (the ML-fairness paper Fig. 6), abs_d.png (Fig. 7) and (``timelines``)
    runs/<run>/timeline.png for every adaptive run; the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    records = [r for r in records if not r["algorithm"].startswith(PAIR_PREFIX)]
    table = rows(records)
    competitors = list(dict.fromkeys(r["competitor"] for r in table))
    modes = list(dict.fromkeys(r["mode"] for r in table))
    width = 0.8 / max(len(modes), 1)
    written = []

    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(competitors) * len(modes) / 3), 4.5))
    for k, mode in enumerate(modes):
        data = [[r["goodput_difference"] for r in records if r.get("competitor") == c and r["algorithm"] == mode
                 and r.get("goodput_difference") is not None] for c in competitors]
        pos = [i + (k - (len(modes) - 1) / 2) * width for i in range(len(competitors))]
        keep = [(p, d) for p, d in zip(pos, data) if d]
        if keep:
            b = ax.boxplot([d for _, d in keep], positions=[p for p, _ in keep], widths=width * 0.9,
                           patch_artist=True, manage_ticks=False)
            for patch in b["boxes"]:
                patch.set_facecolor(plt.cm.tab10(k % 10))
                patch.set_alpha(0.6)
        ax.plot([], [], "s", color=plt.cm.tab10(k % 10), label=mode)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylim(-1.05, 1.05)
    written.append(_finish(fig, ax, competitors, "goodput difference D (Eq. 3)",
                           title + ": D per competitor and mode", os.path.join(out_dir, "d_box.png")))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, mode in enumerate(modes):
        cells = [next((r for r in table if r["competitor"] == c and r["mode"] == mode), None) for c in competitors]
        xs = [i + (k - (len(modes) - 1) / 2) * width for i, c in enumerate(cells) if c]
        ms = [c["mean_abs_d"] for c in cells if c]
        err = np.array([[c["mean_abs_d"] - c["abs_d_ci"][0], c["abs_d_ci"][1] - c["mean_abs_d"]]
                        for c in cells if c]).T
        ax.bar(xs, ms, width * 0.9, yerr=err if len(ms) else None, capsize=2, label=mode,
               color=plt.cm.tab10(k % 10))
    written.append(_finish(fig, ax, competitors, "mean |D| (95 % CI)", title + ": mean |D|",
                           os.path.join(out_dir, "abs_d.png")))

    for r in records if timelines else ():
        run_dir = os.path.join(out_dir, "runs", r["run"])
        if "switches" in r and os.path.exists(os.path.join(run_dir, "series.csv")):
            written.append(plot_timeline(run_dir, r))
    return written


def plot_timeline(run_dir: str, rec: dict, initial: str = "cubic") -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(run_dir, "series.csv")) as f:
        series = list(csv.DictReader(f))
    t = [float(x["t_s"]) for x in series]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(t, [float(x["goodput_mbps"] or 0) for x in series], label="flow 1")
    ax.plot(t, [float(x["competitor_goodput_mbps"] or 0) for x in series], label=f"competitor ({rec['competitor']})")
    top = max([float(x["goodput_mbps"] or 0) for x in series] + [float(x["competitor_goodput_mbps"] or 0)
                                                                  for x in series] + [1.0]) * 1.15
    for lo, hi, alg in algorithm_spans(os.path.join(run_dir, "trace.csv"), initial, t[-1] if t else 0.0):
        ax.axvspan(lo, hi, ymin=0.93, ymax=1.0, color=COLOURS.get(alg, "grey"), alpha=0.7)
        ax.text((lo + hi) / 2, top * 0.965, alg, ha="center", va="center", fontsize=7)
    ax.set_ylim(0, top)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("goodput (Mbit/s)")
    p = rec.get("params", {})
    d = rec.get("goodput_difference")
    ax.set_title(f"{rec['algorithm']} vs {rec['competitor']}: D = {'-' if d is None else f'{d:+.2f}'}; "
                 f"{p.get('bottleneck_mbps', '?')} Mbit/s, {p.get('bottleneck_delay_ms', '?')} ms, "
                 f"{p.get('buffer_bdp', '?')} BDP", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(run_dir, "timeline.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
