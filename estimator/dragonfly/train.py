"""Training Dragonfly's CNN (cnn.py) with JAX, the paper's protocol: Adam, cross-entropy,
a StepLR schedule, batches of 32, up to 100 epochs with an early stop once the held-out
accuracy stops improving; then written as ONNX (cnn.to_onnx) for the node's collector.

Needs the ``train`` extra (``pip install -e ".[train]"``: JAX on the CPU, ~90 MB); the
product runs the ONNX file with ONNX Runtime only. Estimator API:

    clf = DragonflyTrainer(classes=("reno", "cubic", "bbr")).fit(frames, labels)
    clf.score(frames_test, labels_test); clf.save("model.onnx")
"""
from __future__ import annotations

import numpy as np

from .cnn import BN_EPS, KERNEL_SLOTS, MODULES, init_params, normalised, pool_slots, to_onnx

BN_MOMENTUM = 0.1           # PyTorch's: running = (1 - m) running + m batch


def _forward(params, x, train: bool):
    """Scores and each batch norm's batch statistics (train: normalised by the batch's own,
    as PyTorch's BatchNorm2d in training), x normalised (N, 1, T, F)."""
    import jax
    import jax.numpy as jnp
    pool = pool_slots(x.shape[2])
    stats = {}
    for m in range(MODULES):
        x = jax.lax.conv_general_dilated(x, params[f"conv{m}.w"], (1, 1),
                                         [(KERNEL_SLOTS // 2, KERNEL_SLOTS // 2), (0, 0)],
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        x = x + params[f"conv{m}.b"][None, :, None, None]
        if train:
            mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
            stats[m] = (mean, var)
        else:
            mean, var = params[f"bn{m}.mean"], params[f"bn{m}.var"]
        x = (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + BN_EPS)
        x = jnp.maximum(x * params[f"bn{m}.scale"][None, :, None, None] + params[f"bn{m}.bias"][None, :, None, None], 0)
        if x.shape[2] >= pool > 1:
            x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, pool, 1), (1, 1, pool, 1), "VALID")
    scores = jnp.einsum("nctw,kc->nk", x, params["head.w"][:, :, 0, 0]) / (x.shape[2] * x.shape[3]) \
        + params["head.b"][None, :]
    return scores, stats


def _trainable(name: str) -> bool:
    return not name.endswith((".mean", ".var"))


class DragonflyTrainer:
    def __init__(self, classes: tuple, epochs: int = 100, batch: int = 32, learning_rate: float = 1e-3,
                 step_epochs: int = 30, step_gamma: float = 0.1, patience: int = 10, val_fraction: float = 0.3,
                 seed: int = 0, inputs: tuple = ("cbiq", "ingress"), scaling: str = "max"):
        self.classes = tuple(classes)
        self.scaling = scaling              # cnn.normalised's: the paper's per-frame maximum, or packets
        self.inputs = tuple(inputs)         # the dataframes' per-slot series, in order: written into the model
        self.epochs, self.batch, self.learning_rate = epochs, batch, learning_rate
        self.step_epochs, self.step_gamma, self.patience = step_epochs, step_gamma, patience
        self.val_fraction, self.seed = val_fraction, seed
        self.params_ = None
        self.history_: list = []

    def fit(self, frames: np.ndarray, labels) -> "DragonflyTrainer":
        import jax
        import jax.numpy as jnp
        x = normalised(frames, self.scaling)[:, None, :, :]
        index = {c: i for i, c in enumerate(self.classes)}
        y = np.array([index[v] for v in labels])
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(len(y))
        n_val = int(round(self.val_fraction * len(y)))
        val, tr = order[:n_val], order[n_val:]
        params = {k: jnp.asarray(v) for k, v in init_params(x.shape[3], len(self.classes), self.seed).items()}
        trainable = [k for k in params if _trainable(k)]

        def loss(w, rest, xb, yb):
            scores, stats = _forward({**rest, **w}, xb, train=True)
            logp = jax.nn.log_softmax(scores)
            return -jnp.mean(logp[jnp.arange(yb.shape[0]), yb]), stats

        grad = jax.jit(jax.value_and_grad(loss, has_aux=True))
        predict = jax.jit(lambda p, xb: _forward(p, xb, train=False)[0])
        m = {k: jnp.zeros_like(params[k]) for k in trainable}
        v = {k: jnp.zeros_like(params[k]) for k in trainable}
        step = 0
        best, best_params, waited = -1.0, params, 0
        for epoch in range(self.epochs):
            lr = self.learning_rate * self.step_gamma ** (epoch // self.step_epochs)
            rng.shuffle(tr)
            for s in range(0, len(tr) - 1, self.batch):
                b = tr[s:s + self.batch]
                if len(b) < 2:           # a batch norm needs two to have a spread
                    continue
                w = {k: params[k] for k in trainable}
                rest = {k: params[k] for k in params if k not in w}
                (_, stats), g = grad(w, rest, jnp.asarray(x[b]), jnp.asarray(y[b]))
                step += 1
                for k in trainable:      # Adam (Kingma and Ba's defaults)
                    m[k] = 0.9 * m[k] + 0.1 * g[k]
                    v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
                    mh, vh = m[k] / (1 - 0.9 ** step), v[k] / (1 - 0.999 ** step)
                    params[k] = params[k] - lr * mh / (jnp.sqrt(vh) + 1e-8)
                for i, (mean, var) in stats.items():
                    params[f"bn{i}.mean"] = (1 - BN_MOMENTUM) * params[f"bn{i}.mean"] + BN_MOMENTUM * mean
                    params[f"bn{i}.var"] = (1 - BN_MOMENTUM) * params[f"bn{i}.var"] + BN_MOMENTUM * var
            held = val if len(val) else tr
            acc = float(np.mean(np.asarray(predict(params, jnp.asarray(x[held]))).argmax(axis=1) == y[held]))
            self.history_.append({"epoch": epoch, "held_out_accuracy": acc, "learning_rate": lr})
            if acc > best:
                best, best_params, waited = acc, dict(params), 0
            else:
                waited += 1
                if waited >= self.patience:
                    break
        self.params_ = {k: np.asarray(v, dtype=np.float32) for k, v in best_params.items()}
        self.n_slots_, self.n_features_ = x.shape[2], x.shape[3]
        return self

    def decision_function(self, frames: np.ndarray) -> np.ndarray:
        from .cnn import forward
        return forward(self.params_, frames, self.scaling)

    def predict(self, frames: np.ndarray) -> np.ndarray:
        return np.array(self.classes)[self.decision_function(frames).argmax(axis=1)]

    def score(self, frames: np.ndarray, labels) -> float:
        return float(np.mean(self.predict(frames) == np.asarray(labels)))

    def save(self, path: str, meta: dict | None = None) -> None:
        """The model as ONNX (cnn.OnnxClassifier reads it), ``meta`` in its metadata."""
        if len(self.inputs) != self.n_features_:
            raise ValueError(f"trained on {self.n_features_} features, but inputs names {len(self.inputs)}: "
                             f"{', '.join(self.inputs)}")
        to_onnx(self.params_, self.n_slots_, self.n_features_, self.classes, path,
                {**(meta or {}), "inputs": ",".join(self.inputs), "scaling": self.scaling})
