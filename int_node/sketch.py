"""Count-Min Sketch (Cormode and Muthukrishnan 2005): per-key counts in fixed memory.

``depth`` rows of ``width`` counters; a key adds to one counter a row and its estimate is
the least of them, never below its true count. With width = ceil(e / eps) and depth =
ceil(ln(1 / delta)), the estimate exceeds the truth by more than eps x (the total added)
with probability at most delta. The RTT-separation paper counts each flow's packets this
way to find long flows in a switch's memory; the node counts bytes the same way.

One hash of the key a packet (Python's, salted per process), its rows' indices derived
from it by double hashing (Kirsch and Mitzenmacher 2006: two hashes do for many).
"""
from __future__ import annotations

import math


class CountMinSketch:
    def __init__(self, width: int = 2048, depth: int = 4):
        if width < 1 or depth < 1:
            raise ValueError("a Count-Min Sketch needs width and depth of at least 1")
        self.width, self.depth = width, depth
        self.rows = [[0] * width for _ in range(depth)]
        self.total = 0

    @classmethod
    def for_error(cls, eps: float, delta: float) -> "CountMinSketch":
        """The smallest sketch whose estimates exceed the truth by eps x total at most, but
        with probability delta."""
        if not (0 < eps < 1 and 0 < delta < 1):
            raise ValueError("eps and delta must be in (0, 1)")
        return cls(math.ceil(math.e / eps), math.ceil(math.log(1 / delta)))

    @property
    def eps(self) -> float:
        return math.e / self.width

    @property
    def delta(self) -> float:
        return math.exp(-self.depth)

    def _indices(self, key):
        h = hash(key)
        h1, h2 = h & 0xFFFFFFFF, ((h >> 32) & 0xFFFFFFFF) | 1
        w = self.width
        return [(h1 + i * h2) % w for i in range(self.depth)]

    def add(self, key, count: int = 1) -> int:
        """Adds ``count`` to ``key``; its estimate after."""
        self.total += count
        est = None
        for row, i in zip(self.rows, self._indices(key)):
            v = row[i] = row[i] + count
            est = v if est is None or v < est else est
        return est

    def estimate(self, key) -> int:
        return min(row[i] for row, i in zip(self.rows, self._indices(key)))

    def clear(self) -> None:
        for row in self.rows:
            row[:] = [0] * self.width
        self.total = 0
