//! The translator: where each fop goes.
//!
//! | fops | handling |
//! |---|---|
//! | lookup | the hashed child; directories on every child (heal); fallback everywhere once ([`crate::lookup`]) |
//! | create, mknod, symlink | the hashed child (or, by `min-free-disk`, another with a link file) ([`crate::entry`]) |
//! | mkdir, rmdir, rename of a directory | every child, child 0 first (rmdir: last) |
//! | link, unlink, rename of a file | the file's child plus link files on hashed children |
//! | readdirp | the children in turn, link files and non-first directory copies hidden ([`crate::dir`]) |
//! | opendir, releasedir, fsyncdir | every child holding the directory fd |
//! | stat, setattr, setxattr, removexattr, setxattrs | a file's child; a directory's every child (stat merged) ([`crate::meta`]) |
//! | access, readlink, getxattr, listxattr, getxattrs, xattrop, inodelk | a file's child; a directory's child 0 |
//! | open, release, readv, writev, flush, fsync, fstat, fsetattr, f*xattr, fallocate, discard, zerofill, seek, lk, fxattrop, rchecksum | the fd's child |
//! | entrylk | child 0 (every client locks a name in the same place) |
//! | statfs | every child, summed |
//! | forget_client | every child |

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{
    Buf, ClientId, Ctx, DirEntry, Dump, Entry, EntrylkCmd, Errno, Event, EventKind, Fd, Flock,
    Gfid, Iatt, Init, LkCmd, Loc, Opened, Rchecksum, ReadReply, Removed, SeekWhat, SetAttr, Statfs,
    Subvol, Translator, WriteReply, Xattr, XattropOp, Xattrs,
};

use crate::migrate::nameless;
use crate::options::{DhtOptions, MinFree};
use crate::shared::{Config, Shared, first_error, refuse_own};

/// How a build spells the type: `cluster/distribute`, or its alias `cluster/dht`.
pub trait Spelling: Send + Sync + 'static {
    const TYPE: &'static str;
}

/// `cluster/distribute`.
pub struct Primary;
impl Spelling for Primary {
    const TYPE: &'static str = "cluster/distribute";
}

/// `cluster/dht`, GlusterFS's other name for it.
pub struct DhtAlias;
impl Spelling for DhtAlias {
    const TYPE: &'static str = "cluster/dht";
}

/// cluster/distribute, generic only over the name it is registered under.
pub struct DistributeAs<S: Spelling> {
    sh: Arc<Shared>,
    _spelling: PhantomData<S>,
}

pub type Distribute = DistributeAs<Primary>;
pub type Dht = DistributeAs<DhtAlias>;

fn config(o: &DhtOptions) -> Result<Config, String> {
    Ok(Config {
        min_free: MinFree::parse(&o.min_free_disk)?,
        statfs_interval: o.statfs_interval,
        lookup_unhashed: o.lookup_unhashed,
        decommissioned: o
            .decommissioned
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

fn xattrs_refused(xs: &Xattrs) -> Result<(), Errno> {
    xs.iter().try_for_each(|x| refuse_own(&x.name))
}

impl<S: Spelling> DistributeAs<S> {
    async fn fd_op<R, F, Fut>(&self, cx: &Ctx, fd: Fd, op: F) -> Result<R, Errno>
    where
        F: FnOnce(&Subvol) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        let c = self.sh.fd_child(cx, fd).await?;
        op(&self.sh.children[c]).await
    }

    async fn read_op<R, F, Fut>(&self, cx: &Ctx, gfid: Gfid, op: F) -> Result<R, Errno>
    where
        F: Fn(&Subvol) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        self.sh
            .at_home(cx, gfid, |c| op(&self.sh.children[c]))
            .await
    }

    /// A fop through a file fd whose reply carries the file's attributes (readv, writev,
    /// fsetattr). A reply showing the file nameless on its child may mean rebalance moved it
    /// (the fop landed on the old copy): then the fd follows the file and the fop is sent
    /// again where the file is now ([`Shared::moved_to`]).
    async fn fd_op_seen<R, F, Fut>(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: F,
        attrs: fn(&R) -> Option<&Iatt>,
    ) -> Result<R, Errno>
    where
        F: Fn(&Subvol) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        let c = self.sh.fd_child(cx, fd).await?;
        let r = op(&self.sh.children[c]).await;
        match &r {
            Ok(v) if nameless(attrs(v)) => {
                if let Some(d) = self.sh.moved_to(fd, c).await {
                    return op(&self.sh.children[d]).await;
                }
            }
            Err(Errno::ESTALE) if self.sh.fd_state(fd).is_none() => {
                // An anonymous fd on a GFID its cached child no longer has.
                return self.read_op(cx, fd.gfid, op).await;
            }
            _ => {}
        }
        r
    }

    /// A change through a file fd whose reply has no attributes (fallocate, discard,
    /// zerofill, fsetxattr, fremovexattr, fxattrop, lk): like [`Self::fd_op_seen`], the
    /// attributes read with an fstat after it.
    async fn fd_change<R, F, Fut>(&self, cx: &Ctx, fd: Fd, op: F) -> Result<R, Errno>
    where
        F: Fn(&Subvol) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        let c = self.sh.fd_child(cx, fd).await?;
        let r = op(&self.sh.children[c]).await;
        match &r {
            Ok(_) if self.sh.fd_state(fd).is_some_and(|s| !s.dir && !s.unlinked) => {
                if let Ok(a) = self.sh.children[c].fstat(&Ctx::root(), fd).await
                    && nameless(Some(&a))
                    && let Some(d) = self.sh.moved_to(fd, c).await
                {
                    return op(&self.sh.children[d]).await;
                }
            }
            Err(Errno::ESTALE) if self.sh.fd_state(fd).is_none() => {
                return self.read_op(cx, fd.gfid, op).await;
            }
            _ => {}
        }
        r
    }
}

impl<S: Spelling> Translator for DistributeAs<S> {
    const TYPE: &'static str = S::TYPE;
    const DOC: &'static str = "Distribute (GlusterFS DHT): each file lives on the child its \
        name hashes to in its directory's layout (hash ranges kept in an xattr on every copy \
        of the directory), with link files where it lives elsewhere; directories exist on \
        every child with one GFID and are repaired on lookup; listings merge the children.";
    const MIN_CHILDREN: u32 = 1;
    const MAX_CHILDREN: u32 = 1024;
    const ANNOUNCES_CHILD_UP: bool = true;
    type Options = DhtOptions;

    fn init(init: Init<DhtOptions>) -> Result<Self, String> {
        let cfg = config(&init.options).map_err(|e| format!("{}: {e}", init.name))?;
        let sh = Shared::new(
            init.name,
            init.children,
            init.child_state,
            init.services,
            cfg,
        );
        Ok(DistributeAs {
            sh: Arc::new(sh),
            _spelling: PhantomData,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.sh.children
    }

    fn reconfigure(&self, o: DhtOptions) -> Result<(), String> {
        self.sh.set_cfg(config(&o)?);
        Ok(())
    }

    /// Up once every child has come up, then as long as one is: a volume with a brick down
    /// still serves the files of the others. Down when the last child goes.
    fn notify(&self, event: Event) {
        if event.kind == EventKind::ChildDown {
            self.sh.child_lost(event.child as usize);
        }
        let count = self.sh.up.up_count();
        let was = self.sh.announced.load(Ordering::Acquire);
        let now = count == self.sh.n() || (was && count > 0);
        if now != self.sh.announced.swap(now, Ordering::AcqRel) {
            let kind = if now {
                EventKind::ChildUp
            } else {
                EventKind::ChildDown
            };
            self.sh.services.notify_parents(kind);
        }
    }

    fn dump(&self) -> Dump {
        let c = &self.sh.counters;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (layouts, homes) = self.sh.cache_sizes();
        Dump::new()
            .with("children", self.sh.n() as u64)
            .with("children-up", self.sh.up.up_count() as u64)
            .with("open-fds", self.sh.open_fds() as u64)
            .with("cached-layouts", layouts as u64)
            .with("cached-homes", homes as u64)
            .with(
                "readdir-ahead-pages",
                crate::shared::lock(&self.sh.ahead).len() as u64,
            )
            .with(
                "indirect-cookies",
                crate::shared::lock(&self.sh.cookies).indirect_held() as u64,
            )
            .with(
                "counters",
                Dump::counters(&[
                    ("lookups", n(&c.lookups)),
                    ("negative-one-call", n(&c.negative_one_call)),
                    ("lookups-everywhere", n(&c.everywhere)),
                    ("linkfiles-made", n(&c.linkfiles_made)),
                    ("linkfiles-followed", n(&c.linkfiles_followed)),
                    ("stale-linkfiles", n(&c.stale_linkfiles)),
                    ("dirs-healed", n(&c.dirs_healed)),
                    ("layouts-repaired", n(&c.layouts_repaired)),
                    ("diverted-creates", n(&c.diverted_creates)),
                    ("cross-child-renames", n(&c.cross_renames)),
                    ("dir-renames-finished", n(&c.renames_finished)),
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
        match self.sh.fd_state(fd) {
            Some(s) if s.dir => self.sh.stat(cx, fd.gfid).await,
            _ => {
                self.fd_op_seen(cx, fd, |c| c.fstat(cx, fd), |a: &Iatt| Some(a))
                    .await
            }
        }
    }

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.sh.setattr(cx, gfid, attr).await
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        match self.sh.fd_state(fd) {
            Some(s) if s.dir => self.sh.setattr(cx, fd.gfid, attr).await,
            _ => {
                self.fd_op_seen(cx, fd, |c| c.fsetattr(cx, fd, attr), |a: &Iatt| Some(a))
                    .await
            }
        }
    }

    async fn access(&self, cx: &Ctx, gfid: Gfid, mask: u32) -> Result<(), Errno> {
        self.read_op(cx, gfid, |c| c.access(cx, gfid, mask)).await
    }

    async fn readlink(&self, cx: &Ctx, gfid: Gfid) -> Result<RString, Errno> {
        self.read_op(cx, gfid, |c| c.readlink(cx, gfid)).await
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
        self.fd_op_seen(
            cx,
            fd,
            |c| c.readv(cx, fd, offset, size),
            |r: &ReadReply| r.attr.as_ref().into_option(),
        )
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
        self.fd_op_seen(
            cx,
            fd,
            |c| c.writev(cx, fd, offset, data.clone(), flags),
            |r: &WriteReply| r.attr.as_ref().into_option(),
        )
        .await
    }

    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.fd_op(cx, fd, |c| c.flush(cx, fd)).await
    }

    async fn fsync(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        self.fd_op(cx, fd, |c| c.fsync(cx, fd, datasync)).await
    }

    async fn fsyncdir(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        let sh = &self.sh;
        sh.on_dir_holders(fd, |i| sh.children[i].fsyncdir(cx, fd, datasync))
            .await
    }

    async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.sh.release(cx, fd).await
    }

    async fn releasedir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.sh.releasedir(cx, fd).await
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
        refuse_own(&xattr.name)?;
        let sh = &self.sh;
        sh.change(cx, gfid, |i| {
            sh.children[i].setxattr(cx, gfid, xattr.clone(), flags)
        })
        .await
    }

    async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        self.sh.getxattr(cx, gfid, name).await
    }

    async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        self.sh.listxattr(cx, gfid).await
    }

    async fn removexattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<(), Errno> {
        refuse_own(&name)?;
        let sh = &self.sh;
        sh.change(cx, gfid, |i| {
            sh.children[i].removexattr(cx, gfid, name.clone())
        })
        .await
    }

    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        refuse_own(&xattr.name)?;
        let sh = &self.sh;
        match sh.fd_state(fd) {
            Some(s) if s.dir => {
                sh.change(cx, fd.gfid, |i| {
                    sh.children[i].setxattr(cx, fd.gfid, xattr.clone(), flags)
                })
                .await
            }
            _ => {
                self.fd_change(cx, fd, |c| c.fsetxattr(cx, fd, xattr.clone(), flags))
                    .await
            }
        }
    }

    async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        self.sh.fgetxattr(cx, fd, name).await
    }

    async fn fremovexattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<(), Errno> {
        refuse_own(&name)?;
        let sh = &self.sh;
        match sh.fd_state(fd) {
            Some(s) if s.dir => {
                sh.change(cx, fd.gfid, |i| {
                    sh.children[i].removexattr(cx, fd.gfid, name.clone())
                })
                .await
            }
            _ => {
                self.fd_change(cx, fd, |c| c.fremovexattr(cx, fd, name.clone()))
                    .await
            }
        }
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        self.fd_change(cx, fd, |c| c.fallocate(cx, fd, mode, offset, len))
            .await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.fd_change(cx, fd, |c| c.discard(cx, fd, offset, len))
            .await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.fd_change(cx, fd, |c| c.zerofill(cx, fd, offset, len))
            .await
    }

    async fn seek(&self, cx: &Ctx, fd: Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        self.fd_op(cx, fd, |c| c.seek(cx, fd, offset, what)).await
    }

    async fn lk(&self, cx: &Ctx, fd: Fd, cmd: LkCmd, lock: Flock) -> Result<Flock, Errno> {
        self.fd_change(cx, fd, |c| c.lk(cx, fd, cmd, lock)).await
    }

    async fn inodelk(
        &self,
        cx: &Ctx,
        domain: RString,
        gfid: Gfid,
        cmd: LkCmd,
        lock: Flock,
    ) -> Result<(), Errno> {
        self.read_op(cx, gfid, |c| c.inodelk(cx, domain.clone(), gfid, cmd, lock))
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
        xattrs_refused(&xattrs)?;
        self.read_op(cx, gfid, |c| c.xattrop(cx, gfid, op, xattrs.clone()))
            .await
    }

    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        xattrs_refused(&xattrs)?;
        self.fd_change(cx, fd, |c| c.fxattrop(cx, fd, op, xattrs.clone()))
            .await
    }

    async fn rchecksum(&self, cx: &Ctx, fd: Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        self.fd_op(cx, fd, |c| c.rchecksum(cx, fd, offset, len))
            .await
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
        xattrs_refused(&xattrs)?;
        let sh = &self.sh;
        sh.change(cx, gfid, |i| {
            sh.children[i].setxattrs(cx, gfid, xattrs.clone(), flags)
        })
        .await
    }

    async fn forget_client(&self, cx: &Ctx, client: ClientId) -> Result<(), Errno> {
        let sh = &self.sh;
        let r = sh.fan(|i| sh.children[i].forget_client(cx, client)).await;
        if r.iter().any(Result::is_ok) || r.is_empty() {
            Ok(())
        } else {
            Err(first_error(r.into_iter().filter_map(Result::err)))
        }
    }
}
