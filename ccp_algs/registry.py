"""The algorithms an agent can run, and how each is configured.

A new algorithm is one file in ccp_algs/ (an ``Algorithm`` subclass whose ``params``
name its options) and one line in ``ALGORITHMS``: the agent's command line
(``intcc alg run NAME``) and the adaptive agent find it here. One outside the package
is named in the environment: ``INTCC_ALGORITHMS="aimd=tests.examples.aimd:Aimd"``
(several separated by commas). docs/algorithms.md walks through adding one."""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

#: name -> "module:Class"
ALGORITHMS = {
    "bbr": "ccp_algs.bbr:Bbr",
    "const": "ccp_algs.const:Const",
    "probe": "ccp_algs.probe:Probe",
    "cubic": "ccp_algs.cubic:Cubic",
    "cubic-int": "ccp_algs.cubic_int:CubicInt",
    "reno": "ccp_algs.reno:Reno",
    "vegas": "ccp_algs.vegas:Vegas",
}
ENV_ALGORITHMS = "INTCC_ALGORITHMS"


class AlgorithmSpecError(ValueError):
    pass


def parse_algorithm_specs(text: str) -> dict[str, str]:
    """``name=module:Class[,name=module:Class...]`` -> {name: "module:Class"}."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, target = item.partition("=")
        module, _, cls = target.partition(":")
        if not name or not module or not cls:
            raise AlgorithmSpecError(f"{ENV_ALGORITHMS}: {item!r} is not name=module:Class")
        out[name.strip()] = f"{module.strip()}:{cls.strip()}"
    return out


ALGORITHMS.update(parse_algorithm_specs(os.environ.get(ENV_ALGORITHMS, "")))


@dataclass(frozen=True)
class Param:
    """One constructor argument of an algorithm, as a command-line option
    (``--name-with-dashes``; a bool is a ``--name/--no-name`` pair)."""
    name: str
    kind: type                      # int, float, bool or str
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    min_open: bool = False          # the minimum itself is not allowed
    choices: tuple[str, ...] = ()

    def check(self, value):
        """The value, or ValueError naming the parameter (for callers other than the CLI)."""
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}, not {value!r}")
        if self.min is not None and (value < self.min or (self.min_open and value == self.min)):
            raise ValueError(f"{self.name} must be {'>' if self.min_open else '>='} {self.min}, not {value}")
        if self.max is not None and value > self.max:
            raise ValueError(f"{self.name} must be <= {self.max}, not {value}")
        return value


INIT_CWND = Param("init_cwnd_pkts", int, 10, "the initial window, in MSS-sized packets", min=1)


class UnknownAlgorithm(KeyError):
    def __str__(self):
        return f"unknown algorithm {self.args[0]!r}: one of {', '.join(sorted(ALGORITHMS))}"


def algorithm_class(name: str):
    """The Algorithm subclass registered as ``name``."""
    try:
        module, cls = ALGORITHMS[name].split(":")
    except KeyError:
        raise UnknownAlgorithm(name) from None
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as e:
        raise AlgorithmSpecError(f"algorithm {name!r} is {module}:{cls}, which cannot be loaded: {e}") from None
