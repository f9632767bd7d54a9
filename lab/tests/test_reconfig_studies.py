"""lab/reconfig: the bound on the migrated flow's goodput without more harm than kernel CUBIC."""
import pytest

from lab.reconfig.harm_bound import bound_rows


def rec(alg, setting, g, main):
    return {"algorithm": alg, "reconfig": setting, "goodput_mbps": g, "competitor_goodput_mbps": main}


def test_the_bound_is_the_circuits_days_plus_what_the_main_flow_may_lose():
    records = [rec("kernel cubic", "none", 16.0, 16.0), rec("kernel cubic", "500ms/50ms", 8.0, 15.0),
               rec("int", "none", 16.0, 16.0), rec("int", "500ms/50ms", 9.0, 15.0)]
    (row,) = bound_rows(records)
    assert row["g_max"] == pytest.approx(16.0 * 0.9 / 2 + 1.0)           # 7.2 on the circuit, 1 from the main flow
    assert row["prolongation_floor_pct"] == pytest.approx(100 * (16.0 / 8.2 - 1))
    assert row["target_pct"] == pytest.approx(50.0) and not row["reachable"]
    assert row["candidate"] == "int" and row["candidate_pct"] == pytest.approx(100 * (16.0 / 9.0 - 1))


def test_a_harmful_kernel_cubic_leaves_room_for_the_target():
    records = [rec("kernel cubic", "none", 16.0, 16.0), rec("kernel cubic", "100ms/10ms", 1.6, 16.0)]
    (row,) = bound_rows(records)
    assert row["reachable"]          # +900 % for CUBIC, the floor +122 % with the circuit's days alone
