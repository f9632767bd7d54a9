//! The thread the agent's commands are taken on: real-time by default, so a command waits
//! for no other task on its way to the kernel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use crate::pimutex::PiMutex;
use crate::Daemon;

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

/// What the command thread needs once the daemon is up.
pub(crate) type CommandWork = (Arc<PiMutex<Daemon>>, [i32; 2]);

/// The agent's commands, on a thread of their own (real-time unless `rt_priority` is 0):
/// each is written to the kernel's maps as soon as it arrives, whatever the report thread
/// is doing. Started first, so that an explicit priority the host refuses is an error
/// before anything is loaded (the default's refusal is a warning); it waits for the daemon
/// on the returned sender, and ends if that is dropped.
pub(crate) fn spawn_command_thread(
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
