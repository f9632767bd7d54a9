"""A collection plan's flows run by hand on a dumbbell (flow 1 s1 -> r1, the competitors
s2 -> r2, UDP cross traffic), with the CCP agent they need: for ``intcc estimator
live-eval``, which watches flow 1 live while they run (a collection itself runs through the
scenario runner: experiments/runs/dataset_run.py)."""
from __future__ import annotations

import json
import os
import threading

from telemetry.ccas import CCA_LABELS, KERNEL_CCAS

from experiments.runs.collection_plans import UDP_CROSS_PORT
from experiments.testbed.traffic import BackgroundFlow, RunFailed

KERNEL = set(KERNEL_CCAS)          # the others (vegas) run on the CCP datapath
#: flow 1's port when it runs through the CCP datapath (table2-live), one per CCA: the one
#: agent of a collection serves testbeds running different flow-1 CCAs at once, and tells
#: their flows apart by port (ccp_agent/by_port.py)
CCP_LOCAL_PORTS = {cca: 5301 + i for i, cca in enumerate(CCA_LABELS)}     # bbr 5301, cubic 5302, ...
#: the agent's own algorithm (the competitor's CCP flows take it) and its pins
CCP_AGENT = "vegas"


def _iperf_cca(cca: str, via_ccp: bool = False) -> str:
    return cca if cca in KERNEL and not via_ccp else "ccp"


def _via_ccp(plan: dict) -> bool:
    """Whether flow 1 runs its CCA as the adaptive agent does: a CCP algorithm."""
    return plan.get("local_via") == "ccp"


def flow1_port(plan: dict) -> int:
    return CCP_LOCAL_PORTS[plan["cca1"]] if _via_ccp(plan) else 5201


def needs_agent(plan: dict) -> bool:
    return _via_ccp(plan) or "vegas" in (plan["cca1"], plan["cca2"])


def check_agent(workdir: str):
    """A CCP flow whose agent is gone ran the datapath's Reno fallback: not the run planned."""
    try:
        with open(os.path.join(workdir, "dp", "stats.json")) as f:
            connected = json.load(f).get("agent_connected")
    except (OSError, ValueError) as e:
        raise RuntimeError(f"ccp: the datapath's stats are unreadable ({e})") from None
    if not connected:
        raise RuntimeError(f"ccp: the agent is gone, the flow ran the datapath's fallback "
                           f"(see {os.path.join(workdir, 'agent.log')}); run not kept")


def start_agent(plans: list, workdir: str):
    """(datapath, agent) serving the CCP flows of every testbed, or (None, None) when no plan
    has one: vegas, and flow 1's CCA by its port when flow 1 runs through CCP."""
    from ccp_agent.datapath import AgentProcess, DatapathProcess
    if not any(needs_agent(p) for p in plans):
        return None, None
    pins = [a for cca, port in CCP_LOCAL_PORTS.items() if cca != CCP_AGENT
            for a in ("--port-algorithm", f"{port}={cca}")] if any(map(_via_ccp, plans)) else []
    dp = DatapathProcess(state_dir=os.path.join(workdir, "dp")).start()
    try:
        agent = AgentProcess(CCP_AGENT, pins, log_path=os.path.join(workdir, "agent.log")).start()
        dp.wait_agent(True)
    except BaseException:
        dp.stop()
        raise
    return dp, agent


def start_flows(tb, plan: dict, seconds: float) -> list:
    """Flow 1 (s1 -> r1, port 5201, cca1) now and the competitor (s2 -> r2, ports 5202..,
    cca2: comp_flows flows from comp_start_s on), each an iperf3 in a thread, then the UDP
    cross traffic if the plan has some (s2 -> r2, port UDP_CROSS_PORT, from flow 1's start).
    Flows of the same start go together (traffic.iperf: otherwise the thread started first
    leads)."""
    later = plan.get("comp_start_s", 0.0)
    n_comp = plan.get("comp_flows", 1)
    same_start = n_comp if not later else 0
    n_together = 1 + same_start + (1 if plan.get("udp_mbps") else 0)     # UDP from flow 1's start
    together = threading.Barrier(n_together) if n_together > 1 else None
    flows = [BackgroundFlow(tb, "s1", "r1", _iperf_cca(plan["cca1"], _via_ccp(plan)), seconds, seconds,
                            port=flow1_port(plan), start_together=together)]
    flows += [BackgroundFlow(tb, "s2", "r2", _iperf_cca(plan["cca2"]), seconds - later, seconds - later, 5202 + k,
                             start_delay_s=later, start_together=together if same_start else None)
              for k in range(n_comp)]
    if plan.get("udp_mbps"):
        flows.append(BackgroundFlow(tb, "s2", "r2", "udp", seconds, seconds, UDP_CROSS_PORT,
                                    udp_mbps=plan["udp_mbps"], start_together=together))
    return flows


def join_flows(flows: list, plan: dict) -> list:
    """Their iperf3 outputs once all ended; RunFailed naming each that failed."""
    errors, outs = [], []
    for i, f in enumerate(flows, 1):      # all end before any error is raised
        try:
            outs.append(f.join())
        except RunFailed as e:
            what = plan["cca1"] if i == 1 else "UDP cross traffic" if f.udp_mbps else plan["cca2"]
            errors.append(f"flow {i} ({what}): {e}")
    if errors:
        raise RunFailed("; ".join(errors))
    return outs


def goodputs(outs: list, plan: dict) -> dict:
    """The receivers' Mbit/s of join_flows' outputs: the TCP flows' (flow 1 first) as
    ``goodput_mbps``, the UDP cross traffic's apart."""
    tcp = outs[:-1] if plan.get("udp_mbps") else outs
    mbps = {"goodput_mbps": [o["end"]["sum_received"]["bits_per_second"] / 1e6 for o in tcp]}
    return mbps | {"udp_received_mbps": outs[-1]["received_mbps"]} if plan.get("udp_mbps") else mbps
