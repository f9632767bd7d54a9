"""Every competitor feature group, in ALL_FEATURES order (int_features): what follows Table
I and the INT columns in a full row, offline and live alike."""
from __future__ import annotations

import numpy as np

from .flow_features import CompetitorSeries, flow_dips, flow_features, flow_response
from .own_loss_features import own_loss_queue_response, own_loss_response


def competitor_features(comp: CompetitorSeries | None, series, at_t, base_rtt_s, busy_pps) -> np.ndarray:
    """Every competitor feature group in ALL_FEATURES order (int_features): what follows
    Table I and the INT columns in a full row, offline and live alike."""
    return np.hstack([flow_features(comp, at_t, base_rtt_s, busy_pps),
                      flow_response(comp, series, at_t, base_rtt_s, busy_pps), flow_dips(comp, at_t),
                      own_loss_response(comp, at_t, base_rtt_s),
                      own_loss_queue_response(comp, series, at_t, base_rtt_s, busy_pps)])
