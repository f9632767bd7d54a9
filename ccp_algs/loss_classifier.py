"""Was a loss congestion or the link? From the sink's flow record (telemetry.schema.FlowRecord)."""
from __future__ import annotations

CONGESTION, LINK, UNKNOWN = "congestion", "link", "unknown"


def classify(rec, prev_congestion: int, prev_link: int, max_age_ns: int, now_ns_wall: int) -> str:
    """New attributed losses since the last look decide (congestion wins a tie);
    without new ones, the sink's last loss cause if it is recent enough."""
    if rec.lost_congestion - prev_congestion > 0:
        return CONGESTION
    if rec.lost_link - prev_link > 0:
        return LINK
    if rec.last_loss_cause and rec.last_loss_ns and now_ns_wall - rec.last_loss_ns <= max_age_ns:
        return rec.last_loss_cause if rec.last_loss_cause in (CONGESTION, LINK) else UNKNOWN
    return UNKNOWN
