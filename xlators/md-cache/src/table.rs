//! What md-cache remembers, and the rule that keeps it from remembering anything stale.
//!
//! Every change to an inode, seen going through this translator (before the fop is sent and
//! again when it returns) or told by an upcall, *touches* it: its cached attributes are
//! dropped and it gets the next sequence number. A reply that would be cached carries the
//! sequence number taken when its request was sent, and is cached only if its inode was not
//! touched since and no change of it is in flight. So a stat that overtook a write, or that
//! left before an upcall arrived, is never cached. Absent names are keyed by their directory
//! and follow the same rule through the directory's number: any change in the directory, or
//! of it, drops them.
//!
//! The table is bounded: past `max` entries the touch record is cleared and a floor raised,
//! which refuses every reply sent before it (a moment of misses instead of a stale answer).

use std::collections::HashMap;
use std::time::Duration;

use xlator_api::{Gfid, Iatt};

/// When a request was sent, for [`Table::cache_attr`] and [`Table::cache_absent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp(u64);

/// Counters for the dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub attr_hits: u64,
    pub attr_misses: u64,
    pub absent_hits: u64,
    pub invalidations: u64,
    pub upcalls: u64,
}

pub struct Table {
    seq: u64,
    /// Replies sent before this are not cached (the touch record was cleared).
    floor: u64,
    touched: HashMap<Gfid, u64>,
    /// Changes in flight per inode.
    writing: HashMap<Gfid, u32>,
    /// Attributes and when (host clock) they arrived.
    attrs: HashMap<Gfid, (Iatt, Duration)>,
    /// Names known absent, by directory, and when that was learnt.
    absent: HashMap<Gfid, HashMap<String, Duration>>,
    absent_len: usize,
    /// The last inode seen under each name, so that a change of the name (unlink, rename,
    /// an ENTRY upcall) drops that inode's attributes too.
    names: HashMap<(Gfid, String), Gfid>,
    max: usize,
    pub counters: Counters,
}

impl Table {
    pub fn new(max: usize) -> Table {
        Table {
            seq: 0,
            floor: 0,
            touched: HashMap::new(),
            writing: HashMap::new(),
            attrs: HashMap::new(),
            absent: HashMap::new(),
            absent_len: 0,
            names: HashMap::new(),
            max: max.max(1),
            counters: Counters::default(),
        }
    }

    pub fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
    }

    /// Take before sending a request whose reply may be cached.
    pub fn stamp(&self) -> Stamp {
        Stamp(self.seq)
    }

    fn fresh_since(&self, g: &Gfid, s: Stamp) -> bool {
        s.0 >= self.floor
            && self.touched.get(g).is_none_or(|&t| t <= s.0)
            && !self.writing.contains_key(g)
    }

    /// `g` changed (or is changing): its attributes, and the absent names under it, are
    /// dropped, and replies sent before now are not cached for it.
    pub fn touch(&mut self, g: Gfid) {
        self.seq += 1;
        self.counters.invalidations += 1;
        if self.touched.len() >= self.max * 2 {
            self.touched.clear();
            self.floor = self.seq;
        }
        self.touched.insert(g, self.seq);
        self.attrs.remove(&g);
        if let Some(names) = self.absent.remove(&g) {
            self.absent_len -= names.len();
        }
    }

    /// Name `name` in `dir` changed: the directory is touched, and the inode last seen
    /// under the name.
    pub fn touch_name(&mut self, dir: Gfid, name: &str) {
        self.touch(dir);
        if let Some(g) = self.names.remove(&(dir, name.to_owned())) {
            self.touch(g);
        }
    }

    /// The inode last seen as `name` in `dir`.
    pub fn named(&self, dir: Gfid, name: &str) -> Option<Gfid> {
        self.names.get(&(dir, name.to_owned())).copied()
    }

    /// A change of `g` goes out: touched, and nothing is cached for it until it is
    /// [`Table::end_change`]d.
    pub fn begin_change(&mut self, g: Gfid) {
        self.touch(g);
        *self.writing.entry(g).or_default() += 1;
    }

    pub fn end_change(&mut self, g: Gfid) {
        if let Some(n) = self.writing.get_mut(&g) {
            *n -= 1;
            if *n == 0 {
                self.writing.remove(&g);
            }
        }
        self.touch(g);
    }

    /// Caches `a` (from a reply whose request was stamped `s`), unless its inode changed
    /// since.
    pub fn cache_attr(&mut self, a: &Iatt, s: Stamp, now: Duration) {
        if a.gfid.is_null() || !self.fresh_since(&a.gfid, s) {
            return;
        }
        if self.attrs.len() >= self.max && !self.attrs.contains_key(&a.gfid) {
            self.shed_attrs();
        }
        self.attrs.insert(a.gfid, (*a, now));
    }

    /// Also remembers that `a` was found as `name` in `dir`.
    pub fn cache_entry(&mut self, dir: Gfid, name: &str, a: &Iatt, s: Stamp, now: Duration) {
        if self.names.len() >= self.max {
            self.names.clear();
        }
        self.names.insert((dir, name.to_owned()), a.gfid);
        self.cache_attr(a, s, now);
    }

    /// The oldest half of the attributes go.
    fn shed_attrs(&mut self) {
        let mut ages: Vec<Duration> = self.attrs.values().map(|(_, t)| *t).collect();
        ages.sort_unstable();
        let cut = ages[ages.len() / 2];
        self.attrs.retain(|_, (_, t)| *t > cut);
    }

    /// `g`'s attributes, if cached less than `ttl` ago.
    pub fn attr(&mut self, g: &Gfid, ttl: Duration, now: Duration) -> Option<Iatt> {
        let hit = self
            .attrs
            .get(g)
            .filter(|(_, at)| now.saturating_sub(*at) < ttl)
            .map(|(a, _)| *a);
        match hit {
            Some(_) => self.counters.attr_hits += 1,
            None => {
                self.attrs.remove(g);
                self.counters.attr_misses += 1;
            }
        }
        hit
    }

    /// `name` was not found in `dir` (a lookup stamped `s`).
    pub fn cache_absent(&mut self, dir: Gfid, name: &str, s: Stamp, now: Duration) {
        if !self.fresh_since(&dir, s) {
            return;
        }
        if self.absent_len >= self.max {
            self.absent.clear();
            self.absent_len = 0;
        }
        if self
            .absent
            .entry(dir)
            .or_default()
            .insert(name.to_owned(), now)
            .is_none()
        {
            self.absent_len += 1;
        }
    }

    /// Whether `name` is known absent from `dir`, learnt less than `ttl` ago.
    pub fn is_absent(&mut self, dir: &Gfid, name: &str, ttl: Duration, now: Duration) -> bool {
        let Some(names) = self.absent.get_mut(dir) else {
            return false;
        };
        match names.get(name) {
            Some(at) if now.saturating_sub(*at) < ttl => {
                self.counters.absent_hits += 1;
                true
            }
            Some(_) => {
                names.remove(name);
                self.absent_len -= 1;
                false
            }
            None => false,
        }
    }

    /// (inodes with attributes, absent names).
    pub fn sizes(&self) -> (usize, usize) {
        (self.attrs.len(), self.absent_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(1);

    fn g(n: u8) -> Gfid {
        let mut b = [0u8; 16];
        b[0] = n;
        b[15] = 9;
        Gfid(b)
    }

    fn attr(n: u8, size: u64) -> Iatt {
        Iatt {
            gfid: g(n),
            size,
            ..Default::default()
        }
    }

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn attributes_answer_within_the_timeout_only() {
        let mut t = Table::new(100);
        let s = t.stamp();
        t.cache_attr(&attr(1, 5), s, at(0));
        assert_eq!(t.attr(&g(1), TTL, at(999)).map(|a| a.size), Some(5));
        assert_eq!(t.attr(&g(1), TTL, at(1000)), None);
        assert_eq!(t.attr(&g(1), TTL, at(0)), None, "an expired entry is gone");
    }

    #[test]
    fn a_reply_that_overlapped_a_change_is_not_cached() {
        let mut t = Table::new(100);
        // stat sent, then a write starts and ends, then the stat's reply comes.
        let s = t.stamp();
        t.begin_change(g(1));
        t.end_change(g(1));
        t.cache_attr(&attr(1, 5), s, at(0));
        assert_eq!(t.attr(&g(1), TTL, at(0)), None);
        // A reply sent while a change is in flight is not cached either.
        t.begin_change(g(1));
        let s = t.stamp();
        t.cache_attr(&attr(1, 6), s, at(0));
        assert_eq!(t.attr(&g(1), TTL, at(0)), None);
        t.end_change(g(1));
        let s = t.stamp();
        t.cache_attr(&attr(1, 7), s, at(0));
        assert_eq!(t.attr(&g(1), TTL, at(0)).map(|a| a.size), Some(7));
        // Other inodes are not affected by g(1)'s changes.
        let s = t.stamp();
        t.begin_change(g(1));
        t.cache_attr(&attr(2, 1), s, at(0));
        assert!(t.attr(&g(2), TTL, at(0)).is_some());
    }

    #[test]
    fn absent_names_go_with_any_change_of_their_directory() {
        let mut t = Table::new(100);
        let s = t.stamp();
        t.cache_absent(g(1), "x", s, at(0));
        assert!(t.is_absent(&g(1), "x", TTL, at(10)));
        assert!(!t.is_absent(&g(1), "y", TTL, at(10)));
        t.touch_name(g(1), "x");
        assert!(!t.is_absent(&g(1), "x", TTL, at(10)));
        // A lookup that was in flight during the create is not believed.
        let s = t.stamp();
        t.begin_change(g(1));
        t.end_change(g(1));
        t.cache_absent(g(1), "x", s, at(0));
        assert!(!t.is_absent(&g(1), "x", TTL, at(10)));
        assert!(!t.is_absent(&g(1), "x", TTL, at(5000)));
    }

    #[test]
    fn a_name_change_drops_the_inode_it_named() {
        let mut t = Table::new(100);
        let s = t.stamp();
        t.cache_entry(g(1), "f", &attr(2, 3), s, at(0));
        assert!(t.attr(&g(2), TTL, at(0)).is_some());
        t.touch_name(g(1), "f");
        assert!(t.attr(&g(2), TTL, at(0)).is_none());
    }

    #[test]
    fn bounded_and_a_cleared_record_refuses_older_replies() {
        let mut t = Table::new(64);
        let old = t.stamp();
        for n in 0..=255u8 {
            let s = t.stamp();
            t.cache_attr(&attr(n, 1), s, at(u64::from(n)));
            t.cache_absent(g(n), "x", s, at(0));
        }
        let (a, b) = t.sizes();
        assert!(a <= 64 && b <= 64, "{a} {b}");
        for n in 0..=200u8 {
            t.touch(g(n));
        }
        // The touch record was cleared on the way: a reply older than that is refused even
        // for an inode whose touch was forgotten.
        t.cache_attr(&attr(3, 1), old, at(0));
        assert!(t.attr(&g(3), TTL, at(0)).is_none());
    }
}
