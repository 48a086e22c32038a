//! Entry fops on the inode table: lookup, make (mknod/mkdir/symlink/create), unlink, rmdir,
//! link, rename and readdirp, with POSIX error and permission rules.

use xlator_api::{Ctx, DirEntry, Errno, FileType, Gfid, Iatt, Loc, Timespec, XattrReq};

use super::inode::{Body, NewInode, Table};
use super::perm::{self, W, X};

/// renameat2 flags.
const RENAME_NOREPLACE: u32 = 1;
const RENAME_EXCHANGE: u32 = 2;

/// Bytes one `readdirp` entry counts against the `size` budget: a FUSE `direntplus` header
/// (152 bytes) plus the name, 8-byte aligned.
fn entry_cost(name: &str) -> u64 {
    (152 + name.len() as u64).div_ceil(8) * 8
}

/// A new object's kind, mode and contents, for [`Table::make`].
pub(crate) struct Make {
    pub(crate) kind: FileType,
    pub(crate) mode: u32,
    pub(crate) umask: u32,
    pub(crate) rdev: u64,
    pub(crate) body: Body,
    /// The GFID the caller asked for ([`xlator_api::GfidReq`]), else a fresh one.
    pub(crate) gfid: Option<Gfid>,
    /// Set on the object as it is made ([`xlator_api::CreateXattrs`]).
    pub(crate) xattrs: Vec<(String, Vec<u8>)>,
}

impl Table {
    /// The directory `gfid`, searchable by `cx` (ESTALE, ENOTDIR, EACCES); extra `mask` bits
    /// are checked too.
    fn parent_dir(&self, cx: &Ctx, gfid: Gfid, mask: u32) -> Result<Iatt, Errno> {
        let p = self.get(gfid)?;
        p.dir()?;
        perm::check(cx, &p.attr, X | mask)?;
        Ok(p.attr)
    }

    /// The child `name` of `parent` (ENOENT when missing).
    fn child(&self, parent: Gfid, name: &str) -> Result<Gfid, Errno> {
        self.get(parent)?.dir()?.get(name).ok_or(Errno::ENOENT)
    }

    /// `lookup`; an empty name looks up `parent` itself (nameless lookup).
    pub(crate) fn lookup(&self, cx: &Ctx, loc: &Loc) -> Result<Iatt, Errno> {
        if loc.name.is_empty() {
            return self.attr(loc.parent);
        }
        if loc.name.len() > perm::NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        self.parent_dir(cx, loc.parent, 0)?;
        match loc.name.as_str() {
            "." => self.attr(loc.parent),
            ".." => self.attr(self.get(loc.parent)?.dir()?.parent),
            name => self.attr(self.child(loc.parent, name)?),
        }
    }

    /// Makes a new object named `loc` (EEXIST if the name is taken or the requested GFID is
    /// in use) with its creation xattrs: every check is made before anything changes, so the
    /// name never appears without them.
    pub(crate) fn make(&mut self, cx: &Ctx, loc: &Loc, m: Make) -> Result<Iatt, Errno> {
        perm::check_name(&loc.name)?;
        if perm::is_dot(&loc.name) {
            return Err(Errno::EEXIST);
        }
        let p = self.parent_dir(cx, loc.parent, W)?;
        if p.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        if self.get(loc.parent)?.dir()?.get(&loc.name).is_some() {
            return Err(Errno::EEXIST);
        }
        if let Some(g) = m.gfid {
            self.gfid_free(g)?;
        }
        super::xattr::check_create_xattrs(&m.xattrs)?;
        let mut perm_bits = m.mode & 0o7777 & !m.umask;
        let mut gid = cx.gid();
        if p.perm & libc::S_ISGID != 0 {
            gid = p.gid;
            if m.kind == FileType::Directory {
                perm_bits |= libc::S_ISGID;
            }
        }
        if m.kind != FileType::Directory && !perm::is_root(cx) && !cx.in_group(gid) {
            perm_bits &= !libc::S_ISGID;
        }
        let now = Timespec::now();
        let new = NewInode {
            kind: m.kind,
            perm: perm_bits,
            uid: cx.uid(),
            gid,
            rdev: m.rdev,
            body: m.body,
        };
        let gfid = self.create(new, loc.parent, now, m.gfid)?;
        self.get_mut(gfid)?.xattrs.extend(m.xattrs);
        let parent = self.get_mut(loc.parent)?;
        parent.dir_mut()?.insert(&loc.name, gfid);
        parent.touch_mtime(now);
        if m.kind == FileType::Directory {
            parent.attr.nlink += 1;
        }
        self.attr(gfid)
    }

    /// Removes a name of a non-directory.
    pub(crate) fn unlink(&mut self, cx: &Ctx, loc: &Loc) -> Result<(), Errno> {
        perm::check_name(&loc.name)?;
        if perm::is_dot(&loc.name) {
            return Err(Errno::EISDIR);
        }
        let p = self.parent_dir(cx, loc.parent, W)?;
        let gfid = self.child(loc.parent, &loc.name)?;
        let victim = self.attr(gfid)?;
        if victim.kind == FileType::Directory {
            return Err(Errno::EISDIR);
        }
        // The conditions storage/posix honours.
        if cx
            .ext::<xlator_api::UnlinkExact>()
            .is_some_and(|x| x.0 != gfid)
        {
            return Err(Errno::ESTALE);
        }
        if let Some(u) = cx.ext::<xlator_api::UnlinkUnlessMarked>()
            && victim.kind == FileType::Regular
            && victim.perm & 0o7777 == u.perm
            && self.get(gfid)?.xattrs.contains_key(&u.xattr)
        {
            return Err(Errno::EEXIST);
        }
        perm::check_sticky(cx, &p, &victim)?;
        let now = Timespec::now();
        let parent = self.get_mut(loc.parent)?;
        parent.dir_mut()?.remove(&loc.name);
        parent.touch_mtime(now);
        let inode = self.get_mut(gfid)?;
        inode.attr.nlink -= 1;
        inode.attr.ctime = now;
        self.reap(gfid);
        Ok(())
    }

    /// Removes an empty directory.
    pub(crate) fn rmdir(&mut self, cx: &Ctx, loc: &Loc) -> Result<(), Errno> {
        perm::check_name(&loc.name)?;
        match loc.name.as_str() {
            "." => return Err(Errno::EINVAL),
            ".." => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        let p = self.parent_dir(cx, loc.parent, W)?;
        let gfid = self.child(loc.parent, &loc.name)?;
        let victim = self.get(gfid)?;
        if !victim.dir()?.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        perm::check_sticky(cx, &p, &victim.attr)?;
        let now = Timespec::now();
        let parent = self.get_mut(loc.parent)?;
        parent.dir_mut()?.remove(&loc.name);
        parent.touch_mtime(now);
        parent.attr.nlink -= 1;
        let inode = self.get_mut(gfid)?;
        inode.attr.nlink = 0;
        inode.attr.ctime = now;
        self.reap(gfid);
        Ok(())
    }

    /// Adds the name `new` for the non-directory `gfid`.
    pub(crate) fn link(&mut self, cx: &Ctx, gfid: Gfid, new: &Loc) -> Result<Iatt, Errno> {
        let src = self.attr(gfid)?;
        if src.kind == FileType::Directory {
            return Err(Errno::EPERM);
        }
        if src.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        perm::check_name(&new.name)?;
        if perm::is_dot(&new.name) {
            return Err(Errno::EEXIST);
        }
        let p = self.parent_dir(cx, new.parent, W)?;
        if p.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        if self.get(new.parent)?.dir()?.get(&new.name).is_some() {
            return Err(Errno::EEXIST);
        }
        let now = Timespec::now();
        let parent = self.get_mut(new.parent)?;
        parent.dir_mut()?.insert(&new.name, gfid);
        parent.touch_mtime(now);
        let inode = self.get_mut(gfid)?;
        inode.attr.nlink += 1;
        inode.attr.ctime = now;
        Ok(inode.attr)
    }

    /// `rename(2)` / `renameat2(2)` with RENAME_NOREPLACE and RENAME_EXCHANGE.
    pub(crate) fn rename(
        &mut self,
        cx: &Ctx,
        old: &Loc,
        new: &Loc,
        flags: u32,
    ) -> Result<(), Errno> {
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return Err(Errno::EINVAL);
        }
        perm::check_name(&old.name)?;
        perm::check_name(&new.name)?;
        if perm::is_dot(&old.name) || perm::is_dot(&new.name) {
            return Err(Errno::EINVAL);
        }
        let op = self.parent_dir(cx, old.parent, W)?;
        let np = self.parent_dir(cx, new.parent, W)?;
        let src_gfid = self.child(old.parent, &old.name)?;
        let src = self.attr(src_gfid)?;
        let dst = match self.get(new.parent)?.dir()?.get(&new.name) {
            Some(g) => Some(self.attr(g)?),
            None => None,
        };
        let exchange = flags & RENAME_EXCHANGE != 0;
        match &dst {
            None if exchange => return Err(Errno::ENOENT),
            Some(_) if flags & RENAME_NOREPLACE != 0 => return Err(Errno::EEXIST),
            Some(d) if d.gfid == src_gfid => return Ok(()),
            _ => {}
        }
        perm::check_sticky(cx, &op, &src)?;
        let moves_dir = |a: &Iatt| a.is_dir() && old.parent != new.parent;
        if moves_dir(&src) {
            // Moving a directory rewrites its "..": the caller needs write access to it.
            perm::check(cx, &src, W)?;
            if self.is_within(new.parent, src_gfid) {
                return Err(Errno::EINVAL);
            }
        }
        if np.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        if let Some(d) = &dst {
            perm::check_sticky(cx, &np, d)?;
            if exchange {
                if moves_dir(d) {
                    perm::check(cx, d, W)?;
                    if self.is_within(old.parent, d.gfid) {
                        return Err(Errno::EINVAL);
                    }
                }
            } else if src.is_dir() && !d.is_dir() {
                return Err(Errno::ENOTDIR);
            } else if !src.is_dir() && d.is_dir() {
                return Err(Errno::EISDIR);
            } else if d.is_dir() && !self.get(d.gfid)?.dir()?.is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
        }
        let now = Timespec::now();
        self.get_mut(old.parent)?.dir_mut()?.remove(&old.name);
        if let Some(d) = dst.filter(|_| !exchange) {
            self.get_mut(new.parent)?.dir_mut()?.remove(&new.name);
            let victim = self.get_mut(d.gfid)?;
            victim.attr.ctime = now;
            if d.is_dir() {
                victim.attr.nlink = 0;
                self.get_mut(new.parent)?.attr.nlink -= 1;
            } else {
                victim.attr.nlink -= 1;
            }
            self.reap(d.gfid);
        }
        self.place(src_gfid, &src, old.parent, new, now)?;
        if let Some(d) = dst.filter(|_| exchange) {
            self.place(d.gfid, &d, new.parent, old, now)?;
        }
        self.get_mut(old.parent)?.touch_mtime(now);
        self.get_mut(new.parent)?.touch_mtime(now);
        Ok(())
    }

    /// Names `gfid` (formerly in `from`) as `to`, fixing directory parents and link counts.
    fn place(
        &mut self,
        gfid: Gfid,
        a: &Iatt,
        from: Gfid,
        to: &Loc,
        now: Timespec,
    ) -> Result<(), Errno> {
        self.get_mut(to.parent)?.dir_mut()?.insert(&to.name, gfid);
        let inode = self.get_mut(gfid)?;
        inode.attr.ctime = now;
        if a.is_dir() && from != to.parent {
            inode.dir_mut()?.parent = to.parent;
            self.get_mut(from)?.attr.nlink -= 1;
            self.get_mut(to.parent)?.attr.nlink += 1;
        }
        Ok(())
    }

    /// Entries of directory `dir` after cookie `offset`, within about `size` bytes (at least
    /// one entry when any remain). No `.`/`..`. Each entry carries the xattrs `req` asks for.
    pub(crate) fn readdirp(
        &self,
        dir: Gfid,
        offset: u64,
        size: u32,
        req: Option<&XattrReq>,
    ) -> Result<Vec<DirEntry>, Errno> {
        let d = self.get(dir)?.dir()?;
        let Some(start) = offset.checked_add(1) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut used = 0u64;
        for (&cookie, name) in d.order.range(start..) {
            let cost = entry_cost(name);
            if !out.is_empty() && used + cost > u64::from(size) {
                break;
            }
            used += cost;
            let Some(gfid) = d.get(name) else { continue };
            out.push(DirEntry {
                name: name.as_str().into(),
                next_offset: cookie,
                attr: self.attr(gfid)?,
                xattrs: self.wanted_xattrs(gfid, req)?,
            });
        }
        Ok(out)
    }
}
