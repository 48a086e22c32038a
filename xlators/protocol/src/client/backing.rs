//! Taking a backing file from a brick on this machine: the brick's process is known by a
//! pidfd from the Unix socket itself (`SO_PEERPIDFD`, so it cannot be a recycled pid), and an
//! open reply names the brick's descriptor by number; `pidfd_getfd(2)` copies it into this
//! process. Needs the right to ptrace the brick (same user without a Yama restriction, or
//! CAP_SYS_PTRACE); without it the open simply has no backing file.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use xlator_api::BackingFile;

use crate::wire::WireBacking;

/// Logs `msg` as a warning the first time any connection of this process calls it.
pub fn warn_once(msg: &str) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!("{msg} (logged once)");
    }
}

/// A pidfd of the process at the other end of a connected Unix socket.
pub fn peer_pidfd(sock: &impl AsRawFd) -> std::io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a socket fd, an int to write and its size.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &mut len,
        )
    };
    if r != 0 || fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this new descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Copies the brick's descriptor `w.fd` into this process and checks that it is the file the
/// brick described (device and inode), not a descriptor reused since.
pub fn fetch(pidfd: &OwnedFd, w: WireBacking) -> std::io::Result<BackingFile> {
    // SAFETY: a pidfd, a descriptor number in that process, no flags.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), w.fd, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pidfd_getfd returned a new descriptor of ours.
    let fd = unsafe { OwnedFd::from_raw_fd(r as i32) };
    let b = BackingFile::new(fd)?;
    if (b.dev(), b.ino()) != (w.dev, w.ino) {
        return Err(std::io::Error::other(format!(
            "descriptor {} of the brick is no longer the file it named",
            w.fd
        )));
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our own process stands in for the brick: a socket pair's peer is ourselves.
    #[test]
    fn a_descriptor_is_fetched_and_checked() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let pidfd = match peer_pidfd(&a) {
            Ok(p) => p,
            // Before Linux 6.5: clients then take no backing files (they read through the
            // brick), which is what a failing `peer_pidfd` does in `handshake`.
            Err(e)
                if e.raw_os_error() == Some(libc::ENOPROTOOPT)
                    && std::env::var("XLFS_E2E_REQUIRE").as_deref() != Ok("1") =>
            {
                eprintln!("SKIPPED: the kernel has no SO_PEERPIDFD (Linux 6.5): {e}");
                return;
            }
            Err(e) => panic!("SO_PEERPIDFD (Linux 6.5): {e}"),
        };
        let f = std::fs::File::open("/proc/self/exe").expect("open");
        let orig = BackingFile::new(f.into()).expect("regular");
        let w = WireBacking {
            fd: orig.raw_fd(),
            dev: orig.dev(),
            ino: orig.ino(),
        };
        let got = fetch(&pidfd, w).expect("fetch");
        assert_ne!(got.raw_fd(), orig.raw_fd(), "a copy, not the same number");
        assert_eq!(got, orig);
        let wrong = WireBacking {
            ino: w.ino + 1,
            ..w
        };
        assert!(
            fetch(&pidfd, wrong).is_err(),
            "another file's identity is refused"
        );
        let closed = WireBacking { fd: 1_000_000, ..w };
        assert!(fetch(&pidfd, closed).is_err());
    }
}
