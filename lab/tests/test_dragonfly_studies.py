"""The Dragonfly studies' arithmetic on series with known answers (lab/dragonfly)."""
import numpy as np

from estimator.dragonfly.dataset import FlowSeries
from lab.dragonfly import accumulate, intervals


def test_scores_give_each_input_its_f1_and_the_paired_difference_is_their_gap():
    test = [(np.zeros((2, 5, 2)), np.array(["reno", "reno"])), (np.zeros((2, 5, 2)), np.array(["bbr", "bbr"])),
            (np.zeros((2, 5, 2)), np.array(["cubic", "cubic"]))]
    right = [y for _, y in test]
    wrong = [np.array(["bbr", "bbr"]), np.array(["cubic", "cubic"]), np.array(["reno", "reno"])]
    got = intervals.scores(test, {"dragonfly": right, "throughput only": wrong})
    assert got["dragonfly"]["macro_f1"] == 1.0 and got["throughput only"]["macro_f1"] == 0.0
    assert got["dragonfly - throughput only"]["macro_f1"] == 1.0
    lo, hi = got["dragonfly - throughput only"]["ci95"]
    assert 0 < lo <= hi <= 1.0            # every resample: right against all wrong


class _Model:
    """A model that names a frame by its mean ingress: high bbr, else reno."""
    classes_ = ("reno", "cubic", "bbr")
    n_slots = 10

    def decision_function(self, frames):
        m = np.nanmean(frames[:, :, 1], axis=1)
        return np.stack([np.where(m < 5, 3.0, 0.0), np.zeros_like(m), np.where(m >= 5, 3.0, 0.0)], axis=1)


def _series(ingress):
    ingress = np.asarray(ingress, dtype=float)
    return FlowSeries(("a", "b", 6, 1, 2), 0, np.ones_like(ingress), ingress, np.full_like(ingress, np.nan))


def test_a_flow_is_scored_on_its_consecutive_intervals_alone_and_accumulated():
    # a BBR flow whose first interval looks like Reno (its start), then like BBR
    bbr = _series([1.0] * 10 + [9.0] * 30)
    got = accumulate.at_times(_Model(), [(bbr, "bbr")], [0.01, 0.02, 0.04, 0.05])
    assert got[0.01]["alone"] == ["reno"] and got[0.01]["accumulated"] == ["reno"]
    assert got[0.02]["alone"] == ["bbr"] and got[0.02]["accumulated"] == ["reno"]    # a tie goes to the first class
    assert got[0.04]["alone"] == ["bbr"] and got[0.04]["accumulated"] == ["bbr"]
    assert got[0.05]["y"] == []                  # the capture is 40 ms long: no verdict at 50 ms


def test_an_interval_with_too_few_slots_known_is_not_classified():
    s = _series([9.0] * 10 + [np.nan] * 5 + [9.0] * 5)
    ends, logp = accumulate.flow_verdicts(_Model(), s)
    assert list(ends) == [0.01]


def test_cubic_runs_reno_friendly_at_the_scaled_network_and_on_its_curve_at_the_papers():
    from lab.dragonfly.cubic_region import region
    assert region(10, 35, 0.86) == "Reno-friendly"        # dragonfly_fixed: ~36 packets a flow
    assert region(10, 100, 0.86) == "cubic curve"          # dragonfly_fixed_long: ~100
    assert region(100, 35, 0.86) == "cubic curve"          # the paper's Mininet: ~360
