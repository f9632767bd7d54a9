"""The ML-fairness paper's fairness arithmetic (experiments/reports/fairness.py): Eqs. 1-3, time shares, harm."""
import pytest

from experiments.reports.fairness import goodput_difference, harm, switched_goodputs, time_shares

# one dumbbell's pair table: flow 1 on i, flow 2 on j (Mbit/s); bbr takes from cubic
G1 = {("cubic", "bbr"): 2.0, ("bbr", "bbr"): 4.5, ("reno", "bbr"): 1.5, ("vegas", "bbr"): 0.5}
G2 = {("cubic", "bbr"): 7.0, ("bbr", "bbr"): 4.5, ("reno", "bbr"): 7.5, ("vegas", "bbr"): 8.5}


def test_goodput_difference_is_eq3():
    assert goodput_difference(6, 2) == 0.5 and goodput_difference(2, 6) == -0.5
    assert goodput_difference(3, 3) == 0 and goodput_difference(0, 0) is None


def test_time_shares_follow_the_verdicts_from_the_start_cca():
    s = time_shares([2.0, 4.0, 6.0, 8.0], ["cubic", "bbr", None, "bbr"], "vegas", end_s=10.0)
    assert s == pytest.approx({"vegas": 0.2, "cubic": 0.2, "bbr": 0.6, "reno": 0.0})
    assert sum(s.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown CCA 'dctcp'"):
        time_shares([1.0], ["dctcp"], "cubic", end_s=2.0)


def test_switching_to_the_competitors_cca_makes_the_pair_fair():
    not_used = switched_goodputs({"cubic": 1.0}, G1, G2, "bbr")
    oracle = switched_goodputs(time_shares([], [], "bbr", end_s=30.0), G1, G2, "bbr")
    follow = switched_goodputs(time_shares([3.0], ["bbr"], "cubic", end_s=30.0), G1, G2, "bbr")
    d = [abs(goodput_difference(*g)) for g in (not_used, follow, oracle)]
    assert d[0] == pytest.approx(5 / 9) and d[2] == 0.0 and d[2] < d[1] < d[0]
    assert follow == pytest.approx((0.1 * 2.0 + 0.9 * 4.5, 0.1 * 7.0 + 0.9 * 4.5))
    with pytest.raises(KeyError, match="flow 1 on cubic against vegas"):
        switched_goodputs({"cubic": 1.0}, G1, G2, "vegas")


def test_harm_is_what_the_competitor_lost_against_its_own_cca():
    assert harm(3.0, 4.0) == pytest.approx(0.25) and harm(4.4, 4.0) == pytest.approx(-0.1)
    assert harm(1.0, 0.0) is None
