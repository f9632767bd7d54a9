"""Dragonfly's per-slot inputs (telemetry.cbiq) on the paper's worked example (its Table I):
a flow watched from slot 101 (ms), every packet's first-of-slot kept, then only the sampled
ones with interpolation."""
import numpy as np
import pytest

from telemetry.cbiq import SEQ_MODULUS, filled, slot_inputs, unwrapped

SLOTS = np.arange(101, 107)
# Table Ia, (slot, first byte's sequence number): ingress and egress, every packet
INGRESS = [(101, 1600), (101, 1700), (102, 1900), (102, 2000), (102, 2100), (103, 2200), (103, 2300),
           (105, 2400), (106, 2500), (106, 2600)]
EGRESS = [(102, 1300), (102, 1400), (103, 1600), (103, 1700), (104, 1900), (106, 2000), (106, 2100)]
# the packets the table's sampled half keeps
SAMPLED_INGRESS = {1700, 2000, 2300, 2600}
SAMPLED_EGRESS = {1300, 1700, 2100}


def first_per_slot(packets, keep=None):
    out = np.full(len(SLOTS), np.nan)
    for slot, seq in packets:
        i = slot - SLOTS[0]
        if (keep is None or seq in keep) and np.isnan(out[i]):
            out[i] = seq
    return out


def test_table_one_without_sampling():
    cbiq, thr = slot_inputs(first_per_slot(INGRESS), first_per_slot(EGRESS))
    # slots 101..105: InSeq(t+1) 1900 2200 2400 2400 2500, OutSeq(t+1) 1300 1600 1900 2000 2000
    assert cbiq.tolist() == [600, 600, 500, 400, 500]
    assert thr[0] == 300                       # the table's ingress throughput at 101
    assert thr.tolist() == [300, 300, 200, 0, 100]


def test_table_one_with_sampling_interpolates_the_empty_slots():
    inseq = first_per_slot(INGRESS, SAMPLED_INGRESS)
    outseq = first_per_slot(EGRESS, SAMPLED_EGRESS)
    assert filled(inseq, interpolate=True)[1:].tolist() == [2000, 2300, 2400, 2500, 2600]
    assert filled(outseq, interpolate=True)[1:] == pytest.approx([1300, 1700, 1833.3, 1966.7, 2100], abs=0.1)
    cbiq, _ = slot_inputs(inseq, outseq, interpolate=True)
    assert cbiq == pytest.approx([700, 600, 567, 533, 500], abs=0.5)


def test_slots_after_the_last_packet_are_not_known_and_sequence_numbers_wrap():
    cbiq, thr = slot_inputs([100, 200, np.nan], [50, np.nan, np.nan])
    assert cbiq[0] != cbiq[0] and thr.tolist()[0] == 100 and np.isnan(thr[1])   # no egress after slot 0 yet
    top = SEQ_MODULUS - 100
    assert unwrapped([top, np.nan, 50]).tolist()[2] == top + 150
    cbiq, thr = slot_inputs([top - 1000, top, 400, 1400], [top - 1000, top - 500, 0, 100])
    assert cbiq.tolist() == [500, 400, 1300] and thr.tolist() == [1000, 500, 1000]


def test_a_retransmission_reads_as_no_throughput_not_a_negative_one():
    _, thr = slot_inputs([1000, 3000, 2000, 4000], [1000, 1000, 1000, 1000])
    assert thr.tolist() == [2000, 0, 2000]


def test_ingress_and_egress_must_cover_the_same_slots():
    with pytest.raises(ValueError, match="differ in number"):
        slot_inputs([1, 2, 3], [1, 2])


def test_a_recorded_capture_gives_each_flows_series_and_random_intervals_of_it():
    from estimator.dragonfly.dataset import flow_series, frames
    # a flow sending 3 packets of 1000 bytes a slot into a port sending 2: one packet more a slot
    entry = {"flow": ["a", "b", 6, 1, 5201],
             "in": [[100 + t, 3000 * t, 1000 * t] for t in range(300)],
             "out": [[100 + t, 2000 * t, -1] for t in range(300)]}
    s = flow_series(entry)
    assert s.first_slot == 100 and s.flow[4] == 5201 and len(s.cbiq_bytes) == 299
    assert s.cbiq_bytes[:3].tolist() == [1000, 2000, 3000] and set(s.ingress_bytes) == {3000}
    assert s.exact_bytes[:3].tolist() == [1000, 2000, 3000]        # the queue's own count agrees
    x, y = frames([s, s], ["cubic", "bbr"], 100, per_flow=3)
    assert x.shape == (6, 100, 2) and y.tolist() == ["cubic"] * 3 + ["bbr"] * 3
    assert frames([s], ["cubic"], 400)[0].shape == (0, 400, 2)                 # shorter than the interval
    assert flow_series({"flow": [], "in": [[1, 1, -1]], "out": []}) is None
