"""The docs' Results tables are what the committed records give, and every record says
where it came from."""
import glob
import json
import os
import re
import subprocess

import pytest

from intcc import report
from intcc.report_sections import SECTIONS
from records import provenance_of

ROOT = report.ROOT


def test_every_results_table_in_the_docs_matches_its_records():
    assert report.check() == []


def test_a_number_changed_by_hand_in_a_doc_is_caught(tmp_path):
    """The control: the same check on a copy of a doc with one figure edited must fail."""
    docs = [p for p in report.doc_paths() if report.BLOCK.search(open(p, encoding="utf-8").read())]
    assert docs, "no doc holds a generated table"
    text = open(docs[0], encoding="utf-8").read()
    block = report.BLOCK.search(text)
    digit = re.search(r"\d", block.group("body"))
    pos = block.start("body") + digit.start()
    edited = text[:pos] + str((int(text[pos]) + 1) % 10) + text[pos + 1:]
    copy = tmp_path / "doc.md"
    copy.write_text(edited, encoding="utf-8")
    assert report.check([str(copy)]) == [f"{os.path.relpath(copy, ROOT)}: {block.group('name')}"]
    report.update([str(copy)], echo=lambda _line: None)          # and update puts it back
    assert copy.read_text(encoding="utf-8") == text


def test_a_doc_naming_an_unknown_section_gets_an_error_naming_it(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- report:no-such-thing -->\nx\n<!-- /report -->\n")
    with pytest.raises(report.ReportError, match="no report section 'no-such-thing'"):
        report.check([str(doc)])


def test_every_section_is_used_by_a_doc():
    used = {m.group("name") for p in report.doc_paths() for m in report.BLOCK.finditer(open(p, encoding="utf-8").read())}
    assert set(SECTIONS) <= used, f"sections no doc shows: {sorted(set(SECTIONS) - used)}"


@pytest.mark.parametrize("path", sorted(
    glob.glob(os.path.join(ROOT, "data", "experiments", "*.json"))
    + glob.glob(os.path.join(ROOT, "data", "estimator", "scores", "*.json"))
    + glob.glob(os.path.join(ROOT, "data", "bench", "*.json"))
    + glob.glob(os.path.join(ROOT, "lab", "records", "**", "*.json"), recursive=True)), ids=os.path.basename)
def test_every_committed_record_carries_its_date_commit_and_command(path):
    with open(path) as f:
        prov = provenance_of(json.load(f))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", prov.date)
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?|unknown", prov.commit)
    assert prov.command.startswith(("intcc ", "python -m "))


def test_no_tracked_file_is_named_by_a_work_log_number():
    """Records are named by what they are (scenario, seed, date), not by a work-log number."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    assert [n for n in out.stdout.splitlines() if re.search(r"-s\d{2}\b", n)] == []
