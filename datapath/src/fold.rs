//! The daemon's side of the kernel's fold (bpf/intcc_ccp_fold.h): which installed program
//! the kernel folds (by its compiled form), the ACKs the kernel still sent one by one after
//! it was told to fold (folded here and added to its first report), and the measure
//! message the agent gets for a kernel report, as libccp's.

use libccp::Primitives;

use crate::bpf::Event;
use crate::contract::REPORT_FIELDS;

/// The program's Report registers (programs.REPORT_PER_RTT_AND_ON_LOSS), in declaration order.
pub const R_ACKED: usize = 0;
pub const R_SACKED: usize = 1;
pub const R_LOSS: usize = 2;
pub const R_TIMEOUT: usize = 3;
pub const R_RTT: usize = 4;
pub const R_MINRTT: usize = 5;
pub const R_INFLIGHT: usize = 6;
pub const R_EXTRA_ACKED: usize = 7;
pub const R_UNDO: usize = 8;
pub const R_RTO_ACKED: usize = 9;
pub const R_DELIVERED: usize = 10;
pub const R_RTO_DELIVERED: usize = 11;
pub const R_GROWN: usize = 12;
pub const R_REDUCTIONS: usize = 13;
pub const R_BW_MAX: usize = 14;
pub const R_DELIVERED_ALL: usize = 15;
const _: () = assert!(REPORT_FIELDS == 16);
pub const REPORT_FIELD_NAMES: [&str; REPORT_FIELDS] = [
    "acked", "sacked", "loss", "timeout", "rtt", "minrtt", "inflight", "extra_acked", "undo", "rto_acked",
    "delivered", "rto_delivered", "grown", "reductions", "bw_max", "delivered_all",
];

pub const NO_RTT_SAMPLE: u64 = 2147483647;
const MSG_MEASURE: u16 = 1;

/// (program uid, FNV-1a 64 of what follows the uid) of an install message: portus's
/// compiled program, the same bytes for the same program text.
pub fn install_fingerprint(msg: &[u8]) -> Option<(u32, u64)> {
    let len = u16::from_ne_bytes([*msg.get(2)?, *msg.get(3)?]) as usize;
    let body = msg.get(12..len.min(msg.len()))?;
    let uid = u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]);
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in body {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    Some((uid, h))
}

/// libccp's measure message: header (u16 type, u16 length, u32 socket id), u32 program uid,
/// u32 field count, the fields.
pub fn measure_msg(ccp_sid: u32, program_uid: u32, fields: &[u64; REPORT_FIELDS]) -> Vec<u8> {
    let len = 8 + 8 + 8 * REPORT_FIELDS;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&MSG_MEASURE.to_ne_bytes());
    m.extend_from_slice(&(len as u16).to_ne_bytes());
    m.extend_from_slice(&ccp_sid.to_ne_bytes());
    m.extend_from_slice(&program_uid.to_ne_bytes());
    m.extend_from_slice(&(REPORT_FIELDS as u32).to_ne_bytes());
    for f in fields {
        m.extend_from_slice(&f.to_ne_bytes());
    }
    m
}

/// The fold of the ACKs a folding flow's kernel still sent as events (it had not seen the
/// command to fold yet, or had no memory for its fold), as bpf/intcc_ccp_fold.h folds them.
#[derive(Clone, Debug, PartialEq)]
pub struct Fold {
    pub r: [u64; REPORT_FIELDS],
}

impl Default for Fold {
    fn default() -> Fold {
        let mut r = [0; REPORT_FIELDS];
        r[R_MINRTT] = NO_RTT_SAMPLE;
        Fold { r }
    }
}

impl Fold {
    pub fn add(&mut self, ev: &Event) {
        let r = &mut self.r;
        if ev.was_timeout != 0 {
            r[R_RTO_ACKED] = ev.bytes_acked as u64;
            if ev.bytes_acked > 0 {
                r[R_RTO_DELIVERED] = ev.packets_acked as u64;
            }
        }
        r[R_INFLIGHT] = ev.packets_in_flight as u64;
        r[R_RTT] = ev.rtt_sample_us as u64;
        r[R_MINRTT] = r[R_MINRTT].min(ev.rtt_sample_us as u64);
        r[R_EXTRA_ACKED] = r[R_EXTRA_ACKED].max(ev.extra_acked_pkts as u64);
        r[R_BW_MAX] = r[R_BW_MAX].max(ev.rate_incoming_bps);
        r[R_DELIVERED_ALL] += ev.packets_acked as u64;
        r[R_ACKED] += ev.bytes_acked as u64;
        r[R_SACKED] = ev.packets_misordered as u64;
        r[R_LOSS] += ev.lost_pkts_sample as u64;
        r[R_TIMEOUT] |= (ev.was_timeout != 0) as u64;
        r[R_UNDO] = r[R_UNDO].max(ev.undo_cwnd_bytes as u64);
        r[R_GROWN] = ev.grown_pkts as u64;
        r[R_REDUCTIONS] = ev.reductions as u64;
        if ev.bytes_acked > 0 {
            r[R_DELIVERED] += ev.packets_acked as u64;
        }
    }

    /// A loss, a timeout or an undo: the program reports at once.
    pub fn has_event(&self) -> bool {
        self.r[R_TIMEOUT] != 0 || self.r[R_LOSS] > 0 || self.r[R_UNDO] > 0
    }

    /// These ACKs came before the ones in `later` (a kernel report): one report of both.
    pub fn merge_before(&self, later: &mut [u64; REPORT_FIELDS]) {
        let r = &self.r;
        for i in [R_ACKED, R_LOSS, R_DELIVERED, R_DELIVERED_ALL] {
            later[i] += r[i];
        }
        for i in [R_EXTRA_ACKED, R_UNDO, R_BW_MAX, R_TIMEOUT] {
            later[i] = later[i].max(r[i]);
        }
        later[R_MINRTT] = later[R_MINRTT].min(r[R_MINRTT]);
        if r[R_TIMEOUT] != 0 && later[R_RTO_ACKED] == 0 && later[R_RTO_DELIVERED] == 0 {
            later[R_RTO_ACKED] = r[R_RTO_ACKED];
            later[R_RTO_DELIVERED] = r[R_RTO_DELIVERED];
        }
        // the others are the latest ACK's: later's
    }
}

/// An ACK's event as libccp's primitives (what they carry on this datapath: see invoke).
pub(crate) fn primitives(ev: &Event, snd_cwnd: u32, grown_since_create: u32) -> Primitives {
    Primitives::default()
        .with_bytes_acked(ev.bytes_acked)
        .with_packets_acked(ev.packets_acked)
        .with_bytes_misordered(ev.reductions)
        .with_packets_misordered(ev.packets_misordered)
        .with_ecn_bytes(ev.undo_cwnd_bytes)
        .with_ecn_packets(ev.ecn_packets)
        .with_lost_pkts_sample(ev.lost_pkts_sample)
        .with_was_timeout(ev.was_timeout != 0)
        .with_rtt_sample_us(ev.rtt_sample_us as u64)
        .with_rate_outgoing(ev.extra_acked_pkts as u64) // SIGNALS["extra_acked"]
        .with_rate_incoming(ev.rate_incoming_bps)
        .with_bytes_in_flight(ev.bytes_in_flight)
        .with_packets_in_flight(ev.packets_in_flight)
        .with_snd_cwnd(snd_cwnd)
        .with_snd_rate(ev.snd_rate_bps)
        .with_bytes_pending(grown_since_create)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    use libccp::{Connection, CongestionOps, DatapathBuilder, DatapathOps, FlowInfo};

    use crate::agent_msg::{msg_header, MSG_CHANGE_PROG, MSG_CREATE, MSG_MEASURE};
    use crate::contract::NATIVE_FOLD_FINGERPRINT;

    struct Sent(Rc<RefCell<Vec<Vec<u8>>>>);

    impl DatapathOps for Sent {
        fn send_msg(&mut self, msg: &[u8]) {
            self.0.borrow_mut().push(msg.to_vec());
        }
    }

    struct NoCommands;

    impl CongestionOps for NoCommands {
        fn set_cwnd(&mut self, _: u32) {}
        fn set_rate_abs(&mut self, _: u32) {}
    }

    /// An ACK of a lossy flow, varied by its number.
    fn nth_ack(i: u32) -> Event {
        let pkts = 1 + i % 3;
        let sack_only = i % 11 == 5;
        Event {
            bytes_acked: if sack_only { 0 } else { pkts * 1448 },
            packets_acked: pkts,
            packets_misordered: i % 7,
            lost_pkts_sample: (i % 37 == 0) as u32 + (i % 111 == 0) as u32,
            was_timeout: (i % 401 == 400) as u32,
            undo_cwnd_bytes: if i % 523 == 522 { 20 * 1448 } else { 0 },
            rtt_sample_us: 20_000 + (i * 7919) % 5000,
            packets_in_flight: 10 + i % 50,
            extra_acked_pkts: (i * 31) % 13,
            rate_incoming_bps: 1_000_000 + ((i as u64 * 104_729) % 400_000),
            grown_pkts: i / 3,
            reductions: i / 37,
            ..Default::default()
        }
    }

    /// The installed program as libccp runs it (the fixture a real agent sent,
    /// fixtures/capture_install.py) reports, field by field, what Fold folds: Fold is
    /// bpf/intcc_ccp_fold.h's fold (--check-fold compares the two on real flows).
    #[test]
    fn libccp_running_the_agents_program_reports_what_the_fold_folds() {
        let mut install = include_bytes!("../fixtures/report_per_rtt_install.bin").to_vec();
        let (uid, fingerprint) = install_fingerprint(&install).unwrap();
        assert_eq!(fingerprint, NATIVE_FOLD_FINGERPRINT,
                   "the fixture is not the program the kernel folds: recapture it and re-pin the fingerprint");
        let sent = Rc::new(RefCell::new(Vec::new()));
        let dp = DatapathBuilder::default().with_ops(Sent(sent.clone())).with_id(0).init().unwrap();
        dp.recv_msg(&mut install).unwrap();
        let info = FlowInfo::default().with_init_cwnd(14480).with_mss(1448).with_four_tuple(1, 2, 3, 4);
        let mut conn = Connection::start(&dp, NoCommands, info).unwrap();
        let sid = sent.borrow().iter().find_map(|m| match msg_header(m) {
            Some((MSG_CREATE, sid)) => Some(sid),
            _ => None,
        });
        let mut change = Vec::new();
        change.extend_from_slice(&MSG_CHANGE_PROG.to_ne_bytes());
        change.extend_from_slice(&16u16.to_ne_bytes());
        change.extend_from_slice(&sid.unwrap().to_ne_bytes());
        change.extend_from_slice(&uid.to_ne_bytes());
        change.extend_from_slice(&0u32.to_ne_bytes());
        dp.recv_msg(&mut change).unwrap();
        sent.borrow_mut().clear();

        let (mut fold, mut reports) = (Fold::default(), 0);
        for i in 0..3000 {
            let ev = nth_ack(i);
            fold.add(&ev);
            conn.load_primitives(primitives(&ev, 1 << 30, ev.grown_pkts));
            conn.invoke().unwrap();
            for m in sent.borrow_mut().drain(..) {
                assert_eq!(msg_header(&m).map(|h| h.0), Some(MSG_MEASURE));
                let fields: Vec<u64> =
                    m[16..].chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect();
                assert_eq!(fields, fold.r.to_vec(), "report {reports}, after ACK {i}");
                fold = Fold::default();
                reports += 1;
            }
        }
        assert!(reports >= 80, "{reports} reports: the ACKs' losses, timeouts and undos must report");
    }

    fn ack(bytes: u32, pkts: u32, rtt: u32) -> Event {
        Event { bytes_acked: bytes, packets_acked: pkts, rtt_sample_us: rtt, ..Default::default() }
    }

    #[test]
    fn sums_extremes_and_latest_values_fold_as_the_program() {
        let mut f = Fold::default();
        f.add(&Event { rate_incoming_bps: 900, lost_pkts_sample: 1, ..ack(2896, 2, 300) });
        f.add(&Event { rate_incoming_bps: 500, packets_in_flight: 7, ..ack(0, 1, 200) }); // a SACK only
        assert_eq!(f.r[R_ACKED], 2896);
        assert_eq!(f.r[R_DELIVERED], 2); // only ACKs that advance snd_una grow
        assert_eq!(f.r[R_DELIVERED_ALL], 3);
        assert_eq!((f.r[R_MINRTT], f.r[R_RTT]), (200, 200));
        assert_eq!((f.r[R_BW_MAX], f.r[R_INFLIGHT], f.r[R_LOSS]), (900, 7, 1));
        assert!(f.has_event());
        assert!(!Fold::default().has_event());
    }

    #[test]
    fn earlier_acks_merge_into_a_kernel_report() {
        let mut early = Fold::default();
        early.add(&Event { was_timeout: 1, ..ack(1448, 1, 100) });
        let mut kernel = Fold::default();
        kernel.add(&Event { packets_in_flight: 4, ..ack(4344, 3, 150) });
        let mut later = kernel.r;
        early.merge_before(&mut later);
        assert_eq!(later[R_ACKED], 5792);
        assert_eq!(later[R_DELIVERED], 4);
        assert_eq!(later[R_MINRTT], 100);
        assert_eq!((later[R_RTT], later[R_INFLIGHT]), (150, 4));
        assert_eq!((later[R_TIMEOUT], later[R_RTO_ACKED], later[R_RTO_DELIVERED]), (1, 1448, 1));
    }

    #[test]
    fn messages_have_libccps_layout() {
        let mut fields = [0u64; REPORT_FIELDS];
        fields[R_ACKED] = 7;
        let m = measure_msg(3, 9, &fields);
        assert_eq!(m.len(), 8 + 8 + 8 * REPORT_FIELDS);
        assert_eq!(u16::from_ne_bytes([m[2], m[3]]) as usize, m.len());
        assert_eq!(u32::from_ne_bytes([m[4], m[5], m[6], m[7]]), 3);
        assert_eq!(u32::from_ne_bytes([m[8], m[9], m[10], m[11]]), 9);
        assert_eq!(u64::from_ne_bytes(m[16..24].try_into().unwrap()), 7);
        // an install message: the uid is not part of the fingerprint, the program is
        let install = |uid: u32, body: &[u8]| {
            let mut m = vec![2u8, 0, 0, 0, 0, 0, 0, 0];
            m[2..4].copy_from_slice(&((12 + body.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&uid.to_ne_bytes());
            m.extend_from_slice(body);
            m
        };
        let (uid, a) = install_fingerprint(&install(1, b"prog")).unwrap();
        assert_eq!(uid, 1);
        assert_eq!(install_fingerprint(&install(2, b"prog")).unwrap().1, a);
        assert_ne!(install_fingerprint(&install(1, b"prof")).unwrap().1, a);
        assert!(install_fingerprint(&install(1, b"prog")[..10]).is_none());
    }
}
