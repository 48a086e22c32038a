//! Host services: what a translator needs from the runtime, passed in at init as an FFI-safe
//! object. A translator built as a cdylib carries its own copy of tokio, which has no reactor
//! (its calls panic with "no reactor running"); it spawns, sleeps and blocks through these
//! instead, on the host's one runtime.

use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use async_ffi::{FfiFuture, FutureExt as _};
use futures::FutureExt as _;

use crate::abi::EventKind;
use crate::types::Errno;

/// Severity of a bridged log line (tracing's levels, most severe first).
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum LogLevel {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl LogLevel {
    pub fn from_tracing(l: &tracing::Level) -> LogLevel {
        match *l {
            tracing::Level::ERROR => LogLevel::Error,
            tracing::Level::WARN => LogLevel::Warn,
            tracing::Level::INFO => LogLevel::Info,
            tracing::Level::DEBUG => LogLevel::Debug,
            _ => LogLevel::Trace,
        }
    }
}

/// A host callback receiving a plugin's log line: level, target, formatted message.
pub type LogFn = extern "C" fn(LogLevel, RString, RString);

/// [`LogFn`] wrapped for the ABI (abi_stable checks fn pointers written inline in structs).
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct LogSink {
    pub log_fn: extern "C" fn(LogLevel, RString, RString),
}

/// A closure to run on the host's blocking thread pool, as an FFI-safe object.
#[repr(C)]
#[derive(StableAbi)]
pub struct BlockingJob {
    data: *mut c_void,
    run: unsafe extern "C" fn(*mut c_void),
    drop_data: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: built only from `F: Send` closures (see `BlockingJob::new`).
unsafe impl Send for BlockingJob {}

impl BlockingJob {
    pub fn new<F: FnOnce() + Send + 'static>(f: F) -> BlockingJob {
        unsafe extern "C" fn run<F: FnOnce()>(p: *mut c_void) {
            // SAFETY: `p` came from `Box::into_raw(Box<F>)` and is consumed exactly once
            // (`BlockingJob::run` forgets `self`, so `drop_data` does not run afterwards).
            let f = unsafe { Box::from_raw(p.cast::<F>()) };
            // A panic must not unwind across the extern "C" boundary.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
        }
        unsafe extern "C" fn drop_data<F>(p: *mut c_void) {
            // SAFETY: as above; reached only when the job is dropped without running.
            drop(unsafe { Box::from_raw(p.cast::<F>()) });
        }
        BlockingJob {
            data: Box::into_raw(Box::new(f)).cast(),
            run: run::<F>,
            drop_data: drop_data::<F>,
        }
    }

    /// Runs the job (on whatever thread calls this).
    pub fn run(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `data` is live and owned by this job; ManuallyDrop prevents a second free.
        unsafe { (this.run)(this.data) }
    }
}

impl Drop for BlockingJob {
    fn drop(&mut self) {
        // SAFETY: the job never ran (run() forgets self), so `data` is still owned here.
        unsafe { (self.drop_data)(self.data) }
    }
}

/// A translator's channel to its parents: events it raises (a connection came up or went
/// down) reach every parent's `notify` with the index under which that parent holds it.
/// `Copy`; the host keeps the target alive for the life of the process.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct EventSink {
    target: *const c_void,
    notify_fn: Option<unsafe extern "C" fn(target: *const c_void, kind: EventKind)>,
    upcall_fn: Option<unsafe extern "C" fn(target: *const c_void, up: &crate::Upcall)>,
}

// SAFETY: the host guarantees `target` is a 'static, thread-safe object (core leaks it).
unsafe impl Send for EventSink {}
// SAFETY: as above.
unsafe impl Sync for EventSink {}

impl EventSink {
    /// A sink that goes nowhere (a translator used outside a graph).
    pub const fn none() -> EventSink {
        EventSink {
            target: std::ptr::null(),
            notify_fn: None,
            upcall_fn: None,
        }
    }

    /// Used by hosts.
    ///
    /// # Safety
    /// `target` must stay valid for the rest of the process and `f` must accept it from any
    /// thread.
    pub unsafe fn new(
        target: *const c_void,
        f: unsafe extern "C" fn(*const c_void, EventKind),
    ) -> EventSink {
        EventSink {
            target,
            notify_fn: Some(f),
            upcall_fn: None,
        }
    }

    /// This sink with `u` delivering upcalls ([`EventSink::upcall_parents`]).
    ///
    /// # Safety
    /// As [`EventSink::new`]: `u` must accept `target` from any thread.
    pub unsafe fn with_upcalls(
        self,
        u: unsafe extern "C" fn(*const c_void, &crate::Upcall),
    ) -> EventSink {
        EventSink {
            upcall_fn: Some(u),
            ..self
        }
    }

    /// Passes `up` to every parent ([`crate::Translator::upcall`]); at the top of a graph,
    /// to the host.
    pub fn upcall_parents(&self, up: &crate::Upcall) {
        if let Some(f) = self.upcall_fn {
            // SAFETY: per `EventSink::with_upcalls`'s contract.
            unsafe { f(self.target, up) }
        }
    }

    /// Tells every parent.
    pub fn notify_parents(&self, kind: EventKind) {
        if let Some(f) = self.notify_fn {
            // SAFETY: per `EventSink::new`'s contract.
            unsafe { f(self.target, kind) }
        }
    }
}

/// The services object. `Copy`: it is a table of host functions.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct HostServices {
    /// Runs a future to completion on the host runtime, detached.
    pub spawn_fn: extern "C" fn(FfiFuture<()>),
    /// A future that completes after `nanos` nanoseconds.
    pub sleep_fn: extern "C" fn(nanos: u64) -> FfiFuture<()>,
    /// Runs a job on the host's blocking pool.
    pub spawn_blocking_fn: extern "C" fn(BlockingJob),
    /// Monotonic clock in nanoseconds since an arbitrary start.
    pub now_ns_fn: extern "C" fn() -> u64,
    /// Emits a log line through the host's tracing subscriber.
    pub log_fn: extern "C" fn(LogLevel, RString, RString),
    /// A new fd id, unique in this process and never one a host hands out for its own opens
    /// (hosts number theirs from 1; these start at 2^62).
    pub new_fd_id_fn: extern "C" fn() -> u64,
    /// This instance's channel to its parents.
    pub events: EventSink,
}

impl HostServices {
    /// Spawns `fut` on the host runtime. A panic inside it is caught and logged.
    pub fn spawn<F: Future<Output = ()> + Send + 'static>(&self, fut: F) {
        let log = self.log_fn;
        let guarded = async move {
            if let Err(p) = crate::panics::Guarded(AssertUnwindSafe(fut).catch_unwind()).await {
                let place = crate::panics::take_place()
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default();
                let msg = format!(
                    "spawned task panicked: {}{place}",
                    crate::sdk::panic_message(&p)
                );
                log(
                    LogLevel::Error,
                    RString::from("xlfs::spawn"),
                    RString::from(msg),
                );
            }
        };
        (self.spawn_fn)(guarded.into_ffi())
    }

    /// Sleeps on the host's timer.
    pub fn sleep(&self, d: Duration) -> FfiFuture<()> {
        (self.sleep_fn)(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Runs blocking `f` (disk I/O, syscalls) on the host's blocking pool and awaits its
    /// result. Fails with EIO if `f` panicked or the pool dropped the job at shutdown.
    ///
    /// When the host is polling this fop on a thread that may block (the brick runs each
    /// request's first poll on a pool thread), `f` runs right away on the calling thread,
    /// before this returns: do not hold a lock that `f` needs while calling it.
    pub fn spawn_blocking<R, F>(&self, f: F) -> impl Future<Output = Result<R, Errno>> + Send
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let (tx, rx) = futures::channel::oneshot::channel();
        (self.spawn_blocking_fn)(BlockingJob::new(move || {
            let _ = tx.send(f());
        }));
        async move { rx.await.map_err(|_| Errno::EIO) }
    }

    /// Raises `kind` (`ChildUp`/`ChildDown`) to every parent of this translator.
    pub fn notify_parents(&self, kind: EventKind) {
        self.events.notify_parents(kind)
    }

    /// Passes `up` to every parent (a network client relaying its brick's upcalls).
    pub fn upcall_parents(&self, up: &crate::Upcall) {
        self.events.upcall_parents(up)
    }

    /// A fresh fd id for an fd the translator opens itself (self-heal, rebalance): pass
    /// `Fd { id: services.new_fd_id(), .. }` to a child's `open`, and `release` it after.
    pub fn new_fd_id(&self) -> crate::types::FdId {
        crate::types::FdId((self.new_fd_id_fn)())
    }

    /// Monotonic time since an arbitrary start.
    pub fn now(&self) -> Duration {
        Duration::from_nanos((self.now_ns_fn)())
    }

    /// Logs through the host (works from a cdylib, where `tracing` macros would go nowhere
    /// unless the log bridge is installed; the loader installs it for you).
    pub fn log(&self, level: LogLevel, target: &str, msg: &str) {
        (self.log_fn)(level, RString::from(target), RString::from(msg))
    }
}
