"""``intcc estimator dragonfly eval`` on committed captures of the held-out seed with the
shipped model: scores per flow with a CI over flows, a record with its provenance; and a
clear error where no flow of the model's classes is captured."""
import json
import os
import shutil

from click.testing import CliRunner

from estimator.dragonfly import DEFAULT_MODEL
from experiments.dragonfly_cli import eval_cmd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELD_OUT = os.path.join(ROOT, "lab/records/experiments/dragonfly-seed6702-2026-12-03")


def results_with(tmp_path, runs):
    """A results directory with some of the held-out seed's runs (their captures only)."""
    summary = json.load(open(os.path.join(HELD_OUT, "summary.json")))
    summary["records"] = [r for r in summary["records"] if r["run"] in runs]
    out = tmp_path / "results"
    (out / "runs").mkdir(parents=True)
    for run in runs:
        shutil.copytree(os.path.join(HELD_OUT, "runs", run), out / "runs" / run)
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def test_eval_scores_the_shipped_model_per_flow_and_writes_a_record(tmp_path):
    results = results_with(tmp_path, ["reno-cubic-bbr_r0", "cubic-bbr-reno_r0"])
    record = tmp_path / "eval.json"
    res = CliRunner().invoke(eval_cmd, [str(results), "--windows-per-flow", "5", "--json-out", str(record)])
    assert res.exit_code == 0, res.output
    assert "6 flows, 30 sub-intervals of 500 ms: macro F1" in res.output
    r = json.loads(record.read_text())
    assert r["model"].endswith(os.path.basename(DEFAULT_MODEL)) and r["interval_ms"] == 500
    assert r["model_meta"]["flows"] == "180" and "dragonfly-seed6703" in r["model_meta"]["trained_on"]
    lo, hi = r["macro_f1_ci95_by_flow"]
    assert 0 <= lo <= hi <= 1 and sum(map(sum, r["confusion"]["rows_true"])) == 30
    assert set(r["f1"]) == {"reno", "cubic", "bbr"} and {"date", "commit", "command"} <= set(r["provenance"])


def test_eval_names_what_is_missing_when_no_flow_was_captured(tmp_path):
    results = results_with(tmp_path, [])
    res = CliRunner().invoke(eval_cmd, [str(results)])
    assert res.exit_code != 0 and "no flow of reno, cubic, bbr with 500 slots of capture" in res.output


def test_eval_of_a_model_reading_the_flight_on_captures_without_acks_says_so(tmp_path):
    from estimator.dragonfly.cnn import init_params, to_onnx
    model = str(tmp_path / "flight.onnx")
    to_onnx(init_params(3, 3), 500, 3, ("reno", "cubic", "bbr"), model, {"inputs": "cbiq,ingress,flight"})
    results = results_with(tmp_path, ["reno-cubic-bbr_r0"])        # captured before the node's ACK side
    res = CliRunner().invoke(eval_cmd, [str(results), "--model", model])
    assert res.exit_code != 0 and "its capture has no ACKs" in res.output
