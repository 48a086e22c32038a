//! Per-fop counters: calls, errors (per errno), bytes and a latency histogram, all relaxed
//! atomics so the fop path never takes a lock. [`Stats::snapshot`] copies them into a plain
//! [`StatsSnapshot`] that the dumps render.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::Serialize;
use xlator_api::{Errno, Fop};

use crate::histogram::{Histogram, HistogramReport, HistogramSnapshot};

/// Errno values below this get their own counter; others share slot 0 (errno 0 is never an
/// error). Linux errnos end at 133 (EHWPOISON).
const ERRNO_SLOTS: usize = 134;

/// What a successful fop moved, for the byte counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// Not a data fop.
    None,
    /// `readv` returned this many bytes.
    Read(u64),
    /// `writev` wrote this many bytes.
    Written(u64),
}

struct FopCounters {
    calls: AtomicU64,
    errors: AtomicU64,
    /// Indexed by errno value; see [`ERRNO_SLOTS`].
    errnos: Box<[AtomicU64]>,
    bytes: AtomicU64,
    latency_us: Histogram,
}

impl FopCounters {
    fn new() -> FopCounters {
        FopCounters {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            errnos: (0..ERRNO_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            bytes: AtomicU64::new(0),
            latency_us: Histogram::new(),
        }
    }
}

/// The live counters of one io-stats instance.
pub struct Stats {
    started: Instant,
    fops: Box<[FopCounters]>,
    read_sizes: Histogram,
    write_sizes: Histogram,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            started: Instant::now(),
            fops: Fop::ALL.iter().map(|_| FopCounters::new()).collect(),
            read_sizes: Histogram::new(),
            write_sizes: Histogram::new(),
        }
    }

    /// Counts one completed call of `fop` with its outcome.
    pub fn count(&self, fop: Fop, outcome: Result<Io, Errno>) {
        let c = &self.fops[fop.index()];
        c.calls.fetch_add(1, Relaxed);
        match outcome {
            Ok(Io::None) => {}
            Ok(Io::Read(n)) => {
                c.bytes.fetch_add(n, Relaxed);
                self.read_sizes.record(n);
            }
            Ok(Io::Written(n)) => {
                c.bytes.fetch_add(n, Relaxed);
                self.write_sizes.record(n);
            }
            Err(e) => {
                c.errors.fetch_add(1, Relaxed);
                let slot = usize::try_from(e.0)
                    .ok()
                    .filter(|&i| i < ERRNO_SLOTS)
                    .unwrap_or(0);
                c.errnos[slot].fetch_add(1, Relaxed);
            }
        }
    }

    /// Records how long one call of `fop` took.
    pub fn time(&self, fop: Fop, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.fops[fop.index()].latency_us.record(us);
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let fops = Fop::ALL
            .iter()
            .map(|&fop| {
                let c = &self.fops[fop.index()];
                let errnos = c
                    .errnos
                    .iter()
                    .enumerate()
                    .filter_map(|(i, n)| {
                        let n = n.load(Relaxed);
                        (n > 0).then(|| (errno_label(i), n))
                    })
                    .collect();
                FopSnapshot {
                    fop,
                    calls: c.calls.load(Relaxed),
                    errors: c.errors.load(Relaxed),
                    errnos,
                    bytes: c.bytes.load(Relaxed),
                    latency_us: c.latency_us.snapshot(),
                }
            })
            .collect();
        StatsSnapshot {
            uptime: self.started.elapsed(),
            fops,
            read_sizes: self.read_sizes.snapshot(),
            write_sizes: self.write_sizes.snapshot(),
        }
    }
}

fn errno_label(slot: usize) -> String {
    if slot == 0 {
        return "other".to_owned();
    }
    let e = Errno(i32::try_from(slot).unwrap_or(0));
    e.name()
        .map_or_else(|| format!("errno {slot}"), str::to_owned)
}

/// Counters of one fop at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct FopSnapshot {
    pub fop: Fop,
    pub calls: u64,
    pub errors: u64,
    /// Errno name (`"ENOENT"`, `"errno 97"`, `"other"`) to count.
    pub errnos: BTreeMap<String, u64>,
    /// Bytes read (`readv`) or written (`writev`); 0 for other fops.
    pub bytes: u64,
    pub latency_us: HistogramSnapshot,
}

/// Every counter of an instance at one instant, in fop-table order.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsSnapshot {
    pub uptime: Duration,
    pub fops: Vec<FopSnapshot>,
    /// Sizes of successful reads, in bytes.
    pub read_sizes: HistogramSnapshot,
    /// Sizes of successful writes, in bytes.
    pub write_sizes: HistogramSnapshot,
}

impl StatsSnapshot {
    /// Counters of `fop`.
    pub fn fop(&self, fop: Fop) -> &FopSnapshot {
        &self.fops[fop.index()]
    }

    /// Fops that were called, or timed (with `count-fop-hits` off only latencies are kept).
    pub fn active(&self) -> impl Iterator<Item = &FopSnapshot> {
        self.fops
            .iter()
            .filter(|f| f.calls > 0 || f.latency_us.count > 0)
    }

    pub fn total_calls(&self) -> u64 {
        self.fops.iter().map(|f| f.calls).sum()
    }

    pub fn total_errors(&self) -> u64 {
        self.fops.iter().map(|f| f.errors).sum()
    }

    pub fn bytes_read(&self) -> u64 {
        self.fop(Fop::Readv).bytes
    }

    pub fn bytes_written(&self) -> u64 {
        self.fop(Fop::Writev).bytes
    }

    /// The serialisable form used by the JSON dump: only active fops, keyed by name.
    pub fn report(&self) -> StatsReport {
        StatsReport {
            uptime_s: (self.uptime.as_secs_f64() * 1000.0).round() / 1000.0,
            total_calls: self.total_calls(),
            total_errors: self.total_errors(),
            bytes_read: self.bytes_read(),
            bytes_written: self.bytes_written(),
            read_sizes: self.read_sizes.report(),
            write_sizes: self.write_sizes.report(),
            fops: self
                .active()
                .map(|f| {
                    let report = FopReport {
                        calls: f.calls,
                        errors: f.errors,
                        errnos: f.errnos.clone(),
                        bytes: f.bytes,
                        latency_us: f.latency_us.report(),
                    };
                    (f.fop.name(), report)
                })
                .collect(),
        }
    }
}

/// JSON shape of a whole dump's counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatsReport {
    pub uptime_s: f64,
    pub total_calls: u64,
    pub total_errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_sizes: HistogramReport,
    pub write_sizes: HistogramReport,
    pub fops: BTreeMap<&'static str, FopReport>,
}

/// JSON shape of one fop's counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FopReport {
    pub calls: u64,
    pub errors: u64,
    pub errnos: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes: u64,
    pub latency_us: HistogramReport,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_errors_and_errnos() {
        let s = Stats::new();
        s.count(Fop::Lookup, Ok(Io::None));
        s.count(Fop::Lookup, Err(Errno::ENOENT));
        s.count(Fop::Lookup, Err(Errno::ENOENT));
        s.count(Fop::Lookup, Err(Errno::EACCES));
        s.count(Fop::Stat, Err(Errno(9999)));
        let snap = s.snapshot();
        let l = snap.fop(Fop::Lookup);
        assert_eq!((l.calls, l.errors), (4, 3));
        assert_eq!(l.errnos.get("ENOENT"), Some(&2));
        assert_eq!(l.errnos.get("EACCES"), Some(&1));
        assert_eq!(snap.fop(Fop::Stat).errnos.get("other"), Some(&1));
        assert_eq!((snap.total_calls(), snap.total_errors()), (5, 4));
        let active: Vec<Fop> = snap.active().map(|f| f.fop).collect();
        assert_eq!(active, vec![Fop::Lookup, Fop::Stat]);
    }

    #[test]
    fn counts_bytes_and_sizes_of_successful_io_only() {
        let s = Stats::new();
        s.count(Fop::Readv, Ok(Io::Read(4096)));
        s.count(Fop::Readv, Ok(Io::Read(100)));
        s.count(Fop::Readv, Err(Errno::EIO));
        s.count(Fop::Writev, Ok(Io::Written(8192)));
        let snap = s.snapshot();
        assert_eq!((snap.bytes_read(), snap.bytes_written()), (4196, 8192));
        assert_eq!((snap.read_sizes.count, snap.read_sizes.max), (2, 4096));
        assert_eq!(snap.write_sizes.count, 1);
        assert_eq!(snap.fop(Fop::Readv).errors, 1);
    }

    #[test]
    fn latency_is_kept_in_microseconds() {
        let s = Stats::new();
        s.time(Fop::Fsync, Duration::from_micros(1500));
        s.time(Fop::Fsync, Duration::from_nanos(999));
        let h = &s.snapshot().fop(Fop::Fsync).latency_us.clone();
        assert_eq!((h.count, h.min, h.max), (2, 0, 1500));
        // Timed but not counted (count-fop-hits off) still shows up.
        assert_eq!(s.snapshot().active().count(), 1);
    }

    #[test]
    fn report_names_active_fops_only() {
        let s = Stats::new();
        s.count(Fop::Writev, Ok(Io::Written(10)));
        s.time(Fop::Writev, Duration::from_micros(3));
        let r = s.snapshot().report();
        assert_eq!(r.fops.keys().copied().collect::<Vec<_>>(), vec!["writev"]);
        assert_eq!(r.fops["writev"].bytes, 10);
        assert_eq!(r.fops["writev"].latency_us.count, 1);
        assert_eq!(r.bytes_written, 10);
    }

    #[test]
    fn errno_labels() {
        assert_eq!(errno_label(0), "other");
        assert_eq!(errno_label(libc_enoent()), "ENOENT");
        assert_eq!(errno_label(133), "errno 133");
    }

    fn libc_enoent() -> usize {
        usize::try_from(Errno::ENOENT.0).unwrap_or(0)
    }
}
