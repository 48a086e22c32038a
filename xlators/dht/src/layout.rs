//! Directory layouts: which child owns which range of the 32-bit hash space.
//!
//! Each child's copy of a directory carries [`LAYOUT_XATTR`], holding only that child's slice
//! (as GlusterFS's `trusted.glusterfs.dht`): 20 bytes, five big-endian u32: format (`1`),
//! flags, the number of children the layout was made for, first hash, last hash (inclusive).
//! Flag [`TRUSTED`] says the layout has placed every file of the directory: each name lives on
//! the child its hash names, or a link file there points to it. A lookup that misses on the
//! hashed child of a trusted, complete layout is a negative answer in one call; otherwise the
//! name is looked up everywhere once.
//!
//! The full layout exists only in client memory, merged from every child's slice. A merged
//! layout is *complete* when every child has a well-formed slice made for this many children
//! and the slices cover the space exactly once (no hole, no overlap). Anything else is
//! repaired by writing a new layout ([`Layout::generate`]) to every child.
//!
//! New layouts split the space in equal ranges; which child gets the first range is rotated by
//! the directory's GFID, so that the first range (and with few files, the busiest child) is not
//! always child 0's. Generation is deterministic: two clients repairing the same directory at
//! once write the same ranges.

use xlator_api::{Buf, Gfid};

/// The per-child layout slice xattr of a directory. Not `trusted.xlfs.*`: storage/posix keeps
/// those names for itself.
pub const LAYOUT_XATTR: &str = "trusted.dht.layout";

/// Format number of [`LAYOUT_XATTR`] values.
pub const FORMAT: u32 = 1;

/// Flag: every file of the directory was placed by this layout (see the module doc).
pub const TRUSTED: u32 = 1;

/// Flag: this child has no range (it is being removed: `decommissioned`); the slice's start
/// and stop are 0 and mean nothing. Such a child gets no new files, and files whose names
/// hashed to it before live elsewhere once rebalance moved them.
pub const EMPTY: u32 = 2;

/// One child's range of the hash space, inclusive at both ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub flags: u32,
    pub count: u32,
    pub start: u32,
    pub stop: u32,
}

impl Slice {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(20);
        for x in [FORMAT, self.flags, self.count, self.start, self.stop] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    /// `None` for a value that is not a format-1 slice.
    pub fn decode(b: &[u8]) -> Option<Slice> {
        if b.len() != 20 {
            return None;
        }
        let w = |i: usize| u32::from_be_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        if w(0) != FORMAT || w(3) > w(4) {
            return None;
        }
        Some(Slice {
            flags: w(1),
            count: w(2),
            start: w(3),
            stop: w(4),
        })
    }
}

/// A directory's full layout: one range per child that has one, in hash order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// (start, stop, child), sorted by start, covering 0..=u32::MAX exactly once.
    ranges: Vec<(u32, u32, usize)>,
    /// Children with no range ([`EMPTY`] slices), sorted.
    empty: Vec<usize>,
    /// The number of children the layout was made for (ranged and empty).
    count: usize,
    /// Negative lookups may trust the hashed child (see the module doc).
    pub trusted: bool,
}

/// What is wrong with the slices a directory's copies hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// Child `0` has no slice (or one that does not parse).
    Missing(usize),
    /// Child's slice was made for another number of children.
    Count(usize, u32),
    /// The slices leave a hole or overlap starting at this hash.
    Coverage(u32),
    /// The children without a range are not the decommissioned ones (a child is being
    /// removed, or its removal was stopped).
    Decommission,
}

impl std::fmt::Display for Anomaly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Anomaly::Missing(i) => write!(f, "child {i} has no layout slice"),
            Anomaly::Count(i, c) => write!(f, "child {i}'s slice was made for {c} children"),
            Anomaly::Coverage(h) => {
                write!(f, "the slices leave a hole or overlap at hash {h:#010x}")
            }
            Anomaly::Decommission => {
                write!(
                    f,
                    "the children without a range are not the decommissioned ones"
                )
            }
        }
    }
}

impl Layout {
    /// The deterministic new layout of directory `gfid` over `n` children: equal ranges, the
    /// first one given to child `rotation(gfid, n)`.
    pub fn generate(gfid: Gfid, n: usize, trusted: bool) -> Layout {
        Layout::generate_over(gfid, n, &[], trusted)
    }

    /// The deterministic new layout of directory `gfid` over `n` children of which those in
    /// `without` get no range: equal ranges over the others in child order, the first one
    /// given to the `rotation(gfid, k)`th of the `k` others. With nothing left out it is
    /// [`Layout::generate`]; once the left-out children are gone from the volume the others
    /// get the same ranges from `generate` over the rest (so removing a brick after its files
    /// moved keeps every file on its hashed child).
    pub fn generate_over(gfid: Gfid, n: usize, without: &[usize], trusted: bool) -> Layout {
        let n = n.max(1);
        let mut active: Vec<usize> = (0..n).filter(|i| !without.contains(i)).collect();
        if active.is_empty() {
            active = (0..n).collect();
        }
        let mut empty: Vec<usize> = (0..n).filter(|i| !active.contains(i)).collect();
        empty.sort_unstable();
        let k = active.len();
        let rot = rotation(gfid, k);
        let chunk = (1u64 << 32) / k as u64;
        let ranges = (0..k)
            .map(|p| {
                let start = p as u64 * chunk;
                let stop = if p + 1 == k {
                    u64::from(u32::MAX)
                } else {
                    start + chunk - 1
                };
                (start as u32, stop as u32, active[(p + rot) % k])
            })
            .collect();
        Layout {
            ranges,
            empty,
            count: n,
            trusted,
        }
    }

    /// A new layout of directory `gfid` over `n` children (those in `without` get no range)
    /// that moves as few names as it can from the layout the children hold now (`old`, per
    /// child; anomalous or partial is fine): the same equal ranges as
    /// [`Layout::generate_over`], but each range given to the child whose current range
    /// overlaps it most (greedy, largest overlap first, ties by position then child), the
    /// rest in order. Going from 2 to 3 children then moves a third of the names, not most of
    /// them (GlusterFS: `dht_selfheal_layout_maximize_overlap`). Deterministic in `old`: two
    /// clients repairing at once write the same ranges. With no usable old range it is
    /// `generate_over`.
    pub fn generate_keeping(
        gfid: Gfid,
        n: usize,
        without: &[usize],
        old: &[Option<Slice>],
        trusted: bool,
    ) -> Layout {
        let base = Layout::generate_over(gfid, n, without, trusted);
        let held: Vec<Option<(u64, u64)>> = (0..base.count)
            .map(|i| {
                old.get(i)
                    .copied()
                    .flatten()
                    .filter(|s| s.flags & EMPTY == 0)
                    .map(|s| (u64::from(s.start), u64::from(s.stop) + 1))
            })
            .collect();
        if held.iter().all(Option::is_none) {
            return base;
        }
        let active: Vec<usize> = base.ranges.iter().map(|r| r.2).collect();
        let overlap = |p: usize, c: usize| -> u64 {
            let (start, stop, _) = base.ranges[p];
            let (a, b) = (u64::from(start), u64::from(stop) + 1);
            held[c].map_or(0, |(x, y)| b.min(y).saturating_sub(a.max(x)))
        };
        let mut pairs: Vec<(u64, usize, usize)> = Vec::new();
        for p in 0..base.ranges.len() {
            for &c in &active {
                let o = overlap(p, c);
                if o > 0 {
                    pairs.push((o, p, c));
                }
            }
        }
        pairs.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
        let mut owner: Vec<Option<usize>> = vec![None; base.ranges.len()];
        let mut placed = vec![false; base.count];
        for (_, p, c) in pairs {
            if owner[p].is_none() && !placed[c] {
                owner[p] = Some(c);
                placed[c] = true;
            }
        }
        // The rest: the unplaced children, in the order generate_over would give them.
        let mut rest = base.ranges.iter().map(|r| r.2).filter(|c| !placed[*c]);
        let greedy: Vec<usize> = (0..base.ranges.len())
            .map(|p| owner[p].or_else(|| rest.next()).unwrap_or(base.ranges[p].2))
            .collect();
        // Greedy is not always best: the rotations of the children over the ranges (one of
        // them is generate_over's own) compete with it; the most overlap wins, ties to the
        // earlier candidate.
        let k = active.len();
        let total =
            |a: &[usize]| -> u64 { a.iter().enumerate().map(|(p, &c)| overlap(p, c)).sum() };
        let mut best = (total(&greedy), greedy);
        for r in 0..k {
            let cand: Vec<usize> = (0..k).map(|p| active[(p + r) % k]).collect();
            let t = total(&cand);
            if t > best.0 {
                best = (t, cand);
            }
        }
        let ranges = base
            .ranges
            .iter()
            .zip(best.1)
            .map(|(&(start, stop, _), c)| (start, stop, c))
            .collect();
        Layout { ranges, ..base }
    }

    /// Whether every child that has a range here held exactly that range in `old` (counts
    /// aside): no name changes child from `old` to this layout.
    pub fn keeps_ranges_of(&self, old: &[Option<Slice>]) -> bool {
        self.ranges.iter().all(|&(start, stop, c)| {
            old.get(c)
                .copied()
                .flatten()
                .is_some_and(|s| s.flags & EMPTY == 0 && (s.start, s.stop) == (start, stop))
        })
    }

    /// The children that have no range, sorted.
    pub fn empty_children(&self) -> &[usize] {
        &self.empty
    }

    /// This layout with its trusted flag set to `trusted`.
    pub fn with_trust(&self, trusted: bool) -> Layout {
        Layout {
            trusted,
            ..self.clone()
        }
    }

    /// Merges the slices of every child (in child order; `None`: no slice). `Err` lists what
    /// is wrong.
    pub fn merge(slices: &[Option<Slice>]) -> Result<Layout, Vec<Anomaly>> {
        let n = slices.len();
        let mut bad = Vec::new();
        let mut ranges = Vec::new();
        let mut empty = Vec::new();
        let mut trusted = true;
        for (i, s) in slices.iter().enumerate() {
            match s {
                None => bad.push(Anomaly::Missing(i)),
                Some(s) if s.count as usize != n => bad.push(Anomaly::Count(i, s.count)),
                Some(s) => {
                    trusted &= s.flags & TRUSTED != 0;
                    if s.flags & EMPTY != 0 {
                        empty.push(i);
                    } else {
                        ranges.push((s.start, s.stop, i));
                    }
                }
            }
        }
        ranges.sort_unstable();
        let mut next: u64 = 0;
        for &(start, stop, _) in &ranges {
            if u64::from(start) != next {
                bad.push(Anomaly::Coverage(start.min(next as u32)));
                break;
            }
            next = u64::from(stop) + 1;
        }
        if bad.is_empty() && next != 1 << 32 {
            bad.push(Anomaly::Coverage(next as u32));
        }
        if bad.is_empty() {
            Ok(Layout {
                ranges,
                empty,
                count: n,
                trusted,
            })
        } else {
            Err(bad)
        }
    }

    /// The slice child `i` holds of this layout (`None`: `i` is not one of its children).
    pub fn slice_of(&self, i: usize) -> Option<Slice> {
        let n = self.count as u32;
        let flags = if self.trusted { TRUSTED } else { 0 };
        if self.empty.contains(&i) {
            return Some(Slice {
                flags: flags | EMPTY,
                count: n,
                start: 0,
                stop: 0,
            });
        }
        self.ranges
            .iter()
            .find(|r| r.2 == i)
            .map(|&(start, stop, _)| Slice {
                flags,
                count: n,
                start,
                stop,
            })
    }

    /// The child whose range holds `hash`.
    pub fn child_of(&self, hash: u32) -> usize {
        let at = self.ranges.partition_point(|r| r.0 <= hash);
        self.ranges.get(at.saturating_sub(1)).map_or(0, |r| r.2)
    }

    /// The child that `name` hashes to.
    pub fn hashed(&self, name: &str) -> usize {
        self.child_of(crate::hash::name_hash(name))
    }

    /// Whether this layout gives every child in `slices` exactly the slice it already holds.
    pub fn same_ranges(&self, slices: &[Option<Slice>]) -> bool {
        slices
            .iter()
            .enumerate()
            .all(|(i, s)| match (s, self.slice_of(i)) {
                (Some(s), Some(m)) => {
                    (s.start, s.stop, s.count, s.flags & EMPTY)
                        == (m.start, m.stop, m.count, m.flags & EMPTY)
                }
                _ => false,
            })
    }
}

/// The child given the first range of directory `gfid`'s new layout.
fn rotation(gfid: Gfid, n: usize) -> usize {
    let b = gfid.0;
    (u32::from_be_bytes([b[12], b[13], b[14], b[15]]) as usize) % n
}

/// The slice in an xattr value (`None`: absent or malformed).
pub fn slice_in(v: Option<&Buf>) -> Option<Slice> {
    v.and_then(|b| Slice::decode(b.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slices(l: &Layout, n: usize) -> Vec<Option<Slice>> {
        (0..n).map(|i| l.slice_of(i)).collect()
    }

    #[test]
    fn generated_layouts_cover_the_space_once_and_merge_back() {
        for n in 1..=9 {
            for g in 0..20u8 {
                let mut gfid = Gfid::random();
                gfid.0[15] = g;
                let l = Layout::generate(gfid, n, true);
                let s = slices(&l, n);
                assert!(s.iter().all(Option::is_some));
                let m = Layout::merge(&s).expect("complete");
                assert_eq!(m, l);
                assert!(l.same_ranges(&s));
                assert_eq!(l.child_of(0), rotation(gfid, n));
                // Round trip through the disk form.
                for x in s.iter().flatten() {
                    assert_eq!(Slice::decode(&x.encode()), Some(*x));
                }
            }
        }
    }

    #[test]
    fn holes_overlaps_missing_and_wrong_counts_are_anomalies() {
        let l = Layout::generate(Gfid::ROOT, 3, true);
        let mut s = slices(&l, 3);
        s[1] = None;
        assert!(
            Layout::merge(&s)
                .expect_err("anomalous")
                .contains(&Anomaly::Missing(1))
        );
        let mut s = slices(&l, 3);
        if let Some(x) = s[2].as_mut() {
            x.stop = x.stop.saturating_sub(5).max(x.start);
        }
        let e = Layout::merge(&s).expect_err("anomalous");
        assert!(matches!(e[0], Anomaly::Coverage(_)), "{e:?}");
        let mut s = slices(&l, 3);
        let s0 = s[0].expect("slice");
        s[1] = Some(s0);
        assert!(Layout::merge(&s).is_err());
        let mut s = slices(&l, 3);
        if let Some(x) = s[0].as_mut() {
            x.count = 2;
        }
        assert_eq!(
            Layout::merge(&s).expect_err("anomalous"),
            vec![Anomaly::Count(0, 2)]
        );
        assert_eq!(Slice::decode(&[0; 19]), None);
        let mut bad = l.slice_of(0).expect("slice").encode();
        bad[3] = 2;
        assert_eq!(Slice::decode(&bad), None);
    }

    #[test]
    fn left_out_children_get_no_range_and_the_rest_match_a_layout_without_them() {
        for n in 2..=6 {
            for g in 0..10u8 {
                let mut gfid = Gfid::random();
                gfid.0[15] = g;
                let gone = g as usize % n;
                let l = Layout::generate_over(gfid, n, &[gone], false);
                assert_eq!(l.empty_children(), &[gone]);
                let s = slices(&l, n);
                assert_eq!(s[gone].map(|x| x.flags & EMPTY), Some(EMPTY));
                assert_eq!(Layout::merge(&s).expect("complete"), l);
                assert!(l.same_ranges(&s));
                for i in 0..500 {
                    assert_ne!(l.hashed(&format!("f{i}")), gone);
                }
                // Once the child is gone, the others keep their ranges.
                let after = Layout::generate(gfid, n - 1, false);
                for i in 0..500 {
                    let name = format!("f{i}");
                    let c = l.hashed(&name);
                    let c = if c > gone { c - 1 } else { c };
                    assert_eq!(after.hashed(&name), c, "{name}");
                }
                // A layout with a range on every child is not the same ranges.
                assert!(!Layout::generate(gfid, n, false).same_ranges(&s));
            }
        }
    }

    /// The fraction of the hash space whose child differs between two layouts (exact).
    fn moved_space(a: &Layout, b: &Layout) -> f64 {
        let mut kept = 0u64;
        for &(start, stop, c) in &b.ranges {
            for &(x, y, d) in &a.ranges {
                if c == d {
                    let lo = u64::from(start.max(x));
                    let hi = u64::from(stop.min(y)) + 1;
                    kept += hi.saturating_sub(lo);
                }
            }
        }
        1.0 - kept as f64 / (1u64 << 32) as f64
    }

    /// The fraction of `names` whose child differs between two layouts.
    fn moved(a: &Layout, b: &Layout, names: &[String]) -> f64 {
        let m = names.iter().filter(|n| a.hashed(n) != b.hashed(n)).count();
        m as f64 / names.len() as f64
    }

    #[test]
    fn growing_keeps_as_many_names_in_place_as_equal_ranges_allow() {
        let names: Vec<String> = (0..4000).map(|i| format!("file-{i}")).collect();
        for (from, to) in [(1, 2), (2, 3), (2, 4), (3, 4), (4, 6), (5, 6)] {
            for g in 0..6u8 {
                let mut gfid = Gfid::random();
                gfid.0[15] = g;
                let old = Layout::generate(gfid, from, true);
                let mut slices = slices(&old, from);
                slices.resize(to, None);
                let new = Layout::generate_keeping(gfid, to, &[], &slices, false);
                let back = Layout::merge(&self::slices(&new, to)).expect("complete");
                assert_eq!(back, new);
                // The least any layout can move is 1 - from/to; equal ranges, one per child,
                // sometimes need more (3 -> 4: a third, not a quarter; 5 -> 6: 0.3, not 0.17).
                let ideal = 1.0 - from as f64 / to as f64;
                let m = moved(&old, &new, &names);
                assert!(
                    m <= ideal + 0.15,
                    "{from} -> {to}: {m:.2} of the names move, ideal {ideal:.2}"
                );
                // Never more than plain equal ranges (in the hash space, exactly: sampled
                // names differ by chance).
                let plain = moved_space(&old, &Layout::generate(gfid, to, false));
                let ours = moved_space(&old, &new);
                assert!(
                    ours <= plain + 1e-9,
                    "{from} -> {to}: {ours:.3} of the space moves, plain equal ranges {plain:.3}"
                );
                if (from, to) == (2, 3) || (from, to) == (1, 2) || (from, to) == (2, 4) {
                    assert!(
                        m <= ideal + 0.04,
                        "{from} -> {to}: {m:.2}, ideal {ideal:.2}"
                    );
                }
                // Deterministic, and a no-op when nothing changes.
                assert_eq!(new, Layout::generate_keeping(gfid, to, &[], &slices, false));
                let same =
                    Layout::generate_keeping(gfid, from, &[], &self::slices(&old, from), true);
                assert!(same.keeps_ranges_of(&self::slices(&old, from)));
            }
        }
    }

    #[test]
    fn an_untrusted_slice_makes_the_layout_untrusted() {
        let l = Layout::generate(Gfid::ROOT, 2, true);
        let mut s = slices(&l, 2);
        if let Some(x) = s[1].as_mut() {
            x.flags = 0;
        }
        assert!(!Layout::merge(&s).expect("complete").trusted);
    }

    #[test]
    fn names_map_to_the_child_whose_range_holds_their_hash() {
        let l = Layout::generate(Gfid::ROOT, 4, true);
        let mut seen = [0; 4];
        for i in 0..2000 {
            let name = format!("f{i}");
            let c = l.hashed(&name);
            let s = l.slice_of(c).expect("slice");
            let h = crate::hash::name_hash(&name);
            assert!(s.start <= h && h <= s.stop);
            seen[c] += 1;
        }
        assert!(seen.iter().all(|&k| k > 350), "{seen:?}");
    }
}
