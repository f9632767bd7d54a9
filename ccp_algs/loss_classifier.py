"""Was a loss congestion or the link? From the sink's flow record (telemetry.schema.FlowRecord).

The rule (docs/telemetry.md): leniency needs proof. A loss episode is the link's only when
the record shows link losses of this flow that were not there at the last look and no new
congestion losses; new congestion losses, or both, are congestion; no new attributed loss
is unknown, which the algorithms treat as congestion. The sink's "last loss cause" is not
evidence for a new episode: it described an earlier one, and reading it as this one's made
a congestion loss the sink had not attributed yet count as the link's."""
from __future__ import annotations

CONGESTION, LINK, UNKNOWN = "congestion", "link", "unknown"


def classify(rec, prev_congestion: int, prev_link: int) -> str:
    """CONGESTION, LINK or UNKNOWN from the losses the sink attributed since the last
    look (``prev_*``: the record's counters then)."""
    if rec.lost_congestion - prev_congestion > 0:
        return CONGESTION
    if rec.lost_link - prev_link > 0:
        return LINK
    return UNKNOWN
