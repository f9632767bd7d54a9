"""The CCAs intcc names, in one place: the estimator's labels, the verdicts on the wire,
the fairness arithmetic, the scenarios' competitors and the adaptive agent's algorithms all
read this list. ``kernel``: built into the kernels intcc runs on (a flow uses it directly,
iperf3 -C NAME); every CCA also runs as the CCP algorithm of its name (``ccp_algs``), which is
how one the kernel lacks (vegas) runs at all."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CCA:
    name: str
    kernel: bool            # built into the kernel intcc runs on
    summary: str


CCAS = (
    CCA("bbr", True, "BBR v1: a model of the bottleneck's bandwidth and min RTT, paced"),
    CCA("cubic", True, "CUBIC: a cubic window curve, beta 0.7 on a loss"),
    CCA("reno", True, "Reno: AIMD, one segment per RTT, halve on a loss"),
    CCA("vegas", False, "Vegas: delay-based, keeps 2-4 packets queued"),
)
#: The CCAs the estimator tells apart, in label order
CCA_LABELS = tuple(c.name for c in CCAS)
#: The ones the kernel has built in; the others run on the CCP datapath
KERNEL_CCAS = tuple(c.name for c in CCAS if c.kernel)
