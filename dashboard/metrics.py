"""``/metrics`` in Prometheus' text format (prometheus_client), from the dashboard's state:
per hop and per flow gauges and counters labelled by node id, flow id and cause, and the
feed's health. A scrape reads the latest record of each; Grafana draws the rest."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class _StateCollector:
    def __init__(self, state, feed=None):
        self.state, self.feed = state, feed

    def collect(self):
        snap = self.state.since(self.state.seq)     # worst-N and health, no points
        hops, flows = self.state.latest()
        occ = GaugeMetricFamily("intcc_hop_queue_occupancy", "egress queue depth / capacity (0..1)", labels=["node"])
        depth = GaugeMetricFamily("intcc_hop_queue_depth_bytes", "egress queue depth", labels=["node"])
        arrival = GaugeMetricFamily("intcc_hop_arrival_rate_pps", "packets/s arriving at the egress queue",
                                    labels=["node"])
        rssi = GaugeMetricFamily("intcc_hop_rssi_dbm", "wireless received signal strength", labels=["node"])
        drops = CounterMetricFamily("intcc_hop_queue_drops", "drops of the egress queue (cumulative, wraps at 2^32)",
                                    labels=["node"])
        losses = CounterMetricFamily("intcc_hop_link_losses", "losses on the egress link (cumulative, wraps at 2^32)",
                                     labels=["node"])
        for node, h in hops:
            n = str(node)
            occ.add_metric([n], h.queue_occupancy or 0.0)
            depth.add_metric([n], h.queue_depth_bytes)
            arrival.add_metric([n], h.arrival_rate_pps)
            if h.rssi_dbm is not None:
                rssi.add_metric([n], h.rssi_dbm)
            drops.add_metric([n], h.queue_drops)
            losses.add_metric([n], h.link_losses)
        packets = CounterMetricFamily("intcc_flow_packets", "packets of the flow received by the sink",
                                      labels=["flow"])
        lost = CounterMetricFamily("intcc_flow_lost_packets", "confirmed end-to-end losses by cause",
                                   labels=["flow", "cause"])
        loss_rate = GaugeMetricFamily("intcc_flow_loss_rate", "lost / (received + lost), since the sink first "
                                                              "saw the flow", labels=["flow"])
        owd = GaugeMetricFamily("intcc_flow_one_way_delay_seconds", "sink clock - the source's E2E timestamp",
                                labels=["flow"])
        for fid, f in flows:
            packets.add_metric([fid], f.packets)
            lost.add_metric([fid, "congestion"], f.lost_congestion)
            lost.add_metric([fid, "link"], f.lost_link)
            lost.add_metric([fid, "reconfig"], f.lost_reconfig)
            loss_rate.add_metric([fid], f.loss_rate)
            if f.one_way_delay_us is not None:
                owd.add_metric([fid], f.one_way_delay_us / 1e6)
        rate = GaugeMetricFamily("intcc_dashboard_records_per_second", "records received, by type (10 s)",
                                 labels=["type"])
        for kind, v in snap["health"]["records_per_s"].items():
            rate.add_metric([kind], v)
        age = GaugeMetricFamily("intcc_dashboard_sink_record_age_seconds", "age of the newest record per sink",
                                labels=["sink"])
        for sink, v in snap["health"]["sink_age_s"].items():
            age.add_metric([sink], v)
        cca = GaugeMetricFamily("intcc_flow_cca_score", "a node's classifier (Dragonfly): the score of the flow's "
                                "CCA it names (fresh verdicts only)", labels=["flow", "node", "cca"])
        for fid, c in snap["ccas"].items():
            cca.add_metric([fid, str(c["node_id"]), c["cca"]], c["confidence"])
        hop_ccas = GaugeMetricFamily("intcc_hop_flows_by_cca", "flows through the node named each CCA by its "
                                     "classifier (fresh verdicts only)", labels=["node", "cca"])
        for node, named in snap["hop_ccas"].items():
            for name, n in named.items():
                hop_ccas.add_metric([node, name], n)
        out = [occ, depth, arrival, rssi, drops, losses, packets, lost, loss_rate, owd, cca, hop_ccas, rate, age]
        if self.feed is not None:
            h = self.feed.health()
            up = GaugeMetricFamily("intcc_dashboard_broker_connected", "1 while connected to the broker")
            up.add_metric([], 1.0 if h.get("connected") else 0.0)
            rejected = CounterMetricFamily("intcc_dashboard_rejected_records", "records refused by the schema")
            rejected.add_metric([], h.get("rejected", 0))
            out += [up, rejected]
        yield from out


def metrics_text(state, feed=None) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StateCollector(state, feed))
    return generate_latest(registry)
