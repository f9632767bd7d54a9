"""Click-style modular software router that stamps IOAM telemetry into IPv6 headers."""
