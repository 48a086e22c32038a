//! The cache's state: per-file pages, attributes and generations, the page LRU across files,
//! and the name index used to drop files on unlink/rename. Pure and synchronous: the I/O side
//! ([`crate::cache`]) holds it under a mutex that is never held across an await.
//!
//! Invariants:
//! - a page is inserted only if the file's generation is the one its fill started under; every
//!   invalidation takes a fresh generation from one counter shared by all files, so a fill
//!   that raced with a modification (or with the file's state being dropped and re-made) can
//!   never insert what it read;
//! - only a file's highest cached page may be short (end of file): inserting a page drops
//!   shorter pages before it, inserting a short page drops the pages after it;
//! - `lru.used()` is the sum of the lengths of all cached pages, and stays at or below the
//!   limit after every insertion.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use xlator_api::{Buf, Errno, FileType, Gfid, Iatt, Timespec};

use crate::lru::Lru;
use crate::options::Policy;
use crate::pages::Geometry;
use crate::priority::DEFAULT_PRIORITY;

/// Number of file states kept before page-less ones are swept.
const SWEEP_FLOOR: usize = 16 * 1024;

/// A cached page's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageKey {
    pub gfid: Gfid,
    pub index: u64,
}

/// The attributes cached pages are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub kind: FileType,
    pub size: u64,
    pub mtime: Timespec,
}

impl From<&Iatt> for Attr {
    fn from(a: &Iatt) -> Attr {
        Attr {
            kind: a.kind,
            size: a.size,
            mtime: a.mtime,
        }
    }
}

/// What a modification touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `len` bytes at `offset` (and possibly the file size).
    Range { offset: u64, len: u64 },
    /// Anything (truncate, O_TRUNC, O_APPEND writes).
    Whole,
}

/// Counters for statedumps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Pages served from the cache.
    pub hits: u64,
    /// Pages fetched from the child.
    pub misses: u64,
    /// Pages a read waited for because another read was already fetching them.
    pub joins: u64,
    /// fstat calls made to revalidate a file after the timeout.
    pub revalidations: u64,
    /// Files whose pages were dropped because their mtime or size changed.
    pub stale: u64,
    /// Local modifications that dropped pages.
    pub invalidations: u64,
    /// Pages evicted to stay under the size limit.
    pub evictions: u64,
    /// Reads passed to the child without caching (fd mode, file size, priority 0...).
    pub bypassed: u64,
}

/// How a page read is answered.
pub enum Slot<F> {
    /// From the cache.
    Hit(Buf),
    /// By a fill (a new one, or one already in flight for the same page).
    Fill(F),
}

struct FileCache<F> {
    generation: u64,
    pages: BTreeMap<u64, Buf>,
    /// Fills in flight by page: (fill id, fill). Cleared by invalidation, so later reads
    /// never join a fill that may have read data older than the invalidating change.
    fills: HashMap<u64, (u64, F)>,
    attr: Option<Attr>,
    /// Our own modification changed mtime/size after `attr` was seen: adopt the next
    /// attributes seen instead of treating them as a change by someone else.
    changed_locally: bool,
    validated_at: Option<Duration>,
    priority: u32,
    /// The last name the file was seen under, for the name index.
    name: Option<(Gfid, String)>,
}

impl<F> FileCache<F> {
    fn new(generation: u64) -> FileCache<F> {
        FileCache {
            generation,
            pages: BTreeMap::new(),
            fills: HashMap::new(),
            attr: None,
            changed_locally: false,
            validated_at: None,
            priority: DEFAULT_PRIORITY,
            name: None,
        }
    }

    fn idle(&self) -> bool {
        self.pages.is_empty() && self.fills.is_empty()
    }
}

/// The whole cache state.
pub struct Table<F> {
    geo: Geometry,
    limit: u64,
    lru: Lru<PageKey>,
    files: HashMap<Gfid, FileCache<F>>,
    names: HashMap<(Gfid, String), Gfid>,
    next_gen: u64,
    next_fill: u64,
    sweep_at: usize,
    pub counters: Counters,
}

impl<F: Clone> Table<F> {
    pub fn new(geo: Geometry, limit: u64) -> Table<F> {
        Table {
            geo,
            limit,
            lru: Lru::new(),
            files: HashMap::new(),
            names: HashMap::new(),
            next_gen: 0,
            next_fill: 0,
            sweep_at: SWEEP_FLOOR,
            counters: Counters::default(),
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Bytes cached.
    pub fn used(&self) -> u64 {
        self.lru.used()
    }

    /// Pages cached.
    pub fn pages(&self) -> usize {
        self.lru.len()
    }

    /// Files with state (attributes, pages or fills).
    pub fn files(&self) -> usize {
        self.files.len()
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Whether page `index` of `gfid` is cached.
    pub fn has_page(&self, gfid: Gfid, index: u64) -> bool {
        self.files
            .get(&gfid)
            .is_some_and(|f| f.pages.contains_key(&index))
    }

    fn generation(&mut self) -> u64 {
        self.next_gen += 1;
        self.next_gen
    }

    /// The state of `gfid`, made if missing (sweeping idle states now and then).
    fn file_mut(&mut self, gfid: Gfid) -> &mut FileCache<F> {
        if !self.files.contains_key(&gfid) {
            if self.files.len() >= self.sweep_at {
                self.sweep();
            }
            let generation = self.generation();
            self.files.insert(gfid, FileCache::new(generation));
        }
        self.files.entry(gfid).or_insert_with(|| FileCache::new(0))
    }

    /// Drops the states of files with neither pages nor fills.
    fn sweep(&mut self) {
        let names = &mut self.names;
        self.files.retain(|_, f| {
            if f.idle() {
                if let Some(n) = f.name.take() {
                    names.remove(&n);
                }
                false
            } else {
                true
            }
        });
        self.sweep_at = SWEEP_FLOOR.max(self.files.len() * 2);
    }

    /// Whether a read at `now` must first revalidate `gfid` (attributes unknown, or last seen
    /// `timeout` or more ago).
    pub fn needs_validation(&self, gfid: Gfid, now: Duration, timeout: Duration) -> bool {
        match self.files.get(&gfid) {
            None => true,
            Some(f) => {
                f.attr.is_none()
                    || f.validated_at
                        .is_none_or(|t| now.saturating_sub(t) >= timeout)
            }
        }
    }

    /// Attributes of `gfid` seen in a reply at `now`: a changed mtime, size or type drops the
    /// file's pages (unless the change is our own). Makes state only for regular files.
    pub fn observe(&mut self, a: &Iatt, now: Duration) {
        if a.gfid.is_null() || (a.kind != FileType::Regular && !self.files.contains_key(&a.gfid)) {
            return;
        }
        let new = Attr::from(a);
        let f = self.file_mut(a.gfid);
        let stale = f.attr.is_some_and(|old| old != new) && !f.changed_locally;
        f.attr = Some(new);
        f.changed_locally = false;
        f.validated_at = Some(now);
        if stale {
            self.counters.stale += 1;
            self.drop_pages(a.gfid, Change::Whole);
        }
    }

    /// Attributes returned by our own modification (setattr): adopted without comparison.
    pub fn adopt(&mut self, a: &Iatt, now: Duration) {
        if let Some(f) = self.files.get_mut(&a.gfid) {
            f.changed_locally = true;
        }
        self.observe(a, now);
    }

    /// `gfid` (with attributes `a`) was seen under `name` in directory `parent`.
    pub fn named(&mut self, parent: Gfid, name: &str, a: &Iatt, priority: u32, now: Duration) {
        if a.kind != FileType::Regular || a.gfid.is_null() {
            return;
        }
        self.observe(a, now);
        let key = (parent, name.to_owned());
        let f = self.file_mut(a.gfid);
        f.priority = priority;
        let old = f.name.replace(key.clone());
        if let Some(old) = old.filter(|o| *o != key)
            && self.names.get(&old) == Some(&a.gfid)
        {
            self.names.remove(&old);
        }
        if let Some(prev) = self.names.insert(key, a.gfid)
            && prev != a.gfid
            && let Some(pf) = self.files.get_mut(&prev)
        {
            pf.name = None;
        }
    }

    /// Whether reads of `gfid` may be cached under `policy`.
    pub fn cacheable(&self, gfid: Gfid, policy: &Policy) -> bool {
        let Some(f) = self.files.get(&gfid) else {
            return false;
        };
        f.priority > 0
            && self.limit >= self.geo.page_size()
            && f.attr
                .is_some_and(|a| a.kind == FileType::Regular && policy.size_allowed(a.size))
    }

    /// Page `index` of `gfid`: a hit, the fill in flight, or a new fill made by
    /// `make(generation, fill id)` (pass both to [`Table::fill_done`]).
    pub fn page_or_fill(
        &mut self,
        gfid: Gfid,
        index: u64,
        make: impl FnOnce(u64, u64) -> F,
    ) -> Slot<F> {
        self.next_fill += 1;
        let id = self.next_fill;
        let f = self.file_mut(gfid);
        if let Some(page) = f.pages.get(&index) {
            let (page, priority) = (page.clone(), f.priority);
            self.lru.touch(&PageKey { gfid, index }, priority);
            self.counters.hits += 1;
            return Slot::Hit(page);
        }
        if let Some((_, fill)) = f.fills.get(&index) {
            let fill = fill.clone();
            self.counters.joins += 1;
            return Slot::Fill(fill);
        }
        let fill = make(f.generation, id);
        f.fills.insert(index, (id, fill.clone()));
        self.counters.misses += 1;
        Slot::Fill(fill)
    }

    /// A fill of page `index` started under `generation` ended with `r`: caches the page if the
    /// file has not changed since and the page holds data.
    pub fn fill_done(
        &mut self,
        gfid: Gfid,
        index: u64,
        generation: u64,
        id: u64,
        r: &Result<Buf, Errno>,
    ) {
        let geo = self.geo;
        let limit = self.limit;
        let Some(f) = self.files.get_mut(&gfid) else {
            return;
        };
        if f.fills.get(&index).is_some_and(|(i, _)| *i == id) {
            f.fills.remove(&index);
        }
        let Ok(page) = r else { return };
        if f.generation != generation || page.is_empty() || page.len() as u64 > limit {
            return;
        }
        let mut evict: Vec<u64> = Vec::new();
        if !geo.is_full(page) {
            // End of file inside this page: nothing after it is data any more.
            evict.extend(f.pages.range(index + 1..).map(|(i, _)| *i));
        }
        if let Some((&last, p)) = f.pages.range(..index).next_back()
            && !geo.is_full(p)
        {
            evict.push(last);
        }
        let priority = f.priority;
        f.pages.insert(index, page.clone());
        for i in evict {
            self.remove_page(gfid, i);
        }
        self.lru
            .insert(PageKey { gfid, index }, priority, page.len() as u64);
        self.evict();
    }

    fn remove_page(&mut self, gfid: Gfid, index: u64) {
        if let Some(f) = self.files.get_mut(&gfid) {
            f.pages.remove(&index);
        }
        self.lru.remove(&PageKey { gfid, index });
    }

    /// Evicts until the cache fits its limit.
    fn evict(&mut self) {
        while self.lru.used() > self.limit {
            let Some((key, _)) = self.lru.pop_victim() else {
                break;
            };
            if let Some(f) = self.files.get_mut(&key.gfid) {
                f.pages.remove(&key.index);
            }
            self.counters.evictions += 1;
        }
    }

    /// Changes the size limit (evicting now if it shrank).
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
        self.evict();
    }

    /// Our own modification of `gfid` is about to start or has ended: new generation (fills in
    /// flight will not insert; later reads do not join them), touched pages dropped, and the
    /// next attributes seen are adopted.
    pub fn invalidate(&mut self, gfid: Gfid, change: Change) {
        if !self.files.contains_key(&gfid) {
            return;
        }
        self.counters.invalidations += 1;
        self.drop_pages(gfid, change);
        if let Some(f) = self.files.get_mut(&gfid) {
            f.changed_locally = true;
        }
    }

    /// Another client changed `gfid` (an upcall): every page dropped, and no fill in flight
    /// is kept.
    pub fn changed_elsewhere(&mut self, gfid: Gfid) {
        if !self.files.contains_key(&gfid) {
            return;
        }
        self.counters.invalidations += 1;
        self.drop_pages(gfid, Change::Whole);
    }

    /// New generation for `gfid`, fills forgotten, pages of `change` dropped. A range also
    /// drops a short last page: the write may move end of file past it.
    fn drop_pages(&mut self, gfid: Gfid, change: Change) {
        let generation = self.generation();
        let geo = self.geo;
        let Some(f) = self.files.get_mut(&gfid) else {
            return;
        };
        f.generation = generation;
        f.fills.clear();
        let doomed: Vec<u64> = match change {
            Change::Whole => f.pages.keys().copied().collect(),
            Change::Range { offset, len } => {
                let span = geo.span(offset, len.max(1));
                let mut v: Vec<u64> = f.pages.range(span).map(|(i, _)| *i).collect();
                if let Some((&last, p)) = f.pages.last_key_value()
                    && !geo.is_full(p)
                {
                    v.push(last);
                }
                v
            }
        };
        for i in doomed {
            self.remove_page(gfid, i);
        }
    }

    /// Drops everything about `gfid` (its last name is gone).
    pub fn forget(&mut self, gfid: Gfid) {
        self.drop_pages(gfid, Change::Whole);
        if let Some(f) = self.files.remove(&gfid)
            && let Some(n) = f.name
            && self.names.get(&n) == Some(&gfid)
        {
            self.names.remove(&n);
        }
    }

    /// `name` in `parent` was removed (unlink, rmdir): the file it named is forgotten.
    pub fn unlinked(&mut self, parent: Gfid, name: &str) {
        if let Some(gfid) = self.names.remove(&(parent, name.to_owned())) {
            self.forget(gfid);
        }
    }

    /// `old` was renamed to `new`: a file replaced at `new` is forgotten, the moved file keeps
    /// its pages under its new name.
    pub fn renamed(&mut self, old: (Gfid, &str), new: (Gfid, &str)) {
        let old = (old.0, old.1.to_owned());
        let new = (new.0, new.1.to_owned());
        let moved = self.names.remove(&old);
        if let Some(replaced) = self.names.remove(&new)
            && Some(replaced) != moved
        {
            self.forget(replaced);
        }
        if let Some(gfid) = moved {
            if let Some(f) = self.files.get_mut(&gfid) {
                f.name = Some(new.clone());
            }
            self.names.insert(new, gfid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: u64 = 100;

    fn gfid(n: u8) -> Gfid {
        let mut g = [0u8; 16];
        g[15] = n;
        g[0] = 0xaa;
        Gfid(g)
    }

    fn iatt(n: u8, size: u64, mtime: i64) -> Iatt {
        Iatt {
            gfid: gfid(n),
            kind: FileType::Regular,
            size,
            mtime: Timespec {
                sec: mtime,
                nsec: 0,
            },
            ..Iatt::default()
        }
    }

    fn policy() -> Policy {
        Policy {
            cache_size: 1000,
            cache_timeout: Duration::from_secs(1),
            priorities: Default::default(),
            min_file_size: 0,
            max_file_size: 0,
        }
    }

    const T0: Duration = Duration::from_secs(10);

    /// Fills page `index` with `len` bytes, as a completed child read would.
    fn fill(t: &mut Table<u64>, g: Gfid, index: u64, len: usize) -> bool {
        let mut started = None;
        match t.page_or_fill(g, index, |generation, id| {
            started = Some((generation, id));
            id
        }) {
            Slot::Hit(_) => false,
            Slot::Fill(_) => {
                if let Some((generation, id)) = started {
                    t.fill_done(g, index, generation, id, &Ok(Buf::zeroed(len)));
                }
                true
            }
        }
    }

    fn table(limit: u64) -> Table<u64> {
        let mut t = Table::new(Geometry::new(PS), limit);
        t.observe(&iatt(1, 1000, 1), T0);
        t
    }

    #[test]
    fn second_read_hits_and_accounting_is_exact() {
        let mut t = table(1000);
        assert!(t.cacheable(gfid(1), &policy()));
        assert!(fill(&mut t, gfid(1), 0, 100));
        assert!(!fill(&mut t, gfid(1), 0, 100), "second read is a hit");
        assert_eq!((t.pages(), t.used()), (1, 100));
        assert_eq!((t.counters.misses, t.counters.hits), (1, 1));
    }

    #[test]
    fn a_change_elsewhere_drops_the_pages_and_the_fill_in_flight() {
        let mut t = table(1000);
        assert!(fill(&mut t, gfid(1), 0, 100));
        // A fill that started before the upcall must not be kept.
        let mut started = None;
        let s = t.page_or_fill(gfid(1), 1, |generation, id| {
            started = Some((generation, id));
            id
        });
        assert!(matches!(s, Slot::Fill(_)));
        t.changed_elsewhere(gfid(1));
        let (generation, id) = started.expect("fill");
        t.fill_done(gfid(1), 1, generation, id, &Ok(Buf::zeroed(100)));
        assert_eq!(t.pages(), 0, "nothing cached survives");
        assert!(fill(&mut t, gfid(1), 0, 100), "the next read misses");
        // Unknown files are ignored.
        t.changed_elsewhere(gfid(9));
    }

    #[test]
    fn concurrent_misses_share_one_fill() {
        let mut t = table(1000);
        let a = t.page_or_fill(gfid(1), 3, |_, id| id);
        let b = t.page_or_fill(gfid(1), 3, |_, _| unreachable!("second fill"));
        match (a, b) {
            (Slot::Fill(x), Slot::Fill(y)) => assert_eq!(x, y),
            _ => panic!("expected two waits on one fill"),
        }
        assert_eq!((t.counters.misses, t.counters.joins), (1, 1));
    }

    #[test]
    fn lru_eviction_keeps_within_limit_across_files() {
        let mut t = table(300);
        t.observe(&iatt(2, 1000, 1), T0);
        for i in 0..3 {
            fill(&mut t, gfid(1), i, 100);
        }
        assert!(!fill(&mut t, gfid(1), 0, 100), "touch page 0");
        fill(&mut t, gfid(2), 0, 100);
        assert_eq!(t.used(), 300);
        assert!(!t.has_page(gfid(1), 1), "least recently used page evicted");
        assert!(t.has_page(gfid(1), 0) && t.has_page(gfid(2), 0));
        t.set_limit(100);
        assert_eq!((t.used(), t.pages()), (100, 1));
        t.set_limit(50);
        assert_eq!(t.used(), 0);
        assert!(!t.cacheable(gfid(1), &policy()), "limit below one page");
    }

    #[test]
    fn lower_priority_files_are_evicted_first() {
        let mut t = table(200);
        t.named(Gfid::ROOT, "hot", &iatt(1, 1000, 1), 5, T0);
        t.named(Gfid::ROOT, "cold", &iatt(2, 1000, 1), 1, T0);
        fill(&mut t, gfid(1), 0, 100);
        fill(&mut t, gfid(2), 0, 100);
        fill(&mut t, gfid(1), 1, 100);
        assert!(t.has_page(gfid(1), 0) && t.has_page(gfid(1), 1));
        assert!(!t.has_page(gfid(2), 0));
        t.named(Gfid::ROOT, "never", &iatt(3, 10, 1), 0, T0);
        assert!(!t.cacheable(gfid(3), &policy()));
    }

    #[test]
    fn a_fill_racing_with_a_modification_is_not_inserted() {
        let mut t = table(1000);
        let mut started = (0, 0);
        let _ = t.page_or_fill(gfid(1), 0, |generation, id| {
            started = (generation, id);
            id
        });
        t.invalidate(
            gfid(1),
            Change::Range {
                offset: 500,
                len: 1,
            },
        );
        // A read after the invalidation does not join the old fill.
        assert!(matches!(
            t.page_or_fill(gfid(1), 0, |_, id| id),
            Slot::Fill(_)
        ));
        t.fill_done(gfid(1), 0, started.0, started.1, &Ok(Buf::zeroed(100)));
        assert!(!t.has_page(gfid(1), 0), "stale fill inserted");
        // Forgetting and re-making the state never reuses a generation.
        t.forget(gfid(1));
        t.observe(&iatt(1, 1000, 1), T0);
        t.fill_done(gfid(1), 0, started.0, started.1, &Ok(Buf::zeroed(100)));
        assert!(!t.has_page(gfid(1), 0));
    }

    #[test]
    fn failed_and_empty_fills_are_not_cached() {
        let mut t = table(1000);
        let mut s = (0, 0);
        let _ = t.page_or_fill(gfid(1), 0, |generation, id| {
            s = (generation, id);
            id
        });
        t.fill_done(gfid(1), 0, s.0, s.1, &Err(Errno::EIO));
        assert!(!t.has_page(gfid(1), 0));
        assert!(fill(&mut t, gfid(1), 0, 0), "retried after the failure");
        assert!(fill(&mut t, gfid(1), 0, 0), "empty page not cached");
        assert_eq!(t.pages(), 0);
    }

    #[test]
    fn writes_drop_touched_pages_and_the_short_last_page() {
        let mut t = table(1000);
        for (i, len) in [(0, 100), (1, 100), (2, 100), (3, 40)] {
            fill(&mut t, gfid(1), i, len);
        }
        t.invalidate(
            gfid(1),
            Change::Range {
                offset: 150,
                len: 10,
            },
        );
        assert!(t.has_page(gfid(1), 0) && !t.has_page(gfid(1), 1) && t.has_page(gfid(1), 2));
        assert!(
            !t.has_page(gfid(1), 3),
            "the EOF page must go: the write may extend the file"
        );
        t.invalidate(gfid(1), Change::Whole);
        assert_eq!((t.pages(), t.used()), (0, 0));
    }

    #[test]
    fn only_the_last_page_may_be_short() {
        let mut t = table(1000);
        fill(&mut t, gfid(1), 1, 30);
        fill(&mut t, gfid(1), 3, 100);
        assert!(
            !t.has_page(gfid(1), 1),
            "a page after it proves the short page stale"
        );
        fill(&mut t, gfid(1), 2, 10);
        assert!(t.has_page(gfid(1), 2) && !t.has_page(gfid(1), 3));
    }

    #[test]
    fn attribute_changes_drop_pages_but_our_own_are_adopted() {
        let mut t = table(1000);
        fill(&mut t, gfid(1), 0, 100);
        t.observe(&iatt(1, 1000, 1), T0);
        assert!(t.has_page(gfid(1), 0), "same attributes keep pages");
        t.observe(&iatt(1, 1000, 2), T0);
        assert!(!t.has_page(gfid(1), 0), "new mtime drops pages");
        fill(&mut t, gfid(1), 0, 100);
        t.observe(&iatt(1, 900, 2), T0);
        assert!(!t.has_page(gfid(1), 0), "new size drops pages");
        fill(&mut t, gfid(1), 0, 100);
        fill(&mut t, gfid(1), 5, 100);
        t.invalidate(
            gfid(1),
            Change::Range {
                offset: 500,
                len: 100,
            },
        );
        t.observe(&iatt(1, 1200, 3), T0);
        assert!(
            t.has_page(gfid(1), 0),
            "our own write's new mtime is adopted"
        );
        t.observe(&iatt(1, 1200, 4), T0);
        assert!(!t.has_page(gfid(1), 0));
        assert_eq!(t.counters.stale, 3);
    }

    #[test]
    fn validation_follows_the_timeout() {
        let mut t: Table<u64> = Table::new(Geometry::new(PS), 1000);
        let s = Duration::from_secs(1);
        assert!(t.needs_validation(gfid(1), T0, s));
        t.observe(&iatt(1, 10, 1), T0);
        assert!(!t.needs_validation(gfid(1), T0 + s / 2, s));
        assert!(t.needs_validation(gfid(1), T0 + s, s));
        assert!(t.needs_validation(gfid(1), T0, Duration::ZERO));
    }

    #[test]
    fn unlink_and_rename_over_forget_files() {
        let mut t = table(1000);
        t.named(Gfid::ROOT, "a", &iatt(1, 1000, 1), 1, T0);
        t.named(Gfid::ROOT, "b", &iatt(2, 1000, 1), 1, T0);
        fill(&mut t, gfid(1), 0, 100);
        fill(&mut t, gfid(2), 0, 100);
        t.renamed((Gfid::ROOT, "a"), (Gfid::ROOT, "b"));
        assert!(t.has_page(gfid(1), 0), "the moved file keeps its pages");
        assert!(!t.has_page(gfid(2), 0), "the replaced file is dropped");
        t.unlinked(Gfid::ROOT, "b");
        assert_eq!((t.pages(), t.used(), t.files()), (0, 0, 0));
        t.unlinked(Gfid::ROOT, "unknown");
    }

    #[test]
    fn idle_states_are_swept() {
        let mut t: Table<u64> = Table::new(Geometry::new(PS), 1000);
        t.observe(&iatt(1, 1000, 1), T0);
        fill(&mut t, gfid(1), 0, 100);
        for i in 0..(SWEEP_FLOOR as u32 + 10) {
            let mut a = iatt(0, 1, 1);
            a.gfid.0[4..8].copy_from_slice(&i.to_be_bytes());
            t.named(Gfid::ROOT, &i.to_string(), &a, 1, T0);
        }
        assert!(t.files() < SWEEP_FLOOR, "{} states", t.files());
        assert!(t.has_page(gfid(1), 0), "files with pages survive sweeps");
        assert!(t.names.len() <= t.files.len());
    }
}
