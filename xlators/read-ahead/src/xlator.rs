//! The translator: the fops read-ahead changes, each delegating to [`crate::ahead`].
//!
//! - reads: `readv` (sequential detection, prefetch, answers from pages);
//! - modifications of a file drop every fd's pages of it: `writev`, `setattr`/`fsetattr`
//!   with a size, `fallocate`, `discard`, `zerofill`, `open`/`create` with O_TRUNC;
//! - an fd's pages are dropped by `flush` and `fsync`, its state by `release`.
//!
//! The modifications are every fop with [`Fop::may_change_data`](xlator_api::Fop::may_change_data);
//! `tests/every_fop.rs` checks that over the whole fop table.

use std::sync::Arc;

use xlator_api::{
    Buf, Ctx, Dump, Entry, Errno, Fd, Gfid, Iatt, Init, Loc, Opened, ReadReply, SetAttr, Subvol,
    Translator, Upcall, WriteReply,
};

use crate::ahead::{Ahead, Snapshot};
use crate::options::ReadAheadOptions;
use crate::window::Geometry;

/// Translator type name.
pub const TYPE: &str = "performance/read-ahead";

/// performance/read-ahead.
pub struct ReadAhead {
    children: [Subvol; 1],
    ahead: Arc<Ahead>,
}

impl ReadAhead {
    /// Counters and memory (for in-process users; hosts use `dump`).
    pub fn snapshot(&self) -> Snapshot {
        self.ahead.snapshot()
    }

    fn child(&self) -> &Subvol {
        &self.children[0]
    }
}

impl Translator for ReadAhead {
    const TYPE: &'static str = TYPE;
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Detects sequential reads per fd and keeps page-count pages of \
        page-size bytes prefetched ahead of the reader; writes to a file drop every fd's pages.";

    type Options = ReadAheadOptions;

    fn init(init: Init<ReadAheadOptions>) -> Result<Self, String> {
        let name = init.name;
        let children = xlator_api::one_child(TYPE, &name, init.children)?;
        let geo = Geometry::new(init.options.page_size);
        let ahead = Ahead::new(
            children[0].clone(),
            init.services,
            geo,
            init.options.page_count,
        );
        Ok(ReadAhead {
            children,
            ahead: Arc::new(ahead),
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, options: ReadAheadOptions) -> Result<(), String> {
        self.ahead.set_page_count(options.page_count);
        Ok(())
    }

    fn dump(&self) -> Dump {
        crate::dump::render(&self.snapshot())
    }

    fn upcall(&self, _child: usize, up: &Upcall) -> bool {
        if up.says(Upcall::DATA) {
            self.ahead.fds().invalidate(up.gfid);
        }
        true
    }

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        self.ahead.readv(cx, fd, offset, size).await
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let _guard = self.ahead.modify(fd.gfid);
        self.child().writev(cx, fd, offset, data, flags).await
    }

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        let _guard = attr.size.is_some().then(|| self.ahead.modify(gfid));
        self.child().setattr(cx, gfid, attr).await
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        let _guard = attr.size.is_some().then(|| self.ahead.modify(fd.gfid));
        self.child().fsetattr(cx, fd, attr).await
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        let _guard = self.ahead.modify(fd.gfid);
        self.child().fallocate(cx, fd, mode, offset, len).await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let _guard = self.ahead.modify(fd.gfid);
        self.child().discard(cx, fd, offset, len).await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let _guard = self.ahead.modify(fd.gfid);
        self.child().zerofill(cx, fd, offset, len).await
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let _guard = (fd.flags & libc::O_TRUNC != 0).then(|| self.ahead.modify(fd.gfid));
        self.child().open(cx, fd).await
    }

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let e = self.child().create(cx, loc, fd, mode, umask).await?;
        if fd.flags & libc::O_TRUNC != 0 {
            // An existing file may have been emptied; its gfid is known only now.
            drop(self.ahead.modify(e.attr.gfid));
        }
        Ok(e)
    }

    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.ahead.drop_pages(fd.id);
        self.child().flush(cx, fd).await
    }

    async fn fsync(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        self.ahead.drop_pages(fd.id);
        self.child().fsync(cx, fd, datasync).await
    }

    async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.ahead.release(fd.id);
        self.child().release(cx, fd).await
    }
}
