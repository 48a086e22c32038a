//! Creates that carry [`CreateXattrs`](xlator_api::CreateXattrs) or a requested GFID
//! ([`GfidReq`](xlator_api::GfidReq), as cluster translators send): the new name appears
//! with its GFID and every requested xattr already set, or not at all (a brick killed
//! mid-create leaves no name without its GFID; see `EntryReq::staged`).
//!
//! - `create`: an `O_TMPFILE` in the parent, made as the caller (so ownership, setgid
//!   inheritance, default ACLs and the parent's write permission are the kernel's), gets its
//!   GFID, xattrs and handle through its fd, then is linked into place as the caller with
//!   `linkat` (EEXIST if the name exists by then: the file is dropped with its handle).
//! - `mkdir`, `mknod`, `symlink`: the object is made as the caller under a random name in
//!   `.xlfs/tmp` (mode 01777, but reachable only through the brick's fd: `.xlfs` is 0700), its
//!   group fixed as a setgid parent would have given it, its GFID, xattrs and handle set as
//!   root, then renamed into place with `RENAME_NOREPLACE` (as root: a directory without
//!   owner write could not be moved by its owner, so the caller's write and search
//!   permission on the parent is checked first with `faccessat`). On any failure the staged
//!   object and its handle are removed. What the kernel would have done in the parent is
//!   done by hand, as root: a setgid parent's group (and, for a directory, its setgid bit),
//!   setgid stripped from a non-directory of a creator outside that group (`mode_strip_sgid`),
//!   and the parent's default ACL in place of the umask ([`crate::acl`]); the mode is set
//!   last, since the chown clears setuid.
//!
//! The xattrs are set with the brick's privileges whatever the caller: they come from the
//! cluster translators of the graph (no host turns a user's request into `CreateXattrs`), and
//! replicate and distribute need `trusted.*` bookkeeping on files users create. Brick-internal
//! names are refused (EPERM). A non-zero replicate pending counter among them puts the
//! object in the heal index first (index.rs). Staged objects left by a crash are removed at
//! start.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use xlator_api::{Errno, Gfid, Iatt};

use crate::acl;
use crate::brick::{Brick, STAGING_DIR};
use crate::creds::{self, Caller};
use crate::gfid::is_internal;
use crate::handle::{Handles, META_DIR};
use crate::stats::Stats;
use crate::sys::{self, XTarget};

/// What a staged create makes.
pub enum Kind<'a> {
    Dir { mode: u32 },
    Node { mode: u32, rdev: u64 },
    Symlink { target: &'a CStr },
}

/// An xattr to set at creation, name checked.
type Checked = (CString, Vec<u8>);

/// Checks the names of `CreateXattrs`: brick-internal ones cannot be set (EPERM).
pub fn check_names(xs: &[(String, Vec<u8>)]) -> Result<Vec<Checked>, Errno> {
    xs.iter()
        .map(|(n, v)| {
            if n.is_empty() {
                return Err(Errno::EINVAL);
            }
            if is_internal(n) {
                return Err(Errno::EPERM);
            }
            Ok((sys::cstr(n)?, v.clone()))
        })
        .collect()
}

/// Opens (making it if needed) `.xlfs/tmp` and empties it: whatever is there was staged by a
/// brick that stopped before renaming it into place.
pub fn open_staging(h: &Handles) -> Result<OwnedFd, String> {
    let rel = format!("{META_DIR}/{STAGING_DIR}");
    let path = h.brick().join(&rel);
    let crel = sys::cstr(&rel).map_err(|e| e.to_string())?;
    match sys::mkdirat(h.root().as_fd(), &crel, 0o700) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(format!("cannot create {path:?}: {e}")),
    }
    let fd = sys::openat(
        Some(h.root().as_fd()),
        &crel,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .map_err(|e| format!("cannot open {path:?}: {e}"))?;
    // Callers make their objects here under their own ids (see the module docs).
    sys::chmod(&sys::proc_path(fd.as_fd()), 0o1777)
        .map_err(|e| format!("cannot chmod {path:?}: {e}"))?;
    let list = sys::openat(
        None,
        &sys::proc_path(fd.as_fd()),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    )
    .map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let batch = sys::getdents(list.as_fd(), &mut buf)
            .map_err(|e| format!("cannot read {path:?}: {e}"))?;
        if batch.is_empty() {
            break;
        }
        for d in batch {
            if d.name == b"." || d.name == b".." {
                continue;
            }
            let Ok(n) = CString::new(d.name) else {
                continue;
            };
            let r = match sys::unlinkat(fd.as_fd(), &n, 0) {
                Err(Errno::EISDIR) => sys::unlinkat(fd.as_fd(), &n, libc::AT_REMOVEDIR),
                r => r,
            };
            if let Err(e) = r {
                tracing::warn!(target: "xlfs::posix", "cannot remove staged {n:?} in {path:?}: {e:?}");
            }
        }
    }
    Ok(fd)
}

/// Removes what a failed staged create made (run as root).
struct Undo<'a> {
    b: &'a Brick,
    staged: Option<(CString, bool)>,
    handle: Option<Gfid>,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        creds::as_root(|| {
            if let Some(g) = self.handle {
                let _ = self.b.h.remove(g);
            }
            if let Some((n, dir)) = &self.staged {
                let flags = if *dir { libc::AT_REMOVEDIR } else { 0 };
                let _ = sys::unlinkat(self.b.staging.as_fd(), n, flags);
            }
        });
    }
}

impl Undo<'_> {
    fn done(mut self) {
        self.staged = None;
        self.handle = None;
    }
}

/// The GFID a new object gets: the requested one, refused (EEXIST) if the brick knows it.
/// A dangling directory link of that GFID ([`Handles::dangling_dir_link`]: a crash between
/// a staged mkdir's two steps) is removed first: otherwise the heal that makes the missing
/// directory on this brick would fail on it forever.
///
/// [`Handles::dangling_dir_link`]: crate::handle::Handles::dangling_dir_link
fn new_gfid(b: &Brick, req: Option<Gfid>) -> Result<Gfid, Errno> {
    let g = req.filter(|g| !g.is_null()).unwrap_or_else(Gfid::random);
    if g == Gfid::ROOT {
        return Err(Errno::EEXIST);
    }
    if b.h.exists(g) {
        if !b.h.dangling_dir_link(g) {
            return Err(Errno::EEXIST);
        }
        tracing::warn!(target: "xlfs::posix", "removing the dangling directory handle of {g} (a crash mid-mkdir or mid-rename) to make it anew");
        b.h.remove(g)?;
    }
    Ok(g)
}

fn set_all(b: &Brick, t: XTarget<'_>, g: Gfid, xs: &[Checked]) -> Result<(), Errno> {
    b.gx().write(t, g, true)?;
    // A replicate pending counter born non-zero (a create carrying its pre-op) is in the heal
    // index before it is set, as an xattrop's would be (index.rs). The GFID is new: nobody
    // else can update its counters meanwhile.
    let writes: Vec<(&str, &[u8])> = xs
        .iter()
        .filter_map(|(n, v)| Some((n.to_str().ok()?, v.as_slice())))
        .collect();
    b.index_before(g, &writes)?;
    for (n, v) in xs {
        sys::setxattr(t, n, v, 0)?;
    }
    Ok(())
}

/// Gives the staged object `obj` (at `t`) what being made in the parent `pfd` would have
/// given it (see the module docs). `asked`: the mode of the create, before any umask when
/// the kernel applies the umask ([`Caller::kernel_umask`]); `None` for a symlink, which has
/// neither ACLs nor a mode of its own (only the group applies). Runs as root.
fn inherit_from_parent(
    c: &Caller,
    pfd: BorrowedFd<'_>,
    obj: BorrowedFd<'_>,
    t: XTarget<'_>,
    is_dir: bool,
    asked: Option<u32>,
) -> Result<(), Errno> {
    let pst = sys::fstat(pfd)?;
    let Some(asked) = asked else {
        if pst.st_mode & libc::S_ISGID != 0 {
            sys::fchown_obj(obj, None, Some(pst.st_gid))?;
        }
        return Ok(());
    };
    let made = sys::fstat(obj)?.st_mode & 0o7777;
    let mut mode = made;
    let default = match sys::getxattr(XTarget::Follow(&sys::proc_path(pfd)), acl::DEFAULT) {
        Ok(v) => Some(v),
        Err(Errno::ENODATA | Errno::ENOTSUP) => None,
        Err(e) => return Err(e),
    };
    let mut access = None;
    if let Some(d) = &default {
        let i = acl::inherit(d, asked).ok_or(Errno::EIO)?;
        mode = i.mode;
        access = i.access;
        if is_dir {
            sys::setxattr(t, acl::DEFAULT, d, 0)?;
        }
    }
    if pst.st_mode & libc::S_ISGID != 0 {
        sys::fchown_obj(obj, None, Some(pst.st_gid))?;
        let sgid_x = libc::S_ISGID | libc::S_IXGRP;
        if is_dir {
            mode |= libc::S_ISGID;
        } else if mode & sgid_x == sgid_x && !c.in_group(pst.st_gid) && !c.is_root() {
            mode &= !libc::S_ISGID;
        }
    }
    if let Some(a) = &access {
        sys::setxattr(t, acl::ACCESS, a, 0)?;
    }
    // Also when unchanged after a chown, which cleared setuid (and setgid with group execute).
    if mode != made || pst.st_mode & libc::S_ISGID != 0 {
        sys::chmod(&sys::proc_path(obj), mode)?;
    }
    Ok(())
}

impl Brick {
    /// `mkdir`/`mknod`/`symlink` of `name` in `parent` (open as `pfd`) with xattrs: see the
    /// module docs. Runs as the caller.
    #[allow(clippy::too_many_arguments)]
    pub fn make_staged(
        &self,
        c: &Caller,
        req: Option<Gfid>,
        parent: Gfid,
        pfd: BorrowedFd<'_>,
        name: &CStr,
        kind: Kind<'_>,
        xs: &[(String, Vec<u8>)],
    ) -> Result<Iatt, Errno> {
        let xs = check_names(xs)?;
        // A requested GFID is held (its stripe lock) from the check that it is free to the
        // rename into place, and past the undo of a failure: another create of it on this
        // brick (a heal racing a client's mkdir) waits, then finds it taken, instead of
        // taking this one's link, made but not yet pointing at anything, for a dangling one.
        let _held = req.filter(|g| !g.is_null()).map(|g| self.stripe(g));
        // A name that exists answers EEXIST before any permission problem, as mkdir(2).
        match sys::fstatat(pfd, name, libc::AT_SYMLINK_NOFOLLOW) {
            Ok(_) => return Err(Errno::EEXIST),
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(e),
        }
        sys::eaccess(&sys::proc_path(pfd), libc::W_OK | libc::X_OK)?;
        let tmp = sys::cstr(&Gfid::random().to_string())?;
        let st = self.staging.as_fd();
        let is_dir = matches!(kind, Kind::Dir { .. });
        let asked = match kind {
            Kind::Dir { mode } | Kind::Node { mode, .. } => Some(mode),
            Kind::Symlink { .. } => None,
        };
        match kind {
            Kind::Dir { mode } => sys::mkdirat(st, &tmp, mode)?,
            Kind::Node { mode, rdev } => sys::mknodat(st, &tmp, mode, rdev)?,
            Kind::Symlink { target } => sys::symlinkat(target, st, &tmp)?,
        }
        let mut undo = Undo {
            b: self,
            staged: Some((tmp.clone(), is_dir)),
            handle: None,
        };
        let name_s = name.to_str().map_err(|_| Errno::EINVAL)?;
        let attr = creds::as_root(|| -> Result<Iatt, Errno> {
            let obj = sys::openat(Some(st), &tmp, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
            let p = sys::proc_child(st, &tmp.to_string_lossy())?;
            inherit_from_parent(c, pfd, obj.as_fd(), XTarget::NoFollow(&p), is_dir, asked)?;
            let g = new_gfid(self, req)?;
            if is_dir {
                self.h.new_dir_link(g, parent, name_s)?;
            } else {
                self.h.link_object(g, st, &tmp.to_string_lossy())?;
            }
            undo.handle = Some(g);
            set_all(self, XTarget::NoFollow(&p), g, &xs)?;
            sys::renameat2(st, &tmp, pfd, name, libc::RENAME_NOREPLACE)?;
            Ok(crate::iatt::from_stat(&sys::fstat(obj.as_fd())?, g))
        })
        .inspect_err(|e| {
            Stats::bump(&self.stats.staged_failed);
            tracing::debug!(target: "xlfs::posix", "staged create of {name:?} (uid {}) failed: {e:?}", c.uid);
        })?;
        undo.done();
        Stats::bump(&self.stats.staged_creates);
        Ok(attr)
    }

    /// `create` with xattrs of a regular file `name` in `pfd`: an `O_TMPFILE` made as the
    /// caller gets its GFID, xattrs and handle, then is linked into place. `None` when the
    /// name exists (nothing is left behind). Returns the file open with `flags` (creation
    /// flags dropped; O_DIRECT only if the file system took it) and the flags in effect.
    pub fn create_tmpfile(
        &self,
        req: Option<Gfid>,
        pfd: BorrowedFd<'_>,
        name: &CStr,
        flags: i32,
        perm: u32,
        xs: &[Checked],
    ) -> Result<Option<(OwnedFd, i32, Iatt)>, Errno> {
        let base = flags
            & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_PATH);
        // O_TMPFILE needs write access; other access modes are reopened below.
        let tflags = (base & !libc::O_ACCMODE) | libc::O_RDWR | libc::O_TMPFILE;
        let (file, in_effect) = crate::data::open_direct_fallback(Some(pfd), c".", tflags, perm)?;
        let keep = if in_effect & libc::O_DIRECT == 0 {
            base & !libc::O_DIRECT
        } else {
            base
        };
        let mut undo = Undo {
            b: self,
            staged: None,
            handle: None,
        };
        let failed = |e| {
            Stats::bump(&self.stats.staged_failed);
            e
        };
        // `None`: the requested GFID is taken, maybe by the file of this name (a create
        // without O_EXCL then opens it, and the caller checks its GFID).
        let g = creds::as_root(|| -> Result<Option<Gfid>, Errno> {
            let g = match new_gfid(self, req) {
                Err(Errno::EEXIST)
                    if sys::fstatat(pfd, name, libc::AT_SYMLINK_NOFOLLOW).is_ok() =>
                {
                    return Ok(None);
                }
                r => r?,
            };
            self.h.link_fd(g, file.as_fd())?;
            undo.handle = Some(g);
            set_all(self, XTarget::Fd(file.as_raw_fd()), g, xs)?;
            Ok(Some(g))
        })
        .map_err(failed)?;
        let Some(g) = g else {
            failed(Errno::EEXIST);
            return Ok(None);
        };
        let src = sys::proc_path(file.as_fd());
        match sys::linkat(None, &src, pfd, name, libc::AT_SYMLINK_FOLLOW) {
            Ok(()) => {}
            Err(Errno::EEXIST) => {
                failed(Errno::EEXIST);
                return Ok(None);
            }
            Err(e) => return Err(failed(e)),
        }
        undo.done();
        Stats::bump(&self.stats.staged_creates);
        let attr = crate::iatt::from_stat(&sys::fstat(file.as_fd())?, g);
        if keep & libc::O_ACCMODE != libc::O_RDWR {
            // The fd gets the access asked for (the O_TMPFILE one reads and writes), whatever
            // the file's mode, as with open(2) and O_CREAT: reopened as root.
            let (file, keep) =
                creds::as_root(|| crate::data::open_direct_fallback(None, &src, keep, 0))?;
            return Ok(Some((file, keep, attr)));
        }
        Ok(Some((file, keep, attr)))
    }
}
