"""What UDP cross traffic costs the estimator, on the same networks (a study of 2026-11-30)

A collection with ``--udp-cross`` and one without are the same networks (run_plan draws the
UDP rate on a stream of its own), and half the runs of the first have no UDP. Given a
model's ``eval --json-out`` on both, per run (share of its rows right; the final verdict at
w = 50):

  with UDP     the runs that had UDP in the first: with minus without, paired
  A/A control  the runs that had none in either: the same network collected twice, whose
               difference is the emulation's run-to-run noise alone (must straddle 0)

each with a bootstrap 95 % CI, overall and per competitor.

    python -m lab.estimator.udp_effect --with-udp EVAL.json --without-udp EVAL.json [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from lab.estimator import paired


def per_run(path: str) -> dict:
    runs = json.load(open(path)).get("runs")
    if runs is None:
        raise SystemExit(f"{path}: no per-run results (an eval --json-out without per-run results: written before they were kept)")
    return {(r["seed"], r["index"]): r for r in runs}


def effect(with_udp: dict, without: dict) -> dict:
    common = sorted(set(with_udp) & set(without))
    groups = {"with UDP": [k for k in common if with_udp[k]["udp"] == "with UDP"],
              "A/A control": [k for k in common if with_udp[k]["udp"] == "no UDP"]}
    out = {}
    for name, keys in groups.items():
        for comp in (None, "bbr", "cubic", "reno", "vegas"):
            ks = [k for k in keys if comp is None or with_udp[k]["cca2"] == comp]
            if not ks:
                continue
            rows = paired({k: without[k]["rows_right"] for k in ks}, {k: with_udp[k]["rows_right"] for k in ks})
            verdict = paired({k: float(without[k]["verdict_w50"]) for k in ks},
                             {k: float(with_udp[k]["verdict_w50"]) for k in ks})
            out[f"{name}, competitor {comp}" if comp else name] = {
                "runs": len(ks), "rows_right_without": float(np.mean([without[k]["rows_right"] for k in ks])),
                "rows_right_with": float(np.mean([with_udp[k]["rows_right"] for k in ks])),
                "rows_right_paired": rows,
                "verdict_without": float(np.mean([without[k]["verdict_w50"] for k in ks])),
                "verdict_with": float(np.mean([with_udp[k]["verdict_w50"] for k in ks])), "verdict_paired": verdict}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--with-udp", required=True, help="eval --json-out on the collection with --udp-cross")
    ap.add_argument("--without-udp", required=True, help="... on the same seed and distribution without it")
    ap.add_argument("--out", help="write the figures here (JSON)")
    args = ap.parse_args(argv)
    res = effect(per_run(args.with_udp), per_run(args.without_udp))
    print("runs, rows right without / with, paired (95 % CI); final verdict without / with, paired (95 % CI)")
    for name, g in res.items():
        r, v = g["rows_right_paired"], g["verdict_paired"]
        print(f"  {name:32s}{g['runs']:4d}  {g['rows_right_without']:.3f} / {g['rows_right_with']:.3f} "
              f"{r['mean']:+.3f} ({r['ci95'][0]:+.3f} to {r['ci95'][1]:+.3f});  {g['verdict_without']:.2f} / "
              f"{g['verdict_with']:.2f} {v['mean']:+.2f} ({v['ci95'][0]:+.2f} to {v['ci95'][1]:+.2f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
