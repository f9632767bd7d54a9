"""Dragonfly's capture on the testbed (root): kernel BBR beside kernel CUBIC through the
dumbbell's bottleneck with the capture on; each flow's CBIQ from its sequence numbers
(telemetry.cbiq) against the queue's exact per-flow bytes, recorded by the runner; and its
bytes in flight beyond the node from the ACK side, which hold its queued bytes and more."""
import numpy as np

from experiments.runs.runner import run_scenario
from experiments.runs.scenario import load
from experiments.runs.slot_record import read_slots
from estimator.identify.bottleneck import FRAME_BYTES     # a full-sized data frame with INT headers
from telemetry.cbiq import flight_bytes, per_slot, slot_inputs

PAYLOAD_BYTES = 1428         # the hosts' MSS (1500-byte MTU, TCP timestamps)


def test_cbiq_from_sequence_numbers_follows_the_queues_own_count(tmp_path):
    sc = load("bbr_coexistence_1bdp")
    sc.algorithms = sc.algorithms[:1]                    # kernel bbr beside kernel cubic
    sc.params = {**sc.params, "flow_slots": True, "buffer_bdp": 4.0}
    sc.repeats, sc.seconds, sc.seed, sc.record_slots = 1, 6, 2, True
    (rec,) = run_scenario(sc, str(tmp_path), echo=lambda *_: None)
    got = read_slots(str(tmp_path / "runs" / rec["run"]))
    assert got["slot_ns"] == 1_000_000 and got["missed_takes"] == 0
    (table,) = [t for name, t in got["tables"].items() if name.startswith("sw1/")]   # the bottleneck's egress
    # the data connections, not iperf3's control ones (~10 slots); kernel bbr beside cubic in a
    # 4 BDP buffer gets packets in 1,030-1,340 of the 6,000 slots (measured), cubic 2,300-2,700
    data = {f["flow"][4]: f for f in table.values() if len(f["in"]) > 500}
    assert {5201, 5202} <= set(data), sorted((f["flow"][4], len(f["in"])) for f in table.values())
    for port in (5201, 5202):
        f = data[port]
        first = min(f["in"][0][0], f["out"][0][0])
        n = max(f["in"][-1][0], f["out"][-1][0]) - first + 1
        (inseq, exact), (outseq, _) = per_slot(f["in"], first, n), per_slot(f["out"], first, n)
        cbiq, _ = slot_inputs(inseq, outseq)
        # the exact count as the next slot's first packet arrived: the queue at this slot's end
        frames = exact[1:] / FRAME_BYTES
        both = ~np.isnan(cbiq) & ~np.isnan(frames)
        err_pkts = np.abs(cbiq[both] / PAYLOAD_BYTES - frames[both])
        # whole packets on both sides: measured median 0-1, 90th percentile 1-2, 99th 2-4 packets
        assert both.sum() > 500 and np.median(err_pkts) <= 1.0 and np.percentile(err_pkts, 90) <= 2.0, \
            (port, np.percentile(err_pkts, [50, 90, 99]))
        assert np.nanmax(frames) > 5          # the queue held packets of this flow: a test of something
        flight = flight_bytes(inseq, per_slot(f["ack"], first, n)[0])
        known = ~np.isnan(flight) & ~np.isnan(cbiq)
        beyond_queue_pkts = (flight[known] - cbiq[known]) / PAYLOAD_BYTES
        # what is beyond the node is the queue and the path on and back: never much less than
        # the queue (by what the next slot's first ACK covers), and the path holds packets too
        # (measured: 5th percentile 0 and 7 packets beyond the queue, median 3 and 11)
        assert known.mean() > 0.9 and np.percentile(beyond_queue_pkts, 5) >= -3, \
            (port, known.mean(), np.percentile(beyond_queue_pkts, [1, 5, 50]))
        assert np.median(beyond_queue_pkts) >= 1, (port, np.percentile(beyond_queue_pkts, [5, 50, 95]))
