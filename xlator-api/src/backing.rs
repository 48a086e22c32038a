//! Backing files: how an `open` reply can hand its caller a descriptor of the file's data, so
//! a host reads it without the graph (FUSE passthrough, like HDFS's short-circuit local reads).
//!
//! The rules, enforced by the core and not left to each translator:
//! - a caller asks by setting [`BackingWanted`] on the open's [`Ctx`](crate::Ctx); a leaf that
//!   can answer (storage/posix, for read-only opens of regular files) returns an
//!   [`Opened::backing`], and a translator may drop it but never makes one up;
//! - a backing file reaches a caller only through translators that declare
//!   [`Translator::KEEPS_FILE_DATA`](crate::Translator::KEEPS_FILE_DATA): the graph engine wraps
//!   every other one in a layer that drops the backing file from its open replies, so a
//!   translator that changes data on its way (encryption, compression, striping, replication)
//!   is never bypassed by accident, even if it knows nothing about backing files;
//! - protocol/server passes one to its client only over a Unix socket (the client fetches it
//!   from the brick process with `pidfd_getfd(2)`, checking device and inode), never over TCP.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

use abi_stable::StableAbi;
use abi_stable::std_types::{RArc, ROption};

use crate::ctx::CtxExtension;

/// An open descriptor of a file's data (closed when the last clone is dropped), with the
/// device and inode it was opened on (so a receiver can check it got the right file).
/// storage/posix opens it read-write: the kernel sends writers beside passthrough readers to
/// it too.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct BackingFile(RArc<BackingInner>);

#[repr(C)]
#[derive(StableAbi)]
struct BackingInner {
    fd: i32,
    dev: u64,
    ino: u64,
}

impl Drop for BackingInner {
    fn drop(&mut self) {
        // SAFETY: `fd` was taken from an `OwnedFd` and nobody else owns it.
        drop(unsafe { OwnedFd::from_raw_fd(self.fd) });
    }
}

impl BackingFile {
    /// Takes ownership of `fd`, a descriptor of a regular file (not O_DIRECT), recording its
    /// device and inode.
    pub fn new(fd: OwnedFd) -> std::io::Result<BackingFile> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid fd and room for a `stat`.
        if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fstat succeeded and filled it.
        let st = unsafe { st.assume_init() };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(BackingFile(RArc::new(BackingInner {
            fd: fd.into_raw_fd(),
            dev: st.st_dev,
            ino: st.st_ino,
        })))
    }

    /// The descriptor's number in this process.
    pub fn raw_fd(&self) -> i32 {
        self.0.fd
    }
    /// The device the file is on (`st_dev`).
    pub fn dev(&self) -> u64 {
        self.0.dev
    }
    /// The file's inode number on that device (`st_ino`).
    pub fn ino(&self) -> u64 {
        self.0.ino
    }
}

impl AsFd for BackingFile {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd stays open while `self` (a reference to its owner) lives.
        unsafe { BorrowedFd::borrow_raw(self.0.fd) }
    }
}

impl std::fmt::Debug for BackingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BackingFile(fd {} dev {} ino {})",
            self.0.fd, self.0.dev, self.0.ino
        )
    }
}

impl PartialEq for BackingFile {
    fn eq(&self, other: &BackingFile) -> bool {
        self.0.dev == other.0.dev && self.0.ino == other.0.ino
    }
}

/// Reply of `open`.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Debug, Default)]
pub struct Opened {
    /// A descriptor of the file's data the caller may read directly, when it asked
    /// ([`BackingWanted`]) and every translator on the way keeps file data as stored (see the
    /// module docs). Not serialized: protocol/server and protocol/client move it themselves.
    #[serde(skip)]
    pub backing: ROption<BackingFile>,
}

impl Opened {
    /// A reply without a backing file.
    pub fn plain() -> Opened {
        Opened::default()
    }
}

/// Set on an `open`'s context by a caller that can use [`Opened::backing`] (a FUSE
/// passthrough mount), and by protocol/server for such a client.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BackingWanted;

impl CtxExtension for BackingWanted {
    const KEY: &'static str = "local/backing-wanted";
    fn encode(&self) -> Vec<u8> {
        Vec::new()
    }
    fn decode(_: &[u8]) -> Option<Self> {
        Some(BackingWanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backing_file_closes_its_fd_with_the_last_clone() {
        let f = std::fs::File::open("/proc/self/status").expect("open");
        let b = BackingFile::new(f.into()).expect("regular file");
        let fd = b.raw_fd();
        let b2 = b.clone();
        drop(b);
        // SAFETY: F_GETFD on a number; only reads.
        assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0, "still open");
        assert_eq!(b2.raw_fd(), fd);
        drop(b2);
        // SAFETY: as above.
        assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0, "closed");
    }

    #[test]
    fn only_regular_files_back_an_open() {
        let d = std::fs::File::open("/").expect("open /");
        assert!(BackingFile::new(d.into()).is_err());
    }
}
