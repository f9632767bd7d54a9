from records.provenance import REPO_ROOT, command_line, provenance_of, stamp

import pytest


def test_a_command_line_reads_as_typed():
    assert command_line(["/usr/local/bin/intcc", "exp", "run", "a b"]) == "intcc exp run 'a b'"
    assert command_line([f"{REPO_ROOT}/tests/perf/bench_x.py", "--fast"]) == "python -m tests.perf.bench_x --fast"


def test_a_stamp_names_date_commit_and_command_and_a_record_without_one_is_refused():
    prov = provenance_of({"provenance": stamp("intcc report")})
    assert prov.command == "intcc report" and len(prov.date) == 10 and prov.commit
    with pytest.raises(ValueError, match="no provenance"):
        provenance_of({"records": []})
