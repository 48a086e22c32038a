//! The I/O side of read-ahead: the read path (plan, prefetch in the background, answer from
//! pages or fall back to the child) and the guard that brackets modifications.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared, join_all};
use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Gfid, HostServices, ReadReply, Subvol};

use crate::fds::{Counters, Fds, Plan, Slot};
use crate::window::{Geometry, assemble};

/// One child read of one page, shared by the reads that need it.
pub(crate) type Fill = Shared<BoxFuture<'static, Result<Buf, Errno>>>;

/// The state of one read-ahead instance.
pub(crate) struct Ahead {
    child: Subvol,
    services: HostServices,
    fds: Mutex<Fds<Fill>>,
    page_count: AtomicU64,
}

impl Ahead {
    pub(crate) fn new(
        child: Subvol,
        services: HostServices,
        geo: Geometry,
        page_count: u64,
    ) -> Ahead {
        Ahead {
            child,
            services,
            fds: Mutex::new(Fds::new(geo)),
            page_count: AtomicU64::new(page_count),
        }
    }

    /// The fd table. Never held across an await.
    pub(crate) fn fds(&self) -> MutexGuard<'_, Fds<Fill>> {
        self.fds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_page_count(&self, n: u64) {
        self.page_count.store(n, Ordering::Relaxed);
    }

    /// `readv` with read-ahead.
    pub(crate) async fn readv(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<ReadReply, Errno> {
        if size == 0 || !reads_ahead(&fd) {
            self.fds().counters.direct += 1;
            return self.child.readv(cx, fd, offset, size).await;
        }
        let count = self.page_count.load(Ordering::Relaxed);
        let len = u64::from(size);
        let (geo, plan) = {
            let mut fds = self.fds();
            let geo = fds.geometry();
            let plan = fds.plan(&fd, offset, len, count, |index, generation, id| {
                self.fill(cx, fd, geo, index, generation, id)
            });
            (geo, plan)
        };
        let (slots, prefetch) = match plan {
            Plan::Direct => return self.direct(cx, fd, offset, size).await,
            Plan::Pages { slots, prefetch } => (slots, prefetch),
        };
        for fill in prefetch {
            self.services.spawn(async move {
                let _ = fill.await;
            });
        }
        let replies = join_all(slots.into_iter().map(|s| async move {
            match s {
                Slot::Ready(page) => (Ok(page), false),
                Slot::Pending { fill, fresh } => (fill.await, fresh),
            }
        }))
        .await;
        let mut pages = Vec::with_capacity(replies.len());
        // Whether the page that ended the reply was fetched by this read.
        let mut last_fresh = true;
        for (r, fresh) in replies {
            match r {
                Ok(page) => {
                    let full = page.len() as u64 >= geo.page_size();
                    pages.push(page);
                    last_fresh = fresh;
                    if !full {
                        break;
                    }
                }
                // This read's own child read failed: its error is the answer.
                Err(e) if fresh => return Err(e),
                // A prefetch failed: ask the child again below.
                Err(_) => {
                    last_fresh = false;
                    break;
                }
            }
        }
        let reply = assemble(geo, offset, len, &pages);
        if reply.len() as u64 == len || last_fresh {
            self.fds().read_done(fd.id, offset, len, reply.len() as u64);
            // Pages may come from several child reads: no one set of attributes is the truth.
            return Ok(ReadReply::data(reply));
        }
        // End of file (or an error) as seen by an earlier prefetch: it may be stale, and a
        // short read is an answer the child must give.
        self.fds().fallback(fd.id);
        self.direct(cx, fd, offset, size).await
    }

    async fn direct(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let r = self.child.readv(cx, fd, offset, size).await;
        if let Ok(b) = &r {
            let mut fds = self.fds();
            fds.read_done(fd.id, offset, u64::from(size), b.data.len() as u64);
            if let Some(a) = b.attr.as_ref().into_option() {
                fds.note_size(fd.id, None, a.size);
            }
        }
        r
    }

    /// A child read of page `index` for `fd`, kept when it completes if the fd's generation is
    /// still `generation`. Holds the state weakly, so a dropped graph does not wait for it.
    fn fill(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        geo: Geometry,
        index: u64,
        generation: u64,
        id: u64,
    ) -> Fill {
        let ahead: Weak<Ahead> = Arc::downgrade(self);
        let child = self.child.clone();
        let cx = cx.clone();
        let size = u32::try_from(geo.page_size()).unwrap_or(u32::MAX);
        async move {
            let (r, file_size) = match child.readv(&cx, fd, geo.start(index), size).await {
                Ok(ReadReply { data, attr }) => (Ok(data), attr.into_option().map(|a| a.size)),
                Err(e) => (Err(e), None),
            };
            if let Some(a) = ahead.upgrade() {
                let mut fds = a.fds();
                fds.fill_done(fd.id, index, generation, id, &r);
                if let Some(file_size) = file_size {
                    // No prefetch past the end: on small files those reads were as many
                    // round trips as the data itself.
                    fds.note_size(fd.id, Some(generation), file_size);
                }
            }
            r
        }
        .boxed()
        .shared()
    }

    /// Brackets a modification of `gfid`: every fd's pages of the file are dropped now and
    /// again when the guard drops, so a prefetch that overlapped the change is never kept.
    pub(crate) fn modify(self: &Arc<Self>, gfid: Gfid) -> ModifyGuard {
        self.fds().invalidate(gfid);
        ModifyGuard {
            ahead: Arc::clone(self),
            gfid,
        }
    }

    pub(crate) fn drop_pages(&self, fd: FdId) {
        self.fds().drop_pages(fd);
    }

    pub(crate) fn release(&self, fd: FdId) {
        self.fds().release(fd);
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let fds = self.fds();
        let (pages, bytes) = fds.memory();
        Snapshot {
            counters: fds.counters,
            fds: fds.len(),
            pages,
            bytes,
            page_size: fds.geometry().page_size(),
            page_count: self.page_count.load(Ordering::Relaxed),
        }
    }
}

/// See [`Ahead::modify`].
pub(crate) struct ModifyGuard {
    ahead: Arc<Ahead>,
    gfid: Gfid,
}

impl Drop for ModifyGuard {
    fn drop(&mut self) {
        self.ahead.fds().invalidate(self.gfid);
    }
}

/// Counters and memory, for dumps and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub counters: Counters,
    /// Fds with state.
    pub fds: usize,
    /// Ready pages held, and their bytes.
    pub pages: usize,
    pub bytes: u64,
    pub page_size: u64,
    pub page_count: u64,
}

/// Whether reads through `fd` get read-ahead: an opened fd with read access and without
/// O_DIRECT. Anonymous fds have no stream to detect (and are checked per caller by the child).
fn reads_ahead(fd: &Fd) -> bool {
    !fd.is_anonymous()
        && fd.flags & libc::O_ACCMODE != libc::O_WRONLY
        && fd.flags & libc::O_DIRECT == 0
}
