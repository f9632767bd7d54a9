"""Integration tests: real namespaces, veths, node processes and kernel TCP (root)."""
import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root (namespaces, raw sockets)")
        for item in items:
            item.add_marker(skip)
    for tool in ("iperf3", "tshark", "tcpdump", "ethtool"):
        if not shutil.which(tool):
            raise pytest.UsageError(f"{tool} is missing: run 'make setup'")
