"""Training Dragonfly's CNN (the ``train`` extra: skipped where JAX is not installed) on
synthetic queue shapes with known classes: learnt from the shapes, not from chance (the
same frames with shuffled labels stay near chance), and the ONNX file it writes agrees."""
import numpy as np
import pytest

pytest.importorskip("jax")

from estimator.dragonfly.cnn import OnnxClassifier  # noqa: E402
from estimator.dragonfly.train import DragonflyTrainer  # noqa: E402

CLASSES = ("linear", "cubic", "dips")
SLOTS = 100


def frames(n, seed):
    """A flow's bytes in the queue over 100 slots, from a random phase: a sawtooth of
    linear ramps (Reno-like), of cubic-shaped ramps (CUBIC-like), or flat with short dips
    (a paced flow's probing); its ingress bytes noisy around a level."""
    rng = np.random.default_rng(seed)
    out, labels = np.zeros((n, SLOTS, 2)), []
    t = np.arange(SLOTS)
    for i in range(n):
        c = CLASSES[i % 3]
        period = rng.integers(30, 60)
        phase = ((t + rng.integers(0, period)) % period) / period
        if c == "linear":
            q = 0.5 + 0.5 * phase
        elif c == "cubic":
            q = 0.5 + 0.5 * (1 + (phase - 0.6) ** 3 / 0.216) / 2
        else:
            q = np.where(phase < 0.15, 0.3, 1.0)
        out[i, :, 0] = q * rng.uniform(5e3, 5e4) * (1 + 0.05 * rng.standard_normal(SLOTS))
        out[i, :, 1] = rng.poisson(3, SLOTS) * 1448
        labels.append(c)
    return out, np.array(labels)


@pytest.mark.slow
def test_the_cnn_learns_queue_shapes_and_not_shuffled_labels(tmp_path):
    x, y = frames(180, 0)
    x_test, y_test = frames(90, 1)
    clf = DragonflyTrainer(CLASSES, epochs=12, patience=12, seed=0).fit(x, y)
    assert clf.score(x_test, y_test) >= 0.9, clf.history_
    shuffled = DragonflyTrainer(CLASSES, epochs=12, patience=12, seed=0).fit(x, np.random.default_rng(3).permutation(y))
    assert shuffled.score(x_test, y_test) <= 0.6
    clf.save(str(tmp_path / "m.onnx"))
    onnx_model = OnnxClassifier(str(tmp_path / "m.onnx"))
    assert (onnx_model.predict(x_test) == clf.predict(x_test)).mean() >= 0.99
