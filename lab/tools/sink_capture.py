"""Record a short raw capture of the dumbbell's sink: two TCP flows (s1 -> r1 and
s2 -> r2, each with its CCA) through the INT testbed, every packet the sink strips written
undecoded by its ``capture`` exporter, then gzipped. The feature-equality test
(tests/unit/test_sink_replay.py) replays the shipped one; this is how it was made:

    python -m lab.tools.sink_capture --out tests/data/sink-capture-dumbbell.jsonl.gz
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import threading

from experiments.testbed.bed import Testbed, teardown
from experiments.testbed.topo import load_topo
from experiments.testbed.traffic import BackgroundFlow

TOPOLOGY = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "testbed", "topologies", "dumbbell.toml")
TESTBED = "capt"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the gzipped capture to write")
    ap.add_argument("--seconds", type=float, default=5.0, help="how long the flows run (default 5)")
    ap.add_argument("--cca1", default="cubic", help="s1's CCA (default cubic)")
    ap.add_argument("--cca2", default="bbr", help="s2's CCA, the competitor (default bbr)")
    ap.add_argument("--bottleneck-mbps", type=float, default=6.0, help="bottleneck rate (default 6)")
    args = ap.parse_args(argv)
    teardown(TESTBED)
    tb = Testbed(load_topo(TOPOLOGY, {"bottleneck_mbps": args.bottleneck_mbps}), TESTBED).up(exporter="capture")
    try:
        together = threading.Barrier(2)
        flows = [BackgroundFlow(tb, "s1", "r1", args.cca1, args.seconds, args.seconds, 5201, start_together=together),
                 BackgroundFlow(tb, "s2", "r2", args.cca2, args.seconds, args.seconds, 5202, start_together=together)]
        for f in flows:
            f.join()
        # the exporter flushes every 200 ms: the capture is the whole lines written by now
        with open(os.path.join(tb.dir, "sw2.int.capture"), "rb") as f:
            data = f.read()
        with gzip.open(args.out, "wb") as g:
            g.write(data[:data.rfind(b"\n") + 1])        # whole lines: the node still writes
    finally:
        tb.down()
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
