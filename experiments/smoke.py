"""INT smoke experiment: kernel TCP over the wireless testbed at a few link-loss
rates, with what the INT nodes saw. Stands in for ``make demo`` until the
lossy-link experiment (INT-aware CUBIC) exists."""
from __future__ import annotations

import json
import os

from .runner import iperf
from .testbed import Testbed, teardown
from .topo import load_topo

TOPO = os.path.join(os.path.dirname(__file__), "topologies", "wireless.toml")


def run_smoke(loss_pcts=(0, 2, 5), seconds=8, cca="cubic", echo=print):
    rows = []
    teardown("smoke")
    tb = Testbed(load_topo(TOPO), "smoke").up()
    try:
        for loss in loss_pcts:
            tb.write("ap1", "wl1", "loss", f"{loss}%")
            before = tb.counters("ap1")["wl1"]
            echo(f"  {cca} over the wireless hop, link loss {loss}% ({seconds} s) ...")
            out = iperf(tb, "sta1", "sta2", cca, seconds, interval_s=1.0)
            c1, c2 = tb.counters("ap1"), tb.counters("ap2")
            lost = c1["wl1"]["link_losses"] - before["link_losses"]
            sent = lost + c1["wl1"]["passed"] - before["passed"]
            rows.append({"loss_pct": loss, "goodput_mbps": out["end"]["sum_received"]["bits_per_second"] / 1e6,
                         "retransmits": out["end"]["sum_sent"].get("retransmits", 0),
                         "measured_loss_pct": 100 * lost / max(sent, 1),
                         "int_inserted": c1["src0"]["inserted"], "int_stamped_ap2": c2["tr1"]["stamped"],
                         "int_records": c2["sink1"]["exported"], "queue_drops": c1["q1"]["drops"]})
        int_log = tb.state["nodes"]["ap2"]["int_log"]
        with open(int_log) as f:
            last = json.loads(f.readlines()[-1])
    finally:
        tb.down()
    return rows, last


def format_table(rows, last) -> str:
    lines = [f"{'link loss %':>11} {'measured %':>10} {'goodput Mbit/s':>15} {'retransmits':>11} "
             f"{'queue drops':>11} {'INT records':>11}"]
    for r in rows:
        lines.append(f"{r['loss_pct']:>11} {r['measured_loss_pct']:>10.2f} {r['goodput_mbps']:>15.2f} "
                     f"{r['retransmits']:>11} {r['queue_drops']:>11} {r['int_records']:>11}")
    hops = last["trace"]["hops"]
    lines.append("")
    lines.append("last INT record at the sink (ap2):")
    for h in hops:
        st = h["state"] or {}
        lines.append(f"  node {h['node_id']}: queue {h['queue_depth_bytes']} B ({h['buffer_occupancy']} pkts), "
                     f"transit {h['transit_delay_ns'] / 1000:.0f} us, RSSI {st.get('rssi_dbm')} dBm, "
                     f"MCS {st.get('mcs')}, rate {st.get('data_rate_kbps')} kbit/s, "
                     f"link losses {st.get('link_losses')}, queue drops {st.get('queue_drops')}, "
                     f"flows {st.get('flow_count')}")
    lines.append(f"  e2e sequence number {last.get('e2e', {}).get('seq')}")
    return "\n".join(lines)
