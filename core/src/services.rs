//! The host side of [`HostServices`]: tokio spawn, timer and blocking pool, a monotonic clock,
//! and the log sink that re-emits plugin log lines through the host's `tracing` subscriber.

use std::sync::OnceLock;
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

extern "C" fn spawn_blocking(job: BlockingJob) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handle().spawn_blocking(move || job.run());
    }));
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
        events,
    }
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
