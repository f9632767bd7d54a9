"""The fairness report's tables as text and Markdown (``intcc exp fairness``, the docs'
Results): the rows and comparisons fairness_report.py computes, written out."""
from __future__ import annotations

from experiments.reports.fairness_report import NOT_USED, ORACLE, PARTS, _is

def format_comparisons(table: list[dict]) -> str:
    lines = [f"{'competitor':>10s}  {'mode':18s} {'|D| cut vs not used (95 % CI)':>31s} "
             f"{'|D| - oracle |D| (95 % CI)':>29s}"]
    for r in table:
        cut = (f"{r['cut_vs_not_used']:8.1%} ({r['cut_ci'][0]:.1%} to {r['cut_ci'][1]:.1%})"
               if "cut_vs_not_used" in r else "-")
        gap = (f"{r['gap_to_oracle']:+7.3f} ({r['gap_ci'][0]:+.3f} to {r['gap_ci'][1]:+.3f})"
               if "gap_to_oracle" in r else "-")
        lines.append(f"{r['competitor']:>10s}  {r['mode']:18s} {cut:>31s} {gap:>29s}")
    for r in table:
        for other, g in r.get("gap_to", {}).items():
            lines.append(f"{r['competitor']:>10s}  {r['mode']:18s} |D| - {other} |D|: {g['gap']:+.3f} "
                         f"({g['ci'][0]:+.3f} to {g['ci'][1]:+.3f}), {g['networks']} networks")
    lines.append("paired by network; the ML-fairness paper (Fig. 7, w = 50): |D| 77.9 % below not used against BBR")
    return "\n".join(lines)

def format_rows(table: list[dict]) -> str:
    def f(v, fmt):
        return "-" if v is None else fmt.format(v)
    paper = any(r.get("paper_mean_abs_d") is not None for r in table)
    lines = [f"{'competitor':>10s}  {'mode':18s} {'runs':>4s} {'mean D':>7s} {'mean |D| (95 % CI)':>21s} "
             + (f"{'paper method |D|':>21s} " if paper else "")
             + f"{'harm':>6s} {'Jain':>6s} {'queue ms':>8s} {'on its CCA':>10s} {'1st switch s':>12s} "
             + f"{'switches':>8s}"]
    for r in table:
        lo, hi = r["abs_d_ci"]
        cell = ""
        if paper:
            cell = (f"{r['paper_mean_abs_d']:7.3f} ({r['paper_abs_d_ci'][0]:.3f}-{r['paper_abs_d_ci'][1]:.3f}) "
                    if r.get("paper_mean_abs_d") is not None else f"{'-':>21s} ")
        lines.append(f"{r['competitor']:>10s}  {r['mode']:18s} {r['runs']:4d} {r['mean_d']:7.3f} "
                     f"{r['mean_abs_d']:7.3f} ({lo:.3f}-{hi:.3f}) {cell}{f(r['harm'], '{:6.1%}'):>6s} "
                     f"{f(r['jain_mean'], '{:.3f}'):>6s} {f(r['queue_delay_ms'], '{:.1f}'):>8s} "
                     f"{f(r.get('time_on_competitors_cca'), '{:.0%}'):>10s} "
                     f"{f(r['median_first_switch_s'], '{:.1f}'):>12s} "
                     f"{f(r['mean_switches'], '{:.1f}'):>8s}")
    lines.append("harm: 1 - the competitor's goodput beside the mode / beside the oracle, same repeats "
                 "(negative: flow 1 gave); on its CCA: share of the time flow 1 ran the competitor's CCA")
    if paper:
        lines.append("paper method: Eqs. 1-3 from fairness_pairs' g(i, j) on the same networks, weighted by "
                     "the time the live run spent on each CCA")
    return "\n".join(lines)

def format_parts_table(table: list[dict]) -> str:
    lines = [f"{'competitor':10s} {'mode':24s} {'runs':>4s} {'D':>7s}  "
             + "  ".join(f"{k + ': s, D (|D|)':>22s}" for k in PARTS)]
    for r in table:
        cells = "  ".join(f"{r['mean_seconds'][k]:5.1f} {r['mean_part'][k]:+7.3f} ({r['mean_abs_part'][k]:5.3f})"
                          for k in PARTS)
        lines.append(f"{r['competitor']:10s} {r['mode']:24s} {r['runs']:4d} {r['mean_d']:+7.3f}  {cells}")
    lines.append("start: before flow 1's first switch; right: after it, on the competitor's CCA; wrong: after it, "
                 "on another. Per run the three parts of D add up to D; means over the runs, seconds on each")
    return "\n".join(lines)

def format_markdown(table: list[dict], versus: list[dict], detail: list[str] | None = None) -> str:
    """The docs' table: mean |D| (95 % CI) per mode (rows) and competitor (columns), then
    for each mode in ``detail`` (default: every mode but the baselines) its paired cut
    against not used, its gap to the oracle, harm and time on the competitor's CCA, and the
    paper method's |D| where pairs were given; a last line averages the cut over the
    competitors."""
    def num(v):
        return f"{v:.3f}"

    def signed(v):
        return f"{v:+.3f}".replace("-", "−")

    def pct(v):
        return f"{100 * v:.1f} %".replace("-", "−")

    def pct_ci(v, ci):
        return f"{pct(v)} ({pct(ci[0])[:-2]} to {pct(ci[1])})"

    def num_ci(v, ci):
        return f"{num(v)} ({num(ci[0])}–{num(ci[1])})"

    cell = {(r["competitor"], r["mode"]): r for r in table}
    pair = {(r["competitor"], r["mode"]): r for r in versus}
    comps = list(dict.fromkeys(r["competitor"] for r in table))
    modes = list(dict.fromkeys(r["mode"] for r in table))
    if detail is None:
        detail = [m for m in modes if not (_is(m, NOT_USED) or _is(m, ORACLE))]
    unknown = [m for m in detail if m not in modes]
    if unknown:
        raise ValueError(f"no runs of {', '.join(map(repr, unknown))}; modes: {', '.join(modes)}")
    counts = sorted({r["runs"] for r in table})
    networks = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"

    def line(label, render):
        return f"| {label} | " + " | ".join(render(c) for c in comps) + " |"

    def get(comp, mode, key, render, source=cell):
        v = source.get((comp, mode), {}).get(key)
        return "–" if v is None else render(v, source[(comp, mode)])

    out = [f"| mean \\|D\\| (95 % CI), {networks} networks each | " + " | ".join(comps) + " |",
           "|---|" + "---|" * len(comps)]
    for mode in modes:
        out.append(line(mode, lambda c: get(c, mode, "mean_abs_d",
                                            lambda v, r: num_ci(v, r["abs_d_ci"]))))
    for mode in detail:
        if any("cut_vs_not_used" in pair.get((c, mode), {}) for c in comps):      # runs of "not used" given
            out.append(line(f"{mode}: cut vs not used, paired (95 % CI)", lambda c: get(
                c, mode, "cut_vs_not_used",
                lambda v, r: pct_ci(v, r["cut_ci"]), pair)))
        out.append(line(f"{mode} − oracle, paired (95 % CI)", lambda c: get(
            c, mode, "gap_to_oracle",
            lambda v, r: f"{signed(v)} ({signed(r['gap_ci'][0])} to {signed(r['gap_ci'][1])})", pair)))
        for other in dict.fromkeys(o for c in comps for o in pair.get((c, mode), {}).get("gap_to", {})):
            out.append(line(f"{mode} − {other}, paired (95 % CI)", lambda c: get(
                c, mode, "gap_to", lambda v, r: "–" if other not in v else
                f"{signed(v[other]['gap'])} ({signed(v[other]['ci'][0])} to {signed(v[other]['ci'][1])})", pair)))
        out.append(line(f"{mode}: harm, pooled (mean \\|harm\\| per network) / time on its CCA", lambda c: get(
            c, mode, "harm", lambda v, r: pct(v)
            + ("" if r.get("harm_network_abs_mean") is None else f" ({pct(r['harm_network_abs_mean'])})")
            + ("" if r.get("time_on_competitors_cca") is None else f" / {100 * r['time_on_competitors_cca']:.0f} %"))))
        if any(cell.get((c, mode), {}).get("paper_mean_abs_d") is not None for c in comps):
            out.append(line(f"paper method, {mode} (pairs of the same networks)", lambda c: get(
                c, mode, "paper_mean_abs_d",
                lambda v, r: num_ci(v, r["paper_abs_d_ci"]))))
    averaged = [r for r in versus if r["competitor"] == "all" and r["mode"] in detail]
    if any("cut_vs_not_used" in r for r in averaged):
        out.append("")
        out.append("Cut vs not used averaged over the competitors (95 % CI): " + "; ".join(
            f"{r['mode']} {pct_ci(r['cut_vs_not_used'], r['cut_ci'])}"
            for r in averaged if "cut_vs_not_used" in r) + ".")
    gaps = [(r["mode"], other, g) for r in averaged for other, g in r.get("gap_to", {}).items()]
    if gaps:
        out.append("")
        out.append("Gaps averaged over the competitors, paired (95 % CI): " + "; ".join(
            f"{mode} − {other} {signed(g['gap'])} ({signed(g['ci'][0])} to {signed(g['ci'][1])})"
            for mode, other, g in gaps) + ".")
    return "\n".join(out)

def format_verdict_table(table: list[dict]) -> str:
    comps = sorted({c for r in table for c in r["vote_accuracy_by_competitor"]})
    lines = [f"{'mode':18s} {'since':7s} {'flow 1 on':9s} {'s':>6s} {'verdicts':>8s} {'row':>5s} {'vote':>5s}  "
             + " ".join(f"{c:>6s}" for c in comps)]
    for r in table:
        row = "-" if r["row_accuracy"] is None else f"{r['row_accuracy']:.2f}"
        by = " ".join(f"{r['vote_accuracy_by_competitor'][c]:6.2f}" if c in r["vote_accuracy_by_competitor"]
                      else f"{'-':>6s}" for c in comps)
        lines.append(f"{r['mode']:18s} {r['after']:7s} {r['on']:9s} {r['since_s']:>6s} {r['rows']:8d} {row:>5s} "
                     f"{r['vote_accuracy']:5.2f}  {by}")
    lines.append("since: flow 1's start or its last switch; s: seconds since then; row: the step's own estimate "
                 "right; vote: the majority verdict right (per competitor on the right)")
    return "\n".join(lines)
