//! Byte-range lock queries through the mount (generic/478): F_GETLK and F_OFD_GETLK report a
//! held lock of another owner only when it conflicts with the type asked about, else F_UNLCK
//! with the rest of the request as given; a process's own locks never conflict.

use super::*;
use std::os::fd::{FromRawFd, OwnedFd};

/// fcntl(2) lock command `cmd` on `fd` for `[start, start + len)`; the answer's
/// (type, start, len, pid).
fn lock(
    fd: i32,
    cmd: i32,
    typ: i32,
    start: i64,
    len: i64,
) -> std::io::Result<(i32, i64, i64, i32)> {
    // SAFETY: a zeroed flock is a valid value; the fields used are set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = start;
    fl.l_len = len;
    // SAFETY: an open descriptor and a valid flock for the lock commands.
    let r = unsafe { libc::fcntl(fd, cmd, &mut fl) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((i32::from(fl.l_type), fl.l_start, fl.l_len, fl.l_pid))
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut p = [0i32; 2];
    // SAFETY: pipe(2) fills two fresh fds, owned from here on.
    let r = unsafe { libc::pipe(p.as_mut_ptr()) };
    assert_eq!(r, 0, "pipe");
    // SAFETY: just made, owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) }
}

/// Another process holding a POSIX lock on `path` until dropped.
struct Holder {
    pid: i32,
    release: Option<OwnedFd>,
}

impl Holder {
    /// Forks a process that opens `path` and sets `typ` on `[start, start + len)` with
    /// `cmd` (F_SETLK or F_OFD_SETLK), then waits for the parent to let go.
    fn spawn(path: &Path, cmd: i32, typ: i32, start: i64, len: i64) -> Holder {
        let c = cstr(path);
        let (ready_r, ready_w) = pipe();
        let (go_r, go_w) = pipe();
        // SAFETY: the child makes only async-signal-safe calls (open, fcntl, read, write,
        // _exit) before it exits; it never returns into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: as above. The child closes its copies of the parent's ends, so it sees
            // EOF when the parent lets go.
            unsafe {
                libc::close(ready_r.as_raw_fd());
                libc::close(go_w.as_raw_fd());
                let fd = libc::open(c.as_ptr(), libc::O_RDWR);
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = typ as i16;
                fl.l_whence = libc::SEEK_SET as i16;
                fl.l_start = start;
                fl.l_len = len;
                let ok: u8 = if fd >= 0 && libc::fcntl(fd, cmd, &mut fl) == 0 {
                    b'y'
                } else {
                    b'n'
                };
                libc::write(ready_w.as_raw_fd(), (&ok as *const u8).cast(), 1);
                let mut b = 0u8;
                libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        drop((ready_w, go_r));
        let mut ok = [0u8];
        let mut r = File::from(ready_r);
        std::io::Read::read_exact(&mut r, &mut ok).expect("holder ready");
        let h = Holder {
            pid,
            release: Some(go_w),
        };
        assert_eq!(&ok, b"y", "the holder could not lock");
        h
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.release.take());
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// generic/478's matrix: a lock on [0,9] held by another process, queried on [0,9], [5,24]
/// and [20,29] with both types, by F_GETLK and F_OFD_GETLK.
#[test]
fn lock_queries_report_only_conflicting_locks_of_other_owners() {
    require_fuse!();
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &[]);
    let path = mnt.join("f");
    fs::write(&path, vec![0u8; 64]).expect("write");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let fd = f.as_raw_fd();
    let (rd, wr, un) = (libc::F_RDLCK, libc::F_WRLCK, libc::F_UNLCK);
    for held_cmd in [libc::F_SETLK, libc::F_OFD_SETLK] {
        for held in [rd, wr] {
            let h = Holder::spawn(&path, held_cmd, held, 0, 10);
            for query in [libc::F_GETLK, libc::F_OFD_GETLK] {
                for asked in [rd, wr] {
                    for (start, len, overlaps) in [(0, 10, true), (5, 20, true), (20, 10, false)] {
                        let what = format!(
                            "held {held} by cmd {held_cmd}, asked {asked} by cmd {query} on \
                             [{start},+{len})"
                        );
                        let got = lock(fd, query, asked, start, len).expect(&what);
                        let conflicts = overlaps && (held == wr || asked == wr);
                        if conflicts {
                            assert_eq!((got.0, got.1, got.2), (held, 0, 10), "{what}");
                            // F_OFD_GETLK answers no process (-1). F_GETLK answers the holder's
                            // pid, also for an OFD lock (a local file system says -1 there;
                            // FUSE carries no lock kind, and the kernel turns a pid it cannot
                            // find into 0, never -1).
                            let pid = if query == libc::F_OFD_GETLK {
                                -1
                            } else {
                                h.pid
                            };
                            assert_eq!(got.3, pid, "{what}: pid");
                        } else {
                            assert_eq!(got, (un, start, len, 0), "{what}");
                        }
                    }
                }
            }
            drop(h);
        }
    }
    drop(f);
    drop(m);
}

/// A process's own POSIX locks, and an open file description's own OFD locks, never
/// conflict with its queries; another open of the same file is another OFD owner.
#[test]
fn own_locks_do_not_conflict_with_queries() {
    require_fuse!();
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &[]);
    let path = mnt.join("f");
    fs::write(&path, vec![0u8; 64]).expect("write");
    let open = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open")
    };
    let (a, b) = (open(), open());
    let (wr, un) = (libc::F_WRLCK, libc::F_UNLCK);
    lock(a.as_raw_fd(), libc::F_SETLK, wr, 0, 10).expect("posix lock");
    // Same process, another fd: the same POSIX owner.
    let got = lock(b.as_raw_fd(), libc::F_GETLK, wr, 0, 10).expect("getlk");
    assert_eq!(got.0, un, "own POSIX lock through another fd: {got:?}");
    // An OFD query is another owner than the process: the POSIX lock conflicts.
    let got = lock(b.as_raw_fd(), libc::F_OFD_GETLK, wr, 0, 10).expect("ofd getlk");
    assert_eq!((got.0, got.3), (wr, -1), "POSIX lock seen by an OFD query");
    lock(a.as_raw_fd(), libc::F_SETLK, un, 0, 10).expect("unlock");

    lock(a.as_raw_fd(), libc::F_OFD_SETLK, wr, 20, 10).expect("ofd lock");
    let got = lock(a.as_raw_fd(), libc::F_OFD_GETLK, wr, 20, 10).expect("ofd getlk");
    assert_eq!(got.0, un, "own OFD lock: {got:?}");
    let got = lock(b.as_raw_fd(), libc::F_OFD_GETLK, wr, 20, 10).expect("ofd getlk");
    assert_eq!(
        (got.0, got.1, got.2, got.3),
        (wr, 20, 10, -1),
        "another OFD's lock"
    );
    let got = lock(b.as_raw_fd(), libc::F_GETLK, wr, 20, 10).expect("getlk");
    assert_eq!(
        (got.0, got.3),
        (wr, std::process::id() as i32),
        "OFD lock seen by a POSIX query (the setter's pid: see above)"
    );
    // Closing a duplicate of `a` (the same OFD) or `b` (another OFD, same process) leaves
    // `a`'s OFD lock.
    drop(a.try_clone().expect("dup"));
    let got = lock(b.as_raw_fd(), libc::F_OFD_GETLK, wr, 20, 10).expect("ofd getlk");
    assert_eq!(got.0, wr, "OFD lock after closing a dup of its fd: {got:?}");
    drop(b);
    let c = open();
    let got = lock(c.as_raw_fd(), libc::F_OFD_GETLK, wr, 20, 10).expect("ofd getlk");
    assert_eq!(got.0, wr, "OFD lock after closing another fd: {got:?}");
    // The kernel sends FUSE's RELEASE (which ends an open file description and its OFD
    // locks) after close(2) has returned, never before: the lock goes soon after, not at once.
    drop(a);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let got = loop {
        let got = lock(c.as_raw_fd(), libc::F_OFD_GETLK, wr, 20, 10).expect("ofd getlk");
        if got.0 == un || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(got.0, un, "OFD lock 10 s after its fd closed: {got:?}");

    // A POSIX lock goes with the first close of any fd of the file by its process.
    lock(c.as_raw_fd(), libc::F_SETLK, wr, 0, 10).expect("posix lock");
    let other = open();
    let got = lock(other.as_raw_fd(), libc::F_OFD_GETLK, wr, 0, 10).expect("ofd getlk");
    assert_eq!(got.0, wr, "POSIX lock held: {got:?}");
    drop(open());
    let got = lock(other.as_raw_fd(), libc::F_OFD_GETLK, wr, 0, 10).expect("ofd getlk");
    assert_eq!(
        got.0, un,
        "POSIX lock after a close by its process: {got:?}"
    );
    drop((c, other));
    drop(m);
}
