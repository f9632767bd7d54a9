//! The kernel side: load `bpf/intcc_ccp.bpf.c`'s object, register the struct_ops
//! congestion control "ccp" through a link, and give typed access to its maps.
//! Struct layouts here mirror the C structs field for field; both are checked at build
//! time against ccp_algs/contract.py (src/contract.rs includes the generated asserts).

use std::fmt;

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};

/// The compiled object, embedded so the binary is self-contained (built by datapath/Makefile first).
static BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/build/intcc_ccp.bpf.o"));

pub const EV_CREATE: u32 = 1;
pub const EV_MEASURE: u32 = 2;
pub const EV_CLOSE: u32 = 3;
/// the kernel folded the flow's ACKs (bpf/intcc_ccp_fold.h): the program's Report registers
pub const EV_REPORT: u32 = 4;
/// a command took effect on a flow the kernel folds (no per-ACK event shows it)
pub const EV_APPLIED: u32 = 5;
/// --check-fold: an ACK the kernel folded, for the daemon to fold too and compare
pub const EV_FOLDED_ACK: u32 = 6;

pub const CTL_HAS_CWND: u32 = 1;
pub const CTL_HAS_RATE: u32 = 2;

pub const AF_INET6: u32 = 10;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Event {
    pub kind: u32,
    pub sid: u32,
    pub ts_ns: u64,
    pub mss: u32,
    pub init_cwnd_bytes: u32,
    pub family: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub src_addr: [u8; 16],
    pub dst_addr: [u8; 16],
    pub bytes_acked: u32,
    pub packets_acked: u32,
    pub bytes_misordered: u32,
    pub packets_misordered: u32,
    /// unused: libccp's Ack.ecn_bytes carries undo_cwnd_bytes
    pub ecn_bytes: u32,
    pub ecn_packets: u32,
    pub lost_pkts_sample: u32,
    pub was_timeout: u32,
    pub rtt_sample_us: u32,
    pub bytes_in_flight: u32,
    pub packets_in_flight: u32,
    pub snd_cwnd_bytes: u32,
    pub rate_outgoing_bps: u64,
    pub rate_incoming_bps: u64,
    pub snd_rate_bps: u64,
    pub bytes_pending: u32,
    pub ca_state: u32,
    pub applied_seq: u64,
    /// the kernel undid a reduction on this ACK: the window it restored (0: none)
    pub undo_cwnd_bytes: u32,
    pub hold_id: u32,
    /// segments the kernel-side per-ACK growth has added so far (cumulative, wraps)
    pub grown_pkts: u32,
    /// window reductions (Recovery, CWR) the kernel has begun so far (cumulative, wraps)
    pub reductions: u32,
    pub extra_acked_pkts: u32,
    /// packets marked lost so far (tp->lost, cumulative, wraps)
    pub lost_total_pkts: u32,
    /// EV_REPORT: the program's Report registers in declaration order (the ACK fields are
    /// the reporting ACK's); Report.grown is the kernel's grown_pkts, not yet relative
    pub report_fields: [u64; crate::contract::REPORT_FIELDS],
}

impl Event {
    /// The event in a ring-buffer sample, or None when the sample is too short (counted by the caller).
    pub fn parse(sample: &[u8]) -> Option<Event> {
        if sample.len() < std::mem::size_of::<Event>() {
            return None;
        }
        // SAFETY: length checked; Event is plain old data; the sample may be unaligned.
        Some(unsafe { std::ptr::read_unaligned(sample.as_ptr() as *const Event) })
    }

    pub fn src_ip(&self) -> std::net::IpAddr {
        ip(self.family, &self.src_addr)
    }

    pub fn dst_ip(&self) -> std::net::IpAddr {
        ip(self.family, &self.dst_addr)
    }
}

fn ip(family: u32, raw: &[u8; 16]) -> std::net::IpAddr {
    if family == AF_INET6 {
        std::net::IpAddr::from(*raw)
    } else {
        std::net::IpAddr::from([raw[0], raw[1], raw[2], raw[3]])
    }
}

/// The agent's command per flow: generated from ccp_algs/contract.py (its registers are fields).
pub use crate::contract::Ctl;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Cfg {
    pub heartbeat_ns: u64,
    pub agent_timeout_ns: u64,
    pub epoch: u64,
    /// the contract version of the daemon that pinned the maps
    pub contract_version: u64,
    /// the kernel also sends each ACK it folds (EV_FOLDED_ACK)
    pub fold_check: u64,
    /// a routine report this soon after the last wake-up waits in the ring for the next one
    pub report_coalesce_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub events_lost: u64,
    pub flows_created: u64,
    pub fallback_acks: u64,
    pub controlled_acks: u64,
    pub creates_sent: u64,
    pub cmds_applied: u64,
    pub undos: u64,
    pub rto_hold_acks: u64,
    pub cut_hold_acks: u64,
    pub uncut_recovery_acks: u64,
    pub folded_acks: u64,
    pub kernel_reports: u64,
    pub requested_reports: u64,
    pub reports_waited: u64,
    pub rto_min_set: u64,
    pub rto_min_refused: u64,
}

fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is one of the repr(C) plain structs above.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

fn from_bytes<T: Copy + Default>(b: &[u8]) -> T {
    let mut v = T::default();
    let n = b.len().min(std::mem::size_of::<T>());
    // SAFETY: copies at most size_of::<T>() bytes into a plain struct.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut v as *mut T as *mut u8, n) };
    v
}

#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn err<E: fmt::Display>(what: &str) -> impl FnOnce(E) -> Error + '_ {
    move |e| Error(format!("{what}: {e}"))
}

/// Handles to the maps the daemon uses; cheap to clone into per-flow state.
pub struct Maps {
    pub ctl: MapHandle,
    pub cfg: MapHandle,
    pub stats: MapHandle,
}

impl Maps {
    pub fn write_ctl(&self, sid: u32, ctl: &Ctl) -> Result<(), Error> {
        self.ctl
            .update(&sid.to_ne_bytes(), bytes_of(ctl), MapFlags::ANY)
            .map_err(err("write control map"))
    }

    /// Forget every command: used when an agent comes or goes, so no stale one applies.
    pub fn clear_ctl(&self) {
        let keys: Vec<Vec<u8>> = self.ctl.keys().collect();
        for k in keys {
            let _ = self.ctl.delete(&k);
        }
    }

    pub fn write_cfg(&self, cfg: &Cfg) -> Result<(), Error> {
        self.cfg
            .update(&0u32.to_ne_bytes(), bytes_of(cfg), MapFlags::ANY)
            .map_err(err("write config map"))
    }

    pub fn read_cfg(&self) -> Cfg {
        match self.cfg.lookup(&0u32.to_ne_bytes(), MapFlags::ANY) {
            Ok(Some(b)) => from_bytes(&b),
            _ => Cfg::default(),
        }
    }

    /// The kernel's counters, summed over the CPUs (a per-CPU map: every field a u64).
    pub fn stats(&self) -> Stats {
        let Ok(Some(per_cpu)) = self.stats.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) else {
            return Stats::default();
        };
        let mut sum = [0u64; std::mem::size_of::<Stats>() / 8];
        for cpu in &per_cpu {
            for (total, field) in sum.iter_mut().zip(cpu.chunks_exact(8)) {
                *total += u64::from_ne_bytes(field.try_into().unwrap_or([0; 8]));
            }
        }
        from_bytes(bytes_of(&sum))
    }
}

/// The loaded program, registered as "ccp" for as long as this value (its link) lives.
pub struct Loaded {
    pub object: Object,
    _link: Link,
}

pub fn ccp_registered() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().any(|n| n == "ccp"))
        .unwrap_or(false)
}

/// Where the maps are pinned (bpffs): a daemon started after one that died takes its
/// maps over, and with them the flows that still run the dead one's struct_ops.
pub const PIN_DIR: &str = "/sys/fs/bpf/intcc_ccp";
const BPF_FS_MAGIC: i64 = 0xcafe4a11;

fn is_bpffs(path: &str) -> bool {
    let c = std::ffi::CString::new(path).unwrap();
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == BPF_FS_MAGIC }
}

/// /sys/fs/bpf mounted as bpffs (it is not on every host), and PIN_DIR in it.
fn ensure_pin_dir() -> Result<(), Error> {
    if !is_bpffs("/sys/fs/bpf") {
        let (src, dst, fs) = (c"bpf", c"/sys/fs/bpf", c"bpf");
        if unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) } != 0 {
            return Err(Error(format!("cannot mount bpffs at /sys/fs/bpf: {}", std::io::Error::last_os_error())));
        }
    }
    std::fs::create_dir_all(PIN_DIR).map_err(|e| Error(format!("cannot create {PIN_DIR}: {e}")))
}

fn pin_path(map_name: &str) -> String {
    format!("{PIN_DIR}/{}", map_name.trim_start_matches('.').replace('.', "_"))
}

/// Remove the pins (an orderly exit, or maps of an incompatible build). Flows that
/// still run an old registration keep its maps alive until they end.
pub fn unpin_all() {
    if let Ok(dir) = std::fs::read_dir(PIN_DIR) {
        for entry in dir.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let _ = std::fs::remove_dir(PIN_DIR);
}

/// The contract version in the pinned config map (0: a layout from before it had one).
fn pinned_contract_version() -> Option<u64> {
    let map = MapHandle::from_pinned_path(pin_path("intcc_ccp_cfg")).ok()?;
    let value = map.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).ok()??;
    if value.len() < std::mem::size_of::<Cfg>() {
        return Some(0);
    }
    Some(from_bytes::<Cfg>(&value).contract_version)
}

fn pins_exist() -> bool {
    std::fs::read_dir(PIN_DIR).map(|mut d| d.next().is_some()).unwrap_or(false)
}

/// Whether the maps were taken over from a previous daemon's pins.
pub struct Adopted(pub bool);

pub fn load_and_register() -> Result<(Loaded, Maps, Adopted), Error> {
    ensure_pin_dir()?;
    let mut had_pins = pins_exist();
    let ours = crate::contract::CONTRACT_VERSION as u64;
    match pinned_contract_version() {
        Some(v) if had_pins && v != ours => {
            eprintln!(
                "intcc-datapath: the maps pinned in {PIN_DIR} are of contract version {v}, this daemon's is \
                 {ours}; removed, starting afresh (flows of the old registration stay on its fallback)"
            );
            unpin_all();
            ensure_pin_dir()?;
            had_pins = false;
        }
        _ => {}
    }
    match load_pinned() {
        Ok((l, m)) => Ok((l, m, Adopted(had_pins))),
        Err(e) if had_pins => {
            eprintln!(
                "intcc-datapath: the pinned maps in {PIN_DIR} do not fit this build ({e}); removed, \
                 starting afresh (flows of the old registration stay on its fallback)"
            );
            unpin_all();
            ensure_pin_dir()?;
            load_pinned().map(|(l, m)| (l, m, Adopted(false)))
        }
        Err(e) => Err(e),
    }
}

fn load_pinned() -> Result<(Loaded, Maps), Error> {
    if ccp_registered() {
        return Err(Error(
            "a congestion control named 'ccp' is already registered (another intcc-datapath running, \
             ccp-kernel loaded, or 'bpftool struct_ops register' left one: \
             'bpftool struct_ops unregister name intcc_ccp')"
                .into(),
        ));
    }
    let mut open = ObjectBuilder::default()
        .name("intcc_ccp")
        .map_err(err("object name"))?
        .open_memory(BPF_OBJECT)
        .map_err(err("open BPF object"))?;
    // Every map but the struct_ops itself is pinned, .bss included: its socket-id
    // counter must go on where the previous daemon's stopped (ids stay unique).
    for mut m in open.maps_mut() {
        if m.map_type() == libbpf_rs::MapType::StructOps {
            continue;
        }
        let path = pin_path(&m.name().to_string_lossy());
        m.set_pin_path(&path).map_err(err("set pin path"))?;
    }
    let mut object = open.load().map_err(err(
        "load BPF object (needs root, BTF at /sys/kernel/btf/vmlinux and struct_ops support)",
    ))?;
    let link = {
        let mut ops = object
            .maps_mut()
            .find(|m| m.name() == "intcc_ccp")
            .ok_or_else(|| Error("struct_ops map intcc_ccp missing from the object".into()))?;
        ops.attach_struct_ops().map_err(err("register struct_ops 'ccp'"))?
    };
    let handle = |name: &str| -> Result<MapHandle, Error> {
        let m = object
            .maps()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error(format!("map {name} missing from the BPF object")))?;
        MapHandle::try_from(&m).map_err(err("map handle"))
    };
    let maps = Maps { ctl: handle("intcc_ccp_ctl")?, cfg: handle("intcc_ccp_cfg")?, stats: handle("intcc_ccp_stats")? };
    Ok((Loaded { object, _link: link }, maps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_samples_are_rejected() {
        assert!(Event::parse(&[0u8; 10]).is_none());
        let mut raw = vec![0u8; std::mem::size_of::<Event>()];
        raw[0] = 2;
        raw[4] = 7;
        let e = Event::parse(&raw).unwrap();
        assert_eq!((e.kind, e.sid), (EV_MEASURE, 7));
    }
}
