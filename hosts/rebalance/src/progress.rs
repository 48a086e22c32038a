//! The run's record while it runs: counters, done directories, rates and ETA, and the one
//! thread that writes them to the status file.
//!
//! Guarantees: every update goes through one mutex ([`Book`]), so a snapshot is consistent
//! (a file counted as moved has its bytes counted); snapshots reach the file in the order
//! they were taken, through a single writer thread that skips to the newest one when it
//! falls behind, so a late periodic write can never overwrite the final state.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use xlator_api::Gfid;

use crate::status::{self, Status, StatusError};

/// Counters at the start of this process's run: rates and the ETA are over this process's
/// work only (a resumed run's earlier work took an unknown time).
#[derive(Clone, Copy, Default)]
struct Base {
    files: u64,
    bytes: u64,
    objects: u64,
}

/// The record of the run.
pub struct Book {
    pub status: Status,
    pub done: HashSet<Gfid>,
    /// Failures of this process (a resume retries the directories earlier ones failed in,
    /// so only these decide whether this run failed).
    pub session_failures: u64,
    base: Base,
    start: Instant,
}

impl Book {
    pub fn new(status: Status) -> Book {
        let done = status.done_gfids().into_iter().collect();
        let base = Base {
            files: status.files_scanned,
            bytes: status.bytes_moved,
            objects: status.files_scanned + status.dirs_done,
        };
        Book {
            status,
            done,
            session_failures: 0,
            base,
            start: Instant::now(),
        }
    }

    /// Counts a failure and keeps its message as `last_error`.
    pub fn fail(&mut self, msg: String) {
        self.status.failures += 1;
        self.session_failures += 1;
        self.status.last_error = Some(msg);
    }

    /// Records `dir` as finished (once: a directory already recorded is not counted again).
    pub fn finish_dir(&mut self, dir: Gfid) {
        if self.done.insert(dir) {
            self.status.done_dirs.push(dir.to_string());
            self.status.dirs_done += 1;
        }
    }

    /// Forgets the finished directories (the topology changed: they must be fixed again).
    pub fn forget_done(&mut self) {
        self.done.clear();
        self.status.done_dirs.clear();
    }

    /// Brings `updated`, the rates and the ETA up to date.
    pub fn refresh(&mut self) {
        let s = &mut self.status;
        let elapsed = self.start.elapsed().as_secs_f64();
        s.updated = status::now_s();
        // Rounded: three decimals are plenty, and short numbers read back as written.
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        s.rate_files_per_s = round(status::rate(
            s.files_scanned.saturating_sub(self.base.files),
            elapsed,
        ));
        s.rate_bytes_per_s = round(status::rate(
            s.bytes_moved.saturating_sub(self.base.bytes),
            elapsed,
        ));
        let objects = s.files_scanned + s.dirs_done;
        s.eta_s = status::eta(
            s.files_total_estimate,
            objects,
            objects.saturating_sub(self.base.objects),
            elapsed,
        )
        .map(round);
    }

    /// [`Book::refresh`], then the file's bytes.
    pub fn snapshot(&mut self) -> Vec<u8> {
        self.refresh();
        status::render(&self.status)
    }

    /// One line for the log.
    pub fn line(&self) -> String {
        let s = &self.status;
        let eta = match s.eta_s {
            Some(e) => format!("{e:.0} s"),
            None => "unknown".into(),
        };
        format!(
            "{} directories, {} files ({} moved, {:.1} MB; {} skipped, {} vanished), {} \
             failures; {:.1} files/s, {:.2} MB/s; ETA {eta}",
            s.dirs_done,
            s.files_scanned,
            s.files_moved,
            s.bytes_moved as f64 / 1e6,
            s.files_skipped,
            s.files_vanished,
            s.failures,
            s.rate_files_per_s,
            s.rate_bytes_per_s / 1e6,
        )
    }
}

/// The status file's writer thread.
pub struct Writer {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    thread: Option<std::thread::JoinHandle<Result<(), StatusError>>>,
}

impl Writer {
    /// Starts the thread writing to `path`.
    pub fn start(path: PathBuf) -> Result<Writer, StatusError> {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let p = path.clone();
        let thread = std::thread::Builder::new()
            .name("status-writer".into())
            .spawn(move || {
                let mut last = Ok(());
                let mut warned = false;
                while let Ok(mut bytes) = rx.recv() {
                    // Only the newest snapshot matters.
                    while let Ok(newer) = rx.try_recv() {
                        bytes = newer;
                    }
                    last = status::store_bytes(&p, &bytes);
                    match &last {
                        Err(e) if !warned => {
                            tracing::warn!(error = %e, "status file not updated");
                            warned = true;
                        }
                        Ok(()) if warned => {
                            tracing::info!("status file written again");
                            warned = false;
                        }
                        _ => {}
                    }
                }
                last
            })
            .map_err(|source| StatusError::Unwritable { path, source })?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues a snapshot.
    pub fn send(&self, bytes: Vec<u8>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(bytes);
        }
    }

    /// Another handle queueing snapshots (for the periodic task). [`Writer::finish`] waits
    /// until every one is dropped.
    pub fn sender(&self) -> Option<mpsc::Sender<Vec<u8>>> {
        self.tx.clone()
    }

    /// Writes `last` and waits for it: the result of that final write. Drop every
    /// [`Writer::sender`] first, or this waits for them.
    pub fn finish(mut self, last: Vec<u8>) -> Result<(), StatusError> {
        self.send(last);
        drop(self.tx.take());
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) | None => Err(StatusError::Unwritable {
                path: PathBuf::new(),
                source: std::io::Error::other("the status writer thread panicked"),
            }),
        }
    }
}
