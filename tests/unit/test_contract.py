"""The agent-datapath contract (ccp_algs/contract.py): registers by position, the
version handshake, the struct layouts both compilers check against, the capabilities."""
import json

import pytest

from ccp_algs import codegen, contract
from ccp_algs.contract import (CCP_KERNEL, CONTRACT_VERSION, INTCC_DATAPATH, ContractError,
                               DatapathCapabilities, read_datapath_contract)
from ccp_algs.cubic import Cubic
from ccp_algs.mock import MockDatapath, datapath_info, report
from ccp_algs.programs import REPORT_PER_RTT_AND_ON_LOSS
from ccp_algs.reno import Reno
from ccp_algs.vegas import Vegas

MSS = 1448


def test_every_algorithm_declares_the_contract_registers_first_and_in_order():
    from ccp_algs.const import Const
    from ccp_algs.cubic_int import CubicInt
    names = [r.name for r in contract.CONTROL_REGISTERS]
    for alg in (Const(), Cubic(), CubicInt(), Reno(), Vegas(), Cubic(capabilities=CCP_KERNEL)):
        for program in alg.datapath_programs().values():
            assert contract.control_registers(program)[:len(names)] == names, alg.name


def test_a_program_with_the_registers_out_of_order_is_refused_by_name():
    swapped = REPORT_PER_RTT_AND_ON_LOSS.replace("(ss_until 0) (ca_target 0)", "(ca_target 0) (ss_until 0)")
    assert swapped != REPORT_PER_RTT_AND_ON_LOSS
    with pytest.raises(ContractError, match="by position"):
        contract.check_program(swapped)


def test_the_mock_reads_registers_by_position_as_the_daemon():
    """A reordered declaration reaches the mock as the daemon would see it: the value sent
    as ss_until lands in ca_target's place. (Algorithm.datapath_programs refuses such a
    program; this is the mock's side of it.)"""
    swapped = REPORT_PER_RTT_AND_ON_LOSS.replace("(ss_until 0) (ca_target 0)", "(ca_target 0) (ss_until 0)")
    dp = MockDatapath({"default": swapped})
    dp.set_program("default", [("Cwnd", 10 * MSS)])
    dp.update_fields([("contract_version", CONTRACT_VERSION), ("ss_until", 50_000)])
    assert dp.fields["ca_target"] == 50_000 and "ss_until" not in dp.fields


def test_the_datapath_takes_no_register_before_the_version_handshake():
    dp = MockDatapath({"default": REPORT_PER_RTT_AND_ON_LOSS})
    dp.set_program("default", [("Cwnd", 10 * MSS)])
    dp.update_fields([("ss_until", 50_000)])
    assert dp.fields == {}
    dp.update_fields([("contract_version", CONTRACT_VERSION - 1)])
    assert dp.fields == {}
    dp.update_fields([("contract_version", CONTRACT_VERSION)])
    assert dp.fields["ss_until"] == 50_000


@pytest.mark.parametrize("alg,beta", [(Cubic(), 717), (Reno(), 512), (Vegas(), 512)])
def test_each_algorithm_tells_the_kernel_its_own_cut(alg, beta):
    dp = MockDatapath(alg.datapath_programs())
    flow = alg.new_flow(dp, datapath_info(mss=MSS))
    assert dp.fields["contract_version"] == CONTRACT_VERSION
    assert dp.fields["loss_beta"] == beta
    flow.on_report(report(acked=MSS, delivered=1, inflight=10, grown=0, reductions=0))
    assert dp.fields["loss_beta"] == beta                 # it stays with the flow


def test_layouts_follow_c_alignment():
    offsets, size = contract.layout("intcc_ccp_event")
    assert dict(offsets)["ts_ns"] == 8 and dict(offsets)["src_addr"] == 32 and dict(offsets)["lost_total_pkts"] == 172
    assert dict(offsets)["report_fields"] == 176 and size == 304
    offsets, size = contract.layout("intcc_ccp_ctl")
    assert dict(offsets)["rate_bps"] == 8 and dict(offsets)["loss_beta_1024"] == 52 and size == 96
    assert contract.layout("intcc_ccp_cfg")[1] == 48


def test_the_generated_sources_name_every_register_and_field():
    header, rust = codegen.c_header(), codegen.rust_module()
    for struct, (rust_name, struct_fields) in contract.STRUCTS.items():
        for name, _ in struct_fields:
            assert f"struct {struct}, {name})" in header
            assert f"offset_of!({rust_name}, {name})" in rust
    for i, r in enumerate(contract.CONTROL_REGISTERS):
        assert f"REG_{r.name.upper()}: u32 = {i};" in rust
        if r.ctl_field:
            assert f"{i} => ctl.{r.ctl_field} = value," in rust


def test_capabilities_round_trip_by_name():
    assert DatapathCapabilities.from_names(INTCC_DATAPATH.names()) == INTCC_DATAPATH
    assert CCP_KERNEL.names() == []


def test_an_agent_reads_the_daemons_contract(tmp_path):
    assert read_datapath_contract(tmp_path) is None       # no daemon yet: the handshake still guards
    (tmp_path / "contract.json").write_text(json.dumps({"contract_version": CONTRACT_VERSION,
                                                        "capabilities": ["undo", "growth"]}))
    caps = read_datapath_contract(tmp_path)
    assert caps.undo and caps.growth and not caps.reductions and not caps.loss_beta
    (tmp_path / "contract.json").write_text(json.dumps({"contract_version": 1, "capabilities": []}))
    with pytest.raises(ContractError, match=f"version 1, this agent {contract.CONTRACT_VERSION}"):
        read_datapath_contract(tmp_path)
    (tmp_path / "contract.json").write_text("{not json")
    with pytest.raises(ContractError, match="unreadable"):
        read_datapath_contract(tmp_path)


def test_pack_places_fields_at_their_offsets():
    raw = contract.pack("intcc_ccp_ctl", flags=1, cwnd_bytes=2896, seq=7, loss_beta_1024=717)
    assert len(raw) == 96
    assert int.from_bytes(raw[4:8], "little") == 2896 and int.from_bytes(raw[16:24], "little") == 7
    assert int.from_bytes(raw[52:56], "little") == 717
    with pytest.raises(KeyError, match="no field 'cwnd'"):
        contract.pack("intcc_ccp_ctl", cwnd=1)
