"""The text tables ``intcc exp run`` prints: per algorithm, or per sweep value with ratios."""
from __future__ import annotations

import statistics


def table_by_algorithm(records: list[dict]) -> str:
    """For scenarios without a sweep: one row per algorithm, means over repeats."""
    cols = [("goodput_mbps", "goodput Mbit/s", "{:.2f}"), ("retransmits", "retx", "{:.0f}"),
            ("slow_start_exit_s", "ss exit s", "{:.2f}"), ("plateau_s", "plateau s", "{:.2f}"), ("competitor_goodput_mbps", "competitor", "{:.2f}"),
            ("jain_mean", "Jain mean", "{:.3f}"), ("jain_min", "Jain min", "{:.3f}")]
    cols = [c for c in cols if any(r.get(c[0]) is not None for r in records)]
    lines = [f"{'algorithm':22s}" + "".join(f"{h:>15s}" for _, h, _ in cols)]
    for a in dict.fromkeys(r["algorithm"] for r in records):
        cells = []
        for key, _, fmt in cols:
            v = [r[key] for r in records if r["algorithm"] == a and r.get(key) is not None]
            cells.append(f"{fmt.format(statistics.mean(v)):>15s}" if v else f"{'-':>15s}")
        lines.append(f"{a:22s}" + "".join(cells))
    return "\n".join(lines)


def table(records: list[dict], key: str = "loss_pct", baseline: str | None = None) -> str:
    algs = list(dict.fromkeys(r["algorithm"] for r in records))
    values = sorted({r[key] for r in records})

    def mean(alg, v):
        g = [r["goodput_mbps"] for r in records if r["algorithm"] == alg and r[key] == v]
        return statistics.mean(g) if g else None

    head = f"{'goodput Mbit/s':18s}" + "".join(f"{key.replace('_pct', ' %')} {v:<5}".rjust(12) for v in values)
    lines = [head]
    for a in algs:
        lines.append(f"{a:18s}" + "".join(f"{mean(a, v):12.2f}" if mean(a, v) is not None else " " * 12
                                          for v in values))
    if baseline in algs:
        lines += ["", f"{'ratio to ' + baseline:18s}"]
        for a in algs:
            cells = []
            for v in values:
                m, b = mean(a, v), mean(baseline, v)
                cells.append(f"{m / b:12.2f}" if m is not None and b else " " * 12)
            lines.append(f"{a:18s}" + "".join(cells))
    return "\n".join(lines)
