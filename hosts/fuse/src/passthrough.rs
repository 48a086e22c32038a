//! FUSE passthrough (`--passthrough`): a read-only open the graph answers with a backing file
//! (storage/posix on this machine hands one out over the brick's Unix socket; see
//! `xlator_api::BackingFile`) is registered with the kernel, which then reads that file
//! directly: no read request reaches this process or the brick.
//!
//! The kernel puts each inode in one I/O mode while it is open: while any open of it passes
//! through, every open of it must pass through to the same backing file (else that open
//! fails with EIO), and page-cache opens exclude passthrough ones. So per inode this table
//! counts how it is open and chooses, at reply time, a mode compatible with every earlier
//! reply:
//! - a read-only open with a backing file passes through, unless the inode is open through
//!   the page cache (then it uses the page cache too);
//! - any other open (writers, creates of an existing file, opens without a backing file)
//!   passes through to the inode's backing file while it has one, and uses the page cache
//!   otherwise. Such a writer's writes go straight to the brick's file (which storage/posix
//!   opened for writing for this), around the graph, so the passthrough readers see them at
//!   once; its flush, fsync, locks and release still go through the graph.
//!
//! Page-cache opens in this mode do not keep the cache across opens: passthrough writes
//! change the file under it.
//!
//! Passthrough writes are made with the mount's (root) credentials, so the brick's kernel does
//! not clear setuid/setgid on them as it does for a caller's own write; the mount clears them
//! (as root, like a write would) when it lets a non-root writer pass through, before its
//! reply when it can tell, else right after it.
//!
//! The kernel refuses passthrough together with the writeback cache, so `--passthrough`
//! mounts without it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fuser::{
    BackingId, FileAttr, FileHandle, FopenFlags, Generation, INodeNo, ReplyCreate, ReplyOpen,
};
use xlator_api::BackingFile;

/// How one open was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through the page cache (the mount's usual way).
    Cached = 0,
    /// To the inode's backing file, by the kernel.
    Passthrough = 1,
}

struct InodeUse<I> {
    cached: u32,
    passthrough: u32,
    backing: Option<Arc<I>>,
}

impl<I> Default for InodeUse<I> {
    fn default() -> Self {
        InodeUse {
            cached: 0,
            passthrough: 0,
            backing: None,
        }
    }
}

struct State<I> {
    inodes: HashMap<u64, InodeUse<I>>,
    /// Open handle -> its inode and mode.
    opens: HashMap<u64, (u64, Mode)>,
}

impl<I> Default for State<I> {
    fn default() -> Self {
        State {
            inodes: HashMap::new(),
            opens: HashMap::new(),
        }
    }
}

/// Per-mount passthrough bookkeeping; inert unless `--passthrough` was given and the kernel
/// accepted it. `I` is the kernel's backing id (a stand-in in tests).
pub struct Passthrough<I = BackingId> {
    on: AtomicBool,
    st: Mutex<State<I>>,
    /// Opens answered so far: through the page cache, passing through.
    answered: [AtomicU64; 2],
    /// A registration failure was logged.
    warned: AtomicBool,
}

impl<I> Default for Passthrough<I> {
    fn default() -> Self {
        Passthrough {
            on: AtomicBool::new(false),
            st: Mutex::new(State::default()),
            answered: [AtomicU64::new(0), AtomicU64::new(0)],
            warned: AtomicBool::new(false),
        }
    }
}

impl<I> Passthrough<I> {
    /// Called from FUSE init once the kernel accepted passthrough.
    pub fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Whether opens are tracked and may pass through.
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State<I>> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chooses the mode of an open of `ino` that succeeded in the graph as handle `fh`, and
    /// records it. `backing` is the graph's backing file, if it gave one; `register` makes
    /// it a kernel backing id.
    fn choose(
        &self,
        ino: u64,
        fh: u64,
        backing: Option<BackingFile>,
        register: impl FnOnce(&BackingFile) -> std::io::Result<I>,
    ) -> Option<Arc<I>> {
        let mut st = self.lock();
        let u = st.inodes.entry(ino).or_default();
        let id = match (&u.backing, backing) {
            (Some(id), _) => Some(id.clone()),
            (None, Some(b)) if u.cached == 0 => match register(&b) {
                Ok(id) => {
                    let id = Arc::new(id);
                    u.backing = Some(id.clone());
                    Some(id)
                }
                Err(e) => {
                    if !self.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "the kernel refused a backing file ({e}; registering one needs \
                             CAP_SYS_ADMIN); such files are read through the mount (logged once)"
                        );
                    }
                    tracing::debug!(ino, "backing file not registered: {e}");
                    None
                }
            },
            _ => None,
        };
        let mode = if id.is_some() {
            u.passthrough += 1;
            Mode::Passthrough
        } else {
            u.cached += 1;
            Mode::Cached
        };
        st.opens.insert(fh, (ino, mode));
        self.answered[mode as usize].fetch_add(1, Ordering::Relaxed);
        id
    }

    /// Forgets handle `fh`; the inode's backing file is unregistered with its last
    /// passthrough open.
    pub fn released(&self, fh: FileHandle) {
        let mut st = self.lock();
        let Some((ino, mode)) = st.opens.remove(&fh.0) else {
            return;
        };
        let Some(u) = st.inodes.get_mut(&ino) else {
            return;
        };
        match mode {
            Mode::Cached => u.cached = u.cached.saturating_sub(1),
            Mode::Passthrough => u.passthrough = u.passthrough.saturating_sub(1),
        }
        if u.passthrough == 0 {
            u.backing = None;
        }
        if u.cached == 0 && u.passthrough == 0 {
            st.inodes.remove(&ino);
        }
    }

    /// Opens answered since the mount: (through the page cache, passing through).
    pub fn answered(&self) -> (u64, u64) {
        (
            self.answered[Mode::Cached as usize].load(Ordering::Relaxed),
            self.answered[Mode::Passthrough as usize].load(Ordering::Relaxed),
        )
    }

    /// Counts for the statedump: inodes open for passthrough, open handles by mode.
    pub fn counts(&self) -> (usize, usize, usize) {
        let st = self.lock();
        let pt_inodes = st.inodes.values().filter(|u| u.passthrough > 0).count();
        let pt = st
            .opens
            .values()
            .filter(|(_, m)| *m == Mode::Passthrough)
            .count();
        (pt_inodes, pt, st.opens.len())
    }
}

impl Passthrough<BackingId> {
    /// Answers an open that succeeded in the graph. `cached_flags` are the flags of a page
    /// cache open.
    pub fn reply_open(
        &self,
        reply: ReplyOpen,
        ino: INodeNo,
        fh: FileHandle,
        backing: Option<BackingFile>,
        cached_flags: FopenFlags,
    ) -> Mode {
        match self.choose(ino.0, fh.0, backing, |b| reply.open_backing(b)) {
            Some(id) => {
                reply.opened_passthrough(fh, FopenFlags::empty(), &id);
                Mode::Passthrough
            }
            None => {
                reply.opened(fh, Self::uncached(cached_flags));
                Mode::Cached
            }
        }
    }

    /// Answers a create that succeeded in the graph (never with a backing file of its own:
    /// it passes through only when the file existed and is open for passthrough).
    pub fn reply_create(
        &self,
        reply: ReplyCreate,
        ttl: &Duration,
        attr: &FileAttr,
        fh: FileHandle,
        cached_flags: FopenFlags,
    ) -> Mode {
        match self.choose(attr.ino.0, fh.0, None, |_| {
            Err(std::io::Error::other("a create brings no backing file"))
        }) {
            Some(id) => {
                reply.created_passthrough(ttl, attr, Generation(0), fh, FopenFlags::empty(), &id);
                Mode::Passthrough
            }
            None => {
                reply.created(ttl, attr, Generation(0), fh, Self::uncached(cached_flags));
                Mode::Cached
            }
        }
    }

    /// Whether an open of `ino` now would pass through (the inode has a backing file).
    pub fn has_backing(&self, ino: INodeNo) -> bool {
        self.lock()
            .inodes
            .get(&ino.0)
            .is_some_and(|u| u.backing.is_some())
    }

    /// Page-cache opens drop what the cache holds: passthrough writers may have changed the
    /// file since.
    fn uncached(flags: FopenFlags) -> FopenFlags {
        flags - FopenFlags::FOPEN_KEEP_CACHE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing() -> BackingFile {
        let f = std::fs::File::open("/proc/self/exe").expect("open");
        BackingFile::new(f.into()).expect("regular")
    }

    /// Registration as the kernel would answer it (tests have no FUSE device): a failure or
    /// an id.
    fn choose(p: &Passthrough<u32>, ino: u64, fh: u64, b: Option<BackingFile>, ok: bool) -> Mode {
        let id = p.choose(ino, fh, b, |_| {
            if ok {
                Ok(ino as u32)
            } else {
                Err(std::io::Error::other("no device"))
            }
        });
        if id.is_some() {
            Mode::Passthrough
        } else {
            Mode::Cached
        }
    }

    #[test]
    fn page_cache_opens_exclude_passthrough_ones() {
        let p = Passthrough::<u32>::default();
        // Registration fails: page cache.
        assert_eq!(choose(&p, 1, 10, Some(backing()), false), Mode::Cached);
        // A backing file now cannot be used while the inode is open through the page cache.
        assert_eq!(choose(&p, 1, 11, Some(backing()), true), Mode::Cached);
        p.released(FileHandle(10));
        p.released(FileHandle(11));
        assert_eq!(p.counts(), (0, 0, 0));
        assert!(p.lock().inodes.is_empty(), "nothing left of inode 1");
    }

    #[test]
    fn every_open_of_a_passthrough_inode_passes_through() {
        let p = Passthrough::<u32>::default();
        assert_eq!(choose(&p, 7, 70, Some(backing()), true), Mode::Passthrough);
        // A writer (no backing file of its own) and a reader whose registration would fail
        // both use the inode's backing id.
        assert_eq!(choose(&p, 7, 71, None, false), Mode::Passthrough);
        assert_eq!(choose(&p, 7, 72, Some(backing()), false), Mode::Passthrough);
        assert_eq!(p.counts(), (1, 3, 3));
        for fh in [70, 71, 72] {
            p.released(FileHandle(fh));
        }
        assert_eq!(p.counts(), (0, 0, 0));
        // The last passthrough open is gone: a writer uses the page cache again, and then a
        // reader with a backing file must too.
        assert_eq!(choose(&p, 7, 73, None, true), Mode::Cached);
        assert_eq!(choose(&p, 7, 74, Some(backing()), true), Mode::Cached);
        p.released(FileHandle(73));
        p.released(FileHandle(74));
        assert_eq!(choose(&p, 7, 75, Some(backing()), true), Mode::Passthrough);
    }
}
