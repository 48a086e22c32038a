//! FUSE passthrough (`--passthrough`): a read-only open the graph answers with a backing file
//! (storage/posix on this machine hands one out over the brick's Unix socket; see
//! `xlator_api::BackingFile`) is registered with the kernel, which then reads that file
//! directly: no read request reaches this process or the brick.
//!
//! The kernel puts each inode in one I/O mode while it is open: passthrough opens (all with
//! the same backing file) and page-cache opens exclude each other, and an open that breaks
//! the rule fails with EIO. Direct-I/O opens go with either. So per inode this table counts
//! how it is open and chooses, at reply time, a mode compatible with every earlier reply:
//! - a read-only open with a backing file passes through, unless the inode is open through
//!   the page cache (then it uses the page cache too);
//! - any other open (writers, opens without a backing file) uses the page cache, unless the
//!   inode is open for passthrough: then it is direct I/O, and its writes are sent with
//!   O_DSYNC, so performance/write-behind cannot hold data the passthrough readers would
//!   miss.
//!
//! Limits: a shared writable mmap of a file while it is open for passthrough fails (the
//! kernel needs the page cache for it); the kernel refuses passthrough together with the
//! writeback cache, so `--passthrough` mounts without it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fuser::{BackingId, FileHandle, FopenFlags, INodeNo, ReplyOpen};
use xlator_api::BackingFile;

/// How one open was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through the page cache (the mount's usual way).
    Cached,
    /// Read by the kernel from the backing file.
    Passthrough,
    /// Direct I/O beside passthrough opens; writes carry O_DSYNC.
    Direct,
}

#[derive(Default)]
struct InodeUse {
    cached: u32,
    passthrough: u32,
    backing: Option<Arc<BackingId>>,
}

#[derive(Default)]
struct State {
    inodes: HashMap<u64, InodeUse>,
    /// Open handle -> its inode and mode.
    opens: HashMap<u64, (u64, Mode)>,
}

/// Per-mount passthrough bookkeeping; inert unless `--passthrough` was given and the kernel
/// accepted it.
#[derive(Default)]
pub struct Passthrough {
    on: AtomicBool,
    st: Mutex<State>,
}

impl Passthrough {
    /// Called from FUSE init once the kernel accepted passthrough.
    pub fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Whether opens are tracked and may pass through.
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chooses the mode of an open of `ino` that succeeded in the graph as handle `fh` and
    /// records it. `backing` is the graph's backing file (read-only opens only).
    fn choose(
        &self,
        ino: u64,
        fh: u64,
        backing: Option<BackingFile>,
        register: impl FnOnce(&BackingFile) -> std::io::Result<BackingId>,
    ) -> (Mode, Option<Arc<BackingId>>) {
        let mut st = self.lock();
        let u = st.inodes.entry(ino).or_default();
        let (mode, id) = match backing {
            Some(b) if u.cached == 0 => match &u.backing {
                Some(id) => (Mode::Passthrough, Some(id.clone())),
                None => match register(&b) {
                    Ok(id) => {
                        let id = Arc::new(id);
                        u.backing = Some(id.clone());
                        (Mode::Passthrough, Some(id))
                    }
                    Err(e) => {
                        tracing::debug!(ino, "backing file not registered: {e}");
                        (Self::without_backing(u), None)
                    }
                },
            },
            _ => (Self::without_backing(u), None),
        };
        match mode {
            Mode::Cached => u.cached += 1,
            Mode::Passthrough => u.passthrough += 1,
            Mode::Direct => {}
        }
        st.opens.insert(fh, (ino, mode));
        (mode, id)
    }

    fn without_backing(u: &InodeUse) -> Mode {
        if u.passthrough > 0 {
            Mode::Direct
        } else {
            Mode::Cached
        }
    }

    /// Answers an open that succeeded in the graph. `cached_flags` are the flags of a page
    /// cache open.
    pub fn reply_open(
        &self,
        reply: ReplyOpen,
        ino: INodeNo,
        fh: FileHandle,
        backing: Option<BackingFile>,
        cached_flags: FopenFlags,
    ) {
        let (mode, id) = self.choose(ino.0, fh.0, backing, |b| reply.open_backing(b));
        match (mode, id) {
            (Mode::Passthrough, Some(id)) => reply.opened_passthrough(fh, FopenFlags::empty(), &id),
            (Mode::Direct, _) => reply.opened(fh, FopenFlags::FOPEN_DIRECT_IO),
            _ => reply.opened(fh, cached_flags),
        }
    }

    /// The flags of a create's reply (a writer: page cache, or direct I/O beside
    /// passthrough opens of the same, already existing, file).
    pub fn created(&self, ino: INodeNo, fh: FileHandle, cached_flags: FopenFlags) -> FopenFlags {
        match self.choose(ino.0, fh.0, None, |_| unreachable!()).0 {
            Mode::Direct => FopenFlags::FOPEN_DIRECT_IO,
            _ => cached_flags,
        }
    }

    /// Per-write flags to add for handle `fh`.
    pub fn write_flags(&self, fh: FileHandle) -> i32 {
        match self.lock().opens.get(&fh.0) {
            Some((_, Mode::Direct)) => libc::O_DSYNC,
            _ => 0,
        }
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
            Mode::Direct => {}
        }
        if u.passthrough == 0 {
            u.backing = None;
        }
        if u.cached == 0 && u.passthrough == 0 {
            st.inodes.remove(&ino);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn backing() -> BackingFile {
        let f = std::fs::File::open("/proc/self/exe").expect("open");
        BackingFile::new(f.into()).expect("regular")
    }

    /// A stand-in for the kernel's registration (tests have no FUSE device).
    fn choose(p: &Passthrough, ino: u64, fh: u64, b: Option<BackingFile>) -> Mode {
        p.choose(ino, fh, b, |_| Err(std::io::Error::other("no device")))
            .0
    }

    #[test]
    fn modes_never_mix_page_cache_and_passthrough_opens() {
        let p = Passthrough::default();
        // No backing file (registration fails here): page cache, counted.
        assert_eq!(choose(&p, 1, 10, Some(backing())), Mode::Cached);
        // A second open of the same inode must not pass through while it is cached.
        assert_eq!(choose(&p, 1, 11, None), Mode::Cached);
        p.released(FileHandle(10));
        p.released(FileHandle(11));
        assert_eq!(p.counts(), (0, 0, 0));
        assert!(p.lock().inodes.is_empty(), "nothing left of inode 1");
    }

    #[test]
    fn writers_beside_passthrough_readers_go_direct_and_sync() {
        let p = Passthrough::default();
        // Pretend the inode is open for passthrough.
        {
            let mut st = p.lock();
            let u = st.inodes.entry(7).or_default();
            u.passthrough = 1;
            st.opens.insert(70, (7, Mode::Passthrough));
        }
        assert_eq!(choose(&p, 7, 71, None), Mode::Direct);
        assert_eq!(p.write_flags(FileHandle(71)), libc::O_DSYNC);
        assert_eq!(p.write_flags(FileHandle(70)), 0);
        assert_eq!(
            p.created(INodeNo(7), FileHandle(72), FopenFlags::FOPEN_KEEP_CACHE),
            FopenFlags::FOPEN_DIRECT_IO
        );
        p.released(FileHandle(70));
        // The last passthrough open is gone: the next writer uses the page cache again.
        assert_eq!(choose(&p, 7, 73, None), Mode::Cached);
        assert_eq!(p.write_flags(FileHandle(73)), 0);
        for fh in [71, 72, 73] {
            p.released(FileHandle(fh));
        }
        assert_eq!(p.counts(), (0, 0, 0));
    }
}
