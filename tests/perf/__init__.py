"""Benchmarks: scripts that print figures (make bench), never timing asserts."""
import sys


def answer_help(doc: str) -> None:
    """For a benchmark run as a script: ``--help`` prints what it measures (its module
    docstring) instead of starting a run of minutes; any other argument is refused."""
    args = sys.argv[1:]
    if args in (["-h"], ["--help"]):
        print(doc.strip())
        raise SystemExit(0)
    if args:
        raise SystemExit(f"{sys.argv[0]}: takes no arguments (got {' '.join(args)}); --help says what it measures")
