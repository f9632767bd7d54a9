"""The sections ``intcc report`` renders: each reads committed records under data/ and
returns Markdown (a table, then the records it came from with their date, commit and
command). A section's name is the marker a doc uses: ``<!-- report:NAME -->``."""
from __future__ import annotations

import glob
import json
import os
import re
import statistics
from typing import Callable, Dict, List

from estimator import DEFAULT_MODEL
from experiments.reports import fairness_report, fairness_tables
from experiments.reports.compare import compare, load_records, with_reruns
from records import provenance_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")

LOSSY_LINK = "data/experiments/lossy_link-seed1-2026-11-29.json"
CUBIC_FIDELITY = "data/experiments/cubic_fidelity-seed1-2026-11-29.json"
CONGESTION_FAIRNESS = "data/experiments/congestion_fairness-seed1-2026-11-26.json"
#: the held-out fairness networks (seed 2617): switching runs and the pairs of the same networks
FAIRNESS_SWITCHING = "data/experiments/fairness_switching-seed2617-*-r*.json"
FAIRNESS_RERUN = "data/experiments/fairness_switching-seed2617-2026-11-30-reno-fix-r0-15.json"
FAIRNESS_PAIRS = "data/experiments/fairness_pairs-seed2617-*.json"
#: active identification on fresh fairness networks (seed 2618): the oracle, passive mirror and active
FAIRNESS_ACTIVE = "data/experiments/fairness_switching-seed2618-*.json"
FAIRNESS_PARITY = "data/experiments/fairness_switching-seed2619-*.json"
#: held out for active identification's fairness (seed 2620, 40 networks): the oracle, passive mirror and active
FAIRNESS_HELDOUT = "data/experiments/fairness_switching-seed2620-*.json"
FORWARDING_BENCH = "data/bench/forwarding-2026-11-29.json"
FASTPATH_BENCH = "data/bench/fastpath-2026-12-05.json"
DATAPATH_BENCH = "data/bench/datapath-2026-11-29.txt"
DASHBOARD_BENCH = "data/bench/dashboard-2026-12-02.json"
SCORES = "data/estimator/scores"


def _load(path: str) -> dict:
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def _source(paths: List[str]) -> str:
    """'Records: `path` (date, commit, `command`)', one per record; reconstructed
    provenance is marked, so a reader knows the command was written down afterwards."""
    lines = []
    for p in paths:
        prov = provenance_of(_load(p))
        mark = " (provenance filled in from git history)" if prov.reconstructed else ""
        lines.append(f"`{p}`: {prov.date}, {prov.commit}, `{prov.command}`{mark}")
    head = "Record" if len(lines) == 1 else "Records"
    return f"{head}: " + lines[0] if len(lines) == 1 else f"{head}:\n" + "\n".join(f"- {x}" for x in lines)


def _glob(pattern: str, exclude: str = "") -> List[str]:
    found = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))
    return [p for p in found if p != exclude]


def _pct(v: float) -> str:
    return f"{100 * v:.1f} %".replace("-", "−")


# ---------------------------------------------------------------- INT-aware CUBIC


def lossy_link() -> str:
    """Goodput per algorithm and link loss on the wireless testbed, and each algorithm's
    ratio to kernel cubic (bootstrap 95 % CI, runs paired by loss draws)."""
    records = load_records([os.path.join(ROOT, LOSSY_LINK)])
    losses = sorted({r["loss_pct"] for r in records})
    algs = list(dict.fromkeys(r["algorithm"] for r in records))
    rows = {(r["algorithm"], r["loss_pct"]): r for r in compare(records, "kernel cubic", "loss_pct")}
    out = ["| goodput, Mbit/s (ratio to kernel cubic, 95 % CI) | " + " | ".join(f"{v:g} % loss" for v in losses) + " |",
           "|---|" + "---|" * len(losses)]
    for a in algs:
        cells = []
        for v in losses:
            r = rows.get((a, v))
            if r is None:
                cells.append("–")
            elif a == "kernel cubic" or r.get("ratio") is None:
                cells.append(f"{r['mean']:.2f}")
            else:
                cells.append(f"{r['mean']:.2f} ({r['ratio']:.2f}×, {r['ci_low']:.2f}–{r['ci_high']:.2f})")
        out.append(f"| {a} | " + " | ".join(cells) + " |")
    runs = sorted({r["runs"] for r in rows.values()})
    out += ["", f"{runs[0]} runs of 30 s per cell; " + _source([LOSSY_LINK])]
    return "\n".join(out)


def cubic_fidelity() -> str:
    """CUBIC on the CCP datapath against the kernel's, same loss draws."""
    records = load_records([os.path.join(ROOT, CUBIC_FIDELITY)])
    rows = compare(records, "kernel cubic", "loss_pct")
    out = ["| link loss | kernel cubic, Mbit/s | ccp cubic, Mbit/s | ratio (95 % CI) | runs |", "|---|---|---|---|---|"]
    for v in sorted({r["loss_pct"] for r in rows}):
        k = next(r for r in rows if r["loss_pct"] == v and r["algorithm"] == "kernel cubic")
        c = next(r for r in rows if r["loss_pct"] == v and r["algorithm"] == "ccp cubic")
        out.append(f"| {v:g} % | {k['mean']:.2f} | {c['mean']:.2f} | {c['ratio']:.2f} ({c['ci_low']:.2f}–{c['ci_high']:.2f}) "
                   f"| {c['runs']} |")
    out += ["", _source([CUBIC_FIDELITY])]
    return "\n".join(out)


def _neighbour_harms() -> list[tuple[float, float]]:
    """(pooled harm, mean |harm| per run) of each INT-aware cell of congestion_fairness."""
    records = load_records([os.path.join(ROOT, CONGESTION_FAIRNESS)])
    out = []
    for loss in sorted({r["loss_pct"] for r in records}):
        for n in sorted({r["competitors"] for r in records if r.get("competitors")}):
            base = {r["loss_seed"]: r for r in records if r["loss_pct"] == loss and r["algorithm"] == f"kernel cubic vs {n}"}
            for alg in ("cubic-int L1", "cubic-int L2"):
                paired = [(r, base[r["loss_seed"]]) for r in records if r["loss_pct"] == loss
                          and r["algorithm"] == f"{alg} vs {n}" and r["loss_seed"] in base]
                if not paired:
                    continue
                per_run = [1 - r["competitor_goodput_mbps"] / b["competitor_goodput_mbps"]
                           for r, b in paired if b["competitor_goodput_mbps"] > 0]
                pooled = 1 - sum(r["competitor_goodput_mbps"] for r, _ in paired) / sum(
                    b["competitor_goodput_mbps"] for _, b in paired)
                out.append((pooled, statistics.mean(map(abs, per_run))))
    return out


def congestion_fairness_headline() -> str:
    harms = _neighbour_harms()
    pooled, absolute = [h for h, _ in harms], [a for _, a in harms]
    return (f"**Harm to neighbours**: beside 1 or 3 kernel cubic flows at 0–5 % link loss, an INT-aware flow "
            f"takes {_pct(min(pooled))[:-2]} to {_pct(max(pooled))} of their goodput (pooled per cell; "
            f"{_pct(min(absolute))[:-2]}–{_pct(max(absolute))} as a mean of absolute per-run harms) against a kernel "
            f"cubic flow in its place, on the same loss draws (`{provenance_of(_load(CONGESTION_FAIRNESS)).command}`; "
            f"the table in [docs/experiments.md](docs/experiments.md#results)).")


def congestion_fairness() -> str:
    """What an INT-aware flow takes from kernel-cubic neighbours: their goodput beside it
    against beside a kernel cubic flow, same loss draws; harm = 1 - that ratio."""
    records = load_records([os.path.join(ROOT, CONGESTION_FAIRNESS)])
    out = ["| link loss | neighbours | flow 1 | flow 1, Mbit/s | neighbours' goodput, Mbit/s | harm to the neighbours: "
           "signed (mean \\|harm\\| per run) |", "|---|---|---|---|---|---|"]
    for loss in sorted({r["loss_pct"] for r in records}):
        for n in sorted({r["competitors"] for r in records if r.get("competitors")}):
            base = {r["loss_seed"]: r for r in records
                    if r["loss_pct"] == loss and r["algorithm"] == f"kernel cubic vs {n}"}
            for alg in ("kernel cubic", "cubic-int L1", "cubic-int L2"):
                runs = [r for r in records if r["loss_pct"] == loss and r["algorithm"] == f"{alg} vs {n}"]
                if not runs:
                    continue
                g1 = statistics.mean(r["goodput_mbps"] for r in runs)
                gn = statistics.mean(r["competitor_goodput_mbps"] for r in runs)
                if alg == "kernel cubic":
                    harm = "(baseline)"
                else:
                    paired = [(r, base[r["loss_seed"]]) for r in runs if r["loss_seed"] in base]
                    per_run = [1 - r["competitor_goodput_mbps"] / b["competitor_goodput_mbps"]
                               for r, b in paired if b["competitor_goodput_mbps"] > 0]
                    pooled = 1 - sum(r["competitor_goodput_mbps"] for r, _ in paired) / sum(
                        b["competitor_goodput_mbps"] for _, b in paired)
                    harm = f"{_pct(pooled)} ({_pct(statistics.mean(map(abs, per_run)))})"
                out.append(f"| {loss:g} % | {n} kernel cubic | {alg} | {g1:.2f} | {gn:.2f} | {harm} |")
    out += ["", _source([CONGESTION_FAIRNESS])]
    return "\n".join(out)


# ---------------------------------------------------------------- fairness of switching


def _fairness_records() -> tuple[list, list]:
    switching = _glob(FAIRNESS_SWITCHING, exclude=FAIRNESS_RERUN)
    pairs = _glob(FAIRNESS_PAIRS)
    records = load_records([os.path.join(ROOT, p) for p in switching + pairs])
    records, _replaced = with_reruns(records, load_records([os.path.join(ROOT, FAIRNESS_RERUN)]))
    return records, switching + [FAIRNESS_RERUN] + pairs


def fairness() -> str:
    """Mean |D| per mode and competitor on the held-out networks, each adaptive mode's
    paired cut against 'not used' and gap to the oracle, and its harm to the competitor."""
    records, paths = _fairness_records()
    offline = fairness_report.offline_d(records, lambda r: os.path.dirname(r["source"]))
    rows = fairness_report.rows(records, offline)
    versus = fairness_report.comparisons(records)
    table = fairness_tables.format_markdown(rows, versus, ["mirror int w50", "best-response int w50"])
    return table + "\n\n" + _source(paths)


def fairness_headline() -> str:
    """One line for README: the cut of mirror int w50 averaged over the competitors, its
    gap to the oracle, and its harm (signed and absolute) over every network."""
    records, _paths = _fairness_records()
    mode = "mirror int w50"
    rows = [r for r in fairness_report.rows(records) if r["mode"] == mode]
    versus = fairness_report.comparisons(records)
    cut = next(r for r in versus if r["competitor"] == "all" and r["mode"] == mode)
    gaps = [r["gap_to_oracle"] for r in versus if r["mode"] == mode and "gap_to_oracle" in r]
    harms = [h for r in rows for h in r["harm_networks"]]
    bbr = next((r for r in versus if r["competitor"] == "bbr" and r["mode"] == mode), None)
    networks = sum(r["runs"] for r in rows)
    pooled = [r["harm"] for r in rows if r.get("harm") is not None]
    return (f"On {networks} dumbbell networks of seed 2617 (held out from the switching's development; two fixes "
            f"were made while it ran, and the adaptive modes' runs on its first 16 reno networks were run again after "
            f"the first, so it is no longer untouched), live switching (`{mode}`: the adaptive agent, mirror policy, vote over 50 "
            f"estimates, with the INT model trained on these networks' distribution, "
            f"`estimator/models/archive/cca_rf_int_t2.joblib`, not the default model) cuts mean |D| against a CCA "
            f"drawn at random by **{_pct(cut['cut_vs_not_used'])}** averaged over the four competitors (95 % CI "
            f"{_pct(cut['cut_ci'][0])[:-2]}–{_pct(cut['cut_ci'][1])})"
            + (f", {_pct(bbr['cut_vs_not_used'])} against BBR (the paper: 77.9 %)" if bbr else "")
            + f"; it stays {min(gaps):.2f}–{max(gaps):.2f} above the oracle's mean |D| per competitor. Its harm to "
            f"the competitor against the oracle's: mean {_pct(statistics.mean(harms))} signed and "
            f"**{_pct(statistics.mean(map(abs, harms)))} absolute** per network; averaged over the four "
            f"competitors' pooled harms, {_pct(statistics.mean(pooled))} signed and "
            f"{_pct(statistics.mean(map(abs, pooled)))} absolute (target: within 10 %: not met).")


def _active_fairness_table(pattern: str, versus: tuple) -> str:
    """The fairness table of a seed's records with active identification's rows and its
    paired gaps to the oracle and to ``versus``, and the records it came from."""
    paths = _glob(pattern)
    records = load_records([os.path.join(ROOT, p) for p in paths])
    table = fairness_tables.format_markdown(fairness_report.rows(records),
                                            fairness_report.comparisons(records, versus=versus), ["mirror active"])
    return table + "\n\n" + _source(paths)


def fairness_active() -> str:
    """Mean |D| of the oracle, passive mirror and active identification on the same fresh
    networks, active's gap to the oracle and to passive mirror (paired), and its harm."""
    return _active_fairness_table(FAIRNESS_ACTIVE, ("mirror int w50",))


def fairness_parity() -> str:
    """Active identification with the mirror held at the competitors' rate after the switch
    (--hold-parity) and without, beside the oracle, on the same fresh networks (paired)."""
    return _active_fairness_table(FAIRNESS_PARITY, ("mirror active no-parity", "mirror int w50"))


def fairness_heldout() -> str:
    """Active identification on 40 held-out networks (10 per competitor), beside the oracle
    and the passive mirror on the same networks (paired)."""
    return _active_fairness_table(FAIRNESS_HELDOUT, ("mirror int w50",))


def fairness_heldout_headline() -> str:
    """One sentence for the README: active identification against the oracle and the
    passive mirror on the held-out networks."""
    paths = _glob(FAIRNESS_HELDOUT)
    records = load_records([os.path.join(ROOT, p) for p in paths])
    versus = fairness_report.comparisons(records, versus=("mirror int w50",))
    mine = [v for v in versus if v["mode"] == "mirror active"]
    per = [v for v in mine if v["competitor"] != "all" and v.get("gap_to_oracle") is not None]
    worst = max(per, key=lambda v: v["gap_to_oracle"])
    both = next(v for v in mine if v["competitor"] == "all")["gap_to"]["mirror int w50"]
    networks = sum(v["gap_networks"] for v in per)
    return (f"**Active identification** (`--identify active`, the adaptive agent's default; "
            f"[docs/estimator.md](docs/estimator.md#held-out-40-fairness-networks)): on {networks} held-out "
            f"networks of `fairness_switching` (seed 2620), the agent that asks its competitor by pulsing "
            f"its own rate and reads the answer in INT has a mean |D| at most {max(worst['gap_to_oracle'], 0):.3f} "
            f"above the oracle's for every competitor (the largest beside {worst['competitor']}, paired 95 % CI "
            f"{worst['gap_ci'][0]:+.3f} to {worst['gap_ci'][1]:+.3f}; the target: within 0.05), and "
            f"{abs(both['gap']):.3f} {'below' if both['gap'] < 0 else 'above'} the passive mirror's (`mirror int w50`) "
            f"averaged over the four (paired CI {both['ci'][0]:+.3f} to {both['ci'][1]:+.3f}). " + _source(paths))


# ---------------------------------------------------------------- the estimator


def _score(name: str) -> dict:
    return _load(os.path.join(SCORES, name))


def _offline_row(label: str, name: str) -> str:
    s = _score(name)
    t = s["time_to_stable_correct"]["50"]
    med = "–" if t["median_s"] is None else f"{t['median_s']:.1f} s"
    return (f"| {label} | offline, {s['test_runs']} runs | {s['mean_accuracy']:.3f} | {s['table4']['50']['mean']:.3f} "
            f"| {t['runs_stable']:.0%} / {med} |")


def _live_row(label: str, name: str) -> str:
    s = _score(name)
    right = round(s["final_accuracy"] * s["live_runs"])
    med = "–" if s["median_stable_correct_s"] is None else f"{s['median_stable_correct_s']:.1f} s"
    return (f"| {label} | live, {s['live_runs']} runs | – | {s['final_accuracy']:.3f} ({right} of {s['live_runs']}) "
            f"| {s['stable_correct_runs'] / s['live_runs']:.0%} / {med} |")


def estimator() -> str:
    """The default model's scores on test seeds it never saw, with its targets."""
    with open(DEFAULT_MODEL + ".json") as f:
        card = json.load(f)
    targets = card.get("targets", {})
    scored = [  # (test networks, how the seed was used, record)
        ("seed 2804, the release's test seed", "scored once", "hard-v4_int_qcut_on_seed2804.json"),
        ("seed 2804, runs 0–31", "scored once", "hard-v4_int_qcut_live_seed2804.json"),
        ("seed 2806 with UDP cross traffic", "scored once", "hard-v4_int_qcut_on_seed2806-udp.json"),
        ("seed 2806 with UDP, runs 0–31", "scored once", "hard-v4_int_qcut_live_seed2806-udp.json"),
        ("seed 2806 with UDP, UDP flows left out of the competitors (today's code)",
         "development seed of that filter", "hard-v4_int_qcut_tcp-only_on_seed2806-udp.json"),
        ("seed 2806 without UDP (the same networks)", "scored once", "hard-v4_int_qcut_on_seed2806.json"),
    ]
    rows = [(_live_row if "_live_" in name else _offline_row)(f"{label} | {status}", name)
            for label, status, name in scored]
    names = [name for _l, _s, name in scored]
    out = ["| test networks (hard distribution) | the seed | scored | rows right | verdict right, w = 50 | runs ending "
           "on a stable correct verdict / median time from flow 1's start |", "|---|---|---|---|---|---|", *rows, "",
           f"Targets of this release: rows right {targets.get('mean_accuracy')}, verdict {targets.get('vote_w50')} "
           f"(not met). " + _source([os.path.join(SCORES, n) for n in names])]
    return "\n".join(out)


# ---------------------------------------------------------------- benchmarks


def forwarding_bench() -> str:
    """The INT node's forwarding rate and added latency beside kernel forwarding."""
    d = _load(FORWARDING_BENCH)
    kernel = d["kernel"]
    out = ["| node (INT insert + stamp, own core) | UDP pps, 1500 B (× kernel) | TCP Mbit/s | added RTT p50 at 1,000 ping/s |",
           "|---|---|---|---|"]
    for name, v in d["variants"].items():
        k = v.get("kernel_same_rounds", {})
        added = (f"{v['rtt_us_p50_1000hz'] - k['rtt_us_p50_1000hz']:.0f} µs"
                 if "rtt_us_p50_1000hz" in k else "–")
        out.append(f"| {name} | {v['udp_rx_pps']:,.0f} ({v['udp_rx_pps'] / kernel['udp_rx_pps']:.2f}×) "
                   f"| {v['tcp_mbps']:.0f} | {added} |")
    out.append(f"| kernel forwarding | {kernel['udp_rx_pps']:,.0f} | {kernel['tcp_mbps']:.0f} | |")
    out += ["", _source([FORWARDING_BENCH])]
    return "\n".join(out)


def fastpath_bench() -> str:
    """The node's tc BPF fast path beside the kernel forwarding the same traffic (tests/perf/bench_fastpath.py)."""
    d = _load(FASTPATH_BENCH)
    out = ["| n1 on the fast path | UDP pps, 1,500 B frames: fast path / kernel beside it (× per round) "
           "| TCP Mbit/s: fast path / kernel | added one-way p50 / p99 at 1,000 ping/s | target |",
           "|---|---|---|---|---|"]
    targets = {"transit": "≥ 0.9× pps, p50 ≤ 5 µs", "edge": "(none: the insertion's cost)"}
    for label, res in sorted(d["paths"].items(), key=lambda kv: not kv[0].startswith("transit")):
        sm = res["summary"]
        rounds = ", ".join(f"{x['pps_ratio']:.2f}" for x in res["rounds"])
        out.append(f"| {label} | {sm['fast_path_udp_pps_median']:,.0f} / {sm['kernel_udp_pps_median']:,.0f} = "
                   f"**{sm['pps_ratio_median']:.2f}×** ({rounds}) | {sm['fast_path_tcp_mbps_median']:,.0f} / "
                   f"{sm['kernel_tcp_mbps_median']:,.0f} ({sm['tcp_ratio_median']:.2f}×) | "
                   f"{sm['added_one_way_us_p50_1000hz']:.1f} / {sm['added_one_way_us_p99_1000hz']:.0f} µs | "
                   f"{targets[label.split()[0]]} |")
    py = d.get("python_node")
    if py:
        out.append(f"| the Python node (CPython), edge, for comparison | {py['udp_rx_pps']:,.0f} "
                   f"({py['pps_ratio_to_kernel_beside']:.2f}× the kernel beside it) | {py['tcp_mbps']:,.0f} | | |")
    out += ["", "Medians of interleaved rounds; latency from interleaved ping rounds (the p99 is the host's "
            "scheduling, kernel and fast path alike).", "", _source([FASTPATH_BENCH])]
    return "\n".join(out)


def datapath_bench() -> str:
    """The CCP datapath against native reno: throughput, daemon CPU, update latency."""
    with open(os.path.join(ROOT, DATAPATH_BENCH)) as f:
        text = f.read()
    head = text.splitlines()[0]

    def find(pattern):
        m = re.search(pattern, text)
        if not m:
            raise ValueError(f"{DATAPATH_BENCH}: no line matches {pattern!r}")
        return m.groups()
    ratio = find(r"paired by round, 95 % CI\): kernel fold ([\d.]+) \(([\d.]+)-([\d.]+)\)")
    clean = find(r"without a retransmission[^:]*: kernel fold ([\d.]+)")
    cores = find(r"daemon cores \(median\): kernel fold ([\d.]+).*per-ACK events ([\d.]+)")
    latency = find(r"applied in kernel[^:]*: p50 (\d+) us, p99 (\d+) us")
    out = ["| figure | value | target |", "|---|---|---|",
           f"| throughput, ccp (kernel fold) / native reno, 8 paired rounds | {ratio[0]} (95 % CI {ratio[1]}–{ratio[2]}) "
           f"| ≥ 0.95 |",
           f"| the same, median of the rounds without a retransmission | {clean[0]} | |",
           f"| daemon CPU, cores (per-ACK events instead of the fold) | {cores[0]} ({cores[1]}) | ≤ 0.03 |",
           f"| agent's update → cwnd applied in the kernel, p50 / p99 | {latency[0]} / {latency[1]} µs | p99 ≤ 500 µs |",
           "", f"Record: `{DATAPATH_BENCH}` ({head.lstrip('# ').strip()})"]
    return "\n".join(out)


def dashboard_bench() -> str:
    """Record to page, the server's CPU, and a busy node's page."""
    d = _load(DASHBOARD_BENCH)
    lat, many = d["published_to_drawn_s"], d["many_flows"]
    out = ["| figure | value | target |", "|---|---|---|",
           f"| record published → drawn on the page, {lat['records']} records ¼ s apart: p50 / p99 / max "
           f"| {lat['p50']:.3f} / {lat['p99']:.3f} / {lat['max']:.3f} s | p99 ≤ 1 s |",
           f"| the server's CPU at 1,000 flow + 200 hop records/s, the page open | {d['server_cpu_s_per_s']:.3f} cores | |",
           f"| {many['flows']:,} flows with {many['history_s']} s of history: a fresh page's first chart after "
           f"navigation | {many['first_chart_s']:.2f} s | ≤ 2 s |",
           f"| the same page: snapshot, charts, DOM nodes | {many['snapshot_bytes'] / 1e6:.1f} MB, {many['charts']} "
           f"charts, {many['dom_nodes']:,} nodes | |",
           "", _source([DASHBOARD_BENCH])]
    return "\n".join(out)


DRAGONFLY_EVALS = "data/estimator/dragonfly/eval-*.json"


def dragonfly_models() -> str:
    """Dragonfly models scored on held-out captures (``intcc estimator dragonfly eval``)."""
    paths = _glob(DRAGONFLY_EVALS)
    out = ["| model | trained on | interval | held-out flows (sub-intervals) | macro F1 (95 % CI over flows) "
           "| F1 per class |", "|---|---|---|---|---|---|"]
    for p in paths:
        r = _load(p)
        meta = r["model_meta"]
        ci = r["macro_f1_ci95_by_flow"]
        out.append(f"| `{os.path.basename(r['model'])}` | {meta.get('flows', '?')} flows of "
                   f"{', '.join('`' + os.path.basename(t) + '`' for t in meta.get('trained_on', '').split())} "
                   f"| {r['interval_ms'] / 1000:g} s | {r['flows']} ({r['frames']}) of "
                   f"{', '.join('`' + os.path.basename(t.rstrip('/')) + '`' for t in r['results'])} "
                   f"| {r['macro_f1']:.2f} ({ci[0]:.2f}–{ci[1]:.2f}) "
                   f"| {', '.join(f'{c} {v:.2f}' for c, v in r['f1'].items())} |")
    return "\n".join(out + ["", _source(paths)])


# ---------------------------------------------------------------- RTT separation
RTT_SEPARATION = "data/experiments/rtt_separation-seed*.json"
RTT_SEPARATION_UDP = "data/experiments/rtt_separation_udp-seed*.json"
RTT_SEPARATION_FOUR = "data/experiments/rtt_separation_four-seed*.json"
SEPARATION_BENCH = "data/bench/separation-2*.json"
SEPARATION_FASTPATH_BENCH = "data/bench/separation_fastpath-*.json"
RTT_SEPARATION_FCT = "data/experiments/fct_replay-*.json"
RTT_SEPARATION_ADAPTIVE = "data/experiments/rtt_separation_adaptive-seed*.json"


def separation_section() -> str:
    """Jain's index of two flows, one FIFO against RTT separation on the same networks; the
    share TCP keeps beside a UDP flood; the node's RTT against the senders'."""
    from experiments.reports import separation
    paths, udp_paths = _glob(RTT_SEPARATION), _glob(RTT_SEPARATION_UDP)
    records = load_records([os.path.join(ROOT, p) for p in paths])
    table = separation.rows(records)
    off = sum(r["emulation_off"] for r in table if "ratio_bin" not in r and r["algorithm"] != "all")
    out = [separation.format_markdown(table), "",
           f"Jain over each whole 30 s run; networks paired, 95 % bootstrap intervals over networks; "
           f"runs whose host fell behind its emulation (emulation_off): {off} of {2 * sum(r['n'] for r in table if 'ratio_bin' not in r and r['algorithm'] != 'all')}. "
           + _source(paths)]
    if udp_paths:
        udp_records = load_records([os.path.join(ROOT, p) for p in udp_paths])
        udp_table = separation.udp_rows(udp_records)
        out += ["", "Beside a UDP flood at twice the link (`rtt_separation_udp`): the TCP flows' goodput over "
                    "their fair share (target ≥ 0.9):", "", separation.format_udp_markdown(udp_table), "",
                f"The flood starts a second after the TCP flows and covers at least "
                f"{separation.MIN_FLOOD_OVERLAP:.0%} of flow 1's time in every run counted (left out: "
                f"{sum(r['flood_missed'] for r in udp_table)})."]
        alone = [r for r in udp_records if not r.get("udp_cross_mbps")]
        if alone:
            out += ["", "The same scenario's networks without the flood (Jain of the two TCP flows, RTT ratios "
                        "as drawn, 1.4–20×):", "", separation.format_markdown(separation.rows(alone))]
        accuracy = separation.rtt_accuracy(udp_records + records)
        if accuracy:
            out += ["", f"Passive RTT at the node against each sender's own minimum RTT (`ss`), {accuracy['flows']} "
                        f"flows of the separated runs: median |error| {accuracy['median_abs_ms']:.2f} ms = "
                        f"{accuracy['median_abs_pct']:.1f} % (signed mean {accuracy['mean_ms']:+.2f} ms, largest "
                        f"{accuracy['max_abs_ms']:.2f} ms); within 5 % or 1 ms: {accuracy['within_target']} of "
                        f"{accuracy['flows']} (target: median ≤ 5 % or ≤ 1 ms)."]
        out += ["", _source(udp_paths)]
    return "\n".join(out)


def separation_four() -> str:
    """The paper's Test 1: four flows of one CCA, RTTs 2, 20, 40 and 60 ms, FIFO against 4
    queues; each flow's queueing delay each way (bufferbloat) where the records have it, and
    the node's RTT against the senders' per record (a record is of one version of FlowRTT)."""
    from experiments.reports import separation
    paths = _glob(RTT_SEPARATION_FOUR)
    records = load_records([os.path.join(ROOT, p) for p in paths])
    table = separation.rows(records)
    runs = [r for r in records if "separation" in r and not r.get("error")]
    off = sum(1 for r in runs if r.get("emulation_off"))
    out = [separation.format_markdown(table), "",
           f"Jain of the four goodputs over each whole 30 s run; flow 1 (the 60 ms one) has a fair share of 0.25; "
           f"repeats paired, 95 % bootstrap intervals over repeats; runs whose host fell behind its emulation "
           f"(emulation_off): {off} of {len(runs)}."]
    scored = []
    for p in paths:
        accuracy = separation.rtt_accuracy(load_records([os.path.join(ROOT, p)]))
        if accuracy:
            seed = re.search(r"seed(\d+)", p).group(1)
            scored.append(f"seed {seed}: median |error| {accuracy['median_abs_ms']:.2f} ms = "
                          f"{accuracy['median_abs_pct']:.1f} % over {accuracy['flows']} flows, largest "
                          f"{accuracy['max_abs_ms']:.2f} ms")
    if scored:
        out[-1] += f" The node's RTT against each sender's own minimum (`ss`), flows of 2–60 ms: {'; '.join(scored)}."
    queueing = separation.queueing_rows(records)
    if queueing:
        n = len({r.get("seed") for r in records if r.get("queueing_ms")})
        out += ["", "Each flow's queueing delay at the bottleneck (bufferbloat; the INT transit delay above the "
                    f"flow's least, mean over the run; networks paired; {n} seed{'s' if n > 1 else ''} recorded it):",
                "", separation.format_queueing_markdown(queueing)]
    return "\n".join(out + ["", _source(paths)])


def separation_headline() -> str:
    """One line for README: all networks' Jain, FIFO against separated, and the target."""
    from experiments.reports import separation
    paths = _glob(RTT_SEPARATION)
    table = separation.rows(load_records([os.path.join(ROOT, p) for p in paths]))
    a = next(r for r in table if r["algorithm"] == "all")
    lo, hi = a["relative_ci"]
    seeds = ", ".join(re.search(r"seed(\d+)", p).group(1) for p in paths)
    return (f"On {a['n']} drawn dumbbell networks (seed {seeds}; two flows of one CCA, CUBIC or BBR, RTT ratio "
            f"{a['rtt_ratio_min']:.1f}–{a['rtt_ratio_max']:.0f}×), Jain's index of the two flows goes from "
            f"**{a['fifo_mean']:.3f}** through one FIFO to **{a['separated_mean']:.3f}** with RTT separation into 4 "
            f"queues ({100 * a['relative']:+.1f} %, 95 % CI {100 * lo:+.1f} to {100 * hi:+.1f} %; the paper: +15 %); "
            f"{a['separated_at_target']} of {a['n']} separated runs reach 0.95, against {a['fifo_at_target']} through "
            f"the FIFO (`intcc exp run rtt_separation --seed S`)." + _separation_more_headline())


def _separation_more_headline() -> str:
    """The flood and four-flow results in a sentence each, where their records are."""
    from experiments.reports import separation
    out = ""
    udp_paths, four_paths = _glob(RTT_SEPARATION_UDP), _glob(RTT_SEPARATION_FOUR)
    if udp_paths:
        table = separation.udp_rows(load_records([os.path.join(ROOT, p) for p in udp_paths]))
        sep = [r for r in table if r["separated"]]
        fifo = [r for r in table if not r["separated"]]
        if sep and fifo:
            out += (f" Beside a UDP flood at twice the link the TCP flows keep "
                    f"{min(r['kept_min'] for r in sep):.2f}–{max(r['kept_mean'] for r in sep):.2f} of their fair share "
                    f"separated ({sum(r['at_target'] for r in sep)} of {sum(r['n'] for r in sep)} networks ≥ 0.9), "
                    f"{max(r['kept_mean'] for r in fifo):.2f} through the FIFO.")
    if four_paths:
        a = next(r for r in separation.rows(load_records([os.path.join(ROOT, p) for p in four_paths]))
                 if r["algorithm"] == "all")
        out += (f" Four flows of 2, 20, 40 and 60 ms: Jain {a['fifo_mean']:.3f} through the FIFO, "
                f"{a['separated_mean']:.3f} separated")
        queueing = separation.queueing_rows(load_records([os.path.join(ROOT, p) for p in four_paths]))
        shortest = [r for r in queueing if r["base_rtt_ms"] == min(q["base_rtt_ms"] or 0 for q in queueing)]
        out += ("; the shortest flow's queueing delay " + ", ".join(
            f"{r['fifo_mean_ms']:.0f} → {r['separated_mean_ms']:.0f} ms ({r['algorithm'].split()[0].upper()})"
            for r in shortest) + "." if shortest else ".")
    fct_paths = _glob(RTT_SEPARATION_FCT)
    if fct_paths:
        from experiments.reports import fct
        table = fct.rows([_load(p) for p in fct_paths])
        flat = all(r["change_ci_pct"][0] <= 0 <= r["change_ci_pct"][1] for r in table)
        n = sum(r["flows"] for r in table[:1])
        traces = "a held-out trace" if len(fct_paths) == 1 else f"{len(fct_paths)} held-out traces"
        out += (f" Over {traces} of long transfers ({n} of them) the mean flow completion time "
                + ("does not move measurably: " if flat else "changes by ") + ", ".join(
            f"{r['change_pct']:+.1f} % with {r['cca'].upper()} (CI {r['change_ci_pct'][0]:+.1f} to "
            f"{r['change_ci_pct'][1]:+.1f} %)" for r in table)
            + " (the paper: −20 %)" + ("; it moves between RTT quartiles instead." if flat else "."))
    fast_paths = _glob(SEPARATION_FASTPATH_BENCH)
    if fast_paths:
        f = _load(fast_paths[-1])["summary"]
        python = _glob(SEPARATION_BENCH)
        in_python = f"; the Python node {_load(python[-1])['forwarding']['ratio']:.2f}×" if python else ""
        out += (f" On a node's tc BPF fast path a port with 4 separated queues forwards {f['pps_ratio_median']:.2f}× "
                f"the packets of one queue (the target: ≥ 0.85×{in_python}).")
    return out


def separation_fct() -> str:
    """The paper's Test 4: a long-flow trace replayed through one FIFO and separated."""
    from experiments.reports import fct
    paths = _glob(RTT_SEPARATION_FCT)
    summaries = [_load(p) for p in paths]
    table = fct.rows(summaries)
    lost = {k: n for k, n in fct.failed(summaries).items() if n}
    traces = sorted({f"`{s['trace']['path']}` ({s['trace']['flows']} transfers)" for s in summaries})
    out = [fct.format_markdown(table), "",
           f"Trace{'s' if len(traces) > 1 else ''} {', '.join(traces)}; every transfer run both ways, paired by flow, "
           f"95 % bootstrap intervals over transfers; unfinished transfers (left out): "
           f"{', '.join(f'{c} K={k}: {n}' for (c, k), n in sorted(lost.items())) if lost else 'none'}. "
           f"By the testbed's RTT quartile (each a pair of hosts):", "", fct.format_pair_markdown(table)]
    return "\n".join(out + ["", _source(paths)])


def separation_adaptive() -> str:
    """RTT separation and the INT-aware sender together, over a lossy bottleneck."""
    from experiments.reports import separation
    paths = _glob(RTT_SEPARATION_ADAPTIVE)
    records = load_records([os.path.join(ROOT, p) for p in paths])
    runs = [r for r in records if "separation" in r and not r.get("error")]
    off = sum(1 for r in runs if r.get("emulation_off"))
    return "\n".join([separation.format_goodput_markdown(separation.goodput_rows(records)), "",
                      f"Goodput over each whole 30 s run, means over networks with 95 % bootstrap intervals; Jain of "
                      f"the two flows; runs whose host fell behind its emulation (emulation_off): {off} of {len(runs)}.",
                      "", _source(paths)])


def separation_bench() -> str:
    """RTT separation's forwarding cost and re-clustering time (tests/perf/bench_separation.py)."""
    paths = _glob(SEPARATION_BENCH)
    d = _load(paths[-1])
    fwd = d["forwarding"]
    out = ["| figure | value | target |", "|---|---|---|",
           f"| element path, batches, {len(next(iter(fwd['pps'].values())))} interleaved rounds: single queue / "
           f"RTT separation (4 queues, DRR, control loop) | {fwd['median_pps']['single queue']:,.0f} / "
           f"{fwd['median_pps']['RTT separation']:,.0f} pps: **{fwd['ratio']:.2f}×** | ≥ 0.85× |"]
    pypy = d.get("forwarding_pypy")
    if pypy:
        out.append(f"| the same under PyPy, each variant in {len(pypy['pps']['single queue'])} processes of its own "
                   f"(rounds after the first {pypy['warmup_rounds']}) | {pypy['median_pps']['single queue']:,.0f} / "
                   f"{pypy['median_pps']['RTT separation']:,.0f} pps: **{pypy['ratio']:.2f}×** | ≥ 0.85× |")
    fast_paths = _glob(SEPARATION_FASTPATH_BENCH)
    if fast_paths:
        f = _load(fast_paths[-1])
        s = f["summary"]
        out.append(f"| the fast path (tc BPF, `--fast-path`), {len(f['rounds'])} interleaved rounds: a single queue / RTT "
                   f"separation ({f['queues']} queues: the RTTs and the split in the programs, HTB, the control loop "
                   f"on the maps), UDP through n1 and a forwarding n2 | {s['single_udp_pps_median']:,.0f} / "
                   f"{s['separated_udp_pps_median']:,.0f} pps: **{s['pps_ratio_median']:.2f}×** (rounds "
                   f"{min(x['pps_ratio'] for x in f['rounds']):.2f}–{max(x['pps_ratio'] for x in f['rounds']):.2f}); "
                   f"TCP {s['single_tcp_mbps_median']:,.0f} / {s['separated_tcp_mbps_median']:,.0f} Mbit/s: "
                   f"{s['tcp_ratio_median']:.2f}× | ≥ 0.85× |")
    for r in d["reclustering"]:
        theirs = f"; jenkspy on every value {r['jenkspy_s'] * 1e3:,.0f} ms" if r.get("jenkspy_s") is not None else ""
        out.append(f"| re-clustering {r['flows']:,} flows ({r['distinct_rtts']:,} distinct RTTs at 0.1 ms): Jenks / "
                   f"a whole control round | {r['jenks_s'] * 1e3:,.1f} / {r['control_round_s'] * 1e3:,.1f} ms{theirs} | |")
    out += ["", _source(paths[-1:] + fast_paths[-1:])]
    return "\n".join(out)


CLUSTER_BENCH = "data/bench/cluster-*.json"


def cluster_bench() -> str:
    """The Ray cluster's cost against the local runner, and the fairness evaluation's
    projection (tests/perf/bench_cluster.py)."""
    paths = _glob(CLUSTER_BENCH)
    d = _load(paths[-1])
    fr, hours = d["fairness"], d["projection_hours"]
    ten = next(k for k in hours if k.endswith("_hosts"))
    out = ["| figure | value | target |", "|---|---|---|",
           f"| {d['runs']} runs of {d['run_seconds']:g} s on one testbed: local `--jobs 1` / a cluster of one node "
           f"(its workers' start included) | {d['local_jobs1_s']:.1f} / {d['cluster_1x1_s']:.1f} s: "
           f"**{d['overhead_per_run_s']:+.2f} s per run** | ≤ 2 s per run |",
           f"| the same on two testbeds: local `--jobs 2` / two nodes of one testbed each (one machine) | "
           f"{d['runs_per_hour']['local_jobs2']:,} / {d['runs_per_hour']['cluster_2x1']:,} runs per hour | |",
           f"| a run's fixed cost (wall less flow time, `--jobs 1`); a dumbbell built and taken down | "
           f"{d['fixed_per_run_s']:.2f} s; {d['testbed_build_s']:.2f} s | |",
           f"| the fairness evaluation of seed 2617 ({fr['runs']:,} runs, {fr['networks']} networks, "
           f"{fr['flow_s'] / 3600:.1f} h of flows; run at `--jobs 2`, links behind in {fr['emulation_off']} runs), "
           f"projected: one 2-core host / {ten.split('_')[0]} such hosts of 2 testbeds | "
           f"{hours['one_host_jobs2']:.1f} h / **{hours[ten]:.2f} h** | |"]
    out += ["", _source(paths[-1:])]
    return "\n".join(out)


# ---------------------------------------------------------------- path reconfiguration
RECONFIGURATION = "data/experiments/reconfiguration-seed*.json"
RECONFIGURATION_DOWNTIME = "data/experiments/reconfiguration_downtime-seed*.json"
RECONFIGURATION_GRID = "data/experiments/reconfiguration_grid-seed*.json"
RECONFIG_FCT_SCORES = "data/estimator/scores/reconfig_fct_rf_held_out_configurations.json"
RECONFIG_FCT_DENSE_SCORES = "data/estimator/scores/reconfig_fct_rf_dense_seed.json"
# the latest held-out check: settings no record in the forest's data had, run after it was fitted
RECONFIG_FCT_BETWEEN_SCORES = "data/estimator/scores/reconfig_fct_cliff_between_seed7601_paper.json"
RECONFIG_VARIANT_SCORES = "data/estimator/scores/reconfig_variant_rf.json"
# one seed's runs (pairing is by repeat): the current cubic-int's; seed 7102's record is the
# version before its minimum RTO followed announced downtimes (CHANGELOG, 2026-12-05)
RECONFIGURATION_INT = "data/experiments/reconfiguration_int-seed7107-2026-12-05.json"


def _reconfig_table(pattern: str, what: str) -> str:
    from experiments.reports import reconfig
    paths = _glob(pattern)
    if not paths:
        return f"(no {what} record yet: see the commands above)"
    records = reconfig.load([os.path.join(ROOT, p) for p in paths])
    off = sum(bool(r.get("emulation_off")) for r in records)
    return "\n".join([reconfig.format_markdown(reconfig.rows(records)), "",
                      f"Means over repeats with 95 % bootstrap intervals; the prolongation is each repeat's FCT "
                      f"against the same repeat without reconfiguration; runs whose host fell behind its "
                      f"emulation (emulation_off): {off} of {len(records)}. " + _source(paths)])


def reconfiguration() -> str:
    """Two flows of one CCA, one migrated every period (no downtime): each flow's goodput, the
    migrated flow's share and its FCT of 10 MB against none."""
    return _reconfig_table(RECONFIGURATION, "reconfiguration")


def reconfiguration_downtime() -> str:
    """Two CUBIC flows, the migrated one with a downtime of a tenth of the period at each move."""
    return _reconfig_table(RECONFIGURATION_DOWNTIME, "reconfiguration_downtime")


def reconfiguration_grid() -> str:
    """CUBIC, Reno and BBR pairs, every period with every shorter downtime (Table I)."""
    return _reconfig_table(RECONFIGURATION_GRID, "reconfiguration_grid")


def _fct_held_out_check(rel_path: str, lead) -> list[str]:
    """A reconfig-fct --held-out evaluation's line (none before its record exists): what
    ``lead(evaluation)`` says was fitted and scored, then its scores and provenance."""
    path = os.path.join(ROOT, rel_path)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        ev = json.load(f)
    h, prov = ev["held_out"], ev["provenance"]
    return ["", f"{lead(ev)}: R² {h['r2']:.2f}, MSE {h['mse_s2']:.1f} s², MAE {h['mae_s']:.2f} s on "
            f"{h['configurations']} configurations. Record: `{rel_path}`: {prov['date']}, {prov['commit']}, "
            f"`{prov['command']}`"]


def reconfiguration_fct_model() -> str:
    """The FCT-prolongation forest's out-of-fold scores (configurations held out whole, the
    paper's random folds, the shuffled control) and its worst held-out configurations."""
    path = os.path.join(ROOT, RECONFIG_FCT_SCORES)
    if not os.path.exists(path):
        return "(no reconfig-fct evaluation yet: see the commands above)"
    with open(path) as f:
        ev = json.load(f)
    from estimator.reconfig.fct import format_scores
    out = [format_scores(ev)]
    worst = sorted(ev["per_configuration"], key=lambda p: -abs(p["measured_s"] - p["predicted_s"]))[:5]
    out += ["", "| held-out configuration (migrated/main/period ms/downtime ms) | runs | measured s | predicted s |",
            "|---|---|---|---|"]
    out += [f"| {p['configuration']} | {p['runs']} | {p['measured_s']:+.1f} | {p['predicted_s']:+.1f} |" for p in worst]
    prov = ev["provenance"]
    out += ["", f"{ev['configurations']} configurations, transfers of {ev['size_mb']:g} MB, nights of at most "
            f"{100 * ev['max_night_share']:g} % of the period; the five configurations predicted worst when held out. "
            f"Record: `{RECONFIG_FCT_SCORES}`: {prov['date']}, {prov['commit']}, `{prov['command']}`"]
    out += _fct_held_out_check(RECONFIG_FCT_DENSE_SCORES, lambda ev: (
        f"Before the dense sweep was in it: the forest of the other records, {ev['grouped']['rows']} runs "
        f"(configurations held out whole: R² {ev['grouped']['r2']:.2f}), scored on the sweep's configurations of "
        f"another seed"))
    out += _fct_held_out_check(RECONFIG_FCT_BETWEEN_SCORES, lambda ev: (
        f"Settings between the cliff sweep's, on another seed, scored by the forest of the other records "
        f"({ev['grouped']['rows']} runs)"))
    return "\n".join(out)


def reconfiguration_variant_model() -> str:
    """The TCP-variant forest's scores (runs, settings, windows held out; another seed's runs;
    the shuffled control) and the held-out seed's confusion matrix beside the paper's Table III."""
    path = os.path.join(ROOT, RECONFIG_VARIANT_SCORES)
    if not os.path.exists(path):
        return "(no reconfig-variant evaluation yet: see the commands above)"
    with open(path) as f:
        ev = json.load(f)
    from estimator.reconfig.variant import format_confusion, format_scores
    shown = "held_out" if "held_out" in ev else "by_run"
    prov = ev["provenance"]
    quiet = ev["by_run"]["quiet_windows"]
    return "\n".join([
        format_scores(ev), "",
        format_confusion(ev[shown]), "",
        f"Windows of {ev['window_s']:g} s; {ev['runs']} runs in the folds ({ev['settings']} settings); windows "
        f"with fewer than {ev['min_acks']} ACKs left out ({quiet} in the folds"
        + (f", {ev['held_out']['quiet_windows']} of the other seed's" if "held_out" in ev else "") + "). "
        f"Confusion matrix: {'the other seed' if shown == 'held_out' else 'runs held out'}, rows the actual CCA. "
        f"Record: `{RECONFIG_VARIANT_SCORES}`: {prov['date']}, {prov['commit']}, `{prov['command']}`"])


def reconfiguration_int() -> str:
    """The migrated flow as kernel CUBIC or cubic-int beside a kernel CUBIC main flow, under
    reconfigurations with a downtime: each run's table, then cubic-int paired with kernel
    CUBIC repeat by repeat."""
    from experiments.reports import reconfig
    paths = _glob(RECONFIGURATION_INT)
    if not paths:
        return "(no reconfiguration_int record yet: see the commands above)"
    records = reconfig.load([os.path.join(ROOT, p) for p in paths])
    off = sum(bool(r.get("emulation_off")) for r in records)
    return "\n".join([reconfig.format_markdown(reconfig.rows(records)), "",
                      reconfig.format_paired_markdown(reconfig.paired(records, "kernel cubic")), "",
                      f"Means over repeats with 95 % bootstrap intervals; paired: the same repeat (seed) of both; "
                      f"prolongation from goodput, 100 (g_none / g − 1), against the algorithm's own run without "
                      f"reconfiguration; runs whose host fell behind its emulation (emulation_off): {off} of "
                      f"{len(records)}. " + _source(paths)])


SECTIONS: Dict[str, Callable[[], str]] = {
    "lossy-link": lossy_link,
    "cubic-fidelity": cubic_fidelity,
    "congestion-fairness": congestion_fairness,
    "congestion-fairness-headline": congestion_fairness_headline,
    "fairness": fairness,
    "fairness-headline": fairness_headline,
    "fairness-active": fairness_active,
    "fairness-parity": fairness_parity,
    "fairness-heldout": fairness_heldout,
    "fairness-heldout-headline": fairness_heldout_headline,
    "estimator": estimator,
    "forwarding-bench": forwarding_bench,
    "fastpath-bench": fastpath_bench,
    "datapath-bench": datapath_bench,
    "dashboard-bench": dashboard_bench,
    "dragonfly-models": dragonfly_models,
    "separation": separation_section,
    "separation-four": separation_four,
    "separation-fct": separation_fct,
    "separation-adaptive": separation_adaptive,
    "separation-headline": separation_headline,
    "separation-bench": separation_bench,
    "cluster-bench": cluster_bench,
    "reconfiguration": reconfiguration,
    "reconfiguration-downtime": reconfiguration_downtime,
    "reconfiguration-int": reconfiguration_int,
    "reconfiguration-grid": reconfiguration_grid,
    "reconfiguration-fct-model": reconfiguration_fct_model,
    "reconfiguration-variant-model": reconfiguration_variant_model,
}
