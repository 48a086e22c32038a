//! The unit mapping: pure arithmetic, no I/O.
//!
//! A file is cut into units of `block` bytes; unit `k` lives on child `k % count` at child
//! offset `(k / count) * block` (the coalesced layout: each child stores its units one after
//! the other, with no holes for the other children's units). A logical byte `p` is therefore
//! on child `(p / block) % count` at `(p / block / count) * block + p % block`.
//!
//! Two facts the rest of the translator stands on:
//! - A contiguous logical range touches each child in one contiguous child range
//!   ([`child_range`]): the child's units between its ends are consecutive on the child. So
//!   every data fop becomes at most one call per child.
//! - The number of child-`i` bytes below a logical offset `L` is [`child_start`]`(i, L)`;
//!   truncating to `L` truncates child `i` to that ("its share"), and the logical size is
//!   the largest logical end of any child's last byte ([`logical_size`]), which gives back
//!   `L` from the shares.
//!
//! Arithmetic goes through `u128` and is clamped to `u64::MAX`, so no offset overflows.

/// The geometry of one striped file: how many children, and the unit size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    pub count: u32,
    pub block: u64,
}

/// One piece of a caller's buffer on a child: `len` bytes at `buf_off` in the caller's
/// buffer, at `at` bytes into the child extent they belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    pub buf_off: u64,
    pub at: u64,
    pub len: u64,
}

/// What one child does for a read or write: `len` contiguous bytes at `child_off` on
/// `child`, made of `segs` (in child order) scattered in the caller's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extent {
    pub child: usize,
    pub child_off: u64,
    pub len: u64,
    pub segs: Vec<Seg>,
}

fn clamp(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl Geometry {
    /// A geometry, if both numbers are usable (at least one child, a non-empty unit).
    pub fn new(count: u32, block: u64) -> Option<Geometry> {
        (count > 0 && block > 0).then_some(Geometry { count, block })
    }

    fn n(&self) -> u128 {
        u128::from(self.count)
    }

    fn b(&self) -> u128 {
        u128::from(self.block)
    }

    /// The child holding logical byte `pos`.
    pub fn child_of(&self, pos: u64) -> usize {
        ((u128::from(pos) / self.b()) % self.n()) as usize
    }

    /// The child offset of the first byte of child `i` at logical offset `pos` or later;
    /// equally, the number of child-`i` bytes below `pos` (its share of a file of size
    /// `pos`).
    pub fn child_start(&self, i: usize, pos: u64) -> u64 {
        let (b, n, i) = (self.b(), self.n(), i as u128);
        let k = u128::from(pos) / b;
        let (row, j, within) = (k / n, k % n, u128::from(pos) % b);
        clamp(if i == j {
            row * b + within
        } else if i > j {
            row * b
        } else {
            (row + 1) * b
        })
    }

    /// The logical offset of child `i`'s byte at child offset `c`.
    pub fn logical_of(&self, i: usize, c: u64) -> u64 {
        let (b, n, c) = (self.b(), self.n(), u128::from(c));
        clamp(((c / b) * n + i as u128) * b + c % b)
    }

    /// The logical end (one past) of the last byte of a child of `child_size` bytes.
    pub fn logical_end(&self, i: usize, child_size: u64) -> u64 {
        match child_size {
            0 => 0,
            s => self.logical_of(i, s - 1).saturating_add(1),
        }
    }

    /// The child range (`child_off`, `len`) of child `i` inside logical `[off, off + len)`.
    pub fn child_range(&self, i: usize, off: u64, len: u64) -> (u64, u64) {
        let start = self.child_start(i, off);
        let end = self.child_start(i, off.saturating_add(len));
        (start, end - start)
    }

    /// The non-empty child ranges of logical `[off, off + len)`, by child: `(child,
    /// child_off, len)`.
    pub fn child_ranges(&self, off: u64, len: u64) -> Vec<(usize, u64, u64)> {
        (0..self.count as usize)
            .map(|i| {
                let (c, l) = self.child_range(i, off, len);
                (i, c, l)
            })
            .filter(|r| r.2 > 0)
            .collect()
    }

    /// Splits logical `[off, off + len)` into one extent per child touched (in child
    /// order), each with the pieces of the caller's buffer it carries. `len` is a request
    /// size (a `u32`): the loop runs once per unit touched.
    pub fn split(&self, off: u64, len: u32) -> Vec<Extent> {
        let mut out: Vec<Extent> = Vec::new();
        let end = off.saturating_add(u64::from(len));
        let mut pos = off;
        while pos < end {
            let within = pos % self.block;
            let take = (self.block - within).min(end - pos);
            let child = self.child_of(pos);
            let child_off = self.child_start(child, pos);
            let seg = |at| Seg {
                buf_off: pos - off,
                at,
                len: take,
            };
            match out.iter_mut().find(|e| e.child == child) {
                Some(e) => {
                    // Contiguous on the child: a child's units in a range are consecutive.
                    debug_assert_eq!(e.child_off + e.len, child_off);
                    e.segs.push(seg(e.len));
                    e.len += take;
                }
                None => out.push(Extent {
                    child,
                    child_off,
                    len: take,
                    segs: vec![seg(0)],
                }),
            }
            pos += take;
        }
        out.sort_by_key(|e| e.child);
        out
    }

    /// The logical size of a file whose children hold `sizes` bytes (in child order): the
    /// largest logical end of any child's last byte.
    pub fn logical_size(&self, sizes: &[u64]) -> u64 {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| self.logical_end(i, s))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn g(count: u32, block: u64) -> Geometry {
        Geometry::new(count, block).expect("valid geometry")
    }

    #[test]
    fn units_go_round_robin_and_each_child_keeps_its_units_contiguous() {
        let geo = g(3, 10);
        // Unit 4 (bytes 40..50) is child 1's second unit: child offset 10.
        assert_eq!(geo.child_of(42), 1);
        assert_eq!(geo.child_start(1, 42), 12);
        assert_eq!(geo.logical_of(1, 12), 42);
        // A range over two rows is one extent per child, the child's parts back to back.
        let e = geo.split(5, 60);
        assert_eq!(e.len(), 3);
        // Child 0: 5..10 of unit 0, all of unit 3, 60..65 of unit 6.
        assert_eq!((e[0].child_off, e[0].len), (5, 20));
        assert_eq!(
            e[0].segs.iter().map(|s| s.buf_off).collect::<Vec<_>>(),
            [0, 25, 55]
        );
        assert_eq!(
            geo.child_ranges(5, 60),
            [(0, 5, 20), (1, 0, 20), (2, 0, 20)]
        );
    }

    #[test]
    fn the_size_is_the_furthest_logical_end_of_any_child() {
        let geo = g(4, 8);
        // Only child 2 holds data: 3 bytes of unit 2 (logical 16..19).
        assert_eq!(geo.logical_size(&[0, 0, 3, 0]), 19);
        // A full first row and one byte of the second row on child 0.
        assert_eq!(geo.logical_size(&[9, 8, 8, 8]), 33);
        assert_eq!(geo.logical_size(&[0, 0, 0, 0]), 0);
    }

    #[test]
    fn shares_of_a_size_give_the_size_back() {
        let geo = g(4, 8);
        let shares: Vec<u64> = (0..4).map(|i| geo.child_start(i, 37)).collect();
        assert_eq!(shares, [13, 8, 8, 8]);
        assert_eq!(geo.logical_size(&shares), 37);
    }

    #[test]
    fn huge_offsets_do_not_overflow() {
        let geo = g(7, 1 << 20);
        assert!(geo.child_start(6, u64::MAX) <= u64::MAX / 7 + (1 << 20));
        assert_eq!(geo.logical_of(6, u64::MAX), u64::MAX);
        assert_eq!(
            geo.split(u64::MAX - 3, 100)
                .iter()
                .map(|e| e.len)
                .sum::<u64>(),
            3
        );
    }

    /// The model: where each logical byte lives, byte by byte.
    fn model(count: u64, block: u64, p: u64) -> (usize, u64) {
        let k = p / block;
        ((k % count) as usize, (k / count) * block + p % block)
    }

    proptest! {
        #[test]
        fn split_matches_the_byte_model(
            count in 1u32..9,
            block in 1u64..300,
            off in 0u64..5000,
            len in 0u32..3000,
        ) {
            let geo = g(count, block);
            let mut seen = vec![false; len as usize];
            for e in geo.split(off, len) {
                let mut at = 0;
                for s in &e.segs {
                    prop_assert_eq!(s.at, at);
                    at += s.len;
                    for j in 0..s.len {
                        let b = s.buf_off + j;
                        prop_assert!(!seen[b as usize]);
                        seen[b as usize] = true;
                        prop_assert_eq!(
                            model(count.into(), block, off + b),
                            (e.child, e.child_off + s.at + j)
                        );
                    }
                }
                prop_assert_eq!(at, e.len);
                prop_assert_eq!(geo.child_range(e.child, off, len.into()), (e.child_off, e.len));
            }
            prop_assert!(seen.iter().all(|s| *s));
        }

        #[test]
        fn shares_sizes_and_inverse_match_the_model(
            count in 1u32..9,
            block in 1u64..300,
            size in 0u64..6000,
            sizes in proptest::collection::vec(0u64..2000, 8),
        ) {
            let geo = g(count, block);
            let n = count as usize;
            // Child i's share of a file of `size` bytes is its count of bytes below `size`.
            let mut counts = vec![0u64; n];
            for p in 0..size {
                let (c, co) = model(count.into(), block, p);
                prop_assert_eq!(geo.logical_of(c, co), p);
                counts[c] += 1;
            }
            let shares: Vec<u64> = (0..n).map(|i| geo.child_start(i, size)).collect();
            prop_assert_eq!(&shares, &counts);
            prop_assert_eq!(geo.logical_size(&shares), size);
            // Any child sizes: the size is one past the furthest byte any child holds.
            let sizes = &sizes[..n];
            let furthest = (0..n)
                .filter(|&i| sizes[i] > 0)
                .map(|i| geo.logical_of(i, sizes[i] - 1) + 1)
                .max()
                .unwrap_or(0);
            prop_assert_eq!(geo.logical_size(sizes), furthest);
        }
    }
}
