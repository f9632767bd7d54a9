"""Identification by evidence: the sequential test, and the loss-cut stage on synthetic
series with known answers (a window that keeps beta of itself an RTT after each loss)."""
import numpy as np
import pytest

from estimator.identify.evidence import UNKNOWN, Evidence, SequentialTest
from estimator.identify.loss_cut import KEPT_AFTER_LOSS, evidence, loss_cuts

RTT_BINS = 5


def synthetic(kept: float, rate_per_bin: float = 20.0, events: int = 6, seed: int = 0):
    """Packets and drops per bin of a flow that loses one packet every 12 RTTs and an RTT
    later sends ``kept`` of its rate, regrowing linearly to it by the next loss."""
    rng = np.random.default_rng(seed)
    period = 12 * RTT_BINS
    n = period * (events + 1)
    rate = np.full(n, rate_per_bin)
    lost = np.zeros(n)
    for e in range(1, events + 1):
        k = e * period
        lost[k] = 1
        ramp = np.linspace(kept, 1.0, period - RTT_BINS)
        rate[k + RTT_BINS:k + period] = rate_per_bin * ramp
    return rng.poisson(rate).astype(float), lost


@pytest.mark.parametrize("cca", ["reno", "cubic", "bbr"])
def test_a_window_that_keeps_beta_is_named_by_its_loss_cuts(cca):
    packets, lost = synthetic(KEPT_AFTER_LOSS[cca])
    cuts = loss_cuts(packets, lost, RTT_BINS)
    assert len(cuts) == 6
    assert np.median([c for c, _ in cuts]) == pytest.approx(KEPT_AFTER_LOSS[cca], abs=0.08)
    test = SequentialTest()
    for c, e in cuts:
        test.add(evidence(c, e))
    post = test.posterior()
    if cca == "reno":        # a loss cut cannot tell Reno from Vegas: both halve
        assert post["reno"] + post["vegas"] > 0.95 and test.verdict() is None
    else:
        assert test.verdict() == cca


def test_a_flow_that_answers_as_none_of_the_four_is_unknown():
    packets, lost = synthetic(1.45, rate_per_bin=40.0, events=8)      # speeds up after its losses
    test = SequentialTest()
    for c, e in loss_cuts(packets, lost, RTT_BINS):
        test.add(evidence(c, e))
    assert test.verdict() == UNKNOWN


def test_losses_too_close_together_or_too_early_are_no_events():
    packets = np.full(200, 20.0)
    lost = np.zeros(200)
    lost[[3, 50, 52, 198]] = 1               # before 2 RTTs of history; back-to-back; too late to read
    assert [round(c, 2) for c, _ in loss_cuts(packets, lost, RTT_BINS)] == [1.0]     # only the one at 50
    assert loss_cuts(np.full(200, 0.5), lost, RTT_BINS) == []                       # too few packets


def test_the_sequential_test_waits_until_the_threshold():
    test = SequentialTest(threshold=0.9)
    assert test.verdict() is None and test.best()[1] == pytest.approx(0.2)
    flat = {h: 0.0 for h in test.hypotheses}
    test.add(Evidence("nothing", dict(flat)))
    assert test.verdict() is None
    test.add(Evidence("strong", {**flat, "cubic": 5.0}))
    assert test.verdict() == "cubic" and len(test.evidence) == 2
    with pytest.raises(ValueError, match="no likelihood for unknown"):
        test.add(Evidence("partial", {h: 0.0 for h in test.hypotheses if h != UNKNOWN}))
    with pytest.raises(ValueError, match="threshold"):
        SequentialTest(threshold=0.3)
