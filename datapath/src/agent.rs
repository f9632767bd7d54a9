//! The userspace half of the datapath for one CCP agent connection: a libccp
//! `Datapath` speaking portus's unix-datagram IPC, one libccp `Connection` per
//! kernel flow, and the commands libccp issues (set_cwnd / set_rate_abs) written
//! into the BPF control map.

use std::cell::Cell;
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::rc::Rc;

use libccp::{Connection, Datapath, DatapathBuilder, FlowInfo};

use crate::agent_msg::{control_updates, msg_header, take_contract_registers, MSG_CHANGE_PROG, MSG_INSTALL_EXPR,
                       MSG_UPDATE_FIELDS};
use crate::bpf::{Event, Maps, CTL_HAS_CWND};
use crate::contract;
use crate::fold::{install_fingerprint, Fold};
pub use crate::flowctl::{monotonic_ns, AppliedLog};
use crate::counters::{bump, Counters};
use crate::flowctl::FlowCtl;
use crate::agent_link::{AgentLink, AgentTx};
pub use crate::flow::FlowMeta;
use crate::flow::{ccp_ip, compare_folds, invoke, next_fold_gen, send_report, Flow};
pub use crate::agent_link::parse_report_request;

/// One connected agent: libccp state and its flows.
pub struct Session {
    flows: HashMap<u32, Flow>,
    /// installed programs (uid) -> the kernel folds it
    programs: HashMap<u32, bool>,
    /// fold in libccp on an event per ACK, whatever the program (tracing, comparisons)
    per_ack_events: bool,
    tx: Rc<AgentTx>,
    mute_reports: Rc<Cell<bool>>,
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
    /// ``sock``: connected to the agent's socket.
    pub fn start(
        sock: Rc<UnixDatagram>,
        maps: Rc<Maps>,
        counters: Rc<Counters>,
        applied: Rc<AppliedLog>,
        per_ack_events: bool,
    ) -> Result<Session, String> {
        let lost = Rc::new(Cell::new(false));
        let created_sid = Rc::new(Cell::new(None));
        let reported = Rc::new(Cell::new(false));
        let mute_reports = Rc::new(Cell::new(false));
        let tx = Rc::new(AgentTx { sock, lost: lost.clone(), counters: counters.clone() });
        let link = AgentLink {
            tx: tx.clone(),
            created_sid: created_sid.clone(),
            reported: reported.clone(),
            mute_reports: mute_reports.clone(),
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
            programs: HashMap::new(),
            per_ack_events,
            tx,
            mute_reports,
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
        let ctl = FlowCtl::new(ev.sid, self.maps.clone(), self.counters.clone(), self.applied.clone(), ev);
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
                    reported_lost: ev.lost_total_pkts,
                    grown_at_create: ev.grown_pkts,
                    contract: false,
                    program_uid: 0,
                    kernel_folds: false,
                    folded_here: None,
                    check: None,
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
        let new_hold = flow.take_state(ev);
        if flow.kernel_folds {
            // sent before the kernel saw the command to fold: it goes into the next report,
            // or at once on a loss, a timeout or an undo, as the program would
            bump(&self.counters.acks_folded_here);
            let here = flow.folded_here.get_or_insert_with(Fold::default);
            here.add(ev);
            if here.has_event() {
                let mut fields = here.r;
                flow.folded_here = None;
                send_report(&self.tx, &self.counters, flow, ev, &mut fields);
            }
            if new_hold {
                flow.awaiting_answer = Some(ev.hold_id);
            }
            return;
        }
        self.reported.set(false);
        if invoke(flow, ev).is_err() {
            bump(&self.counters.invoke_errors);
        }
        if self.reported.get() {
            flow.reported_grown = ev.grown_pkts;
            flow.reported_lost = ev.lost_total_pkts;
        }
        if new_hold {
            // the program reports at once on a loss or an RTO: the agent's next command answers it
            flow.awaiting_answer = Some(ev.hold_id);
        }
    }

    /// A report of the kernel's fold: to the agent, as libccp would have sent it.
    pub fn on_report(&mut self, ev: &Event) {
        let Some(flow) = self.flows.get_mut(&ev.sid) else {
            bump(&self.counters.measures_unknown_flow);
            return;
        };
        if !flow.kernel_folds {
            bump(&self.counters.kernel_reports_stale);
            return;
        }
        let new_hold = flow.take_state(ev);
        if let Some(check) = flow.check.take() {
            compare_folds(&self.counters, &check, ev);
        }
        let mut fields = ev.report_fields;
        if let Some(earlier) = flow.folded_here.take() {
            earlier.merge_before(&mut fields);
        }
        send_report(&self.tx, &self.counters, flow, ev, &mut fields);
        if new_hold {
            flow.awaiting_answer = Some(ev.hold_id);
        }
    }

    /// --check-fold: an ACK the kernel folded, folded here too.
    pub fn on_folded_ack(&mut self, ev: &Event) {
        if let Some(flow) = self.flows.get_mut(&ev.sid) {
            flow.check.get_or_insert_with(Fold::default).add(ev);
        }
    }

    /// A folding flow's kernel applied a command (latency figures).
    pub fn on_applied(&mut self, ev: &Event) {
        if let Some(flow) = self.flows.get_mut(&ev.sid) {
            if flow.conn.has_pending() {
                flow.conn.saw_applied(ev.applied_seq, ev.ts_ns);
            }
        }
    }

    /// A report at the next ACK of libccp's flow `ccp_sid`; false: no such flow, or one whose
    /// program libccp runs here (it reports on its own schedule).
    pub fn request_report(&mut self, ccp_sid: u32) -> bool {
        let Some(flow) = self.by_ccp_sid.get(&ccp_sid).and_then(|sid| self.flows.get_mut(sid)) else {
            return false;
        };
        if !flow.kernel_folds {
            return false;
        }
        flow.conn.request_report();
        true
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
        if kind == MSG_INSTALL_EXPR {
            self.on_install(msg);
            return;
        }
        if kind != MSG_UPDATE_FIELDS && kind != MSG_CHANGE_PROG {
            return;
        }
        let Some(&sid) = self.by_ccp_sid.get(&ccp_sid) else { return };
        if let Some(flow) = self.flows.get_mut(&sid) {
            let before = flow.conn.ctl;
            if kind == MSG_CHANGE_PROG && msg.len() >= 12 {
                // libccp restarts the program's registers: so does the kernel's fold
                flow.program_uid = u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]);
                flow.kernel_folds = !self.per_ack_events && self.programs.get(&flow.program_uid) == Some(&true);
                flow.folded_here = None;
                flow.conn.ctl.fold_gen = if flow.kernel_folds { next_fold_gen() } else { 0 };
            }
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
            flow.conn.lost_now = flow.last.lost_total_pkts;
            flow.conn.lost_basis = flow.reported_lost;
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
            self.mute_reports.set(flow.kernel_folds);
            if invoke(flow, &empty).is_err() {
                bump(&self.counters.invoke_errors);
            }
            self.mute_reports.set(false);
            if self.reported.get() {
                flow.reported_grown = flow.last.grown_pkts;
                flow.reported_lost = flow.last.lost_total_pkts;
            }
            if flow.conn.dirty && (flow.conn.ctl.flags & CTL_HAS_CWND != 0 || flow.conn.ctl.fold_gen != before.fold_gen) {
                flow.conn.write(); // growth parameters or the fold alone changed
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

    /// An installed program: the kernel folds it if it is the one it knows.
    fn on_install(&mut self, msg: &[u8]) {
        let Some((uid, fingerprint)) = install_fingerprint(msg) else { return };
        let known = fingerprint == contract::NATIVE_FOLD_FINGERPRINT;
        self.programs.insert(uid, known);
        if self.per_ack_events {
            eprintln!("intcc-datapath: program {uid}: an event per ACK, folded in libccp (--per-ack-events)");
        } else if known {
            eprintln!("intcc-datapath: program {uid}: folded in the kernel, reports only");
        } else {
            eprintln!(
                "intcc-datapath: program {uid} (fingerprint {fingerprint:#x}) is not the one the kernel folds \
                 ({:#x}, programs.REPORT_PER_RTT_AND_ON_LOSS): an event per ACK, folded in libccp",
                contract::NATIVE_FOLD_FINGERPRINT
            );
        }
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    pub fn flows(&self) -> impl Iterator<Item = &FlowMeta> {
        self.flows.values().map(|f| &f.meta)
    }

    pub fn folding_flow_count(&self) -> usize {
        self.flows.values().filter(|f| f.kernel_folds).count()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.flows.clear(); // every Connection before the Datapath it points into
    }
}
