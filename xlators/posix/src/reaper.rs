//! Handle removal after unlink, off the reply path.
//!
//! Unlinking a file's last name leaves its GFID handle (a hard link in the handle directory) as the
//! object's only link. Removing it is a second directory update as costly as the unlink
//! itself, and nothing the client waits for: the reaper thread does it after the reply, under
//! the object's stripe lock, and only if the handle is still its last link. `link` refuses
//! such an object (ESTALE) from the unlink on; fds opened before keep working as on any file
//! system.
//!
//! With a grace (option `unlinked-grace`) the handle is removed that long after the unlink,
//! and until then the object stays reachable by GFID: a client that resolved the name just
//! before another client renamed a new file over it still opens and reads the file it
//! found, instead of failing with ESTALE. Without one the object is gone for GFID lookups at
//! once (ESTALE). Items are reaped in queue order, each at its due time; stopping the brick
//! reaps what is queued at once.
//!
//! A crash can leave such orphans behind (and could before: between the two unlinks). A brick
//! stopped cleanly drains the queue and leaves a `clean-stop` marker; a brick started without
//! it scans the handle directory in the background and removes every non-directory handle
//! that is its object's only link.

use std::collections::VecDeque;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use xlator_api::Gfid;

use crate::brick::Brick;
use crate::handle::Layout;

/// The marker a cleanly stopped brick leaves in its meta directory.
pub const CLEAN_MARKER: &str = "clean-stop";

/// A handle to remove: the object's GFID, its inode number, when.
type Item = (Gfid, u64, Instant);

/// The queue and its thread.
#[derive(Default)]
pub struct Reaper {
    tx: Mutex<Option<Sender<Item>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Reaper {
    /// Starts the thread for `brick`, and a scan for orphans if the brick was not stopped
    /// cleanly (`marker` absent; it is removed now, so a crash from here on leaves none).
    pub fn start(brick: &Arc<Brick>, marker: PathBuf) {
        let (tx, rx) = channel();
        let weak = Arc::downgrade(brick);
        let clean = std::fs::remove_file(&marker).is_ok();
        let scan = (!clean).then(|| (brick.h.handles_path().to_owned(), brick.h.layout()));
        let spawned = std::thread::Builder::new()
            .name("posix-reaper".into())
            .spawn(move || run(weak, rx, scan));
        match spawned {
            Ok(t) => {
                *lock(&brick.reaper.tx) = Some(tx);
                *lock(&brick.reaper.thread) = Some(t);
            }
            Err(e) => {
                tracing::warn!(target: "xlfs::posix", "no reaper thread ({e}): handles are removed inline");
            }
        }
    }

    /// Queues the handle of `g` (inode `ino`) for removal at `due` if it is then the last
    /// link; `false` when there is no thread (the caller removes it itself).
    pub fn queue(&self, g: Gfid, ino: u64, due: Instant) -> bool {
        lock(&self.tx)
            .as_ref()
            .is_some_and(|tx| tx.send((g, ino, due)).is_ok())
    }

    /// Drains the queue and stops the thread; then leaves the clean-stop `marker`.
    pub fn stop(&self, marker: &Path) {
        drop(lock(&self.tx).take());
        if let Some(t) = lock(&self.thread).take() {
            if t.join().is_err() {
                return;
            }
            if let Err(e) = std::fs::write(marker, b"") {
                tracing::warn!(target: "xlfs::posix", "cannot write {marker:?}: {e}");
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(brick: Weak<Brick>, rx: Receiver<Item>, scan: Option<(PathBuf, Layout)>) {
    if let Some((dir, layout)) = scan {
        let removed = scan_orphans(&brick, &dir, layout);
        if removed > 0 {
            tracing::info!(target: "xlfs::posix", "removed {removed} orphaned handles in {dir:?} (brick not stopped cleanly)");
        }
    }
    // Ends when the last sender is gone (`stop`, or the brick dropped), after reaping what
    // is still waiting.
    let mut waiting: VecDeque<Item> = VecDeque::new();
    loop {
        let next = match waiting.front() {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(&(_, _, due)) => rx.recv_timeout(due.saturating_duration_since(Instant::now())),
        };
        match next {
            Ok(item) => waiting.push_back(item),
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                while waiting.front().is_some_and(|&(_, _, due)| due <= now) {
                    let Some((g, ino, _)) = waiting.pop_front() else {
                        break;
                    };
                    let Some(b) = brick.upgrade() else { return };
                    b.reap(g, ino);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                for (g, ino, _) in waiting.drain(..) {
                    let Some(b) = brick.upgrade() else { return };
                    b.reap(g, ino);
                }
                return;
            }
        }
    }
}

/// Removes every non-directory handle under `dir` (laid out as `layout`) that is its
/// object's only link.
fn scan_orphans(brick: &Weak<Brick>, dir: &Path, layout: Layout) -> u64 {
    let mut buckets = vec![dir.to_owned()];
    for _ in 0..layout.levels() {
        buckets = buckets
            .iter()
            .filter_map(|b| std::fs::read_dir(b).ok())
            .flat_map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
            })
            .collect();
    }
    let mut removed = 0;
    for bucket in buckets {
        let Ok(leaf) = std::fs::read_dir(&bucket) else {
            continue;
        };
        for e in leaf.flatten() {
            let Some(g) = e.file_name().to_str().and_then(Gfid::parse) else {
                continue;
            };
            let Ok(md) = e.path().symlink_metadata() else {
                continue;
            };
            if md.is_file() && md.nlink() <= 1 {
                let Some(brick) = brick.upgrade() else {
                    return removed;
                };
                if brick.reap(g, md.ino()) {
                    removed += 1;
                }
            }
        }
    }
    removed
}
