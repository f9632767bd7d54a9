"""Adding an algorithm, walked through with the example of docs/algorithms.md
(tests/examples/aimd.py: AIMD(a, b) whose congestion avoidance grows per ACK in the
kernel, the additive family's), and the families' rule that keeps each family's kernel
half in its own file."""
import os
import re
import shutil

import pytest

from ccp_algs import codegen, contract
from ccp_algs.codegen import check_family_sources, families_header
from ccp_algs.contract import FAMILIES, ContractError
from ccp_algs.mock import MockDatapath, datapath_info, report
from ccp_algs.registry import AlgorithmSpecError, algorithm_class, parse_algorithm_specs
from tests.examples.aimd import Aimd

MSS = 1448
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
BPF_DIR = os.path.join(ROOT, "datapath", "bpf")


def start(alg):
    dp = MockDatapath(alg.datapath_programs())
    return alg.new_flow(dp, datapath_info(sock_id=1, mss=MSS)), dp


def test_an_algorithm_outside_the_package_is_named_in_the_environment(monkeypatch):
    assert parse_algorithm_specs("aimd=tests.examples.aimd:Aimd, x=a.b:C") == {
        "aimd": "tests.examples.aimd:Aimd", "x": "a.b:C"}
    with pytest.raises(AlgorithmSpecError, match="'aimd' is not name=module:Class"):
        parse_algorithm_specs("aimd")
    from ccp_algs import registry
    monkeypatch.setitem(registry.ALGORITHMS, "aimd", "tests.examples.aimd:Aimd")
    monkeypatch.setitem(registry.ALGORITHMS, "gone", "tests.examples.nothing:Here")
    assert algorithm_class("aimd") is Aimd
    with pytest.raises(AlgorithmSpecError, match="'gone' is tests.examples.nothing:Here, which cannot be loaded"):
        algorithm_class("gone")


def test_the_example_slow_starts_then_hands_its_increase_to_the_kernel():
    flow, dp = start(Aimd(increase_pkts=2, beta=0.5))
    assert dp.ss_until > 0 and dp.fields["ai_pkts"] == 0             # slow start in the kernel
    flow.on_report(report(acked=10 * MSS, delivered=10, inflight=20, grown=10))
    assert dp.cwnd == 20 * MSS                                         # the kernel's growth, taken once
    flow.on_report(report(acked=MSS, loss=1, inflight=20, grown=10))
    assert dp.cwnd == 10 * MSS and dp.ss_until == 0                    # cut to b = 0.5
    assert dp.fields["ai_pkts"] == 0                                   # no growth in the recovery
    # recovery over: the agent grows for the ACKs after it (the kernel did not: it was off),
    # then hands the kernel a = 2 segments per window
    flow.on_report(report(acked=30 * MSS, delivered=30, inflight=10, grown=10))
    cwnd = dp.cwnd
    assert 10 * MSS < cwnd <= 12 * MSS and dp.fields["ai_pkts"] == 2
    flow.on_report(report(acked=10 * MSS, delivered=10, inflight=10, grown=12))
    assert dp.cwnd == cwnd + 2 * MSS                                   # the kernel's 2, taken once


def test_the_example_grows_by_itself_on_a_datapath_without_per_ack_growth():
    flow, dp = start(Aimd(increase_pkts=4, capabilities=contract.CCP_KERNEL))
    flow.cwnd = flow.ssthresh = 40.0 * MSS
    flow.on_report(report(acked=40 * MSS, delivered=40, inflight=40))
    assert dp.cwnd == pytest.approx(44 * MSS, abs=1)                   # a = 4 per window acked


def test_the_kernels_cut_before_the_agent_answers_is_the_examples_beta():
    flow, dp = start(Aimd(beta=0.7))
    assert dp.fields["loss_beta"] == int(0.7 * 1024)


def test_a_register_of_a_family_not_declared_is_refused_by_name():
    class Undeclared(Aimd):
        families = ("slow_start",)
    flow, dp = start(Undeclared())
    flow.cwnd = flow.ssthresh = 40.0 * MSS
    with pytest.raises(ContractError, match="sets register ai_pkts of family additive without declaring it"):
        flow.on_report(report(acked=40 * MSS, delivered=40, inflight=40, grown=0))


def test_each_family_reads_its_registers_in_its_own_file_and_nowhere_else(tmp_path):
    assert check_family_sources(BPF_DIR) == []
    planted = tmp_path / "bpf"
    shutil.copytree(BPF_DIR, planted)
    core = planted / "intcc_ccp.bpf.c"
    core.write_text(core.read_text() + "\n/* x */ static int peek(struct intcc_ccp_ctl *ctl) { return ctl->ca_target_bytes; }\n")
    (planted / "families" / "bbr.h").unlink()
    problems = check_family_sources(planted)
    assert any(p.startswith("intcc_ccp.bpf.c:") and "ctl->ca_target_bytes, register ca_target of family cubic" in p
               for p in problems), problems
    assert any("family bbr: no" in p for p in problems), problems


def test_the_families_are_included_in_the_descriptions_order_and_own_their_registers():
    text = families_header()
    assert re.findall(r'#include "families/(\w+)\.h"', text) == [f.name for f in FAMILIES]
    owned = [r for f in FAMILIES for r in f.registers]
    assert len(owned) == len(set(owned))                               # one family per register
    fields = {r.name: r.ctl_field for r in contract.CONTROL_REGISTERS}
    assert all(fields[r] for r in owned)                               # each drives a control field


def test_the_control_struct_is_generated_for_both_languages_from_the_contract():
    c, rust = codegen.c_structs_header(), codegen.rust_module()
    for name, ctype in contract.STRUCTS["intcc_ccp_ctl"][1]:
        assert re.search(rf"__{ctype} {name};", c), name
        assert f"pub {name}: {ctype}," in rust, name
    assert "register ca_target:" in c and "/// register ca_target:" in rust


def test_the_docs_list_the_files_an_algorithm_takes_and_they_exist():
    doc = open(os.path.join(ROOT, "docs", "algorithms.md")).read()
    section = doc.split("## Adding an algorithm", 1)[1].split("\n## ", 1)[0]
    paths = [p for p in re.findall(r"`([\w./-]+\.(?:py|h|c|rs|md))`", section) if "<" not in p]
    assert "tests/examples/aimd.py" in paths and "ccp_algs/contract.py" in paths
    missing = [p for p in paths if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, missing
