//! Daemon-wide counters (single-threaded: Cells), read by the state files' writer and
//! bumped by the agent session and the flows' control (a room of their own: both use them,
//! and neither owns the other).
use std::cell::Cell;

#[derive(Default)]
pub struct Counters {
    pub ipc_sent: Cell<u64>,
    pub ipc_send_dropped: Cell<u64>,
    pub ipc_received: Cell<u64>,
    pub ipc_rejected: Cell<u64>,
    pub ipc_not_from_agent: Cell<u64>,
    pub ipc_applied_at_once: Cell<u64>,
    pub holds_answered: Cell<u64>,
    pub measures: Cell<u64>,
    pub measures_unknown_flow: Cell<u64>,
    pub creates: Cell<u64>,
    pub closes: Cell<u64>,
    pub bad_events: Cell<u64>,
    pub cmds_written: Cell<u64>,
    pub cmd_write_errors: Cell<u64>,
    pub invoke_errors: Cell<u64>,
    /// agent messages announcing another contract version (ccp_algs/contract.py)
    pub contract_mismatches: Cell<u64>,
    pub agent_sessions: Cell<u64>,
    /// reports of the kernel's fold sent to the agent
    pub kernel_reports: Cell<u64>,
    /// ... dropped: the flow had changed to a program the kernel does not fold
    pub kernel_reports_stale: Cell<u64>,
    /// per-ACK events of folding flows (sent before the kernel saw the command to fold)
    pub acks_folded_here: Cell<u64>,
    /// --check-fold: kernel reports compared with the daemon's fold of the same ACKs, and differing
    pub fold_checks: Cell<u64>,
    pub fold_mismatches: Cell<u64>,
    /// requests for a report at a flow's next ACK (REPORT_REQUEST_MAGIC), and those for no
    /// flow the kernel folds
    pub report_requests: Cell<u64>,
    pub report_requests_unserved: Cell<u64>,
}

pub fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}
