//! The translator: which fops fan out, which are split by units, which go to child 0.
//!
//! | fops | handling |
//! |---|---|
//! | lookup | every child with the geometry xattr asked: checked, size merged ([`crate::attrs`]) |
//! | create, mknod, mkdir, symlink | every child, one GFID; files get their geometry at create ([`crate::namespace`]) |
//! | link, unlink, rmdir, rename | every child at once (all must be up) |
//! | stat, fstat | every child; a regular file's size from all of them ([`crate::meta`]) |
//! | setattr, fsetattr | every child; a size becomes each child's share |
//! | open, opendir, flush, fsync, fsyncdir, release, releasedir | every child holding the fd ([`crate::fds`]) |
//! | readdirp | child 0, each regular file completed from the others |
//! | readv, writev, rchecksum | split by units, one call per child touched, at once ([`crate::io`]) |
//! | writev with O_APPEND | the end of file under an inode lock on child 0 |
//! | fallocate, discard, zerofill | each child's part of the range |
//! | seek | every child from its first byte at the offset, nearest answer |
//! | setxattr, fsetxattr, removexattr, fremovexattr, setxattrs | every child (the geometry xattr refused) |
//! | getxattr, fgetxattr, listxattr, getxattrs | child 0 (the geometry xattr hidden) |
//! | access, readlink, statfs (summed), lk, inodelk, entrylk, xattrop, fxattrop | child 0 (statfs: every child) |
//! | forget_client | every child |

use std::sync::Arc;
use std::sync::atomic::Ordering;

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{
    Buf, ClientId, Ctx, DirEntry, Dump, Entry, EntrylkCmd, Errno, Event, EventKind, Fd, Flock,
    Gfid, Iatt, Init, LkCmd, Loc, Opened, Rchecksum, ReadReply, Removed, SeekWhat, SetAttr, Statfs,
    Subvol, Translator, WriteReply, Xattr, XattropOp, Xattrs,
};

use crate::meta::{refuse_geometry, refuse_geometry_in};
use crate::namespace::first_of;
use crate::options::StripeOptions;
use crate::shared::{Shared, child_fd};

/// cluster/stripe.
pub struct Stripe {
    sh: Arc<Shared>,
}

impl Translator for Stripe {
    const TYPE: &'static str = "cluster/stripe";
    const DOC: &'static str = "Striping: each file is cut into block-size units placed round \
        robin over the children (coalesced: each child stores its units contiguously); reads \
        and writes spanning units go to the children at once; the geometry is recorded on \
        every copy and checked; directories exist on every child with one GFID.";
    const MIN_CHILDREN: u32 = 1;
    const MAX_CHILDREN: u32 = 256;
    const ANNOUNCES_CHILD_UP: bool = true;
    type Options = StripeOptions;

    fn init(init: Init<StripeOptions>) -> Result<Self, String> {
        let sh = Shared::new(
            init.name,
            init.children,
            init.child_state,
            init.services,
            init.options.block_size,
        );
        Ok(Stripe { sh: Arc::new(sh) })
    }

    fn children(&self) -> &[Subvol] {
        &self.sh.children
    }

    fn reconfigure(&self, o: StripeOptions) -> Result<(), String> {
        self.sh.block.store(o.block_size, Ordering::Relaxed);
        Ok(())
    }

    /// Up once every child is up (a file needs all of them), down when one goes.
    fn notify(&self, event: Event) {
        if event.kind == EventKind::ChildDown {
            self.sh.child_lost(event.child as usize);
        }
        let all = self.sh.up.up_count() == self.sh.n();
        if all != self.sh.announced.swap(all, Ordering::AcqRel) {
            let kind = if all {
                EventKind::ChildUp
            } else {
                EventKind::ChildDown
            };
            self.sh.services.notify_parents(kind);
        }
    }

    fn dump(&self) -> Dump {
        let c = &self.sh.counters;
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        Dump::new()
            .with("stripe-count", self.sh.n() as u64)
            .with("block-size", self.sh.block.load(Ordering::Relaxed))
            .with("children-up", self.sh.up.up_count() as u64)
            .with("open-fds", self.sh.open_fds() as u64)
            .with("cached-geometries", self.sh.cached_geometries() as u64)
            .with(
                "counters",
                Dump::counters(&[
                    ("readv", n(&c.readv)),
                    ("writev", n(&c.writev)),
                    ("child-reads", n(&c.child_reads)),
                    ("child-writes", n(&c.child_writes)),
                    ("short-reads", n(&c.short_reads)),
                    ("appends", n(&c.appends)),
                    ("geometry-refused", n(&c.refused)),
                    ("reopened", n(&c.reopened)),
                ]),
            )
    }

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        self.sh.lookup(cx, loc).await
    }

    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        self.sh.stat(cx, gfid).await
    }

    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.sh.fstat(cx, fd).await
    }

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.sh.setattr(cx, gfid, attr).await
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        self.sh.fsetattr(cx, fd, attr).await
    }

    async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        self.sh.mknod(cx, loc, mode, rdev, umask).await
    }

    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        self.sh.mkdir(cx, loc, mode, umask).await
    }

    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.sh.unlink(cx, loc).await
    }

    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.sh.rmdir(cx, loc).await
    }

    async fn symlink(&self, cx: &Ctx, loc: Loc, target: RString) -> Result<Entry, Errno> {
        self.sh.symlink(cx, loc, target).await
    }

    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.sh.rename(cx, old, new, flags).await
    }

    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        self.sh.link(cx, gfid, new).await
    }

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        self.sh.create(cx, loc, fd, mode, umask).await
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        self.sh.open(cx, fd).await
    }

    async fn opendir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.sh.opendir(cx, fd).await
    }

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        self.sh
            .read(cx, fd, offset, size)
            .await
            .map(ReadReply::data)
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.sh.write(cx, fd, offset, data, flags).await
    }

    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let sh = &self.sh;
        sh.on_holders(cx, fd, |i, fd| sh.children[i].flush(cx, fd))
            .await
    }

    async fn fsync(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        let sh = &self.sh;
        sh.on_holders(cx, fd, |i, fd| sh.children[i].fsync(cx, fd, datasync))
            .await
    }

    async fn fsyncdir(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        let sh = &self.sh;
        sh.on_holders(cx, fd, |i, fd| sh.children[i].fsyncdir(cx, fd, datasync))
            .await
    }

    async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.sh.release(cx, fd, false).await
    }

    async fn releasedir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.sh.release(cx, fd, true).await
    }

    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        self.sh.readdirp(cx, fd, offset, size).await
    }

    async fn statfs(&self, cx: &Ctx, gfid: Gfid) -> Result<Statfs, Errno> {
        self.sh.statfs(cx, gfid).await
    }

    async fn setxattr(&self, cx: &Ctx, gfid: Gfid, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        refuse_geometry(&xattr.name)?;
        let sh = &self.sh;
        sh.set_everywhere(|i| sh.children[i].setxattr(cx, gfid, xattr.clone(), flags))
            .await
    }

    async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        self.sh.getxattr(cx, gfid, name).await
    }

    async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        self.sh.listxattr(cx, gfid).await
    }

    async fn removexattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<(), Errno> {
        refuse_geometry(&name)?;
        let sh = &self.sh;
        sh.set_everywhere(|i| sh.children[i].removexattr(cx, gfid, name.clone()))
            .await
    }

    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        refuse_geometry(&xattr.name)?;
        let sh = &self.sh;
        sh.set_everywhere(|i| {
            let xattr = xattr.clone();
            async move {
                sh.ensure(i, cx, fd).await?;
                sh.children[i]
                    .fsetxattr(cx, child_fd(fd), xattr, flags)
                    .await
            }
        })
        .await
    }

    async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        self.sh.fgetxattr(cx, fd, name).await
    }

    async fn fremovexattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<(), Errno> {
        refuse_geometry(&name)?;
        let sh = &self.sh;
        sh.set_everywhere(|i| {
            let name = name.clone();
            async move {
                sh.ensure(i, cx, fd).await?;
                sh.children[i].fremovexattr(cx, child_fd(fd), name).await
            }
        })
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
        let sh = &self.sh;
        sh.ranges(cx, fd, offset, len, |i, fd, off, len| {
            sh.children[i].fallocate(cx, fd, mode, off, len)
        })
        .await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let sh = &self.sh;
        sh.ranges(cx, fd, offset, len, |i, fd, off, len| {
            sh.children[i].discard(cx, fd, off, len)
        })
        .await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let sh = &self.sh;
        sh.ranges(cx, fd, offset, len, |i, fd, off, len| {
            sh.children[i].zerofill(cx, fd, off, len)
        })
        .await
    }

    async fn seek(&self, cx: &Ctx, fd: Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        self.sh.seek(cx, fd, offset, what).await
    }

    async fn lk(&self, cx: &Ctx, fd: Fd, cmd: LkCmd, lock: Flock) -> Result<Flock, Errno> {
        self.sh.ensure(0, cx, fd).await?;
        self.sh.children[0].lk(cx, child_fd(fd), cmd, lock).await
    }

    async fn inodelk(
        &self,
        cx: &Ctx,
        domain: RString,
        gfid: Gfid,
        cmd: LkCmd,
        lock: Flock,
    ) -> Result<(), Errno> {
        self.sh.children[0]
            .inodelk(cx, domain, gfid, cmd, lock)
            .await
    }

    async fn entrylk(
        &self,
        cx: &Ctx,
        domain: RString,
        loc: Loc,
        cmd: EntrylkCmd,
    ) -> Result<(), Errno> {
        self.sh.children[0].entrylk(cx, domain, loc, cmd).await
    }

    async fn xattrop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        refuse_geometry_in(&xattrs)?;
        self.sh.children[0].xattrop(cx, gfid, op, xattrs).await
    }

    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        refuse_geometry_in(&xattrs)?;
        self.sh.ensure(0, cx, fd).await?;
        self.sh.children[0]
            .fxattrop(cx, child_fd(fd), op, xattrs)
            .await
    }

    async fn rchecksum(&self, cx: &Ctx, fd: Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        self.sh.checksum(cx, fd, offset, len).await
    }

    async fn getxattrs(&self, cx: &Ctx, gfid: Gfid, names: RVec<RString>) -> Result<Xattrs, Errno> {
        self.sh.getxattrs(cx, gfid, names).await
    }

    async fn setxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        xattrs: Xattrs,
        flags: i32,
    ) -> Result<(), Errno> {
        refuse_geometry_in(&xattrs)?;
        let sh = &self.sh;
        sh.set_everywhere(|i| sh.children[i].setxattrs(cx, gfid, xattrs.clone(), flags))
            .await
    }

    async fn forget_client(&self, cx: &Ctx, client: ClientId) -> Result<(), Errno> {
        let sh = &self.sh;
        first_of(sh.fan(|i| sh.children[i].forget_client(cx, client)).await).map(drop)
    }
}
