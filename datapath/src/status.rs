//! What the daemon tells of itself: flows.json (the flows of the agent's session) and
//! stats.json (its counters and the kernel's), written off the event loop.

use serde_json::json;

use crate::bpf;
use crate::Daemon;

impl Daemon {
    pub(super) fn write_flows(&mut self) {
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

    pub(super) fn write_stats(&self) {
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
                "rto_min_set": k.rto_min_set, "rto_min_refused": k.rto_min_refused,
            },
            "cmd_apply_latency": lat,
        });
        self.files.replace(self.args.state_dir.join("stats.json"), stats);
    }
}
