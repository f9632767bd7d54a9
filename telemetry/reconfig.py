"""When a path's nights are, from what its hops announce (wire schema v5, a reconfigured
port's period, downtime and time to its next night in each hop record): a sender asks
whether a night ended while its lost packets were on the way."""
from __future__ import annotations

from typing import Optional

from int_node.ioam import RECONFIG_MIGRATED

MS_NS = 1_000_000


def migrating_hop(rec):
    """The first hop of a flow record that migrates this flow with a downtime, or None."""
    for h in rec.path:
        if (h.reconfig_period_ms and h.reconfig_downtime_ms and h.reconfig_flags is not None
                and h.reconfig_flags & RECONFIG_MIGRATED):
            return h
    return None


def night_end_within(hop, start_ns: int, end_ns: int) -> Optional[int]:
    """The end (ns, the hop's clock) of a night of ``hop``'s schedule that falls in
    [start_ns, end_ns], or None. The schedule repeats every period from the night the hop
    announced (``reconfig_next_ms`` after its stamp, in whole ms; 0: night at the stamp)."""
    period = hop.reconfig_period_ms * MS_NS
    downtime = hop.reconfig_downtime_ms * MS_NS
    if not period or hop.reconfig_next_ms is None:
        return None
    # at night when stamped: the night ends within a downtime of the stamp (half of one, on average)
    first_end = hop.ts_ns + (hop.reconfig_next_ms * MS_NS + downtime if hop.reconfig_next_ms else downtime // 2)
    # the latest night end at or before end_ns (floor division: also before the stamp)
    last = first_end + ((end_ns - first_end) // period) * period
    return last if last >= start_ns else None
