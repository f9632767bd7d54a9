//! Per-flow state libccp calls back into (set_cwnd / set_rate_abs): the flow's entry in
//! the BPF control map, written when a command changes it, and the log of when the
//! kernel applied each command (latency figures).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::Write;
use std::rc::Rc;

use libccp::CongestionOps;

use crate::counters::{bump, Counters};
use crate::bpf::{Ctl, Event, Maps, CTL_HAS_CWND, CTL_HAS_RATE};
use crate::writer::FileWriter;

/// A command written to the kernel whose application we wait to see (for latency figures).
struct PendingCmd {
    seq: u64,
    cwnd_bytes: u32,
    ipc_ns: u64,
    written_ns: u64,
}

/// Per-flow state libccp calls back into.
pub struct FlowCtl {
    pub(crate) sid: u32,
    pub(crate) maps: Rc<Maps>,
    pub(crate) counters: Rc<Counters>,
    pub(crate) applied: Rc<AppliedLog>,
    pub(crate) ctl: Ctl,
    /// What the kernel reported on the ACK being processed: libccp hands the
    /// registers back through set_cwnd / set_rate_abs after every program run.
    pub(crate) kernel_rate_bps: u64,
    pending: VecDeque<PendingCmd>,
    /// The kernel's per-ACK growth counter (Event::grown_pkts) on the ACK being processed,
    /// and the one a window set now is relative to: that ACK's for the program's own
    /// changes, the last report's for an agent command (it decided on that report).
    pub(crate) grown_now: u32,
    pub(crate) grown_basis: u32,
    /// The same for the kernel's loss counter (Event::lost_total_pkts): with own_recovery
    /// the kernel takes every packet lost after the basis off the window.
    pub(crate) lost_now: u32,
    pub(crate) lost_basis: u32,
    /// growth parameters changed since the last write
    pub(crate) dirty: bool,
    pub(crate) mss: u32,
}

impl FlowCtl {
    pub(crate) fn new(sid: u32, maps: Rc<Maps>, counters: Rc<Counters>, applied: Rc<AppliedLog>, ev: &Event) -> FlowCtl {
        FlowCtl {
            sid,
            maps,
            counters,
            applied,
            ctl: Ctl::default(),
            kernel_rate_bps: 0,
            pending: VecDeque::new(),
            grown_now: ev.grown_pkts,
            grown_basis: ev.grown_pkts,
            lost_now: ev.lost_total_pkts,
            lost_basis: ev.lost_total_pkts,
            dirty: false,
            mss: ev.mss.max(1),
        }
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The window in force by this daemon's command: the command plus the kernel's growth since.
    pub(crate) fn commanded_bytes(&self) -> u32 {
        let grown = self.grown_now.wrapping_sub(self.ctl.grown_base);
        let grown = if (grown as i32) > 0 { grown } else { 0 };
        let window = self.ctl.cwnd_bytes.saturating_add(grown.saturating_mul(self.mss));
        if self.ctl.own_recovery == 0 {
            return window;
        }
        let lost = self.lost_now.wrapping_sub(self.ctl.lost_base);
        let lost = if (lost as i32) > 0 { lost } else { 0 };
        window.saturating_sub(lost.saturating_mul(self.mss)).max(self.mss)
    }

    pub(crate) fn write(&mut self) {
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

    /// A report at the flow's next ACK, whatever the program's schedule: not a command (no
    /// seq, nothing for the kernel to apply), unless one is waiting to be written anyway.
    pub(crate) fn request_report(&mut self) {
        self.ctl.report_req = self.ctl.report_req.wrapping_add(1);
        if self.dirty {
            self.write();
        } else if self.maps.write_ctl(self.sid, &self.ctl).is_err() {
            bump(&self.counters.cmd_write_errors);
        }
    }

    /// The kernel says which command is in force: record the ones now applied.
    pub(crate) fn saw_applied(&mut self, applied_seq: u64, ts_ns: u64) {
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
            || (self.ctl.cwnd_bytes, self.ctl.grown_base, self.ctl.lost_base)
                == (cwnd_bytes, self.grown_basis, self.lost_basis))
        {
            return;
        }
        self.ctl.flags |= CTL_HAS_CWND;
        self.ctl.cwnd_bytes = cwnd_bytes;
        self.ctl.grown_base = self.grown_basis;
        self.ctl.lost_base = self.lost_basis;
        self.write();
    }

    fn set_rate_abs(&mut self, rate_bps: u32) {
        // The Rate register starts as the kernel's own pacing rate: echoing it back is
        // not a command. Pacing starts when the algorithm sets something else.
        // libccp carries rates as u32 (bytes/s) and truncates the kernel's u64: compare truncated.
        let rate = rate_bps as u64;
        if rate_bps == 0 {
            // Rate 0: no pacing command, the kernel paces as for its own CCAs. libccp never
            // passes a Rate of 0 here (it skips it), so an algorithm that does not pace lifts
            // the last one's rate with a rate no link reaches (ccp_algs/programs.UNPACED_RATE).
            if self.ctl.flags & CTL_HAS_RATE != 0 {
                self.ctl.flags &= !CTL_HAS_RATE;
                self.ctl.rate_bps = 0;
                self.write();
            }
            return;
        }
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

/// Optional CSV of commands and when the kernel applied them (latency benchmark). Lines
/// collect here and go to the file writer's thread (writer.rs) at each flush, or once
/// 64 KB wait: the control loop never writes to the disk itself.
pub struct AppliedLog {
    writer: Option<Rc<FileWriter>>,
    pending: RefCell<Vec<u8>>,
    /// daemon write -> kernel apply, most recent samples (ns)
    pub lat_ns: RefCell<VecDeque<u64>>,
    /// when the latest message from the agent arrived (CLOCK_MONOTONIC ns)
    pub last_ipc_ns: Cell<u64>,
}

const APPLIED_CHUNK_BYTES: usize = 64 << 10;

impl AppliedLog {
    /// `writer`: the thread that owns the log's file (None: no log, latencies only).
    pub fn new(writer: Option<Rc<FileWriter>>) -> AppliedLog {
        let pending = RefCell::new(if writer.is_some() {
            b"sid,seq,cwnd_bytes,ipc_ns,written_ns,applied_ns\n".to_vec()
        } else {
            Vec::new()
        });
        AppliedLog { writer, pending, lat_ns: RefCell::new(VecDeque::new()), last_ipc_ns: Cell::new(0) }
    }

    fn record(&self, sid: u32, p: &PendingCmd, applied_ns: u64) {
        let mut lat = self.lat_ns.borrow_mut();
        if lat.len() >= 10_000 {
            lat.pop_front();
        }
        lat.push_back(applied_ns.saturating_sub(p.written_ns));
        if self.writer.is_some() {
            let mut buf = self.pending.borrow_mut();
            let _ = writeln!(buf, "{sid},{},{},{},{},{applied_ns}", p.seq, p.cwnd_bytes, p.ipc_ns, p.written_ns);
            let full = buf.len() >= APPLIED_CHUNK_BYTES;
            drop(buf);
            if full {
                self.flush();
            }
        }
    }

    pub fn flush(&self) {
        if let Some(w) = &self.writer {
            w.append(std::mem::take(&mut *self.pending.borrow_mut()));
        }
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer; CLOCK_MONOTONIC is bpf_ktime_get_ns()'s clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
