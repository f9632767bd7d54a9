"""Plots of runs and scenarios (PNG, matplotlib's Agg backend: no display needed)."""
from __future__ import annotations

import csv
import os
import statistics


def plot_series(rows: list[dict], title: str, path: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r["t_s"] for r in rows]
    fig, ax = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
    ax[0].plot(t, [r["goodput_mbps"] or 0 for r in rows])
    ax[0].set_ylabel("goodput\nMbit/s")
    ax[1].plot(t, [(r["cwnd_bytes"] or 0) / 1e3 for r in rows])
    ax[1].set_ylabel("cwnd\nkB")
    ax[2].plot(t, [r["rtt_ms"] for r in rows])
    ax[2].set_ylabel("RTT ms")
    ax[2].set_xlabel("time (s)")
    ax[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_summary(records: list[dict], key: str, path: str, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for alg in dict.fromkeys(r["algorithm"] for r in records):
        xs = sorted({r[key] for r in records if r["algorithm"] == alg})
        vals = [[r["goodput_mbps"] for r in records if r["algorithm"] == alg and r[key] == x] for x in xs]
        ax.errorbar(xs, [statistics.mean(v) for v in vals],
                    yerr=[statistics.stdev(v) if len(v) > 1 else 0 for v in vals], marker="o", capsize=3,
                    label=alg)
    ax.set_xlabel(key.replace("_pct", " (%)").replace("_", " "))
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_title(title)
    ax.grid(alpha=.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_overlay(records, out_dir, column, ylabel, scale, filename, title):
    """One line per algorithm (its first repeat) of a series column over time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in records:
        if r["repeat"] != 0:
            continue
        with open(os.path.join(out_dir, "runs", r["run"], "series.csv")) as f:
            rows = [x for x in csv.DictReader(f) if x.get(column) not in (None, "")]
        ax.plot([float(x["t_s"]) for x in rows], [float(x[column]) * scale for x in rows], label=r["algorithm"])
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, filename), dpi=90)
    plt.close(fig)
