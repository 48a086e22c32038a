//! State shared by the fops: children, the geometry cache, open fds, counters, and the
//! fan-out helpers every concern module uses.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::future::join_all;
use xlator_api::abi_stable::std_types::RString;
use xlator_api::{
    Buf, ChildState, Ctx, Errno, Fd, FdId, Gfid, HostServices, Subvol, XattrReq, reopen_fd,
};

use crate::geometry::{self, GEOMETRY_XATTR};
use crate::units::Geometry;

/// Geometries kept before the cache is emptied (a few dozen bytes each; a geometry never
/// changes for a GFID, so an entry is never stale, only possibly unused).
const GEOMETRY_CACHE_MAX: usize = 1 << 16;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An open fd: its file's geometry (files) and which children hold it.
#[derive(Clone, Debug)]
struct FdState {
    geo: Option<Geometry>,
    dir: bool,
    held: Vec<bool>,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub readv: AtomicU64,
    pub writev: AtomicU64,
    pub child_reads: AtomicU64,
    pub child_writes: AtomicU64,
    pub short_reads: AtomicU64,
    pub appends: AtomicU64,
    pub refused: AtomicU64,
    pub reopened: AtomicU64,
}

pub(crate) struct Shared {
    pub name: String,
    pub children: Vec<Subvol>,
    pub up: ChildState,
    pub services: HostServices,
    /// Unit size given to new files (the `block-size` option).
    pub block: AtomicU64,
    /// Whether this translator last told its parents it is up.
    pub announced: AtomicBool,
    pub counters: Counters,
    geos: Mutex<HashMap<Gfid, Geometry>>,
    fds: Mutex<HashMap<FdId, FdState>>,
    /// Lock owners for O_APPEND's inode lock: a process-random base plus a counter, so two
    /// appends (from this or another client) never share an owner.
    owner_base: u64,
    owner_next: AtomicU64,
}

impl Shared {
    pub fn new(
        name: String,
        children: Vec<Subvol>,
        up: ChildState,
        services: HostServices,
        block: u64,
    ) -> Shared {
        let r = Gfid::random().0;
        let owner_base = u64::from_le_bytes([r[0], r[1], r[2], r[3], r[4], r[5], r[7], r[9]]);
        Shared {
            name,
            children,
            up,
            services,
            block: AtomicU64::new(block),
            announced: AtomicBool::new(false),
            counters: Counters::default(),
            geos: Mutex::new(HashMap::new()),
            fds: Mutex::new(HashMap::new()),
            owner_base,
            owner_next: AtomicU64::new(1),
        }
    }

    pub fn n(&self) -> usize {
        self.children.len()
    }

    /// The geometry a new file gets now.
    pub fn new_geometry(&self) -> Geometry {
        Geometry {
            count: u32::try_from(self.n()).unwrap_or(u32::MAX),
            block: self.block.load(Ordering::Relaxed),
        }
    }

    pub fn next_owner(&self) -> u64 {
        self.owner_base ^ self.owner_next.fetch_add(1, Ordering::Relaxed)
    }

    /// ENOTCONN unless every child is up: namespace and metadata changes go to every child,
    /// and one made while a child is unreachable would leave the children disagreeing.
    pub fn require_all_up(&self) -> Result<(), Errno> {
        if self.up.up_count() == self.n() {
            Ok(())
        } else {
            Err(Errno::ENOTCONN)
        }
    }

    /// `op(i)` on every child at once, replies in child order.
    pub async fn fan<R, F, Fut>(&self, op: F) -> Vec<Result<R, Errno>>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        join_all((0..self.n()).map(op)).await
    }

    pub fn log_refusal(
        &self,
        what: impl std::fmt::Display,
        child: usize,
        why: &geometry::Mismatch,
    ) -> Errno {
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        geometry::refuse(&self.services, &self.name, what, child, why)
    }

    pub fn remember(&self, gfid: Gfid, geo: Geometry) {
        let mut g = lock(&self.geos);
        if g.len() >= GEOMETRY_CACHE_MAX {
            g.clear();
        }
        g.insert(gfid, geo);
    }

    pub fn cached_geometries(&self) -> usize {
        lock(&self.geos).len()
    }

    /// The geometry of regular file `gfid`: from the cache (checked when it was filled), or
    /// read from every child and checked.
    pub async fn geometry_of(&self, cx: &Ctx, gfid: Gfid) -> Result<Geometry, Errno> {
        if let Some(g) = lock(&self.geos).get(&gfid) {
            return Ok(*g);
        }
        let names: Vec<RString> = vec![GEOMETRY_XATTR.into()];
        let replies = self
            .fan(|i| self.children[i].getxattrs(cx, gfid, names.clone().into()))
            .await;
        let xs = all_ok(replies)?;
        let values: Vec<Option<&Buf>> = xs
            .iter()
            .map(|x| xlator_api::find_xattr(x, GEOMETRY_XATTR))
            .collect();
        let geo = geometry::check(&values).map_err(|(i, why)| self.log_refusal(gfid, i, &why))?;
        self.remember(gfid, geo);
        Ok(geo)
    }

    /// The geometry of the file open as `fd`.
    pub async fn fd_geometry(&self, cx: &Ctx, fd: Fd) -> Result<Geometry, Errno> {
        let known = lock(&self.fds).get(&fd.id).and_then(|s| s.geo);
        match known {
            Some(g) if !fd.is_anonymous() => Ok(g),
            _ => self.geometry_of(cx, fd.gfid).await,
        }
    }

    /// Records `fd` as open on the children marked in `held`.
    pub fn opened(&self, fd: Fd, geo: Option<Geometry>, dir: bool, held: Vec<bool>) {
        if fd.is_anonymous() {
            return;
        }
        lock(&self.fds).insert(fd.id, FdState { geo, dir, held });
    }

    /// Forgets `fd`; the children that held it (every child for an fd never seen).
    pub fn closed(&self, fd: Fd) -> Vec<bool> {
        lock(&self.fds)
            .remove(&fd.id)
            .map_or_else(|| vec![true; self.n()], |s| s.held)
    }

    /// Which children hold `fd` (every child for an anonymous or unknown fd).
    pub fn holders(&self, fd: Fd) -> Vec<bool> {
        lock(&self.fds)
            .get(&fd.id)
            .map_or_else(|| vec![true; self.n()], |s| s.held.clone())
    }

    pub fn open_fds(&self) -> usize {
        lock(&self.fds).len()
    }

    /// Child `i`'s connection went: the fds opened there are gone with it.
    pub fn child_lost(&self, i: usize) {
        for s in lock(&self.fds).values_mut() {
            if let Some(h) = s.held.get_mut(i) {
                *h = false;
            }
        }
    }

    /// Makes sure child `i` holds `fd`, opening it there again if its connection was lost
    /// since. Anonymous and unknown fds pass as they are.
    pub async fn ensure(&self, i: usize, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let dir = {
            let fds = lock(&self.fds);
            match fds.get(&fd.id) {
                Some(s) if !fd.is_anonymous() && !s.held.get(i).copied().unwrap_or(true) => s.dir,
                _ => return Ok(()),
            }
        };
        reopen_fd(&self.children[i], cx, child_fd(fd), dir).await?;
        self.counters.reopened.fetch_add(1, Ordering::Relaxed);
        if let Some(s) = lock(&self.fds).get_mut(&fd.id)
            && let Some(h) = s.held.get_mut(i)
        {
            *h = true;
        }
        Ok(())
    }
}

/// The fd as children see it: without O_APPEND, since a child places every byte at the
/// offset this translator computed (an appending child would put it at its own end).
pub(crate) fn child_fd(fd: Fd) -> Fd {
    Fd {
        flags: fd.flags & !libc::O_APPEND,
        ..fd
    }
}

/// Every reply, or the first error in child order (ENOTCONN first: a child that cannot be
/// reached explains the others' answers better than anything they said).
pub(crate) fn all_ok<R>(replies: Vec<Result<R, Errno>>) -> Result<Vec<R>, Errno> {
    if replies
        .iter()
        .any(|r| r.as_ref().err() == Some(&Errno::ENOTCONN))
    {
        return Err(Errno::ENOTCONN);
    }
    replies.into_iter().collect()
}

/// `cx` asking for the geometry xattr too (and whatever the caller asked for).
pub(crate) fn with_geometry_req(cx: &Ctx) -> Ctx {
    let mut req = cx.ext::<XattrReq>().unwrap_or_default();
    if !req.wants(GEOMETRY_XATTR) {
        req.names.push(GEOMETRY_XATTR.into());
    }
    cx.to_builder().ext(&req).build()
}

/// Whether the caller itself asked for the geometry xattr (else it is left out of replies).
pub(crate) fn caller_wants_geometry(cx: &Ctx) -> bool {
    cx.ext::<XattrReq>()
        .is_some_and(|r| r.wants(GEOMETRY_XATTR))
}
