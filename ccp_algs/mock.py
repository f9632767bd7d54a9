"""A pure-Python stand-in for portus's datapath handle, for unit tests of
algorithm decisions (no portus runtime, no kernel): it records the programs
installed and the window last set, and, given the algorithm's programs, refuses
a register the installed program does not declare, as portus does."""
from __future__ import annotations

import re
from types import SimpleNamespace


def _block(text: str, start: int) -> str:
    """The parenthesised expression that opens at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    raise ValueError("unbalanced parentheses in program")


def control_registers(program: str) -> set[str]:
    """The control registers a datapath program declares: the ``(name value)`` pairs of
    its ``(def ...)`` after the Report block."""
    definition = _block(program, program.index("(def"))
    report = _block(definition, definition.index("(Report"))
    rest = definition.replace(report, "", 1)
    return set(re.findall(r"\((\w+)\s+[^()\s]+\)", rest))


class MockDatapath:
    def __init__(self, programs: dict[str, str] | None = None):
        self.known_programs = programs          # name -> text; None: accept any register
        self.registers: set[str] | None = None
        self.cwnd = None
        self.rate = None
        self.fields: dict[str, int] = {}        # control registers last set
        self.programs = []
        self.updates = 0

    @property
    def ss_until(self):
        return self.fields.get("ss_until", 0)

    @property
    def seg_bytes(self):
        return self.fields.get("seg_bytes")

    def set_program(self, name, fields=None):
        if self.known_programs is not None:
            if name not in self.known_programs:
                raise KeyError(f"unknown program {name!r}")
            self.registers = control_registers(self.known_programs[name])
        self.programs.append(name)
        for k, v in fields or []:
            self.update_field(k, v)

    def update_field(self, name, value):
        if self.registers is not None and name not in self.registers | {"Cwnd", "Rate"}:
            raise KeyError(f"unknown field {name!r}: the program declares {sorted(self.registers)}")
        if name == "Cwnd":
            self.cwnd = value
        elif name == "Rate":
            self.rate = value
        else:
            self.fields[name] = value
        self.updates += 1

    def update_fields(self, fields):
        for name, value in fields:
            self.update_field(name, value)


def datapath_info(sock_id=1, mss=1448, init_cwnd_pkts=10, src_ip=1, src_port=40000, dst_ip=2, dst_port=5201):
    """What portus hands new_flow() as DatapathInfo."""
    return SimpleNamespace(sock_id=sock_id, mss=mss, init_cwnd=init_cwnd_pkts * mss, src_ip=src_ip,
                           src_port=src_port, dst_ip=dst_ip, dst_port=dst_port)


def report(acked=0, loss=0, timeout=False, rtt_us=20_000, inflight=10, sacked=0, rin=0, rout=0, minrtt=None,
           undo=0, rto_acked=None, delivered=None, rto_delivered=None, grown=None, reductions=None):
    """A report of the shared program (base.REPORT_PER_RTT_AND_ON_LOSS; minrtt: vegas's).
    ``grown``: the datapath's growth counter (segments; None: a datapath without it);
    ``reductions``: the kernel's window reductions so far (None: a datapath without it)."""
    return SimpleNamespace(acked=acked, sacked=sacked, loss=loss, timeout=timeout, rtt=rtt_us, inflight=inflight,
                           rin=rin, rout=rout, minrtt=rtt_us if minrtt is None else minrtt, undo=undo,
                           rto_acked=(acked if timeout else 0) if rto_acked is None else rto_acked,
                           delivered=delivered, rto_delivered=rto_delivered, grown=grown,
                           reductions=reductions)
