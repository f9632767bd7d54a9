//! The daemon's command line.

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "intcc-datapath",
    about = "CCP datapath for stock Linux: BPF struct_ops congestion control 'ccp' (the agent's program folded \
             per ACK in the kernel) + libccp + portus unix IPC",
    after_help = "Flows opt in with the congestion control 'ccp' (sysctl net.ipv4.tcp_congestion_control, \
                  setsockopt TCP_CONGESTION, iperf3 -C ccp). Start an agent with 'intcc alg run NAME'.\n\
                  SIGTERM/SIGINT unregister 'ccp' and remove the socket and state files."
)]
pub(crate) struct Args {
    /// Name of the agent's socket in /tmp/ccp (portus binds 'portus')
    #[arg(long, default_value = "portus")]
    pub(crate) agent: String,
    /// Name of this datapath's socket in /tmp/ccp
    #[arg(long, default_value = "intcc-datapath")]
    pub(crate) name: String,
    /// How often the agent is probed and the heartbeat refreshed (ms)
    #[arg(long, default_value_t = 20)]
    pub(crate) heartbeat_ms: u64,
    /// Without a heartbeat for this long, the kernel falls back to Reno (ms)
    #[arg(long, default_value_t = 200)]
    pub(crate) agent_timeout_ms: u64,
    /// Where contract.json is written and flows.json and stats.json are kept up to date
    #[arg(long, default_value = "/run/intcc/datapath")]
    pub(crate) state_dir: PathBuf,
    /// Write every cwnd command and when the kernel applied it (CSV), for latency figures
    #[arg(long)]
    pub(crate) applied_log: Option<PathBuf>,
    /// Send every ACK to userspace and fold it in libccp, also for the program the kernel
    /// folds itself (tracing; the fold's cost, compared)
    #[arg(long)]
    pub(crate) per_ack_events: bool,
    /// The kernel also sends each ACK it folds; the daemon folds them too and counts the
    /// reports that differ (stats.json: fold_checks, fold_mismatches; the first few logged)
    #[arg(long, conflicts_with = "per_ack_events")]
    pub(crate) check_fold: bool,
    /// A routine report (the program's schedule: no loss, timeout, undo or request) that
    /// comes less than this after the ring last woke the daemon waits in the ring for the
    /// next wake-up (us; 0: every report wakes it). A loss-free flow's reports, one per RTT
    /// or per millisecond, then share wake-ups; news goes at once (stats.json:
    /// reports_waited). Off by default: at 2,000 on the bare veth the daemon woke half as
    /// often (0.018 against 0.022 cores) but the flow lost 8 % of its 40 Gbit/s, alternated
    /// A/B (docs/datapath.md)
    #[arg(long, default_value_t = 0)]
    pub(crate) report_coalesce_us: u64,
    /// Take the agent's commands on a thread under SCHED_FIFO at this priority (0: not
    /// real-time) [default: 1; a host that refuses it (no CAP_SYS_NICE) gets a warning and a
    /// daemon without]. On a host whose CPUs the flows keep busy, a command then waits for
    /// no other task on its way to the kernel; the kernel's reports go to the agent from a
    /// normal thread, a few at a wake-up when the CPUs are busy
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub(crate) rt_priority: Option<u8>,
    /// Print agent sessions and flows as they come and go
    #[arg(short, long)]
    pub(crate) verbose: bool,
}
