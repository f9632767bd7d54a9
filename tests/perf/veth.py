"""Two namespaces joined by a veth pair, for the benchmarks that need an unconstrained
path: ``VethPair("dpb", "10.98.0")`` makes intcc-dpb-a / intcc-dpb-b with intcc-dpb0 (.1)
and intcc-dpb1 (.2)."""
from __future__ import annotations

import subprocess

from experiments.testbed.bed import wait_listening


def _sh(*cmd):
    subprocess.run(list(cmd), check=True, capture_output=True)


class VethPair:
    def __init__(self, tag: str, subnet24: str):
        self.ns_a, self.ns_b = f"intcc-{tag}-a", f"intcc-{tag}-b"
        self.dev_a, self.dev_b = f"intcc-{tag}0", f"intcc-{tag}1"
        self.addr_a, self.addr_b = f"{subnet24}.1", f"{subnet24}.2"

    def up(self) -> "VethPair":
        self.down()
        for ns in (self.ns_a, self.ns_b):
            _sh("ip", "netns", "add", ns)
        _sh("ip", "link", "add", self.dev_a, "netns", self.ns_a, "type", "veth", "peer", "name", self.dev_b,
            "netns", self.ns_b)
        for ns, dev, addr in ((self.ns_a, self.dev_a, self.addr_a), (self.ns_b, self.dev_b, self.addr_b)):
            _sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    def wait_listening(self, port: int = 5201, timeout_s: float = 5.0) -> None:
        wait_listening(self.ns_b, port, timeout_s)

    def iperf(self, seconds: float, cca: str = "ccp") -> None:
        """One iperf3 flow from a to b for ``seconds`` with congestion control ``cca``; a
        client that fails raises (CalledProcessError)."""
        srv = subprocess.Popen(["ip", "netns", "exec", self.ns_b, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            self.wait_listening()       # a client before the server fails (CI, a loaded host)
            subprocess.run(["ip", "netns", "exec", self.ns_a, "iperf3", "-c", self.addr_b, "-C", cca, "-t",
                            str(seconds), "--connect-timeout", "3000"], check=True, capture_output=True,
                           timeout=seconds + 30)
        finally:
            srv.kill()
            srv.wait()

    def down(self):
        for ns in (self.ns_a, self.ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
