//! Byte-range lock engine (pure, no I/O): POSIX semantics per owner, shared by `lk` and
//! `inodelk`. Each owner's locks never overlap each other; a new lock replaces the owner's
//! coverage of its range (splitting what it cuts) and merges with the owner's adjacent or
//! overlapping locks of the same kind. Locks of different owners conflict when they overlap
//! and at least one is a write lock; an owner never conflicts with itself. An owner is a
//! (client, lock owner) pair ([`Owner`]): the same lock owner value from two clients conflicts.

use std::collections::{HashSet, VecDeque};

use xlator_api::FdId;

use crate::owner::{Client, Owner};

/// Kind of a held lock.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
    Read,
    Write,
}

/// Inclusive byte range; `end == u64::MAX` reaches end of file.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    /// From POSIX `start`/`len` (`len == 0`: to end of file). `None` on overflow.
    pub fn from_start_len(start: u64, len: u64) -> Option<Range> {
        if len == 0 {
            return Some(Range {
                start,
                end: u64::MAX,
            });
        }
        Some(Range {
            start,
            end: start.checked_add(len - 1)?,
        })
    }
    /// POSIX `len` of this range (0: to end of file).
    pub fn len(&self) -> u64 {
        if self.end == u64::MAX {
            0
        } else {
            self.end - self.start + 1
        }
    }
    pub fn overlaps(&self, o: &Range) -> bool {
        self.start <= o.end && o.start <= self.end
    }
    /// Overlapping or directly adjacent.
    fn touches(&self, o: &Range) -> bool {
        self.overlaps(o)
            || (self.end != u64::MAX && self.end + 1 == o.start)
            || (o.end != u64::MAX && o.end + 1 == self.start)
    }
}

/// One lock (held or requested).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Held {
    pub kind: Kind,
    pub range: Range,
    pub owner: Owner,
    /// The fd it was taken through (released with it); an id of `owner.client`'s connection.
    pub fd: FdId,
    pub pid: u32,
}

impl Held {
    pub(crate) fn conflicts(&self, o: &Held) -> bool {
        self.owner != o.owner
            && self.range.overlaps(&o.range)
            && (self.kind == Kind::Write || o.kind == Kind::Write)
    }
}

/// A request waiting for conflicting locks to go away; `tx` wakes it.
pub struct Waiter<T> {
    pub id: u64,
    pub req: Held,
    pub tx: T,
}

/// The locks of one inode (in one domain).
pub struct RangeLocks<T> {
    held: Vec<Held>,
    waiters: VecDeque<Waiter<T>>,
}

impl<T> Default for RangeLocks<T> {
    fn default() -> Self {
        RangeLocks {
            held: Vec::new(),
            waiters: VecDeque::new(),
        }
    }
}

impl<T> RangeLocks<T> {
    pub fn held(&self) -> &[Held] {
        &self.held
    }

    /// The waiting requests, in arrival order.
    pub fn waiters(&self) -> impl Iterator<Item = &Held> {
        self.waiters.iter().map(|w| &w.req)
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.waiters.is_empty()
    }

    /// The first held lock `req` conflicts with.
    pub fn conflict(&self, req: &Held) -> Option<Held> {
        self.held.iter().find(|h| h.conflicts(req)).copied()
    }

    /// Takes `req` unless it conflicts (then: the conflicting lock). `Ok(true)`: it replaced
    /// part of a write lock of its owner by a read lock (a downgrade), which may let waiting
    /// readers in ([`RangeLocks::grant_waiters`]).
    pub fn try_lock(&mut self, req: Held) -> Result<bool, Held> {
        match self.conflict(&req) {
            Some(c) => Err(c),
            None => Ok(self.grant(req)),
        }
    }

    /// Installs `req` for its owner: carve the owner's coverage of the range, insert, merge.
    /// True when that downgraded part of the owner's write locks to read.
    fn grant(&mut self, req: Held) -> bool {
        let downgrade = req.kind == Kind::Read
            && self.held.iter().any(|h| {
                h.owner == req.owner && h.kind == Kind::Write && h.range.overlaps(&req.range)
            });
        self.carve(req.owner, req.range);
        let mut new = req;
        let mut i = 0;
        while i < self.held.len() {
            let h = self.held[i];
            if h.owner == new.owner && h.kind == new.kind && h.range.touches(&new.range) {
                new.range = Range {
                    start: h.range.start.min(new.range.start),
                    end: h.range.end.max(new.range.end),
                };
                self.held.swap_remove(i);
            } else {
                i += 1;
            }
        }
        self.held.push(new);
        downgrade
    }

    /// Removes `owner`'s coverage of `r`, splitting locks that extend past it.
    fn carve(&mut self, owner: Owner, r: Range) -> bool {
        let mut changed = false;
        let mut out = Vec::with_capacity(self.held.len() + 1);
        for h in self.held.drain(..) {
            if h.owner != owner || !h.range.overlaps(&r) {
                out.push(h);
                continue;
            }
            changed = true;
            if h.range.start < r.start {
                out.push(Held {
                    range: Range {
                        start: h.range.start,
                        end: r.start - 1,
                    },
                    ..h
                });
            }
            if h.range.end > r.end {
                out.push(Held {
                    range: Range {
                        start: r.end + 1,
                        end: h.range.end,
                    },
                    ..h
                });
            }
        }
        self.held = out;
        changed
    }

    /// Unlocks `r` for `owner`; true when anything was released.
    pub fn unlock(&mut self, owner: Owner, r: Range) -> bool {
        self.carve(owner, r)
    }

    /// Drops every lock of `owner`.
    pub fn release_owner(&mut self, owner: Owner) -> bool {
        let n = self.held.len();
        self.held.retain(|h| h.owner != owner);
        n != self.held.len()
    }

    /// Drops every lock taken through `client`'s fd `fd`.
    pub fn release_fd(&mut self, client: Client, fd: FdId) -> bool {
        self.release_where(|h| h.owner.client == client && h.fd == fd)
    }

    /// Drops every lock of `client`, whatever its lock owner.
    pub fn release_client(&mut self, client: Client) -> bool {
        self.release_where(|h| h.owner.client == client)
    }

    fn release_where(&mut self, gone: impl Fn(&Held) -> bool) -> bool {
        let n = self.held.len();
        self.held.retain(|h| !gone(h));
        n != self.held.len()
    }

    /// Drops the waiting requests taken through `client`'s fd `fd`, returning them (to be
    /// failed).
    pub fn cancel_fd_waiters(&mut self, client: Client, fd: FdId) -> Vec<Waiter<T>> {
        self.cancel_where(|h| h.owner.client == client && h.fd == fd)
    }

    /// Drops the waiting requests of `client`, returning them (to be failed).
    pub fn cancel_client_waiters(&mut self, client: Client) -> Vec<Waiter<T>> {
        self.cancel_where(|h| h.owner.client == client)
    }

    fn cancel_where(&mut self, gone: impl Fn(&Held) -> bool) -> Vec<Waiter<T>> {
        let (gone, keep): (VecDeque<_>, VecDeque<_>) =
            self.waiters.drain(..).partition(|w| gone(&w.req));
        self.waiters = keep;
        gone.into_iter().collect()
    }

    pub fn enqueue(&mut self, w: Waiter<T>) {
        self.waiters.push_back(w);
    }

    pub fn remove_waiter(&mut self, id: u64) -> Option<Waiter<T>> {
        let pos = self.waiters.iter().position(|w| w.id == id)?;
        self.waiters.remove(pos)
    }

    /// Grants, in arrival order, every waiter that no longer conflicts; returns them to wake.
    /// A grant that downgrades its owner's write lock may let in a waiter passed over
    /// before it: then the queue is gone through again, until no waiter can go.
    pub fn grant_waiters(&mut self) -> Vec<Waiter<T>> {
        let mut granted = Vec::new();
        loop {
            let mut freed = false;
            let mut still = VecDeque::new();
            while let Some(w) = self.waiters.pop_front() {
                if self.conflict(&w.req).is_none() {
                    freed |= self.grant(w.req);
                    granted.push(w);
                } else {
                    still.push_back(w);
                }
            }
            self.waiters = still;
            if !freed || self.waiters.is_empty() {
                return granted;
            }
        }
    }

    /// Whether `req` waiting would close a cycle: an owner it waits for waits (transitively)
    /// for `req.owner` on this inode.
    pub fn would_deadlock(&self, req: &Held) -> bool {
        let mut seen = HashSet::new();
        let mut frontier: Vec<Owner> = self
            .held
            .iter()
            .filter(|h| h.conflicts(req))
            .map(|h| h.owner)
            .collect();
        while let Some(o) = frontier.pop() {
            if o == req.owner {
                return true;
            }
            if !seen.insert(o) {
                continue;
            }
            for w in self.waiters.iter().filter(|w| w.req.owner == o) {
                frontier.extend(
                    self.held
                        .iter()
                        .filter(|h| h.conflicts(&w.req))
                        .map(|h| h.owner),
                );
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use xlator_api::{ClientId, LkOwner};

    /// Lock owner `n` of a local caller.
    fn o(n: u64) -> Owner {
        Owner {
            client: None,
            lk: LkOwner(n),
        }
    }

    fn lk(owner: u64, kind: Kind, start: u64, len: u64) -> Held {
        Held {
            kind,
            range: Range::from_start_len(start, len).expect("range"),
            owner: o(owner),
            fd: FdId(owner),
            pid: 0,
        }
    }

    #[test]
    fn shared_and_exclusive() {
        let mut t = RangeLocks::<()>::default();
        assert!(t.try_lock(lk(1, Kind::Read, 0, 10)).is_ok());
        assert!(t.try_lock(lk(2, Kind::Read, 5, 10)).is_ok());
        assert_eq!(
            t.try_lock(lk(3, Kind::Write, 9, 1)).err().map(|h| h.owner),
            Some(o(1))
        );
        assert!(t.try_lock(lk(3, Kind::Write, 15, 0)).is_ok());
        // Upgrade of one's own read lock conflicts only with others.
        assert!(t.try_lock(lk(1, Kind::Write, 0, 5)).is_ok());
        assert!(t.try_lock(lk(2, Kind::Write, 0, 1)).is_err());
    }

    #[test]
    fn an_owner_is_per_client() {
        let mut t = RangeLocks::<u8>::default();
        let of = |c: u64, kind| Held {
            owner: Owner {
                client: Some(ClientId(c)),
                lk: LkOwner(0),
            },
            ..lk(0, kind, 0, 10)
        };
        t.try_lock(of(1, Kind::Write)).expect("client 1");
        assert!(
            t.try_lock(of(2, Kind::Write)).is_err(),
            "same lock owner, other client"
        );
        t.try_lock(of(1, Kind::Read))
            .expect("same client and owner: replaces");
        t.try_lock(lk(0, Kind::Read, 20, 1)).expect("local owner 0");
        t.enqueue(Waiter {
            id: 1,
            req: of(2, Kind::Read),
            tx: 0,
        });
        t.enqueue(Waiter {
            id: 2,
            req: of(3, Kind::Write),
            tx: 0,
        });
        assert!(t.release_client(Some(ClientId(1))));
        assert_eq!(t.held().len(), 1, "the local owner's lock stays");
        let gone = t.cancel_client_waiters(Some(ClientId(3)));
        assert_eq!(gone.iter().map(|w| w.id).collect::<Vec<_>>(), vec![2]);
        assert_eq!(t.grant_waiters().len(), 1);
        // fd ids are per client: client 2's fd 0 is not the local fd 0.
        assert!(t.release_fd(Some(ClientId(2)), FdId(0)));
        assert_eq!(t.held().len(), 1);
        assert_eq!(t.held()[0].owner, o(0));
    }

    #[test]
    fn split_and_merge() {
        let mut t = RangeLocks::<()>::default();
        t.try_lock(lk(1, Kind::Write, 0, 100)).expect("lock");
        t.unlock(o(1), Range { start: 10, end: 19 });
        let mut r: Vec<_> = t
            .held()
            .iter()
            .map(|h| (h.range.start, h.range.end))
            .collect();
        r.sort();
        assert_eq!(r, vec![(0, 9), (20, 99)]);
        t.try_lock(lk(1, Kind::Write, 10, 10)).expect("refill");
        assert_eq!(t.held().len(), 1);
        assert_eq!(t.held()[0].range, Range { start: 0, end: 99 });
        // A read lock in the middle splits the write lock in three.
        t.try_lock(lk(1, Kind::Read, 40, 10))
            .expect("downgrade middle");
        assert_eq!(t.held().len(), 3);
        assert!(t.try_lock(lk(2, Kind::Read, 45, 1)).is_ok());
        assert!(t.try_lock(lk(2, Kind::Read, 39, 1)).is_err());
    }

    #[test]
    fn waiters_granted_in_order_and_deadlock_found() {
        let mut t = RangeLocks::<u8>::default();
        t.try_lock(lk(1, Kind::Write, 0, 10)).expect("a");
        t.try_lock(lk(2, Kind::Write, 20, 10)).expect("b");
        let w = lk(2, Kind::Write, 5, 1);
        assert!(!t.would_deadlock(&w));
        t.enqueue(Waiter {
            id: 1,
            req: w,
            tx: 0,
        });
        // 1 now waiting for 2's range while 2 waits for 1: a cycle.
        assert!(t.would_deadlock(&lk(1, Kind::Write, 25, 1)));
        assert!(!t.would_deadlock(&lk(3, Kind::Write, 25, 1)));
        assert!(t.grant_waiters().is_empty());
        t.release_owner(o(1));
        let g = t.grant_waiters();
        assert_eq!(g.len(), 1);
        assert!(
            t.held()
                .iter()
                .any(|h| h.owner == o(2) && h.range.start == 5)
        );
    }

    #[test]
    fn ranges() {
        assert_eq!(
            Range::from_start_len(5, 0),
            Some(Range {
                start: 5,
                end: u64::MAX
            })
        );
        assert_eq!(Range::from_start_len(u64::MAX, 2), None);
        assert_eq!(
            Range {
                start: 5,
                end: u64::MAX
            }
            .len(),
            0
        );
        assert_eq!(Range { start: 5, end: 9 }.len(), 5);
    }

    // Past every lock the ops can make (start < 40, len < 12), so the model sees every byte.
    const N: usize = 64;

    #[derive(Clone, Debug)]
    enum Op {
        Lock(u64, bool, u64, u64),
        Unlock(u64, u64, u64),
        Release(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3u64, any::<bool>(), 0..40u64, 0..12u64)
                .prop_map(|(o, w, s, l)| Op::Lock(o, w, s, l)),
            (0..3u64, 0..40u64, 0..12u64).prop_map(|(o, s, l)| Op::Unlock(o, s, l)),
            (0..3u64).prop_map(Op::Release),
        ]
    }

    /// Per byte: the (owner, kind) holding it.
    type Model = Vec<Vec<(u64, Kind)>>;

    fn covered(r: Range) -> std::ops::Range<usize> {
        (r.start as usize).min(N)
            ..(r.end.min(N as u64 - 1) as usize + 1).max((r.start as usize).min(N))
    }

    proptest! {
        #[test]
        fn matches_a_per_byte_model(ops in proptest::collection::vec(op(), 1..60)) {
            let mut t = RangeLocks::<()>::default();
            let mut m: Model = vec![Vec::new(); N];
            for step in ops {
                match step {
                    Op::Lock(owner, w, s, l) => {
                        let kind = if w { Kind::Write } else { Kind::Read };
                        let req = lk(owner, kind, s, l);
                        let model_conflict = covered(req.range).any(|b| m[b].iter().any(|(o2, k2)| {
                            *o2 != owner && (kind == Kind::Write || *k2 == Kind::Write)
                        }));
                        let r = t.try_lock(req);
                        prop_assert_eq!(r.is_err(), model_conflict);
                        if r.is_ok() {
                            for b in covered(req.range) {
                                m[b].retain(|(o2, _)| *o2 != owner);
                                m[b].push((owner, kind));
                            }
                        }
                    }
                    Op::Unlock(owner, s, l) => {
                        let r = Range::from_start_len(s, l).expect("range");
                        t.unlock(o(owner), r);
                        for b in covered(r) {
                            m[b].retain(|(o2, _)| *o2 != owner);
                        }
                    }
                    Op::Release(owner) => {
                        t.release_owner(o(owner));
                        for b in m.iter_mut() {
                            b.retain(|(o2, _)| *o2 != owner);
                        }
                    }
                }
                // Same view per byte, no self-overlap, same-kind neighbours merged.
                for (b, want) in m.iter().enumerate() {
                    let mut got: Vec<(u64, Kind)> = t.held().iter()
                        .filter(|h| h.range.start <= b as u64 && b as u64 <= h.range.end)
                        .map(|h| (h.owner.lk.0, h.kind)).collect();
                    let mut want = want.clone();
                    got.sort_by_key(|x| x.0);
                    want.sort_by_key(|x| x.0);
                    prop_assert_eq!(got, want);
                }
                for (i, a) in t.held().iter().enumerate() {
                    for c in &t.held()[i + 1..] {
                        if a.owner == c.owner {
                            prop_assert!(!a.range.overlaps(&c.range));
                            if a.kind == c.kind {
                                prop_assert!(!a.range.touches(&c.range));
                            }
                        }
                    }
                }
            }
        }
    }
}
