import numpy as np
import pytest

from records import bootstrap


def test_a_mean_interval_holds_the_mean_and_narrows_with_more_runs():
    rng = np.random.default_rng(3)
    small, large = rng.normal(10, 2, 10), rng.normal(10, 2, 1000)
    lo_s, hi_s = bootstrap.mean_interval(small)
    lo_l, hi_l = bootstrap.mean_interval(large)
    assert lo_s < small.mean() < hi_s and lo_l < 10 < hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 4
    assert bootstrap.mean_interval([4.0]) == (4.0, 4.0)


def test_pairs_that_share_their_noise_give_a_narrower_interval_than_unpaired_runs():
    rng = np.random.default_rng(5)
    shared = rng.normal(0, 5, 40)                       # what a pair met alike (a loss draw, a network)
    a, b = 10 + shared + rng.normal(0, 0.1, 40), 11 + shared + rng.normal(0, 0.1, 40)
    diff = lambda x, y: y.mean(axis=-1) - x.mean(axis=-1)                   # noqa: E731
    paired = bootstrap.interval(bootstrap.draws(diff, [a, b], 2000, np.random.default_rng(0), paired=True))
    unpaired = bootstrap.interval(bootstrap.draws(diff, [a, b], 2000, np.random.default_rng(0), paired=False))
    assert paired[0] < 1 < paired[1] and paired[1] - paired[0] < (unpaired[1] - unpaired[0]) / 5
    with pytest.raises(ValueError, match="as many"):
        bootstrap.draws(diff, [a, b[:-1]])


def test_nan_draws_are_left_out_of_an_interval():
    assert bootstrap.interval(np.array([np.nan, 1.0, 2.0, 3.0]), 1.0) == (1.0, 3.0)
