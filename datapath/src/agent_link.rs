//! The daemon's way to the agent: the socket connected to it (and whether it is still
//! there), libccp's messages through it, and the report requests anyone may send.

use std::cell::Cell;
use std::os::unix::net::UnixDatagram;
use std::rc::Rc;

use libccp::DatapathOps;

use crate::agent_msg::{msg_header, MSG_CREATE, MSG_MEASURE};
use crate::contract;
use crate::counters::{bump, Counters};

/// A datagram asking for a report of libccp's flow `sid` at its next ACK
/// (contract::REPORT_REQUEST_MAGIC, then the sid). Sent by the agent's estimator when it has
/// a verdict, so the agent, which runs only in its callbacks, reads it within a round trip
/// rather than at the program's next report (one a millisecond at most, one a round trip at least).
pub fn parse_report_request(msg: &[u8]) -> Option<u32> {
    match msg {
        [m @ .., a, b, c, d] if m == contract::REPORT_REQUEST_MAGIC => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The socket connected to the agent, and whether the agent is still there.
pub(crate) struct AgentTx {
    /// connected: a send resolves no path (sendto to the agent's path walked the file
    /// system on every report: 12 % of the daemon's CPU under perf, 2026-11-29)
    pub(crate) sock: Rc<UnixDatagram>,
    pub(crate) lost: Rc<Cell<bool>>,
    pub(crate) counters: Rc<Counters>,
}

impl AgentTx {
    pub(crate) fn send(&self, msg: &[u8]) {
        match self.sock.send(msg) {
            Ok(_) => bump(&self.counters.ipc_sent),
            Err(e) => match e.raw_os_error() {
                // the socket connected to is closed (then the connection is gone): the agent is gone
                Some(libc::ECONNREFUSED) | Some(libc::ENOTCONN) => self.lost.set(true),
                _ => bump(&self.counters.ipc_send_dropped),
            },
        }
    }
}

/// libccp's way to the agent.
pub(crate) struct AgentLink {
    pub(crate) tx: Rc<AgentTx>,
    /// socket id in the latest CREATE message libccp sent: the id portus will use
    pub(crate) created_sid: Rc<Cell<Option<u32>>>,
    /// set when libccp sends a report (MEASURE): the program run being processed made one
    pub(crate) reported: Rc<Cell<bool>>,
    /// libccp runs a folding flow's program only to apply a command: its reports are not sent
    pub(crate) mute_reports: Rc<Cell<bool>>,
}

impl DatapathOps for AgentLink {
    fn send_msg(&mut self, msg: &[u8]) {
        match msg_header(msg) {
            Some((MSG_CREATE, sid)) => self.created_sid.set(Some(sid)),
            Some((MSG_MEASURE, _)) if self.mute_reports.get() => return,
            Some((MSG_MEASURE, _)) => self.reported.set(true),
            _ => {}
        }
        self.tx.send(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_request_parses_only_magic_and_sid() {
        let mut msg = contract::REPORT_REQUEST_MAGIC.to_vec();
        msg.extend_from_slice(&7u32.to_le_bytes());
        assert_eq!(parse_report_request(&msg), Some(7));
        assert_eq!(parse_report_request(&msg[..11]), None); // short
        msg.push(0);
        assert_eq!(parse_report_request(&msg), None); // long
        let mut other = b"INTCCRPX".to_vec();
        other.extend_from_slice(&7u32.to_le_bytes());
        assert_eq!(parse_report_request(&other), None);
    }
}
