"""The sender's kernel TCP state per ACK, from tracefs: what the kernel's window really
was, whoever set it (kernel CCA or the CCP datapath).

Events (in a tracefs instance of our own, ``intcc-<pid>-<n>``, so parallel runs and
the global buffer are left alone; clock CLOCK_MONOTONIC, as the agent's trace):

- ``tcp:tcp_probe`` — an incoming segment on the sender's socket, before it is
  processed: cwnd and ssthresh (segments), srtt, snd_una / snd_nxt, the receiver's window
  (snd_wnd: what it lets the sender have in flight);
- ``tcp:tcp_cong_state_set`` — Open / Disorder / CWR / Recovery / Loss;
- ``tcp:tcp_retransmit_skb``.

``KernelTcpTrace(port)`` records while open and writes a CSV; ``summarize`` gives the
time-weighted window distribution and time per state of the flow with most ACKs (the
data flow; iperf3's control connection uses the same port).
"""
from __future__ import annotations

import csv
import errno
import itertools
import os
import re
import subprocess
import sys
import threading
import time

TRACEFS = "/sys/kernel/tracing"
EVENTS = ("tcp/tcp_probe", "tcp/tcp_cong_state_set", "tcp/tcp_retransmit_skb")
CA_STATES = ("open", "disorder", "cwr", "recovery", "loss")
BUFFER_KB_PER_CPU = 16384     # ~80 k events per CPU: a 60 s run at 10 Mbit/s needs ~30 k
REMOVE_TRIES = 40
FIELDS = ["t_s", "event", "sport", "dport", "cwnd_pkts", "ssthresh_pkts", "srtt_us", "snd_una", "snd_nxt", "ca_state",
          "snd_wnd_bytes"]

_LINE = re.compile(r"\s(\d+\.\d+): (tcp_probe|tcp_cong_state_set|tcp_retransmit_skb): (.*)$")
_KV = re.compile(r"(\w+)=(\S+)")
_seq = itertools.count()
_mount_lock = threading.Lock()


class TraceError(RuntimeError):
    pass


def _write(path: str, text: str):
    with open(path, "w") as f:
        f.write(text)


class KernelTcpTrace:
    """Record the tracepoints above for sockets talking to ``port`` (the sender's side:
    its dport), and to ``more_ports`` (competing flows), while the ``with`` block runs;
    ``rows`` afterwards (``dport`` tells the flows apart), ``lost_events`` the ring
    buffer's overruns (0 unless the buffer was too small)."""

    def __init__(self, port: int = 5201, buffer_kb_per_cpu: int = BUFFER_KB_PER_CPU, more_ports=()):
        self.ports = [port, *more_ports]
        self.buffer_kb = buffer_kb_per_cpu
        self.instance = os.path.join(TRACEFS, "instances", f"intcc-{os.getpid()}-{next(_seq)}")
        self.rows: list[dict] = []
        self.lost_events = 0

    def __enter__(self):
        with _mount_lock:      # parallel testbeds' runs start their traces together
            if not os.path.isdir(os.path.join(TRACEFS, "instances")):
                mounted = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
                if not os.path.isdir(os.path.join(TRACEFS, "instances")):
                    raise TraceError(f"tracefs is not mounted at {TRACEFS} and mounting it failed (root needed): "
                                     f"{mounted.stderr.decode(errors='replace').strip()}")
        os.mkdir(self.instance)
        try:
            _write(os.path.join(self.instance, "trace_clock"), "mono")
            _write(os.path.join(self.instance, "buffer_size_kb"), str(self.buffer_kb))
            for ev in EVENTS:
                d = os.path.join(self.instance, "events", ev)
                if not os.path.isdir(d):
                    raise TraceError(f"this kernel has no tracepoint {ev.replace('/', ':')}")
                _write(os.path.join(d, "filter"), " || ".join(f"dport == {p}" for p in self.ports))
                _write(os.path.join(d, "enable"), "1")
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc):
        try:
            for ev in EVENTS:
                _write(os.path.join(self.instance, "events", ev, "enable"), "0")
            with open(os.path.join(self.instance, "trace")) as f:
                self.rows = list(parse(f))
            for cpu in os.listdir(os.path.join(self.instance, "per_cpu")):
                with open(os.path.join(self.instance, "per_cpu", cpu, "stats")) as f:
                    m = re.search(r"overrun: (\d+)", f.read())
                    self.lost_events += int(m.group(1)) if m else 0
        finally:
            self._remove()
        return False

    def _remove(self):
        # tracefs removes an instance with rmdir, and refuses (EBUSY) while a reader or the
        # ring buffer still holds it: a moment later it goes
        for _ in range(REMOVE_TRIES):
            try:
                os.rmdir(self.instance)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    break
                time.sleep(0.05)
        print(f"kernel trace: could not remove {self.instance} (its buffer stays until "
              f"'rmdir {self.instance}')", file=sys.stderr)

    def write_csv(self, path: str):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(self.rows)


def parse(lines) -> list[dict]:
    """Rows from the text of a tracefs ``trace`` file (comment lines skipped)."""
    out = []
    for line in lines:
        m = _LINE.search(line)
        if not m:
            continue
        t_s, event, rest = float(m.group(1)), m.group(2), m.group(3)
        kv = dict(_KV.findall(rest))
        # the sender's port names the socket (tcp_cong_state_set prints no socket address)
        sport = kv["src"].rsplit(":", 1)[-1] if event == "tcp_probe" else kv.get("sport", "")
        dport = kv["dest"].rsplit(":", 1)[-1] if event == "tcp_probe" and "dest" in kv else kv.get("dport", "")
        row = {"t_s": f"{t_s:.6f}", "event": event, "sport": sport, "dport": dport}
        if event == "tcp_probe":
            row.update(cwnd_pkts=int(kv["snd_cwnd"]), ssthresh_pkts=int(kv["ssthresh"]),
                       srtt_us=int(kv["srtt"]) if kv.get("srtt") else "",
                       snd_una=int(kv["snd_una"], 16), snd_nxt=int(kv["snd_nxt"], 16),
                       snd_wnd_bytes=int(kv["snd_wnd"]) if kv.get("snd_wnd") else "")
        elif event == "tcp_cong_state_set":
            state = int(kv["cong_state"])
            row["ca_state"] = CA_STATES[state] if state < len(CA_STATES) else str(state)
        elif event == "tcp_retransmit_skb" and kv.get("err", "0") != "0":
            continue        # a retransmission the stack could not send now (counted when it is)
        out.append(row)
    return out


def data_port(rows: list[dict], dport: int | None = None) -> str | None:
    """The sender port of the socket with most ACKs: the data flow (iperf3's control
    connection goes to the same port); of the flows to ``dport`` if given."""
    counts: dict[str, int] = {}
    for r in rows:
        if r["event"] == "tcp_probe" and (dport is None or r.get("dport") == str(dport)):
            counts[r["sport"]] = counts.get(r["sport"], 0) + 1
    return max(counts, key=counts.get) if counts else None


def summarize(rows: list[dict], dport: int | None = None) -> dict | None:
    """Time-weighted window and state figures of the busiest socket (to ``dport`` if given): each tcp_probe's
    cwnd holds until the next one (as the window the ACK found); the time of each CA
    state until the next change; counts of Loss entries (RTOs) and retransmissions (sent
    skbs: a run of lost segments may go out again as one, which TCP_INFO counts per segment)."""
    sport = data_port(rows, dport)
    probes = [r for r in rows if r["event"] == "tcp_probe" and r["sport"] == sport]
    if len(probes) < 2:
        return None
    t0, t1 = float(probes[0]["t_s"]), float(probes[-1]["t_s"])
    span = max(t1 - t0, 1e-9)
    at = {"1": 0.0, "2": 0.0, "3": 0.0, "4+": 0.0}
    weighted = 0.0
    for a, b in zip(probes, probes[1:]):
        dt = float(b["t_s"]) - float(a["t_s"])
        w = int(a["cwnd_pkts"])
        weighted += w * dt
        at[str(w) if w < 4 else "4+"] += dt
    states = [r for r in rows if r["event"] == "tcp_cong_state_set" and r["sport"] == sport]
    in_state = {s: 0.0 for s in CA_STATES}
    cur, since = "open", t0
    for r in states:
        t = min(max(float(r["t_s"]), t0), t1)
        in_state[cur] = in_state.get(cur, 0.0) + t - since
        cur, since = r["ca_state"], t
    in_state[cur] = in_state.get(cur, 0.0) + t1 - since
    return {"acks": len(probes), "span_s": round(span, 3),
            "mean_cwnd_pkts": round(weighted / span, 3),
            "time_at_cwnd_pct": {k: round(100 * v / span, 1) for k, v in at.items()},
            "time_in_state_pct": {k: round(100 * v / span, 1) for k, v in in_state.items()},
            "loss_entries": sum(1 for r in states if r["ca_state"] == "loss"),
            "recovery_entries": sum(1 for r in states if r["ca_state"] == "recovery"),
            "retransmits": sum(1 for r in rows if r["event"] == "tcp_retransmit_skb" and r["sport"] == sport)}
