"""What a loss was, from the sink's flow record (telemetry.schema.FlowRecord).

The rule (docs/telemetry.md): leniency needs proof. A loss episode is the link's only when
the record shows link losses of this flow that were not there at the last look and no new
congestion losses; new congestion losses, or both, are congestion; no new attributed loss
is unknown, which the algorithms treat as congestion. The sink's "last loss cause" is not
evidence for a new episode: it described an earlier one, and reading it as this one's made
a congestion loss the sink had not attributed yet count as the link's.

A path reconfiguration's night is proof too: new losses the sink put in a night (and no new
congestion) are the reconfiguration's; and where the sink has not attributed the episode
yet, a night the path announced that ended within the look-back (the packets' way there
and back) is (``announced_night``)."""
from __future__ import annotations

from telemetry.reconfig import migrating_hop, night_end_within

CONGESTION, LINK, RECONFIG, UNKNOWN = "congestion", "link", "reconfig", "unknown"


def classify(rec, prev_congestion: int, prev_link: int, prev_reconfig: int = 0) -> str:
    """CONGESTION, RECONFIG, LINK or UNKNOWN from the losses the sink attributed since the
    last look (``prev_*``: the record's counters then)."""
    if rec.lost_congestion - prev_congestion > 0:
        return CONGESTION
    if (rec.lost_reconfig or 0) - prev_reconfig > 0:
        return RECONFIG
    if rec.lost_link - prev_link > 0:
        return LINK
    return UNKNOWN


def announced_night(rec, now_ns: int, lookback_ns: int):
    """(the migrating hop, ns since its last night ended) when a hop of the record migrates
    this flow with a downtime and one of its nights ended within ``lookback_ns`` of
    ``now_ns`` (the hop's clock), else None."""
    hop = migrating_hop(rec)
    if hop is None:
        return None
    end = night_end_within(hop, now_ns - lookback_ns, now_ns)
    return None if end is None else (hop, now_ns - end)
