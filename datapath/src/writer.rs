//! File writes off the control loop.
//!
//! On ext4 a rename or an append can wait for a journal commit: measured on this kind of
//! VM at up to 1.8 s (2026-11-28, `stats.json` replaced once a second). In the daemon's
//! single loop that wait stopped the heartbeat (flows fell back to Reno after 200 ms), the
//! reports to the agent and its commands to the kernel. One thread does the writes, in
//! order; the loop never waits for it: a write finding the queue full is dropped and
//! counted (`file_writes_dropped` in stats.json).

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::time::Duration;

use crate::host::write_atomic;

/// Writes queued while the disk waits: a minute of stats and flow lists, or ~16 MB of log.
const QUEUE: usize = 256;

enum Job {
    /// the whole file, replaced atomically (write a temporary, rename over)
    Replace(PathBuf, serde_json::Value),
    /// bytes to the end of the log file the thread owns
    Append(Vec<u8>),
}

pub struct FileWriter {
    tx: RefCell<Option<SyncSender<Job>>>,
    done: Receiver<()>,
    pub dropped: Cell<u64>,
}

impl FileWriter {
    /// The writer thread; `log`: the file `append` writes to (the applied log), if any.
    pub fn start(mut log: Option<File>) -> std::io::Result<FileWriter> {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let (done_tx, done) = mpsc::channel();
        std::thread::Builder::new().name("intcc-writer".into()).spawn(move || {
            let mut log_failed = false;
            for job in rx {
                match (job, log.as_mut()) {
                    (Job::Replace(path, value), _) => write_atomic(&path, &value),
                    (Job::Append(bytes), Some(f)) => {
                        if let Err(e) = f.write_all(&bytes) {
                            if !std::mem::replace(&mut log_failed, true) {
                                eprintln!("intcc-datapath: cannot append to the applied log: {e}");
                            }
                        }
                    }
                    (Job::Append(_), None) => {}
                }
            }
            let _ = done_tx.send(());
        })?;
        Ok(FileWriter { tx: RefCell::new(Some(tx)), done, dropped: Cell::new(0) })
    }

    fn queue(&self, job: Job) {
        // full (the disk is 256 writes behind) or finished: counted, never waited for
        if let Some(tx) = self.tx.borrow().as_ref() {
            if tx.try_send(job).is_err() {
                self.dropped.set(self.dropped.get() + 1);
            }
        }
    }

    pub fn replace(&self, path: PathBuf, value: serde_json::Value) {
        self.queue(Job::Replace(path, value));
    }

    pub fn append(&self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.queue(Job::Append(bytes));
        }
    }

    /// No more writes: wait up to `timeout` for the queued ones. False: they did not finish
    /// (a file that blocks, a disk that hangs); the thread is left to the process's exit.
    pub fn finish(&self, timeout: Duration) -> bool {
        self.tx.borrow_mut().take();
        self.done.recv_timeout(timeout).is_ok()
    }
}
