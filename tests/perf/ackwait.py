"""The floor under every "applied in the kernel" figure: how long a flow's next ACK is
waited for, from a random instant.

The kernel, CCP or not, changes a flow's window only when it processes an ACK (the
congestion control's callbacks run there), so a command written at a random instant waits
for the next one. On a host whose CPUs the flow keeps busy the ACK's processing itself waits
(softirq, the socket's owner): the benchmarks print this wait of a native kernel flow in the
same run, beside their latencies.

Measured with bpftrace on the tcp:tcp_probe tracepoint (every segment a sender's
established socket receives), the gaps between a flow's pure ACKs binned in the kernel
(10 us bins, no per-ACK output). From gaps g_i over a time T, a random instant waits more
than x with probability sum(max(0, g_i - x)) / T.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

BIN_US = 10
MAX_GAP_US = 20_000       # longer gaps are between connections (iperf3's control socket), not a flow's ACKs

_PROGRAM = """tracepoint:tcp:tcp_probe /args->dport == %d && args->data_len == 0/ {
  $now = nsecs; $last = @last[args->skaddr]; @last[args->skaddr] = $now;
  $gap_us = ($now - $last) / 1000;
  if ($last > 0 && $gap_us < %d) { @n[$gap_us / %d] = count(); @s[$gap_us / %d] = sum($gap_us); } }
END { clear(@last); }"""


TRACEFS = "/sys/kernel/tracing"


def available() -> str | None:
    """None if it can be measured here, else why not. Mounts tracefs where a fresh host has
    not (bpftrace finds no tracepoint without it)."""
    if not shutil.which("bpftrace"):
        return "bpftrace is not installed (make setup installs it)"
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True, text=True)
        if r.returncode:
            return f"tracefs is not mounted at {TRACEFS} and mounting it failed: {r.stderr.strip()}"
    return None


def wait_quantiles_us(gap_counts: dict[int, int], gap_sums_us: dict[int, int],
                      quantiles=(0.5, 0.9, 0.99)) -> dict[float, float]:
    """The wait for the next ACK from a random instant, from binned gaps (each bin's gaps
    taken at the bin's mean): {quantile: us}."""
    total_us = sum(gap_sums_us.values())
    if not total_us:
        return {q: float("nan") for q in quantiles}
    bins = [(gap_sums_us[k] / gap_counts[k], gap_counts[k]) for k in gap_counts if gap_counts[k]]

    def longer_than(x):
        return sum(max(0.0, mean - x) * n for mean, n in bins) / total_us

    out = {}
    hi = max(mean for mean, _ in bins)
    for q in quantiles:
        lo_x, hi_x = 0.0, hi                      # longer_than falls from <= 1 at 0 to 0 at the longest gap
        for _ in range(40):
            mid = (lo_x + hi_x) / 2
            if longer_than(mid) > 1 - q:
                lo_x = mid
            else:
                hi_x = mid
        out[q] = hi_x
    return out


def measure(traffic, port: int = 5201) -> dict:
    """Run ``traffic()`` (a flow to ``port``, sender in any namespace) under the tracepoint:
    {"acks": n, "p50": us, "p90": us, "p99": us}, or {"error": why}."""
    why = available()
    if why:
        return {"error": why}
    tracer = subprocess.Popen(["bpftrace", "-e", _PROGRAM % (port, MAX_GAP_US, BIN_US, BIN_US)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # bpftrace says "Attaching N probes..." as it attaches: the flow starts after that line
    first = tracer.stdout.readline()
    if not first.startswith("Attaching"):
        tracer.kill()
        return {"error": f"bpftrace did not attach: {(first + tracer.communicate()[1]).strip()[:200]}"}
    try:
        traffic()
    finally:
        tracer.send_signal(2)
        out, err = tracer.communicate(timeout=30)
    counts, sums = {}, {}
    for name, k, v in re.findall(r"@(n|s)\[(\d+)\]: (\d+)", out):
        (counts if name == "n" else sums)[int(k)] = int(v)
    if not counts:
        return {"error": f"bpftrace saw no ACK to port {port}: {err.strip()[:200] or 'no output'}"}
    q = wait_quantiles_us(counts, sums)
    return {"acks": sum(counts.values()), "p50": q[0.5], "p90": q[0.9], "p99": q[0.99]}


def describe(m: dict) -> str:
    if "error" in m:
        return f"not measured: {m['error']}"
    return (f"p50 {m['p50']:.0f} us, p90 {m['p90']:.0f} us, p99 {m['p99']:.0f} us "
            f"(a native flow's {m['acks']} ACKs)")
