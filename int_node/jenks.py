"""Jenks natural breaks (Fisher's exact 1-D classification), for the node's RTT separation.

The classes minimise the sum of squared deviations from their means (Jenks 1967, computed
exactly by Fisher's dynamic programme), as jenkspy's do: the node runs on PyPy, where
jenkspy's C extension does not build, so the node has its own, checked against jenkspy in
the unit tests. Values are collapsed to distinct ones with their counts (``resolution``
rounds them first: RTTs to 0.1 ms leave at most a few thousand distinct values whatever
the number of flows), and with the best cuts' monotonicity a run costs O(classes x distinct x log distinct).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence


def snap(value: float, resolution: float) -> float:
    """``value`` rounded to a multiple of ``resolution`` (0: as it is), as the breaks are."""
    return round(value / resolution) * resolution if resolution > 0 else value


def natural_breaks(values: Sequence[float], n_classes: int, resolution: float = 0.0) -> list[float]:
    """Class boundaries as jenkspy gives them: [min, upper bound of class 1, ..., max],
    ``n_classes + 1`` numbers. Fewer distinct values than classes: one class per value."""
    if n_classes < 1:
        raise ValueError("n_classes must be at least 1")
    if not values:
        raise ValueError("no values to classify")
    values = [snap(v, resolution) for v in values]
    counts = sorted(Counter(float(v) for v in values).items())
    xs = [x for x, _ in counts]
    if len(xs) <= n_classes:
        return [xs[0]] + xs
    # prefix sums of weight, weighted value and weighted square: any class's cost in O(1)
    sw, sx, sxx = [0.0], [0.0], [0.0]
    for x, w in counts:
        sw.append(sw[-1] + w)
        sx.append(sx[-1] + w * x)
        sxx.append(sxx[-1] + w * x * x)

    def cost(i: int, j: int) -> float:        # distinct values i..j-1 in one class
        w = sw[j] - sw[i]
        s = sx[j] - sx[i]
        return sxx[j] - sxx[i] - s * s / w

    n = len(xs)
    best = [0.0] + [cost(0, j) for j in range(1, n + 1)]    # one class over the first j values
    cut = [[0] * (n + 1)]
    for c in range(2, n_classes + 1):
        nxt, at = [float("inf")] * (n + 1), [0] * (n + 1)
        _fill(c, n, best, cost, nxt, at)
        best = nxt
        cut.append(at)
    bounds, j = [], n
    for c in range(n_classes - 1, 0, -1):
        j = cut[c][j]
        bounds.append(xs[j - 1])
    return [xs[0]] + bounds[::-1] + [xs[-1]]


def _fill(c: int, n: int, best: list, cost, nxt: list, at: list) -> None:
    """One row of Fisher's programme: for every j, the best cut i of the first j values into
    c classes. The best cut never moves left as j grows (the squared-deviation cost obeys
    the quadrangle inequality, as Ckmeans.1d.dp uses), so divide and conquer finds each row in
    O(n log n) cost evaluations instead of O(n²): 10,000 distinct RTTs in ~0.5 M, not 10⁸."""
    stack = [(c, n, c - 1, n - 1)]           # j range [lo_j, hi_j], cut range [lo_i, hi_i]
    while stack:
        lo_j, hi_j, lo_i, hi_i = stack.pop()
        if lo_j > hi_j:
            continue
        j = (lo_j + hi_j) // 2
        b, arg = float("inf"), lo_i
        for i in range(lo_i, min(hi_i, j - 1) + 1):
            v = best[i] + cost(i, j)
            if v < b:
                b, arg = v, i
        nxt[j], at[j] = b, arg
        stack.append((lo_j, j - 1, lo_i, arg))
        stack.append((j + 1, hi_j, arg, hi_i))


def classify(value: float, breaks: Sequence[float], resolution: float = 0.0) -> int:
    """The class (0-based) of ``value`` under ``breaks`` (natural_breaks' output): the first
    whose upper bound it does not exceed; above the last, the last. ``resolution`` must be
    the breaks': a value just above the smallest, rounded down into it by natural_breaks,
    would otherwise fall into the next class."""
    value = snap(value, resolution)
    for k, upper in enumerate(breaks[1:-1]):
        if value <= upper:
            return k
    return len(breaks) - 2


def goodness_of_variance_fit(values: Sequence[float], breaks: Sequence[float]) -> float:
    """1 - (squared deviations within the classes) / (about the mean of all): 1 is a perfect
    fit (Jenks' GVF, the paper's quality measure)."""
    mean = sum(values) / len(values)
    total = sum((v - mean) ** 2 for v in values)
    if total == 0:
        return 1.0
    groups: dict = {}
    for v in values:
        groups.setdefault(classify(v, breaks), []).append(v)
    within = 0.0
    for g in groups.values():
        m = sum(g) / len(g)
        within += sum((v - m) ** 2 for v in g)
    return 1 - within / total
