"""Converters for configuration values with units (Click-style: ``10Mbps``, ``5ms``)."""
from __future__ import annotations

import ipaddress
import re

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "": 1, "bps": 1, "bit": 1, "kbps": 1e3, "kbit": 1e3, "mbps": 1e6, "mbit": 1e6,
    "gbps": 1e9, "gbit": 1e9, "kb": 8e3, "mb": 8e6, "gb": 8e9,  # Kb/MB: bytes per second
}
_TIME_UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "": 1e9}


def _split(text: str, what: str):
    m = re.fullmatch(_NUM + r"\s*([a-zA-Z/]*)", text.strip())
    if not m:
        raise ValueError(f"expected a {what} like 10Mbps/5ms, got {text!r}")
    return float(m.group(1)), m.group(2)


def parse_rate_bps(text: str) -> float:
    """'10Mbps', '10mbit', '1.5Gbps', '80000' (bit/s); 'MB' is megabytes per second."""
    value, unit = _split(text, "rate")
    key = unit.replace("/s", "ps") if unit.endswith("/s") else unit
    if unit in ("MB", "KB", "GB", "MBps", "KBps", "GBps"):
        key = unit[0].lower() + "b"
    key = key.lower() if key not in ("kb", "mb", "gb") else key
    if key not in _RATE_UNITS:
        raise ValueError(f"unknown rate unit {unit!r} (use bps, kbps, Mbps, Gbps)")
    return value * _RATE_UNITS[key]


def parse_time_ns(text: str) -> int:
    """'10ms', '250us', '1.5s', '0' -> nanoseconds. A bare number is seconds."""
    value, unit = _split(text, "time")
    if unit.lower() not in _TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r} (use ns, us, ms, s)")
    return int(round(value * _TIME_UNITS[unit.lower()]))


def parse_fraction(text: str) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05; must lie in [0, 1]."""
    t = text.strip()
    value = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1 (or 0% and 100%)")
    return value


def parse_nonneg_int(text: str) -> int:
    value = int(text.strip(), 0)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def parse_pos_int(text: str) -> int:
    value = int(text.strip(), 0)
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def parse_mac(text: str) -> bytes:
    parts = text.strip().split(":")
    if len(parts) != 6:
        raise ValueError("expected a MAC address like 02:00:00:00:00:01")
    return bytes(int(p, 16) for p in parts)


def parse_prefix(text: str) -> ipaddress.IPv6Network:
    net = ipaddress.ip_network(text.strip(), strict=False)
    if net.version != 6:
        raise ValueError("expected an IPv6 prefix")
    return net


def format_mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)
