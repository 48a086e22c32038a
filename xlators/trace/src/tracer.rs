//! Emits the two lines of a traced call: the fop with its arguments on the way down, the reply
//! (or errno) and latency on the way up, paired by a call number.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tracing::Level;
use xlator_api::{Ctx, Fop};

use crate::filter::{FopFilter, FopList};
use crate::level::{SharedLevel, TraceLevel};

/// `tracing` target of every trace line.
pub const TARGET: &str = "xlfs::trace";

/// One traced call in flight.
pub struct Call {
    fop: Fop,
    /// Fixed at the start so both lines of a call have the same level across a reconfigure.
    level: TraceLevel,
    id: u64,
    start: Instant,
}

/// `tracing` macros need the level as a constant: one arm per level.
macro_rules! emit {
    ($level:expr, $($rest:tt)*) => {
        match $level {
            TraceLevel::Trace => tracing::event!(target: TARGET, Level::TRACE, $($rest)*),
            TraceLevel::Debug => tracing::event!(target: TARGET, Level::DEBUG, $($rest)*),
            TraceLevel::Info => tracing::event!(target: TARGET, Level::INFO, $($rest)*),
        }
    };
}

pub struct Tracer {
    name: String,
    level: SharedLevel,
    filter: FopFilter,
    next_call: AtomicU64,
}

impl Tracer {
    pub fn new(name: String, level: TraceLevel, include: &FopList, exclude: &FopList) -> Tracer {
        Tracer {
            name,
            level: SharedLevel::new(level),
            filter: FopFilter::new(include, exclude),
            next_call: AtomicU64::new(1),
        }
    }

    pub fn set(&self, level: TraceLevel, include: &FopList, exclude: &FopList) {
        self.level.set(level);
        self.filter.set(include, exclude);
    }

    /// Starts tracing a call of `fop`, or `None` when it is filtered out or its level is
    /// disabled (then nothing is formatted: the fop costs two relaxed loads).
    #[inline]
    pub fn begin(&self, fop: Fop) -> Option<Call> {
        if !self.filter.traces(fop) {
            return None;
        }
        let level = self.level.get();
        let enabled = match level {
            TraceLevel::Trace => tracing::enabled!(target: TARGET, Level::TRACE),
            TraceLevel::Debug => tracing::enabled!(target: TARGET, Level::DEBUG),
            TraceLevel::Info => tracing::enabled!(target: TARGET, Level::INFO),
        };
        enabled.then(|| Call {
            fop,
            level,
            id: self.next_call.fetch_add(1, Ordering::Relaxed),
            start: Instant::now(),
        })
    }

    /// The line on the way down: `lookup(loc=...)`. Restarts the call's clock, so the
    /// latency shown on the way up leaves out the cost of logging.
    pub fn down(&self, call: &mut Call, cx: &Ctx, args: &str) {
        emit!(
            call.level,
            xlator = %self.name,
            call = call.id,
            req = cx.request_id(),
            uid = cx.uid(),
            gid = cx.gid(),
            pid = cx.pid(),
            "{}({})",
            call.fop,
            args
        );
        call.start = Instant::now();
    }

    /// The line on the way up: `lookup -> Err(ENOENT)` with the latency.
    pub fn up(&self, call: &Call, reply: &str) {
        let latency_us = call.start.elapsed().as_micros() as u64;
        emit!(
            call.level,
            xlator = %self.name,
            call = call.id,
            latency_us,
            "{} -> {}",
            call.fop,
            reply
        );
    }
}
