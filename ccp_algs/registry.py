"""Algorithm name -> class. `intcc alg run NAME` and experiments look them up here."""
from __future__ import annotations

import importlib

ALGORITHMS = {
    "const": "ccp_algs.const:Const",
    "reno": "ccp_algs.reno:Reno",
}


def algorithm_class(name: str):
    try:
        module, cls = ALGORITHMS[name].split(":")
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(sorted(ALGORITHMS))}") from None
    return getattr(importlib.import_module(module), cls)
