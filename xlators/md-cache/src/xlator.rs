//! The performance/md-cache translator: see the crate docs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{
    Buf, Ctx, DirEntry, Dump, Entry, Errno, Fd, Gfid, HostServices, Iatt, Init, Loc, Opened,
    Removed, SetAttr, Subvol, Translator, Upcall, WriteReply, Xattr, XattropOp, Xattrs,
};

use crate::options::MdCacheOptions;
use crate::table::Table;

pub const TYPE: &str = "performance/md-cache";

struct State {
    table: Mutex<Table>,
    services: HostServices,
    /// `md-cache-timeout`, `negative-timeout` in milliseconds.
    ttl_ms: AtomicU64,
    negative_ms: AtomicU64,
}

impl State {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Every table update is a handful of map operations that leave it consistent.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
    }

    fn negative_ttl(&self) -> Duration {
        Duration::from_millis(self.negative_ms.load(Ordering::Relaxed))
    }

    fn apply(&self, o: &MdCacheOptions) {
        self.ttl_ms
            .store(o.md_cache_timeout.as_millis() as u64, Ordering::Relaxed);
        self.negative_ms
            .store(o.negative_timeout.as_millis() as u64, Ordering::Relaxed);
        self.table().set_max(o.max_entries as usize);
    }
}

/// A change going through: its inodes (and names) are touched when it starts and again
/// when it ends, also if the fop is cancelled.
struct Changing<'a> {
    state: &'a State,
    inodes: Vec<Gfid>,
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        let mut t = self.state.table();
        for g in &self.inodes {
            t.end_change(*g);
        }
    }
}

pub struct MdCache {
    children: [Subvol; 1],
    state: Arc<State>,
}

impl MdCache {
    fn child(&self) -> &Subvol {
        &self.children[0]
    }

    fn now(&self) -> Duration {
        self.state.services.now()
    }

    /// Brackets a change of `inodes` and of the names `names` (their directories are among
    /// `inodes` or named here).
    fn changing(&self, inodes: &[Gfid], names: &[&Loc]) -> Changing<'_> {
        let mut all: Vec<Gfid> = inodes.to_vec();
        let mut t = self.state.table();
        for l in names {
            // The inode the name gave, too: its link count and ctime change with it.
            all.extend(t.named(l.parent, &l.name));
            t.touch_name(l.parent, &l.name);
            all.push(l.parent);
        }
        all.sort_unstable_by_key(|g| g.0);
        all.dedup();
        for g in &all {
            t.begin_change(*g);
        }
        Changing {
            state: &self.state,
            inodes: all,
        }
    }

    /// A stat-like fop: answered from the cache when it can be, else sent and its reply
    /// cached.
    async fn attr_of<F>(&self, gfid: Gfid, send: F) -> Result<Iatt, Errno>
    where
        F: std::future::Future<Output = Result<Iatt, Errno>>,
    {
        let ttl = self.state.ttl();
        let stamp = {
            let mut t = self.state.table();
            if !ttl.is_zero()
                && let Some(a) = t.attr(&gfid, ttl, self.now())
            {
                return Ok(a);
            }
            t.stamp()
        };
        let a = send.await?;
        if !ttl.is_zero() {
            self.state.table().cache_attr(&a, stamp, self.now());
        }
        Ok(a)
    }
}

impl Translator for MdCache {
    const TYPE: &'static str = TYPE;
    const DOC: &'static str = "Caches inode attributes (from lookups, stats and listings) for \
        md-cache-timeout and names found absent for negative-timeout, answering stat, fstat \
        and repeated failed lookups without the child; every change through this graph and \
        every upcall from the bricks (another client's change) drops what it touches.";

    type Options = MdCacheOptions;

    fn init(init: Init<MdCacheOptions>) -> Result<Self, String> {
        let name = init.name;
        let children = xlator_api::one_child(TYPE, &name, init.children)?;
        let state = Arc::new(State {
            table: Mutex::new(Table::new(init.options.max_entries as usize)),
            services: init.services,
            ttl_ms: AtomicU64::new(0),
            negative_ms: AtomicU64::new(0),
        });
        state.apply(&init.options);
        Ok(MdCache { children, state })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, options: MdCacheOptions) -> Result<(), String> {
        self.state.apply(&options);
        Ok(())
    }

    fn dump(&self) -> Dump {
        let t = self.state.table();
        let c = t.counters;
        let (inodes, absent) = t.sizes();
        Dump::counters(&[
            ("attr_hits", c.attr_hits),
            ("attr_misses", c.attr_misses),
            ("absent_hits", c.absent_hits),
            ("invalidations", c.invalidations),
            ("upcalls", c.upcalls),
            ("inodes_cached", inodes as u64),
            ("absent_names_cached", absent as u64),
        ])
    }

    fn upcall(&self, _child: usize, up: &Upcall) -> bool {
        let mut t = self.state.table();
        t.counters.upcalls += 1;
        if up.says(Upcall::ENTRY) {
            t.touch_name(up.gfid, &up.name);
        } else {
            t.touch(up.gfid);
        }
        true
    }

    // ---- answered from the cache ----

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let neg = self.state.negative_ttl();
        let stamp = {
            let mut t = self.state.table();
            if !neg.is_zero() && t.is_absent(&loc.parent, &loc.name, neg, self.now()) {
                return Err(Errno::ENOENT);
            }
            t.stamp()
        };
        let r = self.child().lookup(cx, loc.clone()).await;
        let now = self.now();
        let mut t = self.state.table();
        match &r {
            Ok(e) if !self.state.ttl().is_zero() => {
                t.cache_entry(loc.parent, &loc.name, &e.attr, stamp, now)
            }
            Err(Errno::ENOENT) if !neg.is_zero() => {
                t.cache_absent(loc.parent, &loc.name, stamp, now)
            }
            _ => {}
        }
        r
    }

    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        self.attr_of(gfid, self.child().stat(cx, gfid)).await
    }

    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.attr_of(fd.gfid, self.child().fstat(cx, fd)).await
    }

    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        let stamp = self.state.table().stamp();
        let entries = self.child().readdirp(cx, fd, offset, size).await?;
        if !self.state.ttl().is_zero() {
            let now = self.now();
            let mut t = self.state.table();
            for e in entries.iter().filter(|e| e.name != "." && e.name != "..") {
                t.cache_entry(fd.gfid, &e.name, &e.attr, stamp, now);
            }
        }
        Ok(entries)
    }

    // ---- changes: what they touch is dropped before and after ----

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        let _c = self.changing(&[gfid], &[]);
        self.child().setattr(cx, gfid, attr).await
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().fsetattr(cx, fd, attr).await
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().writev(cx, fd, offset, data, flags).await
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().fallocate(cx, fd, mode, offset, len).await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().discard(cx, fd, offset, len).await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().zerofill(cx, fd, offset, len).await
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        if fd.flags & libc::O_TRUNC == 0 {
            // Close-to-open: an open must see what another client wrote before it closed,
            // whether or not that client's upcall has arrived yet, so it forgets the
            // attributes and the stats after it ask the child.
            self.state.table().touch(fd.gfid);
            return self.child().open(cx, fd).await;
        }
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().open(cx, fd).await
    }

    async fn setxattr(&self, cx: &Ctx, gfid: Gfid, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        let _c = self.changing(&[gfid], &[]);
        self.child().setxattr(cx, gfid, xattr, flags).await
    }

    async fn setxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        xattrs: Xattrs,
        flags: i32,
    ) -> Result<(), Errno> {
        let _c = self.changing(&[gfid], &[]);
        self.child().setxattrs(cx, gfid, xattrs, flags).await
    }

    async fn removexattr(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        name: xlator_api::abi_stable::std_types::RString,
    ) -> Result<(), Errno> {
        let _c = self.changing(&[gfid], &[]);
        self.child().removexattr(cx, gfid, name).await
    }

    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().fsetxattr(cx, fd, xattr, flags).await
    }

    async fn fremovexattr(
        &self,
        cx: &Ctx,
        fd: Fd,
        name: xlator_api::abi_stable::std_types::RString,
    ) -> Result<(), Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().fremovexattr(cx, fd, name).await
    }

    async fn xattrop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        let _c = self.changing(&[gfid], &[]);
        self.child().xattrop(cx, gfid, op, xattrs).await
    }

    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        let _c = self.changing(&[fd.gfid], &[]);
        self.child().fxattrop(cx, fd, op, xattrs).await
    }

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let _c = self.changing(&[], &[&loc]);
        self.child().create(cx, loc, fd, mode, umask).await
    }

    async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let _c = self.changing(&[], &[&loc]);
        self.child().mknod(cx, loc, mode, rdev, umask).await
    }

    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        let _c = self.changing(&[], &[&loc]);
        self.child().mkdir(cx, loc, mode, umask).await
    }

    async fn symlink(
        &self,
        cx: &Ctx,
        loc: Loc,
        target: xlator_api::abi_stable::std_types::RString,
    ) -> Result<Entry, Errno> {
        let _c = self.changing(&[], &[&loc]);
        self.child().symlink(cx, loc, target).await
    }

    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        let _c = self.changing(&[gfid], &[&new]);
        self.child().link(cx, gfid, new).await
    }

    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let _c = self.changing(&[], &[&loc]);
        self.child().unlink(cx, loc).await
    }

    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let _c = self.changing(&[], &[&loc]);
        self.child().rmdir(cx, loc).await
    }

    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        let _c = self.changing(&[], &[&old, &new]);
        self.child().rename(cx, old, new, flags).await
    }
}
