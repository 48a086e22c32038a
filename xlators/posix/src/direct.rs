//! Which cold reads go around the page cache (`direct-read-min`), and which files several
//! clients read and so should be cached on the brick after all.
//!
//! A read that bypasses the page cache leaves nothing behind for the next reader: fine for
//! one client reading a file (its own kernel caches what it reads, for all its processes),
//! ruinous when a hundred clients read the same input set (a hundred disk reads of each byte
//! instead of one). So a file's cold reads go direct only for the first client that reads it
//! ([`xlator_api::ClientId`], one per connection; a local graph is one client); when another
//! client reads it while the first one's last direct read is less than
//! `direct-read-share-window` old, the file counts as shared: its reads use the page cache
//! (so they are mostly cached reads, which never come here) until a whole window passes
//! without a cold read of it. At most two disk reads of a byte per window, then cached.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use xlator_api::{Errno, Gfid};

use crate::data::DIO_ALIGN;
use crate::fdtable::OpenFile;
use crate::sys;

/// Files remembered at once. A full table (after forgetting the expired) reads through the
/// page cache: the safe side.
const CAPACITY: usize = 16_384;

/// The first client that read a file direct, or the mark of a shared file, and when.
#[derive(Clone, Copy)]
struct Seen {
    by: Option<u64>,
    at: Instant,
}

/// See the module documentation: the options, and which files went direct for whom.
pub struct DirectReads {
    /// `direct-read-min` in bytes; 0: never.
    min: AtomicU64,
    /// `direct-read-share-window` in milliseconds.
    window_ms: AtomicU64,
    /// Cleared when `cachestat(2)` is missing (before Linux 6.5).
    cachestat_works: AtomicBool,
    files: Mutex<HashMap<Gfid, Seen>>,
}

impl Default for DirectReads {
    /// Off until [`DirectReads::configure`] (the translator passes its options).
    fn default() -> Self {
        DirectReads {
            min: AtomicU64::new(0),
            window_ms: AtomicU64::new(30_000),
            cachestat_works: AtomicBool::new(true),
            files: Mutex::new(HashMap::new()),
        }
    }
}

impl DirectReads {
    /// Applies `direct-read-min` and `direct-read-share-window`.
    pub fn configure(&self, min: u64, window: Duration) {
        self.min.store(min, Ordering::Relaxed);
        let ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        self.window_ms.store(ms, Ordering::Relaxed);
    }

    /// Whether a read of `size` at `offset` through `f` by `client` should go around the page
    /// cache: large enough, aligned, through an fd open for reading, not one page of the
    /// range cached (so nothing dirty either), and the file not read by another client
    /// lately.
    pub fn wanted(&self, f: &OpenFile, client: u64, offset: u64, size: u32) -> bool {
        let min = self.min.load(Ordering::Relaxed);
        if min == 0
            || u64::from(size) < min
            || !offset.is_multiple_of(DIO_ALIGN as u64)
            || f.flags & libc::O_ACCMODE == libc::O_WRONLY
            || !self.cachestat_works.load(Ordering::Relaxed)
        {
            return false;
        }
        match sys::cached_pages(f.as_fd(), offset, u64::from(size)) {
            Ok(0) => {
                let window = Duration::from_millis(self.window_ms.load(Ordering::Relaxed));
                self.may_read_direct(f.gfid, client, window, Instant::now())
            }
            Ok(_) => false,
            Err(Errno::ENOSYS) => {
                tracing::info!("cachestat(2) is not available: direct-read-min has no effect");
                self.cachestat_works.store(false, Ordering::Relaxed);
                false
            }
            // EPERM: neither owner nor writer of the file (a brick not run as root), or a
            // seccomp filter; other errors: not a regular file. The page cache it is.
            Err(_) => false,
        }
    }

    /// Whether a cold read of `gfid` by `client` may go direct, as of `now`, noting it.
    fn may_read_direct(&self, gfid: Gfid, client: u64, window: Duration, now: Instant) -> bool {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = |s: &Seen| now.saturating_duration_since(s.at) < window;
        match files.get_mut(&gfid) {
            Some(s) if s.by == Some(client) => {
                s.at = now;
                true
            }
            Some(s) if fresh(s) => {
                // Another client (or a file already shared): cache it, for another window.
                *s = Seen { by: None, at: now };
                false
            }
            Some(s) => {
                *s = Seen {
                    by: Some(client),
                    at: now,
                };
                true
            }
            None => {
                if files.len() >= CAPACITY {
                    files.retain(|_, s| fresh(s));
                    if files.len() >= CAPACITY {
                        return false;
                    }
                }
                files.insert(
                    gfid,
                    Seen {
                        by: Some(client),
                        at: now,
                    },
                );
                true
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.files.lock().map(|f| f.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(30);

    fn g(n: u8) -> Gfid {
        Gfid([n; 16])
    }

    #[test]
    fn one_client_reads_direct_a_second_makes_the_file_shared_for_a_window() {
        let d = DirectReads::default();
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert!(d.may_read_direct(g(1), 1, W, t0));
        assert!(d.may_read_direct(g(1), 1, W, t0 + s), "same client again");
        assert!(d.may_read_direct(g(2), 2, W, t0 + s), "another file");
        assert!(
            !d.may_read_direct(g(1), 3, W, t0 + 2 * s),
            "a second client"
        );
        assert!(!d.may_read_direct(g(1), 1, W, t0 + 3 * s), "shared now");
        assert!(!d.may_read_direct(g(1), 4, W, t0 + 4 * s), "still shared");
        // A whole window without a read: direct again, for whoever reads first.
        let later = t0 + 4 * s + W;
        assert!(d.may_read_direct(g(1), 5, W, later));
        assert!(!d.may_read_direct(g(1), 6, W, later + s));
        // A reread after the first client's window went by is a new first read.
        assert!(d.may_read_direct(g(2), 7, W, t0 + s + W));
    }

    #[test]
    fn a_full_table_forgets_the_expired_and_otherwise_reads_cached() {
        let d = DirectReads::default();
        let t0 = Instant::now();
        let gfid = |i: usize| {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&(i as u64).to_le_bytes());
            Gfid(b)
        };
        for i in 0..CAPACITY {
            assert!(d.may_read_direct(gfid(i), i as u64, W, t0));
        }
        let extra = gfid(CAPACITY);
        assert!(!d.may_read_direct(extra, 0, W, t0), "full of live entries");
        assert!(d.may_read_direct(extra, 0, W, t0 + W), "expired forgotten");
        assert_eq!(d.len(), 1);
    }
}
