"""How soon active identification has evidence, replayed on recorded runs (a development tool
of 2026-12-07): identify_replay over every run of the given results, in parallel, with the
Identifier's constants overridden (``--set NAME=VALUE``, e.g. STARTUP_S=0.5), and a summary
of what the issue's targets ask about time: the most likely hypothesis at 1/2/3/5/10 s after
the competitor's first packet (right, wrong, or none yet: the uniform prior), the first
commit right within 3 s and 8 s, wrong first commits, and the best at the end.

    python -m lab.estimator.early_evidence RESULTS_DIR [...] [--set NAME=VALUE ...] [--json-out F]
    python -m lab.estimator.early_evidence --table F [F ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from multiprocessing import Pool

CHECKS_S = ("1.0", "2.0", "3.0", "5.0", "10.0")


def _override(sets):
    from estimator.identify import identifier
    for name, value in sets:
        if not hasattr(identifier, name):
            raise SystemExit(f"estimator.identify.identifier has no {name}")
        setattr(identifier, name, type(getattr(identifier, name))(value))


def _one(job):
    run_dir, record, sets, competitor_rtt, forest_model = job
    _override(sets)
    from lab.estimator.identify_replay import replay
    # --set FOREST_MODEL=... (the records before --forest) names the model as --forest does
    forest_model = None if any(name == "FOREST_MODEL" for name, _ in sets) else forest_model
    return replay(run_dir, record, competitor_rtt=competitor_rtt, forest_model=forest_model)


def jobs_of(results, sets, competitor_rtt: str = "measured", forest_model: str = ""):
    from lab.estimator.identify_replay import recorded_runs
    return [(run_dir, record, sets, competitor_rtt, forest_model)
            for run_dir, record in recorded_runs(results, algorithm="mirror active")]


def summary(rows) -> dict:
    rows = [r for r in rows if "error" not in r]
    n = len(rows)
    s = {"runs": n}
    for c in CHECKS_S:
        right = wrong = none = 0
        for r in rows:
            post = r["posterior_at"].get(c)
            if post is None or max(post.values()) - min(post.values()) < 1e-6:
                none += 1
            elif post[r["truth"]] == max(post.values()) and sum(v == max(post.values()) for v in post.values()) == 1:
                right += 1
            else:
                wrong += 1              # a tie at the top counts wrong, as identify_table's
        s[f"best_{c}s"] = [right, wrong, none]
    within3 = within8 = wrong_first = 0
    for r in rows:
        commit = r["first_commit"]
        if commit is None or r.get("competitor_at_s") is None:
            continue
        after = commit[0] - r["competitor_at_s"]
        if commit[1] == r["truth"]:
            within3 += after <= 3.0
            within8 += after <= 8.0
        else:
            wrong_first += 1
    s.update(commit_right_3s=within3, commit_right_8s=within8, wrong_first_commits=wrong_first,
             final_best_right=sum(r["final_best"] == r["truth"] for r in rows),
             first_commit_right=sum(r["first_commit"] is not None and r["first_commit"][1] == r["truth"] for r in rows),
             # the final verdict: committed at the end and right (undecided counts wrong)
             final_verdict_right=sum(r.get("final_verdict") == r["truth"] for r in rows))
    return s


def table(paths) -> str:
    lines = ["| variant | code | runs | best right / wrong / none at " + " / ".join(f"{float(c):g} s" for c in CHECKS_S)
             + " | commit right within 3 s / 8 s | wrong first commits | first commit right | committed at the end right"
             " | best at the end right |",
             "|---" * 9 + "|"]
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        s = summary(d["runs"])        # from the runs, as this version counts
        rtt = d.get("competitor_rtt", "flow1")       # records before the option read every RTT as flow 1's
        forest = d.get("forest")            # records before the forest stage have none
        forest = [] if forest is None else [f"forest {'none' if forest == 'none' else os.path.basename(forest)}"]
        name = ", ".join([f"{k}={v}" for k, v in d["sets"]] + ([f"competitors' RTT {rtt}"] if rtt != "flow1" else [])
                         + forest) or "as shipped"
        lines.append(f"| {name} | {d['provenance']['commit'][:7]} | {s['runs']} | " + "; ".join("/".join(map(str, s[f'best_{c}s'])) for c in CHECKS_S)
                     + f" | {s['commit_right_3s']} / {s['commit_right_8s']} | {s['wrong_first_commits']} | "
                     f"{s['first_commit_right']} | {s['final_verdict_right']} | {s['final_best_right']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="*")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="an estimator.identify.identifier constant for this replay")
    ap.add_argument("--competitor-rtt", choices=("measured", "flow1", "oracle"), default="measured",
                    help="the competitors' base RTT (identify_replay's): as live, flow 1's, or the run's own")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json-out")
    ap.add_argument("--table", nargs="+", metavar="JSON")
    from lab.estimator.identify_replay import add_forest_option, forest_arg
    add_forest_option(ap)
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if not args.results:
        ap.error("give results directories, or --table")
    sets = [tuple(x.split("=", 1)) for x in args.set]
    jobs = jobs_of(args.results, sets, args.competitor_rtt, forest_arg(args.forest))
    rows = []
    with Pool(args.jobs) as pool:
        for i, row in enumerate(pool.imap_unordered(_one, jobs), 1):
            rows.append(row)
            if i % 20 == 0 or i == len(jobs):
                print(f"{i}/{len(jobs)} runs replayed", file=sys.stderr, flush=True)
    s = summary(rows)
    print(json.dumps(s))
    if args.json_out:
        from records.provenance import stamp
        made = stamp()
        with open(args.json_out, "w") as f:
            json.dump({"provenance": made, "results": args.results, "sets": sets,
                       "competitor_rtt": args.competitor_rtt, "forest": args.forest, "summary": s, "runs": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
