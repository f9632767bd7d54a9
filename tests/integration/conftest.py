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


@pytest.fixture(scope="session", autouse=True)
def no_testbed_left_from_a_killed_run():
    """A run killed mid-test (a machine restart, a timeout) leaves its namespaces behind, and
    every later module whose testbed has the same name would error on 'already up': the
    suite owns its testbeds' names, so it clears what an earlier run left, and says so."""
    if os.geteuid() != 0:
        yield
        return
    from experiments.testbed.teardown import list_testbeds, teardown
    for name in list_testbeds():
        removed = teardown(name)
        print(f"\nintegration: cleared testbed '{name}' left by an earlier run: {', '.join(removed)}")
    yield
