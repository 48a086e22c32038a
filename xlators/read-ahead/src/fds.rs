//! Per-fd read-ahead state: the access stream, the prefetched pages (ready or in flight) and
//! the index of fds by file, so a write through any fd drops every fd's pages of that file.
//! Pure and synchronous; the I/O side holds it under a mutex never held across an await.
//!
//! Invariants:
//! - a fill becomes a ready page only if its fd's generation is the one it started under
//!   (every drop of an fd's pages takes a new generation from one shared counter) and its slot
//!   still holds it;
//! - an fd keeps no page before the one its latest sequential read starts in, so it holds at
//!   most the pages of one read plus `page-count` pages ahead.

use std::collections::{BTreeMap, HashMap, HashSet};

use xlator_api::{Buf, Errno, Fd, FdId, Gfid};

use crate::window::{Geometry, Stream};

/// Counters for statedumps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Pages of sequential reads that were already prefetched (ready or in flight).
    pub hits: u64,
    /// Pages of sequential reads that had to be fetched by the read itself.
    pub misses: u64,
    /// Pages fetched ahead of the reader.
    pub prefetched: u64,
    /// Reads passed straight to the child (random, first, large, anonymous...).
    pub direct: u64,
    /// Sequential reads the pages could not answer (end of file, failed prefetch), sent again
    /// to the child.
    pub fallbacks: u64,
    /// Times an fd's pages were dropped (random read, write, flush, fsync).
    pub drops: u64,
}

enum Page<F> {
    Ready(Buf),
    /// In flight: (fill id, fill).
    Pending(u64, F),
}

/// How one page of a sequential read will be answered.
pub enum Slot<F> {
    Ready(Buf),
    /// A fill to await; `fresh` when this read started it (its data is as recent as a direct
    /// read's).
    Pending {
        fill: F,
        fresh: bool,
    },
}

/// What to do with a read.
pub enum Plan<F> {
    /// Send it to the child as it is.
    Direct,
    /// Answer it from these pages (in order), after starting `prefetch` in the background.
    Pages {
        slots: Vec<Slot<F>>,
        prefetch: Vec<F>,
    },
}

struct FdState<F> {
    gfid: Gfid,
    stream: Stream,
    generation: u64,
    pages: BTreeMap<u64, Page<F>>,
}

/// Every fd's state.
pub struct Fds<F> {
    geo: Geometry,
    fds: HashMap<FdId, FdState<F>>,
    by_gfid: HashMap<Gfid, HashSet<FdId>>,
    next_gen: u64,
    next_fill: u64,
    pub counters: Counters,
}

impl<F: Clone> Fds<F> {
    pub fn new(geo: Geometry) -> Fds<F> {
        Fds {
            geo,
            fds: HashMap::new(),
            by_gfid: HashMap::new(),
            next_gen: 0,
            next_fill: 0,
            counters: Counters::default(),
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Fds with state.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// Pages held (ready or in flight) by `fd`.
    pub fn pages_of(&self, fd: FdId) -> Vec<u64> {
        self.fds
            .get(&fd)
            .map(|s| s.pages.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Ready pages and their bytes, over all fds.
    pub fn memory(&self) -> (usize, u64) {
        let mut n = 0;
        let mut bytes = 0;
        for s in self.fds.values() {
            for p in s.pages.values() {
                if let Page::Ready(b) = p {
                    n += 1;
                    bytes += b.len() as u64;
                }
            }
        }
        (n, bytes)
    }

    fn new_generation(&mut self) -> u64 {
        self.next_gen += 1;
        self.next_gen
    }

    fn state(&mut self, fd: &Fd) -> &mut FdState<F> {
        // An id naming another file than before (its release never reached us): start over
        // rather than serve the other file's pages.
        if self.fds.get(&fd.id).is_some_and(|s| s.gfid != fd.gfid) {
            self.release(fd.id);
        }
        if !self.fds.contains_key(&fd.id) {
            let generation = self.new_generation();
            self.by_gfid.entry(fd.gfid).or_default().insert(fd.id);
            self.fds.insert(
                fd.id,
                FdState {
                    gfid: fd.gfid,
                    stream: Stream::default(),
                    generation,
                    pages: BTreeMap::new(),
                },
            );
        }
        self.fds.entry(fd.id).or_insert_with(|| FdState {
            gfid: fd.gfid,
            stream: Stream::default(),
            generation: 0,
            pages: BTreeMap::new(),
        })
    }

    /// Decides how to answer a read of `size` bytes at `offset` through `fd` with a window of
    /// `count` pages; `make(page, generation, fill id)` builds a fill (pass the last two to
    /// [`Fds::fill_done`]). Only sequential reads no larger than the window use pages; any
    /// other read drops the fd's pages unless it is sequential.
    pub fn plan(
        &mut self,
        fd: &Fd,
        offset: u64,
        size: u64,
        count: u64,
        mut make: impl FnMut(u64, u64, u64) -> F,
    ) -> Plan<F> {
        let geo = self.geo;
        let sequential = self.state(fd).stream.advance(offset, size);
        if !sequential {
            self.drop_pages(fd.id);
            self.counters.direct += 1;
            return Plan::Direct;
        }
        if size > geo.page_size() {
            // Reads bigger than a page come from a reader that already reads ahead (the FUSE
            // kernel sends 256-512 KiB requests for a sequential file): splitting them into
            // page reads only multiplies the requests and copies. Reads up to a page still
            // get the window.
            self.counters.direct += 1;
            return Plan::Direct;
        }
        let first = geo.index(offset);
        let need = geo.span(offset, size);
        let mut next_fill = self.next_fill;
        let mut counters = self.counters;
        let s = self.state(fd);
        let window = s.stream.window(geo, offset.saturating_add(size), count);
        // Pages behind the reader are done with.
        s.pages = s.pages.split_off(&first);
        let mut slots = Vec::new();
        let mut prefetch = Vec::new();
        for index in need.start..need.end.max(window.end) {
            let wanted = need.contains(&index);
            if !wanted && !window.contains(&index) {
                continue;
            }
            let slot = match s.pages.get(&index) {
                Some(Page::Ready(b)) => Slot::Ready(b.clone()),
                Some(Page::Pending(_, f)) => Slot::Pending {
                    fill: f.clone(),
                    fresh: false,
                },
                None => {
                    next_fill += 1;
                    let f = make(index, s.generation, next_fill);
                    s.pages.insert(index, Page::Pending(next_fill, f.clone()));
                    if !wanted {
                        counters.prefetched += 1;
                        prefetch.push(f.clone());
                    }
                    Slot::Pending {
                        fill: f,
                        fresh: true,
                    }
                }
            };
            if wanted {
                match &slot {
                    Slot::Pending { fresh: true, .. } => counters.misses += 1,
                    _ => counters.hits += 1,
                }
                slots.push(slot);
            }
        }
        self.next_fill = next_fill;
        self.counters = counters;
        Plan::Pages { slots, prefetch }
    }

    /// The read planned at `offset` for `size` bytes returned `got` bytes.
    pub fn read_done(&mut self, fd: FdId, offset: u64, size: u64, got: u64) {
        if let Some(s) = self.fds.get_mut(&fd) {
            s.stream.settle(offset, size, got);
        }
    }

    /// A fill of page `index` for `fd`, started under `generation`, ended with `r`.
    pub fn fill_done(
        &mut self,
        fd: FdId,
        index: u64,
        generation: u64,
        id: u64,
        r: &Result<Buf, Errno>,
    ) {
        let geo = self.geo;
        let Some(s) = self.fds.get_mut(&fd) else {
            return;
        };
        let ours = matches!(s.pages.get(&index), Some(Page::Pending(i, _)) if *i == id);
        if !ours {
            return;
        }
        match r {
            Ok(b) if s.generation == generation => {
                if (b.len() as u64) < geo.page_size() {
                    s.stream.note_eof(geo.start(index) + b.len() as u64);
                }
                s.pages.insert(index, Page::Ready(b.clone()));
            }
            _ => {
                s.pages.remove(&index);
            }
        }
    }

    /// A child reply said the file is `size` bytes: no prefetch past it (until a write drops
    /// the hint, or a read finds data beyond it). A reply to a fill started under
    /// `generation` counts only if the fd's pages have not been dropped since.
    pub fn note_size(&mut self, fd: FdId, generation: Option<u64>, size: u64) {
        if let Some(s) = self.fds.get_mut(&fd)
            && generation.is_none_or(|g| g == s.generation)
        {
            s.stream.set_size(size);
        }
    }

    /// A sequential read could not be answered from pages: drop them.
    pub fn fallback(&mut self, fd: FdId) {
        self.counters.fallbacks += 1;
        self.drop_pages(fd);
    }

    /// Drops `fd`'s pages (random read, flush, fsync, fallback). In-flight fills finish
    /// without being kept.
    pub fn drop_pages(&mut self, fd: FdId) {
        let generation = self.new_generation();
        if let Some(s) = self.fds.get_mut(&fd) {
            if !s.pages.is_empty() {
                self.counters.drops += 1;
            }
            s.generation = generation;
            s.pages.clear();
        }
    }

    /// `gfid` is being (or was) modified: every fd of it drops its pages and its end-of-file
    /// hint.
    pub fn invalidate(&mut self, gfid: Gfid) {
        let ids: Vec<FdId> = self
            .by_gfid
            .get(&gfid)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for id in ids {
            self.drop_pages(id);
            if let Some(s) = self.fds.get_mut(&id) {
                s.stream.clear_eof();
            }
        }
    }

    /// `fd` is closed for good.
    pub fn release(&mut self, fd: FdId) {
        if let Some(s) = self.fds.remove(&fd)
            && let Some(set) = self.by_gfid.get_mut(&s.gfid)
        {
            set.remove(&fd);
            if set.is_empty() {
                self.by_gfid.remove(&s.gfid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: u64 = 100;

    fn fd(id: u64, g: u8) -> Fd {
        let mut b = [0u8; 16];
        b[15] = g;
        Fd {
            id: FdId(id),
            gfid: Gfid(b),
            flags: 0,
        }
    }

    /// Plans a read; fills are their page numbers, recorded with generation and id.
    fn plan(
        t: &mut Fds<u64>,
        f: &Fd,
        offset: u64,
        size: u64,
        started: &mut Vec<(u64, u64, u64)>,
    ) -> Option<(Vec<bool>, Vec<u64>)> {
        match t.plan(f, offset, size, 4, |p, g, id| {
            started.push((p, g, id));
            p
        }) {
            Plan::Direct => None,
            Plan::Pages { slots, prefetch } => Some((
                slots
                    .iter()
                    .map(|s| matches!(s, Slot::Pending { fresh: true, .. }))
                    .collect(),
                prefetch,
            )),
        }
    }

    fn complete(t: &mut Fds<u64>, f: &Fd, started: &mut Vec<(u64, u64, u64)>, len: usize) {
        for (p, g, id) in started.drain(..) {
            t.fill_done(f.id, p, g, id, &Ok(Buf::zeroed(len)));
        }
    }

    #[test]
    fn second_sequential_read_prefetches_the_window() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        assert!(
            plan(&mut t, &f, 0, 10, &mut st).is_none(),
            "first read goes direct"
        );
        let (fresh, pre) = plan(&mut t, &f, 10, 10, &mut st).expect("sequential");
        assert_eq!(fresh, vec![true], "the read's own page is fetched");
        assert_eq!(pre, vec![1, 2, 3], "and the rest of the 4-page window");
        complete(&mut t, &f, &mut st, 100);
        let (fresh, pre) = plan(&mut t, &f, 20, 10, &mut st).expect("sequential");
        assert_eq!((fresh, pre), (vec![false], vec![]), "served from pages");
        // Crossing into page 1 slides the window by one page and drops page 0.
        let (_, pre) = plan(&mut t, &f, 30, 80, &mut st).expect("sequential");
        assert_eq!(pre, vec![4]);
        assert_eq!(t.pages_of(f.id), vec![0, 1, 2, 3, 4]);
        let (_, pre) = plan(&mut t, &f, 110, 10, &mut st).expect("sequential");
        assert!(pre.is_empty(), "the window still starts in page 1");
        assert_eq!(
            t.pages_of(f.id),
            vec![1, 2, 3, 4],
            "page 0 is behind the reader"
        );
        let (_, pre) = plan(&mut t, &f, 120, 100, &mut st).expect("sequential");
        assert_eq!(pre, vec![5]);
    }

    #[test]
    fn reads_bigger_than_a_page_go_direct() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        for (off, size) in [(0, 101), (101, 101), (202, 101), (303, 101)] {
            assert!(
                plan(&mut t, &f, off, size, &mut st).is_none(),
                "a reader this big already reads ahead"
            );
        }
        assert!(st.is_empty() && t.pages_of(f.id).is_empty());
        // The stream is still followed: page-sized reads after them are sequential.
        let (_, pre) = plan(&mut t, &f, 404, 100, &mut st).expect("sequential");
        assert_eq!(
            pre,
            vec![6, 7, 8],
            "the window from page 5, where the read ends"
        );
    }

    #[test]
    fn random_reads_drop_pages_and_prefetch_nothing() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        plan(&mut t, &f, 0, 10, &mut st);
        plan(&mut t, &f, 10, 10, &mut st);
        assert!(!t.pages_of(f.id).is_empty());
        assert!(plan(&mut t, &f, 5000, 10, &mut st).is_none());
        assert!(t.pages_of(f.id).is_empty());
        assert!(plan(&mut t, &f, 77, 10, &mut st).is_none());
        // The fills started before the drop are not kept.
        complete(&mut t, &f, &mut st, 100);
        assert!(t.pages_of(f.id).is_empty());
    }

    #[test]
    fn reads_larger_than_the_window_go_direct() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        plan(&mut t, &f, 0, 1000, &mut st);
        assert!(plan(&mut t, &f, 1000, 1000, &mut st).is_none());
        assert!(st.is_empty());
    }

    #[test]
    fn a_write_drops_every_fd_of_the_file_and_racing_fills_are_discarded() {
        let mut t = Fds::new(Geometry::new(PS));
        let (a, b, other) = (fd(1, 1), fd(2, 1), fd(3, 2));
        let mut st = Vec::new();
        for f in [&a, &b, &other] {
            plan(&mut t, f, 0, 10, &mut st);
            plan(&mut t, f, 10, 10, &mut st);
        }
        let in_flight = std::mem::take(&mut st);
        t.invalidate(a.gfid);
        for (f, (p, g, id)) in [&a, &a, &a, &a, &b, &b, &b, &b].iter().zip(&in_flight) {
            t.fill_done(f.id, *p, *g, *id, &Ok(Buf::zeroed(100)));
        }
        assert!(t.pages_of(a.id).is_empty() && t.pages_of(b.id).is_empty());
        assert_eq!(t.pages_of(other.id).len(), 4, "another file is untouched");
    }

    #[test]
    fn eof_stops_prefetch_and_failed_fills_are_forgotten() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        plan(&mut t, &f, 0, 10, &mut st);
        plan(&mut t, &f, 10, 10, &mut st);
        let (p, g, id) = st.remove(0);
        t.fill_done(f.id, p, g, id, &Ok(Buf::zeroed(100)));
        let (p, g, id) = st.remove(0);
        t.fill_done(f.id, p, g, id, &Ok(Buf::zeroed(30)));
        let (p, g, id) = st.remove(0);
        t.fill_done(f.id, p, g, id, &Err(Errno::EIO));
        assert_eq!(t.pages_of(f.id), vec![0, 1, 3]);
        st.clear();
        // Reading on: no prefetch beyond the end of file at 130.
        let (_, pre) = plan(&mut t, &f, 20, 100, &mut st).expect("sequential");
        assert!(pre.is_empty(), "{pre:?}");
    }

    #[test]
    fn a_size_from_a_reply_stops_prefetch_at_the_end_of_the_file() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        plan(&mut t, &f, 0, 10, &mut st);
        // The first (direct) reply says the file is 150 bytes: pages 0 and 1 only.
        let g = t.fds[&f.id].generation;
        t.note_size(f.id, None, 150);
        let (_, pre) = plan(&mut t, &f, 10, 10, &mut st).expect("sequential");
        assert_eq!(pre, vec![1], "no prefetch past byte 150");
        // A size seen under an older generation (pages dropped since) is ignored, and a
        // later, larger size replaces the hint.
        t.drop_pages(f.id);
        t.note_size(f.id, Some(g), 50);
        let g = t.fds[&f.id].generation;
        t.note_size(f.id, Some(g), 1000);
        st.clear();
        let (_, pre) = plan(&mut t, &f, 20, 10, &mut st).expect("sequential");
        assert_eq!(
            pre,
            vec![1, 2, 3],
            "window of 4 pages from page 0, up to byte 1000"
        );
    }

    #[test]
    fn a_reused_fd_id_never_sees_another_files_pages() {
        let mut t = Fds::new(Geometry::new(PS));
        let mut st = Vec::new();
        plan(&mut t, &fd(1, 1), 0, 10, &mut st);
        plan(&mut t, &fd(1, 1), 10, 10, &mut st);
        complete(&mut t, &fd(1, 1), &mut st, 100);
        assert!(
            plan(&mut t, &fd(1, 2), 20, 10, &mut st).is_none(),
            "not sequential"
        );
        assert!(t.pages_of(FdId(1)).is_empty());
        assert!(!t.by_gfid.contains_key(&fd(1, 1).gfid));
    }

    #[test]
    fn release_forgets_the_fd() {
        let mut t = Fds::new(Geometry::new(PS));
        let f = fd(1, 1);
        let mut st = Vec::new();
        plan(&mut t, &f, 0, 10, &mut st);
        t.release(f.id);
        assert!(t.is_empty() && t.by_gfid.is_empty());
        t.invalidate(f.gfid);
        t.release(f.id);
    }
}
