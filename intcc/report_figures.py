"""The docs' figures, drawn from the same committed records as their tables."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import List

from experiments.reports import fairness_plots
from experiments.reports.compare import load_records
from experiments.reports.plots import plot_summary

from .report_sections import (LOSSY_LINK, RECONFIGURATION, RECONFIGURATION_DOWNTIME, ROOT, RTT_SEPARATION,
                              RTT_SEPARATION_FCT, _fairness_records, _glob, _load)

IMG = os.path.join(ROOT, "docs", "img")


def draw_all() -> List[str]:
    """docs/img/lossy_link.png, fairness_d_box.png, fairness_abs_d.png, separation-jain.png,
    separation-fct.png, reconfiguration*.png; their paths."""
    os.makedirs(IMG, exist_ok=True)
    drawn = []
    path = os.path.join(IMG, "lossy_link.png")
    plot_summary(load_records([os.path.join(ROOT, LOSSY_LINK)]), "loss_pct", path,
                 "goodput against random link loss (wireless testbed, 30 s runs)")
    drawn.append(path)
    records, _paths = _fairness_records()
    with tempfile.TemporaryDirectory(prefix="intcc-report-") as tmp:
        fairness_plots.plot(records, tmp, "held-out networks, seed 2617", timelines=False)
        for name in ("d_box.png", "abs_d.png"):
            target = os.path.join(IMG, f"fairness_{name}")
            shutil.copyfile(os.path.join(tmp, name), target)
            drawn.append(target)
    from experiments.reports import separation
    path = os.path.join(IMG, "separation-jain.png")
    separation.plot(load_records([os.path.join(ROOT, p) for p in _glob(RTT_SEPARATION)]), path)
    drawn.append(path)
    fct_paths = _glob(RTT_SEPARATION_FCT)
    if fct_paths:
        from experiments.reports import fct
        path = os.path.join(IMG, "separation-fct.png")
        fct.plot([_load(p) for p in fct_paths], path)
        drawn.append(path)
    from experiments.reports import reconfig
    paths = _glob(RECONFIGURATION)
    if paths:
        records = reconfig.load([os.path.join(ROOT, p) for p in paths])
        path = os.path.join(IMG, "reconfiguration.png")
        reconfig.plot(records, path)
        drawn.append(path)
        path = os.path.join(IMG, "reconfiguration-cubic-series.png")
        reconfig.plot_series(records, path, "cubic pair", ["none", "10ms", "100ms", "1000ms"])
        drawn.append(path)
        path = os.path.join(IMG, "reconfiguration-bbr-series.png")
        reconfig.plot_series(records, path, "bbr pair", ["none", "10ms", "100ms", "1000ms"])
        drawn.append(path)
    paths = _glob(RECONFIGURATION_DOWNTIME)
    if paths:
        path = os.path.join(IMG, "reconfiguration-downtime-series.png")
        reconfig.plot_series(reconfig.load([os.path.join(ROOT, p) for p in paths]), path, "cubic pair",
                             ["none", "100ms", "100ms/10ms", "1000ms/100ms"])
        drawn.append(path)
    return [os.path.relpath(p, ROOT) for p in drawn]
