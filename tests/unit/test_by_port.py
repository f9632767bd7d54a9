"""Other algorithms for some ports in one agent (ccp_agent/by_port.py), on the mock datapath."""
import pytest

from ccp_agent import portus_compat
from ccp_agent.by_port import ByPort, PinError, parse_pins
from ccp_algs.cubic import Cubic
from ccp_algs.mock import MockDatapath, datapath_info
from ccp_algs.vegas import Vegas


def test_a_pinned_ports_flow_runs_its_algorithm_on_its_own_program():
    alg = ByPort(Cubic(), {5202: "vegas"})
    programs = portus_compat.check(alg)              # every program compiles, as portus would
    assert set(programs) == {"default", "vegas.default"}
    assert programs["vegas.default"] == Vegas().datapath_programs()["default"]
    dp = MockDatapath(programs)
    theirs = alg.new_flow(dp, datapath_info(sock_id=2, src_port=40001, dst_port=5202))
    assert isinstance(theirs.alg, Vegas) and dp.programs[-1] == "vegas.default"
    mine = alg.new_flow(MockDatapath(programs), datapath_info(sock_id=1, dst_port=5201))
    assert type(mine.alg) is Cubic and mine.datapath.programs[-1] == "default"
    server_side = alg.new_flow(MockDatapath(programs), datapath_info(sock_id=3, src_port=5202, dst_port=40001))
    assert isinstance(server_side.alg, Vegas)        # iperf3 sets the CCA on both ends


@pytest.mark.parametrize("pin, message", [("5202", "PORT=NAME"), ("0=vegas", "PORT=NAME"),
                                          ("5202=nope", "unknown algorithm 'nope'"),
                                          ("5202=cubic-int", "needs the sink's telemetry")])
def test_bad_pins_name_the_problem(pin, message):
    with pytest.raises(PinError, match=message):
        parse_pins((pin,))
