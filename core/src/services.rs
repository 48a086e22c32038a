//! The host side of [`HostServices`]: tokio spawn, timer and blocking pool, a monotonic clock,
//! and the log sink that re-emits plugin log lines through the host's `tracing` subscriber.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

use abi_stable::std_types::RString;
use async_ffi::{FfiFuture, FutureExt as _};
use tokio::runtime::Handle;
use xlator_api::{BlockingJob, EventSink, HostServices, LogLevel, LogSink};

static FALLBACK: OnceLock<Handle> = OnceLock::new();
static START: OnceLock<Instant> = OnceLock::new();

/// Remembers `handle` for service calls made from threads outside any runtime (FUSE reader
/// threads, blocking jobs). Calls made on a runtime thread use that runtime.
pub fn set_fallback_runtime(handle: Handle) {
    let _ = FALLBACK.set(handle);
}

fn handle() -> Handle {
    match Handle::try_current() {
        Ok(h) => h,
        Err(_) => match FALLBACK.get() {
            Some(h) => h.clone(),
            // No runtime anywhere: a host bug. Fail loudly rather than hang.
            None => panic!("xlfs host services used outside a tokio runtime and no fallback set"),
        },
    }
}

extern "C" fn spawn(fut: FfiFuture<()>) {
    // A panic here would cross `extern "C"`; `handle()` only panics on a host bug.
    let _ = std::panic::catch_unwind(|| {
        handle().spawn(fut);
    });
}

extern "C" fn sleep(nanos: u64) -> FfiFuture<()> {
    async move { tokio::time::sleep(Duration::from_nanos(nanos)).await }.into_ffi()
}

thread_local! {
    /// Set while [`poll_here_then_spawn`] polls on a thread that may block.
    static BLOCKING_INLINE: Cell<bool> = const { Cell::new(false) };
    /// Set while [`poll_here_then_pool`] polls: blocking jobs submitted meanwhile wait here.
    static DEFERRED: RefCell<Option<Vec<BlockingJob>>> = const { RefCell::new(None) };
    /// Set by [`with_reply_spin`].
    static REPLY_SPIN: Cell<bool> = const { Cell::new(false) };
    /// Spins registered with [`defer_reply_spin`] during the current first poll.
    static SPINS: RefCell<Vec<Box<dyn FnOnce()>>> = const { RefCell::new(Vec::new()) };
}

/// How many times a first poll is repeated on the host thread after its deferred spins
/// delivered replies (a request of a few sequential calls: each round sends the next one).
const SPIN_ROUNDS: usize = 8;

/// Runs `f` (a host's first poll of a request, on its own thread, with someone waiting for
/// the answer) with [`may_spin_for_reply`] true: a network client that sent the only call
/// on its connection may then spin briefly for the reply on this thread instead of sleeping
/// until another thread reads it and wakes the request (on a virtual machine, each of those
/// wakeups costs tens of microseconds of latency).
pub fn with_reply_spin<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            REPLY_SPIN.set(self.0);
        }
    }
    let _reset = Reset(REPLY_SPIN.replace(true));
    let r = f();
    // Spins registered by a poll that did not go through `poll_here_then_spawn` are dropped.
    SPINS.take();
    r
}

/// Inside [`with_reply_spin`], during a host's first poll of a request: runs `spin` on this
/// thread once that poll has returned `Pending`, i.e. after every call the request makes at
/// once is on the wire (a fan-out to N bricks sends N frames first). `spin` reads its socket
/// for its reply within its budget; if a reply woke the request, the host polls it again
/// right here instead of handing it to the runtime, saving the reader task's wakeup and the
/// worker's. Returns false (and drops `spin`) outside `with_reply_spin`.
pub fn defer_reply_spin(spin: impl FnOnce() + 'static) -> bool {
    if !REPLY_SPIN.get() {
        return false;
    }
    SPINS.with_borrow_mut(|s| s.push(Box::new(spin)));
    true
}

/// Whether this thread is inside [`with_reply_spin`]: never true on the runtime's workers,
/// where spinning would hold up other tasks.
pub fn may_spin_for_reply() -> bool {
    REPLY_SPIN.get()
}

extern "C" fn spawn_blocking(job: BlockingJob) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if BLOCKING_INLINE.get() {
            job.run();
            return;
        }
        let job = DEFERRED.with_borrow_mut(|d| match d {
            Some(jobs) => {
                jobs.push(job);
                None
            }
            None => Some(job),
        });
        if let Some(job) = job {
            handle().spawn_blocking(move || job.run());
        }
    }));
}

/// Polls `fut` once on this thread, which must not block (a connection's reader), and, if it
/// submitted blocking jobs and must wait for them, moves the jobs and the rest of `fut` to
/// one thread of the blocking pool: the jobs run there, then `fut` is polled there (as by
/// [`poll_here_then_spawn`] with `may_block`), so a request whose data is not cached reads
/// the disk and sends its reply from that one thread. Otherwise the pool thread that ran the
/// job would wake a runtime worker to finish the request: one more thread switch per such
/// request. A request that completes, or waits for something other than its jobs, goes on as
/// with [`poll_here_then_spawn`] without `may_block`. Must be called inside the runtime's
/// context.
pub fn poll_here_then_pool<F: Future<Output = ()> + Send + 'static>(fut: F) {
    struct Collect(Option<Vec<BlockingJob>>);
    impl Drop for Collect {
        fn drop(&mut self) {
            // Restores the caller's collection (none, normally) if polling panicked.
            let _ = DEFERRED.replace(self.0.take());
        }
    }
    let mut fut: ParkedFuture = Box::pin(fut);
    let parked = Parked::new();
    let (pending, jobs) = {
        let guard = Collect(DEFERRED.replace(Some(Vec::new())));
        let pending = parked.first_poll(&mut fut);
        let jobs = DEFERRED.take().unwrap_or_default();
        drop(guard);
        (pending, jobs)
    };
    if jobs.is_empty() {
        if pending {
            parked.park(fut);
        }
        return;
    }
    if !pending {
        // Done without waiting for them (fire and forget): they run as usual.
        for job in jobs {
            parked.handle.spawn_blocking(move || job.run());
        }
        return;
    }
    // The first poll's waker is left in POLLING with an empty slot: its wakes (the jobs
    // finishing) do nothing; the pool thread polls the future next, with a waker of its own.
    let handle = parked.handle.clone();
    handle.spawn_blocking(move || {
        for job in jobs {
            job.run();
        }
        poll_boxed_here(fut, true);
    });
}

/// Polls `fut` once on this thread and, if it must wait, lets whatever wakes it run the rest
/// on the runtime.
///
/// The future is not handed to the runtime when it returns `Pending`, only when its waker
/// fires: a request that waits for a network reply costs no extra thread wakeup (a spawn
/// from a thread outside the runtime wakes a worker just to find the future still waiting),
/// and it is resumed on the thread that woke it, usually the worker that read the reply.
///
/// `may_block` is for threads that may block (the blocking pool): a blocking job a
/// translator submits during this first poll (storage/posix's system calls) then runs right
/// here instead of on another pool thread, so a request that only needs the disk completes
/// on the thread that received it. Later polls happen on the runtime's workers, where
/// blocking jobs go to the pool as usual. Must be called inside the runtime's context.
pub fn poll_here_then_spawn<F: Future<Output = ()> + Send + 'static>(fut: F, may_block: bool) {
    poll_boxed_here(Box::pin(fut), may_block);
}

fn poll_boxed_here(mut fut: ParkedFuture, may_block: bool) {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            BLOCKING_INLINE.set(self.0);
        }
    }
    let parked = Parked::new();
    let _reset = Reset(BLOCKING_INLINE.replace(may_block));
    let mut pending = parked.first_poll(&mut fut);
    let mut rounds = 0;
    while pending && rounds < SPIN_ROUNDS {
        let spins = SPINS.take();
        if spins.is_empty() {
            break;
        }
        for spin in spins {
            spin();
        }
        // A reply the spins delivered woke the request: poll it again here.
        if !parked.rewind() {
            break;
        }
        pending = parked.first_poll(&mut fut);
        rounds += 1;
    }
    SPINS.take();
    if pending {
        parked.park(fut);
    }
}

type ParkedFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The first poll is running.
const POLLING: u8 = 0;
/// Waiting for its waker, the future stored in the slot.
const PARKED: u8 = 1;
/// The waker fired during the first poll.
const WOKEN: u8 = 2;
/// Handed to the runtime (or finished); later wakes do nothing.
const GONE: u8 = 3;

/// A future waiting for its first wakeup before it becomes a runtime task.
struct Parked {
    state: AtomicU8,
    fut: Mutex<Option<ParkedFuture>>,
    handle: Handle,
}

impl Parked {
    fn new() -> Arc<Parked> {
        Arc::new(Parked {
            state: AtomicU8::new(POLLING),
            fut: Mutex::new(None),
            handle: handle(),
        })
    }

    /// Polls `fut` once with this as its waker; whether it must wait.
    fn first_poll(self: &Arc<Self>, fut: &mut ParkedFuture) -> bool {
        let waker = Waker::from(self.clone());
        fut.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    }

    /// Whether the waker fired during the first poll; if so, the next poll is a first poll
    /// again (still on this thread).
    fn rewind(&self) -> bool {
        self.state
            .compare_exchange(WOKEN, POLLING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Keeps a future that returned `Pending` on its first poll until its waker fires.
    fn park(self: Arc<Self>, fut: ParkedFuture) {
        *self.slot() = Some(fut);
        if let Err(state) =
            self.state
                .compare_exchange(POLLING, PARKED, Ordering::AcqRel, Ordering::Acquire)
        {
            // Woken while we were polling: it is ready to make progress now.
            debug_assert_eq!(state, WOKEN);
            self.state.store(GONE, Ordering::Release);
            self.resume();
        }
    }

    fn slot(&self) -> MutexGuard<'_, Option<ParkedFuture>> {
        self.fut.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn resume(&self) {
        if let Some(fut) = self.slot().take() {
            self.handle.spawn(fut);
        }
    }
}

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                POLLING => WOKEN,
                PARKED => GONE,
                _ => return,
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == GONE => return self.resume(),
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }
}

extern "C" fn now_ns() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Re-emits a plugin's log line through the host's subscriber.
pub extern "C" fn log(level: LogLevel, target: RString, msg: RString) {
    let (t, m) = (target.as_str(), msg.as_str());
    match level {
        LogLevel::Error => tracing::error!(target: "xlfs::plugin", plugin_target = t, "{m}"),
        LogLevel::Warn => tracing::warn!(target: "xlfs::plugin", plugin_target = t, "{m}"),
        LogLevel::Info => tracing::info!(target: "xlfs::plugin", plugin_target = t, "{m}"),
        LogLevel::Debug => tracing::debug!(target: "xlfs::plugin", plugin_target = t, "{m}"),
        LogLevel::Trace => tracing::trace!(target: "xlfs::plugin", plugin_target = t, "{m}"),
    }
}

/// The services object for a translator outside any graph (its events go nowhere).
pub fn host_services() -> HostServices {
    host_services_with(EventSink::none())
}

/// The services object handed to a translator in a graph, with its channel to its parents.
pub fn host_services_with(events: EventSink) -> HostServices {
    START.get_or_init(Instant::now);
    HostServices {
        spawn_fn: spawn,
        sleep_fn: sleep,
        spawn_blocking_fn: spawn_blocking,
        now_ns_fn: now_ns,
        log_fn: log,
        new_fd_id_fn: new_fd_id,
        events,
    }
}

/// Fd ids for translators' own fds: one counter per process, above the range hosts use.
extern "C" fn new_fd_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 62);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The sink given to loaded libraries' log bridges.
pub fn log_sink() -> LogSink {
    LogSink { log_fn: log }
}

/// The most verbose level the host's subscriber currently wants.
pub fn max_log_level() -> LogLevel {
    match tracing::level_filters::LevelFilter::current().into_level() {
        Some(l) => LogLevel::from_tracing(&l),
        None => LogLevel::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;
    use std::thread::ThreadId;

    /// Where a blocking job submitted through the services ran.
    async fn job_thread() -> ThreadId {
        host_services()
            .spawn_blocking(|| std::thread::current().id())
            .await
            .expect("job ran")
    }

    /// A request of two calls, each answered by a deferred spin that "reads the reply" (sends
    /// on a oneshot) on the host thread: the request finishes there, in one host poll, every
    /// call of a round registered before any spin runs, and nothing runs outside
    /// `with_reply_spin`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deferred_spins_run_after_the_first_poll_and_the_request_goes_on_here() {
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let l = log.clone();
        let done = tokio::task::spawn_blocking(move || {
            let (tx, rx) = std::sync::mpsc::channel();
            let host = std::thread::current().id();
            with_reply_spin(|| {
                poll_here_then_spawn(
                    async move {
                        for round in 0..2 {
                            // Two calls "sent" at once (a fan-out), each with its spin.
                            let mut replies = Vec::new();
                            for call in 0..2 {
                                let (reply_tx, reply_rx) = futures::channel::oneshot::channel();
                                let l2 = l.clone();
                                l.lock().expect("log").push(format!("send {round}.{call}"));
                                assert!(defer_reply_spin(move || {
                                    l2.lock().expect("log").push(format!("spin {round}.{call}"));
                                    let _ = reply_tx.send(());
                                }));
                                replies.push(reply_rx);
                            }
                            for r in replies {
                                r.await.expect("reply");
                            }
                        }
                        let _ = tx.send(std::thread::current().id());
                    },
                    false,
                )
            });
            (
                host,
                rx.try_recv().expect("finished during the host's poll"),
            )
        })
        .await
        .expect("host thread");
        assert_eq!(done.0, done.1, "went on on the host thread");
        let log = log.lock().expect("log").clone();
        assert_eq!(
            log,
            [
                "send 0.0", "send 0.1", "spin 0.0", "spin 0.1", "send 1.0", "send 1.1", "spin 1.0",
                "spin 1.1"
            ]
        );
        assert!(!defer_reply_spin(|| panic!("outside with_reply_spin")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_jobs_run_inline_only_when_the_thread_may_block() {
        let here = tokio::task::spawn_blocking(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            poll_here_then_spawn(
                async move {
                    let _ = tx.send((std::thread::current().id(), job_thread().await));
                },
                true,
            );
            // Finished inside the first poll: no other thread was involved.
            rx.try_recv().expect("finished in the first poll")
        })
        .await
        .expect("pool thread");
        assert_eq!(here.0, here.1, "the job ran on the polling thread");

        let (tx, rx) = tokio::sync::oneshot::channel();
        let caller = std::thread::current().id();
        poll_here_then_spawn(
            async move {
                let _ = tx.send(job_thread().await);
            },
            false,
        );
        let ran_on = rx.await.expect("finished on the runtime");
        assert_ne!(ran_on, caller, "without may_block the job goes to the pool");
        // The flag does not leak into later polls on this thread.
        assert!(!BLOCKING_INLINE.get());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parked_future_resumes_when_woken_and_only_once() {
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<u32>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let p = polls.clone();
        poll_here_then_spawn(
            async move {
                p.fetch_add(1, Ordering::SeqCst);
                let v = go_rx.await.expect("value");
                let _ = done_tx.send(v);
            },
            false,
        );
        // Parked, not spawned: nothing polls it until it is woken.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        go_tx.send(7).expect("parked future still waiting");
        assert_eq!(done_rx.await.expect("resumed"), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wake_during_the_first_poll_is_not_lost() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut tx = Some(tx);
        let mut yielded = false;
        poll_here_then_spawn(
            std::future::poll_fn(move |cx| {
                if yielded {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                    return Poll::Ready(());
                }
                yielded = true;
                // Woken before returning Pending, as a reply arriving mid-poll would.
                cx.waker().wake_by_ref();
                Poll::Pending
            }),
            false,
        );
        tokio::time::timeout(Duration::from_secs(5), rx)
            .await
            .expect("resumed after the early wake")
            .expect("sent");
    }
    /// Translators' own fd ids start at 2^62, far above the ids hosts number from 1, and
    /// never repeat (also across threads).
    #[test]
    fn fd_ids_for_translators_are_unique_and_above_the_hosts_range() {
        let s = host_services();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || (0..1000).map(|_| s.new_fd_id()).collect::<Vec<_>>())
            })
            .collect();
        let mut ids: Vec<xlator_api::FdId> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("thread"))
            .collect();
        assert!(ids.iter().all(|id| id.0 >= 1 << 62), "an id below 2^62");
        assert!(ids.iter().all(|id| *id != xlator_api::FdId::ANONYMOUS));
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id was handed out twice");
        // One thread sees them increase.
        let (a, b) = (s.new_fd_id(), s.new_fd_id());
        assert!(b > a);
    }

    /// A request that submits a blocking job and waits for it runs the job and the rest of
    /// itself on one pool thread; one that needs no job finishes on the caller; one that waits
    /// for something else is parked; a job nobody waits for still runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn poll_here_then_pool_moves_the_job_and_the_rest_to_one_thread() {
        let caller = std::thread::current().id();
        let (tx, rx) = tokio::sync::oneshot::channel();
        poll_here_then_pool(async move {
            let first = std::thread::current().id();
            let job = job_thread().await;
            let _ = tx.send((first, job, std::thread::current().id()));
        });
        let (first, job, rest) = rx.await.expect("finished");
        assert_eq!(first, caller, "the first poll is the caller's");
        assert_ne!(job, caller, "the job left the caller's thread");
        assert_eq!(rest, job, "the rest ran where the job ran");
        assert!(DEFERRED.with_borrow(Option::is_none), "collection left on");

        // No job: done in the first poll.
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        poll_here_then_pool(async move {
            let _ = tx.send(std::thread::current().id());
        });
        assert_eq!(rx.try_recv().expect("done in the first poll"), caller);

        // Waiting for something else: parked until woken, then finished.
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<u32>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        poll_here_then_pool(async move {
            let _ = done_tx.send(go_rx.await.expect("value"));
        });
        go_tx.send(3).expect("still waiting");
        assert_eq!(done_rx.await.expect("resumed"), 3);

        // A job submitted by a request that does not wait for it still runs.
        let (job_tx, job_rx) = tokio::sync::oneshot::channel();
        poll_here_then_pool(async move {
            drop(host_services().spawn_blocking(move || {
                let _ = job_tx.send(());
            }));
        });
        tokio::time::timeout(Duration::from_secs(5), job_rx)
            .await
            .expect("the job ran")
            .expect("sent");
    }
}
