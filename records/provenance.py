"""The date, commit and command line of a run, stamped into the records it writes."""
from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Optional

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = _REPO_ROOT     # the checkout the records describe


@dataclass(frozen=True)
class Provenance:
    date: str                      # ISO date (UTC) the record was made
    commit: str                    # the code's commit; "+dirty" when the tree had changes
    command: str                   # the command line that made it
    reconstructed: Optional[str] = None   # why the fields were filled in afterwards, if they were

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _git(*args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", "-C", _REPO_ROOT, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_commit() -> str:
    """The checkout's commit (12 hex digits), '+dirty' if tracked files differ; 'unknown'
    outside a git checkout (an installed copy)."""
    head = _git("rev-parse", "--short=12", "HEAD")
    if not head:
        return "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def command_line(argv: Optional[list] = None) -> str:
    """The command as typed: 'intcc exp run …' for the console script, else argv as is."""
    argv = list(sys.argv if argv is None else argv)
    if argv and os.path.basename(argv[0]) in ("intcc", "__main__.py"):
        argv[0] = "intcc"
    elif argv and argv[0].endswith(".py") and os.path.abspath(argv[0]).startswith(_REPO_ROOT + os.sep):
        # python -m tests.perf.bench_x puts the file's path in argv[0]: give the module back
        module = os.path.relpath(os.path.abspath(argv[0]), _REPO_ROOT)[:-3].replace(os.sep, ".")
        return shlex.join(["python", "-m", module, *argv[1:]])
    return shlex.join(argv)


def stamp(command: Optional[str] = None) -> dict:
    """A provenance dict for a record being written now."""
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return Provenance(date=today, commit=code_commit(), command=command or command_line()).as_dict()


def provenance_of(record: dict) -> Provenance:
    """A record's provenance; a clear error when it has none (every committed record must)."""
    prov = record.get("provenance") if isinstance(record, dict) else None
    if not isinstance(prov, dict) or not all(isinstance(prov.get(k), str) for k in ("date", "commit", "command")):
        raise ValueError("record has no provenance (date, commit, command)")
    return Provenance(date=prov["date"], commit=prov["commit"], command=prov["command"],
                      reconstructed=prov.get("reconstructed"))
