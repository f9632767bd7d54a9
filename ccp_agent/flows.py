"""Which kernel flow a portus flow is: libccp's create message carries 32-bit
addresses only, so the datapath daemon publishes the full tuples in flows.json."""
from __future__ import annotations

import json
import os
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

    def flow_id(self, info) -> str | None:
        fl = self.lookup(info)
        if fl is None:
            return None
        src, dst = fl["src"], fl["dst"]
        if src.startswith("::ffff:"):    # IPv4 flow on a dual-stack socket
            src, dst = src[7:], dst[7:]
        return flow_id(src, dst, PROTO_TCP, fl["sport"], fl["dport"])
