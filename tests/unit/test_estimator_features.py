"""Table I features: the vectorised code against a plain per-ACK loop."""
import numpy as np
import pytest

from estimator.features import FEATURES, SRTT_ALPHA, SenderTrace, TraceError, ewma, features, last_features


def random_trace(rng, n_acks=400, n_sends=900):
    ack_t = np.cumsum(rng.exponential(0.002, n_acks))
    send_t = np.sort(rng.uniform(0, ack_t[-1], n_sends))
    return SenderTrace(ack_t=ack_t, rtt_s=rng.uniform(0.01, 0.05, n_acks),
                       acked_bytes=rng.choice([0, 1448, 2896], n_acks).astype(float),
                       send_t=send_t, retrans=rng.random(n_sends) < 0.05)


def reference(tr: SenderTrace, k: float, alpha: float) -> np.ndarray:
    t, rtt, acked = tr.ack_t, tr.rtt_s, tr.acked_bytes
    n = len(t)
    srtt = np.empty(n)
    for i in range(n):
        srtt[i] = rtt[0] if i == 0 else SRTT_ALPHA * rtt[i] + (1 - SRTT_ALPHA) * srtt[i - 1]
    goodput = np.empty(n)
    for i in range(n):
        inside = (t > t[i] - srtt[i]) & (np.arange(n) <= i)
        inside[i] = True
        goodput[i] = acked[inside].sum() / srtt[i]
    raw = np.empty((n, 8))
    for i in range(n):
        win = (t > t[i] - k * srtt[i]) & (np.arange(n) <= i)
        win[i] = True
        sends = (tr.send_t > t[i] - k * srtt[i]) & (tr.send_t <= t[i])
        cnt = sends.sum()
        raw[i] = [srtt[win].max() / rtt[win].min(),
                  goodput[win].max() / max(goodput[win].min(), 1.0),
                  rtt[i] / srtt[i],
                  goodput[i] / max(goodput[win].mean(), 1.0),
                  cnt, (sends & tr.retrans).sum(),
                  (tr.send_t[sends].max() - tr.send_t[sends].min()) / (cnt - 1) if cnt > 1 else k * srtt[i],
                  (t[i] - t[win].min()) / (win.sum() - 1) if win.sum() > 1 else k * srtt[i]]
    out = np.empty_like(raw)
    for j in range(8):
        y = raw[0, j]
        for i in range(n):
            y = alpha * raw[i, j] + (1 - alpha) * y
            out[i, j] = y
    return out


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_features_match_the_per_ack_loop(seed):
    rng = np.random.default_rng(seed)
    tr = random_trace(rng)
    got = features(tr, k=4.0, alpha=0.1)
    want = reference(tr, 4.0, 0.1)
    assert got.shape == (len(tr.ack_t), len(FEATURES))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_ewma():
    np.testing.assert_allclose(ewma(np.array([1.0, 3.0, 3.0]), 0.5), [1.0, 2.0, 2.5])


@pytest.mark.parametrize("mutate, message", [
    (lambda tr: SenderTrace(tr.ack_t[:1], tr.rtt_s[:1], tr.acked_bytes[:1], tr.send_t, tr.retrans), "at least 2"),
    (lambda tr: SenderTrace(tr.ack_t, tr.rtt_s[:-1], tr.acked_bytes, tr.send_t, tr.retrans), "differ in length"),
    (lambda tr: SenderTrace(tr.ack_t[::-1], tr.rtt_s, tr.acked_bytes, tr.send_t, tr.retrans), "decrease"),
    (lambda tr: SenderTrace(tr.ack_t, tr.rtt_s * 0, tr.acked_bytes, tr.send_t, tr.retrans), "RTT"),
])
def test_bad_traces_are_named(mutate, message):
    tr = random_trace(np.random.default_rng(0), 50, 80)
    with pytest.raises(TraceError, match=message):
        features(mutate(tr))


@pytest.mark.parametrize("n_acks", [600, 1500, 20_000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_live_estimate_row_from_the_tail_equals_the_full_computation(seed, n_acks):
    """last_features reads only the tail the last row depends on; RTTs up to 0.5 s make
    its window reach back thousands of ACKs, sends are not one per ACK, some ACKs ack none."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1e-3 * (1 + seed), n_acks))
    rtt = 0.01 + 0.3 * rng.random() + rng.random(n_acks) * 0.1 * (1 + seed)
    m = n_acks + n_acks // 10
    send_t = np.sort(t[0] - 0.05 + rng.random(m) * (t[-1] - t[0] + 0.05))
    trace = SenderTrace(t, rtt, rng.choice([0.0, 1428.0, 2856.0], n_acks), send_t, rng.random(m) < 0.02)
    np.testing.assert_allclose(last_features(trace), features(trace)[-1:], rtol=1e-9)
