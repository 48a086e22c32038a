//! Upcalls: telling a client that another client changed what it looked at.
//!
//! Every request that succeeds records the calling connection's interest in the inodes it
//! names or that its reply describes (a lookup's parent and child, a stat's inode, an fd's
//! file, a listing's entries). Every request that changes something then tells each *other*
//! connection interested in the changed inode, through a queue and a task of that
//! connection's own, in batches ([`ServerMsg::Upcall`]). A connection told about an inode
//! stops being interested in it until it next looks at it: the client drops its cache, its
//! next access registers again, and a file rewritten in a loop costs one upcall per access,
//! not one per write.
//!
//! Advisory, by design: interest lapses after `upcall-timeout` (longer than any client-side
//! cache should trust itself), the table is bounded (`upcall-max-inodes`) and a queue that
//! overflows drops upcalls, so a client's caches keep their own timeouts as the bound on
//! staleness; upcalls shorten it, they do not replace it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use xlator_api::{ClientId, Errno, Gfid, Loc, SetAttr, Upcall};

use crate::wire::{self, FrameSender, ReplyBody, Request, ServerMsg, WriteHalf};

/// Upcalls one connection's queue holds; more are dropped (advisory).
const QUEUE: usize = 4096;
/// Most upcalls in one frame.
const BATCH: usize = 512;
/// Shards of the interest table (a power of two).
const SHARDS: usize = 16;
/// Most connections remembered as interested in one inode (the oldest is forgotten).
const MAX_WATCHERS: usize = 64;

/// Who looked at one inode, and when (milliseconds since the hub's epoch).
type Watchers = Vec<(ClientId, u64)>;

/// One server's table of interest and its connections' queues.
pub(super) struct Upcalls {
    /// Option `upcall`.
    enabled: AtomicBool,
    /// Option `upcall-timeout`, in milliseconds.
    timeout_ms: AtomicU64,
    /// Option `upcall-max-inodes`, per shard.
    shard_cap: AtomicUsize,
    epoch: Instant,
    shards: [Mutex<HashMap<Gfid, Watchers>>; SHARDS],
    outboxes: Mutex<HashMap<ClientId, mpsc::Sender<Upcall>>>,
    /// Upcalls dropped on a full queue, for the dump.
    dropped: AtomicU64,
    sent: AtomicU64,
}

/// What a request changes, worked out before it runs (the request is consumed by running it).
#[derive(Default)]
pub(super) struct Effects {
    /// Inodes the caller looked at.
    looked: Vec<Gfid>,
    /// What others must be told, if the request succeeds.
    changed: Vec<Upcall>,
}

impl Effects {
    /// Whether there is nothing to record or tell.
    pub(super) fn is_empty(&self) -> bool {
        self.looked.is_empty() && self.changed.is_empty()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Upcalls {
    pub(super) fn new(enabled: bool, timeout: Duration, max_inodes: u32) -> Upcalls {
        let u = Upcalls {
            enabled: AtomicBool::new(false),
            timeout_ms: AtomicU64::new(0),
            shard_cap: AtomicUsize::new(0),
            epoch: Instant::now(),
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            outboxes: Mutex::new(HashMap::new()),
            dropped: AtomicU64::new(0),
            sent: AtomicU64::new(0),
        };
        u.configure(enabled, timeout, max_inodes);
        u
    }

    /// Applies (changed) options.
    pub(super) fn configure(&self, enabled: bool, timeout: Duration, max_inodes: u32) {
        self.enabled.store(enabled, Ordering::Relaxed);
        self.timeout_ms
            .store(timeout.as_millis() as u64, Ordering::Relaxed);
        let per_shard = (max_inodes as usize).div_ceil(SHARDS).max(1);
        self.shard_cap.store(per_shard, Ordering::Relaxed);
        if !enabled {
            for s in &self.shards {
                lock(s).clear();
            }
        }
    }

    pub(super) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn shard(&self, g: &Gfid) -> &Mutex<HashMap<Gfid, Watchers>> {
        // The GFID is random: its first byte spreads inodes over the shards.
        &self.shards[usize::from(g.0[0]) & (SHARDS - 1)]
    }

    /// Starts telling connection `id` its upcalls over `tx`; they stop when it
    /// [`Upcalls::detach`]es or its socket fails.
    pub(super) fn attach(&self, id: ClientId, tx: Arc<FrameSender<WriteHalf>>, peer_max: usize) {
        let (q, mut rx) = mpsc::channel::<Upcall>(QUEUE);
        lock(&self.outboxes).insert(id, q);
        tokio::spawn(async move {
            let mut batch = Vec::new();
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                // One change seen twice in a batch is told once.
                batch.sort_by(|a, b| (a.gfid.0, &a.name, a.what).cmp(&(b.gfid.0, &b.name, b.what)));
                batch.dedup();
                let msg = ServerMsg::Upcall(std::mem::take(&mut batch));
                match wire::encode(&msg, Vec::new(), peer_max) {
                    Ok(f) => {
                        if tx.send(f).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::warn!("upcall batch not sendable: {e}"),
                }
            }
        });
    }

    /// Sends `up` to connection `to` alone (a lock-contention upcall from below, for the
    /// lock's holder), whether or not option `upcall` is on: it is about locks, not caches.
    pub(super) fn tell(&self, to: ClientId, mut up: Upcall) {
        // The brick's ids mean nothing to the client.
        up.client = 0;
        if let Some(q) = lock(&self.outboxes).get(&to) {
            if q.try_send(up).is_ok() {
                self.sent.fetch_add(1, Ordering::Relaxed);
            } else {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Stops connection `id`'s upcalls (it disconnected); its interest lapses with time.
    pub(super) fn detach(&self, id: ClientId) {
        lock(&self.outboxes).remove(&id);
    }

    /// Records that `from` looked at what `fx` and the reply name and, if the request
    /// succeeded (`result` is its answer), tells the others what `fx` changed. A failed
    /// request changed nothing; only one that found no such name counts as a look (the
    /// client caches that absence), so a caller refused access learns nothing later.
    pub(super) fn done(&self, from: ClientId, mut fx: Effects, result: Result<&ReplyBody, Errno>) {
        if !self.enabled() {
            return;
        }
        let reply = match result {
            Ok(r) => Some(r),
            Err(Errno::ENOENT) => {
                fx.changed.clear();
                None
            }
            Err(_) => return,
        };
        let now = self.now_ms();
        let timeout = self.timeout_ms.load(Ordering::Relaxed);
        // Tell first: the caller's own interest in a changed inode is no reason to tell it.
        let mut told: Vec<(ClientId, Upcall)> = Vec::new();
        // Who was told of each inode by this request: a rename changes two names of one
        // directory, and both go to each of its watchers.
        let mut watchers_of: Vec<(Gfid, Vec<ClientId>)> = Vec::new();
        for up in fx.changed {
            let known = watchers_of.iter().position(|(g, _)| *g == up.gfid);
            let i = known.unwrap_or_else(|| {
                let mut these = Vec::new();
                let mut shard = lock(self.shard(&up.gfid));
                if let Some(w) = shard.get_mut(&up.gfid) {
                    w.retain(|&(c, t)| {
                        let live = now.saturating_sub(t) <= timeout;
                        if live && c != from {
                            these.push(c);
                            // Told: forgotten until it looks again.
                            false
                        } else {
                            live
                        }
                    });
                    if w.is_empty() {
                        shard.remove(&up.gfid);
                    }
                }
                watchers_of.push((up.gfid, these));
                watchers_of.len() - 1
            });
            told.extend(watchers_of[i].1.iter().map(|&c| (c, up.clone())));
        }
        if !told.is_empty() {
            let outboxes = lock(&self.outboxes);
            for (c, up) in told {
                if let Some(q) = outboxes.get(&c) {
                    if q.try_send(up).is_ok() {
                        self.sent.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        let mut looked = fx.looked;
        reply_gfids(reply, &mut looked);
        for g in looked {
            if g == Gfid::NULL {
                continue;
            }
            self.record(from, g, now, timeout);
        }
    }

    fn record(&self, from: ClientId, g: Gfid, now: u64, timeout: u64) {
        let cap = self.shard_cap.load(Ordering::Relaxed);
        let mut shard = lock(self.shard(&g));
        if shard.len() >= cap && !shard.contains_key(&g) {
            // Full: forget what lapsed; if nothing did, this inode goes unwatched (its
            // watchers fall back on their caches' timeouts).
            shard.retain(|_, w| {
                w.retain(|&(_, t)| now.saturating_sub(t) <= timeout);
                !w.is_empty()
            });
            if shard.len() >= cap {
                return;
            }
        }
        let w = shard.entry(g).or_default();
        match w.iter_mut().find(|(c, _)| *c == from) {
            Some(e) => e.1 = now,
            None => {
                if w.len() >= MAX_WATCHERS {
                    w.remove(0);
                }
                w.push((from, now));
            }
        }
    }

    /// Counters for the server's dump: inodes watched, upcalls queued and dropped.
    pub(super) fn counters(&self) -> (usize, u64, u64) {
        let watched = self.shards.iter().map(|s| lock(s).len()).sum();
        (
            watched,
            self.sent.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }
}

/// The inodes a reply describes: an entry's, a listing's.
fn reply_gfids(reply: Option<&ReplyBody>, out: &mut Vec<Gfid>) {
    match reply {
        Some(
            ReplyBody::Lookup(e)
            | ReplyBody::Mknod(e)
            | ReplyBody::Mkdir(e)
            | ReplyBody::Symlink(e)
            | ReplyBody::Link(e)
            | ReplyBody::Create(e),
        ) => out.push(e.attr.gfid),
        Some(ReplyBody::Readdirp(list)) => out.extend(list.iter().map(|d| d.attr.gfid)),
        _ => {}
    }
}

/// What `req` looks at and what it changes.
pub(super) fn effects(req: &Request) -> Effects {
    use Upcall as U;
    let mut fx = Effects::default();
    let inode = |g: Gfid, what| U::inode(g, what);
    let attr_change = |a: &SetAttr| {
        if a.size.is_some() {
            U::DATA | U::ATTR
        } else {
            U::ATTR
        }
    };
    let entry = |l: &Loc| U::entry(l.parent, &l.name);
    match req {
        Request::Lookup { loc } => fx.looked.push(loc.parent),
        Request::Stat { gfid }
        | Request::Access { gfid, .. }
        | Request::Readlink { gfid }
        | Request::Getxattr { gfid, .. }
        | Request::Listxattr { gfid }
        | Request::Getxattrs { gfid, .. } => fx.looked.push(*gfid),
        Request::Fstat { fd }
        | Request::Opendir { fd }
        | Request::Readv { fd, .. }
        | Request::Readdirp { fd, .. }
        | Request::Fgetxattr { fd, .. }
        | Request::Seek { fd, .. } => fx.looked.push(fd.gfid),
        Request::Open { fd } => {
            fx.looked.push(fd.gfid);
            if fd.flags & libc::O_TRUNC != 0 {
                fx.changed.push(inode(fd.gfid, U::DATA | U::ATTR));
            }
        }
        Request::Setattr { gfid, attr } => fx.changed.push(inode(*gfid, attr_change(attr))),
        Request::Fsetattr { fd, attr } => fx.changed.push(inode(fd.gfid, attr_change(attr))),
        Request::Writev { fd, .. }
        | Request::Fallocate { fd, .. }
        | Request::Discard { fd, .. }
        | Request::Zerofill { fd, .. } => {
            fx.looked.push(fd.gfid);
            fx.changed.push(inode(fd.gfid, U::DATA | U::ATTR));
        }
        Request::Setxattr { gfid, .. }
        | Request::Removexattr { gfid, .. }
        | Request::Setxattrs { gfid, .. } => fx.changed.push(inode(*gfid, U::XATTR | U::ATTR)),
        Request::Fsetxattr { fd, .. } | Request::Fremovexattr { fd, .. } => {
            fx.changed.push(inode(fd.gfid, U::XATTR | U::ATTR))
        }
        Request::Mknod { loc, .. }
        | Request::Mkdir { loc, .. }
        | Request::Symlink { loc, .. }
        | Request::Create { loc, .. } => {
            fx.looked.push(loc.parent);
            fx.changed.push(entry(loc));
        }
        Request::Unlink { loc } | Request::Rmdir { loc } => fx.changed.push(entry(loc)),
        Request::Rename { old, new, .. } => {
            fx.changed.push(entry(old));
            fx.changed.push(entry(new));
        }
        Request::Link { gfid, new } => {
            fx.changed.push(entry(new));
            fx.changed.push(inode(*gfid, U::ATTR));
        }
        // Changelog counters (afr, dht layouts) are the cluster translators' own business;
        // durability, closing, locks and statfs change nothing another client caches.
        Request::Xattrop { .. }
        | Request::Fxattrop { .. }
        | Request::Rchecksum { .. }
        | Request::Flush { .. }
        | Request::Fsync { .. }
        | Request::Fsyncdir { .. }
        | Request::Release { .. }
        | Request::Releasedir { .. }
        | Request::Statfs { .. }
        | Request::Lk { .. }
        | Request::Inodelk { .. }
        | Request::Entrylk { .. }
        | Request::ForgetClient { .. } => {}
    }
    fx
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{Fd, FdId, Iatt};

    fn g(n: u8) -> Gfid {
        let mut b = [0u8; 16];
        b[0] = n;
        b[15] = 1;
        Gfid(b)
    }

    fn fd(gfid: Gfid) -> Fd {
        Fd {
            id: FdId(1),
            gfid,
            flags: libc::O_RDWR,
        }
    }

    fn queued(hub: &Upcalls, id: ClientId) -> mpsc::Receiver<Upcall> {
        let (q, rx) = mpsc::channel(QUEUE);
        lock(&hub.outboxes).insert(id, q);
        rx
    }

    /// `who`'s `req` succeeded (with a reply naming no inode).
    fn ok(hub: &Upcalls, who: ClientId, req: &Request) {
        hub.done(who, effects(req), Ok(&ReplyBody::Access(())));
    }

    fn hub() -> Upcalls {
        Upcalls::new(true, Duration::from_secs(60), 1000)
    }

    #[test]
    fn a_write_tells_the_readers_not_the_writer_and_only_once() {
        let hub = hub();
        let (a, b, c) = (ClientId(1), ClientId(2), ClientId(3));
        let (mut ra, mut rb, mut rc) = (queued(&hub, a), queued(&hub, b), queued(&hub, c));
        let x = g(7);
        ok(&hub, a, &Request::Fstat { fd: fd(x) });
        ok(&hub, b, &Request::Stat { gfid: x });
        let w = || Request::Writev {
            fd: fd(x),
            offset: 0,
            data: Default::default(),
            flags: 0,
        };
        hub.done(b, effects(&w()), Err(Errno::ENOSPC));
        assert!(ra.try_recv().is_err(), "a failed write is told to nobody");
        ok(&hub, b, &w());
        assert_eq!(
            ra.try_recv().expect("an upcall for A"),
            Upcall::inode(x, Upcall::DATA | Upcall::ATTR)
        );
        assert!(
            rb.try_recv().is_err(),
            "the writer is not told of its own write"
        );
        assert!(
            rc.try_recv().is_err(),
            "a client that never looked is not told"
        );
        // A was told and forgotten: the next write does not tell it again ...
        ok(&hub, b, &w());
        assert!(ra.try_recv().is_err());
        // ... until it looks again.
        ok(&hub, a, &Request::Stat { gfid: x });
        ok(&hub, b, &w());
        assert!(ra.try_recv().is_ok());
    }

    #[test]
    fn names_made_in_a_listed_directory_are_told_to_the_lister() {
        let hub = hub();
        let (a, b) = (ClientId(1), ClientId(2));
        let mut ra = queued(&hub, a);
        let dir = g(9);
        let child = Iatt {
            gfid: g(10),
            ..Default::default()
        };
        let listing = ReplyBody::Readdirp(
            vec![xlator_api::DirEntry {
                name: "f".into(),
                next_offset: 1,
                attr: child,
                xattrs: Default::default(),
            }]
            .into(),
        );
        hub.done(
            a,
            effects(&Request::Readdirp {
                fd: fd(dir),
                offset: 0,
                size: 4096,
            }),
            Ok(&listing),
        );
        let loc = Loc::new(dir, "new");
        ok(
            &hub,
            b,
            &Request::Mkdir {
                loc,
                mode: 0o755,
                umask: 0,
            },
        );
        assert_eq!(
            ra.try_recv().expect("an upcall for A"),
            Upcall::entry(dir, "new")
        );
        // The listed child was recorded too.
        let attr = SetAttr {
            perm: Some(0o600).into(),
            ..Default::default()
        };
        ok(&hub, b, &Request::Setattr { gfid: g(10), attr });
        assert_eq!(
            ra.try_recv().expect("an upcall for A"),
            Upcall::inode(g(10), Upcall::ATTR)
        );
    }

    #[test]
    fn a_rename_tells_both_names_to_the_directory_watcher() {
        let hub = hub();
        let (a, b) = (ClientId(1), ClientId(2));
        let mut ra = queued(&hub, a);
        let dir = g(3);
        ok(
            &hub,
            a,
            &Request::Lookup {
                loc: Loc::new(dir, "x"),
            },
        );
        let (old, new) = (Loc::new(dir, "x"), Loc::new(dir, "y"));
        ok(&hub, b, &Request::Rename { old, new, flags: 0 });
        assert_eq!(
            ra.try_recv().expect("an upcall for A"),
            Upcall::entry(dir, "x")
        );
        assert_eq!(
            ra.try_recv().expect("an upcall for A"),
            Upcall::entry(dir, "y")
        );
        assert!(ra.try_recv().is_err());
    }

    #[test]
    fn a_name_looked_up_in_vain_is_watched() {
        let hub = hub();
        let (a, b) = (ClientId(1), ClientId(2));
        let mut ra = queued(&hub, a);
        let dir = g(4);
        hub.done(
            a,
            effects(&Request::Lookup {
                loc: Loc::new(dir, "n"),
            }),
            Err(Errno::ENOENT),
        );
        // A lookup refused for lack of permission is no look: its caller is never told.
        let c = ClientId(3);
        let mut rc = queued(&hub, c);
        hub.done(
            c,
            effects(&Request::Lookup {
                loc: Loc::new(dir, "n"),
            }),
            Err(Errno::EACCES),
        );
        let loc = Loc::new(dir, "n");
        ok(
            &hub,
            b,
            &Request::Symlink {
                loc,
                target: "t".into(),
            },
        );
        assert_eq!(
            ra.try_recv().expect("an upcall for A"),
            Upcall::entry(dir, "n")
        );
        assert!(rc.try_recv().is_err());
    }

    #[test]
    fn interest_lapses_and_the_table_stays_bounded() {
        let hub = Upcalls::new(true, Duration::ZERO, 16);
        let (a, b) = (ClientId(1), ClientId(2));
        let mut ra = queued(&hub, a);
        ok(&hub, a, &Request::Stat { gfid: g(1) });
        std::thread::sleep(Duration::from_millis(5));
        ok(
            &hub,
            b,
            &Request::Setattr {
                gfid: g(1),
                attr: Default::default(),
            },
        );
        assert!(ra.try_recv().is_err(), "lapsed interest is not told");
        for n in 0..=255u8 {
            ok(&hub, a, &Request::Stat { gfid: g(n) });
        }
        assert!(hub.counters().0 <= 16, "{} watched", hub.counters().0);
    }

    #[test]
    fn off_records_and_tells_nothing() {
        let hub = Upcalls::new(false, Duration::from_secs(60), 1000);
        let mut ra = queued(&hub, ClientId(1));
        ok(&hub, ClientId(1), &Request::Stat { gfid: g(1) });
        ok(
            &hub,
            ClientId(2),
            &Request::Setattr {
                gfid: g(1),
                attr: Default::default(),
            },
        );
        assert!(ra.try_recv().is_err());
        assert_eq!(hub.counters().0, 0);
    }
}
