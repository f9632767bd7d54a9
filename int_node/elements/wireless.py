"""WirelessChannel: an 802.11n-like link's RSSI, MCS, data rate and losses.

RSSI follows the log-distance path-loss model with log-normal shadowing,
re-drawn every ``coherence`` interval:
    rssi_dbm = tx_power_dbm - (ref_loss_db + 10 * n * log10(distance_m)) + X(0, sigma)
The MCS is the highest 802.11n (20 MHz, one stream, long GI) MCS whose receiver
sensitivity the RSSI meets; its data rate follows. The packet error rate comes
from the SNR margin over that MCS's required SNR (logistic curve, scaled to the
frame length). ``loss`` adds a fixed, configured link loss on top (the paper's
"intentional loss"); both kinds count as ``link_losses``.
"""
from __future__ import annotations

import math
import random
import time

from ..element import Arg, Element, register
from ..flow_tally import FlowTally
from ..loss_draws import PacketKeyedDraws
from ..units import parse_fraction, parse_time_ns

# (minimum RSSI dBm, data rate kbit/s, SNR dB needed for 10% PER at 1500 bytes)
MCS_TABLE = (
    (-82, 6500, 4.0), (-79, 13000, 7.0), (-77, 19500, 9.5), (-74, 26000, 12.5),
    (-70, 39000, 16.0), (-66, 52000, 20.0), (-65, 58500, 21.5), (-64, 65000, 23.0),
)
_PER_SLOPE_PER_DB = 1.5  # logistic steepness of PER around the required SNR


def _float(text):
    return float(text)


def _positive(text):
    v = float(text)
    if v <= 0:
        raise ValueError("must be > 0")
    return v


def mcs_for_rssi(rssi_dbm: float) -> int:
    mcs = 0
    for i, (sens, _, _) in enumerate(MCS_TABLE):
        if rssi_dbm >= sens:
            mcs = i
    return mcs


def per_for(snr_db: float, mcs: int, frame_bytes: int) -> float:
    """Packet error rate of a frame at this SNR and MCS."""
    need = MCS_TABLE[mcs][2]
    x = _PER_SLOPE_PER_DB * (snr_db - need)
    per_1500 = 0.1 / (0.1 + 0.9 * math.exp(min(x, 700.0)))  # 10% at snr == need
    return 1.0 - (1.0 - per_1500) ** (frame_bytes / 1500.0)


@register
class WirelessChannel(Element):
    """``WirelessChannel(distance_m 20, tx_power_dbm 20, loss 5%, seed 1)``. Every
    parameter is writable at run time (``intcc node write``). The configured ``loss`` is
    drawn per packet identity (int_node.loss_draws): after writing ``seed`` the same
    transmission meets the same fate in every run given that seed, whatever the timing
    and whatever else was sent (shadowing draws per coherence time, and the SNR's error
    losses, use a sequential generator of their own)."""
    ARGS = (
        Arg("distance_m", _positive, 10.0), Arg("tx_power_dbm", _float, 20.0),
        Arg("path_loss_exponent", _positive, 3.0), Arg("ref_loss_db", _float, 40.05),
        Arg("shadowing_sigma_db", _float, 2.0), Arg("noise_floor_dbm", _float, -95.0),
        Arg("loss", parse_fraction, 0.0), Arg("coherence", parse_time_ns, 100_000_000),
        Arg("seed", int, None),
    )
    write_handlers = {a.name: a.conv for a in ARGS if a.name != "coherence"}
    counter_names = ("passed", "link_losses", "error_losses", "configured_losses")

    def configured(self):
        self._seed_generators()
        self.flow_losses = FlowTally()       # per flow, INTTransit stamps the packet's
        self._shadow_db = 0.0
        self._next_draw_ns = 0
        self._update(0)

    def _seed_generators(self):
        self._rng = random.Random(self.seed)
        self._loss_draws = PacketKeyedDraws(None if self.seed is None else f"{self.seed}/configured-loss")

    def handler_changed(self, handler):
        if handler == "seed":
            self._seed_generators()
        self._next_draw_ns = 0
        self._update(time.time_ns())   # RSSI/MCS reflect the change at once

    def _update(self, now_ns: int):
        if now_ns >= self._next_draw_ns:
            self._shadow_db = self._rng.gauss(0.0, self.shadowing_sigma_db) if self.shadowing_sigma_db > 0 else 0.0
            self._next_draw_ns = now_ns + self.coherence
        mean_loss = self.ref_loss_db + 10 * self.path_loss_exponent * math.log10(self.distance_m)
        self.rssi_dbm = self.tx_power_dbm - mean_loss + self._shadow_db
        self.snr_db = self.rssi_dbm - self.noise_floor_dbm
        self.rssi_int = max(-128, min(127, round(self.rssi_dbm)))   # as INT carries it
        self.mcs = mcs_for_rssi(self.rssi_dbm)
        self.data_rate_kbps = MCS_TABLE[self.mcs][1]
        self._per_cache = {}

    def counters(self):
        c = super().counters()
        c.update(rssi_dbm=round(self.rssi_dbm, 1), mcs=self.mcs, data_rate_kbps=self.data_rate_kbps,
                 flow_losses=self.flow_losses.top())
        return c

    def push(self, port, pkt):
        if pkt.rx_ns >= self._next_draw_ns:
            self._update(pkt.rx_ns)
        n = len(pkt.data)
        bucket = n >> 6  # PER varies slowly with length: cache per 64-byte bucket
        per = self._per_cache.get(bucket)
        if per is None:
            per = self._per_cache[bucket] = per_for(self.snr_db, self.mcs, n)
        if self.loss and self._loss_draws.draw(pkt.data) < self.loss:
            self.configured_losses += 1
            self.link_losses += 1
            self.flow_losses.count(pkt)
            return
        if self._rng.random() < per:
            self.error_losses += 1
            self.link_losses += 1
            self.flow_losses.count(pkt)
            return
        self.passed += 1
        out = self._out[0]
        out[0].push(out[1], pkt)
