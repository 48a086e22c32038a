//! Open, read, write, attribute changes and space management on the inode table.

use abi_stable::std_types::ROption;
use xlator_api::{Ctx, Errno, Fd, FileType, Gfid, Iatt, SeekWhat, SetAttr, TimeSet, Timespec};

use super::inode::Table;
use super::perm::{self, R, W};

/// Largest file size (8 EiB would overflow offsets in callers; 1 PiB is plenty in memory).
pub(crate) const MAX_FILE_SIZE: u64 = 1 << 50;

const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

impl Table {
    /// Checks `open(2)` of `fd.gfid` with `fd.flags` and applies O_TRUNC; registers the fd.
    pub(crate) fn open(&mut self, cx: &Ctx, fd: &Fd) -> Result<(), Errno> {
        let a = self.attr(fd.gfid)?;
        match a.kind {
            FileType::Directory
                if fd.flags & libc::O_ACCMODE != libc::O_RDONLY
                    || fd.flags & libc::O_TRUNC != 0 =>
            {
                return Err(Errno::EISDIR);
            }
            FileType::Symlink => return Err(Errno::ELOOP),
            _ => {}
        }
        perm::check(cx, &a, perm::open_mask(fd.flags))?;
        if fd.flags & libc::O_TRUNC != 0 && a.kind == FileType::Regular {
            self.truncate(cx, fd.gfid, 0)?;
        }
        self.register_fd(fd.id, fd.gfid);
        Ok(())
    }

    /// Checks `opendir` (ENOTDIR, EACCES without read permission); registers the fd.
    pub(crate) fn opendir(&mut self, cx: &Ctx, fd: &Fd) -> Result<(), Errno> {
        self.opendir_check(cx, fd.gfid)?;
        self.register_fd(fd.id, fd.gfid);
        Ok(())
    }

    /// `gfid` is a directory `cx` may list (ENOTDIR, EACCES).
    pub(crate) fn opendir_check(&self, cx: &Ctx, gfid: Gfid) -> Result<(), Errno> {
        let inode = self.get(gfid)?;
        inode.dir()?;
        perm::check(cx, &inode.attr, R)
    }

    /// Rights check for I/O through `fd`: an opened fd must have the access mode (`bad`
    /// otherwise); an anonymous fd is checked against the caller's permissions.
    fn io_check(&self, cx: &Ctx, fd: &Fd, write: bool, bad: Errno) -> Result<(), Errno> {
        let a = self.attr(fd.gfid)?;
        if fd.is_anonymous() {
            perm::check(cx, &a, if write { W } else { R })
        } else if (write && !perm::fd_can_write(fd.flags))
            || (!write && !perm::fd_can_read(fd.flags))
        {
            Err(bad)
        } else {
            Ok(())
        }
    }

    pub(crate) fn readv(
        &self,
        cx: &Ctx,
        fd: &Fd,
        offset: u64,
        size: u32,
    ) -> Result<Vec<u8>, Errno> {
        let data = self.get(fd.gfid)?.data()?;
        self.io_check(cx, fd, false, Errno::EBADF)?;
        Ok(data.read(offset, u64::from(size)))
    }

    /// Writes at `offset`, or at end of file under O_APPEND (fd or per-write flag).
    pub(crate) fn writev(
        &mut self,
        cx: &Ctx,
        fd: &Fd,
        offset: u64,
        bytes: &[u8],
        flags: i32,
    ) -> Result<u64, Errno> {
        let size = self.get(fd.gfid)?.data()?.size();
        self.io_check(cx, fd, true, Errno::EBADF)?;
        let off = if (fd.flags | flags) & libc::O_APPEND != 0 {
            size
        } else {
            offset
        };
        let len = bytes.len() as u64;
        if off.checked_add(len).is_none_or(|end| end > MAX_FILE_SIZE) {
            return Err(Errno::EFBIG);
        }
        if len == 0 {
            return Ok(0);
        }
        self.reserve(self.get(fd.gfid)?.data()?.missing(off, len))?;
        self.with_data(fd.gfid, |d| d.write(off, bytes))?;
        let inode = self.get_mut(fd.gfid)?;
        inode.touch_mtime(Timespec::now());
        if !perm::is_root(cx) {
            perm::kill_suid(&mut inode.attr);
        }
        Ok(len)
    }

    /// Sets the size of a regular file (no permission check; callers did it).
    fn truncate(&mut self, cx: &Ctx, gfid: Gfid, size: u64) -> Result<(), Errno> {
        if size > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        self.with_data(gfid, |d| d.truncate(size))?;
        let inode = self.get_mut(gfid)?;
        inode.touch_mtime(Timespec::now());
        if !perm::is_root(cx) {
            perm::kill_suid(&mut inode.attr);
        }
        Ok(())
    }

    /// `setattr`/`fsetattr`: validates every change first, then applies them all.
    pub(crate) fn setattr(
        &mut self,
        cx: &Ctx,
        gfid: Gfid,
        set: &SetAttr,
        fd: Option<&Fd>,
    ) -> Result<Iatt, Errno> {
        let a = self.attr(gfid)?;
        let owner = perm::is_owner(cx, &a);
        let mut new = a;
        if let ROption::RSome(p) = set.perm {
            if !owner {
                return Err(Errno::EPERM);
            }
            new.perm = p & 0o7777;
            if !perm::is_root(cx) && !a.is_dir() && !cx.in_group(a.gid) {
                new.perm &= !libc::S_ISGID;
            }
        }
        let (uid, gid) = (set.uid.into_option(), set.gid.into_option());
        if uid.is_some() || gid.is_some() {
            if !perm::is_root(cx) {
                let uid_changes = uid.is_some_and(|u| u != a.uid);
                let gid_ok = gid.is_none_or(|g| g == a.gid || (owner && cx.in_group(g)));
                if uid_changes || !owner || !gid_ok {
                    return Err(Errno::EPERM);
                }
            }
            new.uid = uid.unwrap_or(a.uid);
            new.gid = gid.unwrap_or(a.gid);
            // A mode given in the same call is what the caller wants; keep its set-id bits.
            if set.perm.is_none() {
                perm::kill_suid(&mut new);
            }
        }
        if let ROption::RSome(size) = set.size {
            self.get(gfid)?.data()?;
            match fd {
                Some(fd) if !fd.is_anonymous() => {
                    if !perm::fd_can_write(fd.flags) {
                        return Err(Errno::EINVAL);
                    }
                }
                _ => perm::check(cx, &a, W)?,
            }
            if size > MAX_FILE_SIZE {
                return Err(Errno::EFBIG);
            }
            if !perm::is_root(cx) {
                perm::kill_suid(&mut new);
            }
        }
        let now = Timespec::now();
        for t in [set.atime, set.mtime] {
            match t {
                TimeSet::Omit => {}
                TimeSet::Now if owner || perm::allowed(cx, &a, W) => {}
                TimeSet::Now => return Err(Errno::EACCES),
                TimeSet::At(ts) if ts.nsec >= 1_000_000_000 => return Err(Errno::EINVAL),
                TimeSet::At(_) if owner => {}
                TimeSet::At(_) => return Err(Errno::EPERM),
            }
        }
        let pick = |t: TimeSet, old: Timespec| match t {
            TimeSet::Omit => old,
            TimeSet::Now => now,
            TimeSet::At(ts) => ts,
        };
        if let ROption::RSome(size) = set.size {
            self.truncate(cx, gfid, size)?;
        }
        let changed = set.perm.is_some()
            || uid.is_some()
            || gid.is_some()
            || set.size.is_some()
            || set.atime != TimeSet::Omit
            || set.mtime != TimeSet::Omit;
        let inode = self.get_mut(gfid)?;
        inode.attr.perm = new.perm;
        inode.attr.uid = new.uid;
        inode.attr.gid = new.gid;
        inode.attr.atime = pick(set.atime, inode.attr.atime);
        inode.attr.mtime = pick(set.mtime, inode.attr.mtime);
        if changed {
            inode.attr.ctime = now;
        }
        Ok(inode.attr)
    }

    /// `access(2)`: `mask` of `R_OK|W_OK|X_OK` (0: existence only).
    pub(crate) fn access(&self, cx: &Ctx, gfid: Gfid, mask: u32) -> Result<(), Errno> {
        if mask & !7 != 0 {
            return Err(Errno::EINVAL);
        }
        let a = self.attr(gfid)?;
        if mask == 0 {
            Ok(())
        } else {
            perm::check(cx, &a, mask)
        }
    }

    /// `fallocate(2)` with KEEP_SIZE, PUNCH_HOLE (requires KEEP_SIZE) and ZERO_RANGE.
    pub(crate) fn fallocate(
        &mut self,
        cx: &Ctx,
        fd: &Fd,
        mode: i32,
        off: u64,
        len: u64,
    ) -> Result<(), Errno> {
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
            return Err(Errno::ENOTSUP);
        }
        let punch = mode & FALLOC_FL_PUNCH_HOLE != 0;
        let zero = mode & FALLOC_FL_ZERO_RANGE != 0;
        let keep = mode & FALLOC_FL_KEEP_SIZE != 0;
        if punch && (!keep || zero) {
            return Err(Errno::EINVAL);
        }
        let data = self.get(fd.gfid)?.data()?;
        self.io_check(cx, fd, true, Errno::EBADF)?;
        let end = off
            .checked_add(len)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or(Errno::EFBIG)?;
        if !punch {
            self.reserve(data.missing(off, len))?;
        }
        self.with_data(fd.gfid, |d| {
            if punch {
                d.punch(off, len);
            } else if zero {
                d.zero(off, len);
            } else {
                d.allocate(off, len);
            }
            if !keep && end > d.size() {
                d.truncate(end);
            }
        })?;
        if punch || zero || !keep {
            self.get_mut(fd.gfid)?.touch_mtime(Timespec::now());
        }
        Ok(())
    }

    /// SEEK_DATA / SEEK_HOLE.
    pub(crate) fn seek(&self, fd: &Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        match self.get(fd.gfid)?.data() {
            Ok(d) => d.seek(offset, what),
            Err(Errno::EISDIR) => Err(Errno::ENXIO),
            Err(e) => Err(e),
        }
    }
}
