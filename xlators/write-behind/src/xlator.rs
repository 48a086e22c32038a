//! The translator: the fops write-behind takes part in, as [`crate::handling`] classifies the
//! whole fop table. Every other fop passes through unchanged.
//!
//! | fop | handling |
//! |---|---|
//! | writev | cached (acknowledged at once), write-through (O_SYNC/O_DSYNC/strict O_DIRECT) or direct |
//! | readv, seek, rchecksum | observe from their offset to past the end of file |
//! | stat, fstat, link | observe the whole file |
//! | setattr, fsetattr, fallocate, discard, zerofill, open with O_TRUNC | modify the whole file |
//! | fsync, flush, release, lk | wait for earlier requests of the file; fsync/flush report failures |
//! | rename, unlink, readdirp, create with O_TRUNC | wait for earlier requests of every file |
//! | lookup, readdirp replies | attributes refreshed for files with writes unfinished |

use std::sync::Arc;

use xlator_api::abi_stable::std_types::{ROption::RNone, RVec};
use xlator_api::{
    Buf, Ctx, DirEntry, Dump, Entry, Errno, Event, EventKind, Fd, Flock, Gfid, Iatt, Init, LkCmd,
    Loc, Opened, Rchecksum, ReadReply, Removed, SeekWhat, SetAttr, Subvol, Translator, WriteReply,
};

use crate::engine::Engine;
use crate::flags::{self, WriteMode};
use crate::options::{Config, WriteBehindOptions};
use crate::window::{Access, Span};

/// performance/write-behind.
pub struct WriteBehind {
    children: Vec<Subvol>,
    engine: Arc<Engine>,
}

impl WriteBehind {
    fn child(&self) -> &Subvol {
        self.engine.child()
    }

    /// Runs `call` ordered against the file's cached writes.
    async fn ordered<R, Fut>(
        &self,
        gfid: Gfid,
        access: Access,
        span: Span,
        call: impl FnOnce() -> Fut,
    ) -> Result<R, Errno>
    where
        Fut: Future<Output = Result<R, Errno>>,
    {
        self.engine.ordered(gfid, access, span, call).await
    }
}

impl Translator for WriteBehind {
    const TYPE: &'static str = "performance/write-behind";
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Acknowledges writes early within a per-file window, joins \
        contiguous small writes into large ones, and orders every fop that observes or changes \
        file data after the cached writes it depends on; background write failures are \
        reported on the next fsync, flush or write of the file.";
    type Options = WriteBehindOptions;

    fn init(init: Init<WriteBehindOptions>) -> Result<Self, String> {
        let child = match init.children.as_slice() {
            [one] => one.clone(),
            other => {
                return Err(format!(
                    "{} {:?} needs exactly one subvolume, got {}",
                    Self::TYPE,
                    init.name,
                    other.len()
                ));
            }
        };
        let engine = Engine::new(child, init.services, Config::from(&init.options));
        Ok(WriteBehind {
            children: init.children,
            engine,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, options: WriteBehindOptions) -> Result<(), String> {
        self.engine.reconfigure(Config::from(&options));
        Ok(())
    }

    fn notify(&self, event: Event) {
        if event.kind == EventKind::GraphSwitch {
            self.engine.flush_everything();
        }
    }

    fn dump(&self) -> Dump {
        Dump::new().with("files", self.engine.dump_rows())
    }

    // ---- writes ----

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let strict = self.engine.config().strict_o_direct;
        match flags::write_mode(fd.flags, flags, offset, data.len(), strict) {
            // Acknowledged before it reaches the leaf: no post-write attributes to give.
            WriteMode::Cached => self
                .engine
                .write_cached(cx, fd, offset, data, flags)
                .await
                .map(WriteReply::written),
            WriteMode::Through => self.engine.write_through(cx, fd, offset, data, flags).await,
            WriteMode::Direct => self.child().writev(cx, fd, offset, data, flags).await,
        }
    }

    // ---- observers ----

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let mut reply = self
            .ordered(fd.gfid, Access::Observe, Span::from(offset), || {
                self.child().readv(cx, fd, offset, size)
            })
            .await?;
        // The read waited only for the writes it overlaps; the child's attributes miss any
        // other cached write (a size that goes backwards), so they are dropped then.
        if self.engine.has_unfinished_writes(fd.gfid) {
            reply.attr = RNone;
        }
        Ok(reply)
    }

    async fn seek(&self, cx: &Ctx, fd: Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        self.ordered(fd.gfid, Access::Observe, Span::from(offset), || {
            self.child().seek(cx, fd, offset, what)
        })
        .await
    }

    async fn rchecksum(&self, cx: &Ctx, fd: Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        self.ordered(fd.gfid, Access::Observe, Span::from(offset), || {
            self.child().rchecksum(cx, fd, offset, len)
        })
        .await
    }

    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        self.ordered(gfid, Access::Observe, Span::ALL, || {
            self.child().stat(cx, gfid)
        })
        .await
    }

    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.ordered(fd.gfid, Access::Observe, Span::ALL, || {
            self.child().fstat(cx, fd)
        })
        .await
    }

    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        self.ordered(gfid, Access::Observe, Span::ALL, || {
            self.child().link(cx, gfid, new)
        })
        .await
    }

    // ---- modifiers ----

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.ordered(gfid, Access::Modify, Span::ALL, || {
            self.child().setattr(cx, gfid, attr)
        })
        .await
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        self.ordered(fd.gfid, Access::Modify, Span::ALL, || {
            self.child().fsetattr(cx, fd, attr)
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
        self.ordered(fd.gfid, Access::Modify, Span::ALL, || {
            self.child().fallocate(cx, fd, mode, offset, len)
        })
        .await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.ordered(fd.gfid, Access::Modify, Span::ALL, || {
            self.child().discard(cx, fd, offset, len)
        })
        .await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.ordered(fd.gfid, Access::Modify, Span::ALL, || {
            self.child().zerofill(cx, fd, offset, len)
        })
        .await
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        if !flags::truncates(fd.flags) {
            return self.child().open(cx, fd).await;
        }
        self.ordered(fd.gfid, Access::Modify, Span::ALL, || {
            self.child().open(cx, fd)
        })
        .await
    }

    // ---- barriers and error reports ----

    async fn fsync(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        self.engine.fsync(cx, fd, datasync).await
    }

    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.engine.flush(cx, fd).await
    }

    async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.engine.barrier(fd.gfid).await;
        self.child().release(cx, fd).await
    }

    async fn lk(&self, cx: &Ctx, fd: Fd, cmd: LkCmd, lock: Flock) -> Result<Flock, Errno> {
        self.engine.barrier(fd.gfid).await;
        self.child().lk(cx, fd, cmd, lock).await
    }

    // ---- namespace (the fop names no GFID: wait for every file) ----

    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.engine.barrier_all().await;
        self.child().rename(cx, old, new, flags).await
    }

    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.engine.barrier_all().await;
        self.child().unlink(cx, loc).await
    }

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        if flags::truncates(fd.flags) {
            self.engine.barrier_all().await;
        }
        self.child().create(cx, loc, fd, mode, umask).await
    }

    // ---- replies carrying attributes ----

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let mut entry = self.child().lookup(cx, loc).await?;
        self.engine.refresh_attr(cx, &mut entry.attr).await;
        Ok(entry)
    }

    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        self.engine.barrier_all().await;
        let mut entries = self.child().readdirp(cx, fd, offset, size).await?;
        for e in entries.iter_mut() {
            self.engine.refresh_attr(cx, &mut e.attr).await;
        }
        Ok(entries)
    }
}
