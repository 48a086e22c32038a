//! Per-fd state: the open file behind each host [`FdId`].

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};

use xlator_api::{Errno, FdId, Gfid};

/// An open file or directory of the brick.
pub struct OpenFile {
    pub fd: OwnedFd,
    pub gfid: Gfid,
    /// The flags it was opened with (after any O_DIRECT fallback).
    pub flags: i32,
    pub is_dir: bool,
    /// Serialises `lseek` + `getdents` on a directory stream.
    pub dir_pos: Mutex<()>,
    /// A buffered twin of an `O_DIRECT` fd, for I/O the device cannot take unaligned.
    pub buffered: OnceLock<OwnedFd>,
    /// An O_DIRECT twin of a buffered fd, for large reads of data the page cache does not
    /// hold (`direct-read-min`); `None` once the file system refused O_DIRECT.
    pub direct: OnceLock<Option<OwnedFd>>,
}

impl OpenFile {
    pub fn new(fd: OwnedFd, gfid: Gfid, flags: i32, is_dir: bool) -> OpenFile {
        OpenFile {
            fd,
            gfid,
            flags,
            is_dir,
            dir_pos: Mutex::new(()),
            buffered: OnceLock::new(),
            direct: OnceLock::new(),
        }
    }
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
    pub fn direct(&self) -> bool {
        self.flags & libc::O_DIRECT != 0
    }
}

/// FdId -> open file.
#[derive(Default)]
pub struct FdTable {
    map: Mutex<HashMap<FdId, Arc<OpenFile>>>,
}

impl FdTable {
    /// Registers `f` under `id`; an id already in use is a host bug (EBADF), and the anonymous
    /// id cannot hold state (EINVAL).
    pub fn insert(&self, id: FdId, f: OpenFile) -> Result<(), Errno> {
        if id == FdId::ANONYMOUS {
            return Err(Errno::EINVAL);
        }
        let mut m = self.map.lock().map_err(|_| Errno::EIO)?;
        if m.contains_key(&id) {
            return Err(Errno::EBADF);
        }
        m.insert(id, Arc::new(f));
        Ok(())
    }

    pub fn get(&self, id: FdId) -> Result<Arc<OpenFile>, Errno> {
        self.map
            .lock()
            .map_err(|_| Errno::EIO)?
            .get(&id)
            .cloned()
            .ok_or(Errno::EBADF)
    }

    pub fn remove(&self, id: FdId) -> Option<Arc<OpenFile>> {
        self.map.lock().ok()?.remove(&id)
    }

    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }
}
