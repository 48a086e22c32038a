//! Page geometry and the assembly of a read reply from cached pages, for translators that
//! cache file data in pages (io-cache, read-ahead). Pure: no I/O.
//!
//! A page holds what the child returned for a page-aligned read of `page_size` bytes. A page
//! shorter than `page_size` ends at end of file: nothing after it is data, so assembly stops
//! there and the reply is short, as the child's would be. Empty pages are never cached.

use std::ops::Range;

use crate::buf::Buf;

/// The page size, and the arithmetic on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    page_size: u64,
}

impl Geometry {
    /// `page_size` must be at least 1 (the option's range guarantees it).
    pub fn new(page_size: u64) -> Geometry {
        Geometry {
            page_size: page_size.max(1),
        }
    }

    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The page holding byte `offset`.
    pub fn index(&self, offset: u64) -> u64 {
        offset / self.page_size
    }

    /// First byte of page `index`.
    pub fn start(&self, index: u64) -> u64 {
        index.saturating_mul(self.page_size)
    }

    /// The pages holding bytes `[offset, offset + len)`; empty when `len` is 0.
    pub fn span(&self, offset: u64, len: u64) -> Range<u64> {
        if len == 0 {
            return self.index(offset)..self.index(offset);
        }
        let last = offset.saturating_add(len - 1);
        self.index(offset)..self.index(last) + 1
    }

    /// Whether `page` is a full page (a shorter one ends at end of file).
    pub fn is_full(&self, page: &Buf) -> bool {
        page.len() as u64 >= self.page_size
    }
}

/// The reply to a read of `len` bytes at `offset`, from `pages`: the consecutive pages of
/// [`Geometry::span`]`(offset, len)`, in order. Stops at the first short page (end of file).
/// A reply within one page shares that page's storage; a longer one is copied once.
pub fn assemble(geo: Geometry, offset: u64, len: u64, pages: &[Buf]) -> Buf {
    let span = geo.span(offset, len);
    let end = offset.saturating_add(len);
    let mut parts = Vec::new();
    for (index, page) in span.zip(pages) {
        let start = geo.start(index);
        let from = offset.saturating_sub(start).min(page.len() as u64) as usize;
        let to = (end - start).min(page.len() as u64) as usize;
        if from < to {
            parts.push(page.slice(from..to));
        }
        if !geo.is_full(page) {
            break;
        }
    }
    match parts.len() {
        0 => Buf::new(),
        1 => parts.swap_remove(0),
        _ => Buf::concat(&parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(index: u64, len: usize, geo: Geometry) -> Buf {
        let start = geo.start(index);
        Buf::from_vec((0..len as u64).map(|i| ((start + i) % 251) as u8).collect())
    }

    fn expect(offset: u64, len: u64) -> Vec<u8> {
        (offset..offset + len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn span_covers_exactly_the_touched_pages() {
        let g = Geometry::new(100);
        assert_eq!(g.span(0, 100), 0..1);
        assert_eq!(g.span(0, 101), 0..2);
        assert_eq!(g.span(99, 2), 0..2);
        assert_eq!(g.span(250, 0), 2..2);
        assert_eq!(
            g.span(u64::MAX - 1, 1),
            g.index(u64::MAX - 1)..g.index(u64::MAX - 1) + 1
        );
    }

    #[test]
    fn one_page_read_shares_storage() {
        let g = Geometry::new(100);
        let p = page(1, 100, g);
        let r = assemble(g, 120, 30, std::slice::from_ref(&p));
        assert_eq!(&*r, &expect(120, 30)[..]);
        assert!(r.shares_storage_with(&p));
    }

    #[test]
    fn multi_page_read_is_contiguous() {
        let g = Geometry::new(100);
        let pages: Vec<Buf> = (0..3).map(|i| page(i, 100, g)).collect();
        assert_eq!(&*assemble(g, 50, 200, &pages), &expect(50, 200)[..]);
        assert_eq!(&*assemble(g, 0, 300, &pages), &expect(0, 300)[..]);
    }

    #[test]
    fn short_page_ends_the_reply() {
        let g = Geometry::new(100);
        // File of 150 bytes: page 1 holds 50. A third page (stale) must not be used.
        let pages = vec![page(0, 100, g), page(1, 50, g), page(2, 100, g)];
        assert_eq!(&*assemble(g, 20, 280, &pages), &expect(20, 130)[..]);
        // Reading at or past EOF inside the short page yields nothing.
        assert!(assemble(g, 160, 10, &pages[1..2]).is_empty());
        assert!(assemble(g, 150, 10, &pages[1..2]).is_empty());
    }
}
