"""The adaptive agent's switching rules (ccp_agent/switching.py): mirror, best response on
a goodput table, dwell time and confidence hysteresis, bad tables named at start."""
import json

import pytest

from ccp_agent.switching import GoodputTable, SwitchingError, SwitchPolicy

LOCAL = ("bbr", "cubic", "reno")
MODEL = ("bbr", "cubic", "reno", "vegas")


def test_mirror_takes_the_competitors_cca_when_it_can_run_it():
    p = SwitchPolicy("mirror", LOCAL, MODEL, min_dwell_s=5, min_confidence=0.6)
    assert p.decide("cubic", 6.0, "bbr", 0.9, 50) == "bbr"
    assert p.decide("cubic", 6.0, "cubic", 0.9, 50) is None                 # already there
    assert p.decide("cubic", 6.0, "vegas", 0.9, 50) is None                 # not one this agent runs


def test_no_switch_on_a_vote_just_begun():
    p = SwitchPolicy("mirror", LOCAL, MODEL, min_dwell_s=0, min_confidence=0.6, min_votes=10)
    assert p.decide("cubic", 60.0, "bbr", 0.8, 5) is None        # 4 of 5
    assert p.decide("cubic", 60.0, "bbr", 0.8, 10) == "bbr"


def test_a_unanimous_vote_counts_before_min_votes_where_asked():
    p = SwitchPolicy("mirror", LOCAL, MODEL, min_dwell_s=0, min_confidence=0.6, min_votes=10, min_votes_unanimous=3)
    assert p.decide("cubic", 60.0, "bbr", 1.0, 2) is None        # too few even if all alike
    assert p.decide("cubic", 60.0, "bbr", 1.0, 3) == "bbr"       # 3 of 3
    assert p.decide("cubic", 60.0, "bbr", 0.8, 5) is None        # 4 of 5: wait for 10
    assert p.decide("cubic", 60.0, "bbr", 0.8, 10) == "bbr"
    assert p.decide("cubic", 60.0, "unknown", 1.0, 3) is None
    off = SwitchPolicy("mirror", LOCAL, MODEL, min_dwell_s=0, min_confidence=0.6, min_votes=10)
    assert off.decide("cubic", 60.0, "bbr", 1.0, 9) is None


def test_no_switch_before_the_dwell_time_or_on_a_weak_verdict():
    p = SwitchPolicy("mirror", LOCAL, MODEL, min_dwell_s=5, min_confidence=0.6)
    assert p.decide("cubic", 4.9, "bbr", 0.99, 50) is None
    assert p.decide("cubic", 60.0, "bbr", 0.59, 50) is None
    assert p.decide("cubic", 60.0, "unknown", 1.0, 50) is None
    assert p.decide("cubic", 60.0, None, 0.0, 50) is None
    assert p.decide("cubic", 5.0, "bbr", 0.6, 50) == "bbr"


def table(pairs):
    return GoodputTable({(a, b): v for (a, b), v in pairs.items()})


def test_best_response_picks_the_smallest_expected_abs_d():
    g = {(a, b): (5.0, 5.0) for a in LOCAL for b in MODEL}
    g[("cubic", "bbr")] = (2.0, 8.0)         # |D| 0.6
    g[("reno", "bbr")] = (1.5, 8.5)          # |D| 0.7
    g[("bbr", "bbr")] = (4.8, 5.2)           # |D| 0.04
    g[("bbr", "cubic")] = (7.0, 3.0)         # bbr would crowd a cubic competitor out
    g[("cubic", "cubic")] = (5.1, 4.9)
    g[("reno", "cubic")] = (4.0, 6.0)
    p = SwitchPolicy("best-response", LOCAL, MODEL, min_dwell_s=0, table=table(g))
    assert p.decide("cubic", 1.0, "bbr", 0.9, 50) == "bbr"
    assert p.decide("bbr", 1.0, "cubic", 0.9, 50) == "cubic"


def test_best_response_weighs_the_votes_and_the_per_network_abs_d():
    g = {(a, b): (5.0, 5.0) for a in LOCAL for b in MODEL}
    g[("bbr", "vegas")] = (9.0, 1.0)          # |D| 0.8: bbr crowds vegas out
    g[("cubic", "vegas")] = (8.0, 2.0)        # 0.6
    g[("reno", "vegas")] = (7.5, 2.5)         # 0.5
    g[("cubic", "bbr")] = (3.0, 7.0)          # 0.4
    g[("reno", "bbr")] = (2.0, 8.0)           # 0.6
    p = SwitchPolicy("best-response", LOCAL, MODEL, min_dwell_s=0, table=table(g))
    assert p.decide("reno", 1.0, "bbr", 0.9, 50) == "bbr"
    # 70 % bbr, 30 % vegas: bbr 0.24, cubic 0.46, reno 0.57 expected
    assert p.decide("reno", 1.0, "bbr", 0.7, 50, shares={"bbr": 35, "vegas": 15}) == "bbr"
    # 60 / 40: bbr 0.32 against cubic 0.48 still; unknown labels weigh nothing
    assert p.decide("cubic", 1.0, "bbr", 0.6, 50, shares={"bbr": 30, "vegas": 20, "unknown": 9}) == "bbr"
    # per network, bbr against bbr is unfair one way or the other (the means hide it)
    p.table.mean_abs_d[("bbr", "bbr")] = 0.5
    assert p.decide("reno", 1.0, "bbr", 0.9, 50) == "cubic"
    assert p.decide("reno", 1.0, "bbr", 0.9, 50, shares={"bbr": 45, "vegas": 5}) == "cubic"


def test_best_response_starts_where_the_expected_abs_d_against_any_competitor_is_smallest():
    g = {(a, b): (5.0, 5.0) for a in LOCAL for b in MODEL}
    g[("bbr", "vegas")] = (9.0, 1.0)          # 0.8
    g[("bbr", "cubic")] = (7.0, 3.0)          # 0.4
    g[("reno", "bbr")] = (2.0, 8.0)           # 0.6
    g[("cubic", "bbr")] = (3.0, 7.0)          # 0.4
    g[("cubic", "vegas")] = (7.0, 3.0)        # 0.4
    g[("reno", "vegas")] = (6.5, 3.5)         # 0.3: reno 0.9 in all, cubic 0.8, bbr 1.2
    p = SwitchPolicy("best-response", LOCAL, MODEL, table=table(g))
    assert p.before_any_verdict() == "cubic"


def test_best_response_refuses_a_table_that_lacks_a_pair():
    g = {(a, b): (5.0, 5.0) for a in LOCAL for b in MODEL if (a, b) != ("reno", "vegas")}
    with pytest.raises(SwitchingError, match=r"lacks \(reno, vegas\)"):
        SwitchPolicy("best-response", LOCAL, MODEL, table=table(g))
    with pytest.raises(SwitchingError, match="needs a goodput table"):
        SwitchPolicy("best-response", LOCAL, MODEL)
    with pytest.raises(SwitchingError, match="policy must be one of mirror, best-response"):
        SwitchPolicy("fair", LOCAL, MODEL)


@pytest.mark.parametrize("content, words", [
    ("{not json", "not a goodput table"),
    (json.dumps({"goodput_mbps": [{"local": "cubic"}]}), "not a goodput table (KeyError"),
])
def test_a_bad_table_file_is_named(tmp_path, content, words):
    path = tmp_path / "g.json"
    path.write_text(content)
    with pytest.raises(SwitchingError, match=words.replace("(", r"\(")):
        GoodputTable.load(str(path))
    with pytest.raises(SwitchingError, match="cannot read"):
        GoodputTable.load(str(tmp_path / "absent.json"))


def test_a_table_round_trips_from_its_file(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"goodput_mbps": [{"local": "cubic", "competitor": "bbr", "local_mbps": 2,
                                                  "competitor_mbps": 8}]}))
    assert GoodputTable.load(str(path)).abs_d("cubic", "bbr") == pytest.approx(0.6)
    path.write_text(json.dumps({"goodput_mbps": [{"local": "cubic", "competitor": "bbr", "local_mbps": 2,
                                                  "competitor_mbps": 8, "mean_abs_d": 0.25}]}))
    assert GoodputTable.load(str(path)).abs_d("cubic", "bbr") == pytest.approx(0.25)
