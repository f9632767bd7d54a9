"""Parsing and summarising the sender's tracefs events (experiments/testbed/kernel_trace.py)."""
from experiments.testbed.kernel_trace import parse, summarize


def probe(t, cwnd, una, nxt, port=40000, ssthresh=2147483647, srtt=21000, dport=5201):
    return (f" iperf3-123 [001] ..s1. {t:.6f}: tcp_probe: family=AF_INET src=10.0.0.1:{port} "
            f"dest=10.0.0.2:{dport} mark=0x0 data_len=0 snd_nxt={nxt:#x} snd_una={una:#x} snd_cwnd={cwnd} "
            f"ssthresh={ssthresh} snd_wnd=64000 srtt={srtt} rcv_wnd=64000 sock_cookie=1a skbaddr=0000 skaddr=0000")


def state(t, s, port=40000):
    return (f" <idle>-0 [000] ..s1. {t:.6f}: tcp_cong_state_set: family=AF_INET sport={port} dport=5201 "
            f"saddr=10.0.0.1 daddr=10.0.0.2 saddrv6=::ffff:10.0.0.1 daddrv6=::ffff:10.0.0.2 cong_state={s}")


def retx(t, port=40000, err=0):
    return (f" <idle>-0 [000] ..s1. {t:.6f}: tcp_retransmit_skb: skbaddr=0000 skaddr=0000 family=AF_INET "
            f"sport={port} dport=5201 saddr=10.0.0.1 daddr=10.0.0.2 saddrv6=:: daddrv6=:: state=TCP_ESTABLISHED err={err}")


def test_parse_reads_the_fields_and_skips_comments():
    rows = parse(["# tracer: nop", "#", probe(10.0, 4, 0x100, 0x200, srtt=21544), state(10.5, 4), retx(10.6),
                  retx(10.7, err=-16)])      # not sent (-EBUSY): not a retransmission
    assert [r["event"] for r in rows] == ["tcp_probe", "tcp_cong_state_set", "tcp_retransmit_skb"]
    assert rows[0]["cwnd_pkts"] == 4 and rows[0]["srtt_us"] == 21544 and rows[0]["snd_wnd_bytes"] == 64000
    assert rows[0]["snd_una"] == 0x100 and rows[0]["sport"] == "40000"
    assert rows[1]["ca_state"] == "loss" and rows[1]["sport"] == "40000"


def test_summary_weights_windows_by_time_and_picks_the_busiest_socket():
    lines = [probe(0.0, 1, 0, 1), probe(1.0, 2, 1, 3), state(1.5, 4), retx(1.5), probe(3.0, 4, 3, 7), state(3.0, 0),
             probe(4.0, 4, 7, 11),
             probe(0.5, 10, 0, 1, port=40001)]          # iperf3's control connection: one ACK
    s = summarize(parse(lines))
    assert s["acks"] == 4 and s["span_s"] == 4.0
    # 1 s at 1, 2 s at 2, 1 s at 4 -> (1 + 4 + 4) / 4
    assert s["mean_cwnd_pkts"] == 2.25
    assert s["time_at_cwnd_pct"] == {"1": 25.0, "2": 50.0, "3": 0.0, "4+": 25.0}
    assert s["time_in_state_pct"]["loss"] == 37.5 and s["time_in_state_pct"]["open"] == 62.5
    assert s["loss_entries"] == 1 and s["retransmits"] == 1


def test_summary_of_too_little_is_none():
    assert summarize(parse([probe(0.0, 1, 0, 1)])) is None


def test_a_competitor_traced_beside_flow_1_is_summarised_apart():
    """One trace of both senders (KernelTcpTrace's more_ports): rows carry the server port,
    and each flow's summary is of its own socket."""
    lines = [probe(0.0, 10, 0, 1), probe(1.0, 10, 1, 2), probe(2.0, 10, 2, 3),
             probe(0.0, 40, 0, 1, port=50000, dport=5202), probe(2.0, 40, 1, 2, port=50000, dport=5202)]
    rows = parse(lines)
    assert {r["dport"] for r in rows} == {"5201", "5202"}
    assert summarize(rows, 5201)["mean_cwnd_pkts"] == 10 and summarize(rows, 5202)["mean_cwnd_pkts"] == 40
    assert summarize(rows)["acks"] == 3         # without a port: the busiest socket, as before
