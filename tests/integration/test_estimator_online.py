"""Online estimation on a live dumbbell run: capture at s1 while flow 1 (cubic)
competes with flow 2 (bbr), estimates every 0.5 s with the shipped models (Table I,
and Table I + INT fed by the sink's telemetry over MQTT), and verdicts published
over MQTT and read back by a TelemetryView."""
import collections
import os
import subprocess
import time

import pytest

from broker.launch import BrokerProcess
from experiments.runs.services import free_port
from telemetry.schema import FlowRecord, HopRecord
from broker.subscriber import TelemetryView
from estimator.capture import Capture, PcapTail
from estimator.model import CCAEstimator
from estimator.online import OnlineEstimator, Publisher, first_stable_correct_s
from tests.integration.tbutil import start_testbed

MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "estimator", "models", "archive", "cca_rf.joblib")
INT_MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "estimator", "models", "archive", "cca_rf_int.joblib")
CREDS = "/run/intcc/test-broker/credentials.json"


def test_live_flow_gets_published_verdicts(tmp_path):
    for m in (MODEL, INT_MODEL):
        if not os.path.exists(m):
            pytest.fail(f"the shipped model {m} is missing")
    est = OnlineEstimator(CCAEstimator.load(MODEL), "cubic", window=10)
    est_int = OnlineEstimator(CCAEstimator.load(INT_MODEL), "cubic", window=10)
    assert est_int.uses_int and not est.uses_int
    with BrokerProcess("mosquitto", port=free_port(), credentials_file=CREDS) as b, \
            TelemetryView(b.url) as view:
        # flow and hop records (the INT model estimates only with a competitor on the path),
        # handed to the estimator on this thread, as the CLI and the agent's child do
        records: collections.deque = collections.deque()
        view.on_record(lambda rec, topic: records.append(rec) if isinstance(rec, (FlowRecord, HopRecord)) else None)
        tb = start_testbed("dumbbell", "iteo", exporter=f"{b.url}?credentials={CREDS}",
                           bottleneck_mbps=5.0, bottleneck_delay_ms=20.0, buffer_bdp=4.0)
        pub = Publisher(f"{b.url}?credentials={CREDS}")
        try:
            pcap = str(tmp_path / "s1.pcap")
            srv = [tb.popen(h, ["iperf3", "-s", "-1", "-p", str(p)], stdout=subprocess.DEVNULL)
                   for h, p in (("r1", 5201), ("r2", 5202))]
            for h, p in (("r1", 5201), ("r2", 5202)):
                tb.wait_listening(h, p)
            with Capture(tb.ns("s1"), "intcc-sw1", pcap):
                cli = [tb.popen(c, ["iperf3", "-6", "-c", tb.addr(s), "-p", str(p), "-t", "20", "-C", cca],
                                stdout=subprocess.DEVNULL)
                       for c, s, p, cca in (("s1", "r1", 5201, "cubic"), ("s2", "r2", 5202, "bbr"))]
                tail, tail_int, steps, steps_int = PcapTail(pcap), PcapTail(pcap), [], []
                t_end = time.monotonic() + 19
                while time.monotonic() < t_end:
                    time.sleep(0.5)
                    est.feed_pcap(tail)
                    est_int.feed_pcap(tail_int)
                    while records:
                        est_int.add_record(records.popleft())
                    step = est.step()
                    if step is not None:
                        steps.append(step)
                        pub.publish(est.record(step))
                    step = est_int.step()
                    if step is not None:
                        steps_int.append(step)
                for p in cli + srv:
                    p.wait(30)
            assert len(steps) >= 25, len(steps)              # one estimate per 0.5 s once ACKs flow
            fid = steps[-1].flow_id
            deadline = time.monotonic() + 5                  # the last verdict's way through the broker
            while (got := view.estimate(fid)) is None or got.record.estimates < est.estimates:
                assert time.monotonic() < deadline, "the published verdicts did not arrive"
                time.sleep(0.02)
            assert got is not None and got.record.local_cca == "cubic" and got.record.window == 10
            assert sum(got.record.votes.values()) == 10
            # the INT model estimates once the sink's records of flow 1 arrive, and the
            # competitor's packets in the hop records
            assert est_int.telemetry.records >= 100, est_int.telemetry.records
            assert est_int.competitor_age_s() is not None
            assert len(steps_int) >= 20, len(steps_int)
            for name, st in (("table1", steps), ("table1+int", steps_int)):
                stable = first_stable_correct_s(st, "bbr")
                print(f"\n{name} verdicts: {[s.verdict.estimate for s in st]}\nfirst stable correct verdict at "
                      f"{stable if stable is None else round(stable, 1)} s")
        finally:
            pub.close()
            tb.down()
