//! Sequential detection and the read-ahead window of one fd. Pure: no I/O.
//!
//! A read is sequential when it starts exactly where the previous read of the same fd ended
//! (GlusterFS's rule). The window is `page-count` pages starting at the page holding the end
//! of the current read, cut at a known end of file.

use std::ops::Range;

pub use xlator_api::pages::{Geometry, assemble};

/// The access pattern of one fd.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    /// Where the next sequential read starts (end of the previous read).
    expected: Option<u64>,
    /// Consecutive sequential reads so far.
    run: u32,
    /// End of file as last seen by a prefetch (a short page); prefetch stops there.
    eof_hint: Option<u64>,
}

impl Stream {
    /// Records a read of `size` bytes at `offset`; whether it continues the previous one.
    pub fn advance(&mut self, offset: u64, size: u64) -> bool {
        let sequential = self.expected == Some(offset);
        self.run = if sequential {
            self.run.saturating_add(1)
        } else {
            0
        };
        self.expected = Some(offset.saturating_add(size));
        sequential
    }

    /// The read recorded by [`Stream::advance`] returned `got` bytes: a short read moves the
    /// expected next offset back to where data ended (unless a later read already moved it),
    /// and data past the end-of-file hint proves the hint stale.
    pub fn settle(&mut self, offset: u64, size: u64, got: u64) {
        let end = offset.saturating_add(got);
        if got < size && self.expected == Some(offset.saturating_add(size)) {
            self.expected = Some(end);
        }
        if self.eof_hint.is_some_and(|h| end > h) {
            self.eof_hint = None;
        }
    }

    /// Consecutive sequential reads so far.
    pub fn run(&self) -> u32 {
        self.run
    }

    /// A reply gave the file's size: the end-of-file hint is that, whatever it was.
    pub fn set_size(&mut self, size: u64) {
        self.eof_hint = Some(size);
    }

    /// A prefetch found end of file at `at`.
    pub fn note_eof(&mut self, at: u64) {
        self.eof_hint = Some(self.eof_hint.map_or(at, |h| h.min(at)));
    }

    /// Forgets the end-of-file hint (the file was modified).
    pub fn clear_eof(&mut self) {
        self.eof_hint = None;
    }

    /// The pages to have in memory after a read ending at `end`: `count` pages from the one
    /// holding `end`, none at or past the end-of-file hint.
    pub fn window(&self, geo: Geometry, end: u64, count: u64) -> Range<u64> {
        let start = geo.index(end);
        let mut stop = start.saturating_add(count);
        if let Some(h) = self.eof_hint {
            stop = stop.min(h.div_ceil(geo.page_size()));
        }
        start..stop.max(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::Buf;

    #[test]
    fn sequential_means_starting_at_the_previous_end() {
        let mut s = Stream::default();
        assert!(!s.advance(0, 4096), "the first read has no predecessor");
        assert!(s.advance(4096, 4096));
        assert!(s.advance(8192, 100));
        assert_eq!(s.run(), 2);
        assert!(!s.advance(0, 4096), "a jump back");
        assert_eq!(s.run(), 0);
        assert!(!s.advance(1 << 20, 4096), "a jump forward");
    }

    #[test]
    fn short_reads_move_the_expected_offset_back() {
        let mut s = Stream::default();
        s.advance(0, 4096);
        s.settle(0, 4096, 100);
        assert!(s.advance(100, 4096), "continues where data ended");
        // A later read already moved on: an older short read does not pull it back.
        s.advance(4196, 10);
        s.settle(100, 4096, 0);
        assert!(s.advance(4206, 1));
    }

    #[test]
    fn window_is_count_pages_from_the_end_and_stops_at_eof() {
        let g = Geometry::new(100);
        let mut s = Stream::default();
        assert_eq!(s.window(g, 250, 4), 2..6);
        s.note_eof(420);
        assert_eq!(s.window(g, 250, 4), 2..5);
        s.note_eof(400);
        assert_eq!(s.window(g, 250, 4), 2..4);
        assert_eq!(s.window(g, 450, 4), 4..4, "nothing past end of file");
        s.settle(350, 100, 100);
        assert_eq!(s.window(g, 450, 4), 4..8, "data past the hint clears it");
        s.note_eof(10);
        s.clear_eof();
        assert_eq!(s.window(g, 0, 1), 0..1);
    }

    #[test]
    fn assembly_spans_pages_and_stops_at_a_short_one() {
        let g = Geometry::new(4);
        let pages = [
            Buf::from("abcd"),
            Buf::from("efgh"),
            Buf::from("ij"),
            Buf::from("zzzz"),
        ];
        assert_eq!(&*assemble(g, 1, 6, &pages), b"bcdefg");
        assert_eq!(&*assemble(g, 2, 100, &pages), b"cdefghij");
        let one = assemble(g, 5, 2, &pages[1..2]);
        assert!(one.shares_storage_with(&pages[1]) && &*one == b"fg");
        assert!(assemble(g, 10, 4, &pages[2..3]).is_empty());
    }

    #[test]
    fn span_covers_the_touched_pages() {
        let g = Geometry::new(100);
        assert_eq!(g.span(0, 100), 0..1);
        assert_eq!(g.span(99, 2), 0..2);
        assert_eq!(g.span(5, 0), 0..0);
        assert_eq!(g.start(3), 300);
    }
}
