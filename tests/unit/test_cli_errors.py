"""Bad input at the command line gets one clear error line, never a traceback."""
import json
import os
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from ccp_algs.contract import CONTRACT_VERSION
from estimator.dataset import load_run
from estimator.features import TraceError
from intcc.cli import main
from int_node.config import ConfigSyntaxError
from tests.helpers import router


def test_node_check_on_a_binary_file_names_the_problem(tmp_path):
    bad = tmp_path / "bad.click"
    bad.write_bytes(b"x\x00\xff\xfe")
    r = CliRunner().invoke(main, ["node", "check", str(bad)])
    assert r.exit_code == 1
    assert "not a text configuration" in r.output and "0xff" in r.output


@pytest.mark.parametrize("element, keyword", [("INTTransit(nodeid 1)", "nodeid"), ("Queue(capacty 10)", "capacty")])
def test_a_misspelt_keyword_is_named(element, keyword):
    with pytest.raises(ConfigSyntaxError, match=f"unknown argument '{keyword}'"):
        router(f"a :: Idle -> t :: {element} -> Discard;")


def test_telemetry_watch_gives_up_on_a_dead_broker_with_an_error():
    r = CliRunner().invoke(main, ["telemetry", "watch", "--url", "mqtt://127.0.0.1:1", "--timeout", "0.5"])
    assert r.exit_code == 1
    assert "no broker at mqtt://127.0.0.1:1 after 0.5 s" in r.output


def _npz_with_objects(path):
    np.savez(path, meta=np.array([{"a": 1}], dtype=object), X=np.zeros(3), t=np.zeros(3))


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_bytes(b"garbage" * 40), "not an .npz archive"),
    (_npz_with_objects, "pickled data"),
    (lambda p: zipfile.ZipFile(p, "w").writestr("meta.npy", b"junk"), "not a collected run"),
    (lambda p: np.savez(p, meta=np.array(json.dumps({"a": 1})), X=np.zeros(3)), "lacks the array"),
])
def test_a_garbage_run_file_gets_intccs_words_not_numpys_advice(tmp_path, make, words):
    path = tmp_path / "run.npz"
    make(path)
    with pytest.raises(TraceError) as exc:
        load_run(str(path))
    assert words in str(exc.value) and "allow_pickle" not in str(exc.value)


def test_json_means_print_json_everywhere_and_json_out_writes_a_file():
    """One meaning per option name across the command line."""
    def walk(group, path=()):
        for name, cmd in getattr(group, "commands", {}).items():
            yield from walk(cmd, path + (name,))
        if not hasattr(group, "commands"):
            yield path, group
    for path, cmd in walk(main):
        for p in cmd.params:
            if "--json" in getattr(p, "opts", ()):
                assert p.is_flag, f"intcc {' '.join(path)}: --json takes a value (use --json-out FILE)"
            if "--json-out" in getattr(p, "opts", ()):
                assert not p.is_flag, f"intcc {' '.join(path)}: --json-out must name a file"


@pytest.mark.parametrize("alg", ["cubic", "reno", "const"])
def test_an_agent_refuses_a_datapath_of_another_contract_version(tmp_path, alg):
    (tmp_path / "contract.json").write_text(json.dumps({"contract_version": 1, "capabilities": []}))
    r = CliRunner().invoke(main, ["alg", "run", alg, "--state-dir", str(tmp_path)])
    assert r.exit_code == 1
    assert f"speaks contract version 1, this agent {CONTRACT_VERSION}" in r.output and "Traceback" not in r.output


def test_an_agent_refused_real_time_says_what_it_needs_and_does_not_start(tmp_path, monkeypatch):
    def refuse(pid, policy, param):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    monkeypatch.setattr("ccp_agent.cli.start", lambda alg, ipc: pytest.fail("started without real time"))
    r = CliRunner().invoke(main, ["alg", "run", "reno", "--state-dir", str(tmp_path), "--rt-priority", "1"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "--rt-priority 1: cannot run under SCHED_FIFO" in r.output and "CAP_SYS_NICE" in r.output


def test_every_registered_algorithm_has_a_command_with_its_options():
    from ccp_algs.registry import ALGORITHMS, algorithm_class
    for name in ALGORITHMS:
        r = CliRunner().invoke(main, ["alg", "run", name, "--help"])
        assert r.exit_code == 0, r.output
        for param in algorithm_class(name).params:
            assert "--" + param.name.replace("_", "-") in r.output, (name, param.name)


def test_an_unknown_algorithm_is_named_with_the_known_ones():
    from ccp_algs.registry import algorithm_class
    with pytest.raises(KeyError, match="unknown algorithm 'cubc': one of bbr, const, cubic"):
        algorithm_class("cubc")


@pytest.mark.parametrize("args, words", [
    (["--algorithms", "cubic,const"], "no forest for local CCA const"),
    (["--algorithms", "cubic,bbr2"], "unknown algorithm 'bbr2'"),
    (["--policy", "best-response"], "best-response needs a goodput table"),
])
def test_the_adaptive_agent_refuses_bad_setups_at_start(args, words):
    import estimator
    model = os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf.joblib")
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--identify", "passive", "--model", model, *args])
    assert r.exit_code == 1 and words in r.output and "Traceback" not in r.output


def test_the_adaptive_agent_refuses_a_foreign_model(tmp_path):
    bad = tmp_path / "m.joblib"
    bad.write_bytes(b"\x80\x04not a pickle")
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--identify", "passive", "--model", str(bad)])
    assert r.exit_code == 1 and "not an intcc estimator model" in r.output


def test_the_adaptive_agent_with_an_int_model_needs_the_broker():
    import estimator
    model = os.path.join(os.path.dirname(estimator.__file__), "models", "archive", "cca_rf_int.joblib")
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--identify", "passive", "--model", model])
    assert r.exit_code == 1 and "uses INT features" in r.output and "--broker" in r.output, r.output


@pytest.mark.parametrize("args, words", [
    (["--window", "10"], "--window only applies with --identify passive"),        # active is the default
    (["--identify", "active", "--initial", "reno", "--min-votes", "3"], "--initial, --min-votes only applies"),
    (["--identify", "passive", "--identify-threshold", "0.8"], "--identify-threshold only applies with --identify active"),
    (["--identify", "passive", "--no-hold-parity"], "--hold-parity/--no-hold-parity only applies"),
])
def test_the_adaptive_agent_refuses_the_options_of_the_other_way_of_identifying(args, words):
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--broker", "mqtt://127.0.0.1:1", *args])
    assert r.exit_code == 1 and words in r.output and "Traceback" not in r.output, r.output


def test_a_bad_identification_forest_is_named_at_start(tmp_path):
    bad = tmp_path / "forest.joblib"
    bad.write_bytes(b"\x80\x04not a pickle")
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--broker", "mqtt://127.0.0.1:1", "--identify-forest", str(bad)])
    assert r.exit_code == 1 and f"--identify-forest {bad}" in r.output and "Traceback" not in r.output, r.output
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--identify", "passive", "--identify-forest", "none"])
    assert r.exit_code == 1 and "--identify-forest only applies with --identify active" in r.output, r.output


def test_the_adaptive_agent_identifies_actively_by_default_and_then_needs_the_broker():
    r = CliRunner().invoke(main, ["alg", "run", "adaptive"])
    assert r.exit_code == 1 and "--identify active reads the sink's hop records" in r.output, r.output
    r = CliRunner().invoke(main, ["alg", "run", "adaptive", "--help"])
    assert "[default: active]" in " ".join(r.output.split()), r.output


def test_datapath_status_reads_the_daemons_state_and_names_a_stale_one(tmp_path):
    """`intcc datapath status` on a state directory whose daemon is gone: the figures it
    left, the kernel fold's among them, marked stale; no directory: one clear line."""
    stats = {"pid": 2 ** 22 + 1, "agent_connected": True, "epoch": 3, "flows": 2, "flows_folded_in_kernel": 2,
             "kernel": {"flows_created": 2, "controlled_acks": 5000, "fallback_acks": 10, "folded_acks": 4990,
                        "kernel_reports": 120, "events_lost": 0},
             "daemon": {"measures": 10, "cmds_written": 40, "ipc_sent": 122, "ipc_received": 60,
                        "fold_checks": 120, "fold_mismatches": 1, "file_writes_dropped": 7}}
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    r = CliRunner().invoke(main, ["datapath", "status", "--state-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "NOT running (stale state)" in r.output and "2 of them folded in the kernel" in r.output
    assert "4990 folded into 120 reports" in r.output and "1 of 120 kernel reports differ" in r.output
    assert "7 state-file writes dropped" in r.output
    r = CliRunner().invoke(main, ["datapath", "status", "--state-dir", str(tmp_path / "none")])
    assert r.exit_code == 1 and "no daemon state" in r.output and "Traceback" not in r.output
