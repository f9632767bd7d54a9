"""Studies of the in-network CCA classifier (docs/dragonfly.md): runnable with
``python -m lab.dragonfly.NAME``."""

import json


def print_table(record_path: str, table) -> int:
    """A study's --table: the docs' table ``table(record)`` gives from its record."""
    with open(record_path) as f:
        print("\n".join(table(json.load(f))))
    return 0


def print_tables(record_paths: list, table) -> int:
    """A study's --table over several records: the docs' table ``table(records)`` gives."""
    records = []
    for path in record_paths:
        with open(path) as f:
            records.append(json.load(f))
    print("\n".join(table(records)))
    return 0
