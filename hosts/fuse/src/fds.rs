//! The open-file table: kernel file handle (`fh`) -> [`Fd`].
//!
//! The host allocates [`FdId`]s (the fops' per-open identity) and uses the same number as the
//! kernel's `fh`. Ids start at 1 (0 is [`FdId::ANONYMOUS`]) and are never reused while the
//! process lives, so a late fop on a released handle cannot reach another file.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use fuser::FileHandle;
use xlator_api::{Fd, FdId, Gfid};

#[derive(Debug)]
pub struct FdTable {
    next: AtomicU64,
    open: Mutex<HashMap<FdId, Fd>>,
}

impl Default for FdTable {
    fn default() -> FdTable {
        FdTable {
            next: AtomicU64::new(1),
            open: Mutex::new(HashMap::new()),
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
        self.lock().insert(fd.id, fd);
        FileHandle(fd.id.0)
    }

    /// The fd behind a kernel handle.
    pub fn get(&self, fh: FileHandle) -> Option<Fd> {
        self.lock().get(&FdId(fh.0)).copied()
    }

    /// Forgets a handle (release/releasedir); returns the fd to release.
    pub fn remove(&self, fh: FileHandle) -> Option<Fd> {
        self.lock().remove(&FdId(fh.0))
    }

    /// An open fd on `gfid` (file or directory), if any: lets attribute fops reach an object
    /// that was unlinked or replaced by a rename while open, which the kernel asks about by
    /// node id only (fstat, fchmod). A directory replaced by a rename over it is still open
    /// through its directory fd (generic/035).
    pub fn find_open(&self, gfid: &Gfid) -> Option<Fd> {
        self.lock().values().find(|fd| fd.gfid == *gfid).copied()
    }

    /// Every fd still open (released on shutdown).
    pub fn drain(&self) -> Vec<Fd> {
        self.lock().drain().map(|(_, fd)| fd).collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<FdId, Fd>> {
        // Single insert/remove operations: consistent even after a panic elsewhere.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
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
