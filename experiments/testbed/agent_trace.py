"""One CCP agent serves the flows of parallel testbeds: its trace is split per run by
the ports on each flow's start row (testbed k's flows use MAIN_PORT + PORT_STRIDE·k)."""
from __future__ import annotations

import csv
import os


def split_agent_trace(path: str, dirs_by_port: dict[int, str], competitor_ports: dict[int, str] | None = None) -> int:
    """One agent's trace of several testbeds' flows -> each run's trace.csv, by the ports
    on each flow's start row: the iperf3 server's port is the client's destination port
    and the source port of the server's own sockets (iperf3 sets the CCA on both ends).
    Flows of ``competitor_ports`` (port -> run directory: a competitor the same agent
    runs) go to that run's competitor-trace.csv. Returns the rows no run claimed (then
    the combined trace is kept beside the runs, else removed)."""
    files = {port: os.path.join(d, "trace.csv") for port, d in dirs_by_port.items()}
    files |= {port: os.path.join(d, "competitor-trace.csv") for port, d in (competitor_ports or {}).items()}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames or ["t_s"], list(reader)
    port_of_sid = {}
    for r in rows:
        if r["event"] == "start":
            port_of_sid[r["sid"]] = next((int(r[k]) for k in ("dst_port", "src_port")
                                         if r.get(k) and int(r[k]) in files), None)
    out = {f: [] for f in files.values()}
    unclaimed = 0
    for r in rows:
        port = port_of_sid.get(r["sid"])
        if port in files:
            out[files[port]].append(r)
        else:
            unclaimed += 1
    for path_out, claimed in out.items():
        with open(path_out, "w", newline="") as f:
            w = csv.DictWriter(f, fields)
            w.writeheader()
            w.writerows(claimed)
    if not unclaimed:
        os.remove(path)
    return unclaimed
