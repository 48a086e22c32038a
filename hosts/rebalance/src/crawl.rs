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
//!   answers: not a file, no devices...), they only prevent the commit.
//! - A file with hard links on a decommissioned child moves only with all its names at once:
//!   distribute refuses each name alone (`skipped hard-links`), the crawl collects the names
//!   per GFID, and after the crawl each file whose names were all found (as many as its
//!   `nlink`) is sent once with all of them (migrate-links). Their directories wait for that
//!   answer like those of transient skips; a file whose names were not all found stays
//!   skipped (its directories are done, uncommitted).
//! - Files skipped for a reason that may pass ([`TRANSIENT_SKIPS`]: a migration in flight or
//!   interrupted by a crash, POSIX locks, a file being written) are retried after the crawl,
//!   in rounds after a pause; their directory is recorded as done (and committed, when all
//!   settled and nothing else was skipped) only then, so a stop or crash meanwhile leaves it
//!   to the next start.
//! - At most `parallel` migrations are in flight; a stop request lets them finish (and
//!   counts them) and sends no more ("finish the current file").
//! - Each name of a listing is sent once even if it shows twice (a file moved from a child
//!   already listed to one not yet listed): the directory's names are kept in memory for the
//!   time of its listing.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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
    /// Skipped; with the entry when the reason may go away (retried after the crawl).
    Skipped(Option<DirEntry>),
    /// A name of a file with hard links, sent with its other names after the crawl.
    Linked(Gfid),
    Failed,
    Fatal(String),
}

/// Skip reasons that may go away by themselves: a migration in flight or interrupted, POSIX
/// locks held, a file written meanwhile.
pub const TRANSIENT_SKIPS: [&str; 3] = ["busy", "locked", "changing"];

/// A directory whose only obstacle to its commit is files skipped for a transient reason, or
/// files with hard links waiting for all their names.
struct Pending {
    dir: Gfid,
    path: String,
    files: Vec<DirEntry>,
    /// Its files with hard links (their groups in [`Crawler::groups`]).
    linked: Vec<Gfid>,
    /// Whether the layout is committed once they settle (no permanent skip in it).
    commit: bool,
}

/// How a retry of one pending directory ended.
enum RetryEnd {
    Done,
    Again(Pending),
    Stopped,
    Fatal(String),
}

/// What the files of one directory answered.
#[derive(Default)]
struct Tally {
    skipped: bool,
    /// A skip for a reason that stays (not a file, no devices...).
    permanent: bool,
    /// Files skipped for a transient reason.
    retry: Vec<DirEntry>,
    /// Files with hard links.
    linked: Vec<Gfid>,
    failed: bool,
    fatal: Option<String>,
}

impl Tally {
    fn note(&mut self, end: FileEnd) {
        match end {
            FileEnd::Settled => {}
            FileEnd::Skipped(again) => {
                self.skipped = true;
                match again {
                    Some(e) => self.retry.push(e),
                    None => self.permanent = true,
                }
            }
            FileEnd::Linked(g) => {
                self.skipped = true;
                self.linked.push(g);
            }
            FileEnd::Failed => self.failed = true,
            FileEnd::Fatal(e) => {
                self.failed = true;
                self.fatal.get_or_insert(e);
            }
        }
    }
}

/// Where a file with hard links stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupState {
    /// Not sent yet, or skipped for a transient reason: sent (again) in the next round.
    Waiting,
    /// Moved or in place: its names settled.
    Settled,
    /// Not all its names found, or refused: its names stay skipped.
    Stuck,
    /// Its migrate-links failed: its directories are not done (the next start redoes them).
    Failed,
}

/// The names the crawl found of one file with hard links.
struct Group {
    nlink: u32,
    /// (directory, name) → the name's path, for messages.
    names: BTreeMap<(Gfid, String), String>,
    state: GroupState,
}

/// How often and how late transient skips are retried.
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// Retry rounds after the crawl (0: none).
    pub rounds: u32,
    /// The pause before each round.
    pub delay: Duration,
}

pub struct Crawler {
    target: Arc<dyn Target>,
    book: Arc<Mutex<Book>>,
    stop: Stop,
    parallel: usize,
    retry: Retry,
    pending: Mutex<Vec<Pending>>,
    groups: Mutex<HashMap<Gfid, Group>>,
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
        retry: Retry,
    ) -> Crawler {
        Crawler {
            target,
            book,
            stop,
            parallel: parallel.max(1),
            retry,
            pending: Mutex::new(Vec::new()),
            groups: Mutex::new(HashMap::new()),
            cx: Ctx::builder(0, 0).pid(std::process::id()).build(),
            // Hosts number their fds from 1 (translators' own are above 2^62).
            next_fd: AtomicU64::new(1),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pending(&self) -> MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn groups(&self) -> MutexGuard<'_, HashMap<Gfid, Group>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
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
                                 from the root (counters kept but files_skipped, recounted)"
                            );
                            book.forget_done();
                            // Every file is answered again: the skips are counted anew.
                            book.status.files_skipped = 0;
                            true
                        }
                        _ => false,
                    }
                };
                if changed {
                    queue.clear();
                    // Their directories are done again from scratch.
                    self.pending().clear();
                    self.groups().clear();
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
        self.retry_pass().await
    }

    /// Sleeps `d`, waking early (false) when a stop is requested.
    async fn pause(&self, d: Duration) -> bool {
        let end = tokio::time::Instant::now() + d;
        loop {
            if self.stop.is_requested() {
                return false;
            }
            let now = tokio::time::Instant::now();
            if now >= end {
                return true;
            }
            tokio::time::sleep((end - now).min(Duration::from_millis(100))).await;
        }
    }

    /// Retries the files skipped for transient reasons, in rounds after a pause, committing
    /// each directory once all its files settled; after the last round the directories
    /// left are done, uncommitted. A stop leaves them out of `done_dirs` (a resume redoes
    /// them).
    async fn retry_pass(&self) -> Outcome {
        if let Some(o) = self.settle_links().await {
            return o;
        }
        for round in 1..=self.retry.rounds {
            let pending = std::mem::take(&mut *self.pending());
            if pending.is_empty() {
                return Outcome::Finished;
            }
            let files: usize = pending.iter().map(|p| p.files.len()).sum();
            tracing::info!(
                "{files} files of {} directories were skipped for a reason that may pass; \
                 retrying them in {:?} (round {round} of {})",
                pending.len(),
                self.retry.delay,
                self.retry.rounds
            );
            if !self.pause(self.retry.delay).await {
                return Outcome::Stopped;
            }
            if let Some(o) = self.link_pass().await {
                return o;
            }
            let mut again = Vec::new();
            for p in pending {
                match self.retry_dir(p).await {
                    RetryEnd::Done => {}
                    RetryEnd::Again(p) => again.push(p),
                    RetryEnd::Stopped => return Outcome::Stopped,
                    RetryEnd::Fatal(e) => return Outcome::Fatal(e),
                }
            }
            *self.pending() = again;
        }
        for p in std::mem::take(&mut *self.pending()) {
            tracing::info!(
                "directory {} ({}): {} files stayed skipped; its layout stays untrusted",
                p.path,
                p.dir,
                p.files.len()
            );
            self.book().finish_dir(p.dir);
        }
        Outcome::Finished
    }

    /// Right after the crawl: the files with hard links are sent, and the directories that
    /// waited only for them are finished.
    async fn settle_links(&self) -> Option<Outcome> {
        if self.groups().is_empty() {
            return None;
        }
        if let Some(o) = self.link_pass().await {
            return Some(o);
        }
        let mut again = Vec::new();
        let pending = std::mem::take(&mut *self.pending());
        for p in pending {
            if !p.files.is_empty() {
                again.push(p);
                continue;
            }
            match self.retry_dir(p).await {
                RetryEnd::Done => {}
                RetryEnd::Again(p) => again.push(p),
                RetryEnd::Stopped => return Some(Outcome::Stopped),
                RetryEnd::Fatal(e) => return Some(Outcome::Fatal(e)),
            }
        }
        *self.pending() = again;
        None
    }

    /// Sends migrate-links for each waiting file with hard links whose names were all found
    /// (a file with fewer found than its `nlink` stays skipped). `Some` when the run ends.
    async fn link_pass(&self) -> Option<Outcome> {
        let todo: Vec<(Gfid, String, String, u64)> = {
            let mut groups = self.groups();
            let mut out = Vec::new();
            for (g, grp) in groups.iter_mut() {
                if grp.state != GroupState::Waiting {
                    continue;
                }
                let paths: Vec<&str> = grp.names.values().map(String::as_str).collect();
                let what = format!("{} ({g})", paths.join(", "));
                if grp.names.len() != grp.nlink as usize {
                    tracing::info!(
                        "{what}: {} of its {} names found (the others outside the tree or                          changed during the crawl); skipped: hard-links",
                        grp.names.len(),
                        grp.nlink
                    );
                    grp.state = GroupState::Stuck;
                    continue;
                }
                let xattr =
                    dht::migrate_links_name(grp.names.keys().map(|(d, n)| (*d, n.as_str())));
                out.push((*g, xattr, what, grp.names.len() as u64));
            }
            out
        };
        let top = self.target.top();
        let mut inflight = FuturesUnordered::new();
        let mut fatal = None;
        let mut stopped = false;
        for (g, xattr, what, names) in todo {
            while inflight.len() >= self.parallel {
                if let Some(Some(e)) = inflight.next().await {
                    fatal.get_or_insert(e);
                }
            }
            if fatal.is_some() {
                break;
            }
            if self.stop.is_requested() {
                stopped = true;
                break;
            }
            inflight.push(self.migrate_group(&top, g, xattr, what, names));
        }
        while let Some(end) = inflight.next().await {
            if let Some(e) = end {
                fatal.get_or_insert(e);
            }
        }
        if let Some(e) = fatal {
            return Some(Outcome::Fatal(e));
        }
        stopped.then_some(Outcome::Stopped)
    }

    /// Sends one file's migrate-links and records where its group stands; the message when
    /// the run must end.
    async fn migrate_group(
        &self,
        top: &Subvol,
        g: Gfid,
        xattr: String,
        what: String,
        names: u64,
    ) -> Option<String> {
        let r = top.getxattr(&self.cx, g, xattr.as_str().into()).await;
        let reply = dht::migrate(&xattr, &what, r);
        let state = {
            let mut book = self.book();
            let s = &mut book.status;
            // Each name was counted as skipped when the crawl found it.
            let unskip = |s: &mut crate::status::Status| {
                s.files_skipped = s.files_skipped.saturating_sub(names);
            };
            match reply {
                Reply::Ok(Migrated::InPlace) => {
                    unskip(s);
                    GroupState::Settled
                }
                Reply::Ok(Migrated::Moved(n)) => {
                    unskip(s);
                    s.files_moved += 1;
                    s.bytes_moved += n;
                    tracing::debug!(bytes = n, names, "moved {what}");
                    GroupState::Settled
                }
                Reply::Ok(Migrated::Skipped(why)) => {
                    tracing::info!("{what} skipped: {why}");
                    if TRANSIENT_SKIPS.contains(&why.as_str()) {
                        GroupState::Waiting
                    } else {
                        GroupState::Stuck
                    }
                }
                Reply::Vanished => {
                    unskip(s);
                    s.files_vanished += 1;
                    GroupState::Settled
                }
                Reply::Failed(msg) => {
                    tracing::warn!("{msg}");
                    book.fail(msg);
                    GroupState::Failed
                }
                Reply::Fatal(msg) => {
                    tracing::error!("{msg}");
                    book.fail(msg.clone());
                    return Some(msg);
                }
            }
        };
        if let Some(grp) = self.groups().get_mut(&g) {
            grp.state = state;
        }
        None
    }

    async fn retry_dir(&self, p: Pending) -> RetryEnd {
        let what = format!("directory {} ({})", p.path, p.dir);
        let top = self.target.top();
        let mut inflight = FuturesUnordered::new();
        let mut t = Tally::default();
        let mut stopped = false;
        let mut linked = Vec::new();
        {
            let groups = self.groups();
            for g in p.linked {
                match groups.get(&g).map_or(GroupState::Stuck, |x| x.state) {
                    GroupState::Settled => {}
                    GroupState::Waiting => linked.push(g),
                    GroupState::Stuck => t.permanent = true,
                    GroupState::Failed => t.failed = true,
                }
            }
        }
        for e in p.files {
            while inflight.len() >= self.parallel {
                if let Some(end) = inflight.next().await {
                    t.note(end);
                }
            }
            if t.fatal.is_some() {
                break;
            }
            if self.stop.is_requested() {
                stopped = true;
                break;
            }
            inflight.push(self.migrate(&top, p.dir, &p.path, e, true));
        }
        while let Some(end) = inflight.next().await {
            t.note(end);
        }
        drop(inflight);
        if let Some(e) = t.fatal {
            return RetryEnd::Fatal(e);
        }
        if stopped {
            return RetryEnd::Stopped;
        }
        if t.failed {
            // Not done: the next start redoes the directory.
            return RetryEnd::Done;
        }
        let commit = p.commit && !t.permanent;
        // A file retried that turned out to have hard links waits for the next round.
        linked.append(&mut t.linked);
        if !t.retry.is_empty() || !linked.is_empty() {
            return RetryEnd::Again(Pending {
                files: t.retry,
                linked,
                commit,
                ..p
            });
        }
        if commit {
            match self.commit(&top, p.dir, &what).await {
                DirEnd::Next => {}
                DirEnd::Stopped => return RetryEnd::Stopped,
                DirEnd::Fatal(e) => return RetryEnd::Fatal(e),
            }
        } else {
            self.book().finish_dir(p.dir);
        }
        RetryEnd::Done
    }

    /// Sends commit-layout for `dir` and, unless it failed or the directory went, records
    /// it as done.
    async fn commit(&self, top: &Subvol, dir: Gfid, what: &str) -> DirEnd {
        let r = top.getxattr(&self.cx, dir, dht::COMMIT_LAYOUT.into()).await;
        match dht::commit_layout(what, r) {
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
        self.book().finish_dir(dir);
        DirEnd::Next
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
                inflight.push(self.migrate(top, dir, path, e, false));
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
        if !t.retry.is_empty() || !t.linked.is_empty() {
            // Done (and committed, when nothing else was skipped) after the retries and the
            // files with hard links.
            self.pending().push(Pending {
                dir,
                path: path.to_owned(),
                files: t.retry,
                linked: t.linked,
                commit: !t.permanent,
            });
            return DirEnd::Next;
        }
        if t.skipped {
            tracing::info!("{what}: files were skipped, its layout stays untrusted");
            self.book().finish_dir(dir);
            return DirEnd::Next;
        }
        self.commit(top, dir, &what).await
    }

    /// Sends the migrate of `e` (in `dir`) and counts its answer. A `retry` of a file
    /// counted as skipped is not scanned again, and leaves `files_skipped` unless it is
    /// skipped again.
    async fn migrate(
        &self,
        top: &Subvol,
        dir: Gfid,
        path: &str,
        e: DirEntry,
        retry: bool,
    ) -> FileEnd {
        let name = dht::migrate_name(dir, &e.name);
        let what = format!("{} ({})", child_path(path, &e.name), e.attr.gfid);
        let r = top
            .getxattr(&self.cx, e.attr.gfid, name.as_str().into())
            .await;
        let reply = dht::migrate(&name, &what, r);
        let mut book = self.book();
        let s = &mut book.status;
        if retry {
            s.files_skipped = s.files_skipped.saturating_sub(1);
        } else {
            s.files_scanned += 1;
        }
        match reply {
            Reply::Ok(Migrated::InPlace) => FileEnd::Settled,
            Reply::Ok(Migrated::Moved(n)) => {
                s.files_moved += 1;
                s.bytes_moved += n;
                tracing::debug!(bytes = n, "moved {what}");
                FileEnd::Settled
            }
            Reply::Ok(Migrated::Skipped(why)) if why == dht::HARD_LINKS && e.attr.nlink > 1 => {
                s.files_skipped += 1;
                drop(book);
                tracing::debug!(
                    "{what}: has hard links; sent with its other names after the crawl"
                );
                let g = e.attr.gfid;
                let mut groups = self.groups();
                let grp = groups.entry(g).or_insert_with(|| Group {
                    nlink: e.attr.nlink,
                    names: BTreeMap::new(),
                    state: GroupState::Waiting,
                });
                grp.nlink = e.attr.nlink;
                grp.names
                    .insert((dir, e.name.to_string()), child_path(path, &e.name));
                FileEnd::Linked(g)
            }
            Reply::Ok(Migrated::Skipped(why)) => {
                s.files_skipped += 1;
                tracing::info!("{what} skipped: {why}");
                let transient = TRANSIENT_SKIPS.contains(&why.as_str());
                FileEnd::Skipped(transient.then_some(e))
            }
            Reply::Vanished => {
                s.files_vanished += 1;
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
