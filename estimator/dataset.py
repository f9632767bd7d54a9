"""The dataset format: collected runs on disk, one ``.npz`` per run.

``DIR/runs/<run>.npz`` holds ``X`` (Table I [+ INT] features of flow 1 at evenly
spaced ACKs, float32), ``t`` (their times), ``meta`` (JSON: the run's parameters,
its CCA pair, the feature names and ``format``) and optionally the raw sender trace
and INT series (``raw_*``) so features can be recomputed without re-running.
Written by the collection (experiments/runs/dataset_run.py, a scenario of the runner),
read by the models: the ML core imports this, never the harness.
"""
from __future__ import annotations

import glob
import json
import os
import zipfile
from typing import NamedTuple

import numpy as np

from .features import FEATURES, TraceError
from .model import CCAS
from .int_series import INT_SERIES_COLUMNS

DATA_FORMAT = 2


def save_run(path: str, plan: dict, X: np.ndarray, t: np.ndarray, extra: dict, raw: dict | None = None):
    """``raw``: the SenderTrace arrays (ack_t, rtt_s, acked_bytes, send_t, retrans), ``sample_idx`` (the ACKs X was taken
    at) and ``int_series`` (INT_SERIES_COLUMNS), all optional."""
    meta = {**plan, **extra, "features": list(FEATURES), "format": DATA_FORMAT,
            "int_series_columns": list(INT_SERIES_COLUMNS)}
    tmp = path + ".part"      # not *.npz: a run cut short is never read as a run
    with open(tmp, "wb") as f:
        np.savez_compressed(f, X=X.astype(np.float32), t=t, meta=json.dumps(meta),
                            **{f"raw_{k}": v for k, v in (raw or {}).items()})
    os.replace(tmp, path)


def compact_raw(raw: dict) -> dict:
    """What a run needs for its features to be recomputed as a live sender would compute
    them, small enough to ship: the times and base RTTs of the sampled ACKs,
    flow 1's INT as the sink's record stream, its competitors (from the sink's hop records,
    and per 10 ms from its log). The sender trace stays out (Table I rows are kept as computed)."""
    from .int_series import record_stream
    idx = raw["sample_idx"]
    out = {"sample_t": raw["ack_t"][idx],
           "sample_base_rtt_s": np.minimum.accumulate(raw["rtt_s"].astype(float))[idx].astype(np.float32)}
    # the sink's records replayed (collections from 2026-12-02 on), else the stream cut from
    # the bottleneck's per-packet series on the hop's clock (record_stream)
    rec = raw.get("int_record_series")
    if rec is None and "int_series" in raw:
        rec = record_stream(raw["int_series"])
    if rec is not None:
        out["int_record_t"] = rec[:, 0]                        # float64: window edges at ms resolution
        out["int_records"] = rec[:, 1:]      # float64: the drop counter is a wrapping u32
    for name in ("comp_packets_10ms", "comp_lost_10ms", "comp_t_end", "comp_span_s", "comp_packets", "comp_lost"):
        if name in raw:
            out[name] = raw[name]
    return out


def pack_dataset(src_dir: str, out_dir: str) -> int:
    """Every run of ``src_dir`` in compact form (compact_raw) into ``out_dir``; the
    collection record comes along. Returns the runs written."""
    import shutil
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    for name in ("collection.json",):
        if os.path.exists(os.path.join(src_dir, name)):
            shutil.copy(os.path.join(src_dir, name), os.path.join(out_dir, name))
    n = 0
    for path in run_paths(src_dir):
        X, t, meta = load_run(path)
        raw = load_raw(path)
        if meta.get("compact"):
            small = raw
        elif "sample_idx" in raw and "ack_t" in raw:
            small = compact_raw(raw)
        else:
            raise TraceError(f"{path}: no raw sender trace to pack")
        save_run(os.path.join(out_dir, "runs", os.path.basename(path)), {**meta, "compact": True}, X, t,
                 {}, small)
        n += 1
    return n


def run_paths(data_dir: str) -> list[str]:
    """The collected runs of a dataset, in run order (not the partial files of runs
    being written, nor older collections' ``*.tmp.npz`` leftovers)."""
    return sorted(p for p in glob.glob(os.path.join(data_dir, "runs", "*.npz")) if not p.endswith(".tmp.npz"))


def _why_unreadable(exc: Exception) -> str:
    """What is wrong with a file that is not a run, in intcc's words (numpy's
    advice to load pickles is not advice for a data file)."""
    text = str(exc)
    if isinstance(exc, ValueError) and ("pickle" in text or "Object arrays" in text):
        return "it holds Python objects (pickled data), which intcc never writes; refused"
    if isinstance(exc, KeyError):
        return f"it lacks the array {text}"
    if isinstance(exc, json.JSONDecodeError):
        return "its 'meta' is not JSON"
    if isinstance(exc, (zipfile.BadZipFile, EOFError)):
        return "a damaged .npz archive"
    return f"{type(exc).__name__}: {text[:120]}"


def _check_is_npz(path: str) -> None:
    """np.load reads any file that is neither zip nor .npy as a pickle: look first."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    if magic != b"PK\x03\x04":
        raise TraceError(f"{path}: not a collected run (it is not an .npz archive)")


def load_raw(path: str) -> dict:
    """The raw arrays of a collected run (keys without the ``raw_`` prefix); {} if none."""
    _check_is_npz(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k[4:]: z[k] for k in z.files if k.startswith("raw_")}
    except Exception as e:
        raise TraceError(f"{path}: not a collected run ({_why_unreadable(e)})") from None


COMPETITOR_SETTLE_S = 1.0


def tcp_competitors(raw: dict, meta: dict) -> tuple:
    """A run's competitors' packets and losses per 10 ms (``comp_packets_10ms``,
    ``comp_lost_10ms`` or None), the TCP flows only: the UDP cross traffic of a run that had
    some (``udp_mbps``) is the last row, its port the highest, and has no CCA to estimate. A
    live sender leaves it out too (the sink's top_flows name each flow's protocol)."""
    packets, lost = raw["comp_packets_10ms"], raw.get("comp_lost_10ms")
    if meta.get("udp_mbps", 0) > 0 and np.ndim(packets) == 2 and len(packets) > 1:
        packets = packets[:-1]
        lost = None if lost is None or np.ndim(lost) != 2 else lost[:-1]
    return packets, lost


class Run(NamedTuple):
    """One collected run: features ``X`` (a row per sampled ACK), their times ``t``, and
    ``meta`` (parameters, CCA pair, feature names, format). Unpacks as (X, t, meta)."""
    X: np.ndarray
    t: np.ndarray
    meta: dict

    @property
    def local_cca(self) -> str:
        """Flow 1's CCA: the sender's own (cca1)."""
        return self.meta["cca1"]

    @property
    def competitor_cca(self) -> str:
        """Flow 2's CCA: the label to estimate (cca2)."""
        return self.meta["cca2"]

    @property
    def pair(self) -> tuple:
        return self.local_cca, self.competitor_cca

    @property
    def index(self) -> int:
        return int(self.meta["index"])

    @property
    def key(self) -> list:
        """The run's identity across datasets: [collection seed, run index]."""
        return [int(self.meta.get("seed", 0)), self.index]

    def with_features(self, X: np.ndarray) -> "Run":
        return Run(X, self.t, self.meta)

    def with_competitor_present(self, settle_s: float = COMPETITOR_SETTLE_S) -> "Run":
        """Only the rows taken once the competitor had been sending for ``settle_s``: before
        it starts (hard distribution: 0-10 s after flow 1) a row carries its label but
        nothing of it, and neither training nor scoring should count it."""
        if "comp_start_s" not in self.meta:       # the paper distribution: both start together
            return self
        keep = self.t >= float(self.meta["comp_start_s"]) + settle_s
        return Run(self.X[keep], self.t[keep], self.meta)


def load_run(path: str) -> Run:
    _check_is_npz(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            X, t = z["X"], z["t"]
    except Exception as e:
        raise TraceError(f"{path}: not a collected run ({_why_unreadable(e)})") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{path}: not a collected run (its 'meta' is not a JSON object)")
    if meta.get("format") != DATA_FORMAT or meta.get("features") != list(FEATURES):
        raise TraceError(f"{path}: data format {meta.get('format')} / features differ from this intcc's")
    for key in ("cca1", "cca2"):
        if meta.get(key) not in CCAS:
            raise TraceError(f"{path}: unknown CCA label {meta.get(key)!r} (known: {', '.join(CCAS)})")
    return Run(X, t, meta)
