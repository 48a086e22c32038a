//! The open-file table: kernel file handle (`fh`) -> [`Fd`], and the graph it is open on.
//!
//! The host allocates [`FdId`]s (the fops' per-open identity) and uses the same number as the
//! kernel's `fh`. Ids start at 1 (0 is [`FdId::ANONYMOUS`]) and are never reused while the
//! process lives, so a late fop on a released handle cannot reach another file.
//!
//! Each open fd is bound to the graph that opened it ([`Binding`]): its translators (the
//! protocol/client connections, a brick's fd table behind them) know the fd, a graph built
//! later does not (a write there fails with EBADF). The binding holds that graph's `Arc`, so
//! an old graph lives while any of its fds is open, and counts the fops in flight through it
//! ([`FdUse`]), so that moving the fd to a newer graph (`migrate.rs`) releases it on the old
//! one only after they ended. Whether an fd may move is recorded here too: not once a lock
//! was asked through it ([`FdTable::mark_locking`]), not after an attempt that can never
//! succeed ([`FdTable::pin`]).
//!
//! A directory may be opened lazily ([`FdTable::insert_dir`]): the kernel gets its handle at
//! once, and the graph's `opendir` is sent only when a fop needs the fd there (a listing the
//! kernel could not answer from its own cache, fsyncdir, fstat of a removed directory). A
//! listing the kernel answers from its readdir cache then costs no round trip at all, and
//! neither does the `releasedir` of a directory never opened on its graph.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use fuser::FileHandle;
use xlator_api::{Ctx, Errno, Fd, FdId, Gfid, Subvol};
use xlfs_core::graph::Graph;

/// Striped locks serialising migrations: one migration per fd at a time, and fops of that fd
/// that find it on an old graph wait for the one that runs (migrations are rare: after a
/// graph switch, once per fd).
const MIGRATE_STRIPES: usize = 64;

/// An fd's tie to the graph it is open on.
pub struct Binding {
    graph: Arc<Graph>,
    /// Fops in flight through the fd on this graph.
    uses: AtomicUsize,
    idle: tokio::sync::Notify,
    /// For a directory opened lazily: the credentials to open it with, and whether it was.
    lazy: Option<LazyDir>,
}

/// A directory fd not opened on its graph until a fop needs it there.
struct LazyDir {
    cx: Ctx,
    opened: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("graph", &self.graph.id())
            .field("uses", &self.uses.load(Ordering::Relaxed))
            .field("opened", &self.opened())
            .finish()
    }
}

impl Binding {
    /// A binding to `graph`, where the fd is open.
    pub fn new(graph: Arc<Graph>) -> Arc<Binding> {
        Binding::with(graph, None)
    }

    /// A binding to `graph` of a directory fd that is opened there with `cx` when first
    /// needed ([`FdUse::ensure_open`]).
    fn lazy(graph: Arc<Graph>, cx: Ctx) -> Arc<Binding> {
        let lazy = LazyDir {
            cx,
            opened: tokio::sync::OnceCell::new(),
        };
        Binding::with(graph, Some(lazy))
    }

    fn with(graph: Arc<Graph>, lazy: Option<LazyDir>) -> Arc<Binding> {
        Arc::new(Binding {
            graph,
            uses: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            lazy,
        })
    }

    /// Whether the fd is open on the graph (so must be released there).
    pub fn opened(&self) -> bool {
        self.lazy.as_ref().is_none_or(|l| l.opened.initialized())
    }

    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// Waits until no fop is in flight through the fd on this graph.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.uses.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One fop's use of an open fd: the fd and the graph to send it to. Counted in flight until
/// dropped (hold it for the whole fop).
#[derive(Debug)]
pub struct FdUse {
    fd: Fd,
    binding: Arc<Binding>,
}

impl FdUse {
    fn new(fd: Fd, binding: Arc<Binding>) -> FdUse {
        binding.uses.fetch_add(1, Ordering::AcqRel);
        FdUse { fd, binding }
    }

    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// The graph the fd is open on.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.binding.graph
    }

    /// That graph's top, which receives the fop.
    pub fn top(&self) -> &Subvol {
        self.binding.graph.top()
    }

    /// Opens a lazily opened directory on its graph, once; call it before any fop that
    /// sends the fd to the graph. A failure is not kept: the next fop tries again.
    pub async fn ensure_open(&self) -> Result<(), Errno> {
        let Some(l) = &self.binding.lazy else {
            return Ok(());
        };
        let open = || self.top().opendir(&l.cx, self.fd);
        l.opened.get_or_try_init(open).await.map(drop)
    }

    /// Whether the fd is open on its graph (a lazily opened directory may not be yet).
    pub fn opened(&self) -> bool {
        self.binding.opened()
    }
}

impl Drop for FdUse {
    fn drop(&mut self) {
        if self.binding.uses.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.binding.idle.notify_waiters();
        }
    }
}

/// Why an fd stays on the graph it is open on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stay {
    /// It may move to the current graph.
    No,
    /// A lock was asked through it (or through another fd of its file that stays): its locks
    /// live in the old graph's connections, and so does close(2)'s release of them.
    Locks,
    /// Opening it on a newer graph failed for good (the file is gone there).
    Pinned,
}

#[derive(Debug)]
struct Slot {
    fd: Fd,
    binding: Arc<Binding>,
    locking: bool,
    pinned: bool,
}

#[derive(Debug)]
pub struct FdTable {
    next: AtomicU64,
    open: Mutex<Open>,
    migrating: Vec<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Default)]
struct Open {
    fds: HashMap<FdId, Slot>,
    /// Per file, how many of its fds are open without O_DIRECT (through which the kernel may
    /// cache its pages).
    buffered: HashMap<Gfid, u32>,
    /// Fds the kernel reads and writes without its page cache although their flags have no
    /// O_DIRECT (FOPEN_DIRECT_IO: writable O_APPEND opens).
    uncached: HashSet<FdId>,
    /// Every graph an fd was bound to (id, weak), for the statedump: which are still alive.
    graphs: Vec<(u64, Weak<Graph>)>,
    /// Per file with fds through which locks were asked: per graph id, how many such fds are
    /// bound there (so that neither `stays` nor a close has to look at every open fd).
    lockers: HashMap<Gfid, Vec<(u64, u32)>>,
}

fn buffered(fd: &Fd) -> bool {
    fd.flags & (libc::O_DIRECT | libc::O_DIRECTORY) == 0
}

impl Default for FdTable {
    fn default() -> FdTable {
        FdTable {
            next: AtomicU64::new(1),
            open: Mutex::new(Open::default()),
            migrating: (0..MIGRATE_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }
}

impl FdTable {
    pub fn new() -> FdTable {
        FdTable::default()
    }

    /// A fresh fd for `gfid` opened with `flags` (not in the table until [`insert`]ed, which
    /// happens once the open fop succeeded).
    ///
    /// [`insert`]: FdTable::insert
    pub fn allocate(&self, gfid: Gfid, flags: i32) -> Fd {
        let id = FdId(self.next.fetch_add(1, Ordering::Relaxed));
        Fd { id, gfid, flags }
    }

    /// Makes `fd`, opened on `graph`, reachable by its handle; returns the handle to give
    /// the kernel.
    pub fn insert(&self, fd: Fd, graph: Arc<Graph>) -> FileHandle {
        self.insert_as(fd, false, graph)
    }

    /// [`insert`](Self::insert), telling whether the kernel was told to bypass its page
    /// cache for this open (FOPEN_DIRECT_IO) whatever its flags say.
    pub fn insert_as(&self, fd: Fd, kernel_direct: bool, graph: Arc<Graph>) -> FileHandle {
        self.insert_bound(fd, kernel_direct, Binding::new(graph))
    }

    /// Makes the directory `fd` reachable by its handle, bound to `graph` but opened there
    /// with `cx` only when a fop needs it ([`FdUse::ensure_open`]).
    pub fn insert_dir(&self, fd: Fd, graph: Arc<Graph>, cx: Ctx) -> FileHandle {
        self.insert_bound(fd, false, Binding::lazy(graph, cx))
    }

    fn insert_bound(&self, fd: Fd, kernel_direct: bool, binding: Arc<Binding>) -> FileHandle {
        let graph = binding.graph.clone();
        let mut o = self.lock();
        if let Some(old) = o.fds.remove(&fd.id) {
            o.forget(&old);
        }
        if kernel_direct {
            o.uncached.insert(fd.id);
        } else if buffered(&fd) {
            *o.buffered.entry(fd.gfid).or_default() += 1;
        }
        o.note_graph(&graph);
        let slot = Slot {
            fd,
            binding,
            locking: false,
            pinned: false,
        };
        o.fds.insert(fd.id, slot);
        FileHandle(fd.id.0)
    }

    /// The fd behind a kernel handle and the graph it is open on, counted as in use until
    /// the returned [`FdUse`] drops.
    pub fn get(&self, fh: FileHandle) -> Option<FdUse> {
        let o = self.lock();
        let s = o.fds.get(&FdId(fh.0))?;
        Some(FdUse::new(s.fd, s.binding.clone()))
    }

    /// Forgets a handle (release/releasedir); returns the fd to release and its graph.
    pub fn remove(&self, fh: FileHandle) -> Option<FdUse> {
        let mut o = self.lock();
        let s = o.fds.remove(&FdId(fh.0))?;
        o.forget(&s);
        Some(FdUse::new(s.fd, s.binding))
    }

    /// Whether the fd of `fh` stays on its graph, and why. An fd stays with its locks, and
    /// so does every other fd of the same file bound to the same graph: close(2) of any of
    /// them releases the process's locks, which only that graph's connections hold.
    pub fn stays(&self, fh: FileHandle) -> Stay {
        let o = self.lock();
        let Some(s) = o.fds.get(&FdId(fh.0)) else {
            return Stay::No;
        };
        if s.pinned {
            return Stay::Pinned;
        }
        let graph = s.binding.graph.id();
        let locks = s.locking
            || (o.lockers.get(&s.fd.gfid)).is_some_and(|g| g.iter().any(|(id, _)| *id == graph));
        if locks { Stay::Locks } else { Stay::No }
    }

    /// Records that a lock is asked through `fh`: it stays on its graph from now on.
    pub fn mark_locking(&self, fh: FileHandle) {
        let mut o = self.lock();
        let Some(s) = o.fds.get_mut(&FdId(fh.0)) else {
            return;
        };
        if !s.locking {
            s.locking = true;
            let (gfid, graph) = (s.fd.gfid, s.binding.graph.id());
            o.add_locker(gfid, graph);
        }
    }

    /// The fds of `gfid` through which locks were asked that are open on another graph than
    /// `graph` (their locks live on that graph's connections).
    pub fn lockers_elsewhere(&self, gfid: &Gfid, graph: &Arc<Graph>) -> Vec<FdUse> {
        let o = self.lock();
        let elsewhere =
            (o.lockers.get(gfid)).is_some_and(|g| g.iter().any(|(id, _)| *id != graph.id()));
        if !elsewhere {
            return Vec::new();
        }
        o.fds
            .values()
            .filter(|s| s.locking && s.fd.gfid == *gfid && !Arc::ptr_eq(&s.binding.graph, graph))
            .map(|s| FdUse::new(s.fd, s.binding.clone()))
            .collect()
    }

    /// Records that `fh` cannot move to a newer graph: it stays on its own until released.
    pub fn pin(&self, fh: FileHandle) {
        if let Some(s) = self.lock().fds.get_mut(&FdId(fh.0)) {
            s.pinned = true;
        }
    }

    /// Binds `fh` to `graph` (its fd was opened there; a directory is opened there lazily,
    /// with root credentials: an open fd keeps the access it was opened with); returns the
    /// old binding, `None` if the handle is gone (released meanwhile).
    pub fn rebind(&self, fh: FileHandle, graph: Arc<Graph>) -> Option<Arc<Binding>> {
        let mut o = self.lock();
        o.note_graph(&graph);
        let new = graph.id();
        let s = o.fds.get_mut(&FdId(fh.0))?;
        let binding = if s.fd.flags & libc::O_DIRECTORY != 0 {
            Binding::lazy(graph, Ctx::root())
        } else {
            Binding::new(graph)
        };
        let old = std::mem::replace(&mut s.binding, binding);
        if s.locking {
            let gfid = s.fd.gfid;
            o.drop_locker(gfid, old.graph.id());
            o.add_locker(gfid, new);
        }
        Some(old)
    }

    /// The lock serialising migrations of `fh`.
    pub fn migration_lock(&self, fh: FileHandle) -> &tokio::sync::Mutex<()> {
        // The stripe count is small: the modulo always fits.
        &self.migrating[(fh.0 % MIGRATE_STRIPES as u64) as usize]
    }

    /// Whether `gfid` is open without O_DIRECT through some fd of this mount: only then may
    /// the kernel hold pages of it that a direct write makes stale.
    pub fn open_buffered(&self, gfid: &Gfid) -> bool {
        self.lock().buffered.contains_key(gfid)
    }

    /// An open fd on `gfid` (file or directory), if any, with its graph: lets attribute fops
    /// reach an object that was unlinked or replaced by a rename while open, which the kernel
    /// asks about by node id only (fstat, fchmod). A directory replaced by a rename over it is
    /// still open through its directory fd (generic/035).
    pub fn find_open(&self, gfid: &Gfid) -> Option<FdUse> {
        let o = self.lock();
        let s = o.fds.values().find(|s| s.fd.gfid == *gfid)?;
        Some(FdUse::new(s.fd, s.binding.clone()))
    }

    /// Whether some fd on `gfid` is open.
    pub fn is_open(&self, gfid: &Gfid) -> bool {
        self.lock().fds.values().any(|s| s.fd.gfid == *gfid)
    }

    /// Every fd still open, with its graph (released on shutdown).
    pub fn drain(&self) -> Vec<FdUse> {
        let mut o = self.lock();
        o.buffered.clear();
        o.uncached.clear();
        o.lockers.clear();
        o.fds
            .drain()
            .map(|(_, s)| FdUse::new(s.fd, s.binding))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.lock().fds.len()
    }

    /// For the statedump: per graph an fd was ever bound to and that is still alive (held
    /// by an fd, a fop in flight, or as the current graph), its id and how many open fds are
    /// bound to it, oldest first.
    pub fn graphs(&self) -> Vec<(u64, usize)> {
        let mut o = self.lock();
        o.graphs.retain(|(_, w)| w.strong_count() > 0);
        let mut out: Vec<(u64, usize)> = o.graphs.iter().map(|(id, _)| (*id, 0)).collect();
        for s in o.fds.values() {
            if let Some(e) = out.iter_mut().find(|(id, _)| *id == s.binding.graph.id()) {
                e.1 += 1;
            }
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // Single insert/remove operations: consistent even after a panic elsewhere.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Open {
    /// Forgets what is counted of a slot leaving the table.
    fn forget(&mut self, s: &Slot) {
        self.forget_buffered(&s.fd);
        if s.locking {
            self.drop_locker(s.fd.gfid, s.binding.graph.id());
        }
    }

    fn add_locker(&mut self, gfid: Gfid, graph: u64) {
        let g = self.lockers.entry(gfid).or_default();
        match g.iter_mut().find(|(id, _)| *id == graph) {
            Some((_, n)) => *n += 1,
            None => g.push((graph, 1)),
        }
    }

    fn drop_locker(&mut self, gfid: Gfid, graph: u64) {
        let Some(g) = self.lockers.get_mut(&gfid) else {
            return;
        };
        if let Some(i) = g.iter().position(|(id, _)| *id == graph) {
            g[i].1 -= 1;
            if g[i].1 == 0 {
                g.swap_remove(i);
            }
        }
        if g.is_empty() {
            self.lockers.remove(&gfid);
        }
    }

    fn forget_buffered(&mut self, fd: &Fd) {
        if self.uncached.remove(&fd.id) || !buffered(fd) {
            return;
        }
        if let Some(n) = self.buffered.get_mut(&fd.gfid) {
            *n -= 1;
            if *n == 0 {
                self.buffered.remove(&fd.gfid);
            }
        }
    }

    fn note_graph(&mut self, g: &Arc<Graph>) {
        // Graphs come in id order: only the newest needs a look.
        if self.graphs.iter().rev().any(|(id, _)| *id == g.id()) {
            return;
        }
        self.graphs.retain(|(_, w)| w.strong_count() > 0);
        self.graphs.push((g.id(), Arc::downgrade(g)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlfs_core::registry::Registry;
    use xlfs_core::volfile::Volfile;

    /// A real graph (storage/posix on a temporary directory) to bind fds to.
    fn graph(dir: &std::path::Path) -> Arc<Graph> {
        let text = xlfs_core::source::local_volfile(dir).expect("volfile");
        let vf = Volfile::parse(&text, "test").expect("parse");
        Arc::new(Graph::build(vf, &Registry::new()).expect("graph"))
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn ids_are_unique_nonzero_and_handles_round_trip() {
        let (dir, rt) = (tempfile::tempdir().expect("tempdir"), rt());
        let _e = rt.enter();
        let g = graph(dir.path());
        let t = FdTable::new();
        let gfid = Gfid::random();
        let a = t.allocate(gfid, libc::O_RDWR);
        let b = t.allocate(gfid, libc::O_RDONLY);
        assert_ne!(a.id, b.id);
        assert!(!a.is_anonymous() && !b.is_anonymous());
        let fh = t.insert(a, g.clone());
        assert_eq!(t.get(fh).map(|u| u.fd()), Some(a));
        assert_eq!(t.len(), 1);
        assert_eq!(t.remove(fh).map(|u| u.fd()), Some(a));
        assert!(t.get(fh).is_none());
        assert!(t.remove(fh).is_none());
        // b was never inserted (its open failed): unreachable.
        assert!(t.get(FileHandle(b.id.0)).is_none());
        let fh = t.insert(a, g.clone());
        assert_eq!(t.find_open(&gfid).map(|u| u.fd()), Some(a));
        assert!(t.find_open(&Gfid::random()).is_none());
        t.remove(fh);
        let d = t.allocate(gfid, libc::O_DIRECTORY);
        t.insert(d, g);
        assert_eq!(
            t.find_open(&gfid).map(|u| u.fd()),
            Some(d),
            "an open directory answers for a removed one"
        );
        assert!(t.is_open(&gfid));
    }

    #[test]
    fn buffered_opens_are_counted_per_file() {
        let (dir, rt) = (tempfile::tempdir().expect("tempdir"), rt());
        let _e = rt.enter();
        let gr = graph(dir.path());
        let t = FdTable::new();
        let g = Gfid::random();
        let direct = t.insert(t.allocate(g, libc::O_RDWR | libc::O_DIRECT), gr.clone());
        let appender = t.insert_as(t.allocate(g, libc::O_WRONLY), true, gr.clone());
        assert!(
            !t.open_buffered(&g),
            "O_DIRECT and FOPEN_DIRECT_IO only: no pages to drop"
        );
        let a = t.insert(t.allocate(g, libc::O_RDONLY), gr.clone());
        let b = t.insert(t.allocate(g, libc::O_RDWR), gr.clone());
        t.insert(t.allocate(g, libc::O_DIRECTORY), gr.clone());
        assert!(t.open_buffered(&g));
        t.remove(a);
        assert!(t.open_buffered(&g), "b still open");
        t.remove(b);
        assert!(!t.open_buffered(&g));
        t.remove(direct);
        t.remove(appender);
        assert!(
            !t.open_buffered(&g),
            "an uncached open removed leaves no count"
        );
        let c = t.insert(t.allocate(g, libc::O_RDONLY), gr);
        assert!(t.open_buffered(&g));
        t.remove(c);
        assert!(!t.open_buffered(&g));
        assert!(!t.open_buffered(&Gfid::random()));
    }

    #[test]
    fn drain_returns_everything_open() {
        let (dir, rt) = (tempfile::tempdir().expect("tempdir"), rt());
        let _e = rt.enter();
        let g = graph(dir.path());
        let t = FdTable::new();
        for _ in 0..3 {
            let fd = t.allocate(Gfid::random(), 0);
            t.insert(fd, g.clone());
        }
        assert_eq!(t.drain().len(), 3);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn an_fd_keeps_its_graph_alive_until_rebound_or_removed() {
        let (dir, rt) = (tempfile::tempdir().expect("tempdir"), rt());
        let _e = rt.enter();
        let (old, new) = (graph(dir.path()), graph(dir.path()));
        let (old_id, new_id) = (old.id(), new.id());
        let weak = Arc::downgrade(&old);
        let t = FdTable::new();
        let a = t.insert(t.allocate(Gfid::random(), libc::O_RDWR), old.clone());
        let b = t.insert(t.allocate(Gfid::random(), libc::O_RDONLY), old);
        assert_eq!(t.graphs(), vec![(old_id, 2)]);
        let u = t.get(a).expect("a");
        assert_eq!(u.graph().id(), old_id);
        let before = t.rebind(a, new.clone()).expect("a is open");
        assert_eq!(before.graph().id(), old_id);
        assert_eq!(t.get(a).expect("a").graph().id(), new_id);
        assert_eq!(u.graph().id(), old_id, "a use taken before keeps its graph");
        drop((u, before));
        assert_eq!(t.graphs(), vec![(old_id, 1), (new_id, 1)]);
        t.remove(b);
        assert_eq!(
            weak.strong_count(),
            0,
            "no fd, no fop: the old graph dropped"
        );
        assert_eq!(t.graphs(), vec![(new_id, 1)]);
        assert!(
            t.rebind(b, new).is_none(),
            "a released handle is not rebound"
        );
    }

    #[test]
    fn idle_waits_for_the_uses_in_flight() {
        let (dir, rt) = (tempfile::tempdir().expect("tempdir"), rt());
        let _e = rt.enter();
        let t = FdTable::new();
        let fh = t.insert(t.allocate(Gfid::random(), 0), graph(dir.path()));
        let (u1, u2) = (t.get(fh).expect("u1"), t.get(fh).expect("u2"));
        let binding = u1.binding.clone();
        let waited = rt.block_on(async {
            let idle = binding.idle();
            tokio::pin!(idle);
            let early = futures_poll_once(idle.as_mut()).await;
            drop(u1);
            let still = futures_poll_once(idle.as_mut()).await;
            drop(u2);
            idle.await;
            (early, still)
        });
        assert_eq!(waited, (false, false), "idle only once both uses ended");
        rt.block_on(binding.idle());
    }

    /// Polls `f` once: whether it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> bool {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::pin::Pin::new(&mut f).poll(cx).is_ready())
        })
        .await
    }

    #[test]
    fn fds_with_locks_and_their_files_other_fds_stay() {
        let (dir, rt) = (tempfile::tempdir().expect("tempdir"), rt());
        let _e = rt.enter();
        let (g, g2) = (graph(dir.path()), graph(dir.path()));
        let (g_ref, g2_ref) = (g.clone(), g2.clone());
        let t = FdTable::new();
        let (file, other) = (Gfid::random(), Gfid::random());
        let locker = t.insert(t.allocate(file, libc::O_RDWR), g.clone());
        let sibling = t.insert(t.allocate(file, libc::O_RDONLY), g.clone());
        let elsewhere = t.insert(t.allocate(file, libc::O_RDONLY), g2);
        let unrelated = t.insert(t.allocate(other, libc::O_RDONLY), g);
        assert!(
            [locker, sibling, elsewhere, unrelated]
                .iter()
                .all(|fh| t.stays(*fh) == Stay::No)
        );
        t.mark_locking(locker);
        assert_eq!(t.stays(locker), Stay::Locks);
        assert_eq!(
            t.stays(sibling),
            Stay::Locks,
            "close(2) of it releases the locks"
        );
        assert_eq!(
            t.stays(elsewhere),
            Stay::No,
            "on another graph: not those locks"
        );
        assert_eq!(t.stays(unrelated), Stay::No);
        t.pin(unrelated);
        assert_eq!(t.stays(unrelated), Stay::Pinned);
        assert_eq!(
            t.lockers_elsewhere(&file, &g2_ref).len(),
            1,
            "the locker on g"
        );
        assert!(
            t.lockers_elsewhere(&file, &g_ref).is_empty(),
            "none beside g"
        );
        t.mark_locking(locker);
        t.remove(locker);
        assert_eq!(t.stays(sibling), Stay::No, "the locking fd is closed");
        assert!(t.lockers_elsewhere(&file, &g2_ref).is_empty());
        assert!(t.lock().lockers.is_empty(), "no count left behind");
        assert_eq!(t.stays(FileHandle(999)), Stay::No);
    }
}
