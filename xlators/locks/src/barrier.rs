//! The migration barrier's gate: while a barrier is held on a GFID, modifying fops on it from
//! other clients wait; taking a barrier first waits for the modifying fops on it already in
//! flight (the drain). cluster/distribute takes one (an `inodelk` in [`DOMAIN`]) to copy a
//! file away and switch it over with no write landing on the source meanwhile.
//!
//! Guarantees:
//! - Once [`Barriers::drain`] returned Ok for (G, holder), no modifying fop on G that passed
//!   [`Barriers::admit`] is still running, and no other client's passes until the holder's
//!   mark is removed ([`Barriers::remove`], [`Barriers::forget_client`]).
//! - The holder's client is never held by its own mark.
//! - With no barrier on the brick an admission costs one atomic load and one uncontended
//!   compare-exchange, its end one atomic subtract: no mutex, no map.
//!
//! How: GFIDs hash to [`SHARDS`] shards. Each shard has a word `fast` (a CLOSED bit and the
//! number of fops admitted without the mutex) and a mutex-guarded `slow` part. While no mark
//! lives on a shard, a fop enters by compare-exchanging `fast` up by one (never once CLOSED is
//! set, so a closed shard's fast count only goes down). A mark closes its shard; fops on a
//! closed shard go through the mutex, where they are counted per GFID and wait while another
//! client's mark is on their GFID. A drain waits for the shard's fast count (every fop of the
//! shard that entered before the close; it can only fall) and for its GFID's slow count to
//! reach zero. Fops of other shards never notice.
//!
//! `create` with O_TRUNC (without O_EXCL) may truncate an existing file whose GFID is not
//! known before it runs; such creates go through a brick-wide gate (`by_name`) that is closed
//! while any barrier exists: the caller then looks the name up and admits on that GFID
//! ([`Barriers::admit_by_name`]), and every drain also waits for the creates that entered
//! `by_name` while it was open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use futures::channel::oneshot;
use xlator_api::{Dump, Errno, Gfid};

use crate::owner::{Client, Owner};

/// The inodelk domain whose whole-file write locks are migration barriers.
pub const DOMAIN: &str = "xlfs.dht.migrate";

/// Number of shards GFIDs hash to.
pub const SHARDS: usize = 64;

/// Set in a shard's `fast` word while a mark lives on the shard.
const CLOSED: u64 = 1 << 63;

/// One shard; aligned so that the `fast` words of two shards never share a cache line.
#[derive(Default)]
#[repr(align(128))]
struct Shard {
    fast: AtomicU64,
    slow: Mutex<Slow>,
}

#[derive(Default)]
struct Slow {
    /// Marks on GFIDs of this shard (for `by_name`: on the whole brick).
    marks: usize,
    inodes: HashMap<Gfid, Inode>,
    /// Drains waiting for a count of this shard to fall; woken to look again.
    drains: Vec<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Inode {
    /// Modifying fops on this GFID admitted through the mutex, still running.
    inflight: usize,
    /// Barriers on this GFID (one, but two for an instant when a waiting barrier is granted
    /// before its predecessor's mark is gone).
    marks: Vec<Mark>,
    /// Fops waiting for the marks of other clients to go.
    waiters: Vec<oneshot::Sender<()>>,
}

#[derive(Clone, Copy)]
struct Mark {
    owner: Owner,
    /// The drain finished: the barrier is granted.
    drained: bool,
}

impl Inode {
    fn blocks(&self, client: Client) -> bool {
        self.marks.iter().any(|m| m.owner.client != client)
    }
    fn is_idle(&self) -> bool {
        self.inflight == 0 && self.marks.is_empty()
    }
}

impl Shard {
    fn lock(&self) -> MutexGuard<'_, Slow> {
        self.slow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a fop in without the mutex; false when the shard is closed.
    fn try_enter(&self) -> bool {
        let mut v = self.fast.load(Ordering::Acquire);
        loop {
            if v & CLOSED != 0 {
                return false;
            }
            match self
                .fast
                .compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// Fops counted in by `try_enter` and still running.
    fn fast_count(&self) -> u64 {
        self.fast.load(Ordering::Acquire) & !CLOSED
    }

    fn add_mark(&self, s: &mut Slow) {
        s.marks += 1;
        if s.marks == 1 {
            self.fast.fetch_or(CLOSED, Ordering::AcqRel);
        }
    }

    fn drop_marks(&self, s: &mut Slow, n: usize) {
        s.marks -= n;
        if n > 0 && s.marks == 0 {
            self.fast.fetch_and(!CLOSED, Ordering::AcqRel);
        }
    }
}

fn wake(txs: &mut Vec<oneshot::Sender<()>>) {
    for tx in txs.drain(..) {
        let _ = tx.send(());
    }
}

/// Every barrier of the brick and the counts of modifying fops in flight.
pub struct Barriers {
    shards: Box<[Shard]>,
    by_name: Shard,
}

impl Default for Barriers {
    fn default() -> Self {
        Barriers {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            by_name: Shard::default(),
        }
    }
}

/// A modifying fop let through the gate; dropping it (when the fop is done) counts it out.
pub struct Admitted<'a> {
    shard: &'a Shard,
    /// Counted per GFID through the mutex (`None`: in the shard's fast count).
    slow: Option<Gfid>,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        match self.slow {
            None => {
                let before = self.shard.fast.fetch_sub(1, Ordering::AcqRel);
                // The last fast fop of a closed shard: drains may be waiting for it. (A drain
                // looks at the count under the mutex, so taking it here cannot miss one.)
                if before & CLOSED != 0 && before & !CLOSED == 1 {
                    wake(&mut self.shard.lock().drains);
                }
            }
            Some(g) => {
                let mut s = self.shard.lock();
                let s = &mut *s;
                if let Some(inode) = s.inodes.get_mut(&g) {
                    inode.inflight -= 1;
                    if inode.inflight == 0 {
                        wake(&mut s.drains);
                    }
                    if inode.is_idle() {
                        s.inodes.remove(&g);
                    }
                }
            }
        }
    }
}

impl Barriers {
    fn shard(&self, g: Gfid) -> &Shard {
        let lo = u64::from_le_bytes([
            g.0[0], g.0[1], g.0[2], g.0[3], g.0[4], g.0[5], g.0[6], g.0[7],
        ]);
        let hi = u64::from_le_bytes([
            g.0[8], g.0[9], g.0[10], g.0[11], g.0[12], g.0[13], g.0[14], g.0[15],
        ]);
        let h = (lo ^ hi.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    /// Lets a modifying fop on `g` from `client` through, waiting while another client holds
    /// a barrier on `g`. Hold the result until the fop is done. Dropping the future while it
    /// waits withdraws nothing that needs undoing.
    pub async fn admit(&self, g: Gfid, client: Client) -> Admitted<'_> {
        let shard = self.shard(g);
        if shard.try_enter() {
            return Admitted { shard, slow: None };
        }
        loop {
            let rx = {
                let mut s = shard.lock();
                let inode = s.inodes.entry(g).or_default();
                if !inode.blocks(client) {
                    inode.inflight += 1;
                    return Admitted {
                        shard,
                        slow: Some(g),
                    };
                }
                let (tx, rx) = oneshot::channel();
                inode.waiters.push(tx);
                rx
            };
            // Woken when a mark on `g` goes; look again.
            let _ = rx.await;
        }
    }

    /// Lets a create that may truncate an existing file of unknown GFID through while no
    /// barrier exists on the brick; `None`: find its GFID and [`admit`](Self::admit) on it.
    pub fn admit_by_name(&self) -> Option<Admitted<'_>> {
        // Built only once counted in: dropping one counts a fop out.
        self.by_name.try_enter().then(|| Admitted {
            shard: &self.by_name,
            slow: None,
        })
    }

    /// Puts `owner`'s barrier mark on `g`: from now on other clients' modifying fops on `g`
    /// wait. False when `owner` already has it.
    pub fn install(&self, g: Gfid, owner: Owner) -> bool {
        let shard = self.shard(g);
        {
            let mut s = shard.lock();
            let inode = s.inodes.entry(g).or_default();
            if inode.marks.iter().any(|m| m.owner == owner) {
                return false;
            }
            inode.marks.push(Mark {
                owner,
                drained: false,
            });
            shard.add_mark(&mut s);
        }
        let mut b = self.by_name.lock();
        self.by_name.add_mark(&mut b);
        true
    }

    /// Whether `owner` has a mark on `g` (granted or still draining).
    pub fn holds(&self, g: Gfid, owner: Owner) -> bool {
        self.shard(g)
            .lock()
            .inodes
            .get(&g)
            .is_some_and(|i| i.marks.iter().any(|m| m.owner == owner))
    }

    /// Waits until no modifying fop admitted on `g` is running, then marks `owner`'s
    /// barrier granted. ENOTCONN when the mark went meanwhile (its client was forgotten).
    pub async fn drain(&self, g: Gfid, owner: Owner) -> Result<(), Errno> {
        let shard = self.shard(g);
        let present = |s: &Slow| {
            s.inodes
                .get(&g)
                .is_some_and(|i| i.marks.iter().any(|m| m.owner == owner))
        };
        loop {
            let rx = {
                let mut s = shard.lock();
                if !present(&s) {
                    return Err(Errno::ENOTCONN);
                }
                let slow_idle = s.inodes.get(&g).is_none_or(|i| i.inflight == 0);
                if slow_idle && shard.fast_count() == 0 {
                    break;
                }
                let (tx, rx) = oneshot::channel();
                s.drains.push(tx);
                rx
            };
            let _ = rx.await;
        }
        loop {
            let rx = {
                let mut b = self.by_name.lock();
                if self.by_name.fast_count() == 0 {
                    break;
                }
                let (tx, rx) = oneshot::channel();
                b.drains.push(tx);
                rx
            };
            let _ = rx.await;
        }
        let mut s = shard.lock();
        let mark = s
            .inodes
            .get_mut(&g)
            .and_then(|i| i.marks.iter_mut().find(|m| m.owner == owner))
            .ok_or(Errno::ENOTCONN)?;
        mark.drained = true;
        Ok(())
    }

    /// Takes `owner`'s mark off `g` and lets the fops waiting for it look again. False when
    /// it had none.
    pub fn remove(&self, g: Gfid, owner: Owner) -> bool {
        let shard = self.shard(g);
        {
            let mut s = shard.lock();
            let s = &mut *s;
            let Some(inode) = s.inodes.get_mut(&g) else {
                return false;
            };
            let Some(i) = inode.marks.iter().position(|m| m.owner == owner) else {
                return false;
            };
            inode.marks.remove(i);
            wake(&mut inode.waiters);
            if inode.is_idle() {
                s.inodes.remove(&g);
            }
            shard.drop_marks(s, 1);
            // A drain of this very mark looks again and finds it gone.
            wake(&mut s.drains);
        }
        let mut b = self.by_name.lock();
        self.by_name.drop_marks(&mut b, 1);
        true
    }

    /// Takes every mark of `client` off (its connection is gone); returns how many.
    pub fn forget_client(&self, client: Client) -> usize {
        let mut total = 0;
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            let s = &mut *s;
            let mut n = 0;
            s.inodes.retain(|_, inode| {
                let before = inode.marks.len();
                inode.marks.retain(|m| m.owner.client != client);
                if inode.marks.len() != before {
                    n += before - inode.marks.len();
                    wake(&mut inode.waiters);
                }
                !inode.is_idle()
            });
            if n > 0 {
                shard.drop_marks(s, n);
                wake(&mut s.drains);
                total += n;
            }
        }
        if total > 0 {
            let mut b = self.by_name.lock();
            self.by_name.drop_marks(&mut b, total);
        }
        total
    }

    /// `barriers` (held or draining, each with its gfid, client, owner, `state` and the
    /// `waiting_fops` held by it) and `barrier_waiting_fops` in all; at most `max` listed.
    pub fn dump(&self, max: usize) -> Dump {
        let (mut listed, mut count, mut waiting) = (Vec::new(), 0usize, 0usize);
        for shard in self.shards.iter() {
            let s = shard.lock();
            for (g, inode) in &s.inodes {
                let n = inode.waiters.iter().filter(|t| !t.is_canceled()).count();
                waiting += n;
                for m in &inode.marks {
                    count += 1;
                    if listed.len() >= max {
                        continue;
                    }
                    let mut d = Dump::new().with("gfid", g.to_string());
                    if let Some(c) = m.owner.client {
                        d.push("client", c.0);
                    }
                    let state = if m.drained { "held" } else { "draining" };
                    listed.push(
                        d.with("owner", m.owner.lk.0)
                            .with("state", state)
                            .with("waiting_fops", n),
                    );
                }
            }
        }
        Dump::new()
            .with("barriers_count", count)
            .with("barrier_waiting_fops", waiting)
            .with("barriers", listed)
    }

    /// Fops counted in without the mutex on `g`'s shard (tests).
    #[cfg(test)]
    fn fast_of(&self, g: Gfid) -> u64 {
        self.shard(g).fast_count()
    }

    /// Whether `g`'s shard takes fops through its mutex (tests).
    #[cfg(test)]
    fn closed(&self, g: Gfid) -> bool {
        self.shard(g).fast.load(Ordering::Acquire) & CLOSED != 0
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use futures::FutureExt as _;
    use futures::poll;
    use xlator_api::{ClientId, LkOwner};

    use super::*;

    fn owner(client: u64) -> Owner {
        Owner {
            client: Some(ClientId(client)),
            lk: LkOwner(7),
        }
    }
    fn c(client: u64) -> Client {
        Some(ClientId(client))
    }

    /// Two GFIDs on different shards, and one more on the first one's shard.
    fn gfids(b: &Barriers) -> (Gfid, Gfid, Gfid) {
        let g = Gfid::random();
        let other = loop {
            let o = Gfid::random();
            if !std::ptr::eq(b.shard(o), b.shard(g)) {
                break o;
            }
        };
        let same = loop {
            let o = Gfid::random();
            if o != g && std::ptr::eq(b.shard(o), b.shard(g)) {
                break o;
            }
        };
        (g, other, same)
    }

    #[tokio::test]
    async fn without_barriers_fops_use_the_fast_count_only() {
        let b = Barriers::default();
        let (g, _, _) = gfids(&b);
        let a = b.admit(g, c(1)).await;
        assert_eq!(b.fast_of(g), 1);
        assert!(a.slow.is_none());
        assert!(b.shard(g).lock().inodes.is_empty(), "no map entry");
        drop(a);
        assert_eq!(b.fast_of(g), 0);
    }

    #[tokio::test]
    async fn a_mark_holds_other_clients_on_its_gfid_only() {
        let b = Barriers::default();
        let (g, other, same) = gfids(&b);
        assert!(b.install(g, owner(1)));
        assert!(!b.install(g, owner(1)), "once per owner");
        assert!(b.closed(g) && !b.closed(other));
        let mut held = pin!(b.admit(g, c(2)));
        assert!(poll!(held.as_mut()).is_pending(), "client 2 waits");
        let own = b.admit(g, c(1)).now_or_never();
        assert!(own.is_some(), "the holder's client passes");
        let o = b.admit(other, c(2)).now_or_never().expect("other shard");
        assert!(o.slow.is_none());
        let s = b
            .admit(same, c(2))
            .now_or_never()
            .expect("same shard, other gfid");
        assert_eq!(s.slow, Some(same), "counted per gfid on a closed shard");
        assert!(b.remove(g, owner(1)));
        assert!(!b.closed(g));
        let Poll::Ready(a) = poll!(held.as_mut()) else {
            panic!("released by the removal");
        };
        drop((a, own, o, s));
        assert!(b.shard(g).lock().inodes.is_empty(), "tidy");
        assert_eq!(b.by_name.lock().marks, 0);
    }

    #[tokio::test]
    async fn a_drain_waits_for_fast_and_slow_fops_in_flight() {
        let b = Barriers::default();
        let (g, _, same) = gfids(&b);
        let before = b.admit(g, c(2)).await; // fast, before the mark
        let other_gfid = b.admit(same, c(2)).await; // fast too: shard-wide count
        assert!(b.install(g, owner(1)));
        let own = b.admit(g, c(1)).await; // slow: the holder's own
        let mut d = pin!(b.drain(g, owner(1)));
        assert!(poll!(d.as_mut()).is_pending());
        drop(before);
        assert!(poll!(d.as_mut()).is_pending());
        drop(other_gfid);
        assert!(
            poll!(d.as_mut()).is_pending(),
            "the holder's fop still runs"
        );
        drop(own);
        assert_eq!(poll!(d.as_mut()), Poll::Ready(Ok(())));
    }

    #[tokio::test]
    async fn a_drain_waits_for_creates_by_name() {
        let b = Barriers::default();
        let (g, _, _) = gfids(&b);
        let create = b.admit_by_name().expect("open while no barrier");
        assert!(b.install(g, owner(1)));
        assert!(b.admit_by_name().is_none(), "closed while a barrier exists");
        let mut d = pin!(b.drain(g, owner(1)));
        assert!(poll!(d.as_mut()).is_pending());
        drop(create);
        assert_eq!(poll!(d.as_mut()), Poll::Ready(Ok(())));
        b.remove(g, owner(1));
        assert!(b.admit_by_name().is_some());
    }

    /// Writers on one file and on others of its shard against a barrier taken and dropped
    /// over and over, on several threads: while a barrier is granted no other client's
    /// admitted fop on its file is running.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_granted_barrier_never_overlaps_another_clients_fop() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize};

        let b = Arc::new(Barriers::default());
        let (g, other, same) = gfids(&b);
        let granted = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        // Writers that got through once (the barriers start when all have).
        let started = Arc::new(AtomicUsize::new(0));
        let mut writers = Vec::new();
        for (i, target) in [g, g, g, same, other].into_iter().enumerate() {
            let (b, granted, running, stop, started) = (
                b.clone(),
                granted.clone(),
                running.clone(),
                stop.clone(),
                started.clone(),
            );
            writers.push(tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let a = b.admit(target, c(10 + i as u64)).await;
                    if target == g {
                        assert!(!granted.load(Ordering::SeqCst), "admitted under a barrier");
                        running.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        assert!(!granted.load(Ordering::SeqCst), "ran into a barrier");
                        running.fetch_sub(1, Ordering::SeqCst);
                    } else {
                        tokio::task::yield_now().await;
                    }
                    drop(a);
                    if n == 0 {
                        started.fetch_add(1, Ordering::SeqCst);
                    }
                    n += 1;
                }
                n
            }));
        }
        while started.load(Ordering::SeqCst) < 5 {
            tokio::task::yield_now().await;
        }
        for _ in 0..2000 {
            assert!(b.install(g, owner(1)));
            tokio::time::timeout(std::time::Duration::from_secs(10), b.drain(g, owner(1)))
                .await
                .expect("a drain never finished")
                .expect("drain");
            granted.store(true, Ordering::SeqCst);
            assert_eq!(running.load(Ordering::SeqCst), 0);
            tokio::task::yield_now().await;
            assert_eq!(running.load(Ordering::SeqCst), 0);
            granted.store(false, Ordering::SeqCst);
            assert!(b.remove(g, owner(1)));
            tokio::task::yield_now().await;
        }
        stop.store(true, Ordering::SeqCst);
        for w in writers {
            w.await.expect("writer");
        }
        assert!(b.shard(g).lock().inodes.is_empty());
        assert_eq!(b.fast_of(g), 0);
        assert!(!b.closed(g));
    }

    #[tokio::test]
    async fn forget_client_removes_marks_and_fails_their_drain() {
        let b = Barriers::default();
        let (g, other, _) = gfids(&b);
        let inflight = b.admit(g, c(3)).await;
        assert!(b.install(g, owner(1)));
        assert!(b.install(other, owner(2)));
        let mut d = pin!(b.drain(g, owner(1)));
        assert!(poll!(d.as_mut()).is_pending());
        let mut w = pin!(b.admit(g, c(3)));
        assert!(poll!(w.as_mut()).is_pending());
        assert_eq!(b.forget_client(c(1)), 1);
        assert_eq!(poll!(d.as_mut()), Poll::Ready(Err(Errno::ENOTCONN)));
        assert!(poll!(w.as_mut()).is_ready());
        assert!(b.holds(other, owner(2)), "other clients' marks stay");
        assert_eq!(b.by_name.lock().marks, 1);
        drop(inflight);
    }
}
