//! The crawl: every directory breadth-first from the root, in order; in each, fix the layout,
//! ask distribute to migrate every non-directory entry (a few at once), commit the layout
//! when every file is in place, record the directory as done.
//!
//! Guarantees:
//! - A directory in `done_dirs` is listed only to find its subdirectories: no fix-layout,
//!   migrate or commit is sent for it or its files (a resume redoes only unfinished ones).
//! - commit-layout is sent only when every file of the directory answered in-place, moved or
//!   vanished: a skipped or failed file keeps the layout untrusted (lookups of names missing
//!   on their hashed child still look everywhere, so the file is found).
//! - A directory with a failure (fix-layout, listing, a file, commit) is not recorded as done,
//!   so the next start retries it; skipped files do not prevent it (their reasons are
//!   answers: hard links, locks...), they only prevent the commit.
//! - At most `parallel` migrations are in flight; a stop request lets them finish (and
//!   counts them) and sends no more ("finish the current file").
//! - Each name of a listing is sent once even if it shows twice (a file moved from a child
//!   already listed to one not yet listed): the directory's names are kept in memory for the
//!   time of its listing.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use xlator_api::{Ctx, DirEntry, Fd, FdId, Gfid, Subvol};

use crate::dht::{self, Migrated, Reply};
use crate::progress::Book;
use crate::target::Target;

/// How much one readdirp asks for.
const PAGE_BYTES: u32 = 64 << 10;

/// Asks a run to stop after the files in flight.
#[derive(Clone, Default, Debug)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }
    /// Asks the run to stop. Returns whether it had been asked already.
    pub fn request(&self) -> bool {
        self.0.swap(true, Ordering::SeqCst)
    }
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// How the crawl ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every directory was visited (failures may have been counted).
    Finished,
    Stopped,
    /// The volume cannot rebalance (or answered outside the contract).
    Fatal(String),
}

/// How one directory ended.
enum DirEnd {
    Next,
    Stopped,
    Fatal(String),
}

/// How one file ended.
enum FileEnd {
    /// In place, moved or vanished.
    Settled,
    Skipped,
    Failed,
    Fatal(String),
}

/// What the files of one directory answered.
#[derive(Default)]
struct Tally {
    skipped: bool,
    failed: bool,
    fatal: Option<String>,
}

impl Tally {
    fn note(&mut self, end: FileEnd) {
        match end {
            FileEnd::Settled => {}
            FileEnd::Skipped => self.skipped = true,
            FileEnd::Failed => self.failed = true,
            FileEnd::Fatal(e) => {
                self.failed = true;
                self.fatal.get_or_insert(e);
            }
        }
    }
}

pub struct Crawler {
    target: Arc<dyn Target>,
    book: Arc<Mutex<Book>>,
    stop: Stop,
    parallel: usize,
    cx: Ctx,
    next_fd: AtomicU64,
}

fn is_dot(name: &str) -> bool {
    name == "." || name == ".."
}

fn child_path(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

impl Crawler {
    pub fn new(
        target: Arc<dyn Target>,
        book: Arc<Mutex<Book>>,
        stop: Stop,
        parallel: usize,
    ) -> Crawler {
        Crawler {
            target,
            book,
            stop,
            parallel: parallel.max(1),
            cx: Ctx::builder(0, 0).pid(std::process::id()).build(),
            // Hosts number their fds from 1 (translators' own are above 2^62).
            next_fd: AtomicU64::new(1),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, msg: String) {
        tracing::warn!("{msg}");
        self.book().fail(msg);
    }

    fn fatal(&self, msg: String) -> String {
        tracing::error!("{msg}");
        self.book().fail(msg.clone());
        msg
    }

    /// Visits every directory from the root.
    pub async fn run(&self) -> Outcome {
        let mut queue: VecDeque<(Gfid, String)> = VecDeque::from([(Gfid::ROOT, "/".to_owned())]);
        while let Some((dir, path)) = queue.pop_front() {
            if self.stop.is_requested() {
                return Outcome::Stopped;
            }
            if let Some(now) = self.target.topology() {
                let changed = {
                    let mut book = self.book();
                    let known = book.status.topology.replace(now.clone());
                    match known {
                        Some(k) if k != now => {
                            tracing::info!(
                                old = %k,
                                new = %now,
                                "the volume's bricks changed: every directory is fixed again, \
                                 from the root (counters kept)"
                            );
                            book.forget_done();
                            true
                        }
                        _ => false,
                    }
                };
                if changed {
                    queue.clear();
                    if dir != Gfid::ROOT {
                        queue.push_back((Gfid::ROOT, "/".to_owned()));
                        continue;
                    }
                }
            }
            let top = self.target.top();
            let done = self.book().done.contains(&dir);
            match self.directory(&top, dir, &path, done, &mut queue).await {
                DirEnd::Next => {}
                DirEnd::Stopped => return Outcome::Stopped,
                DirEnd::Fatal(e) => return Outcome::Fatal(e),
            }
        }
        Outcome::Finished
    }

    async fn directory(
        &self,
        top: &Subvol,
        dir: Gfid,
        path: &str,
        done: bool,
        queue: &mut VecDeque<(Gfid, String)>,
    ) -> DirEnd {
        let what = format!("directory {path} ({dir})");
        // Whether this directory's files are sent, and whether it had a failure.
        let mut migrate = !done;
        let mut failed = false;
        if !done {
            let r = top.getxattr(&self.cx, dir, dht::FIX_LAYOUT.into()).await;
            match dht::fix_layout(&what, r) {
                Reply::Ok(fixed) => tracing::debug!(fixed, "{what}: layout fixed"),
                Reply::Vanished => {
                    tracing::info!("{what} went away before its layout was fixed");
                    return DirEnd::Next;
                }
                Reply::Failed(e) => {
                    // Its files are not moved against a layout that was not rewritten; its
                    // subdirectories are still visited.
                    self.fail(e);
                    migrate = false;
                    failed = true;
                }
                Reply::Fatal(e) => return DirEnd::Fatal(self.fatal(e)),
            }
        }
        let fd = Fd {
            id: FdId(self.next_fd.fetch_add(1, Ordering::Relaxed)),
            gfid: dir,
            flags: libc::O_RDONLY | libc::O_DIRECTORY,
        };
        match top.opendir(&self.cx, fd).await {
            Ok(()) => {}
            Err(xlator_api::Errno::ENOENT) => {
                tracing::info!("{what} went away before it was listed");
                return DirEnd::Next;
            }
            Err(e) => {
                self.fail(format!("opendir of {what} failed with {e}"));
                return DirEnd::Next;
            }
        }
        let mut seen: HashSet<String> = HashSet::new();
        let mut inflight = FuturesUnordered::new();
        let mut t = Tally {
            failed,
            ..Tally::default()
        };
        let mut stopped = false;
        let mut cookie = 0;
        'list: loop {
            let page = match top.readdirp(&self.cx, fd, cookie, PAGE_BYTES).await {
                Ok(p) => p,
                Err(e) => {
                    self.fail(format!("readdirp of {what} failed with {e}"));
                    t.failed = true;
                    break;
                }
            };
            let Some(last) = page.last() else { break };
            if last.next_offset == cookie {
                self.fail(format!(
                    "readdirp of {what} returned a cookie that does not advance ({cookie}); \
                     listing cut short"
                ));
                t.failed = true;
                break;
            }
            cookie = last.next_offset;
            for e in page {
                if is_dot(&e.name) || !seen.insert(e.name.to_string()) {
                    continue;
                }
                if e.attr.gfid.is_null() {
                    self.fail(format!("{what}: entry {:?} has no GFID", e.name.as_str()));
                    t.failed = true;
                    continue;
                }
                if e.attr.is_dir() {
                    queue.push_back((e.attr.gfid, child_path(path, &e.name)));
                    continue;
                }
                if !migrate {
                    continue;
                }
                while inflight.len() >= self.parallel {
                    if let Some(end) = inflight.next().await {
                        t.note(end);
                    }
                }
                if t.fatal.is_some() {
                    break 'list;
                }
                if self.stop.is_requested() {
                    stopped = true;
                    break 'list;
                }
                inflight.push(self.migrate(top, dir, path, e));
            }
        }
        while let Some(end) = inflight.next().await {
            t.note(end);
        }
        drop(inflight);
        if let Err(e) = top.releasedir(&self.cx, fd).await {
            tracing::debug!("releasedir of {what} failed with {e}");
        }
        if let Some(e) = t.fatal {
            return DirEnd::Fatal(e);
        }
        if stopped {
            return DirEnd::Stopped;
        }
        if done || t.failed {
            return DirEnd::Next;
        }
        if !t.skipped {
            let r = top.getxattr(&self.cx, dir, dht::COMMIT_LAYOUT.into()).await;
            match dht::commit_layout(&what, r) {
                Reply::Ok(trusted) => tracing::debug!(trusted, "{what}: layout committed"),
                Reply::Vanished => {
                    tracing::info!("{what} went away before its layout was committed");
                    return DirEnd::Next;
                }
                Reply::Failed(e) => {
                    self.fail(e);
                    return DirEnd::Next;
                }
                Reply::Fatal(e) => return DirEnd::Fatal(self.fatal(e)),
            }
        } else {
            tracing::info!("{what}: files were skipped, its layout stays untrusted");
        }
        self.book().finish_dir(dir);
        DirEnd::Next
    }

    /// Sends the migrate of `e` (in `dir`) and counts its answer.
    async fn migrate(&self, top: &Subvol, dir: Gfid, path: &str, e: DirEntry) -> FileEnd {
        let name = dht::migrate_name(dir, &e.name);
        let what = format!("{} ({})", child_path(path, &e.name), e.attr.gfid);
        let r = top
            .getxattr(&self.cx, e.attr.gfid, name.as_str().into())
            .await;
        let reply = dht::migrate(&name, &what, r);
        let mut book = self.book();
        book.status.files_scanned += 1;
        match reply {
            Reply::Ok(Migrated::InPlace) => FileEnd::Settled,
            Reply::Ok(Migrated::Moved(n)) => {
                book.status.files_moved += 1;
                book.status.bytes_moved += n;
                tracing::debug!(bytes = n, "moved {what}");
                FileEnd::Settled
            }
            Reply::Ok(Migrated::Skipped(why)) => {
                book.status.files_skipped += 1;
                tracing::info!("{what} skipped: {why}");
                FileEnd::Skipped
            }
            Reply::Vanished => {
                book.status.files_vanished += 1;
                FileEnd::Settled
            }
            Reply::Failed(msg) => {
                tracing::warn!("{msg}");
                book.fail(msg);
                FileEnd::Failed
            }
            Reply::Fatal(msg) => {
                tracing::error!("{msg}");
                book.fail(msg.clone());
                FileEnd::Fatal(msg)
            }
        }
    }
}
