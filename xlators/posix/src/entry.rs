//! Entry fops: names inside a parent directory resolved through the parent's handle, with the
//! `*at` syscalls run under the caller's credentials.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{
    CreateXattrs, Ctx, Entry, Errno, Fd, FileType, Gfid, GfidReq, Iatt, Loc, Removed, XattrReq,
};

use crate::brick::{Brick, NameUse};
use crate::creds::{self, Caller};
use crate::fdtable::OpenFile;
use crate::staged::Kind;
use crate::sys::{self, XTarget};

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// What the caller's context asks of an entry fop (its extensions, decoded once).
#[derive(Default)]
pub struct EntryReq {
    /// [`GfidReq`](xlator_api::GfidReq): the GFID a new object gets.
    pub gfid: Option<Gfid>,
    /// [`XattrReq`]: xattrs for the reply (never an empty one).
    pub want: Option<XattrReq>,
    /// [`CreateXattrs`]: xattrs the new object has from the moment its name appears (never
    /// an empty one).
    pub set: Option<CreateXattrs>,
}

/// No xattrs to set, for [`EntryReq::staged`].
const NONE: &[(String, Vec<u8>)] = &[];

impl EntryReq {
    pub fn from_ctx(cx: &Ctx) -> EntryReq {
        EntryReq {
            gfid: cx.ext::<GfidReq>().map(|r| r.0),
            want: want(cx),
            set: cx.ext::<CreateXattrs>().filter(|x| !x.0.is_empty()),
        }
    }

    /// The xattrs of a new object made the staged way (`crate::staged`: its name appears
    /// with its GFID set, or not at all), `None` for the plain way (made in place, then
    /// given its GFID). Staged whenever the object has xattrs to carry or a requested GFID:
    /// a cluster translator asks for the GFID its other children give the object, and a
    /// brick killed between the plain way's two steps would leave a name without a GFID,
    /// which its next lookup gives a random one (a GFID split-brain between replicas).
    /// Without either (one brick: any GFID will do), the plain way is a little cheaper.
    pub fn staged(&self) -> Option<&[(String, Vec<u8>)]> {
        match (&self.set, self.gfid) {
            (Some(xs), _) => Some(&xs.0),
            (None, Some(g)) if !g.is_null() => Some(NONE),
            (None, _) => None,
        }
    }
}

/// The [`XattrReq`] of `cx`, unless it asks for nothing.
pub fn want(cx: &Ctx) -> Option<XattrReq> {
    cx.ext::<XattrReq>().filter(|r| !r.is_empty())
}

/// The parent's attributes after an entry fop (one `fstat` of its cached fd). `RNone` if that
/// fails: the reply is still right, the host just asks again.
fn postparent(pfd: BorrowedFd<'_>, parent: Gfid) -> ROption<Iatt> {
    sys::fstat(pfd)
        .ok()
        .map(|st| crate::iatt::from_stat(&st, parent))
        .into()
}

/// An entry made or opened in `parent`, with the parent's attributes and the xattrs asked
/// for (`ask`), read from the new object at its target.
fn made(
    attr: Iatt,
    pfd: BorrowedFd<'_>,
    parent: Gfid,
    ask: Option<(XTarget<'_>, &XattrReq)>,
) -> Result<Entry, Errno> {
    let xattrs = match ask {
        Some((t, w)) => crate::wanted::read(t, attr.gfid, w)?,
        None => Default::default(),
    };
    Ok(Entry {
        attr,
        postparent: postparent(pfd, parent),
        xattrs,
    })
}

/// `made` for an object known as `name` in `pfd`.
fn made_at(
    attr: Iatt,
    pfd: BorrowedFd<'_>,
    parent: Gfid,
    name: &str,
    want: Option<&XattrReq>,
) -> Result<Entry, Errno> {
    match want {
        Some(w) => {
            let p = sys::proc_child(pfd, name)?;
            made(attr, pfd, parent, Some((XTarget::NoFollow(&p), w)))
        }
        None => made(attr, pfd, parent, None),
    }
}

/// Conditions on an `unlink` from the context ([`xlator_api::UnlinkExact`],
/// [`xlator_api::UnlinkUnlessMarked`]).
#[derive(Default)]
pub struct UnlinkIf {
    /// Only while the name names this GFID (else ESTALE); the object is then unreachable by
    /// GFID at once if this was its last name.
    pub exact: Option<Gfid>,
    /// Not a regular file with exactly these permission bits carrying this xattr (EEXIST).
    pub unless: Option<xlator_api::UnlinkUnlessMarked>,
}

impl Brick {
    pub fn lookup(&self, loc: &Loc, want: Option<&XattrReq>) -> Result<Entry, Errno> {
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Lookup)?;
        let pfd = self.h.resolve_dir(loc.parent)?;
        let st = sys::fstatat(pfd.as_fd(), &name, libc::AT_SYMLINK_NOFOLLOW)?;
        let n = name.to_str().map_err(|_| Errno::EINVAL)?;
        let g = if loc.parent == Gfid::ROOT && n == "." {
            Gfid::ROOT
        } else {
            let g = self.child_gfid(loc.parent, pfd.as_fd(), n, &st)?;
            if n != "." && n != ".." {
                self.heal_handle(g, loc.parent, pfd.as_fd(), n, &st);
            }
            g
        };
        let mut e = Entry::new(crate::iatt::from_stat(&st, g));
        if let Some(w) = want {
            let p = sys::proc_child(pfd.as_fd(), n)?;
            e.xattrs = crate::wanted::read(XTarget::NoFollow(&p), g, w)?;
        }
        Ok(e)
    }

    pub fn mkdir(
        &self,
        c: &Caller,
        r: &EntryReq,
        loc: &Loc,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Modify)?;
        let pfd = self.h.resolve_dir(loc.parent)?;
        let mode = c.create_mode(mode, umask);
        let attr = match r.staged() {
            Some(xs) => self.make_staged(
                c,
                r.gfid,
                loc.parent,
                pfd.as_fd(),
                &name,
                Kind::Dir { mode },
                xs,
            )?,
            None => {
                let _n = self.name_lock(loc.parent, &loc.name);
                sys::mkdirat(pfd.as_fd(), &name, mode)?;
                self.adopt_new(c, loc.parent, pfd.as_fd(), &loc.name)?
            }
        };
        made_at(attr, pfd.as_fd(), loc.parent, &loc.name, r.want.as_ref())
    }

    pub fn mknod(
        &self,
        c: &Caller,
        r: &EntryReq,
        loc: &Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Modify)?;
        match FileType::from_mode(mode) {
            Some(FileType::Directory | FileType::Symlink) | None => return Err(Errno::EINVAL),
            // Device nodes only where the brick allows them (option `allow-devices`).
            Some(FileType::CharDevice | FileType::BlockDevice)
                if !self
                    .allow_devices
                    .load(std::sync::atomic::Ordering::Relaxed) =>
            {
                return Err(Errno::EPERM);
            }
            Some(_) => {}
        }
        let pfd = self.h.resolve_dir(loc.parent)?;
        let m = (mode & libc::S_IFMT) | c.create_mode(mode, umask);
        let attr = match r.staged() {
            Some(xs) => self.make_staged(
                c,
                r.gfid,
                loc.parent,
                pfd.as_fd(),
                &name,
                Kind::Node { mode: m, rdev },
                xs,
            )?,
            None => {
                let _n = self.name_lock(loc.parent, &loc.name);
                sys::mknodat(pfd.as_fd(), &name, m, rdev)?;
                self.adopt_new(c, loc.parent, pfd.as_fd(), &loc.name)?
            }
        };
        made_at(attr, pfd.as_fd(), loc.parent, &loc.name, r.want.as_ref())
    }

    pub fn symlink(
        &self,
        c: &Caller,
        r: &EntryReq,
        loc: &Loc,
        target: &str,
    ) -> Result<Entry, Errno> {
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Modify)?;
        let pfd = self.h.resolve_dir(loc.parent)?;
        let target = sys::cstr(target)?;
        let attr = match r.staged() {
            Some(xs) => self.make_staged(
                c,
                r.gfid,
                loc.parent,
                pfd.as_fd(),
                &name,
                Kind::Symlink { target: &target },
                xs,
            )?,
            None => {
                let _n = self.name_lock(loc.parent, &loc.name);
                sys::symlinkat(&target, pfd.as_fd(), &name)?;
                self.adopt_new(c, loc.parent, pfd.as_fd(), &loc.name)?
            }
        };
        made_at(attr, pfd.as_fd(), loc.parent, &loc.name, r.want.as_ref())
    }

    /// Creates (or, without O_EXCL, opens an existing) regular file and registers `fd`. With
    /// a [`GfidReq`](xlator_api::GfidReq), an existing file of another GFID is EEXIST even
    /// without O_EXCL: the caller asked for a specific identity, and two replicas must not
    /// silently open different ones.
    pub fn create(
        &self,
        c: &Caller,
        r: &EntryReq,
        loc: &Loc,
        fd: &Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Modify)?;
        let pfd = self.h.resolve_dir(loc.parent)?;
        let perm = c.create_mode(mode, umask);
        let base = fd.flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_PATH);
        let set = match r.staged() {
            Some(xs) => Some(crate::staged::check_names(xs)?),
            None => None,
        };
        let want = r.want.as_ref();
        for _ in 0..8 {
            let made_now = match &set {
                Some(xs) => self.create_tmpfile(r.gfid, pfd.as_fd(), &name, base, perm, xs)?,
                None => {
                    let _n = self.name_lock(loc.parent, &loc.name);
                    match crate::data::open_direct_fallback(
                        Some(pfd.as_fd()),
                        &name,
                        base | libc::O_CREAT | libc::O_EXCL,
                        perm,
                    ) {
                        Ok((file, flags)) => {
                            let attr = self.adopt_new(c, loc.parent, pfd.as_fd(), &loc.name)?;
                            Some((file, flags, attr))
                        }
                        Err(Errno::EEXIST) => None,
                        Err(e) => return Err(e),
                    }
                }
            };
            if let Some((file, flags, attr)) = made_now {
                let ask = want.map(|w| (XTarget::Fd(file.as_raw_fd()), w));
                let e = made(attr, pfd.as_fd(), loc.parent, ask)?;
                self.fds
                    .insert(fd.id, OpenFile::new(file, attr.gfid, flags, false))?;
                return Ok(e);
            }
            if fd.flags & libc::O_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            match crate::data::open_direct_fallback(
                Some(pfd.as_fd()),
                &name,
                base | libc::O_NOFOLLOW,
                0,
            ) {
                Ok((file, flags)) => {
                    let st = sys::fstat(file.as_fd())?;
                    if is_dir(&st) {
                        return Err(Errno::EISDIR);
                    }
                    let g = self.child_gfid(loc.parent, pfd.as_fd(), &loc.name, &st)?;
                    if r.gfid.is_some_and(|rg| !rg.is_null() && rg != g) {
                        return Err(Errno::EEXIST);
                    }
                    let attr = crate::iatt::from_stat(&st, g);
                    let ask = want.map(|w| (XTarget::Fd(file.as_raw_fd()), w));
                    let e = made(attr, pfd.as_fd(), loc.parent, ask)?;
                    self.fds
                        .insert(fd.id, OpenFile::new(file, g, flags, false))?;
                    return Ok(e);
                }
                Err(Errno::ENOENT) => continue, // removed in between: try creating again
                Err(e) => return Err(e),
            }
        }
        Err(Errno::EAGAIN)
    }

    /// Removes a non-directory name, under the conditions of `cond`.
    pub fn unlink(&self, loc: &Loc, cond: &UnlinkIf) -> Result<Removed, Errno> {
        let exact = cond.exact;
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Modify)?;
        let pfd = self.h.resolve_dir(loc.parent)?;
        let st = sys::fstatat(pfd.as_fd(), &name, libc::AT_SYMLINK_NOFOLLOW)?;
        if is_dir(&st) {
            return Err(Errno::EISDIR);
        }
        let g = self.child_gfid(loc.parent, pfd.as_fd(), &loc.name, &st)?;
        if exact.is_some_and(|x| x != g) {
            return Err(Errno::ESTALE);
        }
        if let Some(u) = &cond.unless
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_mode & 0o7777 == u.perm
        {
            let x = std::ffi::CString::new(u.xattr.as_str()).map_err(|_| Errno::EINVAL)?;
            let marked = creds::as_root(|| {
                let p = sys::proc_child(pfd.as_fd(), name.to_str().map_err(|_| Errno::EINVAL)?)?;
                match sys::getxattr(XTarget::NoFollow(&p), &x) {
                    Ok(_) => Ok(true),
                    Err(Errno::ENODATA) => Ok(false),
                    Err(e) => Err(e),
                }
            })?;
            if marked {
                return Err(Errno::EEXIST);
            }
        }
        let _g = self.stripe(g);
        sys::unlinkat(pfd.as_fd(), &name, 0)?;
        let postparent = postparent(pfd.as_fd(), loc.parent);
        creds::as_root(|| {
            if exact.is_some() {
                self.release_handle_now(g, st.st_ino)
            } else {
                self.release_handle(g, st.st_ino)
            }
        })?;
        Ok(Removed { postparent })
    }

    pub fn rmdir(&self, loc: &Loc) -> Result<Removed, Errno> {
        let name = self.entry_name(loc.parent, &loc.name, NameUse::Modify)?;
        if name.as_bytes() == b"." {
            return Err(Errno::EINVAL);
        }
        let pfd = self.h.resolve_dir(loc.parent)?;
        let st = sys::fstatat(pfd.as_fd(), &name, libc::AT_SYMLINK_NOFOLLOW)?;
        if !is_dir(&st) {
            return Err(Errno::ENOTDIR);
        }
        let g = creds::as_root(|| {
            let p = sys::proc_child(pfd.as_fd(), &loc.name)?;
            self.gx().read(sys::XTarget::NoFollow(&p))
        })?;
        sys::unlinkat(pfd.as_fd(), &name, libc::AT_REMOVEDIR)?;
        let postparent = postparent(pfd.as_fd(), loc.parent);
        if let Some(g) = g {
            let _s = self.stripe(g);
            creds::as_root(|| self.h.remove(g))?;
            // The directory is gone: so is any heal index entry of it (a replicate hold of
            // its names that ended after it went could not clear its counters).
            self.index.drop_entry(g);
        }
        Ok(Removed { postparent })
    }

    pub fn link(&self, gfid: Gfid, new: &Loc, want: Option<&XattrReq>) -> Result<Entry, Errno> {
        let name = self.entry_name(new.parent, &new.name, NameUse::Modify)?;
        let obj = self.h.resolve(gfid)?;
        let npfd = self.h.resolve_dir(new.parent)?;
        let _g = self.stripe(gfid);
        let st = sys::fstat(obj.as_fd())?;
        if is_dir(&st) {
            return Err(Errno::EPERM);
        }
        if st.st_nlink <= 1 {
            // Only its handle is left: unlinked, the handle not yet reaped.
            return Err(Errno::ESTALE);
        }
        let src = sys::proc_path(obj.as_fd());
        sys::linkat(None, &src, npfd.as_fd(), &name, libc::AT_SYMLINK_FOLLOW)?;
        let attr = self.fd_iatt(obj.as_fd(), gfid)?;
        let ask = want.map(|w| (XTarget::Follow(&src), w));
        made(attr, npfd.as_fd(), new.parent, ask)
    }

    pub fn rename(&self, old: &Loc, new: &Loc, flags: u32) -> Result<(), Errno> {
        let oname = self.entry_name(old.parent, &old.name, NameUse::Modify)?;
        let nname = self.entry_name(new.parent, &new.name, NameUse::Modify)?;
        let opfd = self.h.resolve_dir(old.parent)?;
        let npfd = self.h.resolve_dir(new.parent)?;
        let sst = sys::fstatat(opfd.as_fd(), &oname, libc::AT_SYMLINK_NOFOLLOW)?;
        let sg = self.child_gfid(old.parent, opfd.as_fd(), &old.name, &sst)?;
        let dst = match sys::fstatat(npfd.as_fd(), &nname, libc::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Some((
                st,
                self.child_gfid(new.parent, npfd.as_fd(), &new.name, &st)?,
            )),
            Err(Errno::ENOENT) => None,
            Err(e) => return Err(e),
        };
        let guards = self.stripe_pair(sg, dst.as_ref().map(|(_, g)| *g));
        sys::renameat2(opfd.as_fd(), &oname, npfd.as_fd(), &nname, flags)?;
        creds::as_root(|| -> Result<(), Errno> {
            if is_dir(&sst) {
                self.h.set_dir_link(sg, new.parent, &new.name)?;
            }
            let Some((dst_st, dg)) = dst else {
                return Ok(());
            };
            if dst_st.st_ino == sst.st_ino && dst_st.st_dev == sst.st_dev {
                return Ok(());
            }
            if flags & libc::RENAME_EXCHANGE != 0 {
                if is_dir(&dst_st) {
                    self.h.set_dir_link(dg, old.parent, &old.name)?;
                }
            } else if is_dir(&dst_st) {
                self.h.remove(dg)?;
            } else {
                self.release_handle(dg, dst_st.st_ino)?;
            }
            Ok(())
        })?;
        drop(guards);
        Ok(())
    }
}
