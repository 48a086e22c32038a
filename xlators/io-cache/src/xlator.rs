//! The translator: the fops io-cache changes, each delegating to [`crate::cache`].
//!
//! - reads: `readv` (served from pages, misses fetched page-aligned and coalesced);
//! - attributes seen: `lookup`, `stat`, `fstat`, `readdirp`, `link`, `create`, `setattr`;
//! - our own modifications: `writev`, `setattr`/`fsetattr` (size, mtime), `fallocate`,
//!   `discard`, `zerofill`, `open`/`create` with O_TRUNC;
//! - names going away: `unlink`, `rmdir`, `rename` over an existing file.
//!
//! The modifications are every fop with [`Fop::may_change_data`](xlator_api::Fop::may_change_data);
//! `tests/every_fop.rs` checks that over the whole fop table.

use std::sync::Arc;

use abi_stable::std_types::{ROption, RVec};
use xlator_api::abi_stable;
use xlator_api::{
    Buf, Ctx, DirEntry, Dump, Entry, Errno, Fd, Gfid, Iatt, Init, Loc, Opened, ReadReply, Removed,
    SetAttr, Subvol, TimeSet, Translator, Upcall, WriteReply,
};

use crate::cache::{Cache, Snapshot, write_change};
use crate::options::{IoCacheOptions, Policy};
use crate::pages::Geometry;
use crate::table::Change;

/// Translator type name.
pub const TYPE: &str = "performance/io-cache";

/// performance/io-cache.
pub struct IoCache {
    children: [Subvol; 1],
    cache: Arc<Cache>,
}

impl IoCache {
    /// Counters and occupancy (for in-process users; hosts use `dump`).
    pub fn snapshot(&self) -> Snapshot {
        self.cache.snapshot()
    }

    fn child(&self) -> &Subvol {
        &self.children[0]
    }
}

/// What a setattr changes about cached data: a size change rewrites data; an mtime change
/// makes the reply's mtime our own.
fn setattr_change(attr: &SetAttr) -> Option<Change> {
    matches!(attr.size, ROption::RSome(_)).then_some(Change::Whole)
}

fn sets_mtime(attr: &SetAttr) -> bool {
    attr.mtime != TimeSet::Omit || attr.size.is_some()
}

impl Translator for IoCache {
    const TYPE: &'static str = TYPE;
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Caches file data in pages (page-size) up to cache-size with \
        LRU eviction by priority; revalidates a file's pages with fstat after cache-timeout \
        and drops them when its mtime or size changes or when it is written through this graph.";

    type Options = IoCacheOptions;

    fn init(init: Init<IoCacheOptions>) -> Result<Self, String> {
        let name = init.name;
        let children = xlator_api::one_child(TYPE, &name, init.children)?;
        let policy = Policy::from_options(&init.options).map_err(|e| format!("{name}: {e}"))?;
        let geo = Geometry::new(init.options.page_size);
        let cache = Arc::new(Cache::new(children[0].clone(), init.services, geo, policy));
        Ok(IoCache { children, cache })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, options: IoCacheOptions) -> Result<(), String> {
        self.cache.set_policy(Policy::from_options(&options)?);
        Ok(())
    }

    fn dump(&self) -> Dump {
        crate::dump::render(&self.snapshot())
    }

    fn upcall(&self, _child: usize, up: &Upcall) -> bool {
        if up.says(Upcall::DATA) {
            self.cache.changed_elsewhere(up.gfid);
        }
        true
    }

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let e = self.child().lookup(cx, loc.clone()).await?;
        self.cache.named(loc.parent, &loc.name, &e.attr);
        Ok(e)
    }

    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        let a = self.child().stat(cx, gfid).await?;
        self.cache.observe(&a);
        Ok(a)
    }

    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        let a = self.child().fstat(cx, fd).await?;
        self.cache.observe(&a);
        Ok(a)
    }

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        let guard = setattr_change(&attr).map(|c| self.cache.modify(gfid, c));
        let r = self.child().setattr(cx, gfid, attr).await;
        drop(guard);
        self.seen_after_setattr(&attr, &r);
        r
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        let guard = setattr_change(&attr).map(|c| self.cache.modify(fd.gfid, c));
        let r = self.child().fsetattr(cx, fd, attr).await;
        drop(guard);
        self.seen_after_setattr(&attr, &r);
        r
    }

    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let r = self.child().unlink(cx, loc.clone()).await?;
        self.cache.unlinked(loc.parent, &loc.name);
        Ok(r)
    }

    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let r = self.child().rmdir(cx, loc.clone()).await?;
        self.cache.unlinked(loc.parent, &loc.name);
        Ok(r)
    }

    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.child()
            .rename(cx, old.clone(), new.clone(), flags)
            .await?;
        self.cache
            .renamed((old.parent, &old.name), (new.parent, &new.name));
        Ok(())
    }

    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        let e = self.child().link(cx, gfid, new.clone()).await?;
        self.cache.named(new.parent, &new.name, &e.attr);
        Ok(e)
    }

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let e = self
            .child()
            .create(cx, loc.clone(), fd, mode, umask)
            .await?;
        if fd.flags & libc::O_TRUNC != 0 {
            // An existing file was opened and emptied; its gfid is known only now.
            drop(self.cache.modify(e.attr.gfid, Change::Whole));
            self.cache.adopt(&e.attr);
        }
        self.cache.named(loc.parent, &loc.name, &e.attr);
        Ok(e)
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let _guard =
            (fd.flags & libc::O_TRUNC != 0).then(|| self.cache.modify(fd.gfid, Change::Whole));
        let opened = self.child().open(cx, fd).await?;
        if opened.backing.is_some() {
            // The file may now be read and written around this cache (FUSE passthrough):
            // keep none of its pages, so a later open through the cache reads what is there.
            drop(self.cache.modify(fd.gfid, Change::Whole));
        }
        Ok(opened)
    }

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        self.cache.readv(cx, fd, offset, size).await
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let change = write_change(&fd, flags, offset, data.len() as u64);
        let _guard = self.cache.modify(fd.gfid, change);
        let r = self.child().writev(cx, fd, offset, data, flags).await?;
        // Our own write's attributes are the new reference (like our own setattr's), so the
        // mtime it changed does not read as someone else's change later.
        if let ROption::RSome(a) = r.attr {
            self.cache.adopt(&Iatt { gfid: fd.gfid, ..a });
        }
        Ok(r)
    }

    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        let entries = self.child().readdirp(cx, fd, offset, size).await?;
        for e in entries.iter().filter(|e| e.name != "." && e.name != "..") {
            self.cache.named(fd.gfid, &e.name, &e.attr);
        }
        Ok(entries)
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        let _guard = self.cache.modify(fd.gfid, Change::Range { offset, len });
        self.child().fallocate(cx, fd, mode, offset, len).await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let _guard = self.cache.modify(fd.gfid, Change::Range { offset, len });
        self.child().discard(cx, fd, offset, len).await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let _guard = self.cache.modify(fd.gfid, Change::Range { offset, len });
        self.child().zerofill(cx, fd, offset, len).await
    }
}

impl IoCache {
    /// A setattr's reply: our own new mtime/size is adopted; otherwise compared as usual.
    fn seen_after_setattr(&self, attr: &SetAttr, r: &Result<Iatt, Errno>) {
        if let Ok(a) = r {
            if sets_mtime(attr) {
                self.cache.adopt(a);
            } else {
                self.cache.observe(a);
            }
        }
    }
}
