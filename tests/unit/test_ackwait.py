"""The next-ACK wait the benchmarks print as their floor (tests/perf/ackwait.py)."""
import pytest

from tests.perf.ackwait import wait_quantiles_us


def test_even_gaps_give_a_uniform_wait():
    q = wait_quantiles_us({10: 1000}, {10: 100 * 1000})          # every gap 100 us
    assert q[0.5] == pytest.approx(50, abs=0.5)
    assert q[0.99] == pytest.approx(99, abs=0.5)


def test_a_rare_long_gap_owns_the_tail_as_its_share_of_the_time():
    # 9,900 gaps of 10 us (99 ms) and one of 1,000 us (1 ms): a random instant lands in
    # the long gap 1 % of the time, so the p99 is at its start and the p50 in the short ones
    q = wait_quantiles_us({1: 9900, 100: 1}, {1: 10 * 9900, 100: 1000})
    assert q[0.5] == pytest.approx(5, abs=0.5)
    assert 9 <= q[0.99] <= 11
    assert wait_quantiles_us({1: 9900, 100: 1}, {1: 10 * 9900, 100: 1000}, quantiles=(0.995,))[0.995] \
        == pytest.approx(500, abs=2)


def test_no_gaps_is_not_a_number():
    q = wait_quantiles_us({}, {})
    assert all(v != v for v in q.values())
