"""Dragonfly's CNN (Dragonfly, docs/references.md, Fig. 4): a dataframe of per-slot inputs
(slots x features: CBIQ and ingress bytes) in, a score per CCA out.

Five modules of a 2-D convolution (3 x 2 kernel over slots x features, 50 filters; after
the first the feature axis is 1 wide, so the later kernels are 3 x 1), batch normalisation,
ReLU and max-pooling over slots; then a 1 x 1 convolution to one channel per class,
averaged over what is left of the slots (the paper's "final convolutional layer, mean and
squeeze"). The pooling's size grows with the interval, as the paper's does: the fifth root
of the slots, so five poolings bring any interval down to a few slots. Each dataframe is
normalised by its maximum per feature (the paper's [0, 1] scaling, ``max``), or every
feature in packets on one fixed scale (``packets``: the window's size and the flow's rate
kept, which the per-frame maximum divides away).

The weights live in a plain dict of numpy arrays (``params``); ``forward`` is the reference
computation in numpy, ``to_onnx`` writes the same network as an ONNX graph (standard
operators only), and ``OnnxClassifier`` runs such a file with ONNX Runtime: the node's
collector needs neither a training framework nor this module's training code
(estimator/dragonfly/train.py, the ``train`` extra)."""
from __future__ import annotations

import math

import numpy as np

FILTERS = 50
MODULES = 5
KERNEL_SLOTS = 3
BN_EPS = 1e-5


def pool_slots(n_slots: int) -> int:
    """The max-pooling's size (and stride) over slots for an interval of ``n_slots``."""
    return max(1, int(math.floor(n_slots ** (1 / MODULES))))


SCALINGS = ("max", "packets")
#: ``packets``: bytes over this, about a full-sized packet times a window of 32
PACKETS_SCALE_BYTES = 1448.0 * 32


def normalised(frames: np.ndarray, scaling: str = "max") -> np.ndarray:
    """(N, slots, features) dataframes scaled per feature by their maximum into [0, 1]
    (``max``; a feature that is 0 throughout stays 0), or all by PACKETS_SCALE_BYTES
    (``packets``); NaN (a slot not known) read as 0."""
    x = np.nan_to_num(np.asarray(frames, dtype=np.float32), nan=0.0)
    if scaling == "packets":
        return (x / PACKETS_SCALE_BYTES).astype(np.float32)
    if scaling != "max":
        raise ValueError(f"unknown scaling {scaling!r}: one of {', '.join(SCALINGS)}")
    top = x.max(axis=1, keepdims=True)
    return np.where(top > 0, x / np.where(top > 0, top, 1), 0.0).astype(np.float32)


def init_params(n_features: int, n_classes: int, seed: int = 0) -> dict:
    """He-initialised weights, batch-norm statistics at identity."""
    rng = np.random.default_rng(seed)
    p = {}
    for m in range(MODULES):
        cin, width = (1, n_features) if m == 0 else (FILTERS, 1)
        fan_in = cin * KERNEL_SLOTS * width
        p[f"conv{m}.w"] = (rng.standard_normal((FILTERS, cin, KERNEL_SLOTS, width)) * math.sqrt(2 / fan_in)).astype(np.float32)
        p[f"conv{m}.b"] = np.zeros(FILTERS, np.float32)
        p[f"bn{m}.scale"], p[f"bn{m}.bias"] = np.ones(FILTERS, np.float32), np.zeros(FILTERS, np.float32)
        p[f"bn{m}.mean"], p[f"bn{m}.var"] = np.zeros(FILTERS, np.float32), np.ones(FILTERS, np.float32)
    p["head.w"] = (rng.standard_normal((n_classes, FILTERS, 1, 1)) * math.sqrt(1 / FILTERS)).astype(np.float32)
    p["head.b"] = np.zeros(n_classes, np.float32)
    return p


def _conv_slots(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, C, T, W) * (F, C, k, W) -> (N, F, T, 1): over slots padded by k // 2 each side,
    across the whole feature axis."""
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2), (0, 0)))
    t = x.shape[2]
    windows = np.stack([xp[:, :, i:i + t, :] for i in range(k)], axis=3)       # N, C, T, k, W
    return (np.einsum("nctkw,fckw->nft", windows, w) + b[None, :, None])[..., None]


def forward(params: dict, frames: np.ndarray, scaling: str = "max") -> np.ndarray:
    """Class scores (N, classes) of (N, slots, features) dataframes, in inference mode (the
    batch norms' running statistics). Normalises the frames itself."""
    x = normalised(frames, scaling)[:, None, :, :]         # N, 1, T, F
    pool = pool_slots(x.shape[2])
    for m in range(MODULES):
        x = _conv_slots(x, params[f"conv{m}.w"], params[f"conv{m}.b"])
        x = (x - params[f"bn{m}.mean"][None, :, None, None]) / np.sqrt(params[f"bn{m}.var"][None, :, None, None] + BN_EPS)
        x = x * params[f"bn{m}.scale"][None, :, None, None] + params[f"bn{m}.bias"][None, :, None, None]
        x = np.maximum(x, 0.0)
        t = x.shape[2] // pool * pool
        if t >= pool > 1:
            x = x[:, :, :t, :].reshape(x.shape[0], x.shape[1], t // pool, pool, 1).max(axis=3)
    scores = np.einsum("nctw,kc->nktw", x, params["head.w"][:, :, 0, 0]) + params["head.b"][None, :, None, None]
    return scores.mean(axis=(2, 3))


def to_onnx(params: dict, n_slots: int, n_features: int, classes: tuple, path: str, meta: dict | None = None) -> None:
    """Write the network for dataframes of ``n_slots`` x ``n_features`` (already normalised:
    OnnxClassifier does that) as an ONNX model, its classes in its metadata with ``meta``
    (strings: what it was trained on; ``inputs``: the per-slot series' names, in order;
    ``scaling``: how OnnxClassifier normalises the frames, ``max`` if not given)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    pool = pool_slots(n_slots)
    nodes, inits = [], [numpy_helper.from_array(v.astype(np.float32), k) for k, v in params.items()]
    x, t = "frames", n_slots
    for m in range(MODULES):
        nodes.append(helper.make_node("Conv", [x, f"conv{m}.w", f"conv{m}.b"], [f"c{m}"],
                                      kernel_shape=[KERNEL_SLOTS, n_features if m == 0 else 1],
                                      pads=[KERNEL_SLOTS // 2, 0, KERNEL_SLOTS // 2, 0]))
        nodes.append(helper.make_node("BatchNormalization", [f"c{m}", f"bn{m}.scale", f"bn{m}.bias", f"bn{m}.mean",
                                                             f"bn{m}.var"], [f"n{m}"], epsilon=BN_EPS))
        nodes.append(helper.make_node("Relu", [f"n{m}"], [f"r{m}"]))
        x = f"r{m}"
        if t >= pool > 1:
            nodes.append(helper.make_node("MaxPool", [x], [f"p{m}"], kernel_shape=[pool, 1], strides=[pool, 1]))
            x, t = f"p{m}", t // pool
    nodes.append(helper.make_node("Conv", [x, "head.w", "head.b"], ["h"], kernel_shape=[1, 1]))
    nodes.append(helper.make_node("ReduceMean", ["h", "mean_axes"], ["scores"], keepdims=0))
    inits.append(numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "mean_axes"))
    graph = helper.make_graph(nodes, "dragonfly",
                              [helper.make_tensor_value_info("frames", TensorProto.FLOAT, ["n", 1, n_slots, n_features])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", len(classes)])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="intcc")
    model.ir_version = 9             # what ONNX Runtime of the last years reads
    helper.set_model_props(model, {**{k: str(v) for k, v in (meta or {}).items()}, "classes": ",".join(classes),
                                   "slots": str(n_slots), "features": str(n_features)})
    onnx.checker.check_model(model)
    onnx.save(model, path)


class OnnxClassifier:
    """A Dragonfly model file run by ONNX Runtime, with the estimator API's predict."""

    def __init__(self, path: str):
        import onnxruntime
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1            # beside a node on a shared core: one thread
        self.session = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        meta = self.session.get_modelmeta().custom_metadata_map
        self.meta = dict(meta)                   # what `train` wrote beside the shape: its data
        self.classes_ = tuple(meta["classes"].split(","))
        self.n_slots, self.n_features = int(meta["slots"]), int(meta["features"])
        # which per-slot series, in order (models written before the choice: the paper's two)
        self.inputs = tuple(meta["inputs"].split(",")) if meta.get("inputs") else ("cbiq", "ingress")
        self.scaling = meta.get("scaling", "max")
        if self.scaling not in SCALINGS:
            raise ValueError(f"{path}: unknown scaling {self.scaling!r} in its metadata")
        if len(self.inputs) != self.n_features:
            raise ValueError(f"{path}: its metadata names {len(self.inputs)} inputs ({', '.join(self.inputs)}) "
                             f"for {self.n_features} features")

    def decision_function(self, frames: np.ndarray) -> np.ndarray:
        frames = np.asarray(frames)
        if frames.ndim != 3 or frames.shape[1:] != (self.n_slots, self.n_features):
            raise ValueError(f"this model reads dataframes of {self.n_slots} slots x {self.n_features} features, "
                             f"not {frames.shape[1:] if frames.ndim == 3 else frames.shape}")
        return self.session.run(["scores"], {"frames": normalised(frames, self.scaling)[:, None, :, :]})[0]

    def predict(self, frames: np.ndarray) -> np.ndarray:
        return np.array(self.classes_)[self.decision_function(frames).argmax(axis=1)]
