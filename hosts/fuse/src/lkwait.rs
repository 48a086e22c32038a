//! Lock waits their caller can interrupt (F_SETLKW and F_OFD_SETLKW through the mount).
//!
//! On a local file system a waiting F_SETLKW ends as soon as its caller has a signal it does
//! not block (the kernel's `signal_pending()`): EINTR from fcntl(2), a restart under
//! SA_RESTART, or the end of the process for SIGKILL. Through FUSE that takes
//! FUSE_INTERRUPT, which fuser 0.18 answers ENOSYS itself without telling the `Filesystem`
//! (after which the kernel sets `no_interrupt` and sends none again). And a request the
//! daemon has read waits in `request_wait_answer` until the daemon replies, uninterruptibly
//! once interrupts are off: a waiter could not even be killed, so when its lock's holder
//! waited for it (stress-ng `lockf`: a parent kills its child and waits for it while holding
//! the lock the child waits for) both waited forever (issue 24, bug 4).
//!
//! So a waiting lock watches its caller instead: while the wait lasts, the status of the
//! thread that sent the request (the FUSE header's pid, a thread id in the daemon's pid
//! namespace, 0 for a caller outside it) is read from procfs, first after [`FIRST_LOOK`] and
//! then at most every [`LONGEST_GAP`]. A pending signal (the thread's `SigPnd` or the
//! process's `ShdPnd`) that the thread does not block (`SigBlk`) ends the wait the way the
//! kernel would have: the lock future is dropped, which withdraws the request (features/locks
//! removes it from its queue; protocol/client cancels it at the brick and gives back a grant
//! that raced with the cancel), and the kernel gets EINTR, which `fuse_setlk` turns into
//! ERESTARTSYS. A caller whose status cannot be read (pid 0, or no such thread) waits as
//! before, uninterruptibly.
//!
//! A signal pending for the whole process may be taken by another of its threads; the wait
//! then ends anyway and the kernel restarts the fcntl(2) (ERESTARTSYS with no handler run
//! restarts), which costs the request its place in the queue and nothing else.

use std::future::Future;
use std::time::Duration;

use xlator_api::Errno;

/// How long a lock wait runs before its caller is looked at the first time (most waits in
/// contention are shorter).
pub const FIRST_LOOK: Duration = Duration::from_millis(2);
/// The longest gap between two looks at a waiting caller: at most this late a signal ends
/// the wait.
pub const LONGEST_GAP: Duration = Duration::from_millis(50);

/// Runs the lock wait `wait` for the thread `caller`; Err(EINTR) as soon as `caller` has a
/// signal pending that it does not block (the wait is dropped: see the module doc).
pub async fn interruptible<T>(
    caller: u32,
    wait: impl Future<Output = Result<T, Errno>>,
) -> Result<T, Errno> {
    if caller == 0 {
        return wait.await;
    }
    let r = until_signalled(|| signal_pending(caller), wait).await;
    if matches!(r, Err(Errno::EINTR)) {
        tracing::debug!("lock wait of thread {caller} ended by a signal");
    }
    r
}

/// Runs `wait` unless `probe` says a signal is pending first (then drops it: EINTR). `probe`
/// is asked after [`FIRST_LOOK`], then at gaps doubling up to [`LONGEST_GAP`]; once it
/// answers `None` (nothing to watch) it is not asked again.
async fn until_signalled<T>(
    mut probe: impl FnMut() -> Option<bool>,
    wait: impl Future<Output = Result<T, Errno>>,
) -> Result<T, Errno> {
    let watch = async {
        let mut gap = FIRST_LOOK;
        loop {
            tokio::time::sleep(gap).await;
            match probe() {
                Some(true) => return,
                Some(false) => gap = (gap * 2).min(LONGEST_GAP),
                None => return std::future::pending::<()>().await,
            }
        }
    };
    tokio::select! {
        biased;
        r = wait => r,
        () = watch => Err(Errno::EINTR),
    }
}

/// Whether thread `tid` has a signal pending that it does not block (`None`: its status
/// cannot be read).
pub fn signal_pending(tid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    pending_unblocked(&status)
}

/// From a `/proc/<tid>/status` text: whether (`SigPnd` | `ShdPnd`) & !`SigBlk` is not empty.
pub fn pending_unblocked(status: &str) -> Option<bool> {
    let mask = |key: &str| {
        status.lines().find_map(|l| {
            let v = l.strip_prefix(key)?.strip_prefix(':')?;
            u64::from_str_radix(v.trim(), 16).ok()
        })
    };
    let pending = mask("SigPnd")? | mask("ShdPnd")?;
    Some(pending & !mask("SigBlk")? != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(pnd: &str, shd: &str, blk: &str) -> String {
        format!(
            "Name:\tstress-ng-lockf\nState:\tD (disk sleep)\nSigQ:\t1/63457\nSigPnd:\t{pnd}\n\
             ShdPnd:\t{shd}\nSigBlk:\t{blk}\nSigIgn:\t0000000000000000\n\
             SigCgt:\t000000002380e0af\n"
        )
    }

    #[test]
    fn a_pending_signal_counts_unless_blocked() {
        let none = "0000000000000000";
        // SIGALRM (14) pending for the process, as stress-ng's parent sends it.
        let alrm = "0000000000002000";
        // SIGKILL (9), as the kernel queues it on every thread.
        let kill = "0000000000000100";
        assert_eq!(pending_unblocked(&status(none, none, none)), Some(false));
        assert_eq!(pending_unblocked(&status(none, alrm, none)), Some(true));
        assert_eq!(pending_unblocked(&status(kill, none, none)), Some(true));
        assert_eq!(pending_unblocked(&status(none, alrm, alrm)), Some(false));
        assert_eq!(
            pending_unblocked(&status(kill, alrm, alrm)),
            Some(true),
            "SIGKILL pending beside a blocked SIGALRM"
        );
    }

    #[test]
    fn a_status_without_the_masks_is_unreadable() {
        assert_eq!(pending_unblocked("Name:\tx\nState:\tR\n"), None);
        assert_eq!(pending_unblocked(&status("zz", "0", "0")), None);
    }

    #[test]
    fn this_thread_has_no_signal_pending_and_pid_0_is_not_watched() {
        // SAFETY: gettid(2) has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert_eq!(signal_pending(tid), Some(false));
        assert_eq!(signal_pending(0), None);
    }

    /// A signal sent to a thread that blocks it stays pending and does not count.
    #[test]
    fn a_blocked_pending_signal_does_not_count() {
        use std::sync::mpsc;
        let (tid_tx, tid_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: this thread's own signal mask, and a signal to this thread only; it
            // stays blocked (and pending) until the thread exits, discarded with it.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR2);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                let tid = libc::gettid();
                libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2);
                tid_tx.send(tid as u32).expect("send tid");
                go_rx.recv().ok();
            }
        });
        let tid = tid_rx.recv().expect("tid");
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).expect("status");
        assert!(status.contains("SigPnd:\t0000000000000800"), "{status}");
        assert_eq!(signal_pending(tid), Some(false), "blocked: not pending");
        go_tx.send(()).expect("go");
        t.join().expect("thread");
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    /// Sends on drop: tells that a future was dropped.
    struct Dropped(std::sync::mpsc::Sender<()>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    /// The wait ends with EINTR at the first look that sees a signal, and its future is
    /// dropped then; looks that see none keep it waiting, with growing gaps.
    #[test]
    fn a_signal_ends_the_wait_and_drops_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        let guard = Dropped(tx);
        let wait = async move {
            let _guard = guard;
            std::future::pending::<Result<(), Errno>>().await
        };
        let mut looks = 0;
        let start = std::time::Instant::now();
        let r = runtime().block_on(until_signalled(
            || {
                looks += 1;
                Some(looks == 5)
            },
            wait,
        ));
        assert_eq!(r, Err(Errno::EINTR));
        assert_eq!(looks, 5);
        // 2 + 4 + 8 + 16 + 32 ms.
        assert!(
            start.elapsed() >= Duration::from_millis(62),
            "{:?}",
            start.elapsed()
        );
        rx.try_recv().expect("the wait was dropped");
    }

    /// A wait that ends by itself gives its result; a caller that cannot be watched is not
    /// looked at again and its wait goes on.
    #[test]
    fn a_wait_that_ends_gives_its_result_and_unwatchable_callers_wait() {
        let rt = runtime();
        let r = rt.block_on(until_signalled(|| Some(false), async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(7)
        }));
        assert_eq!(r, Ok(7));
        let mut looks = 0;
        let r = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_millis(200),
                until_signalled(
                    || {
                        looks += 1;
                        None
                    },
                    std::future::pending::<Result<(), Errno>>(),
                ),
            )
            .await
        });
        assert!(r.is_err(), "an unwatchable wait ended: {r:?}");
        assert_eq!(looks, 1);
    }
}
