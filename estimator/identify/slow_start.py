"""Stage: how does the competitor's slow start end? Read from its first packet at the
bottleneck to its first loss, so it answers in the first seconds, before any other stage.

Every Linux CCA starts by doubling its window each round trip; they differ in what ends it:
- Reno (tcp_reno has no HyStart) doubles until its first loss: in a deep buffer its own
  queue grows far past what any other of the four would keep;
- CUBIC leaves slow start on HyStart's delay rise (tcp_cubic: the round's RTT over its minimum
  by at most HYSTART_DELAY_MAX, 16 ms, once its window is HYSTART_LOW_WINDOW, 16 segments)
  or ACK train, and its window then grows slowly for seconds;
- BBR's Startup ends when its delivery rate grew less than BBR_FULL_BW_THRESH (25 %) in three
  rounds, with at most its window, BBR_HIGH_GAIN (2/ln 2) times its BDP estimate, in flight;
- Vegas leaves slow start when a few of its packets queue.

The measured window is Series.comp_window (its packets on the way and in the queue), its
growth over one round trip (the base RTT and the queue's delay) is compared with the
window a round before. The outcomes:
- "deep": still growing at least GROWING per round, never stalled (below BBR's 1.25 for
  STALL_RTTS) since it reached HYSTART_LOW_WINDOW, with more of its packets queued than
  BBR's Startup window allows beside the BDP and the queue it found, and the queue risen by
  more than three of HyStart's largest delay steps: Reno;
- "flat": its window at least HYSTART_LOW_WINDOW and grown less than 25 % per round for two
  rounds, before any loss of its own: slow start ended without one, anything but Reno; then,
  over the next DRAIN_RTTS rounds without a loss, "drained" where its window fell by
  DRAINED or more below its slow start's peak (BBR's Drain paces at 1/BBR_HIGH_GAIN until
  its inflight is down to its BDP estimate, from a peak of up to BBR_HIGH_GAIN times it: a
  fall of up to 65 %; Vegas too falls back to its target), "held" where it did not (CUBIC
  keeps its window at HyStart's exit and grows from it); "flat" where a loss came first;
- "lost": its first loss came first (small buffers: all four can, and the loss-cut stage
  reads what follows): no evidence; None: not yet decided.

The likelihoods are stated choices, not fitted (the development runs of 2026-12-03, 40 of
the hard distribution and 24 of the active scenario, fell 0.72-1.00 after BBR's flat, 0.14-0.33
after CUBIC's, 0.41-0.98 after Vegas's): Reno's slow start stalls before its loss
only where its window is limited (by the receiver, the application: a small "flat" share);
CUBIC's HyStart or
BBR's bound can be missed where the competitor's own RTT is much longer than this flow's
(its BDP, which sets both, is then larger than the one measured here; seen on one of 16
each in the development runs of 2026-12-03), so "deep" moves Reno's odds by about ten, not
by the cap."""
from __future__ import annotations

import math

import numpy as np

from .bottleneck import BIN_S, Series
from .evidence import HYPOTHESES, UNKNOWN, Evidence
from .queue_level import bbr_queue_max_pkts

HYSTART_LOW_WINDOW = 16             # segments (tcp_cubic hystart_low_window)
HYSTART_DELAY_MAX_S = 0.016         # tcp_cubic HYSTART_DELAY_MAX
HYSTART_STEPS = 3                   # "deep": the queue rose by more than this many of its steps
BBR_HIGH_GAIN = 2 / math.log(2)     # tcp_bbr bbr_high_gain: Startup's window over its BDP estimate
BBR_FULL_BW_THRESH = 1.25           # tcp_bbr bbr_full_bw_thresh: "grown" is by this much a round
GROWING = 1.5                       # slow start doubles a round; between that and BBR's 1.25
FLAT_RTTS = 2.0
STALL_RTTS = 0.5
DRAIN_RTTS = 2.0
DRAINED = 0.5                       # between CUBIC's hold (0) and BBR's Drain (1 - 1/BBR_HIGH_GAIN)
WATCH_S = 10.0                      # read over this long from the competitor's first packet

#: P(outcome | hypothesis): stated, see the module's text
LIKELIHOOD = {
    "deep": {"reno": 0.8, "cubic": 0.07, "bbr": 0.07, "vegas": 0.02, UNKNOWN: 0.1},
    "flat": {"reno": 0.02, "cubic": 0.5, "bbr": 0.6, "vegas": 0.3, UNKNOWN: 0.2},
    "drained": {"reno": 0.01, "cubic": 0.03, "bbr": 0.8, "vegas": 0.6, UNKNOWN: 0.2},
    "held": {"reno": 0.01, "cubic": 0.9, "bbr": 0.05, "vegas": 0.25, UNKNOWN: 0.3},
}
REFINES = {"drained": "flat", "held": "flat"}
#: the value published for each outcome (telemetry's identify records carry numbers)
MEASURED = {"deep": 1.0, "flat": 0.0, "held": 0.25, "drained": -1.0}


def outcome(s: Series, f: int, base_rtt_s: float) -> tuple[str | None, int | None]:
    """(the outcome of competitor ``f``'s slow start, the bin it was read at), or (None, None)
    while undecided (or never: past WATCH_S, or its start before the series)."""
    sent = np.flatnonzero(s.comp[f] > 0)
    if not sent.size or sent[0] == 0 or not s.port_pps:
        return None, None
    first = int(sent[0])
    lost = np.flatnonzero(s.comp_lost[f, first:] > 0)
    first_loss = first + int(lost[0]) if lost.size else s.n
    window = s.comp_window(base_rtt_s)[f]
    queued = s.comp_queued()[f]
    rtt_bins = np.maximum(1, np.round((base_rtt_s + s.queue_delay_s()) / BIN_S).astype(int))
    # the window's rate is averaged over an RTT centred on each bin: the last half RTT is not read yet
    known = min(s.n - (int(round(base_rtt_s / BIN_S)) + 1) // 2 - 1, first + int(WATCH_S / BIN_S))
    bdp_pkts = s.port_pps * base_rtt_s
    queue_min = np.minimum.accumulate(s.queue_pkts[first:])
    flat_bins, stalled = 0, False
    for t in range(first, min(first_loss, known)):
        if np.isnan(queued[t]):
            break
        back = t - rtt_bins[t]
        if back < first or window[back] <= 0:
            continue
        growth = window[t] / window[back]
        q0 = queue_min[t - first]
        if (not stalled and growth >= GROWING
                and queued[t] >= bbr_queue_max_pkts(bdp_pkts + q0, s.port_pps, gain=BBR_HIGH_GAIN)
                and s.queue_pkts[t] - q0 >= HYSTART_STEPS * HYSTART_DELAY_MAX_S * s.port_pps):
            return "deep", t
        if window[t] >= HYSTART_LOW_WINDOW and growth < BBR_FULL_BW_THRESH:
            flat_bins += 1
            stalled = stalled or flat_bins >= STALL_RTTS * rtt_bins[t]
            if flat_bins >= FLAT_RTTS * rtt_bins[t]:
                return _after_flat(s, f, window, first, t, rtt_bins[t], known)
        else:
            flat_bins = 0
    if first_loss < known:
        return "lost", first_loss
    return None, None


def _after_flat(s: Series, f: int, window, first: int, t: int, rtt_bins: int, known: int):
    """Slow start ended flat at bin ``t``: drained or held over the next DRAIN_RTTS rounds,
    "flat" where a loss of its own came in them, (None, None) until they are read."""
    end = t + int(round(DRAIN_RTTS * rtt_bins))
    if s.comp_lost[f, t:end].any():
        return "flat", t
    if end > known or np.isnan(s.comp_queued()[f, end - 1]):
        return None, None
    peak = window[first:t + 1].max()
    fell = 1 - window[t:end].min() / peak if peak > 0 else 0.0
    return ("drained" if fell >= DRAINED else "held"), end


def combined(outcomes) -> str | None:
    """The competitors' outcome together: the one their decided ones agree on ("lost" says
    nothing either way; "flat" agrees with what refines it), None where none or where they
    disagree."""
    said = {o for o in outcomes if o in LIKELIHOOD}
    if len(said) > 1:
        said -= {REFINES[o] for o in said if o in REFINES}
    return said.pop() if len(said) == 1 else None


def evidence(what: str) -> Evidence:
    like = LIKELIHOOD[what]
    assert set(like) == set(HYPOTHESES)
    return Evidence("slow_start", {h: math.log(p) for h, p in like.items()}, measured=MEASURED[what],
                    note=f"slow start ended: {what}")
