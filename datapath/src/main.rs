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
mod agent_msg;
mod bpf;
mod contract;
mod counters;
mod flowctl;
mod fold;
mod host;
mod pimutex;
mod writer;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::Parser;
use libbpf_rs::{MapCore, RingBufferBuilder};
use serde_json::json;

use agent::{monotonic_ns, AppliedLog, Session};
use counters::{bump, Counters};
use host::{bind_ipc, raise_dgram_qlen, write_atomic, Epoll, IPC_DIR};
use pimutex::PiMutex;
use bpf::{Cfg, Event, Maps, EV_APPLIED, EV_CLOSE, EV_CREATE, EV_FOLDED_ACK, EV_MEASURE, EV_REPORT};
use writer::FileWriter;


#[derive(Parser, Debug)]
#[command(
    name = "intcc-datapath",
    about = "CCP datapath for stock Linux: BPF struct_ops congestion control 'ccp' (the agent's program folded \
             per ACK in the kernel) + libccp + portus unix IPC",
    after_help = "Flows opt in with the congestion control 'ccp' (sysctl net.ipv4.tcp_congestion_control, \
                  setsockopt TCP_CONGESTION, iperf3 -C ccp). Start an agent with 'intcc alg run NAME'.\n\
                  SIGTERM/SIGINT unregister 'ccp' and remove the socket and state files."
)]
struct Args {
    /// Name of the agent's socket in /tmp/ccp (portus binds 'portus')
    #[arg(long, default_value = "portus")]
    agent: String,
    /// Name of this datapath's socket in /tmp/ccp
    #[arg(long, default_value = "intcc-datapath")]
    name: String,
    /// How often the agent is probed and the heartbeat refreshed (ms)
    #[arg(long, default_value_t = 20)]
    heartbeat_ms: u64,
    /// Without a heartbeat for this long, the kernel falls back to Reno (ms)
    #[arg(long, default_value_t = 200)]
    agent_timeout_ms: u64,
    /// Where contract.json is written and flows.json and stats.json are kept up to date
    #[arg(long, default_value = "/run/intcc/datapath")]
    state_dir: PathBuf,
    /// Write every cwnd command and when the kernel applied it (CSV), for latency figures
    #[arg(long)]
    applied_log: Option<PathBuf>,
    /// Send every ACK to userspace and fold it in libccp, also for the program the kernel
    /// folds itself (tracing; the fold's cost, compared)
    #[arg(long)]
    per_ack_events: bool,
    /// The kernel also sends each ACK it folds; the daemon folds them too and counts the
    /// reports that differ (stats.json: fold_checks, fold_mismatches; the first few logged)
    #[arg(long, conflicts_with = "per_ack_events")]
    check_fold: bool,
    /// A routine report (the program's schedule: no loss, timeout, undo or request) that
    /// comes less than this after the ring last woke the daemon waits in the ring for the
    /// next wake-up (us; 0: every report wakes it). A loss-free flow's reports, one per RTT
    /// or per millisecond, then share wake-ups; news goes at once (stats.json:
    /// reports_waited). Off by default: at 2,000 on the bare veth the daemon woke half as
    /// often (0.018 against 0.022 cores) but the flow lost 8 % of its 40 Gbit/s, alternated
    /// A/B (docs/datapath.md)
    #[arg(long, default_value_t = 0)]
    report_coalesce_us: u64,
    /// Take the agent's commands on a thread under SCHED_FIFO at this priority (0: not
    /// real-time) [default: 1; a host that refuses it (no CAP_SYS_NICE) gets a warning and a
    /// daemon without]. On a host whose CPUs the flows keep busy, a command then waits for
    /// no other task on its way to the kernel; the kernel's reports go to the agent from a
    /// normal thread, a few at a wake-up when the CPUs are busy
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=99))]
    rt_priority: Option<u8>,
    /// Print agent sessions and flows as they come and go
    #[arg(short, long)]
    verbose: bool,
}

/// The command thread's SCHED_FIFO priority unless told otherwise: with it a command's p99
/// from the agent to the kernel fell from 569-819 to 205-331 us in alternated runs beside a
/// 30 Gbit/s flow on 2 CPUs (docs/datapath.md); the agent is better left out (its Python
/// then delays the ACKs). Only commands: with the reports' thread real-time too, every
/// report was a wake-up of its own and the daemon took 0.036 cores against 0.025 (2026-11-28).
const DEFAULT_RT_PRIORITY: u8 = 1;

/// The thread the agent's commands are taken on (tests look for it by this name).
const COMMAND_THREAD: &str = "intcc-commands";

/// SCHED_FIFO at `priority` for the calling thread.
fn set_realtime(priority: u8) -> Result<(), String> {
    let param = libc::sched_param { sched_priority: priority as libc::c_int };
    // SAFETY: a plain system call with a valid parameter block (pid 0: the calling thread)
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(format!(
            "--rt-priority {priority}: cannot run under SCHED_FIFO ({}; needs root or CAP_SYS_NICE)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

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

    fn write_flows(&mut self) {
        let flows: Vec<_> = self
            .session
            .iter()
            .flat_map(|s| s.flows())
            .map(|f| {
                json!({
                    "sid": f.sid,
                    "family": if f.event.family == bpf::AF_INET6 { "ipv6" } else { "ipv4" },
                    "src": f.event.src_ip().to_string(),
                    "dst": f.event.dst_ip().to_string(),
                    "sport": f.event.src_port,
                    "dport": f.event.dst_port,
                    "mss": f.event.mss,
                    "ccp_src_ip": f.ccp_src_ip,
                    "ccp_dst_ip": f.ccp_dst_ip,
                })
            })
            .collect();
        self.files.replace(self.args.state_dir.join("flows.json"), json!({ "epoch": self.epoch, "flows": flows }));
        self.flows_dirty = false;
    }

    fn write_stats(&self) {
        let c = &self.counters;
        let k = self.maps.stats();
        let lat = {
            let mut v: Vec<u64> = self.applied.lat_ns.borrow().iter().copied().collect();
            v.sort_unstable();
            let pct = |p: f64| v.get(((v.len() as f64 - 1.0) * p).round() as usize).map(|x| *x as f64 / 1000.0);
            json!({"samples": v.len(), "p50_us": pct(0.5), "p99_us": pct(0.99), "max_us": v.last().map(|x| *x as f64 / 1000.0)})
        };
        let stats = json!({
            "pid": std::process::id(),
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "agent_connected": self.session.is_some(),
            "agent": self.agent_path,
            "epoch": self.epoch,
            "flows": self.session.as_ref().map(|s| s.flow_count()).unwrap_or(0),
            "flows_folded_in_kernel": self.session.as_ref().map(|s| s.folding_flow_count()).unwrap_or(0),
            "daemon": {
                "agent_sessions": c.agent_sessions.get(), "creates": c.creates.get(), "closes": c.closes.get(),
                "measures": c.measures.get(), "measures_unknown_flow": c.measures_unknown_flow.get(),
                "bad_events": c.bad_events.get(), "ipc_sent": c.ipc_sent.get(),
                "ipc_send_dropped": c.ipc_send_dropped.get(), "ipc_received": c.ipc_received.get(),
                "ipc_rejected": c.ipc_rejected.get(), "ipc_not_from_agent": c.ipc_not_from_agent.get(),
                "ipc_applied_at_once": c.ipc_applied_at_once.get(), "cmds_written": c.cmds_written.get(),
                "holds_answered": c.holds_answered.get(),
                "cmd_write_errors": c.cmd_write_errors.get(), "invoke_errors": c.invoke_errors.get(),
                "contract_mismatches": c.contract_mismatches.get(),
                "kernel_reports": c.kernel_reports.get(), "kernel_reports_stale": c.kernel_reports_stale.get(),
                "report_requests": c.report_requests.get(), "report_requests_unserved": c.report_requests_unserved.get(),
                "acks_folded_here": c.acks_folded_here.get(),
                "fold_checks": c.fold_checks.get(), "fold_mismatches": c.fold_mismatches.get(),
                "file_writes_dropped": self.files.dropped.get(),
            },
            "kernel": {
                "flows_created": k.flows_created, "creates_sent": k.creates_sent, "events_lost": k.events_lost,
                "fallback_acks": k.fallback_acks, "controlled_acks": k.controlled_acks, "cmds_applied": k.cmds_applied,
                "undos": k.undos,
                "rto_hold_acks": k.rto_hold_acks, "cut_hold_acks": k.cut_hold_acks,
                "uncut_recovery_acks": k.uncut_recovery_acks,
                "folded_acks": k.folded_acks, "kernel_reports": k.kernel_reports, "requested_reports": k.requested_reports,
                "reports_waited": k.reports_waited,
            },
            "cmd_apply_latency": lat,
        });
        self.files.replace(self.args.state_dir.join("stats.json"), stats);
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

/// What the command thread needs once the daemon is up.
type CommandWork = (Arc<PiMutex<Daemon>>, [i32; 2]);

/// The agent's commands, on a thread of their own (real-time unless `rt_priority` is 0):
/// each is written to the kernel's maps as soon as it arrives, whatever the report thread
/// is doing. Started first, so that an explicit priority the host refuses is an error
/// before anything is loaded (the default's refusal is a warning); it waits for the daemon
/// on the returned sender, and ends if that is dropped.
fn spawn_command_thread(
    rt_priority: Option<u8>,
    stop: Arc<AtomicBool>,
) -> Result<(std::thread::JoinHandle<()>, mpsc::Sender<CommandWork>), String> {
    let (ready_tx, ready) = mpsc::channel();
    let (work_tx, work) = mpsc::channel::<CommandWork>();
    let thread = std::thread::Builder::new()
        .name(COMMAND_THREAD.into())
        .spawn(move || {
            let policy = match rt_priority {
                None => {
                    if let Err(e) = set_realtime(DEFAULT_RT_PRIORITY) {
                        eprintln!("intcc-datapath: {e}: running without real-time priority");
                    }
                    Ok(())
                }
                Some(0) => Ok(()),
                Some(priority) => set_realtime(priority),
            };
            let refused = policy.is_err();
            let _ = ready_tx.send(policy);
            let (daemon, sock_fds) = match work.recv() {
                Ok(w) if !refused => w,
                _ => return,
            };
            let mut pfds = sock_fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: two valid pollfds. The timeout only bounds how late a stop is seen.
                unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
                let ready = pfds.map(|p| p.revents != 0);
                if ready[0] || ready[1] {
                    let mut d = daemon.lock();
                    for (i, r) in ready.iter().enumerate() {
                        if *r {
                            d.drain_ipc(i == 1);
                        }
                    }
                }
            }
        })
        .map_err(|e| format!("command thread: {e}"))?;
    match ready.recv() {
        Ok(Ok(())) => Ok((thread, work_tx)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("command thread ended before it started".into()),
    }
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("intcc-datapath: error: {e}");
        std::process::exit(1);
    }
}
