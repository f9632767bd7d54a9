"""The contract between an intcc agent and the intcc CCP datapath, named once.

libccp carries no names across the IPC: portus numbers a program's control registers in
declaration order, and the daemon (datapath/src/agent.rs) reads them by that number.
The daemon and the BPF program share four structs through maps and a ring buffer. This
module is the single source of both:

- ``CONTROL_REGISTERS``: what every intcc program declares first, in this order;
- ``STRUCTS``: the C layout of the event, control, config and stats structs;
- ``CONTRACT_VERSION``: the handshake. An agent sets register ``contract_version`` to it
  with its first command; the daemon takes the registers only when the number is its
  own (a mismatch is counted and named in its log), and it writes its version and
  capabilities to ``contract.json`` in its state directory for agents to read.

``python -m ccp_algs.codegen`` writes it as C and Rust for the datapath's build
(ccp_algs/codegen.py). Standard library only: the datapath's Makefile runs it before the
compilers.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path

CONTRACT_VERSION = 11    # 1: registers without a version, seg_bytes > 0 as the sentinel; 2: no ACK aggregation;
                        # 3: no own_recovery, no per-ACK loss accounting; 4: no HyStart per ACK;
                        # 5: no fold in the kernel; 6: no cubic curve in the kernel; 7: no report on request;
                        # 8: every report wakes the daemon; 9: no additive family (ai_pkts);
                        # 10: no rto_min


@dataclass(frozen=True)
class Register:
    name: str
    default: int
    ctl_field: str | None     # the intcc_ccp_ctl field the daemon copies it to (None: agent side only)
    doc: str
    reset: int | None = None  # what a switch of algorithm sets it to when the new one does not (None: default)

    @property
    def switch_value(self) -> int:
        return self.default if self.reset is None else self.reset


CONTROL_REGISTERS = (
    Register("contract_version", 0, None,
             "the agent's CONTRACT_VERSION: the daemon reads the others only when it matches"),
    Register("loss_beta", 0, "loss_beta_1024",
             "the window kept after a congestive loss, /1024, as the algorithm would cut: the "
             "kernel's ssthresh until the agent answers the loss (0: Reno's half)"),
    Register("seg_bytes", 1448, None,
             "a segment (bytes): the program's own per-ACK slow start on ccp-kernel grows by it"),
    Register("ss_until", 0, "ss_until_bytes",
             "slow start per ACK, a segment per packet delivered, up to here (bytes; 0: off)"),
    Register("ca_target", 0, "ca_target_bytes",
             "congestion avoidance per ACK towards here, as tcp_cubic (bytes; 0: off)"),
    Register("ca_cnt_max", 0, "ca_cnt_max",
             "at most this many packets delivered per segment of growth (0: no bound)"),
    Register("reno_scale", 0, "reno_scale",
             "CUBIC's Reno-friendly W_est gains a segment per (cwnd * reno_scale) >> 3 packets (0: off)"),
    Register("ca_epoch", 0, "ca_epoch", "a change restarts W_est at the window (a new CUBIC epoch)"),
    Register("bw", 0, "bw_bytes_per_s",
             "the algorithm's bandwidth estimate (bytes/s): the kernel measures ACK aggregation against "
             "it, as tcp_bbr (SIGNALS['extra_acked']; 0: off)"),
    Register("own_recovery", 0, "own_recovery",
             "1: the algorithm's window around losses is tcp_bbr's, per ACK in the kernel: every packet "
             "lost after the report a command was decided on comes off it, the first round of a recovery "
             "keeps at least packet conservation (in flight + delivered), no PRR, at least 4 packets, and "
             "the per-ACK growth up to ss_until goes on in recoveries; 0: PRR steps a recovery towards "
             "the agent's window"),
    Register("ss_exit_rtt", 0, "ss_exit_rtt_us",
             "HyStart per ACK, as tcp_cubic's delay detection: rounds from the first slow-start ACK, "
             "samples from a window of 16 segments on; the per-ACK slow start stops for the rest of a "
             "round once the round's smallest RTT over more than 8 samples is above this (us; 0: off). "
             "The agent ends slow start at its next report"),
    Register("ca_w_max", 0, "ca_w_max_bytes",
             "with ca_ahead: tcp_cubic's last_max_cwnd (bytes; 0: no loss yet), the plateau of the "
             "cubic curve the kernel follows per ACK"),
    Register("ca_ahead", 0, "ca_ahead_us",
             "the kernel computes the congestion-avoidance target per ACK as tcp_cubic's bictcp_update "
             "(the epoch starts at the first such ACK after ca_epoch changed; K and the origin from the "
             "window there and ca_w_max), this far ahead on the curve (tcp_cubic's delay_min, us; 0: off, "
             "ca_target is the target)"),
    Register("ai_pkts", 0, "ai_pkts",
             "congestion avoidance per ACK as the kernel's Reno (tcp_cong_avoid_ai), this many segments per "
             "window delivered (0: off; before the cubic family's, which it then leaves alone)"),
    Register("rto_min", 0, "rto_min_us",
             "the flow's minimum retransmission timeout, set with each command (bpf_setsockopt "
             "TCP_BPF_RTO_MIN; us, 2 jiffies to 200 ms; 0: left as it is). The kernel's RTO is the "
             "smoothed RTT plus at least this: an algorithm told of a downtime sets it to that, so "
             "the timer fires once after it, not at 200 ms and again at 400",
             reset=200_000),    # a switch gives the flow the kernel's TCP_RTO_MIN back
)
REGISTER_INDEX = {r.name: i for i, r in enumerate(CONTROL_REGISTERS)}


@dataclass(frozen=True)
class Family:
    """An algorithm family's kernel half: the per-ACK arithmetic in
    ``datapath/bpf/families/<name>.h``, driven by these control registers, whose control
    fields no other file reads (codegen.check_family_sources). The Rust daemon has nothing of its
    own per family: it copies every register to its field (the generated map)."""
    name: str
    registers: tuple[str, ...]
    doc: str

    @property
    def header(self) -> str:
        return f"families/{self.name}.h"

    @property
    def ctl_fields(self) -> tuple[str, ...]:
        by_name = {r.name: r.ctl_field for r in CONTROL_REGISTERS}
        return tuple(by_name[r] for r in self.registers)


#: The families, in the order their headers are included (one may use an earlier one's).
FAMILIES = (
    Family("slow_start", ("ss_until", "ss_exit_rtt"),
           "slow start per ACK up to the agent's bound, paused by tcp_cubic's HyStart delay detection"),
    Family("cubic", ("ca_target", "ca_cnt_max", "reno_scale", "ca_epoch", "ca_w_max", "ca_ahead"),
           "tcp_cubic's congestion avoidance per ACK: the cubic curve or a fixed target, W_est, the credit"),
    Family("bbr", ("bw", "own_recovery"),
           "tcp_bbr's window around losses per ACK, and its ACK-aggregation sample"),
    Family("additive", ("ai_pkts",),
           "additive increase per ACK, the kernel's Reno with a segments per window (tests/examples/aimd.py)"),
)
FAMILY_OF_REGISTER = {reg: f.name for f in FAMILIES for reg in f.registers}
#: The registers of the per-ACK window growth (slow start and congestion avoidance)
GROWTH_REGISTER_NAMES = tuple(r for f in FAMILIES if f.name in ("slow_start", "cubic", "additive")
                              for r in f.registers)

# libccp primitives the intcc datapath gives another meaning (libccp has no field for them).
# On ccp-kernel they keep libccp's: an algorithm reads them only where the capability says so.
SIGNALS = {
    "undo": ("Ack.ecn_bytes", "the window (bytes) the kernel restored by undoing a reduction on this ACK"),
    "reductions": ("Ack.bytes_misordered", "window reductions (Recovery, CWR) the kernel has begun (cumulative)"),
    "grown": ("Flow.bytes_pending", "segments the kernel's per-ACK growth added since the flow was announced"),
    "extra_acked": ("Flow.rate_outgoing", "packets delivered in the current ACK epoch beyond the bw register's "
                                          "rate, at most a window (tcp_bbr's extra_acked sample), on this ACK"),
}


def register_declarations() -> str:
    """The control-register part of a program's ``(def ...)``, in contract order."""
    return " ".join(f"({r.name} {r.default})" for r in CONTROL_REGISTERS)


class ContractError(RuntimeError):
    pass


def check_program(text: str) -> None:
    """A program's control registers must begin with the contract's, in its order: the
    daemon reads them by position."""
    declared = control_registers(text)
    expected = [r.name for r in CONTROL_REGISTERS]
    if declared[:len(expected)] != expected:
        raise ContractError(f"the program's control registers begin {declared[:len(expected)]}, the "
                            f"datapath reads them by position as {expected} (ccp_algs/contract.py)")


def _block(text: str, start: int) -> str:
    """The parenthesised expression that opens at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    raise ValueError("unbalanced parentheses in program")


def control_registers(program: str) -> list[str]:
    """The control registers a datapath program declares, in declaration order (portus's
    numbering): the ``(name value)`` pairs of its ``(def ...)`` after the Report block."""
    definition = _block(program, program.index("(def"))
    report = _block(definition, definition.index("(Report"))
    rest = definition.replace(report, "", 1)
    return re.findall(r"\((\w+)\s+[^()\s]+\)", rest)


# -- what a datapath offers -----------------------------------------------------------

@dataclass(frozen=True)
class DatapathCapabilities:
    """What the datapath under an agent tells and does beyond libccp's primitives."""
    undo: bool          # tells the kernel's undos (SIGNALS["undo"])
    reductions: bool    # tells the kernel's window reductions (SIGNALS["reductions"])
    growth: bool        # grows the window per ACK from the growth registers, tells it (SIGNALS["grown"])
    loss_beta: bool     # the kernel's ssthresh follows the loss_beta register
    aggregation: bool   # measures ACK aggregation against the bw register (SIGNALS["extra_acked"])

    def names(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name)]

    @classmethod
    def from_names(cls, names) -> DatapathCapabilities:
        return cls(**{f.name: f.name in names for f in fields(cls)})


INTCC_DATAPATH = DatapathCapabilities(undo=True, reductions=True, growth=True, loss_beta=True, aggregation=True)
CCP_KERNEL = DatapathCapabilities(undo=False, reductions=False, growth=False, loss_beta=False, aggregation=False)
CONTRACT_FILE = "contract.json"     # in the daemon's state directory


def read_datapath_contract(state_dir) -> DatapathCapabilities | None:
    """The capabilities a running intcc datapath announced in its state directory (None:
    no daemon has written one yet; the register handshake still guards). A daemon of
    another contract version is an error that names both."""
    path = Path(state_dir) / CONTRACT_FILE
    try:
        announced = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ContractError(f"{path}: unreadable datapath contract ({e})") from None
    version = announced.get("contract_version") if isinstance(announced, dict) else None
    if version != CONTRACT_VERSION:
        raise ContractError(f"the datapath in {path.parent} speaks contract version {version}, this agent "
                            f"{CONTRACT_VERSION}: rebuild ('make setup') and restart 'intcc datapath run'")
    missing = [f.name for f in FAMILIES if f.name not in announced.get("families", [f.name])]
    if missing:
        raise ContractError(f"the datapath in {path.parent} has no kernel half for famil"
                            f"{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)}: rebuild ('make setup')")
    return DatapathCapabilities.from_names(announced.get("capabilities", []))


# -- the shared structs -----------------------------------------------------------------

# The datapath program the kernel folds itself (datapath/bpf/intcc_ccp_fold.h), known by
# the fingerprint of portus's compiled form (FNV-1a 64 of the install message after its
# program uid; the daemon logs it with -v): programs.REPORT_PER_RTT_AND_ON_LOSS. Another
# program, or this one changed, runs in libccp on per-ACK events, as before.
NATIVE_FOLD_FINGERPRINT = 0xe8bdaabf14fc29fe
# A datagram to the daemon's socket asking for a flow's report at its next ACK: this, then
# libccp's flow id (u32, little endian); ccp_agent.datapath.ReportRequester sends it
REPORT_REQUEST_MAGIC = b"INTCCRPT"
REPORT_FIELDS = 16      # the program's Report registers, in declaration order

_C_TYPES = {"u8": (1, "__u8"), "u16": (2, "__u16"), "u32": (4, "__u32"), "u64": (8, "__u64")}

STRUCTS = {
    "intcc_ccp_event": ("Event", [
        ("kind", "u32"), ("sid", "u32"), ("ts_ns", "u64"),
        ("mss", "u32"), ("init_cwnd_bytes", "u32"), ("family", "u32"), ("src_port", "u16"),
        ("dst_port", "u16"), ("src_addr", "u8[16]"), ("dst_addr", "u8[16]"),
        ("bytes_acked", "u32"), ("packets_acked", "u32"), ("bytes_misordered", "u32"),
        ("packets_misordered", "u32"), ("ecn_bytes", "u32"), ("ecn_packets", "u32"),
        ("lost_pkts_sample", "u32"), ("was_timeout", "u32"), ("rtt_sample_us", "u32"),
        ("bytes_in_flight", "u32"), ("packets_in_flight", "u32"), ("snd_cwnd_bytes", "u32"),
        ("rate_outgoing_bps", "u64"), ("rate_incoming_bps", "u64"), ("snd_rate_bps", "u64"),
        ("bytes_pending", "u32"), ("ca_state", "u32"), ("applied_seq", "u64"),
        ("undo_cwnd_bytes", "u32"), ("hold_id", "u32"), ("grown_pkts", "u32"), ("reductions", "u32"),
        ("extra_acked_pkts", "u32"), ("lost_total_pkts", "u32"), ("report_fields", f"u64[{REPORT_FIELDS}]"),
    ]),
    "intcc_ccp_ctl": ("Ctl", [
        ("flags", "u32"), ("cwnd_bytes", "u32"), ("rate_bps", "u64"), ("seq", "u64"),
        ("answered_hold", "u32"), ("grown_base", "u32"), ("ss_until_bytes", "u32"),
        ("ca_target_bytes", "u32"), ("ca_cnt_max", "u32"), ("reno_scale", "u32"), ("ca_epoch", "u32"),
        ("loss_beta_1024", "u32"), ("bw_bytes_per_s", "u32"), ("own_recovery", "u32"),
        ("lost_base", "u32"), ("ss_exit_rtt_us", "u32"), ("fold_gen", "u32"), ("ca_w_max_bytes", "u32"),
        ("ca_ahead_us", "u32"), ("report_req", "u32"), ("ai_pkts", "u32"),
        ("rto_min_us", "u32"),
    ]),
    "intcc_ccp_cfg": ("Cfg", [
        ("heartbeat_ns", "u64"), ("agent_timeout_ns", "u64"), ("epoch", "u64"), ("contract_version", "u64"),
        ("fold_check", "u64"), ("report_coalesce_ns", "u64"),
    ]),
    "intcc_ccp_stats": ("Stats", [
        ("events_lost", "u64"), ("flows_created", "u64"), ("fallback_acks", "u64"),
        ("controlled_acks", "u64"), ("creates_sent", "u64"), ("cmds_applied", "u64"), ("undos", "u64"),
        ("rto_hold_acks", "u64"), ("cut_hold_acks", "u64"), ("uncut_recovery_acks", "u64"),
        ("folded_acks", "u64"), ("kernel_reports", "u64"), ("requested_reports", "u64"),
        ("reports_waited", "u64"), ("rto_min_set", "u64"), ("rto_min_refused", "u64"),
    ]),
}


#: What the control fields that are not a register's carry (a register's field is
#: documented by its Register.doc): the generated struct's comments, in C and Rust.
CTL_FIELD_DOCS = {
    "flags": "CTL_HAS_CWND | CTL_HAS_RATE",
    "cwnd_bytes": "the agent's window; the kernel's per-ACK growth since grown_base comes on top",
    "rate_bps": "the pacing rate (bytes per second)",
    "seq": "bumped by userspace on every write",
    "answered_hold": "the agent answered a report carrying this hold_id",
    "grown_base": "the window is cwnd_bytes plus the growth after the flow's grown_pkts was this",
    "lost_base": "own_recovery: the window also loses what tp->lost grew by since this",
    "fold_gen": "0: an event per ACK, libccp folds; else the kernel folds the shared program and sends "
                "its reports (a new value starts a fresh fold)",
    "report_req": "bumped by the daemon: a report at the next ACK, whatever the program's schedule",
}
#: The structs both sides take from here, not only check: the control struct, which a new
#: register extends (a family's register needs nothing else in the daemon)
GENERATED_STRUCTS = ("intcc_ccp_ctl",)


def _size_align(ctype: str) -> tuple[int, int]:
    m = re.fullmatch(r"(u8|u16|u32|u64)(?:\[(\d+)\])?", ctype)
    if not m:
        raise ValueError(f"unknown field type {ctype!r}")
    size = _C_TYPES[m.group(1)][0]
    return size * int(m.group(2) or 1), size


def layout(struct: str) -> tuple[list[tuple[str, int]], int]:
    """Field offsets and the size, by C's rules for natural alignment (x86-64 and BPF agree)."""
    offset, biggest, offsets = 0, 1, []
    for name, ctype in STRUCTS[struct][1]:
        size, align = _size_align(ctype)
        offset = -(-offset // align) * align
        offsets.append((name, offset))
        offset += size
        biggest = max(biggest, align)
    return offsets, -(-offset // biggest) * biggest


def pack(struct: str, **values: int) -> bytes:
    """A struct's bytes (native byte order) with these fields set, the rest zero: for
    tools and tests that write the BPF maps directly."""
    offsets, size = layout(struct)
    types = dict(STRUCTS[struct][1])
    out = bytearray(size)
    where = dict(offsets)
    for name, value in values.items():
        if name not in where:
            raise KeyError(f"{struct} has no field {name!r}")
        width = _size_align(types[name])[1]
        out[where[name]:where[name] + width] = int(value).to_bytes(width, sys.byteorder)
    return bytes(out)
