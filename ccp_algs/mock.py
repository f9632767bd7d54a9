"""A pure-Python stand-in for portus's datapath handle, for unit tests of algorithm
decisions (no portus runtime, no kernel). It does what portus and the intcc daemon do
with an update: portus numbers the installed program's control registers in declaration
order (an undeclared one is an error), and the daemon reads them by that number through
the contract (contract.py), only after the contract_version handshake. So ``fields``
holds what the datapath would act on: a program that declares its registers out of the
contract's order shows up as wrong values, as it would in the kernel."""
from __future__ import annotations

from types import SimpleNamespace

from .contract import CONTRACT_VERSION, CONTROL_REGISTERS, REGISTER_INDEX, control_registers


class MockDatapath:
    def __init__(self, programs: dict[str, str]):
        self.known_programs = programs          # name -> text
        self.positions: dict[str, int] = {}     # the installed program's control registers -> number
        self.cwnd = None
        self.rate = None
        self.by_position: dict[int, int] = {}   # what the daemon receives: register number -> value
        self.contract = False                   # the handshake passed (the daemon takes the registers)
        self.programs = []
        self.updates = 0
        self.unsent = 0                         # updates the agent knew would change nothing

    @property
    def fields(self) -> dict[str, int]:
        """The contract's registers as the daemon reads them (by position), once the
        agent has announced our contract version; {} before."""
        if not self.contract:
            return {}
        return {r.name: self.by_position[i] for i, r in enumerate(CONTROL_REGISTERS) if i in self.by_position}

    @property
    def ss_until(self):
        return self.fields.get("ss_until", 0)

    @property
    def seg_bytes(self):
        return self.fields.get("seg_bytes")

    def set_program(self, name, fields=None):
        if name not in self.known_programs:
            raise KeyError(f"unknown program {name!r}")
        self.positions = {reg: i for i, reg in enumerate(control_registers(self.known_programs[name]))}
        self.programs.append(name)
        for k, v in fields or []:
            self.update_field(k, v)

    def update_field(self, name, value):
        if not isinstance(value, int) or not 0 <= value <= 2 ** 31 - 1:
            raise OverflowError(f"{name} = {value!r}: portus takes integers in [0, 2^31 - 1]")
        if name == "Cwnd":
            self.cwnd = value
        elif name == "Rate":
            if value:                   # as libccp: a Rate of 0 never reaches the datapath
                self.rate = value
        elif name not in self.positions:
            raise KeyError(f"unknown field {name!r}: the program declares {sorted(self.positions)}")
        else:
            position = self.positions[name]
            self.by_position[position] = value
            if position == REGISTER_INDEX["contract_version"]:
                self.contract = value == CONTRACT_VERSION
        self.updates += 1

    def update_fields(self, fields):
        for name, value in fields:
            self.update_field(name, value)

    def unsent_update(self, cwnd_bytes):
        """The agent did not send an update that would change nothing (base.py,
        _changes_nothing): its window is the last one sent plus the kernel's growth since,
        which is what the daemon keeps in force; here it becomes ``cwnd``."""
        self.cwnd = cwnd_bytes
        self.unsent += 1


def datapath_info(sock_id=1, mss=1448, init_cwnd_pkts=10, src_ip=1, src_port=40000, dst_ip=2, dst_port=5201):
    """What portus hands new_flow() as DatapathInfo."""
    return SimpleNamespace(sock_id=sock_id, mss=mss, init_cwnd=init_cwnd_pkts * mss, src_ip=src_ip,
                           src_port=src_port, dst_ip=dst_ip, dst_port=dst_port)


def report(acked=0, loss=0, timeout=False, rtt_us=20_000, inflight=10, sacked=0, extra_acked=None, minrtt=None,
           undo=0, rto_acked=None, delivered=None, rto_delivered=None, grown=None, reductions=None):
    """A report of the shared program (programs.REPORT_PER_RTT_AND_ON_LOSS; minrtt: vegas's).
    ``grown``: the datapath's growth counter (segments; None: a datapath without it);
    ``reductions``: the kernel's window reductions so far (None: a datapath without it)."""
    return SimpleNamespace(acked=acked, sacked=sacked, loss=loss, timeout=timeout, rtt=rtt_us, inflight=inflight,
                           extra_acked=extra_acked, minrtt=rtt_us if minrtt is None else minrtt, undo=undo,
                           rto_acked=(acked if timeout else 0) if rto_acked is None else rto_acked,
                           delivered=delivered, rto_delivered=rto_delivered, grown=grown,
                           reductions=reductions)
