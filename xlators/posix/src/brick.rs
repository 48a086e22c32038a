//! The brick: handle directory, fd table and the helpers every fop family shares. Methods of
//! [`Brick`] run on the blocking pool, already under the caller's credentials.

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use xlator_api::{Errno, Gfid, Iatt};

use crate::creds::{self, Caller};
use crate::direct::DirectReads;
use crate::fdtable::FdTable;
use crate::gfid::{self, GfidXattr};
use crate::handle::{Handles, META_DIR};
use crate::iatt;
use crate::options::GfidXattrMode;
use crate::reaper::Reaper;
use crate::sys::{self, XTarget};

const STRIPES: usize = 64;
/// Locks serialising the making of a name with its GFID (see [`Brick::name_lock`]).
const NAME_STRIPES: usize = 256;
/// The staging directory under `.xlfs`, where objects made with
/// [`CreateXattrs`](xlator_api::CreateXattrs) get their xattrs before their name appears.
pub const STAGING_DIR: &str = "tmp";

pub struct Brick {
    pub h: Handles,
    pub fds: FdTable,
    /// The brick runs as root: switch fs credentials per job, trusted.* is available.
    pub root_mode: bool,
    /// The process's own supplementary groups, restored after each job.
    pub base_groups: Vec<u32>,
    /// Per-GFID serialisation of read-modify-write bookkeeping (xattrop, last-link checks).
    stripes: Vec<Mutex<()>>,
    /// Per-(parent, name) serialisation of "the name appears" with "it gets its GFID": an
    /// in-place create holds it from the syscall that makes the name until the GFID xattr is
    /// set, and a lookup or readdirp that finds an object without a GFID takes it before
    /// giving one, so it never gives a random GFID to an object being created (which then
    /// had two GFIDs and two handles).
    names: Vec<Mutex<()>>,
    /// `.xlfs/tmp` (`O_PATH`; mode 01777, reachable only through this fd since `.xlfs` is
    /// 0700): where staged creates make their objects as the caller (see staged.rs).
    pub staging: std::os::fd::OwnedFd,
    /// The heal index of objects with pending replicate counters (index.rs).
    pub index: crate::index::Index,
    /// Counters for the statedump.
    pub stats: crate::stats::Stats,
    /// Removes the handles of unlinked files after the reply.
    pub reaper: Reaper,
    /// Whether unlink leaves the handle to the reaper (option `background-unlink`).
    pub background_unlink: bool,
    /// How long a nameless file stays reachable by GFID (option `unlinked-grace`).
    pub unlinked_grace: std::time::Duration,
    /// Which cold reads go around the page cache (options `direct-read-min` and
    /// `direct-read-share-window`).
    pub direct: DirectReads,
    /// Whether read-only opens may hand out backing files (option `backing-files`).
    pub backing_files: std::sync::atomic::AtomicBool,
    /// Whether mknod may make device nodes (option `allow-devices`).
    pub allow_devices: std::sync::atomic::AtomicBool,
}

/// What an entry fop may do with a name at the brick root.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NameUse {
    Lookup,
    Modify,
}

impl Brick {
    /// Opens the brick directory, refusing one that is missing, not a directory, or on a file
    /// system without xattrs.
    pub fn mount(dir: &Path, mode: GfidXattrMode) -> Result<Brick, String> {
        let md = std::fs::metadata(dir).map_err(|e| {
            format!(
                "brick directory {dir:?} is not usable: {e} (create it before starting the brick)"
            )
        })?;
        if !md.is_dir() {
            return Err(format!("brick directory {dir:?} is not a directory"));
        }
        if !Path::new("/proc/self/fd").is_dir() {
            return Err(
                "storage/posix needs /proc mounted (it opens objects through /proc/self/fd)".into(),
            );
        }
        let root_mode = sys::geteuid() == 0;
        let dirp = sys::cstr(
            dir.to_str()
                .ok_or_else(|| format!("brick path {dir:?} is not UTF-8"))?,
        )
        .map_err(|e| e.to_string())?;
        let gx = choose_xattr(&dirp, mode, root_mode)?;
        let h = Handles::open(dir, gx)?;
        let staging = crate::staged::open_staging(&h)?;
        let index = crate::index::Index::open(dir)?;
        Ok(Brick {
            h,
            fds: FdTable::default(),
            root_mode,
            base_groups: sys::get_groups(),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            names: (0..NAME_STRIPES).map(|_| Mutex::new(())).collect(),
            staging,
            index,
            stats: Default::default(),
            reaper: Reaper::default(),
            background_unlink: true,
            unlinked_grace: std::time::Duration::ZERO,
            direct: DirectReads::default(),
            backing_files: std::sync::atomic::AtomicBool::new(true),
            allow_devices: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Where a cleanly stopped brick leaves its marker (see the reaper).
    pub fn clean_marker(&self) -> std::path::PathBuf {
        self.h
            .brick()
            .join(META_DIR)
            .join(crate::reaper::CLEAN_MARKER)
    }

    /// Removes the handle of the non-directory `g` (inode `ino`) if it is the object's last
    /// link, under its stripe lock; whether it did.
    pub fn reap(&self, g: Gfid, ino: u64) -> bool {
        let _g = self.stripe(g);
        let r = self.h.drop_if_last(g, ino);
        self.h.clear_pending(g);
        match r {
            Ok(removed) => {
                if removed {
                    self.index.drop_entry(g);
                }
                removed
            }
            Err(e) => {
                tracing::warn!(target: "xlfs::posix", "cannot remove the handle of {g}: {e:?}");
                false
            }
        }
    }

    /// After the name of non-directory `g` (inode `ino`) was removed, under its stripe lock:
    /// if the handle is now its only link, the object stays reachable by GFID for
    /// `unlinked_grace` (or is gone for GFID lookups at once without one), and the handle
    /// itself goes after that, off the reply path (see reaper.rs). Runs as root.
    pub fn release_handle(&self, g: Gfid, ino: u64) -> Result<(), Errno> {
        self.release_handle_after(g, ino, self.unlinked_grace)
    }

    /// [`Brick::release_handle`] with no grace, and the handle removed before the reply (not
    /// by the reaper): gone for GFID lookups at once, and the GFID free for a new object at
    /// once (rebalance makes a new copy of a file with the GFID of the one it removed).
    pub fn release_handle_now(&self, g: Gfid, ino: u64) -> Result<(), Errno> {
        self.h.drop_if_last(g, ino).map(drop)
    }

    fn release_handle_after(
        &self,
        g: Gfid,
        ino: u64,
        grace: std::time::Duration,
    ) -> Result<(), Errno> {
        if !self.h.is_last_link(g, ino)? {
            return Ok(());
        }
        if !self.background_unlink {
            self.h.drop_if_last(g, ino)?;
            return Ok(());
        }
        if grace.is_zero() {
            self.h.mark_pending(g);
        }
        if !self.reaper.queue(g, ino, std::time::Instant::now() + grace) {
            self.h.clear_pending(g);
            self.h.drop_if_last(g, ino)?;
        }
        Ok(())
    }

    pub fn gx(&self) -> GfidXattr {
        self.h.gx
    }

    /// Serialises bookkeeping on one GFID.
    pub fn stripe(&self, g: Gfid) -> MutexGuard<'_, ()> {
        self.stripes[stripe_of(g)]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Serialises making the name `(parent, name)` with giving it a GFID (see `names`).
    pub fn name_lock(&self, parent: Gfid, name: &str) -> MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (parent, name).hash(&mut h);
        self.names[(h.finish() % NAME_STRIPES as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the stripes of two GFIDs (once when they share one), in index order.
    pub fn stripe_pair(&self, a: Gfid, b: Option<Gfid>) -> Vec<MutexGuard<'_, ()>> {
        let mut idx = vec![stripe_of(a)];
        idx.extend(b.map(stripe_of));
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| self.stripes[i].lock().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }

    /// Recreates the handle of `(dir, name)` (GFID `g`) if it is missing (a crash between
    /// the GFID xattr and the handle link, or a handle removed by hand), and points a
    /// directory's link naming no directory of GFID `g` here.
    pub fn heal_handle(
        &self,
        g: Gfid,
        dir_gfid: Gfid,
        dir: BorrowedFd<'_>,
        name: &str,
        st: &libc::stat,
    ) {
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if is_dir {
            // A directory has one name: its link must name this place (one readlink).
            match creds::as_root(|| self.h.dir_link_is(g, dir_gfid, name)) {
                Ok(true) | Err(Errno::EINVAL) => return,
                Ok(false) => return self.repoint_dir_link(g, dir_gfid, dir, name),
                Err(_) => {}
            }
        }
        if !self.h.missing(g) {
            return;
        }
        let r = creds::as_root(|| {
            if is_dir {
                self.h.new_dir_link(g, dir_gfid, name)
            } else {
                self.h.link_object(g, dir, name)
            }
        });
        match r {
            Ok(()) => tracing::info!(target: "xlfs::posix", "recreated the missing handle of {g}"),
            Err(e) => {
                tracing::warn!(target: "xlfs::posix", "cannot recreate the handle of {g}: {e:?}")
            }
        }
    }

    /// Points the link of directory `g`, naming another place (a crash between a rename of
    /// it and the link's move), at `(dir, name)`, where a lookup found it: under `g`'s
    /// stripe lock, which a rename holds across its two steps, and only if `(dir, name)` is
    /// still `g` (not renamed meanwhile).
    fn repoint_dir_link(&self, g: Gfid, dir_gfid: Gfid, dir: BorrowedFd<'_>, name: &str) {
        let _s = self.stripe(g);
        let r = creds::as_root(|| -> Result<bool, Errno> {
            let p = sys::proc_child(dir, name)?;
            match self.gx().read(XTarget::NoFollow(&p)) {
                Ok(Some(now)) if now == g => {}
                // Renamed or replaced since the lookup found it.
                Ok(_) | Err(Errno::ENOENT) => return Ok(false),
                Err(e) => return Err(e),
            }
            if self.h.dir_link_is(g, dir_gfid, name)? {
                return Ok(false);
            }
            self.h.set_dir_link(g, dir_gfid, name).map(|()| true)
        });
        match r {
            Ok(true) => {
                tracing::info!(target: "xlfs::posix", "pointed the handle of directory {g} at {dir_gfid}/{name}")
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(target: "xlfs::posix", "cannot fix the handle of {g}: {e:?}"),
        }
    }

    /// Validates an entry name and returns it as a C string. At the brick root `..` means the
    /// root itself and the hidden `.xlfs` is invisible (lookup: ENOENT) and untouchable (EPERM).
    pub fn entry_name(&self, parent: Gfid, name: &str, usage: NameUse) -> Result<CString, Errno> {
        if name.is_empty() || name.contains('/') {
            return Err(Errno::EINVAL);
        }
        if parent == Gfid::ROOT {
            if name == META_DIR {
                return Err(if usage == NameUse::Lookup {
                    Errno::ENOENT
                } else {
                    Errno::EPERM
                });
            }
            if name == ".." {
                return Ok(c".".to_owned());
            }
        }
        sys::cstr(name)
    }

    /// The GFID of `(dir, name)`, assigning one (and its handle) to an object that has none,
    /// e.g. data that was on the brick before it became one. Assigning happens under the
    /// name's lock, re-checked there: an object being created holds it until its GFID is set.
    pub fn child_gfid(
        &self,
        dir_gfid: Gfid,
        dir: BorrowedFd<'_>,
        name: &str,
        st: &libc::stat,
    ) -> Result<Gfid, Errno> {
        creds::as_root(|| {
            let p = sys::proc_child(dir, name)?;
            if let Some(g) = self.gx().read(XTarget::NoFollow(&p))? {
                return Ok(g);
            }
            if name == "." || name == ".." {
                return Err(Errno::EIO);
            }
            let _n = self.name_lock(dir_gfid, name);
            if let Some(g) = self.gx().read(XTarget::NoFollow(&p))? {
                return Ok(g);
            }
            let g = Gfid::random();
            // Handle first, then the xattr: whoever sees the GFID also finds its handle.
            let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            if is_dir {
                self.h.new_dir_link(g, dir_gfid, name)?;
            } else {
                self.h.link_object(g, dir, name)?;
            }
            if let Err(e) = self.gx().write(XTarget::NoFollow(&p), g, true) {
                let _ = self.h.remove(g);
                return match e {
                    Errno::EEXIST => self.gx().read(XTarget::NoFollow(&p))?.ok_or(Errno::EIO),
                    e => Err(e),
                };
            }
            tracing::debug!(target: "xlfs::posix", "assigned gfid {g} to {name:?} in {dir_gfid}");
            Ok(g)
        })
    }

    /// Lstat + GFID of `(dir, name)` as an [`Iatt`].
    pub fn child_iatt(
        &self,
        dir_gfid: Gfid,
        dir: BorrowedFd<'_>,
        name: &str,
    ) -> Result<Iatt, Errno> {
        let st = sys::fstatat(dir, &sys::cstr(name)?, libc::AT_SYMLINK_NOFOLLOW)?;
        let g = self.child_gfid(dir_gfid, dir, name, &st)?;
        Ok(iatt::from_stat(&st, g))
    }

    /// Gives a freshly made `(dir, name)` a new random GFID and its handle; on failure
    /// removes it again. Only for objects made in place, without a requested GFID (those
    /// are staged: `EntryReq::staged`). The caller holds the name's
    /// [`name_lock`](Self::name_lock) since it made the name, so no lookup gives the object
    /// a GFID of its own meanwhile. The handle is made first (its link fails with EEXIST for
    /// a GFID in use anywhere on the brick), so whoever sees the GFID xattr finds the handle.
    pub fn adopt_new(
        &self,
        caller: &Caller,
        dir_gfid: Gfid,
        dir: BorrowedFd<'_>,
        name: &str,
    ) -> Result<Iatt, Errno> {
        let cname = sys::cstr(name)?;
        let st = sys::fstatat(dir, &cname, libc::AT_SYMLINK_NOFOLLOW)?;
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        let g = Gfid::random();
        let r = creds::as_root(|| {
            if is_dir {
                self.h.new_dir_link(g, dir_gfid, name)?;
            } else {
                self.h.link_object(g, dir, name)?;
            }
            let p = sys::proc_child(dir, name)?;
            self.gx()
                .write(XTarget::NoFollow(&p), g, true)
                .inspect_err(|_| {
                    let _ = self.h.remove(g);
                })
        });
        if let Err(e) = r {
            let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
            let _ = creds::as_root(|| sys::unlinkat(dir, &cname, flags));
            tracing::warn!(target: "xlfs::posix", "cannot give {name:?} (uid {}) gfid {g}: {e:?}", caller.uid);
            return Err(e);
        }
        let st = sys::fstatat(dir, &cname, libc::AT_SYMLINK_NOFOLLOW)?;
        Ok(iatt::from_stat(&st, g))
    }

    /// Attributes of the object behind an `O_PATH` or open fd.
    pub fn fd_iatt(&self, fd: BorrowedFd<'_>, g: Gfid) -> Result<Iatt, Errno> {
        Ok(iatt::from_stat(&sys::fstat(fd)?, g))
    }

    pub fn root_fd(&self) -> BorrowedFd<'_> {
        self.h.root().as_fd()
    }
}

fn stripe_of(g: Gfid) -> usize {
    usize::from(g.0[15]) % STRIPES
}

/// Picks the GFID xattr: an existing brick keeps the one its root already carries.
fn choose_xattr(dir: &CString, mode: GfidXattrMode, root_mode: bool) -> Result<GfidXattr, String> {
    let t = XTarget::Follow(dir);
    let candidates: Vec<&'static std::ffi::CStr> = match mode {
        GfidXattrMode::Trusted => vec![gfid::TRUSTED],
        GfidXattrMode::User => vec![gfid::USER],
        GfidXattrMode::Auto if root_mode => vec![gfid::TRUSTED, gfid::USER],
        GfidXattrMode::Auto => vec![gfid::USER],
    };
    for name in &candidates {
        let gx = GfidXattr(name);
        match gx.read(t) {
            Ok(Some(g)) if g == Gfid::ROOT => return Ok(gx),
            Ok(Some(g)) => {
                return Err(format!(
                    "brick directory {dir:?} has root gfid {g} in {name:?}, expected {}",
                    Gfid::ROOT
                ));
            }
            _ => {}
        }
    }
    let mut last = Errno::ENOTSUP;
    for name in candidates {
        let gx = GfidXattr(name);
        match gx.write(t, Gfid::ROOT, false) {
            Ok(()) => return Ok(gx),
            Err(e) => last = e,
        }
    }
    if last == Errno::ENOTSUP {
        Err(format!(
            "the file system of brick directory {dir:?} does not support extended attributes; \
             use ext4, xfs or btrfs (xattrs enabled)"
        ))
    } else {
        Err(format!(
            "cannot store the gfid xattr on brick directory {dir:?}: {last}"
        ))
    }
}
