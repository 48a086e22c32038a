//! The I/O side of the cache: the read path (revalidate, serve hits, fetch and coalesce
//! misses), the guard that brackets our own modifications, and what replies tell us.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared, join_all};
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Errno, Fd, Gfid, HostServices, Iatt, ReadReply, Subvol};

use crate::options::Policy;
use crate::pages::{Geometry, assemble};
use crate::table::{Change, Counters, Slot, Table};

/// One child read filling one page, awaited by every read that needs the page meanwhile.
pub(crate) type Fill = Shared<BoxFuture<'static, Result<Buf, Errno>>>;

/// The state of one io-cache instance.
pub(crate) struct Cache {
    child: Subvol,
    services: HostServices,
    table: Mutex<Table<Fill>>,
    policy: RwLock<Policy>,
}

impl Cache {
    pub(crate) fn new(
        child: Subvol,
        services: HostServices,
        geo: Geometry,
        policy: Policy,
    ) -> Cache {
        Cache {
            child,
            services,
            table: Mutex::new(Table::new(geo, policy.cache_size)),
            policy: RwLock::new(policy),
        }
    }

    /// The table. Never held across an await.
    fn table(&self) -> MutexGuard<'_, Table<Fill>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn policy(&self) -> Policy {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_policy(&self, p: Policy) {
        self.table().set_limit(p.cache_size);
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = p;
    }

    /// `readv` through the cache.
    pub(crate) async fn readv(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<ReadReply, Errno> {
        if size == 0 || !reads_through_cache(&fd) {
            return self.bypass(cx, fd, offset, size).await;
        }
        let policy = self.policy();
        let gfid = fd.gfid;
        let stale = self
            .table()
            .needs_validation(gfid, self.services.now(), policy.cache_timeout);
        if stale {
            self.table().counters.revalidations += 1;
            match self.child.fstat(cx, fd).await {
                Ok(a) => {
                    let a = Iatt { gfid, ..a };
                    self.table().observe(&a, self.services.now());
                }
                // Let the child explain what is wrong with this fd or file.
                _ => return self.bypass(cx, fd, offset, size).await,
            }
        }
        let plan = {
            let mut t = self.table();
            let geo = t.geometry();
            t.cacheable(gfid, &policy).then(|| {
                let mut slots: Vec<Slot<Fill>> = Vec::new();
                for index in geo.span(offset, u64::from(size)) {
                    let slot = t.page_or_fill(gfid, index, |generation, id| {
                        self.fill(cx, fd, geo, index, generation, id)
                    });
                    // A cached end-of-file page: nothing after it to fetch.
                    let eof = matches!(&slot, Slot::Hit(p) if !geo.is_full(p));
                    slots.push(slot);
                    if eof {
                        break;
                    }
                }
                (geo, slots)
            })
        };
        let Some((geo, slots)) = plan else {
            return self.bypass(cx, fd, offset, size).await;
        };
        let replies = join_all(slots.into_iter().map(|s| async move {
            match s {
                Slot::Hit(page) => Ok(page),
                Slot::Fill(fill) => fill.await,
            }
        }))
        .await;
        let mut pages = Vec::with_capacity(replies.len());
        for r in replies {
            let page = r?;
            let full = geo.is_full(&page);
            pages.push(page);
            if !full {
                break;
            }
        }
        // Served (at least partly) from memory: no attributes that all the pages agree with.
        Ok(ReadReply::data(assemble(
            geo,
            offset,
            u64::from(size),
            &pages,
        )))
    }

    async fn bypass(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        self.table().counters.bypassed += 1;
        let r = self.child.readv(cx, fd, offset, size).await?;
        self.observe_reply(fd.gfid, &r.attr);
        Ok(r)
    }

    /// Attributes carried by a readv/writev reply (`RNone` when a translator below answered
    /// without them): a changed mtime or size drops the file's pages, as on a stat reply.
    pub(crate) fn observe_reply(&self, gfid: Gfid, attr: &ROption<Iatt>) {
        if let ROption::RSome(a) = attr {
            self.observe(&Iatt { gfid, ..*a });
        }
    }

    /// A child read of page `index`, caching the page when it completes if generation `generation`
    /// is still current. Holds the cache weakly: a dropped graph does not wait for fills.
    fn fill(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        geo: Geometry,
        index: u64,
        generation: u64,
        id: u64,
    ) -> Fill {
        let cache: Weak<Cache> = Arc::downgrade(self);
        let child = self.child.clone();
        let cx = cx.clone();
        let size = u32::try_from(geo.page_size()).unwrap_or(u32::MAX);
        async move {
            let r = child.readv(&cx, fd, geo.start(index), size).await;
            match cache.upgrade() {
                Some(cache) => {
                    // Observed before the page is kept: a file changed behind our back loses
                    // its old pages (and bumps the generation, so this fill is not kept
                    // either when it raced with the change).
                    if let Ok(reply) = &r {
                        cache.observe_reply(fd.gfid, &reply.attr);
                    }
                    let r = r.map(|reply| reply.data);
                    cache.table().fill_done(fd.gfid, index, generation, id, &r);
                    r
                }
                None => r.map(|reply| reply.data),
            }
        }
        .boxed()
        .shared()
    }

    /// Brackets our own modification of `gfid`: pages it touches are dropped now and again
    /// when the guard drops (after the child replied, or if the fop is cancelled), each time
    /// under a new generation, so no read that overlapped the modification caches its data.
    pub(crate) fn modify(self: &Arc<Self>, gfid: Gfid, change: Change) -> ModifyGuard {
        self.table().invalidate(gfid, change);
        ModifyGuard {
            cache: Arc::clone(self),
            gfid,
            change,
        }
    }

    /// Another client changed `gfid`'s data or attributes (an upcall).
    pub(crate) fn changed_elsewhere(&self, gfid: Gfid) {
        self.table().changed_elsewhere(gfid);
    }

    /// Attributes seen in a reply (lookup, stat, fstat, readdirp, link...).
    pub(crate) fn observe(&self, a: &Iatt) {
        self.table().observe(a, self.services.now());
    }

    /// Attributes returned by our own setattr: adopted as the new reference.
    pub(crate) fn adopt(&self, a: &Iatt) {
        self.table().adopt(a, self.services.now());
    }

    /// `a` was seen under `name` in `parent`.
    pub(crate) fn named(&self, parent: Gfid, name: &str, a: &Iatt) {
        let priority = self
            .policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .priorities
            .of(name);
        self.table()
            .named(parent, name, a, priority, self.services.now());
    }

    pub(crate) fn unlinked(&self, parent: Gfid, name: &str) {
        self.table().unlinked(parent, name);
    }

    pub(crate) fn renamed(&self, old: (Gfid, &str), new: (Gfid, &str)) {
        self.table().renamed(old, new);
    }

    /// Counters and occupancy: (counters, bytes used, limit, pages, files).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let t = self.table();
        Snapshot {
            counters: t.counters,
            used: t.used(),
            limit: t.limit(),
            pages: t.pages(),
            files: t.files(),
            page_size: t.geometry().page_size(),
        }
    }
}

/// See [`Cache::modify`].
pub(crate) struct ModifyGuard {
    cache: Arc<Cache>,
    gfid: Gfid,
    change: Change,
}

impl Drop for ModifyGuard {
    fn drop(&mut self) {
        self.cache.table().invalidate(self.gfid, self.change);
    }
}

/// A copy of the counters and occupancy, for dumps and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub counters: Counters,
    pub used: u64,
    pub limit: u64,
    pub pages: usize,
    pub files: usize,
    pub page_size: u64,
}

/// Whether reads through `fd` may be served from and fill the cache: an opened fd with read
/// access and without O_DIRECT. Anonymous fds are checked by the child against the caller on
/// every call, so serving them from the cache would skip that check: they pass through.
fn reads_through_cache(fd: &Fd) -> bool {
    !fd.is_anonymous()
        && fd.flags & libc::O_ACCMODE != libc::O_WRONLY
        && fd.flags & libc::O_DIRECT == 0
}

/// What a write with per-write `flags` through `fd` touches.
pub(crate) fn write_change(fd: &Fd, flags: i32, offset: u64, len: u64) -> Change {
    if (fd.flags | flags) & libc::O_APPEND != 0 {
        // Lands at end of file, wherever that is now.
        Change::Whole
    } else {
        Change::Range { offset, len }
    }
}
