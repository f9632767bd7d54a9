"""Benchmarks: scripts that print figures (make bench), never timing asserts."""
import statistics
import sys


def answer_help(doc: str) -> None:
    """For a benchmark run as a script: ``--help`` prints what it measures (its module
    docstring) instead of starting a run of minutes; any other argument is refused."""
    args = sys.argv[1:]
    if args in (["-h"], ["--help"]):
        print(doc.strip())
        raise SystemExit(0)
    if args:
        raise SystemExit(f"{sys.argv[0]}: takes no arguments (got {' '.join(args)}); --help says what it measures")


def rate_round_medians(rounds: list, names: tuple) -> dict:
    """Interleaved rate rounds of two variants (each round {name: measure_rate's result, ...,
    "pps_ratio", "tcp_ratio"}): the medians of the ratios and of each variant's UDP pps and
    TCP Mbit/s, under ``<name>_udp_pps_median`` and ``<name>_tcp_mbps_median``."""
    out = {"pps_ratio_median": statistics.median(x["pps_ratio"] for x in rounds),
           "pps_ratio_min": min(x["pps_ratio"] for x in rounds),
           "tcp_ratio_median": statistics.median(x["tcp_ratio"] for x in rounds)}
    for name in names:
        out[f"{name}_udp_pps_median"] = statistics.median(x[name]["udp_rx_pps"] for x in rounds)
        out[f"{name}_tcp_mbps_median"] = statistics.median(x[name]["tcp_mbps"] for x in rounds)
    return out
