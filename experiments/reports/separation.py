"""RTT separation against one FIFO on the same networks (``intcc exp separation``): the
rtt_separation scenario runs every drawn network twice, [sweep] separation = 0 (one FIFO)
and K (K queues), same algorithm, repeat and draw. Per algorithm: the mean Jain index of
the two flows each way, the paired difference with a bootstrap 95 % interval (networks
resampled), how many runs reach the paper's 0.95, and flow 1's (the longer RTT's) share;
by RTT ratio as well, as the paper's Fig. 7 plots it."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from records import bootstrap

#: the RTT ratio bins of the table (flow 1's base RTT over its competitor's)
RATIO_BINS = ((1.0, 5.0), (5.0, 10.0), (10.0, 21.0))
RATIO_TICKS = (1, 2, 5, 10, 20)
TARGET_JAIN = 0.95
#: beside a UDP flood, the share of their fair share the TCP flows must keep (the issue's)
TARGET_KEPT = 0.9
#: a flooded run counts where the flood covered at least this much of flow 1's time (records
#: without the figure predate its measure and count as they are)
MIN_FLOOD_OVERLAP = 0.9
METRICS = ("jain_total", "jain_mean")


class SeparationReportError(ValueError):
    pass


def rtt_ratio(params: dict) -> float:
    """Flow 1's base RTT over the competitor's on the dumbbell: each crosses two access links
    each way (access_delay_ms plus its own extra) and the bottleneck. On dumbbell4 (pairs'
    access delays delay_ms_1..4): the longest base RTT over the shortest."""
    pairs_ms = [v for k, v in sorted(params.items()) if k.startswith("delay_ms_")]
    if pairs_ms:
        rtts = [params.get("bottleneck_delay_ms", 0.5) + 2 * d for d in pairs_ms]
        return max(rtts) / min(rtts)
    access = params.get("access_delay_ms", 1.0)
    one_way = lambda extra: params.get("bottleneck_delay_ms", 10.0) + 2 * (access + extra)
    return one_way(params.get("main_extra_delay_ms", 0.0)) / one_way(params.get("comp_extra_delay_ms", 0.0))


def pairs(records: list[dict]) -> list[tuple[str, dict, dict]]:
    """(algorithm, FIFO run, separated run) of every network run both ways."""
    by = defaultdict(dict)
    for r in records:
        if "separation" not in r or r.get("error"):
            continue
        params = {k: v for k, v in (r.get("params") or {}).items() if k != "separation"}
        key = (r["algorithm"], r.get("seed"), r.get("repeat"), tuple(sorted(params.items())))
        by[key]["fifo" if not r["separation"] else "separated"] = r
    out = [(key[0], got["fifo"], got["separated"]) for key, got in by.items() if len(got) == 2]
    if not out:
        raise SeparationReportError("no network in RESULTS was run both with one FIFO (separation = 0) and "
                                    "separated: run a scenario with [sweep] separation = [0, K], e.g. rtt_separation")
    return sorted(out, key=lambda p: (p[0], rtt_ratio(p[1]["params"])))


def _row(label: str, got: list[tuple[str, dict, dict]], metric: str, resamples: int, seed: int) -> dict:
    fifo = np.array([f[metric] for _, f, _ in got], float)
    sep = np.array([s[metric] for _, _, s in got], float)
    diff = bootstrap.draws(lambda a, b: (b - a).mean(axis=-1), [fifo, sep], resamples,
                           np.random.default_rng(seed))
    rel = bootstrap.draws(lambda a, b: b.mean(axis=-1) / a.mean(axis=-1) - 1, [fifo, sep], resamples,
                          np.random.default_rng(seed))
    apart = [s.get("separation_state") for _, _, s in got]
    apart = [any(e.get("apart") for e in st.values()) for st in apart if st]
    share = lambda recs: float(np.mean([r["share"] for r in recs if r.get("share") is not None]))
    ratios = [rtt_ratio(f["params"]) for _, f, _ in got]
    return {"algorithm": label, "n": len(got), "metric": metric,
            "rtt_ratio_min": min(ratios), "rtt_ratio_max": max(ratios),
            "fifo_mean": float(fifo.mean()), "separated_mean": float(sep.mean()),
            "difference": float((sep - fifo).mean()), "difference_ci": bootstrap.interval(diff),
            "abs_difference_mean": float(np.abs(sep - fifo).mean()),
            "relative": float(sep.mean() / fifo.mean() - 1), "relative_ci": bootstrap.interval(rel),
            "fifo_at_target": int((fifo >= TARGET_JAIN).sum()), "separated_at_target": int((sep >= TARGET_JAIN).sum()),
            "separated_min": float(sep.min()),
            "flow1_share_fifo": share([f for _, f, _ in got]), "flow1_share_separated": share([s for _, _, s in got]),
            "apart": int(sum(apart)), "apart_of": len(apart),
            "emulation_off": int(sum(bool(r.get("emulation_off")) for _, f, s in got for r in (f, s)))}


def rows(records: list[dict], metric: str = "jain_total", resamples: int = bootstrap.DEFAULT_RESAMPLES,
         seed: int = 0) -> list[dict]:
    """One row per algorithm, per algorithm and RTT ratio bin (``ratio_bin``), and all."""
    if metric not in METRICS:
        raise SeparationReportError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    got = pairs(records)
    out = []
    for alg in sorted({a for a, _, _ in got}):
        mine = [p for p in got if p[0] == alg]
        out.append(_row(alg, mine, metric, resamples, seed))
        for low, high in RATIO_BINS:
            inside = [p for p in mine if low <= rtt_ratio(p[1]["params"]) < high]
            if inside and len(inside) < len(mine):
                out.append({**_row(alg, inside, metric, resamples, seed), "ratio_bin": [low, high]})
    if len({a for a, _, _ in got}) > 1:
        out.append(_row("all", got, metric, resamples, seed))
    return out


def tcp_goodput_mbps(r: dict) -> float:
    """Flow 1's and its TCP competitors' goodput together."""
    others = r.get("competitors_goodput_mbps") or [r.get("competitor_goodput_mbps") or 0.0]
    return float(r["goodput_mbps"] + sum(others))


def _tcp_flows(r: dict) -> int:
    return 1 + len(r.get("competitors_goodput_mbps") or [r.get("competitor_goodput_mbps")])


def udp_pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """(run beside the UDP flood, the same network and queueing without it) of every network
    run both ways: same flow 1 CCA, competitor, seed, repeat and parameters."""
    by = defaultdict(dict)
    for r in records:
        if "separation" not in r or r.get("error"):
            continue
        key = (r.get("flow1"), r.get("competitor"), r.get("seed"), r.get("repeat"),
               tuple(sorted((r.get("params") or {}).items())))
        by[key]["udp" if r.get("udp_cross_mbps") else "alone"] = r
    return [(got["udp"], got["alone"]) for got in by.values() if len(got) == 2]


def udp_rows(records: list[dict], resamples: int = bootstrap.DEFAULT_RESAMPLES, seed: int = 0) -> list[dict]:
    """Per flooded algorithm and queueing (FIFO, separated): the share of their fair share the
    TCP flows keep beside the flood. n TCP flows and one UDP flow share the link: their fair
    share is n/(n+1) of what they had alone on the same network, and ``kept`` is their
    goodput beside the flood over that. Empty without UDP runs."""
    out = []
    got = udp_pairs(records)
    for label, sep in sorted({(u["algorithm"], bool(u["separation"])) for u, _ in got}):
        mine = [(u, a) for u, a in got if u["algorithm"] == label and bool(u["separation"]) == sep]
        missed = [(u, a) for u, a in mine if _flood_overlap(u) < MIN_FLOOD_OVERLAP]
        mine = [p for p in mine if p not in missed]
        if not mine:
            continue
        kept = np.array([tcp_goodput_mbps(u) / (tcp_goodput_mbps(a) * _tcp_flows(u) / (_tcp_flows(u) + 1))
                         for u, a in mine])
        udp_mbps = [u.get("udp_cross", {}).get("received_mbps") for u, _ in mine]
        udp_mbps = [v for v in udp_mbps if v is not None]
        out.append({"algorithm": label, "separated": sep, "n": len(mine),
                    "udp_offered_mbps": float(np.mean([u["udp_cross_mbps"] for u, _ in mine])),
                    "udp_received_mbps": float(np.mean(udp_mbps)) if udp_mbps else None,
                    "tcp_alone_mbps": float(np.mean([tcp_goodput_mbps(a) for _, a in mine])),
                    "tcp_beside_udp_mbps": float(np.mean([tcp_goodput_mbps(u) for u, _ in mine])),
                    "kept_mean": float(kept.mean()), "kept_min": float(kept.min()),
                    "kept_ci": bootstrap.mean_interval(kept, resamples, seed),
                    "at_target": int((kept >= TARGET_KEPT).sum()),
                    "jain_total_mean": float(np.mean([u["jain_total"] for u, _ in mine])),
                    "flood_missed": len(missed),
                    "emulation_off": int(sum(bool(r.get("emulation_off")) for u, a in mine for r in (u, a)))})
    return out


def _flood_overlap(r: dict) -> float:
    got = (r.get("udp_cross") or {}).get("overlap_fraction")
    return 1.0 if got is None else float(got)


def format_udp_rows(table: list[dict]) -> str:
    lines = [f"Beside a UDP flood: the TCP flows' goodput over their fair share (n TCP + 1 UDP flows; alone on "
             f"the same network: the reference; 95 % bootstrap intervals)",
             f"{'':24}{'queueing':>10} {'n':>3} {'UDP offered/got':>16} {'TCP alone':>10} {'beside UDP':>11} "
             f"{'kept (CI)':>22} {'min':>5} {'>=0.9':>6} {'Jain':>6}"]
    for r in table:
        lo, hi = r["kept_ci"]
        got = f"{r['udp_received_mbps']:.1f}" if r["udp_received_mbps"] is not None else "?"
        lines.append(f"{r['algorithm']:24}{'separated' if r['separated'] else 'one FIFO':>10} {r['n']:>3} "
                     f"{r['udp_offered_mbps']:>7.1f}/{got:<6} Mb {r['tcp_alone_mbps']:>8.2f} Mb "
                     f"{r['tcp_beside_udp_mbps']:>8.2f} Mb {r['kept_mean']:>7.2f} ({lo:.2f}, {hi:.2f})  "
                     f"{r['kept_min']:>5.2f} {r['at_target']:>2}/{r['n']:<3} {r['jain_total_mean']:>6.3f}")
    off = sum(r["emulation_off"] for r in table)
    missed = sum(r["flood_missed"] for r in table)
    lines.append(f"(kept >= {TARGET_KEPT}: the target; Jain: the TCP flows' jain_total beside the flood; "
                 f"runs flagged emulation_off: {off}; left out, the flood covering less than "
                 f"{MIN_FLOOD_OVERLAP:.0%} of flow 1's time: {missed})")
    return "\n".join(lines)


def format_udp_markdown(table: list[dict]) -> str:
    lines = ["| TCP flows | queueing | networks | UDP offered → delivered, Mbit/s | TCP alone, Mbit/s "
             "| TCP beside UDP, Mbit/s | share kept (95 % CI) | lowest | networks ≥ 0.9 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lo, hi = r["kept_ci"]
        got = f"{r['udp_received_mbps']:.1f}" if r["udp_received_mbps"] is not None else "?"
        lines.append(f"| {r['algorithm']} | {'separated' if r['separated'] else 'one FIFO'} | {r['n']} "
                     f"| {r['udp_offered_mbps']:.0f} → {got} | {r['tcp_alone_mbps']:.2f} | {r['tcp_beside_udp_mbps']:.2f} "
                     f"| {r['kept_mean']:.2f} ({lo:.2f}–{hi:.2f}) | {r['kept_min']:.2f} | {r['at_target']} of {r['n']} |")
    return "\n".join(lines)


def rtt_accuracy(records: list[dict]) -> dict | None:
    """The node's passive RTT of each flow against its sender's own minimum RTT (``ss``),
    where a run recorded both: per flow the error in ms and in % of the sender's; the target:
    median |error| <= 5 % or <= 1 ms. None without such flows."""
    errs_ms, errs_rel = [], []
    for r in records:
        for elem in (r.get("separation_state") or {}).values():
            for f in elem["flows"].values():
                if f.get("rtt_us") and f.get("sender_min_rtt_us"):
                    errs_ms.append((f["rtt_us"] - f["sender_min_rtt_us"]) / 1e3)
                    errs_rel.append((f["rtt_us"] - f["sender_min_rtt_us"]) / f["sender_min_rtt_us"])
    if not errs_ms:
        return None
    ms, rel = np.array(errs_ms), np.array(errs_rel)
    within = (np.abs(rel) <= 0.05) | (np.abs(ms) <= 1.0)
    return {"flows": len(ms), "median_abs_ms": float(np.median(np.abs(ms))),
            "median_abs_pct": float(np.median(np.abs(rel)) * 100), "mean_ms": float(ms.mean()),
            "max_abs_ms": float(np.abs(ms).max()), "within_target": int(within.sum())}


def format_rtt_accuracy(a: dict) -> str:
    return (f"Passive RTT at the node against the sender's own minimum (ss), {a['flows']} flows: median |error| "
            f"{a['median_abs_ms']:.2f} ms = {a['median_abs_pct']:.1f} % (mean {a['mean_ms']:+.2f} ms signed, "
            f"largest {a['max_abs_ms']:.2f} ms); within 5 % or 1 ms: {a['within_target']} of {a['flows']}")


def goodput_rows(records: list[dict], resamples: int = bootstrap.DEFAULT_RESAMPLES, seed: int = 0) -> list[dict]:
    """Per algorithm and queueing (one FIFO, separated): flow 1's and its competitors' mean
    goodput with bootstrap intervals, their sum, Jain and flow 1's share; the networks run
    both ways only. What separation does to a sender's goodput and to its neighbour's."""
    out = []
    got = pairs(records)
    for alg in sorted({a for a, _, _ in got}):
        for sep in (False, True):
            runs = [s if sep else f for a, f, s in got if a == alg]
            mine = np.array([r["goodput_mbps"] for r in runs], float)
            theirs = np.array([tcp_goodput_mbps(r) - r["goodput_mbps"] for r in runs], float)
            out.append({"algorithm": alg, "separated": sep, "n": len(runs),
                        "flow1_mbps": float(mine.mean()), "flow1_ci": bootstrap.mean_interval(mine, resamples, seed),
                        "competitors_mbps": float(theirs.mean()),
                        "competitors_ci": bootstrap.mean_interval(theirs, resamples, seed),
                        "total_mbps": float((mine + theirs).mean()),
                        "jain_total": float(np.mean([r["jain_total"] for r in runs])),
                        "share": float(np.mean([r["share"] for r in runs if r.get("share") is not None]))})
    return out


def format_goodput_markdown(table: list[dict]) -> str:
    lines = ["| flows | queueing | networks | flow 1, Mbit/s (95 % CI) | competitor, Mbit/s (95 % CI) | together | "
             "Jain | flow 1's share |", "|---|---|---|---|---|---|---|---|"]
    for r in table:
        a, b = r["flow1_ci"]
        c, d = r["competitors_ci"]
        lines.append(f"| {r['algorithm']} | {'separated' if r['separated'] else 'one FIFO'} | {r['n']} "
                     f"| {r['flow1_mbps']:.2f} ({a:.2f}–{b:.2f}) | {r['competitors_mbps']:.2f} ({c:.2f}–{d:.2f}) "
                     f"| {r['total_mbps']:.2f} | {r['jain_total']:.3f} | {r['share']:.2f} |")
    return "\n".join(lines)


def queueing_rows(records: list[dict], resamples: int = bootstrap.DEFAULT_RESAMPLES, seed: int = 0) -> list[dict]:
    """Bufferbloat: each flow's mean queueing delay at the bottleneck (``queueing_ms``, from
    INT transit delays), one FIFO against separated on the same networks, per algorithm and
    flow, the flows named by their base RTT (the sender's own minimum in the separated run,
    rounded to 1 ms). Empty where runs did not record it."""
    by = defaultdict(list)                    # (algorithm, port rank) -> [(fifo ms, separated ms, rtt ms)]
    for alg, fifo, sep in pairs(records):
        fq, sq = fifo.get("queueing_ms"), sep.get("queueing_ms")
        if not fq or not sq:
            continue
        base = {}
        for elem in (sep.get("separation_state") or {}).values():
            for port, f in elem["flows"].items():
                if f.get("sender_min_rtt_us"):
                    base[port] = f["sender_min_rtt_us"] / 1e3
        for rank, port in enumerate(sorted(set(fq) & set(sq), key=int)):
            by[(alg, rank)].append((fq[port]["mean_ms"], sq[port]["mean_ms"], fq[port]["p95_ms"], sq[port]["p95_ms"],
                                    base.get(port)))
    out = []
    for (alg, rank), got in sorted(by.items()):
        fifo = np.array([g[0] for g in got])
        sep = np.array([g[1] for g in got])
        rtts = [g[4] for g in got if g[4] is not None]
        diff = bootstrap.draws(lambda a, b: (b - a).mean(axis=-1), [fifo, sep], resamples, np.random.default_rng(seed))
        out.append({"algorithm": alg, "flow": rank + 1, "n": len(got),
                    "base_rtt_ms": round(float(np.median(rtts))) if rtts else None,
                    "fifo_mean_ms": float(fifo.mean()), "separated_mean_ms": float(sep.mean()),
                    "fifo_p95_ms": float(np.mean([g[2] for g in got])),
                    "separated_p95_ms": float(np.mean([g[3] for g in got])),
                    "difference_ms": float((sep - fifo).mean()), "difference_ci_ms": bootstrap.interval(diff)})
    return sorted(out, key=lambda r: (r["algorithm"], r["base_rtt_ms"] is None, r["base_rtt_ms"] or 0))


def format_queueing_rows(table: list[dict]) -> str:
    lines = ["Queueing delay at the bottleneck per flow (INT transit delay above its least; mean over the run, "
             "networks paired, 95 % bootstrap intervals)",
             f"{'':24}{'flow':>5} {'base RTT':>9} {'n':>3} {'FIFO ms':>8} {'sep. ms':>8} {'diff (CI)':>26} "
             f"{'p95 FIFO -> sep.':>18}"]
    for r in table:
        lo, hi = r["difference_ci_ms"]
        rtt = f"{r['base_rtt_ms']} ms" if r["base_rtt_ms"] is not None else "?"
        lines.append(f"{r['algorithm']:24}{r['flow']:>5} {rtt:>9} {r['n']:>3} {r['fifo_mean_ms']:>8.1f} "
                     f"{r['separated_mean_ms']:>8.1f} {r['difference_ms']:>+8.1f} ({lo:+.1f}, {hi:+.1f})  "
                     f"{r['fifo_p95_ms']:>7.1f} -> {r['separated_p95_ms']:.1f}")
    return "\n".join(lines)


def format_queueing_markdown(table: list[dict]) -> str:
    lines = ["| flows | base RTT | networks | queueing delay, FIFO | separated | difference (95 % CI) "
             "| 95th percentile, FIFO → separated |", "|---|---|---|---|---|---|---|"]
    for r in table:
        lo, hi = r["difference_ci_ms"]
        rtt = f"{r['base_rtt_ms']} ms" if r["base_rtt_ms"] is not None else "?"
        lines.append(f"| {r['algorithm']} | {rtt} | {r['n']} | {r['fifo_mean_ms']:.1f} ms | {r['separated_mean_ms']:.1f} ms "
                     f"| {r['difference_ms']:+.1f} ms ({lo:+.1f}..{hi:+.1f}) "
                     f"| {r['fifo_p95_ms']:.1f} → {r['separated_p95_ms']:.1f} ms |")
    return "\n".join(lines)


def _label(r: dict) -> str:
    if "ratio_bin" in r:
        low, high = r["ratio_bin"]
        return f"  RTT ratio {low:g}-{high:g}x"
    return r["algorithm"]


def format_rows(table: list[dict]) -> str:
    metric = table[0]["metric"] if table else "jain_total"
    head = (f"{metric}: one FIFO against RTT separation on the same networks (paired; 95 % bootstrap intervals)\n"
            f"{'':28}{'n':>3} {'ratio':>10} {'FIFO':>6} {'sep.':>6} {'diff (CI)':>24} {'|diff|':>6} "
            f"{'relative (CI)':>22} {'>=0.95':>9} {'flow 1 share':>13} {'apart':>6}")
    lines = [head]
    for r in table:
        lo, hi = r["difference_ci"]
        rlo, rhi = r["relative_ci"]
        lines.append(f"{_label(r):28}{r['n']:>3} {r['rtt_ratio_min']:>4.1f}-{r['rtt_ratio_max']:<4.1f}x "
                     f"{r['fifo_mean']:>6.3f} {r['separated_mean']:>6.3f} "
                     f"{r['difference']:>+7.3f} ({lo:+.3f}, {hi:+.3f}) {r['abs_difference_mean']:>6.3f} "
                     f"{r['relative'] * 100:>+6.1f} % ({rlo * 100:+.1f}, {rhi * 100:+.1f}) "
                     f"{r['fifo_at_target']:>3}->{r['separated_at_target']:<3} "
                     f"{r['flow1_share_fifo']:>5.2f}->{r['flow1_share_separated']:<5.2f} "
                     f"{r['apart']:>2}/{r['apart_of']:<2}")
    off = sum(r["emulation_off"] for r in table if "ratio_bin" not in r and r["algorithm"] != "all")
    lines.append(f"(>=0.95: runs at the paper's target, FIFO -> separated; flow 1 share: the longer RTT's share of "
                 f"the goodput; apart: separated runs whose two flows ended in different queues; "
                 f"runs flagged emulation_off: {off})")
    return "\n".join(lines)


def format_markdown(table: list[dict]) -> str:
    metric = table[0]["metric"]
    lines = [f"| CCA | networks | RTT ratio | Jain ({metric}) FIFO | separated | paired difference (95 % CI) "
             f"| relative | runs ≥ 0.95 FIFO → separated | flow 1 share FIFO → separated |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lo, hi = r["difference_ci"]
        label = f"{r['algorithm']}, {_label(r).strip()}" if "ratio_bin" in r else r["algorithm"]
        lines.append(f"| {label} | {r['n']} | {r['rtt_ratio_min']:.1f}–{r['rtt_ratio_max']:.1f}× "
                     f"| {r['fifo_mean']:.3f} | {r['separated_mean']:.3f} "
                     f"| {r['difference']:+.3f} ({lo:+.3f}, {hi:+.3f}) | {r['relative'] * 100:+.1f} % "
                     f"| {r['fifo_at_target']} → {r['separated_at_target']} of {r['n']} "
                     f"| {r['flow1_share_fifo']:.2f} → {r['flow1_share_separated']:.2f} |")
    return "\n".join(lines)


def plot(records: list[dict], path: str, metric: str = "jain_total") -> None:
    """Jain against the RTT ratio, FIFO and separated, one panel per algorithm; a line joins
    the two runs of a network."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    got = pairs(records)
    algs = sorted({a for a, _, _ in got})
    fig, axes = plt.subplots(1, len(algs), figsize=(5 * len(algs), 3.8), sharey=True, squeeze=False)
    for ax, alg in zip(axes[0], algs):
        mine = [p for p in got if p[0] == alg]
        x = [rtt_ratio(f["params"]) for _, f, _ in mine]
        fifo = [f[metric] for _, f, _ in mine]
        sep = [s[metric] for _, _, s in mine]
        for xi, a, b in zip(x, fifo, sep):
            ax.plot([xi, xi], [a, b], color="0.8", lw=1, zorder=1)
        ax.scatter(x, fifo, marker="o", color="tab:gray", label="one FIFO", zorder=2)
        ax.scatter(x, sep, marker="^", color="tab:blue", label="RTT separation", zorder=3)
        ax.axhline(TARGET_JAIN, ls="--", color="tab:red", lw=0.8, label=f"Jain {TARGET_JAIN}")
        ax.set_xscale("log")
        ax.set_xticks(RATIO_TICKS, [f"{t:g}×" for t in RATIO_TICKS])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(alg)
        ax.set_xlabel("RTT ratio (flow 1 / competitor)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"Jain's index ({metric})")
    axes[0][0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
