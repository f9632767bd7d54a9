"""Dragonfly's CNN: the ONNX graph ONNX Runtime runs computes what the numpy reference
does, for intervals of 0.1 s to 6 s of 1 ms slots, and its inputs are checked."""
import numpy as np
import pytest

from estimator.dragonfly.cnn import MODULES, OnnxClassifier, forward, init_params, normalised, pool_slots, to_onnx

CLASSES = ("reno", "cubic", "bbr")


def _trained_looking(params, seed=1):
    """Batch-norm statistics and biases away from identity, so the test checks them."""
    rng = np.random.default_rng(seed)
    for k, v in params.items():
        if k.endswith((".mean", ".bias", ".b")):
            params[k] = (rng.standard_normal(v.shape) * 0.1).astype(np.float32)
        elif k.endswith((".var", ".scale")):
            params[k] = rng.uniform(0.5, 1.5, v.shape).astype(np.float32)
    return params


@pytest.mark.parametrize("n_slots", [100, 1000, 6000])
def test_the_onnx_model_computes_what_the_reference_does(tmp_path, n_slots):
    params = _trained_looking(init_params(2, len(CLASSES)))
    path = str(tmp_path / "m.onnx")
    to_onnx(params, n_slots, 2, CLASSES, path)
    frames = np.random.default_rng(2).gamma(2.0, 1000.0, (5, n_slots, 2))
    model = OnnxClassifier(path)
    scores = model.decision_function(frames)
    assert scores.shape == (5, 3)
    assert np.allclose(scores, forward(params, frames), atol=1e-4), np.abs(scores - forward(params, frames)).max()
    assert set(model.predict(frames)) <= set(CLASSES) and model.classes_ == CLASSES


def test_pooling_grows_with_the_interval_and_frames_are_scaled_per_feature():
    assert [pool_slots(n) for n in (100, 1000, 60_000)] == [2, 3, 9]
    assert 100_000 // 9 ** MODULES >= 1
    x = normalised(np.array([[[2.0, 0.0], [4.0, 0.0], [np.nan, 0.0]]]))
    assert x.tolist() == [[[0.5, 0.0], [1.0, 0.0], [0.0, 0.0]]]


def test_a_dataframe_of_the_wrong_shape_is_refused_by_name(tmp_path):
    path = str(tmp_path / "m.onnx")
    to_onnx(init_params(2, 3), 100, 2, CLASSES, path)
    with pytest.raises(ValueError, match="100 slots x 2 features, not \\(50, 2\\)"):
        OnnxClassifier(path).predict(np.zeros((1, 50, 2)))


def test_a_model_names_its_inputs_and_older_models_read_the_papers_two(tmp_path):
    old = str(tmp_path / "old.onnx")
    to_onnx(init_params(2, 3), 100, 2, CLASSES, old)
    assert OnnxClassifier(old).inputs == ("cbiq", "ingress")
    new = str(tmp_path / "new.onnx")
    to_onnx(init_params(3, 3), 100, 3, CLASSES, new, {"inputs": "cbiq,ingress,flight"})
    assert OnnxClassifier(new).inputs == ("cbiq", "ingress", "flight")
    wrong = str(tmp_path / "wrong.onnx")
    to_onnx(init_params(3, 3), 100, 3, CLASSES, wrong, {"inputs": "cbiq,ingress"})
    with pytest.raises(ValueError, match="names 2 inputs"):
        OnnxClassifier(wrong)


def test_a_model_scaled_in_packets_is_run_so_and_keeps_the_frames_size(tmp_path):
    params = _trained_looking(init_params(3, len(CLASSES)))
    path = str(tmp_path / "p.onnx")
    to_onnx(params, 100, 3, CLASSES, path, {"inputs": "cbiq,ingress,flight", "scaling": "packets"})
    model = OnnxClassifier(path)
    small = np.random.default_rng(3).gamma(2.0, 1000.0, (4, 100, 3))
    assert model.scaling == "packets"
    assert np.allclose(model.decision_function(small), forward(params, small, "packets"), atol=1e-4)
    # by the frame's maximum, a window twice the size is the same frame; in packets it is not
    assert np.allclose(normalised(2 * small), normalised(small))
    assert np.allclose(normalised(2 * small, "packets"), 2 * normalised(small, "packets"))
    with pytest.raises(ValueError, match="unknown scaling"):
        normalised(small, "bits")
