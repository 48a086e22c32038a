//! A lock-free histogram of `u64` samples in power-of-two buckets (latencies in µs, I/O sizes
//! in bytes). Recording is a handful of relaxed atomic operations; reading takes a
//! [`HistogramSnapshot`], on which min/max/mean and percentile approximations are computed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// Number of buckets. Bucket 0 holds the value 0; bucket `i >= 1` holds `[2^(i-1), 2^i)`; the
/// last bucket is open-ended (in µs it starts at about 76 hours, so it never fills in practice).
pub const BUCKETS: usize = 40;

/// The bucket a value falls into.
pub fn bucket_of(v: u64) -> usize {
    ((u64::BITS - v.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// Smallest value of bucket `i`.
pub fn bucket_low(i: usize) -> u64 {
    if i == 0 { 0 } else { 1u64 << (i - 1) }
}

/// Exclusive upper bound of bucket `i` (`u64::MAX` for the open-ended last bucket).
pub fn bucket_high(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        u64::MAX
    } else {
        1u64 << i
    }
}

/// The live, shared histogram.
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
    /// `u64::MAX` while empty.
    min: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }

    /// Adds one sample.
    pub fn record(&self, v: u64) {
        self.buckets[bucket_of(v)].fetch_add(1, Relaxed);
        self.sum.fetch_add(v, Relaxed);
        // Plain loads first: after warm-up min/max rarely change, and a load is cheaper than
        // the compare-exchange loop behind fetch_min/fetch_max.
        if v < self.min.load(Relaxed) {
            self.min.fetch_min(v, Relaxed);
        }
        if v > self.max.load(Relaxed) {
            self.max.fetch_max(v, Relaxed);
        }
    }

    /// A copy of the counters. Writers are not stopped, so a snapshot taken under load may mix
    /// samples recorded during the copy; `count` is the sum of the copied buckets, so bucket
    /// counts and percentiles are always consistent with each other.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let count = buckets.iter().sum();
        let min = self.min.load(Relaxed);
        HistogramSnapshot {
            count,
            sum: self.sum.load(Relaxed),
            min: if count == 0 || min == u64::MAX {
                0
            } else {
                min
            },
            max: self.max.load(Relaxed),
            buckets,
        }
    }
}

/// A point-in-time copy of a [`Histogram`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HistogramSnapshot {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    /// One count per bucket, [`BUCKETS`] long.
    pub buckets: Vec<u64>,
}

impl HistogramSnapshot {
    /// Arithmetic mean (exact: from the sum), 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Approximate `q`-quantile (`0.5` for the median): finds the bucket holding the sample of
    /// rank `ceil(q * count)`, interpolates linearly inside it, and clamps to `[min, max]`.
    /// The error is below the width of that bucket, i.e. at most a factor of two.
    pub fn percentile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                continue;
            }
            if seen + n >= rank {
                let (lo, hi) = (
                    bucket_low(i),
                    bucket_high(i).min(self.max.saturating_add(1)),
                );
                let frac = (rank - seen) as f64 / n as f64;
                let v = lo as f64 + (hi.saturating_sub(lo) as f64 - 1.0).max(0.0) * frac;
                return (v as u64).clamp(self.min, self.max);
            }
            seen += n;
        }
        self.max
    }

    /// The non-empty buckets, for reports.
    pub fn report(&self) -> HistogramReport {
        HistogramReport {
            count: self.count,
            min: self.min,
            max: self.max,
            mean: (self.mean() * 100.0).round() / 100.0,
            p50: self.percentile(0.50),
            p90: self.percentile(0.90),
            p99: self.percentile(0.99),
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, &n)| Bucket {
                    ge: bucket_low(i),
                    lt: bucket_high(i),
                    count: n,
                })
                .collect(),
        }
    }
}

/// What dumps show of a histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HistogramReport {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    /// Non-empty buckets only, in increasing order.
    pub buckets: Vec<Bucket>,
}

/// One non-empty bucket: `count` samples `v` with `ge <= v < lt`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub ge: u64,
    pub lt: u64,
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(2), 2);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(4), 3);
        assert_eq!(bucket_of(1023), 10);
        assert_eq!(bucket_of(1024), 11);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for v in [0, 1, 2, 3, 7, 8, 1000, 123_456_789] {
            let i = bucket_of(v);
            assert!(
                bucket_low(i) <= v && v < bucket_high(i),
                "{v} outside bucket {i}"
            );
        }
        assert_eq!(bucket_high(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn empty_snapshot_is_all_zero() {
        let s = Histogram::new().snapshot();
        assert_eq!((s.count, s.min, s.max, s.percentile(0.5)), (0, 0, 0, 0));
        assert_eq!(s.mean(), 0.0);
        assert!(s.report().buckets.is_empty());
    }

    #[test]
    fn min_max_mean_exact() {
        let h = Histogram::new();
        for v in [5, 100, 7, 3000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!((s.count, s.sum, s.min, s.max), (4, 3112, 5, 3000));
        assert_eq!(s.mean(), 778.0);
    }

    #[test]
    fn percentiles_within_a_factor_of_two_and_clamped() {
        let h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v);
        }
        let s = h.snapshot();
        for (q, exact) in [(0.5, 500u64), (0.9, 900), (0.99, 990)] {
            let p = s.percentile(q);
            assert!(
                p >= exact / 2 && p <= exact * 2,
                "p{q} = {p}, exact {exact}"
            );
        }
        assert_eq!(s.percentile(1.0), 1000);
        assert_eq!(s.percentile(0.0), 1);
        // A single sample: every percentile is that sample.
        let one = Histogram::new();
        one.record(37);
        let s = one.snapshot();
        assert_eq!((s.percentile(0.5), s.percentile(0.99)), (37, 37));
    }

    #[test]
    fn percentile_is_monotonic() {
        let h = Histogram::new();
        for v in [1, 1, 2, 9, 9, 9, 70, 500, 500, 40_000] {
            h.record(v);
        }
        let s = h.snapshot();
        let ps: Vec<u64> = (0..=100)
            .map(|i| s.percentile(f64::from(i) / 100.0))
            .collect();
        assert!(ps.windows(2).all(|w| w[0] <= w[1]), "{ps:?}");
    }

    #[test]
    fn report_lists_non_empty_buckets() {
        let h = Histogram::new();
        for v in [0, 3, 3, 17] {
            h.record(v);
        }
        let r = h.snapshot().report();
        assert_eq!(
            r.buckets,
            vec![
                Bucket {
                    ge: 0,
                    lt: 1,
                    count: 1
                },
                Bucket {
                    ge: 2,
                    lt: 4,
                    count: 2
                },
                Bucket {
                    ge: 16,
                    lt: 32,
                    count: 1
                },
            ]
        );
        assert_eq!(r.count, 4);
    }

    #[test]
    fn concurrent_records_are_all_counted() {
        let h = std::sync::Arc::new(Histogram::new());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for v in 0..10_000u64 {
                        h.record(v + t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("recorder thread");
        }
        let s = h.snapshot();
        assert_eq!((s.count, s.min, s.max), (40_000, 0, 10_002));
    }
}
