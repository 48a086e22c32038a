//! Lock waits through the mount end as they do on a local file system (issue 24, bug 4): a
//! process waiting in F_SETLKW can be killed (before, it slept uninterruptibly until the lock
//! was granted, so a holder that waited for it waited forever: the stress-ng `lockf`
//! stressor), a caught signal without SA_RESTART makes F_SETLKW fail with EINTR and withdraws
//! the request, and a signal with SA_RESTART or a blocked one leaves the wait going. Needs
//! /dev/fuse and root, like tests/mount.rs.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a waiter may take to react to what the test did (the host looks at a waiting
/// caller at least every 50 ms).
const REACT: Duration = Duration::from_secs(5);
/// How long a waiter that must go on waiting is watched.
const STILL: Duration = Duration::from_millis(400);

const WR: i32 = libc::F_WRLCK;

/// fcntl(2) lock command `cmd` on `fd` for `[start, start + len)`; the answer's (type, pid).
fn lock(fd: i32, cmd: i32, typ: i32, start: i64, len: i64) -> std::io::Result<(i32, i32)> {
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
    Ok((i32::from(fl.l_type), fl.l_pid))
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut p = [0i32; 2];
    // SAFETY: pipe2(2) fills two fresh fds, owned from here on.
    let r = unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe");
    // SAFETY: just made, owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) }
}

/// Whether `fd` has something to read within `t`.
fn readable(fd: &OwnedFd, t: Duration) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, t.as_millis() as i32) };
    r == 1
}

/// How a waiter handles signals before it waits.
#[derive(Clone, Copy)]
enum Signals {
    /// Default actions.
    Default,
    /// A handler for SIGALRM, with or without SA_RESTART.
    Handler { restart: bool },
    /// SIGUSR1 blocked.
    Blocked,
}

extern "C" fn on_signal(_: i32) {}

/// The processes a test forked: each is killed and reaped when dropped (declare it before the
/// mount, so that the mount goes first and releases a waiter stuck in it).
#[derive(Default)]
struct Kids(Vec<i32>);

impl Drop for Kids {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: our own children, not reaped yet (reaped ones are removed).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

impl Kids {
    /// Waits up to `t` for child `pid` to end; whether it did (then it is reaped).
    fn reaped(&mut self, pid: i32, t: Duration) -> bool {
        let start = Instant::now();
        loop {
            // SAFETY: our own child.
            let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
            if r == pid {
                self.0.retain(|&p| p != pid);
                return true;
            }
            if start.elapsed() > t {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A forked process waiting (F_SETLKW) for a write lock on `[0, 10)` of a file.
struct Waiter {
    pid: i32,
    /// Gets the fcntl's outcome: 0 or its errno, as 4 bytes.
    outcome: OwnedFd,
    /// Kept open: the process waits on it after telling its outcome, until it is killed.
    _go: OwnedFd,
}

impl Waiter {
    fn spawn(kids: &mut Kids, path: &Path, signals: Signals) -> Waiter {
        Waiter::spawn_as(kids, path, signals, false)
    }

    /// With `flock`, the process waits in flock(LOCK_EX) instead (whole file).
    fn spawn_as(kids: &mut Kids, path: &Path, signals: Signals, flock: bool) -> Waiter {
        let c = cstr(path);
        let (out_r, out_w) = pipe();
        let (go_r, go_w) = pipe();
        // SAFETY: the child makes only async-signal-safe calls (sigaction, sigprocmask, open,
        // fcntl, write, read, _exit) and never returns into the test harness; after telling
        // its outcome it waits until killed ([`Kids`]).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                match signals {
                    Signals::Default => {}
                    Signals::Handler { restart } => {
                        let mut sa: libc::sigaction = std::mem::zeroed();
                        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
                        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
                    }
                    Signals::Blocked => {
                        let mut set: libc::sigset_t = std::mem::zeroed();
                        libc::sigemptyset(&mut set);
                        libc::sigaddset(&mut set, libc::SIGUSR1);
                        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                    }
                }
                let fd = libc::open(c.as_ptr(), libc::O_RDWR);
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = WR as i16;
                fl.l_whence = libc::SEEK_SET as i16;
                fl.l_start = 0;
                fl.l_len = 10;
                let e: i32 = if fd < 0 {
                    -1
                } else if flock {
                    if libc::flock(fd, libc::LOCK_EX) == 0 {
                        0
                    } else {
                        *libc::__errno_location()
                    }
                } else if libc::fcntl(fd, libc::F_SETLKW, &mut fl) == 0 {
                    0
                } else {
                    *libc::__errno_location()
                };
                libc::write(out_w.as_raw_fd(), (&e as *const i32).cast(), 4);
                let mut b = 0u8;
                libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        kids.0.push(pid);
        drop((out_w, go_r));
        let w = Waiter {
            pid,
            outcome: out_r,
            _go: go_w,
        };
        w.wait_parked();
        w
    }

    /// Waits until the process sleeps in its F_SETLKW at the daemon (its kernel stack has
    /// `fuse_setlk`, root may read it; the open before also waits for the daemon).
    fn wait_parked(&self) {
        let start = Instant::now();
        let stack = format!("/proc/{}/stack", self.pid);
        while !fs::read_to_string(&stack)
            .unwrap_or_default()
            .contains("fuse_setlk")
        {
            assert!(
                !readable(&self.outcome, Duration::ZERO),
                "the waiter did not wait: {:?}",
                self.outcome_now()
            );
            assert!(
                start.elapsed() < REACT,
                "the waiter never waited at the daemon"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The fcntl's outcome if it came within `t` (0 or an errno).
    fn outcome(&self, t: Duration) -> Option<i32> {
        if !readable(&self.outcome, t) {
            return None;
        }
        let mut b = [0u8; 4];
        // SAFETY: reading 4 bytes into a 4-byte buffer from an open pipe.
        let n = unsafe { libc::read(self.outcome.as_raw_fd(), b.as_mut_ptr().cast(), 4) };
        (n == 4).then(|| i32::from_ne_bytes(b))
    }

    fn outcome_now(&self) -> Option<i32> {
        self.outcome(Duration::ZERO)
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) of our own child, not reaped yet.
        let r = unsafe { libc::kill(self.pid, sig) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
    }
}

fn setup(tmp: &tempfile::TempDir) -> (Mounted, std::path::PathBuf, File) {
    let (vol, mnt) = (tmp.path().join("vol"), tmp.path().join("mnt"));
    fs::create_dir(&mnt).expect("mkdir mnt");
    let m = Mounted::start(&vol, &mnt, &[]);
    let path = mnt.join("f");
    fs::write(&path, vec![0u8; 64]).expect("write");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    (m, path, f)
}

/// A process killed while it waits for a lock ends (its wait is withdrawn), and the lock goes
/// to the next waiter when its holder lets go.
#[test]
fn a_killed_lock_waiter_ends_and_the_next_waiter_gets_the_lock() {
    require_fuse!();
    let tmp = tempdir();
    let mut kids = Kids::default();
    let (m, path, f) = setup(&tmp);
    lock(f.as_raw_fd(), libc::F_SETLK, WR, 0, 10).expect("hold [0,10)");
    let a = Waiter::spawn(&mut kids, &path, Signals::Default);
    let b = Waiter::spawn(&mut kids, &path, Signals::Default);
    a.signal(libc::SIGKILL);
    assert!(
        kids.reaped(a.pid, REACT),
        "a waiter killed while the lock is held did not end within {REACT:?}"
    );
    assert_eq!(
        b.outcome(STILL),
        None,
        "the other waiter went while the lock is held"
    );
    lock(f.as_raw_fd(), libc::F_SETLK, libc::F_UNLCK, 0, 10).expect("unlock");
    assert_eq!(
        b.outcome(REACT),
        Some(0),
        "the next waiter did not get the lock"
    );
    let probe = File::open(&path).expect("open");
    let got = lock(probe.as_raw_fd(), libc::F_GETLK, WR, 0, 10).expect("getlk");
    assert_eq!(got, (WR, b.pid), "the lock is the next waiter's");
    drop((a, b, probe, f));
    drop(m);
}

/// flock(2) waits go to the daemon too (FUSE_FLOCK_LOCKS) and end the same way: a killed
/// waiter ends, a caught signal gives EINTR, and the lock goes to nobody left behind.
#[test]
fn a_flock_waiter_ends_when_killed_or_on_a_caught_signal() {
    require_fuse!();
    let tmp = tempdir();
    let mut kids = Kids::default();
    let (m, path, f) = setup(&tmp);
    // SAFETY: flock(2) on an open fd.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    let a = Waiter::spawn_as(&mut kids, &path, Signals::Default, true);
    let b = Waiter::spawn_as(&mut kids, &path, Signals::Handler { restart: false }, true);
    a.signal(libc::SIGKILL);
    assert!(
        kids.reaped(a.pid, REACT),
        "a flock waiter killed while the lock is held did not end within {REACT:?}"
    );
    assert_eq!(b.outcome(STILL), None, "the other waiter went while held");
    b.signal(libc::SIGALRM);
    assert_eq!(
        b.outcome(REACT),
        Some(libc::EINTR),
        "flock after a caught signal"
    );
    // SAFETY: as above.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) }, 0);
    std::thread::sleep(Duration::from_millis(200));
    let probe = File::open(&path).expect("open");
    // SAFETY: as above.
    let r = unsafe { libc::flock(probe.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(r, 0, "a withdrawn flock request was granted");
    drop((a, b, probe, f));
    drop(m);
}

/// A caught signal without SA_RESTART ends F_SETLKW with EINTR, and the request is gone:
/// once the holder lets go, nobody holds the range.
#[test]
fn a_caught_signal_ends_a_lock_wait_with_eintr_and_withdraws_it() {
    require_fuse!();
    let tmp = tempdir();
    let mut kids = Kids::default();
    let (m, path, f) = setup(&tmp);
    lock(f.as_raw_fd(), libc::F_SETLK, WR, 0, 10).expect("hold [0,10)");
    let w = Waiter::spawn(&mut kids, &path, Signals::Handler { restart: false });
    w.signal(libc::SIGALRM);
    assert_eq!(
        w.outcome(REACT),
        Some(libc::EINTR),
        "F_SETLKW after a caught signal"
    );
    lock(f.as_raw_fd(), libc::F_SETLK, libc::F_UNLCK, 0, 10).expect("unlock");
    // Time for a grant to a request left behind to show.
    std::thread::sleep(Duration::from_millis(200));
    let probe = File::open(&path).expect("open");
    let got = lock(probe.as_raw_fd(), libc::F_OFD_GETLK, WR, 0, 10).expect("getlk");
    assert_eq!(
        got.0,
        libc::F_UNLCK,
        "a withdrawn request was granted: {got:?}"
    );
    drop((w, probe, f));
    drop(m);
}

/// What does not end a local F_SETLKW does not end it here either: a signal whose handler has
/// SA_RESTART (the fcntl starts again and waits on), and a blocked signal.
#[test]
fn restarting_and_blocked_signals_leave_a_lock_wait_going() {
    require_fuse!();
    let tmp = tempdir();
    let mut kids = Kids::default();
    let (m, path, f) = setup(&tmp);
    for (signals, sig) in [
        (Signals::Handler { restart: true }, libc::SIGALRM),
        (Signals::Blocked, libc::SIGUSR1),
    ] {
        lock(f.as_raw_fd(), libc::F_SETLK, WR, 0, 10).expect("hold [0,10)");
        let w = Waiter::spawn(&mut kids, &path, signals);
        w.signal(sig);
        assert_eq!(w.outcome(STILL), None, "signal {sig} ended the wait");
        lock(f.as_raw_fd(), libc::F_SETLK, libc::F_UNLCK, 0, 10).expect("unlock");
        assert_eq!(
            w.outcome(REACT),
            Some(0),
            "signal {sig}: no lock after the unlock"
        );
        // Its exit drops its lock for the next round.
        w.signal(libc::SIGKILL);
        assert!(kids.reaped(w.pid, REACT), "the lock holder did not exit");
    }
    drop(f);
    drop(m);
}

/// A forked child is another lock owner than its parent, though it shares the parent's open
/// file: the parent's lock conflicts with it, and its close of that file (its exit) leaves
/// the parent's locks alone (FUSE_FLUSH carries the closer's lock owner), as on ext4.
#[test]
fn a_forked_child_is_another_lock_owner() {
    require_fuse!();
    let tmp = tempdir();
    let mut kids = Kids::default();
    let (m, path, f) = setup(&tmp);
    lock(f.as_raw_fd(), libc::F_SETLK, WR, 0, 10).expect("hold [0,10)");
    let (out_r, out_w) = pipe();
    let fd = f.as_raw_fd();
    // SAFETY: the child makes only async-signal-safe calls (fcntl, close, write, _exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: as above; `fd` is the inherited descriptor of the parent's open file.
        unsafe {
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = WR as i16;
            fl.l_whence = libc::SEEK_SET as i16;
            fl.l_len = 10;
            let e: i32 = if libc::fcntl(fd, libc::F_SETLK, &mut fl) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::close(fd);
            libc::write(out_w.as_raw_fd(), (&e as *const i32).cast(), 4);
            libc::_exit(0);
        }
    }
    kids.0.push(pid);
    drop(out_w);
    assert!(kids.reaped(pid, REACT), "the child did not exit");
    let mut b = [0u8; 4];
    std::io::Read::read_exact(&mut File::from(out_r), &mut b).expect("child's outcome");
    assert_eq!(
        i32::from_ne_bytes(b),
        libc::EAGAIN,
        "the child took the parent's range through the shared file"
    );
    // Another owner (an open file description) sees the parent's lock still held after the
    // child's close and exit. (Closing `probe` drops it: this process's close.)
    let probe = File::open(&path).expect("open");
    let got = lock(probe.as_raw_fd(), libc::F_OFD_GETLK, WR, 0, 10).expect("getlk");
    assert_eq!(
        got.0, WR,
        "the parent's lock after the child's close: {got:?}"
    );
    drop((probe, f));
    drop(m);
}
