"""Dragonfly's per-slot inputs of a flow at a queue: CBIQ (the flow's bytes in the queue at
a slot's end) and its ingress bytes per slot, from the sequence number of the first packet
of each slot at the queue's ingress and at its egress (Dragonfly, docs/references.md,
section III-D).

A node keeps one packet per flow and slot on each side (int_node's FlowSlots): O(1) work
per slot whatever the flow's rate, and no start-up value needed, so a flow can be watched
from any moment. The last byte in by the end of slot t is InSeq(t+1) - 1, the last out
OutSeq(t+1) - 1, hence

    CBIQ(t)  = max(InSeq(t+1) - OutSeq(t+1), 0)
    InThr(t) = max(InSeq(t+1) - InSeq(t), 0)

Losses and retransmissions are neglected (in-order delivery assumed), as in the paper. A
slot without a packet takes the next non-empty slot's value (every packet seen: the first
of the next slot is where this one ended); under random sampling, a value interpolated
linearly between the non-empty slots around it (the paper's interpolation). Both O(1) per
slot: the next and the previous non-empty slot found by running minima and maxima.

Sequence numbers are TCP's, 32 bits: unwrapped against the first one seen."""
from __future__ import annotations

import numpy as np

SEQ_MODULUS = 1 << 32


def unwrapped(seq: np.ndarray) -> np.ndarray:
    """32-bit sequence numbers (NaN: an empty slot) as a monotone byte count: each step
    taken modulo 2^32 as a signed difference (a retransmission steps back)."""
    out = np.array(seq, dtype=float)
    ok = np.flatnonzero(~np.isnan(out))
    if ok.size:
        v = out[ok]
        step = (np.diff(v) + SEQ_MODULUS / 2) % SEQ_MODULUS - SEQ_MODULUS / 2
        out[ok] = v[0] + np.concatenate(([0.0], np.cumsum(step)))
    return out


def filled(first_seq: np.ndarray, interpolate: bool = False) -> np.ndarray:
    """Each empty slot (NaN) given the next non-empty slot's value, or with ``interpolate``
    the value on the line between the non-empty slots before and after it (an empty slot
    before the first non-empty one takes the next value). Slots after the last non-empty
    one stay NaN: where the flow went next is not known yet. (Vectorised: the index of the
    next and of the previous non-empty slot by a running minimum and maximum.)"""
    out = np.array(first_seq, dtype=float)
    n = len(out)
    valid = ~np.isnan(out)
    if n == 0 or valid.all() or not valid.any():
        return out
    idx = np.arange(n)
    nxt = np.minimum.accumulate(np.where(valid, idx, n)[::-1])[::-1]
    known_next = nxt < n
    nxt_c = np.minimum(nxt, n - 1)
    filled_next = np.where(known_next, out[nxt_c], np.nan)
    if not interpolate:
        return np.where(valid, out, filled_next)
    prv = np.maximum.accumulate(np.where(valid, idx, -1))
    between = ~valid & known_next & (prv >= 0)
    p = np.maximum(prv, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        line = out[p] + (out[nxt_c] - out[p]) * (idx - p) / (nxt_c - p)
    return np.where(valid, out, np.where(between, line, filled_next))


def slot_inputs(in_first_seq, out_first_seq, interpolate: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(CBIQ, InThr) in bytes for slots 0..N-2 of a flow, from the first packet's sequence
    number per slot at ingress and at egress (arrays of N slots, NaN: none seen). NaN
    where a value is not known yet (no later packet on that side)."""
    inseq, outseq = _beside_ingress(in_first_seq, out_first_seq, interpolate, "egress")
    cbiq = np.maximum(inseq[1:] - outseq[1:], 0.0)
    thr = np.maximum(inseq[1:] - inseq[:-1], 0.0)
    cbiq[np.isnan(inseq[1:]) | np.isnan(outseq[1:])] = np.nan
    thr[np.isnan(inseq[1:]) | np.isnan(inseq[:-1])] = np.nan
    return cbiq, thr


def flight_bytes(in_first_seq, ack_first_ack, interpolate: bool = False) -> np.ndarray:
    """The flow's bytes in flight beyond the node at each slot's end, for slots 0..N-2 as
    slot_inputs: InSeq(t+1) - Ack(t+1), from the first packet's sequence number per slot at
    the queue's ingress and the first acknowledgement number per slot of the other
    direction as it reaches the node (arrays of N slots, NaN: none seen). The sender's
    window as the network sees it: the queue, the path on to the receiver and back, less what
    the next slot's first ACK covers (taken as acknowledged by the slot's end). During
    a loss recovery the cumulative ACK stands still, so it counts what SACK already
    covered too, until the recovery ends. NaN where not known yet."""
    inseq, ack = _beside_ingress(in_first_seq, ack_first_ack, interpolate, "ACK")
    flight = np.maximum(inseq[1:] - ack[1:], 0.0)
    flight[np.isnan(inseq[1:]) | np.isnan(ack[1:])] = np.nan
    return flight


def _beside_ingress(in_first_seq, other_first, interpolate: bool, side: str) -> tuple[np.ndarray, np.ndarray]:
    """The ingress numbers and another side's (egress sequence or ACK numbers), each unwrapped
    and filled, the other's onto the ingress's count."""
    inseq = filled(unwrapped(np.asarray(in_first_seq, dtype=float)), interpolate)
    other = np.asarray(other_first, dtype=float)
    if other.shape != inseq.shape:
        raise ValueError(f"ingress and {side} slots differ in number: {inseq.shape} and {other.shape}")
    return inseq, filled(_aligned(unwrapped(other), inseq), interpolate)


def _aligned(out_seq: np.ndarray, in_seq: np.ndarray) -> np.ndarray:
    """Egress numbers unwrapped onto the ingress's count: each side was unwrapped from its
    own first value, which may lie on either side of a wrap."""
    a, b = out_seq[~np.isnan(out_seq)], in_seq[~np.isnan(in_seq)]
    if not a.size or not b.size:
        return out_seq
    shift = round((b[0] - a[0]) / SEQ_MODULUS) * SEQ_MODULUS
    return out_seq + shift


def per_slot(entries, first_slot: int, n_slots: int) -> tuple[np.ndarray, np.ndarray]:
    """A node's entries for one side of a flow ([[slot, sequence number, exact bytes queued
    or -1], ...]: int_node FlowSlots' ``slots`` handler) as arrays over ``n_slots`` slots
    from ``first_slot``: the first packet's sequence number and the exact bytes the queue
    held of the flow as it passed (NaN: no entry, or no exact count kept)."""
    seq, exact = np.full(n_slots, np.nan), np.full(n_slots, np.nan)
    e = np.asarray(entries, dtype=float).reshape(-1, 3)
    i = e[:, 0].astype(np.int64) - first_slot
    inside = (i >= 0) & (i < n_slots)
    seq[i[inside]] = e[inside, 1]
    has_exact = inside & (e[:, 2] >= 0)
    exact[i[has_exact]] = e[has_exact, 2]
    return seq, exact
