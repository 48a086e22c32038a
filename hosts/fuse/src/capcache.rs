//! Negative cache of `security.capability`.
//!
//! Before every `write(2)` the kernel asks whether the file carries file capabilities that the
//! write must drop (`file_remove_privs` -> `getxattr("security.capability")`); FUSE never marks
//! inodes "no security xattrs", so without a cache each small write costs two round trips
//! through the graph. Remembering "this GFID has none" removes the second one.
//!
//! The answer only decides whether this kernel sends a removexattr before the write; the
//! brick's own kernel drops `security.capability` on every write it makes anyway (a
//! capability never survives a write, whoever writes). So the entry can outlive the attribute
//! timeout (`--capability-timeout`, default 60 s): what it bounds is how late a capability
//! set through another client shows in a getxattr here. One set or removed through this mount
//! drops the entry at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use xlator_api::Gfid;

/// The xattr the kernel probes before writes.
pub const CAPABILITY_XATTR: &str = "security.capability";
/// Bound on remembered GFIDs; the cache is cleared when it is reached.
const MAX_ENTRIES: usize = 65_536;

#[derive(Debug)]
pub struct CapCache {
    ttl: Duration,
    none_until: Mutex<HashMap<Gfid, Instant>>,
}

impl CapCache {
    /// A cache whose entries live `ttl` (zero: caching off).
    pub fn new(ttl: Duration) -> CapCache {
        CapCache {
            ttl,
            none_until: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Gfid, Instant>> {
        self.none_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `gfid` is known to have no `security.capability` right now.
    pub fn known_none(&self, gfid: &Gfid, now: Instant) -> bool {
        if self.ttl.is_zero() {
            return false;
        }
        let mut m = self.lock();
        match m.get(gfid) {
            Some(until) if *until > now => true,
            Some(_) => {
                m.remove(gfid);
                false
            }
            None => false,
        }
    }

    /// Records that the graph answered ENODATA for `gfid`.
    pub fn set_none(&self, gfid: Gfid, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut m = self.lock();
        if m.len() >= MAX_ENTRIES {
            m.clear();
        }
        m.insert(gfid, now + self.ttl);
    }

    /// Forgets `gfid` (its xattrs were changed through this mount).
    pub fn invalidate(&self, gfid: &Gfid) {
        self.lock().remove(gfid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_for_ttl_and_invalidates() {
        let c = CapCache::new(Duration::from_secs(1));
        let (g, t0) = (Gfid::random(), Instant::now());
        assert!(!c.known_none(&g, t0));
        c.set_none(g, t0);
        assert!(c.known_none(&g, t0 + Duration::from_millis(999)));
        assert!(!c.known_none(&g, t0 + Duration::from_secs(1)));
        c.set_none(g, t0);
        c.invalidate(&g);
        assert!(!c.known_none(&g, t0));
    }

    #[test]
    fn zero_ttl_disables() {
        let c = CapCache::new(Duration::ZERO);
        let (g, t0) = (Gfid::random(), Instant::now());
        c.set_none(g, t0);
        assert!(!c.known_none(&g, t0));
    }
}
