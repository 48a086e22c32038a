//! Counters of the cluster-facing paths, for the statedump (relaxed atomics, touched only on
//! those paths: the plain fops count nothing).

use std::sync::atomic::{AtomicU64, Ordering};

use xlator_api::Dump;

#[derive(Default)]
pub struct Stats {
    /// Creates with `CreateXattrs` that made their object.
    pub staged_creates: AtomicU64,
    /// Creates with `CreateXattrs` that failed (EEXIST included) and were undone.
    pub staged_failed: AtomicU64,
    /// xattrop keys with a zero operand, answered by a read alone.
    pub xattrop_reads: AtomicU64,
    /// Multi-xattr writes (`xattrop`, `setxattrs`) that failed part way and were put back.
    pub rollbacks: AtomicU64,
}

impl Stats {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn dump(&self) -> Dump {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Dump::counters(&[
            ("staged-creates", g(&self.staged_creates)),
            ("staged-creates-failed", g(&self.staged_failed)),
            ("xattrop-zero-reads", g(&self.xattrop_reads)),
            ("xattr-rollbacks", g(&self.rollbacks)),
        ])
    }
}
