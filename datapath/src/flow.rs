//! One kernel flow of an agent's session: its libccp Connection, what the agent was last
//! told of it, and the way a report goes from the kernel's fold (or libccp's) to the agent.

use std::sync::atomic::{AtomicU32, Ordering};

use libccp::Connection;

use crate::agent_link::AgentTx;
use crate::bpf::{Event, CTL_HAS_CWND};
use crate::contract;
use crate::counters::{bump, Counters};
use crate::flowctl::FlowCtl;
use crate::fold::{measure_msg, primitives, Fold, REPORT_FIELD_NAMES, R_GROWN};

/// What a flow looked like when it was announced (for flows.json).
#[derive(Clone)]
pub struct FlowMeta {
    pub sid: u32,
    pub event: Event,
    /// the 32-bit addresses libccp's create message carries (IPv6: the low 32 bits)
    pub ccp_src_ip: u32,
    pub ccp_dst_ip: u32,
}

pub(crate) fn ccp_ip(family: u32, raw: &[u8; 16]) -> u32 {
    let b = if family == crate::bpf::AF_INET6 { &raw[12..16] } else { &raw[0..4] };
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) struct Flow {
    // 'static is a lie told to libccp's borrow: Session keeps the Datapath alive and
    // drops every Connection before it (field order).
    pub(crate) conn: Connection<'static, FlowCtl>,
    pub(crate) meta: FlowMeta,
    /// libccp's socket id for it (portus's sock_id)
    pub(crate) ccp_sid: u32,
    /// the latest primitives, replayed as an empty ACK to apply a command at once
    pub(crate) last: Event,
    /// an RTO / recovery (BPF hold_id) whose report the agent has, not yet answered
    pub(crate) awaiting_answer: Option<u32>,
    /// the kernel's growth counter on the ACK of the latest report sent to the agent
    pub(crate) reported_grown: u32,
    /// the kernel's loss counter at that report
    pub(crate) reported_lost: u32,
    /// ... when the flow was announced: the agent is told the growth since
    pub(crate) grown_at_create: u32,
    /// the agent's contract_version register matched ours: its control registers are
    /// the contract's (ccp_algs/contract.py)
    pub(crate) contract: bool,
    /// the program the agent set for the flow (ChangeProg), and whether the kernel folds it
    pub(crate) program_uid: u32,
    pub(crate) kernel_folds: bool,
    /// a folding flow's ACKs that still came as events, for its next kernel report
    pub(crate) folded_here: Option<Fold>,
    /// --check-fold: the ACKs the kernel folded since its last report, folded here
    pub(crate) check: Option<Fold>,
}

/// A fold generation no flow has had in this daemon's life (agents come and go; the
/// kernel's fold state outlives a session).
pub(crate) fn next_fold_gen() -> u32 {
    static LAST: AtomicU32 = AtomicU32::new(0);
    loop {
        let gen = LAST.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if gen != 0 {
            return gen;
        }
    }
}

impl Flow {
    /// The kernel's state on the ACK of this event; true when it carries a new hold.
    pub(crate) fn take_state(&mut self, ev: &Event) -> bool {
        self.conn.kernel_rate_bps = ev.snd_rate_bps;
        if self.conn.has_pending() {
            self.conn.saw_applied(ev.applied_seq, ev.ts_ns);
        }
        let new_hold = ev.hold_id != self.last.hold_id;
        self.last = *ev;
        self.conn.mss = ev.mss.max(1);
        self.conn.grown_now = ev.grown_pkts;
        self.conn.grown_basis = ev.grown_pkts;
        self.conn.lost_now = ev.lost_total_pkts;
        self.conn.lost_basis = ev.lost_total_pkts;
        new_hold
    }
}

/// --check-fold: the kernel's report against the daemon's fold of the same ACKs.
pub(crate) fn compare_folds(counters: &Counters, here: &Fold, ev: &Event) {
    bump(&counters.fold_checks);
    if here.r == ev.report_fields {
        return;
    }
    bump(&counters.fold_mismatches);
    if counters.fold_mismatches.get() <= 5 {
        let differ: Vec<String> = (0..contract::REPORT_FIELDS)
            .filter(|&i| here.r[i] != ev.report_fields[i])
            .map(|i| format!("{} kernel {} daemon {}", REPORT_FIELD_NAMES[i], ev.report_fields[i], here.r[i]))
            .collect();
        eprintln!("intcc-datapath: flow {}: the kernel's fold differs: {}", ev.sid, differ.join(", "));
    }
}

/// Send a report of the program's registers; `ev` is the reporting ACK's event.
pub(crate) fn send_report(tx: &AgentTx, counters: &Counters, flow: &mut Flow, ev: &Event, fields: &mut [u64; contract::REPORT_FIELDS]) {
    fields[R_GROWN] = ev.grown_pkts.wrapping_sub(flow.grown_at_create) as u64; // Flow.bytes_pending
    tx.send(&measure_msg(flow.ccp_sid, flow.program_uid, fields));
    bump(&counters.kernel_reports);
    flow.reported_grown = ev.grown_pkts;
    flow.reported_lost = ev.lost_total_pkts;
}

/// Run the flow's datapath program on these primitives (libccp applies staged commands first).
///
/// The window fed to the program is the command plus what the kernel's per-ACK growth
/// added since (grow_per_ack in the BPF program), and Flow.bytes_pending carries the
/// growth since the flow was announced (segments), so the agent adds exactly the growth it has been told
/// of to the window it decides on (ccp_algs.base.Report.grown_pkts). No intcc algorithm
/// reads bytes_pending as such.
///
/// libccp loads the Cwnd register from snd_cwnd and hands it back through set_cwnd
/// after the program, as a command. So a controlled flow reports the command in force,
/// not the kernel's window: in a recovery that is PRR's step toward the command, in a
/// hold the kernel's own response, and handed back it became the command, PRR aiming
/// at where it already was (the window stayed flat through recoveries: ccp cubic +5 %
/// over kernel cubic at 1 % link loss); an event sent before the latest command reached
/// the kernel would revert it. An undo is the kernel's decision and stands; it reaches
/// the agent as Ack.ecn_bytes (libccp has no undo primitive; ECN marks stay in
/// Ack.ecn_packets). Likewise Ack.bytes_misordered carries the count of window
/// reductions the kernel has begun (Event.reductions; the SACKed data is in
/// Ack.packets_misordered): a loss-based algorithm cuts once per reduction, as the kernel.
/// Flow.rate_outgoing (on this datapath a copy of the incoming rate) carries the ACK
/// aggregation the kernel measured against the agent's bw register (Event.extra_acked_pkts).
pub(crate) fn invoke(flow: &mut Flow, ev: &Event) -> Result<(), libccp::LibccpError> {
    {
        let ctl = &flow.conn.ctl;
        let commanded = ev.undo_cwnd_bytes == 0 && ctl.flags & CTL_HAS_CWND != 0;
        let snd_cwnd = if commanded { flow.conn.commanded_bytes() } else { ev.snd_cwnd_bytes };
        flow.conn.load_primitives(primitives(ev, snd_cwnd, ev.grown_pkts.wrapping_sub(flow.grown_at_create)));
    }
    flow.conn.invoke()
}
