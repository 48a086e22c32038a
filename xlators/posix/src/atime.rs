//! Access times of files reached through the brick.
//!
//! A client's reads are often served from its own page cache and never reach the brick, so
//! reads alone would leave atime where the brick's last read left it (a file written and
//! then read back on a client would never show the read). The brick therefore counts an
//! open for reading as an access: [`touch`] makes a one-byte read at the end of the file
//! (no data, no page cache, no readahead), and the brick's kernel updates atime under the brick file system's own rule
//! (relatime, strictatime, noatime, lazytime): the same rule, and the same ctime-preserving
//! update, as any read there. A utimensat would not do: it sets ctime too.
//!
//! A client that does not want atime touched (a `noatime` or read-only mount, `nodiratime`
//! for directories, or O_NOATIME from the application) opens with O_NOATIME; [`no_atime`]
//! sets it on the brick's descriptor as root, since the kernel refuses O_NOATIME to anyone
//! but the owner and the caller's own open already passed the client's checks.

use std::os::fd::{AsRawFd, BorrowedFd};

use xlator_api::Errno;

use crate::creds;

/// Whether an open with `flags` of a regular file counts as an access: it may read, and
/// neither truncates (a modification) nor asks for O_NOATIME or O_DIRECT (a one-byte read
/// is not an aligned direct read).
pub fn counts_as_access(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_WRONLY
        && flags & (libc::O_TRUNC | libc::O_NOATIME | libc::O_DIRECT | libc::O_PATH) == 0
}

/// Marks `fd` accessed: a one-byte read at `end`, the file's size as the open found it,
/// which reads nothing, looks up no page and starts no readahead (a read at offset 0 would
/// pull the file's first pages into the brick's cache, defeating `direct-read-min`), yet the
/// kernel updates atime as for any read. RWF_NOWAIT in case the file grew meanwhile. Errors
/// are ignored: atime is advisory, the open has succeeded.
pub fn touch(fd: BorrowedFd<'_>, end: i64) {
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&raw mut byte).cast(),
        iov_len: 1,
    };
    // SAFETY: one valid iovec of one byte that outlives the call; plain integer arguments.
    let r = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, end, libc::RWF_NOWAIT) };
    if r < 0 {
        tracing::trace!("atime touch: {}", std::io::Error::last_os_error());
    }
}

/// Sets O_NOATIME on `fd` (as root: see the module doc). The brick not running as root
/// gets EPERM for files it does not own; the open then fails, since honouring the client's
/// noatime is part of its meaning.
pub fn no_atime(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let raw = fd.as_raw_fd();
    // SAFETY: plain integer arguments on a descriptor we own.
    let cur = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if cur < 0 {
        return Err(Errno::last());
    }
    // SAFETY: as above.
    let r = creds::as_root(|| unsafe { libc::fcntl(raw, libc::F_SETFL, cur | libc::O_NOATIME) });
    if r < 0 {
        return Err(Errno::last());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reading_opens_count_as_an_access() {
        assert!(counts_as_access(libc::O_RDONLY));
        assert!(counts_as_access(libc::O_RDWR | libc::O_APPEND));
        assert!(!counts_as_access(libc::O_WRONLY));
        assert!(!counts_as_access(libc::O_RDONLY | libc::O_NOATIME));
        assert!(!counts_as_access(libc::O_RDWR | libc::O_TRUNC));
        assert!(!counts_as_access(libc::O_RDONLY | libc::O_DIRECT));
    }
}
