"""Which kernel flow a portus flow is: libccp's create message carries 32-bit
addresses only, so the datapath daemon publishes the full tuples in flows.json."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

from int_node.runtime import run_path
from telemetry.flowid import PROTO_TCP, flow_id

DEFAULT_STATE_DIR = run_path("datapath")


class FlowDirectory:
    def __init__(self, state_dir: str = DEFAULT_STATE_DIR):
        self.path = os.path.join(state_dir, "flows.json")

    def lookup(self, info, wait_s: float = 0.2) -> dict | None:
        """The daemon's entry for a portus DatapathInfo (or None)."""
        key = (info.src_ip, info.src_port, info.dst_ip, info.dst_port)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with open(self.path) as f:
                    for fl in json.load(f)["flows"]:
                        if (fl["ccp_src_ip"], fl["sport"], fl["ccp_dst_ip"], fl["dport"]) == key:
                            return fl
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                pass
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)    # the daemon rewrites flows.json within a heartbeat

    def live_tuples(self) -> set | None:
        """libccp's 4-tuples of the flows the daemon lists now (None: unreadable)."""
        try:
            with open(self.path) as f:
                return {(fl["ccp_src_ip"], fl["sport"], fl["ccp_dst_ip"], fl["dport"]) for fl in json.load(f)["flows"]}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def by_ports(self, sport: int, dport: int) -> dict | None:
        """The one entry with these ports (None: none yet, or flows of two namespaces share them)."""
        try:
            with open(self.path) as f:
                found = [fl for fl in json.load(f)["flows"] if (fl["sport"], fl["dport"]) == (sport, dport)]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return found[0] if len(found) == 1 else None

    def flow_id(self, info) -> str | None:
        return entry_flow_id(self.lookup(info))


def entry_flow_id(fl: dict | None) -> str | None:
    """The telemetry flow id of a flows.json entry."""
    if fl is None:
        return None
    src, dst = fl["src"], fl["dst"]
    if src.startswith("::ffff:"):    # IPv4 flow on a dual-stack socket
        src, dst = src[7:], dst[7:]
    return flow_id(src, dst, PROTO_TCP, fl["sport"], fl["dport"])


class LocateError(RuntimeError):
    pass


def _netns_names() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True).stdout
    try:
        return [n["name"] for n in json.loads(out or "[]")]
    except (ValueError, KeyError, TypeError):
        return []


def locate_socket(src: str, sport: int, dst: str, dport: int) -> tuple[str | None, str]:
    """(network namespace, None for this process's; interface) where the sending socket of
    a flow lives: the datapath sees every namespace's flows, a capture needs the sender's."""
    for ns in [None] + _netns_names():
        prefix = ["ip", "netns", "exec", ns] if ns else []
        ss = subprocess.run(prefix + ["ss", "-tnH", f"( sport = :{sport} and dport = :{dport} )"],
                            capture_output=True, text=True).stdout
        if dst.split("%")[0] not in ss:
            continue
        route = subprocess.run((["ip", "-n", ns] if ns else ["ip"]) + ["-j", "route", "get", dst, "from", src],
                               capture_output=True, text=True)
        try:
            return ns, json.loads(route.stdout)[0]["dev"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LocateError(f"flow [{src}]:{sport} -> [{dst}]:{dport} is in namespace {ns or '(this one)'} "
                              f"but no route to {dst} names its interface: {route.stderr.strip()}") from None
    raise LocateError(f"no namespace has a socket [{src}]:{sport} -> [{dst}]:{dport} (ended?)")


def socket_min_rtt_s(ns: str | None, sport: int, dport: int) -> float | None:
    """The kernel's minimum RTT of a flow's socket (tcp_info min_rtt: the windowed minimum
    since the flow began, tcp_min_rtt_wlen = 300 s), in seconds; None if ss does not show
    it. A capture that starts once the flow is found, ~1 s in, has missed the empty queue
    of the start and sees a min RTT ~3x the path's (up to 12x): every feature scaled by the base RTT
    would be off for the whole run (the queue of two loss-based flows never drains)."""
    prefix = ["ip", "netns", "exec", ns] if ns else []
    out = subprocess.run(prefix + ["ss", "-tinH", f"( sport = :{sport} and dport = :{dport} )"],
                         capture_output=True, text=True).stdout
    m = re.search(r"\bminrtt:([0-9.]+)", out)
    return float(m.group(1)) / 1e3 if m else None
