//! The brick's disk health check (GlusterFS `storage.health-check-interval`): a thread writes,
//! fsyncs and reads back a small file, `<brick>/.xlfs/health`, every `health-check-interval`.
//! If that fails, or does not finish within `health-check-timeout` (a hung disk: the system
//! calls never return), the brick marks itself **down**, for good: from then on every fop
//! answers EIO at once, without touching the disk, and fops waiting for a pool thread (stuck
//! behind the hung ones) give up with EIO too. The reason is logged at error level. Clients
//! then get errors within `interval + timeout` (30 s by default) instead of waiting for their
//! `frame-timeout` (30 minutes); a replicated volume goes on with the other bricks. Restart
//! the brick once the disk is fixed.
//!
//! The probe runs on a thread of its own and is waited for by another, so a probe stuck in
//! the kernel never stops the check from noticing. A fop already inside a system call the
//! hung disk does not return from stays there: nothing in this process can answer it (see
//! the README).

use std::collections::HashMap;
use std::future::Future;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use xlator_api::Errno;

use crate::handle::META_DIR;

/// The probe file, under the brick's meta directory.
pub const HEALTH_FILE: &str = "health";

/// Whether the brick is down, and who waits to hear it.
#[derive(Default)]
pub struct Health {
    down: AtomicBool,
    reason: Mutex<Option<String>>,
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    next: u64,
    wakers: HashMap<u64, Waker>,
}

impl Health {
    pub fn new() -> Arc<Health> {
        Arc::new(Health::default())
    }

    /// Whether the brick has been marked down.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Why it is down, if it is.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks the brick down (the first reason is kept) and wakes every fop waiting in
    /// [`or_down`](Self::or_down).
    pub fn mark_down(&self, brick: &Path, why: &str) {
        {
            let mut r = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
            if r.is_some() {
                return;
            }
            *r = Some(why.to_owned());
        }
        self.down.store(true, Ordering::Release);
        tracing::error!(
            target: "xlfs::posix",
            "BRICK {} IS DOWN: its disk failed the health check: {why}. Every fop now answers \
             EIO; fix the disk, then restart the brick",
            brick.display()
        );
        let wakers: Vec<Waker> = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wakers
            .drain()
            .map(|(_, w)| w)
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Runs `fut` unless the brick is or goes down first (then EIO, and `fut` is dropped:
    /// a job it submitted that is stuck on the disk stays stuck, its result unused).
    pub async fn or_down<T>(
        &self,
        fut: impl Future<Output = Result<T, Errno>>,
    ) -> Result<T, Errno> {
        let mut fut = std::pin::pin!(fut);
        let mut key: Option<u64> = None;
        let r = std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            if self.is_down() {
                return Poll::Ready(Err(Errno::EIO));
            }
            {
                let mut w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
                let k = *key.get_or_insert_with(|| {
                    w.next += 1;
                    w.next
                });
                w.wakers.insert(k, cx.waker().clone());
            }
            // Marked down between the check and the registration: its wake-up may have
            // missed this waker.
            if self.is_down() {
                return Poll::Ready(Err(Errno::EIO));
            }
            Poll::Pending
        })
        .await;
        if let Some(k) = key {
            self.waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .wakers
                .remove(&k);
        }
        r
    }
}

/// A test hook run by the probe before its I/O (to simulate a slow or failing disk), by
/// brick directory.
pub type ProbeHook = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

fn hooks() -> &'static Mutex<HashMap<PathBuf, ProbeHook>> {
    static HOOKS: std::sync::OnceLock<Mutex<HashMap<PathBuf, ProbeHook>>> =
        std::sync::OnceLock::new();
    HOOKS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Test hook: `hook` runs at the start of every probe of the brick on `dir` (as given in
/// the `directory` option); an `Err` fails the probe, a slow hook makes a slow probe.
/// `None` removes it.
#[doc(hidden)]
pub fn set_probe_hook(dir: &Path, hook: Option<ProbeHook>) {
    let mut h = hooks().lock().unwrap_or_else(PoisonError::into_inner);
    match hook {
        Some(f) => h.insert(dir.to_path_buf(), f),
        None => h.remove(dir),
    };
}

/// One probe: write, fsync, read back.
fn probe(brick: &Path, option_dir: &Path, n: u64) -> Result<(), String> {
    let hook = hooks()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(option_dir)
        .cloned();
    if let Some(h) = hook {
        h()?;
    }
    let path = brick.join(META_DIR).join(HEALTH_FILE);
    let what = |op: &str, e: std::io::Error| format!("{op} {}: {e}", path.display());
    let text = format!("xlfs health check {n} of pid {}\n", std::process::id());
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| what("cannot open", e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| what("cannot write", e))?;
    f.sync_all().map_err(|e| what("cannot fsync", e))?;
    f.rewind().map_err(|e| what("cannot seek", e))?;
    let mut back = String::new();
    f.read_to_string(&mut back)
        .map_err(|e| what("cannot read", e))?;
    if back != text {
        return Err(format!(
            "{} reads back other bytes than were written and synced",
            path.display()
        ));
    }
    Ok(())
}

/// Stops the check when dropped (the threads end at their next wake-up; a probe stuck in
/// the kernel ends when the kernel returns).
pub struct Checker {
    _stop: mpsc::Sender<()>,
}

/// Starts checking the brick at `brick` (`option_dir`: the `directory` option, which names
/// the test hook) every `interval`; `None` when `interval` is zero (off).
pub fn start(
    health: &Arc<Health>,
    brick: PathBuf,
    option_dir: PathBuf,
    interval: Duration,
    timeout: Duration,
) -> Result<Option<Checker>, String> {
    if interval.is_zero() {
        return Ok(None);
    }
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
    let prober_brick = brick.clone();
    std::thread::Builder::new()
        .name("posix-health-probe".into())
        .spawn(move || {
            while let Ok(n) = go_rx.recv() {
                if done_tx.send(probe(&prober_brick, &option_dir, n)).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| format!("cannot start the health check: {e}"))?;
    let health = health.clone();
    std::thread::Builder::new()
        .name("posix-health".into())
        .spawn(move || {
            let mut n = 0u64;
            loop {
                match stop_rx.recv_timeout(interval) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    // Stopped (the brick is going away).
                    _ => return,
                }
                n += 1;
                if go_tx.send(n).is_err() {
                    health.mark_down(&brick, "the health check's probe thread is gone");
                    return;
                }
                match done_rx.recv_timeout(timeout) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return health.mark_down(&brick, &e),
                    Err(_) => {
                        return health.mark_down(
                            &brick,
                            &format!(
                                "writing, syncing and reading {} did not finish within the \
                                 health-check-timeout ({timeout:?}): the disk hangs",
                                brick.join(META_DIR).join(HEALTH_FILE).display()
                            ),
                        );
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the health check: {e}"))?;
    Ok(Some(Checker { _stop: stop_tx }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn wait_down(h: &Health) {
        let t0 = Instant::now();
        while !h.is_down() {
            assert!(t0.elapsed() < Duration::from_secs(30), "never marked down");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_healthy_disk_stays_up_and_the_probe_file_is_written() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(d.path().join(META_DIR)).expect("meta dir");
        let h = Health::new();
        let _c = start(
            &h,
            d.path().into(),
            d.path().into(),
            Duration::from_millis(20),
            Duration::from_secs(20),
        )
        .expect("start");
        let f = d.path().join(META_DIR).join(HEALTH_FILE);
        let t0 = Instant::now();
        while !f.exists() {
            assert!(t0.elapsed() < Duration::from_secs(30), "no probe file");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(!h.is_down(), "{:?}", h.reason());
    }

    #[test]
    fn a_failing_probe_marks_the_brick_down() {
        let d = tempfile::tempdir().expect("tempdir");
        // No meta directory: the probe cannot create its file.
        let h = Health::new();
        let _c = start(
            &h,
            d.path().into(),
            d.path().into(),
            Duration::from_millis(20),
            Duration::from_secs(20),
        )
        .expect("start");
        wait_down(&h);
        let why = h.reason().expect("reason");
        assert!(why.contains("cannot open"), "{why}");
    }

    #[test]
    fn a_probe_slower_than_the_timeout_marks_the_brick_down() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(d.path().join(META_DIR)).expect("meta dir");
        set_probe_hook(
            d.path(),
            Some(Arc::new(|| {
                std::thread::sleep(Duration::from_secs(3));
                Ok(())
            })),
        );
        let h = Health::new();
        let _c = start(
            &h,
            d.path().into(),
            d.path().into(),
            Duration::from_millis(20),
            Duration::from_millis(300),
        )
        .expect("start");
        wait_down(&h);
        set_probe_hook(d.path(), None);
        let why = h.reason().expect("reason");
        assert!(why.contains("did not finish within"), "{why}");
    }

    #[test]
    fn off_when_the_interval_is_zero() {
        let h = Health::new();
        let c = start(
            &h,
            "/nonexistent".into(),
            "/nonexistent".into(),
            Duration::ZERO,
            Duration::ZERO,
        )
        .expect("start");
        assert!(c.is_none());
    }

    /// A fop waiting (for a pool thread stuck behind a hung disk) gives up with EIO when the
    /// brick goes down; once down, fops answer EIO at once.
    #[test]
    fn waiting_fops_get_eio_when_the_brick_goes_down() {
        let h = Health::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let waiting = {
                let h = h.clone();
                tokio::spawn(
                    async move { h.or_down(std::future::pending::<Result<(), Errno>>()).await },
                )
            };
            tokio::time::sleep(Duration::from_millis(50)).await;
            h.mark_down(Path::new("/b"), "test");
            assert_eq!(waiting.await.expect("join"), Err(Errno::EIO));
            assert_eq!(h.waiters.lock().expect("lock").wakers.len(), 0);
            // A future that is ready still gives its result.
            assert_eq!(h.or_down(async { Ok(5) }).await, Ok(5));
            assert_eq!(
                h.or_down(std::future::pending::<Result<(), Errno>>()).await,
                Err(Errno::EIO)
            );
        });
    }
}
