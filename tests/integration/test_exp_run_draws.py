"""A scenario's drawn flow settings run as drawn (root): two competitors of the swept CCA,
arriving later, and UDP cross traffic beside them, on a real dumbbell."""
import json
import subprocess
import sys

SCENARIO = '''
name = "drawn_flows"
topology = "dumbbell"
seconds = 8
interval_s = 1.0
[params]
buffer_bdp = 2.0
[draw]
bottleneck_mbps = { uniform = [4, 6] }
competitors = { integer = [2, 2] }
competitor_delay_s = { uniform = [1, 2] }
udp_cross_share = { uniform = [0.2, 0.2] }
[sweep]
competitor = ["cubic"]
[flows]
main = ["s1", "r1"]
competitor = ["s2", "r2"]
[[algorithms]]
label = "oracle"
same_as_competitor = true
'''


def test_drawn_competitors_their_delay_and_udp_cross_traffic_run_as_drawn(tmp_path):
    path = tmp_path / "drawn.toml"
    path.write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "intcc", "exp", "run", str(path), "--seed", "3", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rec, = json.load(open(out / "summary.json"))["records"]
    p = rec["params"]
    assert p["competitors"] == 2 and 1 <= p["competitor_delay_s"] <= 2 and 4 <= p["bottleneck_mbps"] <= 6
    assert rec["competitors"] == 2 and len(rec["competitors_goodput_mbps"]) == 2
    assert all(g > 0.1 for g in rec["competitors_goodput_mbps"]), rec["competitors_goodput_mbps"]
    assert rec["competitor_delay_s"] == p["competitor_delay_s"]
    assert rec["udp_cross_mbps"] == round(0.2 * p["bottleneck_mbps"], 3)
    # the UDP flow crossed the bottleneck at about its rate (tail drops of a 2-BDP buffer aside)
    assert 0.6 * rec["udp_cross_mbps"] < rec["udp_cross"]["received_mbps"] <= 1.02 * rec["udp_cross_mbps"]
