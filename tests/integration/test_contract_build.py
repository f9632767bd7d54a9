"""The agent-datapath contract is checked by both compilers: the datapath built from the
contract as it is compiles, and a contract whose event struct (written by hand on both
sides) has two fields swapped fails the BPF program's build and the daemon's
(ccp_algs/contract.py). The control struct is generated for both from the contract: one
reordered there is reordered on both sides, and still builds."""
import os
import shutil
import subprocess

import pytest

from ccp_algs import codegen, contract

DATAPATH = os.path.join(os.path.dirname(__file__), "..", "..", "datapath")
BUILD = os.path.join(DATAPATH, "build")


def swapped_contract(monkeypatch, struct="intcc_ccp_event", field="bytes_acked"):
    name, fields = contract.STRUCTS[struct]
    names = [n for n, _ in fields]
    i = names.index(field)
    fields = list(fields)
    fields[i], fields[i + 1] = fields[i + 1], fields[i]
    monkeypatch.setitem(contract.STRUCTS, struct, (name, fields))


def compile_bpf(include_first: str) -> subprocess.CompletedProcess:
    if not os.path.exists(os.path.join(BUILD, "vmlinux.h")):
        pytest.fail("datapath/build/vmlinux.h is missing: run 'make setup'")
    return subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-D__TARGET_ARCH_x86", "-Wall",
                           "-Werror", "-I", include_first, "-I", BUILD, "-I", os.path.join(DATAPATH, "bpf"), "-c",
                           os.path.join(DATAPATH, "bpf", "intcc_ccp.bpf.c"), "-o",
                           os.path.join(include_first, "out.bpf.o")], capture_output=True, text=True)


def test_the_bpf_program_compiles_against_the_contract_and_not_against_a_reordered_one(tmp_path, monkeypatch):
    (tmp_path / "intcc_ccp_contract.h").write_text(codegen.c_header())
    ok = compile_bpf(str(tmp_path))
    assert ok.returncode == 0, ok.stderr[-2000:]
    swapped_contract(monkeypatch)
    (tmp_path / "intcc_ccp_contract.h").write_text(codegen.c_header())
    bad = compile_bpf(str(tmp_path))
    assert bad.returncode != 0
    assert "intcc_ccp_event.bytes_acked: the contract says offset" in bad.stderr


def test_a_reordered_control_struct_is_reordered_on_both_sides(tmp_path, monkeypatch):
    swapped_contract(monkeypatch, "intcc_ccp_ctl", "ss_until_bytes")
    (tmp_path / "intcc_ccp_contract.h").write_text(codegen.c_header())
    (tmp_path / "intcc_ccp_ctl.h").write_text(codegen.c_structs_header())
    ok = compile_bpf(str(tmp_path))
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert codegen.rust_struct("intcc_ccp_ctl").index("ca_target_bytes") < \
        codegen.rust_struct("intcc_ccp_ctl").index("ss_until_bytes")


def cargo_check(crate) -> subprocess.CompletedProcess:
    env = {**os.environ, "CARGO_TARGET_DIR": os.path.join(DATAPATH, "target")}     # dependencies already built
    return subprocess.run(["cargo", "check", "--release", "--locked", "--quiet"], cwd=crate, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_daemon_compiles_against_the_contract_and_not_against_a_reordered_one(tmp_path, monkeypatch):
    crate = tmp_path / "crate"
    (crate / "build").mkdir(parents=True)
    shutil.copytree(os.path.join(DATAPATH, "src"), crate / "src")
    for f in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(os.path.join(DATAPATH, f), crate / f)
    shutil.copy(os.path.join(BUILD, "intcc_ccp.bpf.o"), crate / "build")
    (crate / "build" / "contract.rs").write_text(codegen.rust_module())
    ok = cargo_check(crate)
    assert ok.returncode == 0, ok.stderr[-2000:]
    swapped_contract(monkeypatch)
    (crate / "build" / "contract.rs").write_text(codegen.rust_module())
    bad = cargo_check(crate)
    assert bad.returncode != 0
    assert "offset_of!(Event, bytes_acked)" in bad.stderr
