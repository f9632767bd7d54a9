//! The userspace half of the datapath for one CCP agent connection: a libccp
//! `Datapath` speaking portus's unix-datagram IPC, one libccp `Connection` per
//! kernel flow, and the commands libccp issues (set_cwnd / set_rate_abs) written
//! into the BPF control map.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::rc::Rc;

use libccp::{Connection, CongestionOps, Datapath, DatapathBuilder, DatapathOps, FlowInfo, Primitives};

use crate::bpf::{Ctl, Event, Maps, CTL_HAS_CWND, CTL_HAS_RATE};
use crate::contract;

/// Daemon-wide counters (single-threaded: Cells).
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
}

pub fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Where the agent is and whether it is still there.
struct AgentLink {
    sock: Rc<UnixDatagram>,
    agent_path: PathBuf,
    lost: Rc<Cell<bool>>,
    counters: Rc<Counters>,
    /// socket id in the latest CREATE message libccp sent: the id portus will use
    created_sid: Rc<Cell<Option<u32>>>,
    /// set when libccp sends a report (MEASURE): the program run being processed made one
    reported: Rc<Cell<bool>>,
}

const MSG_CREATE: u16 = 0;
const MSG_MEASURE: u16 = 1;

/// (type, socket id) from a CCP message header: u16 type, u16 length, u32 socket id.
fn msg_header(msg: &[u8]) -> Option<(u16, u32)> {
    if msg.len() < 8 {
        return None;
    }
    Some((u16::from_ne_bytes([msg[0], msg[1]]), u32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]])))
}

impl DatapathOps for AgentLink {
    fn send_msg(&mut self, msg: &[u8]) {
        match msg_header(msg) {
            Some((MSG_CREATE, sid)) => self.created_sid.set(Some(sid)),
            Some((MSG_MEASURE, _)) => self.reported.set(true),
            _ => {}
        }
        match self.sock.send_to(msg, &self.agent_path) {
            Ok(_) => bump(&self.counters.ipc_sent),
            Err(e) => match e.raw_os_error() {
                // nobody bound there any more: the agent is gone
                Some(libc::ECONNREFUSED) | Some(libc::ENOENT) => self.lost.set(true),
                _ => bump(&self.counters.ipc_send_dropped),
            },
        }
    }
}

/// A command written to the kernel whose application we wait to see (for latency figures).
struct PendingCmd {
    seq: u64,
    cwnd_bytes: u32,
    ipc_ns: u64,
    written_ns: u64,
}

/// Per-flow state libccp calls back into.
pub struct FlowCtl {
    sid: u32,
    maps: Rc<Maps>,
    counters: Rc<Counters>,
    applied: Rc<AppliedLog>,
    ctl: Ctl,
    /// What the kernel reported on the ACK being processed: libccp hands the
    /// registers back through set_cwnd / set_rate_abs after every program run.
    kernel_rate_bps: u64,
    pending: VecDeque<PendingCmd>,
    /// The kernel's per-ACK growth counter (Event::grown_pkts) on the ACK being processed,
    /// and the one a window set now is relative to: that ACK's for the program's own
    /// changes, the last report's for an agent command (it decided on that report).
    grown_now: u32,
    grown_basis: u32,
    /// growth parameters changed since the last write
    dirty: bool,
    mss: u32,
}

impl FlowCtl {
    /// The window in force by this daemon's command: the command plus the kernel's growth since.
    fn commanded_bytes(&self) -> u32 {
        let grown = self.grown_now.wrapping_sub(self.ctl.grown_base);
        let grown = if (grown as i32) > 0 { grown } else { 0 };
        self.ctl.cwnd_bytes.saturating_add(grown.saturating_mul(self.mss))
    }

    fn write(&mut self) {
        self.dirty = false;
        self.ctl.seq += 1;
        match self.maps.write_ctl(self.sid, &self.ctl) {
            Ok(()) => {
                bump(&self.counters.cmds_written);
                if self.pending.len() < 1024 {
                    self.pending.push_back(PendingCmd {
                        seq: self.ctl.seq,
                        cwnd_bytes: self.ctl.cwnd_bytes,
                        ipc_ns: self.applied.last_ipc_ns.get(),
                        written_ns: monotonic_ns(),
                    });
                }
            }
            Err(_) => bump(&self.counters.cmd_write_errors),
        }
    }

    /// The kernel says which command is in force: record the ones now applied.
    fn saw_applied(&mut self, applied_seq: u64, ts_ns: u64) {
        while let Some(p) = self.pending.front() {
            if p.seq > applied_seq {
                break;
            }
            self.applied.record(self.sid, p, ts_ns);
            self.pending.pop_front();
        }
    }
}

impl CongestionOps for FlowCtl {
    fn set_cwnd(&mut self, cwnd_bytes: u32) {
        // Called after every program run with the Cwnd register, which starts as the window
        // in force (invoke): only a change (or the takeover) reaches the kernel.
        let has = self.ctl.flags & CTL_HAS_CWND != 0;
        if has && (cwnd_bytes == self.commanded_bytes()
            || (self.ctl.cwnd_bytes, self.ctl.grown_base) == (cwnd_bytes, self.grown_basis))
        {
            return;
        }
        self.ctl.flags |= CTL_HAS_CWND;
        self.ctl.cwnd_bytes = cwnd_bytes;
        self.ctl.grown_base = self.grown_basis;
        self.write();
    }

    fn set_rate_abs(&mut self, rate_bps: u32) {
        // The Rate register starts as the kernel's own pacing rate: echoing it back is
        // not a command. Pacing starts when the algorithm sets something else.
        // libccp carries rates as u32 (bytes/s) and truncates the kernel's u64: compare truncated.
        let rate = rate_bps as u64;
        if self.ctl.flags & CTL_HAS_RATE == 0 && rate_bps == self.kernel_rate_bps as u32 {
            return;
        }
        if self.ctl.flags & CTL_HAS_RATE != 0 && self.ctl.rate_bps == rate {
            return;
        }
        self.ctl.flags |= CTL_HAS_RATE;
        self.ctl.rate_bps = rate;
        self.write();
    }
}

/// Optional CSV of commands and when the kernel applied them (latency benchmark).
pub struct AppliedLog {
    out: RefCell<Option<std::io::BufWriter<std::fs::File>>>,
    /// daemon write -> kernel apply, most recent samples (ns)
    pub lat_ns: RefCell<VecDeque<u64>>,
    /// when the latest message from the agent arrived (CLOCK_MONOTONIC ns)
    pub last_ipc_ns: Cell<u64>,
}

impl AppliedLog {
    pub fn new(path: Option<&PathBuf>) -> std::io::Result<AppliedLog> {
        let out = match path {
            Some(p) => {
                let mut w = std::io::BufWriter::new(std::fs::File::create(p)?);
                writeln!(w, "sid,seq,cwnd_bytes,ipc_ns,written_ns,applied_ns")?;
                Some(w)
            }
            None => None,
        };
        Ok(AppliedLog { out: RefCell::new(out), lat_ns: RefCell::new(VecDeque::new()), last_ipc_ns: Cell::new(0) })
    }

    fn record(&self, sid: u32, p: &PendingCmd, applied_ns: u64) {
        let mut lat = self.lat_ns.borrow_mut();
        if lat.len() >= 10_000 {
            lat.pop_front();
        }
        lat.push_back(applied_ns.saturating_sub(p.written_ns));
        if let Some(w) = self.out.borrow_mut().as_mut() {
            let _ = writeln!(w, "{sid},{},{},{},{},{applied_ns}", p.seq, p.cwnd_bytes, p.ipc_ns, p.written_ns);
        }
    }

    pub fn flush(&self) {
        if let Some(w) = self.out.borrow_mut().as_mut() {
            let _ = w.flush();
        }
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer; CLOCK_MONOTONIC is bpf_ktime_get_ns()'s clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a flow looked like when it was announced (for flows.json).
#[derive(Clone)]
pub struct FlowMeta {
    pub sid: u32,
    pub event: Event,
    /// the 32-bit addresses libccp's create message carries (IPv6: the low 32 bits)
    pub ccp_src_ip: u32,
    pub ccp_dst_ip: u32,
}

fn ccp_ip(family: u32, raw: &[u8; 16]) -> u32 {
    let b = if family == crate::bpf::AF_INET6 { &raw[12..16] } else { &raw[0..4] };
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

struct Flow {
    // 'static is a lie told to libccp's borrow: Session keeps the Datapath alive and
    // drops every Connection before it (field order).
    conn: Connection<'static, FlowCtl>,
    meta: FlowMeta,
    /// libccp's socket id for it (portus's sock_id)
    ccp_sid: u32,
    /// the latest primitives, replayed as an empty ACK to apply a command at once
    last: Event,
    /// an RTO / recovery (BPF hold_id) whose report the agent has, not yet answered
    awaiting_answer: Option<u32>,
    /// the kernel's growth counter on the ACK of the latest report sent to the agent
    reported_grown: u32,
    /// ... when the flow was announced: the agent is told the growth since
    grown_at_create: u32,
    /// the agent's contract_version register matched ours: its control registers are
    /// the contract's (ccp_algs/contract.py)
    contract: bool,
}

const MSG_UPDATE_FIELDS: u16 = 3;
const MSG_CHANGE_PROG: u16 = 4;

/// One connected agent: libccp state and its flows.
pub struct Session {
    flows: HashMap<u32, Flow>,
    /// libccp socket id -> our BPF socket id (agent messages name the former)
    by_ccp_sid: HashMap<u32, u32>,
    created_sid: Rc<Cell<Option<u32>>>,
    reported: Rc<Cell<bool>>,
    dp: Box<Datapath>,
    pub lost: Rc<Cell<bool>>,
    maps: Rc<Maps>,
    counters: Rc<Counters>,
    applied: Rc<AppliedLog>,
}

impl Session {
    pub fn start(
        sock: Rc<UnixDatagram>,
        agent_path: PathBuf,
        maps: Rc<Maps>,
        counters: Rc<Counters>,
        applied: Rc<AppliedLog>,
    ) -> Result<Session, String> {
        let lost = Rc::new(Cell::new(false));
        let created_sid = Rc::new(Cell::new(None));
        let reported = Rc::new(Cell::new(false));
        let link = AgentLink {
            sock,
            agent_path,
            lost: lost.clone(),
            counters: counters.clone(),
            created_sid: created_sid.clone(),
            reported: reported.clone(),
        };
        // init sends READY: the agent answers by installing its datapath programs.
        let dp = DatapathBuilder::default()
            .with_ops(link)
            .with_id(0)
            .init()
            .map_err(|e| format!("libccp init: {e:?}"))?;
        bump(&counters.agent_sessions);
        Ok(Session {
            flows: HashMap::new(),
            by_ccp_sid: HashMap::new(),
            created_sid,
            reported,
            dp: Box::new(dp),
            lost,
            maps,
            counters,
            applied,
        })
    }

    pub fn on_create(&mut self, ev: &Event) {
        bump(&self.counters.creates);
        self.remove(ev.sid); // re-announced: start afresh
        let ccp_src_ip = ccp_ip(ev.family, &ev.src_addr);
        let ccp_dst_ip = ccp_ip(ev.family, &ev.dst_addr);
        let info = FlowInfo::default()
            .with_init_cwnd(ev.init_cwnd_bytes)
            .with_mss(ev.mss)
            .with_four_tuple(ccp_src_ip, ev.src_port as u32, ccp_dst_ip, ev.dst_port as u32);
        let ctl = FlowCtl {
            sid: ev.sid,
            maps: self.maps.clone(),
            counters: self.counters.clone(),
            applied: self.applied.clone(),
            ctl: Ctl::default(),
            kernel_rate_bps: 0,
            pending: VecDeque::new(),
            grown_now: ev.grown_pkts,
            grown_basis: ev.grown_pkts,
            dirty: false,
            mss: ev.mss.max(1),
        };
        // SAFETY: see `Flow::conn`; the Box gives the Datapath a stable address.
        let dp: &'static Datapath = unsafe { &*(self.dp.as_ref() as *const Datapath) };
        self.created_sid.set(None);
        match Connection::start(dp, ctl, info) {
            Ok(conn) => {
                // start() sends CREATE synchronously: its header carries libccp's id
                let ccp_sid = self.created_sid.get().unwrap_or(0);
                self.by_ccp_sid.insert(ccp_sid, ev.sid);
                let meta = FlowMeta { sid: ev.sid, event: *ev, ccp_src_ip, ccp_dst_ip };
                let mut last = *ev;
                last.snd_cwnd_bytes = ev.init_cwnd_bytes;
                let flow = Flow {
                    conn,
                    meta,
                    ccp_sid,
                    last,
                    awaiting_answer: None,
                    reported_grown: ev.grown_pkts,
                    grown_at_create: ev.grown_pkts,
                    contract: false,
                };
                self.flows.insert(ev.sid, flow);
            }
            Err(e) => eprintln!("intcc-datapath: flow {} not taken over: {e:?}", ev.sid),
        }
    }

    pub fn on_measure(&mut self, ev: &Event) {
        bump(&self.counters.measures);
        let Some(flow) = self.flows.get_mut(&ev.sid) else {
            bump(&self.counters.measures_unknown_flow);
            return;
        };
        flow.conn.kernel_rate_bps = ev.snd_rate_bps;
        if !flow.conn.pending.is_empty() {
            flow.conn.saw_applied(ev.applied_seq, ev.ts_ns);
        }
        let new_hold = ev.hold_id != flow.last.hold_id;
        flow.last = *ev;
        flow.conn.mss = ev.mss.max(1);
        flow.conn.grown_now = ev.grown_pkts;
        flow.conn.grown_basis = ev.grown_pkts;
        self.reported.set(false);
        if invoke(flow, ev).is_err() {
            bump(&self.counters.invoke_errors);
        }
        if self.reported.get() {
            flow.reported_grown = ev.grown_pkts;
        }
        if new_hold {
            // the program reports at once on a loss or an RTO: the agent's next command answers it
            flow.awaiting_answer = Some(ev.hold_id);
        }
    }

    fn remove(&mut self, sid: u32) -> bool {
        match self.flows.remove(&sid) {
            Some(f) => {
                self.by_ccp_sid.remove(&f.ccp_sid);
                true // dropping the Connection freed libccp's slot and told the agent
            }
            None => false,
        }
    }
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
fn invoke(flow: &mut Flow, ev: &Event) -> Result<(), libccp::LibccpError> {
    {
        let ctl = &flow.conn.ctl;
        let commanded = ev.undo_cwnd_bytes == 0 && ctl.flags & CTL_HAS_CWND != 0;
        let snd_cwnd = if commanded { flow.conn.commanded_bytes() } else { ev.snd_cwnd_bytes };
        let prims = Primitives::default()
            .with_bytes_acked(ev.bytes_acked)
            .with_packets_acked(ev.packets_acked)
            .with_bytes_misordered(ev.reductions)
            .with_packets_misordered(ev.packets_misordered)
            .with_ecn_bytes(ev.undo_cwnd_bytes)
            .with_ecn_packets(ev.ecn_packets)
            .with_lost_pkts_sample(ev.lost_pkts_sample)
            .with_was_timeout(ev.was_timeout != 0)
            .with_rtt_sample_us(ev.rtt_sample_us as u64)
            .with_rate_outgoing(ev.rate_outgoing_bps)
            .with_rate_incoming(ev.rate_incoming_bps)
            .with_bytes_in_flight(ev.bytes_in_flight)
            .with_packets_in_flight(ev.packets_in_flight)
            .with_snd_cwnd(snd_cwnd)
            .with_snd_rate(ev.snd_rate_bps)
            .with_bytes_pending(ev.grown_pkts.wrapping_sub(flow.grown_at_create));
        flow.conn.load_primitives(prims);
    }
    flow.conn.invoke()
}

/// Control registers an intcc algorithm declares first, in the contract's order
/// (ccp_algs/contract.py; libccp keeps no names: portus numbers control registers in
/// declaration order). The kernel's per-ACK growth and its ssthresh take them from the
/// agent's updates once the agent's contract_version register has matched ours: a
/// program whose first registers mean something else, or an agent of another version,
/// never steers the kernel by chance (a mismatch is counted and logged).
const REG_NONVOLATILE_CONTROL: u8 = 0;
const REG_VOLATILE_CONTROL: u8 = 8;
const UPDATE_FIELD_LEN: usize = 13; // u8 type, u32 index, u64 value, packed

/// The (control register, value) pairs of an UpdateFields or ChangeProg message.
fn control_updates(kind: u16, msg: &[u8]) -> Vec<(u32, u32)> {
    // UpdateFieldsMsg: header, u32 count; ChangeProgMsg: header, u32 program uid, u32 count
    let count_at = if kind == MSG_UPDATE_FIELDS { 8 } else { 12 };
    let Some(count) = msg.get(count_at..count_at + 4) else { return Vec::new() };
    let count = u32::from_ne_bytes([count[0], count[1], count[2], count[3]]) as usize;
    let mut updates = Vec::with_capacity(count.min(64));
    for i in 0..count.min(64) {
        let at = count_at + 4 + i * UPDATE_FIELD_LEN;
        let Some(f) = msg.get(at..at + UPDATE_FIELD_LEN) else { break };
        if f[0] != REG_NONVOLATILE_CONTROL && f[0] != REG_VOLATILE_CONTROL {
            continue;
        }
        let index = u32::from_ne_bytes([f[1], f[2], f[3], f[4]]);
        let value = u64::from_ne_bytes([f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12]]);
        updates.push((index, value.min(u32::MAX as u64) as u32));
    }
    updates
}

/// Apply the contract's registers in an agent message to a flow's control entry;
/// `accepted`: the flow's agent has announced our contract version. Err: it announced
/// another one.
fn take_contract_registers(accepted: &mut bool, ctl: &mut Ctl, updates: &[(u32, u32)]) -> Result<(), u32> {
    if let Some(&(_, version)) = updates.iter().find(|&&(i, _)| i == contract::REG_CONTRACT_VERSION) {
        *accepted = version == contract::CONTRACT_VERSION;
        if !*accepted {
            return Err(version);
        }
    }
    if *accepted {
        for &(index, value) in updates {
            contract::set_ctl_register(ctl, index, value);
        }
    }
    Ok(())
}

impl Session {
    pub fn on_close(&mut self, sid: u32) {
        if self.remove(sid) {
            bump(&self.counters.closes);
        }
    }

    /// A message from the agent (install, update_field, change_prog).
    pub fn on_ipc(&mut self, msg: &mut [u8]) {
        bump(&self.counters.ipc_received);
        if self.dp.recv_msg(msg).is_err() {
            bump(&self.counters.ipc_rejected);
            return;
        }
        // libccp stages a command until the flow's next ACK. Apply it now instead,
        // by running the program on an empty ACK (no bytes, no losses: the flow's
        // last state), so a command reaches the kernel without waiting for traffic.
        let Some((kind, ccp_sid)) = msg_header(msg) else { return };
        if kind != MSG_UPDATE_FIELDS && kind != MSG_CHANGE_PROG {
            return;
        }
        let Some(&sid) = self.by_ccp_sid.get(&ccp_sid) else { return };
        if let Some(flow) = self.flows.get_mut(&sid) {
            let before = flow.conn.ctl;
            let taken = take_contract_registers(&mut flow.contract, &mut flow.conn.ctl, &control_updates(kind, msg));
            if flow.conn.ctl != before {
                flow.conn.dirty = true;
            }
            if let Err(theirs) = taken {
                bump(&self.counters.contract_mismatches);
                if self.counters.contract_mismatches.get() == 1 {
                    eprintln!(
                        "intcc-datapath: the agent speaks contract version {theirs}, this datapath {}: \
                         its flows get the window it sets but no per-ACK growth and Reno's ssthresh \
                         (rebuild with 'make setup' and restart both)",
                        contract::CONTRACT_VERSION
                    );
                }
            }
            // a window the agent sets was decided on its latest report
            flow.conn.grown_now = flow.last.grown_pkts;
            flow.conn.grown_basis = flow.reported_grown;
            let mut empty = flow.last;
            empty.bytes_acked = 0;
            empty.packets_acked = 0;
            empty.bytes_misordered = 0;
            empty.packets_misordered = 0;
            empty.ecn_packets = 0;
            empty.lost_pkts_sample = 0;
            empty.was_timeout = 0;
            empty.undo_cwnd_bytes = 0;
            bump(&self.counters.ipc_applied_at_once);
            self.reported.set(false);
            if invoke(flow, &empty).is_err() {
                bump(&self.counters.invoke_errors);
            }
            if self.reported.get() {
                flow.reported_grown = flow.last.grown_pkts;
            }
            if flow.conn.dirty && flow.conn.ctl.flags & CTL_HAS_CWND != 0 {
                flow.conn.write(); // growth parameters alone changed
            }
            // The agent's answer to an RTO or a loss ends the kernel's own response to it
            // (rto_hold, cut_hold in the BPF program), even a window it kept unchanged.
            if let Some(hold) = flow.awaiting_answer.take() {
                if flow.conn.ctl.flags & CTL_HAS_CWND != 0 {
                    flow.conn.ctl.answered_hold = hold;
                    flow.conn.write();
                    bump(&self.counters.holds_answered);
                }
            }
        }
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    pub fn flows(&self) -> impl Iterator<Item = &FlowMeta> {
        self.flows.values().map(|f| &f.meta)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.flows.clear(); // every Connection before the Datapath it points into
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update_fields_msg(fields: &[(u8, u32, u64)]) -> Vec<u8> {
        let mut m = vec![0u8; 8];
        m[0..2].copy_from_slice(&MSG_UPDATE_FIELDS.to_ne_bytes());
        m.extend_from_slice(&(fields.len() as u32).to_ne_bytes());
        for &(kind, index, value) in fields {
            m.push(kind);
            m.extend_from_slice(&index.to_ne_bytes());
            m.extend_from_slice(&value.to_ne_bytes());
        }
        m
    }

    #[test]
    fn registers_count_only_after_the_agent_announced_our_contract() {
        let ss = contract::REG_SS_UNTIL;
        let beta = contract::REG_LOSS_BETA;
        let (mut accepted, mut ctl) = (false, Ctl::default());
        // no version announced: nothing steers the kernel
        let m = update_fields_msg(&[(REG_NONVOLATILE_CONTROL, ss, 30000)]);
        assert_eq!(take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)), Ok(()));
        assert_eq!(ctl.ss_until_bytes, 0);
        // another version: refused and named
        let v = contract::REG_CONTRACT_VERSION;
        let m = update_fields_msg(&[(0, v, 1), (0, ss, 30000), (0, beta, 717)]);
        assert_eq!(take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)), Err(1));
        assert_eq!((ctl.ss_until_bytes, ctl.loss_beta_1024), (0, 0));
        // ours: taken, by position, and later updates without the version too
        let m = update_fields_msg(&[(0, v, contract::CONTRACT_VERSION as u64), (0, ss, 30000), (0, beta, 717)]);
        assert_eq!(take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)), Ok(()));
        assert_eq!((ctl.ss_until_bytes, ctl.loss_beta_1024), (30000, 717));
        let m = update_fields_msg(&[(REG_VOLATILE_CONTROL, ss, 0), (4 /* a report register */, ss, 9)]);
        take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)).unwrap();
        assert_eq!(ctl.ss_until_bytes, 0);
    }

    #[test]
    fn a_truncated_message_yields_the_whole_fields_only() {
        let m = update_fields_msg(&[(0, 3, 7), (0, 4, 8)]);
        assert_eq!(control_updates(MSG_UPDATE_FIELDS, &m[..m.len() - 1]), vec![(3, 7)]);
        assert!(control_updates(MSG_UPDATE_FIELDS, &m[..6]).is_empty());
    }
}
