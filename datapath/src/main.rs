//! intcc-datapath: the CCP datapath for stock Linux.
//!
//! Registers the BPF struct_ops congestion control "ccp" (every network
//! namespace sees it), which folds the agent's datapath program per ACK in the
//! kernel when it is the shared one (bpf/intcc_ccp_fold.h; src/fold.rs), sends its
//! reports on, runs any other program in libccp on per-ACK events, and talks to a
//! CCP agent (portus / pyportus) over portus's unix datagram IPC in /tmp/ccp.
//! While an agent answers, a heartbeat in the BPF config map tells the kernel side
//! to obey the agent; without one, flows run the BPF Reno fallback.

mod agent;
mod args;
mod agent_link;
mod agent_msg;
mod bpf;
mod commands;
mod contract;
mod counters;
mod flow;
mod flowctl;
mod fold;
mod host;
mod pimutex;
mod status;
mod writer;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use libbpf_rs::{MapCore, RingBufferBuilder};
use serde_json::json;

use agent::{monotonic_ns, AppliedLog, Session};
use counters::{bump, Counters};
use host::{bind_ipc, raise_dgram_qlen, write_atomic, Epoll, IPC_DIR};
use pimutex::PiMutex;
use bpf::{Cfg, Event, Maps, EV_APPLIED, EV_CLOSE, EV_CREATE, EV_FOLDED_ACK, EV_MEASURE, EV_REPORT};
use args::Args;
use commands::spawn_command_thread;
use writer::FileWriter;


struct Daemon {
    args: Args,
    maps: Rc<Maps>,
    counters: Rc<Counters>,
    applied: Rc<AppliedLog>,
    /// flows.json, stats.json and the applied log, written off this loop
    files: Rc<FileWriter>,
    /// bound at NAME: report requests (from anyone), and the agent before a session
    sock: Rc<UnixDatagram>,
    /// bound at NAME.agent and connected to the agent at each session's start: the session's
    /// messages both ways (a connected socket receives from its peer alone)
    agent_sock: Rc<UnixDatagram>,
    agent_path: PathBuf,
    /// the agent_present() probe
    probe: UnixDatagram,
    /// one receive buffer for the daemon's life: a fresh 64 KB one, zeroed at every pass of
    /// the loop, was 6 % of the daemon's CPU (perf, 2026-11-28)
    ipc_buf: Box<[u8]>,
    session: Option<Session>,
    epoch: u64,
    flows_dirty: bool,
    started: Instant,
    last_stats: Instant,
}

impl Daemon {
    fn log(&self, msg: &str) {
        if self.args.verbose {
            eprintln!("intcc-datapath: {msg}");
        }
    }

    fn on_sample(&mut self, sample: &[u8]) {
        let Some(ev) = Event::parse(sample) else {
            bump(&self.counters.bad_events);
            return;
        };
        let Some(s) = self.session.as_mut() else { return };
        match ev.kind {
            EV_REPORT => s.on_report(&ev),
            EV_APPLIED => s.on_applied(&ev),
            EV_FOLDED_ACK => s.on_folded_ack(&ev),
            EV_MEASURE => s.on_measure(&ev),
            EV_CREATE => {
                s.on_create(&ev);
                self.flows_dirty = true;
                if self.args.verbose {
                    eprintln!(
                        "intcc-datapath: flow {} [{}]:{} -> [{}]:{} mss {}",
                        ev.sid,
                        ev.src_ip(),
                        ev.src_port,
                        ev.dst_ip(),
                        ev.dst_port,
                        ev.mss
                    );
                }
            }
            EV_CLOSE => {
                s.on_close(ev.sid);
                self.flows_dirty = true;
            }
            _ => bump(&self.counters.bad_events),
        }
    }

    /// Everything one of the IPC sockets holds: ``sock`` or (``from_agent_sock``) ``agent_sock``.
    fn drain_ipc(&mut self, from_agent_sock: bool) {
        let sock = if from_agent_sock { self.agent_sock.clone() } else { self.sock.clone() };
        let buf = &mut self.ipc_buf;
        loop {
            match sock.recv_from(buf) {
                Ok((n, from)) => {
                    // a report now, from whoever has news for the agent (its estimator)
                    if let Some(ccp_sid) = agent::parse_report_request(&buf[..n]) {
                        let served = self.session.as_mut().is_some_and(|s| s.request_report(ccp_sid));
                        bump(if served { &self.counters.report_requests } else { &self.counters.report_requests_unserved });
                        continue;
                    }
                    // only the agent may command flows
                    if !from_agent_sock && from.as_pathname() != Some(self.agent_path.as_path()) {
                        bump(&self.counters.ipc_not_from_agent);
                        continue;
                    }
                    self.applied.last_ipc_ns.set(monotonic_ns());
                    match self.session.as_mut() {
                        Some(s) => s.on_ipc(&mut buf[..n]),
                        None => bump(&self.counters.ipc_not_from_agent),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    bump(&self.counters.ipc_rejected);
                    return;
                }
            }
        }
    }

    /// Is a socket bound at the agent's address? (connect() on a datagram socket sends nothing.)
    /// One probe socket, connected again at every heartbeat: a socket made and closed 50
    /// times a second cost a flow on the bare veth ~6 % of its throughput (2026-11-28).
    fn agent_present(&self) -> bool {
        self.probe.connect(&self.agent_path).is_ok()
    }

    fn write_cfg(&self, alive: bool) {
        let cfg = Cfg {
            heartbeat_ns: if alive { monotonic_ns() } else { 0 },
            agent_timeout_ns: self.args.agent_timeout_ms * 1_000_000,
            epoch: self.epoch,
            contract_version: contract::CONTRACT_VERSION as u64,
            fold_check: self.args.check_fold as u64,
            report_coalesce_ns: self.args.report_coalesce_us * 1000,
        };
        if let Err(e) = self.maps.write_cfg(&cfg) {
            eprintln!("intcc-datapath: {e}");
        }
    }

    fn tick(&mut self) {
        if let Some(s) = &self.session {
            if s.lost.get() || !self.agent_present() {
                self.end_session();
            }
        }
        if self.session.is_none() && self.agent_present() {
            self.start_session();
        }
        self.write_cfg(self.session.is_some());
        if self.flows_dirty {
            self.write_flows();
        }
        if self.last_stats.elapsed() >= Duration::from_secs(1) {
            self.write_stats();
            self.applied.flush();
            self.last_stats = Instant::now();
        }
    }

    fn start_session(&mut self) {
        // connected, the session's sends resolve no path; portus answers to this socket
        if let Err(e) = self.agent_sock.connect(&self.agent_path) {
            eprintln!("intcc-datapath: cannot connect to the agent at {}: {e}", self.agent_path.display());
            return;
        }
        self.epoch += 1;
        self.maps.clear_ctl();
        match Session::start(
            self.agent_sock.clone(),
            self.maps.clone(),
            self.counters.clone(),
            self.applied.clone(),
            self.args.per_ack_events,
        ) {
            Ok(s) => {
                self.session = Some(s);
                self.log(&format!("agent at {} connected (epoch {})", self.agent_path.display(), self.epoch));
            }
            Err(e) => eprintln!("intcc-datapath: {e}"),
        }
        self.flows_dirty = true;
    }

    fn end_session(&mut self) {
        self.write_cfg(false); // the kernel falls back at once, not after the timeout
        self.session = None;
        self.maps.clear_ctl();
        self.flows_dirty = true;
        self.log("agent gone: flows run the fallback");
    }

}

fn run(args: Args) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| format!("signal handler: {e}"))?;
    }
    let (commands, command_work) = spawn_command_thread(args.rt_priority, stop.clone())?;
    std::fs::create_dir_all(&args.state_dir)
        .map_err(|e| format!("cannot create state dir {}: {e}", args.state_dir.display()))?;
    // bind_ipc() changes directory to /tmp/ccp: make every path absolute first
    let mut args = args;
    args.state_dir = std::fs::canonicalize(&args.state_dir)
        .map_err(|e| format!("state dir {}: {e}", args.state_dir.display()))?;
    if let Some(p) = args.applied_log.take() {
        args.applied_log = Some(std::env::current_dir().map_err(|e| format!("cwd: {e}"))?.join(p));
    }
    let (loaded, maps, adopted) = bpf::load_and_register().map_err(|e| e.to_string())?;
    // Maps taken over from a daemon that died: its flows announced themselves in its
    // epochs, so ours continue after them (each flow re-announces in our first session).
    let first_epoch = if adopted.0 { maps.read_cfg().epoch } else { 0 };
    if adopted.0 {
        eprintln!(
            "intcc-datapath: took over the maps pinned in {} (epoch {first_epoch}): flows of the \
             previous registration come back under control with the next agent session",
            bpf::PIN_DIR
        );
    }
    raise_dgram_qlen();
    let sock = bind_ipc(&args.name).map_err(|e| format!("cannot bind {IPC_DIR}/{}: {e}", args.name))?;
    let agent_sock_name = format!("{}.agent", args.name);
    let agent_sock =
        bind_ipc(&agent_sock_name).map_err(|e| format!("cannot bind {IPC_DIR}/{agent_sock_name}: {e}"))?;
    let applied_file = match &args.applied_log {
        Some(p) => Some(std::fs::File::create(p).map_err(|e| format!("applied log {}: {e}", p.display()))?),
        None => None,
    };
    let files = Rc::new(FileWriter::start(applied_file).map_err(|e| format!("file writer thread: {e}"))?);
    let applied = AppliedLog::new(args.applied_log.is_some().then(|| files.clone()));
    let agent_path = Path::new(IPC_DIR).join(&args.agent);
    let sock_fds = [sock.as_raw_fd(), agent_sock.as_raw_fd()];
    let socket_path = Path::new(IPC_DIR).join(&args.name);
    let agent_socket_path = Path::new(IPC_DIR).join(&agent_sock_name);
    let state_dir = args.state_dir.clone();
    let heartbeat = Duration::from_millis(args.heartbeat_ms.max(1));
    // The contract an agent reads before it starts (ccp_algs.contract.read_datapath_contract).
    write_atomic(
        &state_dir.join("contract.json"),
        &json!({"contract_version": contract::CONTRACT_VERSION, "capabilities": contract::CAPABILITIES,
                "families": contract::FAMILIES.iter().map(|(name, _)| *name).collect::<Vec<_>>()}),
    );
    eprintln!(
        "intcc-datapath: 'ccp' registered; IPC {} <-> {}; state in {}",
        socket_path.display(),
        agent_path.display(),
        state_dir.display()
    );
    let daemon = Arc::new(PiMutex::new(Daemon {
        args,
        maps: Rc::new(maps),
        counters: Rc::new(Counters::default()),
        applied: Rc::new(applied),
        files, // from here on only under the lock: no Rc of the daemon's stays outside it
        sock: Rc::new(sock),
        agent_sock: Rc::new(agent_sock),
        agent_path,
        probe: UnixDatagram::unbound().map_err(|e| format!("agent probe socket: {e}"))?,
        ipc_buf: vec![0u8; 65536].into_boxed_slice(),
        session: None,
        epoch: first_epoch,
        flows_dirty: true,
        started: Instant::now(),
        last_stats: Instant::now() - Duration::from_secs(10),
    }).map_err(|e| format!("daemon lock: {e}"))?);
    daemon.lock().tick();

    let ev_map = loaded
        .object
        .maps()
        .find(|m| m.name() == "intcc_ccp_ev")
        .ok_or("ring buffer intcc_ccp_ev missing from the BPF object")?;
    let mut rb = RingBufferBuilder::new();
    let d = daemon.clone();
    rb.add(&ev_map, move |sample: &[u8]| {
        d.lock().on_sample(sample);
        0
    })
    .map_err(|e| format!("ring buffer: {e}"))?;
    let ring = rb.build().map_err(|e| format!("ring buffer: {e}"))?;
    let epoll = Epoll::new(&[ring.epoll_fd()]).map_err(|e| format!("epoll: {e}"))?;
    command_work.send((daemon.clone(), sock_fds)).map_err(|_| "command thread gone".to_string())?;

    // This thread: the kernel's events (reports to the agent, flows) and the heartbeat.
    let mut next_tick = Instant::now() + heartbeat;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        epoll.wait(next_tick.saturating_duration_since(now));
        // bounded batches, so the heartbeat is never starved by a busy ring
        ring.consume_raw_n(1024);
        if Instant::now() >= next_tick {
            daemon.lock().tick();
            next_tick = Instant::now() + heartbeat;
        }
    }
    let _ = commands.join();

    // Orderly exit: tell the kernel to fall back, drop the agent session, unregister.
    {
        let mut d = daemon.lock();
        d.write_cfg(false);
        d.session = None;
        d.write_stats();
        d.applied.flush();
    }
    // the last stats and log lines reach the disk, unless it hangs: the exit does not
    if !daemon.lock().files.finish(Duration::from_secs(2)) {
        eprintln!("intcc-datapath: the last state files were not written within 2 s (the disk or a file blocks)");
    }
    drop(ring);
    drop(loaded); // the struct_ops link: 'ccp' is unregistered here
    bpf::unpin_all(); // an orderly stop leaves no BPF object behind (a crash leaves them to adopt)
    let _ = std::fs::remove_file(&socket_path);
    let _ = std::fs::remove_file(&agent_socket_path);
    let _ = std::fs::remove_file(state_dir.join("flows.json"));
    let _ = std::fs::remove_file(state_dir.join("contract.json"));
    eprintln!("intcc-datapath: stopped; 'ccp' unregistered");
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("intcc-datapath: error: {e}");
        std::process::exit(1);
    }
}
