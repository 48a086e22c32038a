//! The storage/posix translator: every fop runs as one job on the host's blocking pool, under
//! the caller's credentials, and delegates to the concern modules.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{
    BackingWanted, Buf, ClientId, Ctx, DirEntry, Dump, Entry, EntrylkCmd, Errno, Fd, Flock, Gfid,
    HostServices, Iatt, Init, LkCmd, Loc, Opened, PipePayloadOk, Rchecksum, ReadReply, Removed,
    SeekWhat, SetAttr, Statfs, Subvol, Translator, WriteReply, Xattr, XattropOp, Xattrs,
};

use crate::brick::Brick;
use crate::creds::{self, Caller};
use crate::data::Cached;
use crate::entry::{EntryReq, want};
use crate::options::PosixOptions;

/// A brick on a local directory.
pub struct Posix {
    brick: Arc<Brick>,
    services: HostServices,
    /// Down once the disk failed its health check: every fop answers EIO.
    health: Arc<crate::health::Health>,
    _health_check: Option<crate::health::Checker>,
}

impl Posix {
    /// Runs `f` on the blocking pool as the caller of `cx`.
    fn run<R, F>(&self, cx: &Ctx, f: F) -> impl Future<Output = Result<R, Errno>> + Send + use<R, F>
    where
        R: Send + 'static,
        F: FnOnce(&Brick, &Caller) -> Result<R, Errno> + Send + 'static,
    {
        self.run_as(cx, None, f)
    }

    /// [`run`](Self::run) for a fop that creates an object: the thread's umask is the
    /// caller's `umask` argument for it, so the kernel applies it or, where the parent has a
    /// default ACL, the ACL instead (see [`creds`]). (Other fops leave the umask alone: two
    /// system calls saved on every read, write and stat.)
    fn run_creating<R, F>(
        &self,
        cx: &Ctx,
        umask: u32,
        f: F,
    ) -> impl Future<Output = Result<R, Errno>> + Send + use<R, F>
    where
        R: Send + 'static,
        F: FnOnce(&Brick, &Caller) -> Result<R, Errno> + Send + 'static,
    {
        self.run_as(cx, Some(umask), f)
    }

    fn run_as<R, F>(
        &self,
        cx: &Ctx,
        creating: Option<u32>,
        f: F,
    ) -> impl Future<Output = Result<R, Errno>> + Send + use<R, F>
    where
        R: Send + 'static,
        F: FnOnce(&Brick, &Caller) -> Result<R, Errno> + Send + 'static,
    {
        let brick = self.brick.clone();
        let mut caller = Caller::from_ctx(cx);
        let services = self.services;
        let health = self.health.clone();
        async move {
            if health.is_down() {
                return Err(Errno::EIO);
            }
            let job = services.spawn_blocking(move || {
                let _g = creds::enter(&mut caller, brick.root_mode, &brick.base_groups, creating)?;
                f(&brick, &caller)
            });
            health.or_down(job).await?
        }
    }
}

impl Drop for Posix {
    /// A clean stop: the handles of unlinked files are removed before the marker is left.
    fn drop(&mut self) {
        self.brick.reaper.stop(&self.brick.clean_marker());
    }
}

impl Translator for Posix {
    const TYPE: &'static str = "storage/posix";
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "A brick on a local directory: objects at their real paths, GFIDs \
        in xattrs, a .xlfs/gfid handle directory to open any object by GFID.";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    type Options = PosixOptions;

    fn init(init: Init<PosixOptions>) -> Result<Self, String> {
        let mut brick = Brick::mount(&init.options.directory, init.options.gfid_xattr)
            .map_err(|e| format!("{}: {e}", init.name))?;
        brick.background_unlink = init.options.background_unlink;
        brick.unlinked_grace = init.options.unlinked_grace;
        brick
            .backing_files
            .store(init.options.backing_files, Ordering::Relaxed);
        brick
            .allow_devices
            .store(init.options.allow_devices, Ordering::Relaxed);
        brick.direct.configure(
            init.options.direct_read_min,
            init.options.direct_read_share_window,
        );
        let brick = Arc::new(brick);
        crate::reaper::Reaper::start(&brick, brick.clean_marker());
        crate::index::start_scans(&brick);
        let health = crate::health::Health::new();
        let health_check = crate::health::start(
            &health,
            brick.h.brick().to_path_buf(),
            init.options.directory.clone(),
            init.options.health_check_interval,
            init.options.health_check_timeout,
        )
        .map_err(|e| format!("{}: {e}", init.name))?;
        Ok(Posix {
            brick,
            services: init.services,
            health,
            _health_check: health_check,
        })
    }

    fn children(&self) -> &[Subvol] {
        &[]
    }

    fn reconfigure(&self, options: PosixOptions) -> Result<(), String> {
        self.brick
            .direct
            .configure(options.direct_read_min, options.direct_read_share_window);
        self.brick
            .backing_files
            .store(options.backing_files, Ordering::Relaxed);
        self.brick
            .allow_devices
            .store(options.allow_devices, Ordering::Relaxed);
        Ok(())
    }

    fn dump(&self) -> Dump {
        Dump::new()
            .with("directory", self.brick.h.brick().display().to_string())
            .with(
                "gfid-xattr",
                self.brick.gx().name().to_string_lossy().into_owned(),
            )
            .with("open-fds", self.brick.fds.len())
            .with("heal-index-idle", self.brick.index.idle_count())
            .with(
                "health",
                self.health
                    .reason()
                    .map_or_else(|| "ok".to_owned(), |why| format!("down: {why}")),
            )
            .with("cluster", self.brick.stats.dump())
    }

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let want = want(cx);
        self.run(cx, move |b, _| b.lookup(&loc, want.as_ref()))
            .await
    }
    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        self.run(cx, move |b, _| b.stat(gfid)).await
    }
    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.run(cx, move |b, _| b.fstat(&fd)).await
    }
    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.run(cx, move |b, _| b.setattr(gfid, &attr)).await
    }
    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        self.run(cx, move |b, _| b.fsetattr(&fd, &attr)).await
    }
    async fn access(&self, cx: &Ctx, gfid: Gfid, mask: u32) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.access(gfid, mask)).await
    }
    async fn readlink(&self, cx: &Ctx, gfid: Gfid) -> Result<RString, Errno> {
        self.run(cx, move |b, _| b.readlink(gfid)).await
    }
    async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let r = EntryReq::from_ctx(cx);
        self.run_creating(cx, umask, move |b, c| {
            b.mknod(c, &r, &loc, mode, rdev, umask)
        })
        .await
    }
    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        let r = EntryReq::from_ctx(cx);
        self.run_creating(cx, umask, move |b, c| b.mkdir(c, &r, &loc, mode, umask))
            .await
    }
    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let cond = crate::entry::UnlinkIf {
            exact: cx.ext::<xlator_api::UnlinkExact>().map(|u| u.0),
            unless: cx.ext::<xlator_api::UnlinkUnlessMarked>(),
        };
        self.run(cx, move |b, _| b.unlink(&loc, &cond)).await
    }
    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.run(cx, move |b, _| b.rmdir(&loc)).await
    }
    async fn symlink(&self, cx: &Ctx, loc: Loc, target: RString) -> Result<Entry, Errno> {
        let r = EntryReq::from_ctx(cx);
        self.run_creating(cx, 0, move |b, c| b.symlink(c, &r, &loc, &target))
            .await
    }
    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.rename(&old, &new, flags)).await
    }
    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        let want = want(cx);
        self.run(cx, move |b, _| b.link(gfid, &new, want.as_ref()))
            .await
    }
    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let r = EntryReq::from_ctx(cx);
        self.run_creating(cx, umask, move |b, c| {
            b.create(c, &r, &loc, &fd, mode, umask)
        })
        .await
    }
    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let backing =
            cx.ext::<BackingWanted>().is_some() && self.brick.backing_files.load(Ordering::Relaxed);
        self.run(cx, move |b, _| b.open(&fd, backing)).await
    }
    async fn opendir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.opendir(&fd)).await
    }
    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        if self.health.is_down() {
            return Err(Errno::EIO);
        }
        // Cached data is read right here, on the polling thread: no handoff to the pool.
        // (Copying cached pages costs less than moving them through a pipe one by one: a
        // 1 MiB sequential read measured about half as fast spliced.)
        // Requests through a server carry their connection; a local graph is one client.
        let client = cx.ext::<ClientId>().map_or(0, |c| c.0);
        let pipe_ok = cx.ext::<PipePayloadOk>().is_some();
        let have = match self.brick.readv_cached(&fd, offset, size, client) {
            Cached::Reply(r) => return r,
            Cached::Cold if !pipe_ok => {
                // None of it cached and large (`direct-read-min`): around the page cache.
                return self
                    .run(cx, move |b, _| b.readv_direct(&fd, offset, size))
                    .await;
            }
            Cached::Cold => Vec::new(),
            Cached::Miss(have) => have,
        };
        if have.is_empty() && pipe_ok {
            // Not cached, and the caller sends the data on from a pipe (protocol/server
            // does, for reads of its `splice-read-min` and up): splice it there from the
            // disk, no copy.
            return self
                .run(cx, move |b, _| b.readv_spliced(&fd, offset, size))
                .await;
        }
        self.run(cx, move |b, _| b.readv(&fd, offset, size, have))
            .await
    }
    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.run(cx, move |b, _| b.writev(&fd, offset, &data, flags))
            .await
    }
    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.flush(&fd)).await
    }
    async fn fsync(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.fsync(&fd, datasync)).await
    }
    async fn fsyncdir(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.fsync(&fd, datasync)).await
    }
    async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        // Closing can block (final flush of a file on some file systems): off the async threads.
        self.run(cx, move |b, _| b.release(&fd)).await
    }
    async fn releasedir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.release(&fd)).await
    }
    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        let want = want(cx);
        self.run(cx, move |b, _| b.readdirp(&fd, offset, size, want.as_ref()))
            .await
    }
    async fn statfs(&self, cx: &Ctx, gfid: Gfid) -> Result<Statfs, Errno> {
        self.run(cx, move |b, _| b.statfs(gfid)).await
    }
    async fn setxattr(&self, cx: &Ctx, gfid: Gfid, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.run(cx, move |b, c| b.setxattr(c, None, gfid, &xattr, flags))
            .await
    }
    async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        self.run(cx, move |b, c| b.getxattr(c, None, gfid, &name))
            .await
    }
    async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        self.run(cx, move |b, c| b.listxattr(c, gfid)).await
    }
    async fn removexattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<(), Errno> {
        self.run(cx, move |b, c| b.removexattr(c, None, gfid, &name))
            .await
    }
    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.run(cx, move |b, c| {
            b.setxattr(c, Some(&fd), fd.gfid, &xattr, flags)
        })
        .await
    }
    async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        self.run(cx, move |b, c| b.getxattr(c, Some(&fd), fd.gfid, &name))
            .await
    }
    async fn fremovexattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<(), Errno> {
        self.run(cx, move |b, c| b.removexattr(c, Some(&fd), fd.gfid, &name))
            .await
    }
    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.fallocate(&fd, mode, offset, len))
            .await
    }
    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.discard(&fd, offset, len)).await
    }
    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.run(cx, move |b, _| b.zerofill(&fd, offset, len)).await
    }
    async fn seek(&self, cx: &Ctx, fd: Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        self.run(cx, move |b, _| b.seek(&fd, offset, what)).await
    }
    /// Byte-range locks belong to features/locks above.
    async fn lk(&self, _cx: &Ctx, _fd: Fd, _cmd: LkCmd, _lock: Flock) -> Result<Flock, Errno> {
        Err(Errno::ENOSYS)
    }
    async fn inodelk(
        &self,
        _cx: &Ctx,
        _d: RString,
        _g: Gfid,
        _c: LkCmd,
        _l: Flock,
    ) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    async fn entrylk(
        &self,
        _cx: &Ctx,
        _d: RString,
        _loc: Loc,
        _c: EntrylkCmd,
    ) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    async fn xattrop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.run(cx, move |b, c| b.xattrop(c, None, gfid, op, &xattrs))
            .await
    }
    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.run(cx, move |b, c| {
            b.xattrop(c, Some(&fd), fd.gfid, op, &xattrs)
        })
        .await
    }
    async fn rchecksum(&self, cx: &Ctx, fd: Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        self.run(cx, move |b, _| b.rchecksum(&fd, offset, len))
            .await
    }
    async fn getxattrs(&self, cx: &Ctx, gfid: Gfid, names: RVec<RString>) -> Result<Xattrs, Errno> {
        self.run(cx, move |b, c| b.getxattrs(c, gfid, &names)).await
    }
    async fn setxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        xattrs: Xattrs,
        flags: i32,
    ) -> Result<(), Errno> {
        self.run(cx, move |b, c| b.setxattrs(c, gfid, &xattrs, flags))
            .await
    }
    /// The brick keeps no per-client state that must go (locks live in features/locks).
    async fn forget_client(&self, _cx: &Ctx, _client: ClientId) -> Result<(), Errno> {
        Ok(())
    }
}
