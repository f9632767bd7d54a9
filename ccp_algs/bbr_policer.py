"""tcp_bbr's long-term bandwidth sampling (bbr_lt_bw_sampling), per report: a token-bucket
policer shows as two intervals of 4-16 rounds that each lost >= 20 % of what they
delivered at nearly the same rate; BBR then paces at their mean for 48 rounds. The agent's
counts of delivered and lost packets stand for tp->delivered and tp->lost."""
from __future__ import annotations

LT_INTVL_MIN_RTTS = 4            # long-term sampling intervals last 4-16 rounds
LT_LOSS_THRESH = 50 / 256        # ... and count when they lost this share of what they delivered
LT_BW_RATIO = 1 / 8              # two such intervals' rates this close: a policer
LT_BW_DIFF_BYTES_PER_S = 4000 / 8    # ... or this close in absolute terms
LT_BW_MAX_RTTS = 48              # the policed rate is used for this many rounds

#: what a report did to the sampling (LongTermBw.on_report)
POLICED, EXPIRED = "policed", "expired"


class LongTermBw:
    def __init__(self, now_ns: int, mss: int):
        self.mss = mss
        self.use_bw = False            # pacing at the policed rate
        self.bw = 0.0                  # the policed rate (bytes/s), or the last interval's
        self.is_sampling = False
        self.rtt_cnt = 0
        self.last_delivered_pkts, self.last_lost_pkts, self.last_stamp_ns = 0.0, 0, now_ns

    def reset_interval(self, now_ns: int, delivered_pkts: float, lost_pkts: int):
        self.last_stamp_ns = now_ns
        self.last_delivered_pkts = delivered_pkts
        self.last_lost_pkts = lost_pkts
        self.rtt_cnt = 0

    def reset(self, now_ns: int, delivered_pkts: float, lost_pkts: int):
        self.bw, self.use_bw, self.is_sampling = 0.0, False, False
        self.reset_interval(now_ns, delivered_pkts, lost_pkts)

    def _interval_done(self, bw: float, now_ns: int, delivered_pkts: float, lost_pkts: int) -> str | None:
        if self.bw:
            diff = abs(bw - self.bw)
            if diff <= LT_BW_RATIO * self.bw or diff <= LT_BW_DIFF_BYTES_PER_S:
                self.bw = (bw + self.bw) / 2          # policed: the mean of two intervals
                self.use_bw, self.rtt_cnt = True, 0
                return POLICED
        self.bw = bw
        self.reset_interval(now_ns, delivered_pkts, lost_pkts)
        return None

    def on_report(self, losses: int, round_start: bool, now_ns: int, delivered_pkts: float, lost_pkts: int,
                  in_probe_bw: bool) -> str | None:
        """POLICED when this report found a policer (pace at ``bw``, gain 1), EXPIRED when
        the policed rate's rounds are over (gain cycling again), else None."""
        if self.use_bw:
            if in_probe_bw and round_start:
                self.rtt_cnt += 1
                if self.rtt_cnt >= LT_BW_MAX_RTTS:
                    self.reset(now_ns, delivered_pkts, lost_pkts)
                    return EXPIRED
            return None
        if not self.is_sampling:
            if not losses:
                return None     # the first loss: the policer's tokens are spent from here
            self.reset_interval(now_ns, delivered_pkts, lost_pkts)
            self.is_sampling = True
        if round_start:
            self.rtt_cnt += 1
        if self.rtt_cnt < LT_INTVL_MIN_RTTS:
            return None
        if self.rtt_cnt > 4 * LT_INTVL_MIN_RTTS:
            self.reset(now_ns, delivered_pkts, lost_pkts)
            return None
        if not losses:
            return None         # an interval ends on a loss
        lost = lost_pkts - self.last_lost_pkts
        delivered = delivered_pkts - self.last_delivered_pkts
        if delivered <= 0 or lost < LT_LOSS_THRESH * delivered:
            return None
        span_s = (now_ns - self.last_stamp_ns) / 1e9
        if span_s < 1e-3:
            return None
        return self._interval_done(delivered * self.mss / span_s, now_ns, delivered_pkts, lost_pkts)
