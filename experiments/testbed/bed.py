"""The emulated testbed: namespaces, veths, addresses, routes and node processes.

Everything is named with the ``intcc-`` prefix: namespace ``intcc-<testbed>-<host>``,
interfaces ``intcc-<peer>`` inside it. A testbed's run directory
(``/run/intcc/<testbed>/``) holds its state, node configurations, logs, control
sockets and INT logs. Teardown is idempotent and works from the names alone, so
it also cleans up after a killed node, supervisor or ``up``.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional

from pyroute2 import IPRoute, NetNS, netns
from pyroute2.netlink.exceptions import NetlinkError

from int_node.control import request as node_request
from int_node.runtime import InterpreterError
from int_node.runtime import RT_WITH_BUSY_POLL, node_python as resolve_node_python
from experiments.testbed.nodeconf import INT_HEADROOM_BYTES, MIRROR_IFNAME, Iface, link_prefix, node_config
from experiments.testbed.teardown import (TestbedError, _read_json, _sh, _tail, list_testbeds, namespace_changes, run_dir,
                                         teardown)
from experiments.testbed.topo import Topo, TopologyError
HOST_MTU = 1500
OFFLOADS_OFF = ["tx", "off", "rx", "off", "gro", "off", "gso", "off", "tso", "off"]


def _lookup(ns, ifname: str, ns_name: str) -> int:
    found = ns.link_lookup(ifname=ifname)
    if not found:
        raise TestbedError(f"interface {ifname} is not in namespace {ns_name} where it was just put "
                           f"(was the namespace removed or replaced meanwhile?)")
    return found[0]


def wait_listening(ns: str, port: int = 5201, timeout_s: float = 5.0) -> None:
    """Until a TCP socket listens on ``port`` in namespace ``ns`` (a server just started): a
    client started before it fails, and a one-off server then waits for good."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                          text=True, timeout=5).stdout.strip():
            return
        time.sleep(0.02)
    raise TestbedError(f"nothing listens on {ns}:{port} after {timeout_s:.0f} s")


class Testbed:
    __test__ = False   # not a pytest class

    def __init__(self, topo: Topo, name: Optional[str] = None):
        self.topo = topo
        self.name = name or topo.name
        if not self.name.isalnum() or len(self.name) > 12 or not self.name.islower():
            raise TopologyError(f"testbed name {self.name!r} must be 1-12 lowercase letters/digits")
        self.dir = run_dir(self.name)
        self.ifaces: Dict[str, List[Iface]] = {}
        self.state: dict = {}
        self.node_pythons: Dict[str, str] = {}   # node -> interpreter path, resolved by up()
        self.node_rt_priorities: Dict[str, int] = {}   # node -> SCHED_FIFO priority (0: none), by up()

    # -- naming ------------------------------------------------------------
    def ns(self, name: str) -> str:
        return f"intcc-{self.name}-{name}"

    def addr(self, host: str) -> str:
        """The host's address (on its first link)."""
        return self.state["hosts"][host]["addrs"][0]

    # -- what a running testbed is made of (state.json is this class's, not an API) --
    @property
    def host_names(self) -> List[str]:
        return list(self.state["hosts"])

    @property
    def node_names(self) -> List[str]:
        return list(self.state["nodes"])

    @property
    def topology_name(self) -> str:
        return self.state["topology"]

    def host_info(self, host: str) -> dict:
        """netns, addrs, ifaces of a host."""
        return self.state["hosts"][host]

    def node_info(self, node: str) -> dict:
        """node_id, int roles, netns, python, log, int_log ... of a node."""
        return self.state["nodes"][node]

    # -- bring up ----------------------------------------------------------
    def up(self, exporter: str = "jsonl", wait_s: float = 15.0, node_python: Optional[str] = None,
           node_rt_priority: Optional[int] = None) -> "Testbed":
        """``node_python`` (cpython, pypy or a path) overrides every node's
        interpreter; default: the topology's, else $INTCC_NODE_PYTHON, else cpython.
        ``node_rt_priority`` overrides every node's ``rt_priority`` (SCHED_FIFO; 0: none)."""
        if self.name in list_testbeds():
            raise TestbedError(f"testbed '{self.name}' is already up (or left over): "
                               f"run 'intcc testbed down --name {self.name}' first")
        if node_rt_priority is not None:
            if not 0 <= node_rt_priority <= 99:
                raise TestbedError(f"node_rt_priority {node_rt_priority}: a SCHED_FIFO priority is 1-99 (0: none)")
            polling = [n for n, info in self.topo.nodes.items() if info.get("busy_poll_us")]
            if node_rt_priority and polling:
                raise TestbedError(f"node_rt_priority with busy-polling nodes ({', '.join(polling)}): "
                                   f"{RT_WITH_BUSY_POLL}")
        self.node_rt_priorities = {n: info.get("rt_priority", 0) if node_rt_priority is None else node_rt_priority
                                   for n, info in self.topo.nodes.items()}
        try:
            self.node_pythons = {n: resolve_node_python(node_python or info.get("python"))
                                 for n, info in self.topo.nodes.items()}
        except InterpreterError as exc:
            raise TestbedError(str(exc)) from None
        os.makedirs(self.dir, exist_ok=True)
        try:
            with namespace_changes():
                self._build_network()
            self._write_state(exporter)
            self._start_supervisor()
            self._wait_nodes(wait_s)
        except (OSError, NetlinkError) as exc:
            teardown(self.name)
            raise TestbedError(f"bringing up testbed '{self.name}' failed: {exc}") from exc
        except BaseException:
            teardown(self.name)
            raise
        return self

    def _build_network(self):
        topo = self.topo
        for n in topo.hosts + list(topo.nodes):
            netns.create(self.ns(n))
            self._sysctls(n)
        tag = hashlib.sha1(self.name.encode()).hexdigest()[:4]
        ends: Dict[str, List[Iface]] = {n: [] for n in topo.hosts + list(topo.nodes)}
        with IPRoute() as ipr:
            for link in topo.links:
                tmp = [f"intcc{tag}{link.index:03d}{s}" for s in "ab"]
                ipr.link("add", ifname=tmp[0], kind="veth",
                         peer={"ifname": tmp[1], "net_ns_fd": self.ns(link.b)})
                ipr.link("set", index=ipr.link_lookup(ifname=tmp[0])[0], net_ns_fd=self.ns(link.a))
                macs = {}
                for end, t, host_no in ((link.a, tmp[0], 1), (link.b, tmp[1], 2)):
                    ifname = self.ifname(link, end)
                    mtu = HOST_MTU if topo.is_host(end) else HOST_MTU + INT_HEADROOM_BYTES
                    with NetNS(self.ns(end)) as ns:
                        idx = _lookup(ns, t, self.ns(end))
                        ns.link("set", index=idx, ifname=ifname, mtu=mtu, state="up")
                        prefix = link_prefix(link)
                        address = prefix.replace("::/64", f"::{host_no}")
                        ns.addr("add", index=idx, address=address, prefixlen=64)
                        macs[end] = ns.get_links(idx)[0].get_attr("IFLA_ADDRESS")
                    _sh(["ip", "netns", "exec", self.ns(end), "ethtool", "-K", ifname] + OFFLOADS_OFF, check=False)
                    ends[end].append(Iface(link, ifname, "", link.other(end), "", address, prefix, mtu))
                for end in (link.a, link.b):
                    f = ends[end][-1]
                    f.mac, f.peer_mac = macs[end], macs[f.peer]
        self.ifaces = ends
        if topo.extra.get("int_mirror"):
            for n, info in topo.nodes.items():
                if "sink" in info["int"]:
                    with NetNS(self.ns(n)) as ns:   # a veth pair: this kernel has no dummy
                        ns.link("add", ifname=MIRROR_IFNAME, kind="veth", peer={"ifname": MIRROR_IFNAME + "p"})
                        for name in (MIRROR_IFNAME, MIRROR_IFNAME + "p"):
                            idx = _lookup(ns, name, self.ns(n))
                            ns.link("set", index=idx, mtu=HOST_MTU + INT_HEADROOM_BYTES, state="up")
        for h in topo.hosts:
            f = ends[h][0]
            gw = next(g for g in ends[f.peer] if g.link is f.link)
            with NetNS(self.ns(h)) as ns:
                idx = _lookup(ns, f.ifname, self.ns(h))
                # Permanent neighbour entry: no ND round trip through the node.
                ns.neigh("add", dst=gw.addr, lladdr=gw.mac, ifindex=idx, state="permanent")
                ns.route("add", dst="::/0", gateway=gw.addr, oif=idx)

    def ifname(self, link, end: str) -> str:
        """The name of ``link``'s interface in ``end``'s namespace."""
        peer = link.other(end)
        same = [l for l in self.topo.links_of(end) if l.other(end) == peer]
        return f"intcc-{peer}" if len(same) == 1 else f"intcc{same.index(link)}-{peer}"[:15]

    def _sysctls(self, n: str):
        ns = self.ns(n)
        settings = ["net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                    "net.ipv6.conf.all.accept_ra=0", "net.ipv6.conf.default.accept_ra=0",
                    "net.ipv6.conf.all.forwarding=0"]   # nodes forward in user space only
        _sh(["ip", "netns", "exec", ns, "sysctl", "-qw"] + settings)
        _sh(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])
        if n in self.topo.nodes:
            # The node's kernel sees every frame too; without a route it would answer
            # transit packets with ICMPv6 "no route" errors that race the node's copy.
            _sh(["ip", "netns", "exec", ns, "ip", "-6", "route", "add", "blackhole", "default"])

    def _write_state(self, exporter: str):
        topo = self.topo
        nodes = {}
        for n, info in topo.nodes.items():
            exp = "none"
            if exporter in ("jsonl", "capture") and "sink" in info["int"]:
                exp = f"{exporter}:{os.path.join(self.dir, n + '.int.' + exporter)}"
            elif exporter.startswith(("mqtt:", "mqtts:")) and "sink" in info["int"]:
                exp = exporter    # the sink publishes telemetry to this broker
            conf = os.path.join(self.dir, f"{n}.click")
            with open(conf, "w") as f:
                f.write(node_config(topo, n, self.ifaces[n], exp))
            nodes[n] = {"node_id": info["node_id"], "int": info["int"], "netns": self.ns(n),
                        "config": conf, "control": os.path.join(self.dir, f"{n}.sock"),
                        "log": os.path.join(self.dir, f"{n}.log"), "cpu": info.get("cpu"),
                        "python": self.node_pythons[n],
                        "poll_idle": info.get("poll_idle", False),
                        "busy_poll_us": info.get("busy_poll_us", 0),
                        "rt_priority": self.node_rt_priorities[n],
                        "fast_path": info.get("fast_path", False),
                        "int_log": exp.partition(":")[2] if exp.startswith("jsonl:") else None}
        self.state = {
            "name": self.name, "topology": topo.path, "params": topo.params, "created": time.time(),
            "hosts": {h: {"netns": self.ns(h), "addrs": [f.addr for f in self.ifaces[h]],
                          "ifaces": [f.ifname for f in self.ifaces[h]]} for h in topo.hosts},
            "nodes": nodes,
            "links": [{"ends": [l.a, l.b], "rate_mbps": l.rate_mbps, "delay_ms": l.delay_ms,
                       "loss_pct": l.loss_pct, "buffer_pkts": l.buffer_pkts, "wireless": l.wireless,
                       "prefix": link_prefix(l)} for l in topo.links],
        }
        with open(os.path.join(self.dir, "state.json"), "w") as f:
            json.dump(self.state, f, indent=1)

    def _start_supervisor(self):
        log = open(os.path.join(self.dir, "supervisor.log"), "ab")
        subprocess.Popen([sys.executable, "-m", "experiments.testbed.supervisor", self.dir],
                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        log.close()

    def _wait_nodes(self, wait_s: float):
        deadline = time.monotonic() + wait_s
        pending = set(self.state["nodes"])
        while pending and time.monotonic() < deadline:
            for n in list(pending):
                try:
                    if self.node_request(n, {"cmd": "counters"}, timeout_s=0.5).get("ok"):
                        pending.discard(n)
                except OSError:
                    pass
            time.sleep(0.05)
        if pending:
            n = sorted(pending)[0]
            tail = _tail(self.state["nodes"][n]["log"]) or _tail(os.path.join(self.dir, "supervisor.log"))
            raise TestbedError(f"node {n} did not come up within {wait_s:.0f} s; its log ends:\n{tail}")

    # -- use -----------------------------------------------------------------
    @classmethod
    def attach(cls, name: Optional[str] = None) -> "Testbed":
        """The running testbed ``name`` (or the only one running)."""
        if name is None:
            up = [n for n in list_testbeds() if os.path.exists(os.path.join(run_dir(n), "state.json"))]
            if len(up) != 1:
                raise TestbedError("no testbed is up" if not up else
                                   f"several testbeds are up ({', '.join(up)}): pass --name")
            name = up[0]
        path = os.path.join(run_dir(name), "state.json")
        try:
            with open(path) as f:
                state = json.load(f)
        except FileNotFoundError:
            raise TestbedError(f"testbed '{name}' is not up ({path} missing)") from None
        tb = cls.__new__(cls)
        tb.name, tb.dir, tb.state, tb.topo, tb.ifaces = name, run_dir(name), state, None, {}
        return tb

    def node_request(self, node: str, req: dict, timeout_s: float = 2.0) -> dict:
        return node_request(self.state["nodes"][node]["control"], req, timeout_s)

    def write(self, node: str, element: str, handler: str, value) -> dict:
        reply = self.node_request(node, {"cmd": "write", "element": element, "handler": handler,
                                         "value": str(value)})
        if not reply.get("ok"):
            raise TestbedError(f"{node}: {reply.get('error')}")
        return reply

    def counters(self, node: str) -> dict:
        reply = self.node_request(node, {"cmd": "counters"})
        if not reply.get("ok"):
            raise TestbedError(f"{node}: {reply.get('error')}")
        return reply["counters"]

    def cmd(self, host: str, args: List[str]) -> List[str]:
        ns = self.state["hosts"][host]["netns"] if host in self.state["hosts"] else \
            self.state["nodes"][host]["netns"]
        return ["ip", "netns", "exec", ns] + list(args)

    def popen(self, host: str, args: List[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(self.cmd(host, args), **kw)

    def run(self, host: str, args: List[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.cmd(host, args), timeout=timeout, **kw)

    def wait_listening(self, host: str, port: int, timeout_s: float = 5.0) -> None:
        """Until a TCP socket listens on ``port`` in ``host`` (a server just started)."""
        wait_listening(self.ns(host), port, timeout_s)

    def status(self) -> dict:
        sup = _read_json(os.path.join(self.dir, "nodes.json")) or {}
        nodes = {}
        for n, info in self.state["nodes"].items():
            entry = {"node_id": info["node_id"], "int": info["int"], "netns": info["netns"], "control": info["control"],
                     "python": info.get("python"),
                     "pid": sup.get("nodes", {}).get(n, {}).get("pid"),
                     "restarts": sup.get("nodes", {}).get(n, {}).get("restarts", 0)}
            try:
                entry["counters"] = self.counters(n)
                entry["alive"] = True
                # what the node lost before any element saw it, summed over its devices
                devices = [c for c in entry["counters"].values() if "kernel_drops" in c]
                entry["rx_kernel_drops"] = sum(c["kernel_drops"] for c in devices)
                entry["rx_refused"] = sum(c.get("refused", 0) for c in devices)
            except (OSError, TestbedError, ValueError) as exc:
                entry["alive"], entry["error"] = False, str(exc)
            nodes[n] = entry
        return {"name": self.name, "topology": self.state["topology"], "params": self.state["params"],
                "supervisor_pid": sup.get("pid"), "hosts": self.state["hosts"], "nodes": nodes,
                "links": self.state["links"]}

    def down(self):
        teardown(self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()
