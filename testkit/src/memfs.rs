//! [`MemLeaf`] (`storage/memory`): an in-memory leaf translator with POSIX semantics, to put
//! under translators in tests instead of `storage/posix` and a real disk.
//!
//! Objects are addressed by GFID; the root is [`Gfid::ROOT`] (mode 0755, owned by root).
//! Permissions are enforced for non-root callers from the [`Ctx`]'s uid, gid and groups.
//! Deliberate simplifications: reads do not update atime (like `noatime`); `readdirp` lists no
//! `.`/`..`; a GFID that does not exist answers ESTALE; `inodelk` locks are owned by
//! `lock.owner` and entry locks by the caller's `lk_owner`.
//!
//! What cluster translators need of a leaf works as on storage/posix, so they can be tested
//! in-process: [`GfidReq`](xlator_api::GfidReq) gives a new object the requested GFID
//! (EEXIST if another object has it, or if the name exists with another GFID: a `create`
//! without `O_EXCL` of the same name and GFID opens it); [`XattrReq`](xlator_api::XattrReq)
//! fills `Entry::xattrs` and `DirEntry::xattrs`; [`CreateXattrs`](xlator_api::CreateXattrs)
//! are set with the new object, atomically; `getxattrs`, `setxattrs` (all or none),
//! `rchecksum` (Adler-32 + SHA-256), and `xattrop` all or nothing over its keys, with a zero
//! delta only reading (no key created, ctime unchanged).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlator_api::{Ctx, Gfid, Loc};
//! let leaf = xlfs_testkit::memfs::MemLeaf::new();
//! let e = leaf.mkdir(&Ctx::root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0o022).await.unwrap();
//! assert!(e.attr.is_dir());
//! # }
//! ```

mod data;
mod ext;
mod inode;
mod io;
mod locks;
mod namespace;
mod perm;
mod xattr;

use std::sync::{Mutex, MutexGuard, PoisonError};

use abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{
    Buf, Ctx, DirEntry, Entry, EntrylkCmd, Errno, Fd, FileType, Flock, Gfid, Iatt, Init, InitArgs,
    LkCmd, Loc, Opened, Options, Rchecksum, ReadReply, Removed, SeekWhat, SetAttr, Statfs, Subvol,
    Translator, WriteReply, Xattr, XattropOp, Xattrs,
};

use inode::{Body, Table};
use locks::{Locks, RangeKeyArg};
use namespace::Make;

xlator_api::options! {
    /// Options of `storage/memory`.
    pub struct MemLeafOptions {
        /// Bytes of file data the volume holds before writes fail with ENOSPC.
        pub capacity: u64 = OptionSpec::size("capacity", "1TiB"),
        /// Objects (files, directories...) the volume holds before creation fails with ENOSPC.
        pub max_inodes: u64 = OptionSpec::int("max-inodes", "16777216").range(1, i64::MAX),
    }
}

/// The in-memory leaf translator. Thread-safe: one mutex over the inode table (never held
/// across an await) and one over the lock table.
pub struct MemLeaf {
    fs: Mutex<Table>,
    locks: Locks,
    capacity: u64,
    max_inodes: u64,
}

impl MemLeaf {
    /// A fresh empty volume (1 TiB, 16 Mi inodes) behind a [`Subvol`] named `memory`.
    ///
    /// Uses [`xlfs_core::services::host_services`]: call it inside a tokio runtime.
    #[allow(clippy::new_ret_no_self)] // the translator lives behind the Subvol, as in a graph
    pub fn new() -> Subvol {
        let mut o = Options::new();
        o.set("capacity", "1TiB");
        o.set("max-inodes", "16777216");
        Self::with_options("memory", o)
    }

    /// A fresh volume holding at most `capacity` bytes of file data.
    pub fn with_capacity(capacity: u64) -> Subvol {
        let mut o = Options::new();
        o.set("capacity", &capacity.to_string());
        o.set("max-inodes", "16777216");
        Self::with_options("memory", o)
    }

    fn with_options(name: &str, options: Options) -> Subvol {
        let args = InitArgs {
            name: name.into(),
            options,
            children: RVec::new(),
            services: xlfs_core::services::host_services(),
        };
        match xlator_api::sdk::instantiate::<MemLeaf>(args) {
            Ok(s) => s,
            // Both options are set above with valid values; init cannot fail otherwise.
            Err(e) => unreachable!("storage/memory init failed: {e}"),
        }
    }

    fn fs(&self) -> MutexGuard<'_, Table> {
        self.fs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `m` with the GFID and creation xattrs `cx` asks for.
    fn make(&self, cx: &Ctx, loc: &Loc, m: Make) -> Result<Entry, Errno> {
        let mut fs = self.fs();
        let attr = fs.make(cx, loc, ext::asked(cx, m))?;
        fs.entry(cx, attr)
    }
}

fn make(kind: FileType, mode: u32, umask: u32, rdev: u64, body: Body) -> Make {
    Make {
        kind,
        mode,
        umask,
        rdev,
        body,
        gfid: None,
        xattrs: Vec::new(),
    }
}

impl Translator for MemLeaf {
    const TYPE: &'static str = "storage/memory";
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "An in-memory volume with POSIX semantics, for tests.";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    type Options = MemLeafOptions;

    fn init(init: Init<MemLeafOptions>) -> Result<Self, String> {
        let MemLeafOptions {
            capacity,
            max_inodes,
        } = init.options;
        Ok(MemLeaf {
            fs: Mutex::new(Table::new(capacity, max_inodes)),
            locks: Locks::default(),
            capacity,
            max_inodes,
        })
    }

    fn children(&self) -> &[Subvol] {
        &[]
    }

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let fs = self.fs();
        let attr = fs.lookup(cx, &loc)?;
        fs.entry(cx, attr)
    }

    async fn stat(&self, _cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        self.fs().attr(gfid)
    }

    async fn fstat(&self, _cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.fs().attr(fd.gfid)
    }

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.fs().setattr(cx, gfid, &attr, None)
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        self.fs().setattr(cx, fd.gfid, &attr, Some(&fd))
    }

    async fn access(&self, cx: &Ctx, gfid: Gfid, mask: u32) -> Result<(), Errno> {
        self.fs().access(cx, gfid, mask)
    }

    async fn readlink(&self, _cx: &Ctx, gfid: Gfid) -> Result<RString, Errno> {
        match &self.fs().get(gfid)?.body {
            Body::Symlink(t) => Ok(t.as_str().into()),
            _ => Err(Errno::EINVAL),
        }
    }

    async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let kind = match mode & libc::S_IFMT {
            0 => FileType::Regular,
            _ => FileType::from_mode(mode).ok_or(Errno::EINVAL)?,
        };
        let body = match kind {
            FileType::Regular => Body::File(Default::default()),
            FileType::Directory | FileType::Symlink => return Err(Errno::EPERM),
            FileType::BlockDevice | FileType::CharDevice if cx.uid() != 0 => {
                return Err(Errno::EPERM);
            }
            _ => Body::Special,
        };
        let rdev = if matches!(kind, FileType::BlockDevice | FileType::CharDevice) {
            rdev
        } else {
            0
        };
        self.make(cx, &loc, make(kind, mode, umask, rdev, body))
    }

    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        // `Table::create` sets the directory's real parent.
        let body = Body::Dir(inode::Dir::new(loc.parent));
        self.make(cx, &loc, make(FileType::Directory, mode, umask, 0, body))
    }

    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.fs().unlink(cx, &loc).map(|()| Removed::default())
    }

    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.fs().rmdir(cx, &loc).map(|()| Removed::default())
    }

    async fn symlink(&self, cx: &Ctx, loc: Loc, target: RString) -> Result<Entry, Errno> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        if target.len() >= libc::PATH_MAX as usize {
            return Err(Errno::ENAMETOOLONG);
        }
        let body = Body::Symlink(target.into_string());
        self.make(cx, &loc, make(FileType::Symlink, 0o777, 0, 0, body))
    }

    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.fs().rename(cx, &old, &new, flags)
    }

    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        let mut fs = self.fs();
        let attr = fs.link(cx, gfid, &new)?;
        fs.entry(cx, attr)
    }

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        perm::check_name(&loc.name)?;
        let mut fs = self.fs();
        let attr = match fs.lookup(cx, &loc) {
            Ok(_) if fd.flags & libc::O_EXCL != 0 => return Err(Errno::EEXIST),
            Ok(existing) if ext::wants_other_gfid(cx, &existing) => return Err(Errno::EEXIST),
            Ok(existing) => {
                fs.open(
                    cx,
                    &Fd {
                        gfid: existing.gfid,
                        ..fd
                    },
                )?;
                fs.attr(existing.gfid)?
            }
            Err(Errno::ENOENT) => {
                let body = Body::File(Default::default());
                let m = make(FileType::Regular, mode, umask, 0, body);
                let attr = fs.make(cx, &loc, ext::asked(cx, m))?;
                fs.register_fd(fd.id, attr.gfid);
                attr
            }
            Err(e) => return Err(e),
        };
        fs.entry(cx, attr)
    }

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        self.fs().open(cx, &fd).map(|()| Opened::plain())
    }

    async fn opendir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.fs().opendir(cx, &fd)
    }

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let fs = self.fs();
        let data = Buf::from_vec(fs.readv(cx, &fd, offset, size)?);
        Ok(ReadReply {
            data,
            attr: ROption::RSome(fs.attr(fd.gfid)?),
        })
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let mut fs = self.fs();
        let written = fs.writev(cx, &fd, offset, &data, flags)?;
        Ok(WriteReply {
            written,
            attr: ROption::RSome(fs.attr(fd.gfid)?),
        })
    }

    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.fs().attr(fd.gfid)?;
        self.locks.release_owner(fd.gfid, cx.lk_owner());
        Ok(())
    }

    async fn fsync(&self, _cx: &Ctx, fd: Fd, _datasync: bool) -> Result<(), Errno> {
        self.fs().attr(fd.gfid).map(drop)
    }

    async fn fsyncdir(&self, _cx: &Ctx, fd: Fd, _datasync: bool) -> Result<(), Errno> {
        self.fs().get(fd.gfid)?.dir().map(drop)
    }

    async fn release(&self, _cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.fs().release_fd(fd.id);
        Ok(())
    }

    async fn releasedir(&self, _cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.fs().release_fd(fd.id);
        Ok(())
    }

    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        let fs = self.fs();
        if fd.is_anonymous() {
            fs.opendir_check(cx, fd.gfid)?;
        }
        fs.readdirp(fd.gfid, offset, size, ext::xattr_req(cx).as_ref())
            .map(RVec::from)
    }

    async fn statfs(&self, _cx: &Ctx, gfid: Gfid) -> Result<Statfs, Errno> {
        let fs = self.fs();
        fs.attr(gfid)?;
        let bsize = data::CHUNK;
        let blocks = self.capacity / bsize;
        let bfree = blocks.saturating_sub(fs.used_chunks);
        let files = self.max_inodes;
        let ffree = files.saturating_sub(fs.inodes.len() as u64);
        Ok(Statfs {
            bsize,
            frsize: bsize,
            blocks,
            bfree,
            bavail: bfree,
            files,
            ffree,
            favail: ffree,
            namemax: perm::NAME_MAX as u64,
        })
    }

    async fn setxattr(&self, cx: &Ctx, gfid: Gfid, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.fs().setxattr(cx, gfid, &xattr, flags)
    }

    async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        self.fs().getxattr(cx, gfid, &name)
    }

    async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        let names = self.fs().listxattr(cx, gfid)?;
        Ok(names.into_iter().map(RString::from).collect())
    }

    async fn removexattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<(), Errno> {
        self.fs().removexattr(cx, gfid, &name)
    }

    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.fs().setxattr(cx, fd.gfid, &xattr, flags)
    }

    async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        self.fs().getxattr(cx, fd.gfid, &name)
    }

    async fn fremovexattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<(), Errno> {
        self.fs().removexattr(cx, fd.gfid, &name)
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        self.fs().fallocate(cx, &fd, mode, offset, len)
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        self.fs().fallocate(cx, &fd, PUNCH, offset, len)
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.fs()
            .fallocate(cx, &fd, libc::FALLOC_FL_ZERO_RANGE, offset, len)
    }

    async fn seek(&self, _cx: &Ctx, fd: Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        self.fs().seek(&fd, offset, what)
    }

    async fn lk(&self, _cx: &Ctx, fd: Fd, cmd: LkCmd, lock: Flock) -> Result<Flock, Errno> {
        self.fs().attr(fd.gfid)?;
        self.locks
            .range_lock(
                RangeKeyArg {
                    domain: None,
                    gfid: fd.gfid,
                },
                cmd,
                lock,
            )
            .await
    }

    async fn inodelk(
        &self,
        _cx: &Ctx,
        domain: RString,
        gfid: Gfid,
        cmd: LkCmd,
        lock: Flock,
    ) -> Result<(), Errno> {
        self.fs().attr(gfid)?;
        let key = RangeKeyArg {
            domain: Some(domain.as_str()),
            gfid,
        };
        match self.locks.range_lock(key, cmd, lock).await? {
            granted if cmd == LkCmd::Get && granted.kind != xlator_api::LockKind::Unlock => {
                Err(Errno::EAGAIN)
            }
            _ => Ok(()),
        }
    }

    async fn entrylk(
        &self,
        cx: &Ctx,
        domain: RString,
        loc: Loc,
        cmd: EntrylkCmd,
    ) -> Result<(), Errno> {
        self.fs().get(loc.parent)?.dir()?;
        self.locks
            .entry_lock(&domain, loc.parent, &loc.name, cx.lk_owner(), cmd)
            .await
    }

    async fn xattrop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.fs().xattrop(cx, gfid, op, &xattrs)
    }

    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.fs().xattrop(cx, fd.gfid, op, &xattrs)
    }

    async fn rchecksum(&self, cx: &Ctx, fd: Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        self.fs().rchecksum(cx, &fd, offset, len)
    }

    async fn getxattrs(&self, cx: &Ctx, gfid: Gfid, names: RVec<RString>) -> Result<Xattrs, Errno> {
        self.fs().getxattrs(cx, gfid, &names)
    }

    async fn setxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        xattrs: Xattrs,
        flags: i32,
    ) -> Result<(), Errno> {
        self.fs().setxattrs(cx, gfid, &xattrs, flags)
    }

    /// Nothing is held per client here (locks belong to lock owners): nothing to drop.
    async fn forget_client(&self, _cx: &Ctx, _client: xlator_api::ClientId) -> Result<(), Errno> {
        Ok(())
    }
}
