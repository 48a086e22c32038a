//! `features/read-only`: makes a volume read-only. Every fop that would change data, metadata
//! or the namespace fails with EROFS; reads, lookups and listings pass through. Opening for
//! writing fails too, so applications learn early. The `read-only` option can be switched on
//! a running volume (`reconfigure`), which is how an admin freezes a volume without a remount.

use std::sync::atomic::{AtomicBool, Ordering};

use abi_stable::std_types::{RString, RVec};
use xlator_api::abi_stable;
use xlator_api::{
    Buf, Ctx, Entry, Errno, Fd, Gfid, Iatt, Init, Loc, Opened, Removed, SetAttr, Subvol,
    Translator, WriteReply, Xattr, XattropOp, Xattrs,
};

xlator_api::options! {
    /// Options of `features/read-only`.
    pub struct ReadOnlyOptions {
        /// Refuse modifications. Switch it off to let writes through again.
        pub read_only: bool = OptionSpec::bool("read-only", "on").reconfigurable(),
    }
}

pub struct ReadOnly {
    children: Vec<Subvol>,
    on: AtomicBool,
}

impl ReadOnly {
    fn child(&self) -> &Subvol {
        &self.children[0]
    }
    /// EROFS when read-only is on.
    fn check(&self) -> Result<(), Errno> {
        if self.on.load(Ordering::Relaxed) {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }
}

fn writes(flags: i32) -> bool {
    flags & libc_o::ACCMODE != libc_o::RDONLY || flags & libc_o::TRUNC != 0
}

/// The open(2) flag bits this translator looks at (Linux values).
mod libc_o {
    pub const ACCMODE: i32 = 0o3;
    pub const RDONLY: i32 = 0;
    pub const TRUNC: i32 = 0o1000;
}

impl Translator for ReadOnly {
    const TYPE: &'static str = "features/read-only";
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Refuses every modifying fop with EROFS; reconfigurable.";
    type Options = ReadOnlyOptions;

    fn init(init: Init<ReadOnlyOptions>) -> Result<Self, String> {
        Ok(ReadOnly {
            children: init.children,
            on: AtomicBool::new(init.options.read_only),
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    fn reconfigure(&self, options: ReadOnlyOptions) -> Result<(), String> {
        self.on.store(options.read_only, Ordering::Relaxed);
        Ok(())
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        if writes(fd.flags) {
            self.check()?;
        }
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
        self.check()?;
        self.child().create(cx, loc, fd, mode, umask).await
    }
    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.check()?;
        self.child().writev(cx, fd, offset, data, flags).await
    }
    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.check()?;
        self.child().setattr(cx, gfid, attr).await
    }
    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        self.check()?;
        self.child().fsetattr(cx, fd, attr).await
    }
    async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        self.check()?;
        self.child().mknod(cx, loc, mode, rdev, umask).await
    }
    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        self.check()?;
        self.child().mkdir(cx, loc, mode, umask).await
    }
    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.check()?;
        self.child().unlink(cx, loc).await
    }
    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.check()?;
        self.child().rmdir(cx, loc).await
    }
    async fn symlink(&self, cx: &Ctx, loc: Loc, target: RString) -> Result<Entry, Errno> {
        self.check()?;
        self.child().symlink(cx, loc, target).await
    }
    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.check()?;
        self.child().rename(cx, old, new, flags).await
    }
    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        self.check()?;
        self.child().link(cx, gfid, new).await
    }
    async fn setxattr(&self, cx: &Ctx, gfid: Gfid, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.check()?;
        self.child().setxattr(cx, gfid, xattr, flags).await
    }
    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.check()?;
        self.child().fsetxattr(cx, fd, xattr, flags).await
    }
    async fn removexattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<(), Errno> {
        self.check()?;
        self.child().removexattr(cx, gfid, name).await
    }
    async fn fremovexattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<(), Errno> {
        self.check()?;
        self.child().fremovexattr(cx, fd, name).await
    }
    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        self.check()?;
        self.child().fallocate(cx, fd, mode, offset, len).await
    }
    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.check()?;
        self.child().discard(cx, fd, offset, len).await
    }
    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.check()?;
        self.child().zerofill(cx, fd, offset, len).await
    }
    async fn xattrop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        x: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.check()?;
        self.child().xattrop(cx, gfid, op, x).await
    }
    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        x: Xattrs,
    ) -> Result<RVec<Xattr>, Errno> {
        self.check()?;
        self.child().fxattrop(cx, fd, op, x).await
    }
}

xlator_api::export_translators!(ReadOnly);
