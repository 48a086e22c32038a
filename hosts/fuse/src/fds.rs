//! The open-file table: kernel file handle (`fh`) -> [`Fd`].
//!
//! The host allocates [`FdId`]s (the fops' per-open identity) and uses the same number as the
//! kernel's `fh`. Ids start at 1 (0 is [`FdId::ANONYMOUS`]) and are never reused while the
//! process lives, so a late fop on a released handle cannot reach another file.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use fuser::FileHandle;
use xlator_api::{Fd, FdId, Gfid};

#[derive(Debug)]
pub struct FdTable {
    next: AtomicU64,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    fds: HashMap<FdId, Fd>,
    /// Per file, how many of its fds are open without O_DIRECT (through which the kernel may
    /// cache its pages).
    buffered: HashMap<Gfid, u32>,
    /// Fds the kernel reads and writes without its page cache although their flags have no
    /// O_DIRECT (FOPEN_DIRECT_IO: writable O_APPEND opens).
    uncached: HashSet<FdId>,
}

fn buffered(fd: &Fd) -> bool {
    fd.flags & (libc::O_DIRECT | libc::O_DIRECTORY) == 0
}

impl Default for FdTable {
    fn default() -> FdTable {
        FdTable {
            next: AtomicU64::new(1),
            open: Mutex::new(Open::default()),
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

    /// Makes `fd` reachable by its handle; returns the handle to give the kernel.
    pub fn insert(&self, fd: Fd) -> FileHandle {
        self.insert_as(fd, false)
    }

    /// [`insert`](Self::insert), telling whether the kernel was told to bypass its page
    /// cache for this open (FOPEN_DIRECT_IO) whatever its flags say.
    pub fn insert_as(&self, fd: Fd, kernel_direct: bool) -> FileHandle {
        let mut o = self.lock();
        if let Some(old) = o.fds.remove(&fd.id) {
            o.forget_buffered(&old);
        }
        if kernel_direct {
            o.uncached.insert(fd.id);
        } else if buffered(&fd) {
            *o.buffered.entry(fd.gfid).or_default() += 1;
        }
        o.fds.insert(fd.id, fd);
        FileHandle(fd.id.0)
    }

    /// The fd behind a kernel handle.
    pub fn get(&self, fh: FileHandle) -> Option<Fd> {
        self.lock().fds.get(&FdId(fh.0)).copied()
    }

    /// Forgets a handle (release/releasedir); returns the fd to release.
    pub fn remove(&self, fh: FileHandle) -> Option<Fd> {
        let mut o = self.lock();
        let fd = o.fds.remove(&FdId(fh.0))?;
        o.forget_buffered(&fd);
        Some(fd)
    }

    /// Whether `gfid` is open without O_DIRECT through some fd of this mount: only then may
    /// the kernel hold pages of it that a direct write makes stale.
    pub fn open_buffered(&self, gfid: &Gfid) -> bool {
        self.lock().buffered.contains_key(gfid)
    }

    /// An open fd on `gfid` (file or directory), if any: lets attribute fops reach an object
    /// that was unlinked or replaced by a rename while open, which the kernel asks about by
    /// node id only (fstat, fchmod). A directory replaced by a rename over it is still open
    /// through its directory fd (generic/035).
    pub fn find_open(&self, gfid: &Gfid) -> Option<Fd> {
        self.lock()
            .fds
            .values()
            .find(|fd| fd.gfid == *gfid)
            .copied()
    }

    /// Every fd still open (released on shutdown).
    pub fn drain(&self) -> Vec<Fd> {
        let mut o = self.lock();
        o.buffered.clear();
        o.fds.drain().map(|(_, fd)| fd).collect()
    }

    pub fn len(&self) -> usize {
        self.lock().fds.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // Single insert/remove operations: consistent even after a panic elsewhere.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Open {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_nonzero_and_handles_round_trip() {
        let t = FdTable::new();
        let g = Gfid::random();
        let a = t.allocate(g, libc::O_RDWR);
        let b = t.allocate(g, libc::O_RDONLY);
        assert_ne!(a.id, b.id);
        assert!(!a.is_anonymous() && !b.is_anonymous());
        let fh = t.insert(a);
        assert_eq!(t.get(fh), Some(a));
        assert_eq!(t.len(), 1);
        assert_eq!(t.remove(fh), Some(a));
        assert_eq!(t.get(fh), None);
        assert_eq!(t.remove(fh), None);
        // b was never inserted (its open failed): unreachable.
        assert_eq!(t.get(FileHandle(b.id.0)), None);
        let fh = t.insert(a);
        assert_eq!(t.find_open(&g), Some(a));
        assert_eq!(t.find_open(&Gfid::random()), None);
        t.remove(fh);
        let d = t.allocate(g, libc::O_DIRECTORY);
        t.insert(d);
        assert_eq!(
            t.find_open(&g),
            Some(d),
            "an open directory answers for a removed one"
        );
    }

    #[test]
    fn buffered_opens_are_counted_per_file() {
        let t = FdTable::new();
        let g = Gfid::random();
        let direct = t.insert(t.allocate(g, libc::O_RDWR | libc::O_DIRECT));
        let appender = t.insert_as(t.allocate(g, libc::O_WRONLY), true);
        assert!(
            !t.open_buffered(&g),
            "O_DIRECT and FOPEN_DIRECT_IO only: no pages to drop"
        );
        let a = t.insert(t.allocate(g, libc::O_RDONLY));
        let b = t.insert(t.allocate(g, libc::O_RDWR));
        t.insert(t.allocate(g, libc::O_DIRECTORY));
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
        let c = t.insert(t.allocate(g, libc::O_RDONLY));
        assert!(t.open_buffered(&g));
        t.remove(c);
        assert!(!t.open_buffered(&g));
        assert!(!t.open_buffered(&Gfid::random()));
    }

    #[test]
    fn drain_returns_everything_open() {
        let t = FdTable::new();
        for _ in 0..3 {
            let fd = t.allocate(Gfid::random(), 0);
            t.insert(fd);
        }
        assert_eq!(t.drain().len(), 3);
        assert_eq!(t.len(), 0);
    }
}
