"""Link control on a running testbed: the loss of every lossy link, its draws' seed,
and what the links actually lost (checked against what was configured).

A link may lose when its topology gives it a ``loss_pct`` (even 0) or a wireless
channel; its loss element (``wl<i>`` / ``loss<i>`` in the generated node
configuration, experiments/testbed/nodeconf.py) then always exists.
"""
from __future__ import annotations

import re
import zlib

from experiments.testbed.bed import Testbed
from int_node.elements.reconfig import parse_setting


def set_loss(tb: Testbed, loss_pct: float):
    """Every loss element on the testbed (wireless channels and RandomLoss), both directions.
    A loss that cannot be applied is an error, not a run labelled with it."""
    elements = list(_loss_elements(tb))
    if not elements:
        raise RuntimeError(f"cannot apply loss_pct={loss_pct}: testbed '{tb.name}' has no link that may lose "
                           f"(give a link of topology '{tb.topology_name}' a loss_pct, even 0)")
    for node, el, _ in elements:
        tb.write(node, el, "loss" if el.startswith("wl") else "p", f"{loss_pct}%")


#: a reconfiguration setting ("none", "50ms", "100ms/10ms") -> (period, downtime) for the handlers
parse_reconfig = parse_setting


def set_reconfig(tb: Testbed, value) -> None:
    """Every Reconfigure on the testbed to ``value`` (parse_reconfig); its schedule restarts.
    A testbed without one is an error, not a run labelled with it."""
    period, downtime = parse_reconfig(value)
    elements = [(node, el) for node in tb.node_names for el in tb.counters(node) if re.fullmatch(r"rc\d+", el)]
    if not elements:
        raise RuntimeError(f"cannot apply reconfig={value}: testbed '{tb.name}' has no reconfigured link "
                           f"(give a link of topology '{tb.topology_name}' a reconfig table)")
    for node, el in elements:
        tb.write(node, el, "downtime", "0")       # first: a downtime is checked against the period
        tb.write(node, el, "period", period)
        tb.write(node, el, "downtime", downtime)


def _loss_elements(tb: Testbed):
    """(node, element, its counters) of every link-loss element of the testbed."""
    for node in tb.node_names:
        for el, c in tb.counters(node).items():
            if re.fullmatch(r"(wl|loss)\d+", el):
                yield node, el, c


def run_seed(base_seed: int, key: str, value, repeat: int) -> int:
    """The loss draws' seed of one run: the same for every algorithm of a repeat (common
    random numbers: compared runs meet the same fate for the same transmission, see
    int_node.loss_draws), another for each repeat and sweep value."""
    return zlib.crc32(f"{base_seed}/{key}={value}/{repeat}".encode())


def seed_losses(tb: Testbed, seed: int):
    """Restart every loss element's draws from ``seed`` (each element its own stream)."""
    for node, el, _ in _loss_elements(tb):
        tb.write(node, el, "seed", str(zlib.crc32(f"{seed}/{node}/{el}".encode())))


def link_loss_counts(tb: Testbed) -> tuple[int, int, int]:
    """(passed, lost, lost to the configured loss) over every loss element: wireless
    channels (whose losses also include channel errors) and RandomLoss."""
    passed = lost = configured = 0
    for _, el, c in _loss_elements(tb):
        passed += c.get("passed", 0)
        if el.startswith("wl"):
            lost += c.get("link_losses", 0)
            configured += c.get("configured_losses", 0)
        else:
            lost += c.get("dropped", 0)
            configured += c.get("dropped", 0)
    return passed, lost, configured


def emulation_lag_counts(tb: Testbed) -> tuple[dict, int, int]:
    """({"node/shaper": link time it gave up to late wake-ups, us}; delay lateness summed,
    us; packets the delays held): how far a busy host made the emulated links fall behind
    what they were configured to be (LinkShaper behind_us_total, Delay late_us_total)."""
    behind, late, held = {}, 0, 0
    for node in tb.node_names:
        for element, c in tb.counters(node).items():
            if "behind_us_total" in c:
                behind[f"{node}/{element}"] = c["behind_us_total"]
            elif "late_us_total" in c:
                late += c["late_us_total"]
                held += c.get("packets", 0)
    return behind, late, held


def emulation_lag_fields(before: tuple, after: tuple) -> dict:
    """A run's record fields from emulation_lag_counts before and after it."""
    (behind_before, late_before, held_before), (behind_after, late_after, held_after) = before, after
    behind = {k: v - behind_before.get(k, 0) for k, v in behind_after.items()}
    worst = max(behind, key=behind.get, default=None)
    late_us, held = late_after - late_before, held_after - held_before
    return {"emulation_behind_ms": sum(behind.values()) / 1e3,
            "emulation_behind_ms_link_max": behind[worst] / 1e3 if worst else 0.0,
            "emulation_behind_worst_link": worst,
            "delay_late_us_mean": late_us / held if held else None}


def configured_loss_pct(tb: Testbed) -> float | None:
    """The loss the topology configures on its lossy links, None if they differ (or none)."""
    losses = {l.loss_pct for l in (tb.topo.links if tb.topo else []) if l.may_lose}
    return losses.pop() if len(losses) == 1 else None


def check_loss(rec: dict, configured: float | None) -> str | None:
    """Record the configured loss beside the measured one; flag a run they disagree on."""
    rec["configured_loss_pct"] = configured
    if configured is None or not rec.get("link_packets"):
        return None
    tol = loss_tolerance_pct(configured, rec["link_packets"])
    off = abs(rec["measured_configured_loss_pct"] - configured) > tol
    rec["loss_off"] = off
    if off:
        return (f"measured loss {rec['measured_configured_loss_pct']:.2f} % is off the configured "
                f"{configured:g} % by more than {tol:.2f} points (flagged: loss_off)")
    return None


#: link time one shaper may give up to a busy host before a run is flagged (of its length:
#: that link ran 1 % below its rate)
EMULATION_BEHIND_MAX = 0.01


def check_emulation(rec: dict) -> str | None:
    """Flag a run one of whose emulated links fell behind its rate by more than 1 % of the
    run (emulation_off): the host's CPUs did not keep up with the nodes, so the network was
    not the configured one. Records from before the per-link count (2026-11-29) are judged
    by the sum over links, which is never below it."""
    behind_ms = rec.get("emulation_behind_ms_link_max", rec.get("emulation_behind_ms"))
    if behind_ms is None or not rec.get("seconds"):
        return None
    rec["emulation_off"] = off = behind_ms > EMULATION_BEHIND_MAX * rec["seconds"] * 1e3
    if off:
        where = f" ({rec['emulation_behind_worst_link']})" if rec.get("emulation_behind_worst_link") else ""
        return (f"an emulated link{where} fell behind its rate by {behind_ms:.0f} ms over the run's "
                f"{rec['seconds']:g} s (all links: {rec.get('emulation_behind_ms', behind_ms):.0f} ms): the "
                f"host was too busy for its nodes (flagged: emulation_off)")
    return None


def loss_tolerance_pct(loss_pct: float, packets: int) -> float:
    """How far a run's measured configured loss may sit from the configured one before
    the run is flagged: five binomial standard deviations, at least half a point."""
    p = min(max(loss_pct / 100, 0.0), 1.0)
    return max(0.5, 5 * 100 * (p * (1 - p) / max(packets, 1)) ** 0.5)
