//! Pending counters ("changelog"), pure. Child `i` keeps, for every child `j`, an xattr
//! `keys[j]` of 12 bytes: three big-endian u32 lanes `[data, metadata, entry]`, as GlusterFS.
//! A non-zero lane stored on `i` under `j`'s key means "`i` saw operations that `j` may have
//! missed": `i` accuses `j`; `i` under its own key means "dirty": a transaction is (or was,
//! when its post-op never came) open on `i`. This is GlusterFS AFR v2's changelog (with the
//! dirty count under the child's own key instead of a separate `afr.dirty`): the pre-op adds
//! 1 under the participant's own key and under the keys of the children that take no part
//! (down), the post-op takes the dirty count back and adds 1 under the keys of participants
//! where the fop failed. Participants never accuse each other for an open transaction.
//!
//! [`direction`]: the sources (good copies) are the present children that no other present
//! child accuses, whatever the accuser's dirty count; every other present child is a sink.
//! No source at all is split-brain (each side accuses the other), unless a child that did
//! not answer may be the good copy (no present child accuses it): then nothing is readable
//! until it is back. Dirty counts alone
//! (a crash before the post-op, an open transaction) accuse nobody: every child stays a
//! source, and a heal under the lock makes the sources equal (what the dead transaction did
//! may have reached some of them only) and returns them to zero.

/// Prefix of every pending-counter xattr (replicate's own; never copied by heal, hidden from
/// callers that did not ask for it).
pub const PREFIX: &str = "trusted.afr.";

/// Bytes of one counter xattr.
pub const LEN: usize = 12;

/// Which counter lanes a transaction or heal touches.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Lanes(pub u8);

impl Lanes {
    pub const DATA: Lanes = Lanes(1);
    pub const META: Lanes = Lanes(2);
    pub const ENTRY: Lanes = Lanes(4);
    pub const NONE: Lanes = Lanes(0);

    pub fn has(self, l: Lanes) -> bool {
        self.0 & l.0 == l.0 && l.0 != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Each single lane set here, with its index in the 12 bytes.
    pub fn each(self) -> impl Iterator<Item = (Lanes, usize)> {
        [(Lanes::DATA, 0), (Lanes::META, 1), (Lanes::ENTRY, 2)]
            .into_iter()
            .filter(move |(l, _)| self.has(*l))
    }
    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "data",
            2 => "metadata",
            4 => "entry",
            _ => "lanes",
        }
    }
}

impl std::ops::BitOr for Lanes {
    type Output = Lanes;
    fn bitor(self, o: Lanes) -> Lanes {
        Lanes(self.0 | o.0)
    }
}

/// One counter xattr's three lanes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Counters(pub [u32; 3]);

impl Counters {
    /// Decodes a stored value; missing or malformed (not 12 bytes) reads as zero, as a
    /// brick that never recorded anything.
    pub fn decode(b: Option<&[u8]>) -> Counters {
        let mut c = [0u32; 3];
        if let Some(b) = b.filter(|b| b.len() == LEN) {
            for (i, lane) in c.iter_mut().enumerate() {
                *lane = u32::from_be_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
            }
        }
        Counters(c)
    }
    pub fn encode(self) -> [u8; LEN] {
        let mut out = [0u8; LEN];
        for (i, lane) in self.0.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&lane.to_be_bytes());
        }
        out
    }
    /// The value of one lane.
    pub fn lane(self, l: Lanes) -> u32 {
        l.each().next().map_or(0, |(_, i)| self.0[i])
    }
}

/// An `AddArray32` delta adding `n` (wrapping: -1 is `u32::MAX`) to each lane in `lanes`.
pub fn delta(lanes: Lanes, n: i32) -> [u8; LEN] {
    let mut c = [0u32; 3];
    for (_, i) in lanes.each() {
        c[i] = n as u32;
    }
    Counters(c).encode()
}

/// A delta subtracting `c`'s lanes in `lanes` (to return counters read under a lock to zero).
pub fn undo(c: Counters, lanes: Lanes) -> [u8; LEN] {
    let mut out = [0u32; 3];
    for (_, i) in lanes.each() {
        out[i] = c.0[i].wrapping_neg();
    }
    Counters(out).encode()
}

/// What every child says about every child: `rows[i]` is `None` when `i` did not answer
/// (down, missing the object), else `rows[i][j]` is what `i` stores under `j`'s key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub rows: Vec<Option<Vec<Counters>>>,
}

/// How a lane of an object stands across the children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Present children that are good copies (readable), and those to heal from them.
    Heal {
        sources: Vec<bool>,
        sinks: Vec<bool>,
    },
    /// No good copy: the children accuse each other. Never resolved silently.
    SplitBrain,
}

impl Direction {
    /// Readable children (none when split-brain).
    pub fn sources(&self, n: usize) -> Vec<bool> {
        match self {
            Direction::Heal { sources, .. } => sources.clone(),
            Direction::SplitBrain => vec![false; n],
        }
    }
    /// Whether some present child needs heal.
    pub fn needs_heal(&self) -> bool {
        match self {
            Direction::Heal { sinks, .. } => sinks.iter().any(|s| *s),
            Direction::SplitBrain => false,
        }
    }
}

impl Matrix {
    /// Builds the matrix from each child's xattrs: `read(i, key)` is child `i`'s stored value
    /// of `key`, `present[i]` whether `i` answered at all.
    pub fn build<'a>(
        keys: &[String],
        present: &[bool],
        read: impl Fn(usize, &str) -> Option<&'a [u8]>,
    ) -> Matrix {
        let rows = (0..keys.len())
            .map(|i| {
                present
                    .get(i)
                    .copied()
                    .unwrap_or(false)
                    .then(|| keys.iter().map(|k| Counters::decode(read(i, k))).collect())
            })
            .collect();
        Matrix { rows }
    }

    pub fn n(&self) -> usize {
        self.rows.len()
    }

    /// `i`'s value about `j` in lane `l` (0 when `i` did not answer).
    pub fn get(&self, i: usize, j: usize, l: Lanes) -> u32 {
        self.rows
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|r| r.get(j))
            .map_or(0, |c| c.lane(l))
    }

    pub fn present(&self, i: usize) -> bool {
        self.rows.get(i).is_some_and(Option::is_some)
    }

    /// Whether some present child has a dirty count in lane `l` (a transaction open there, or
    /// one whose post-op never came).
    pub fn dirty(&self, l: Lanes) -> bool {
        (0..self.n()).any(|i| self.get(i, i, l) > 0)
    }

    /// The direction of lane `l` (see the module doc).
    pub fn direction(&self, l: Lanes) -> Direction {
        let n = self.n();
        let present: Vec<bool> = (0..n).map(|i| self.present(i)).collect();
        let sources: Vec<bool> = (0..n)
            .map(|j| present[j] && !(0..n).any(|i| i != j && self.get(i, j, l) > 0))
            .collect();
        if !sources.iter().any(|s| *s) {
            // An absent child that no present one accuses may be the good copy: the object
            // is unavailable (reads say ENOTCONN), not in split-brain, until it answers.
            let absent_may_be_good =
                (0..n).any(|j| !present[j] && !(0..n).any(|i| present[i] && self.get(i, j, l) > 0));
            return if present.iter().any(|p| *p) && !absent_may_be_good {
                Direction::SplitBrain
            } else {
                Direction::Heal {
                    sources,
                    sinks: vec![false; n],
                }
            };
        }
        let sinks = (0..n).map(|i| present[i] && !sources[i]).collect();
        Direction::Heal { sources, sinks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rows: &[Option<&[[u32; 3]]>]) -> Matrix {
        Matrix {
            rows: rows
                .iter()
                .map(|r| r.map(|r| r.iter().map(|c| Counters(*c)).collect()))
                .collect(),
        }
    }
    const Z: [u32; 3] = [0, 0, 0];
    const D: [u32; 3] = [1, 0, 0];

    #[test]
    fn counters_are_three_big_endian_lanes() {
        let c = Counters([1, 2, 0x0a0b0c0d]);
        let e = c.encode();
        assert_eq!(e, [0, 0, 0, 1, 0, 0, 0, 2, 0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(Counters::decode(Some(&e)), c);
        assert_eq!(Counters::decode(None), Counters::default());
        assert_eq!(Counters::decode(Some(&[1, 2, 3])), Counters::default());
        assert_eq!(
            delta(Lanes::META, -1),
            [0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0]
        );
        assert_eq!(
            undo(Counters([3, 0, 1]), Lanes::DATA),
            delta(Lanes::DATA, -3)
        );
    }

    #[test]
    fn a_failed_child_accused_by_the_others_is_the_sink() {
        // 0 and 1 finished the post-op accusing 2; 2 accuses itself (failed op, post-op done).
        let x = m(&[Some(&[Z, Z, D]), Some(&[Z, Z, D]), Some(&[Z, Z, D])]);
        let want = Direction::Heal {
            sources: vec![true, true, false],
            sinks: vec![false, false, true],
        };
        assert_eq!(x.direction(Lanes::DATA), want);
        assert!(!x.direction(Lanes::META).needs_heal());
        // 2 never got its post-op (it went away after the pre-op): it is dirty only.
        let y = m(&[Some(&[Z, Z, D]), Some(&[Z, Z, D]), Some(&[Z, Z, D])]);
        assert_eq!(y.direction(Lanes::DATA), want);
    }

    #[test]
    fn an_open_transaction_blames_the_absent_child_only() {
        // Eager lock held while 2 is down: 0 and 1 are dirty and accuse 2.
        let x = m(&[Some(&[D, Z, D]), Some(&[Z, D, D]), Some(&[Z, Z, Z])]);
        assert_eq!(
            x.direction(Lanes::DATA),
            Direction::Heal {
                sources: vec![true, true, false],
                sinks: vec![false, false, true]
            }
        );
        // Everyone in the transaction: nobody to heal.
        let all = m(&[Some(&[D, Z]), Some(&[Z, D])]);
        assert!(!all.direction(Lanes::DATA).needs_heal());
    }

    #[test]
    fn a_child_stale_before_an_open_hold_stays_a_sink() {
        // 1 missed a write (2 accuses it), then took part in a hold with 2 that is still
        // open, while 0 is down: 1 must not be read, whatever its dirty count.
        let x = m(&[
            None,
            Some(&[[1, 0, 0], [2, 0, 0], Z]),
            Some(&[[1, 0, 0], [1, 0, 0], [1, 0, 0]]),
        ]);
        assert_eq!(
            x.direction(Lanes::DATA),
            Direction::Heal {
                sources: vec![false, false, true],
                sinks: vec![false, true, false]
            }
        );
    }

    #[test]
    fn mutual_accusation_is_split_brain_and_absent_children_are_neither() {
        let x = m(&[Some(&[Z, D]), Some(&[D, Z])]);
        assert_eq!(x.direction(Lanes::DATA), Direction::SplitBrain);
        let y = m(&[Some(&[Z, D]), None]);
        assert_eq!(
            y.direction(Lanes::DATA),
            Direction::Heal {
                sources: vec![true, false],
                sinks: vec![false, false]
            }
        );
        let clean = m(&[Some(&[Z, Z]), Some(&[Z, Z])]);
        assert!(!clean.direction(Lanes::ENTRY).needs_heal());
    }
}
