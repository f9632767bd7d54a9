//! Host plumbing for the daemon: the IPC socket, epoll, state files, sysctls.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// portus binds its socket in this directory and replies to `/tmp/ccp/<sender address>`.
pub const IPC_DIR: &str = "/tmp/ccp";

pub fn write_atomic(path: &Path, value: &serde_json::Value) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let tmp = path.with_extension("json.tmp");
    let ok = std::fs::write(&tmp, serde_json::to_vec_pretty(value).unwrap_or_default())
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = ok {
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!("intcc-datapath: cannot write {} (further failures not shown): {e}", path.display());
        }
    }
}

/// Bind our IPC socket by a path relative to /tmp/ccp: portus answers to
/// "/tmp/ccp/" + the sender's address, so the address must be relative.
pub fn bind_ipc(name: &str) -> std::io::Result<UnixDatagram> {
    std::fs::create_dir_all(IPC_DIR)?;
    std::env::set_current_dir(IPC_DIR)?;
    match std::fs::remove_file(name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let sock = UnixDatagram::bind(name)?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

pub struct Epoll(i32);

impl Epoll {
    pub fn new(fds: &[i32]) -> std::io::Result<Epoll> {
        // SAFETY: plain syscalls on fds we own.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(std::io::Error::last_os_error());
        }
        for &fd in fds {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(Epoll(ep))
    }

    pub fn wait(&self, timeout: Duration) {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // Rounded up: a timeout under a millisecond rounded down to 0 spun the loop for the
        // last millisecond of every heartbeat period (5 % of a core, idle).
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: buffer and length agree. EINTR (a signal) just returns.
        unsafe { libc::epoll_wait(self.0, evs.as_mut_ptr(), evs.len() as i32, ms) };
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        unsafe { libc::close(self.0) };
    }
}

/// portus's socket queues at most net.unix.max_dgram_qlen datagrams (default 10):
/// a burst of reports from many flows would be dropped. Raised before the agent
/// creates its socket (the limit is taken at socket creation).
const MIN_DGRAM_QLEN: u32 = 1024;

pub fn raise_dgram_qlen() {
    let path = "/proc/sys/net/unix/max_dgram_qlen";
    let current: u32 = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    if current < MIN_DGRAM_QLEN {
        match std::fs::write(path, MIN_DGRAM_QLEN.to_string()) {
            Ok(()) => eprintln!("intcc-datapath: raised net.unix.max_dgram_qlen {current} -> {MIN_DGRAM_QLEN}"),
            Err(e) => eprintln!("intcc-datapath: warning: cannot raise {path} ({e}): report bursts may drop"),
        }
    }
}
