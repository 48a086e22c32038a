//! The handle directory `<brick>/.xlfs/gfid/ab/<gfid>` maps a GFID to its object so any
//! object opens without a path:
//! - files, symlinks and special files: a hard link to the object;
//! - directories: a symlink `../<p0>/<parent-gfid>/<name>` through the parent's handle
//!   (as GlusterFS), so renaming a directory rewrites only its own handle;
//! - the root (`Gfid::ROOT`) is the brick directory itself (its handle is `../../..`).
//!
//! Bricks made before the flat layout keep theirs: `.xlfs/handles/ab/cd/<gfid>` with
//! `../../`-relative directory links (see [`Layout`]). The handle directory's name tells them
//! apart, so no marker file can go missing.
//!
//! Directory handles are resolved in user space, one component per level (the kernel's limit
//! of 40 nested symlinks would break deep trees), and the resulting `O_PATH` fds are cached:
//! an fd follows its directory through renames, so the cache stays right.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use xlator_api::{Errno, Gfid};

use crate::gfid::GfidXattr;
use crate::sys::{self, XTarget};

/// Name of the hidden brick directory at the brick root.
pub const META_DIR: &str = ".xlfs";
/// Error for a GFID this brick does not (or no longer) know.
pub const STALE: Errno = Errno::ESTALE;
/// Most directory cache entries kept before the cache is emptied.
const DIR_CACHE_MAX: usize = 4096;
/// Deepest chain of directory handles followed before giving up with ELOOP.
const MAX_DEPTH: usize = 1024;

/// An `O_PATH` fd on an object, shared.
pub type ObjFd = Arc<OwnedFd>;

pub struct Handles {
    brick: PathBuf,
    root: ObjFd,
    hdir: OwnedFd,
    hdir_path: PathBuf,
    layout: Layout,
    pub gx: GfidXattr,
    dirs: Mutex<HashMap<Gfid, ObjFd>>,
    buckets: Buckets,
    /// Unlinked objects whose handle (their last link) the reaper has yet to remove: gone for
    /// every GFID lookup. `npending` lets the common case skip the lock.
    pending: Mutex<HashSet<Gfid>>,
    npending: AtomicUsize,
}

/// How a brick's handles are laid out under `.xlfs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `.xlfs/handles/ab/cd/<gfid>`, 65,536 buckets: bricks made before the flat layout. On a
    /// young brick nearly every create also made a bucket directory (an inode and a block),
    /// which cost about a third of `tar x`'s time on the brick.
    Nested,
    /// `.xlfs/gfid/ab/<gfid>`, 256 buckets (ext4's hashed directories keep large ones fast).
    Flat,
}

impl Layout {
    /// Bucket directories between the handle directory and a handle.
    pub fn levels(self) -> usize {
        match self {
            Layout::Nested => 2,
            Layout::Flat => 1,
        }
    }

    /// The handle directory's name under `.xlfs`.
    pub fn dir_name(self) -> &'static str {
        match self {
            Layout::Nested => "handles",
            Layout::Flat => "gfid",
        }
    }

    /// The bucket directories of `g`, outermost first.
    fn buckets(self, g: Gfid) -> Vec<String> {
        let a = format!("{:02x}", g.0[0]);
        match self {
            Layout::Nested => vec![a.clone(), format!("{a}/{:02x}", g.0[1])],
            Layout::Flat => vec![a],
        }
    }

    /// `g`'s handle relative to the handle directory.
    pub fn rel(self, g: Gfid) -> String {
        match self {
            Layout::Nested => format!("{:02x}/{:02x}/{}", g.0[0], g.0[1], g),
            Layout::Flat => format!("{:02x}/{}", g.0[0], g),
        }
    }

    /// From a handle's bucket back up to the handle directory.
    fn up(self) -> &'static str {
        match self {
            Layout::Nested => "../../",
            Layout::Flat => "../",
        }
    }

    /// The root's handle: from its bucket up to the brick directory.
    fn root_link(self) -> &'static std::ffi::CStr {
        match self {
            Layout::Nested => c"../../../..",
            Layout::Flat => c"../../..",
        }
    }

    /// The symlink that is directory `g`'s handle when it is `name` in `parent`.
    fn dir_link(self, parent: Gfid, name: &str) -> String {
        format!("{}{}/{name}", self.up(), self.rel(parent))
    }

    /// Parses a directory handle made by [`dir_link`](Self::dir_link).
    fn parse_dir_link(self, t: &[u8]) -> Option<(Gfid, String)> {
        let s = std::str::from_utf8(t).ok()?;
        let rest = s.strip_prefix(self.up())?;
        let levels = self.levels();
        let mut it = rest.splitn(levels + 2, '/');
        for _ in 0..levels {
            let b = it.next()?;
            if b.len() != 2 || !b.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
        }
        let (g, name) = (it.next()?, it.next()?);
        if name.is_empty() || name.contains('/') {
            return None;
        }
        Some((Gfid::parse(g)?, name.to_owned()))
    }

    /// Bit index of `g`'s innermost bucket in [`Buckets`].
    fn bucket_index(self, g: Gfid) -> usize {
        match self {
            Layout::Nested => usize::from(g.0[0]) << 8 | usize::from(g.0[1]),
            Layout::Flat => usize::from(g.0[0]),
        }
    }
}

/// Which bucket directories are known to exist, so a new handle costs no `mkdirat` (which
/// fails with EEXIST almost always, and takes the handle directory's lock either way). A bit
/// is only a hint: a bucket removed by hand shows up as ENOENT and is made again.
struct Buckets([AtomicU64; 1024]);

impl Buckets {
    fn new() -> Buckets {
        Buckets(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    fn bit(n: usize) -> (usize, u64) {
        (n / 64, 1 << (n % 64))
    }

    fn known(&self, n: usize) -> bool {
        let (w, bit) = Self::bit(n);
        self.0[w].load(Ordering::Relaxed) & bit != 0
    }

    fn set(&self, n: usize, exists: bool) {
        let (w, bit) = Self::bit(n);
        if exists {
            self.0[w].fetch_or(bit, Ordering::Relaxed);
        } else {
            self.0[w].fetch_and(!bit, Ordering::Relaxed);
        }
    }
}

fn c(s: &str) -> Result<CString, Errno> {
    sys::cstr(s)
}

impl Handles {
    /// Opens (creating the handle directory if needed) the brick at `brick`.
    pub fn open(brick: &Path, gx: GfidXattr) -> Result<Handles, String> {
        let bp = brick
            .to_str()
            .ok_or_else(|| format!("brick path {brick:?} is not UTF-8"))?;
        let root = sys::openat(
            None,
            &c(bp).map_err(|e| e.to_string())?,
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
        .map_err(|e| format!("cannot open brick directory {brick:?}: {e}"))?;
        let layout = detect_layout(brick)?;
        for d in [
            META_DIR.to_owned(),
            format!("{META_DIR}/{}", layout.dir_name()),
        ] {
            match sys::mkdirat(root.as_fd(), &c(&d).map_err(|e| e.to_string())?, 0o700) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(format!("cannot create {:?}: {e}", brick.join(&d))),
            }
        }
        let hdir_path = brick.join(META_DIR).join(layout.dir_name());
        let hp = c(&format!("{bp}/{META_DIR}/{}", layout.dir_name())).map_err(|e| e.to_string())?;
        let hdir = sys::openat(None, &hp, libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(|e| format!("cannot open {hdir_path:?}: {e}"))?;
        let h = Handles {
            brick: brick.to_owned(),
            root: Arc::new(root),
            hdir,
            hdir_path,
            layout,
            gx,
            dirs: Mutex::new(HashMap::new()),
            buckets: Buckets::new(),
            pending: Mutex::new(HashSet::new()),
            npending: AtomicUsize::new(0),
        };
        // The root's handle, so the kernel can follow directory handle chains too (debugging).
        match h.make_parents(Gfid::ROOT).and_then(|_| {
            sys::symlinkat(
                layout.root_link(),
                h.hdir.as_fd(),
                &c(&layout.rel(Gfid::ROOT))?,
            )
        }) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => {
                return Err(format!(
                    "cannot create the root handle in {:?}: {e}",
                    h.hdir_path
                ));
            }
        }
        Ok(h)
    }

    pub fn brick(&self) -> &Path {
        &self.brick
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// `g`'s handle relative to the handle directory.
    fn rel(&self, g: Gfid) -> String {
        self.layout.rel(g)
    }

    pub fn root(&self) -> &ObjFd {
        &self.root
    }

    /// An `O_PATH` fd on the object `g` (any type). Unknown GFID: ESTALE.
    /// Resolution runs as root: the handle directory is private to the brick, and opening by
    /// GFID skips the search permission of the object's ancestors (as an NFS handle does).
    pub fn resolve(&self, g: Gfid) -> Result<ObjFd, Errno> {
        if self.is_pending(g) {
            return Err(Errno::ESTALE);
        }
        crate::creds::as_root(|| self.resolve_depth(g, 0))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashSet<Gfid>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `g` was unlinked and only its handle is left (see [`mark_pending`]).
    ///
    /// [`mark_pending`]: Self::mark_pending
    pub fn is_pending(&self, g: Gfid) -> bool {
        self.npending.load(Ordering::Acquire) != 0 && self.pending().contains(&g)
    }

    /// `g`'s last name is gone and its handle awaits the reaper: GFID lookups fail from now.
    pub fn mark_pending(&self, g: Gfid) {
        let mut p = self.pending();
        if p.insert(g) {
            self.npending.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The reaper is done with `g`.
    pub fn clear_pending(&self, g: Gfid) {
        if self.npending.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut p = self.pending();
        if p.remove(&g) {
            self.npending.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// An `O_PATH` fd on the directory `g`; ENOTDIR when `g` is something else.
    pub fn resolve_dir(&self, g: Gfid) -> Result<ObjFd, Errno> {
        let fd = self.resolve(g)?;
        let st = sys::fstat(fd.as_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        Ok(fd)
    }

    fn resolve_depth(&self, g: Gfid, depth: usize) -> Result<ObjFd, Errno> {
        if g == Gfid::ROOT {
            return Ok(self.root.clone());
        }
        if g.is_null() {
            return Err(Errno::EINVAL);
        }
        if depth > MAX_DEPTH {
            return Err(Errno::ELOOP);
        }
        if let Some(fd) = self.cached(g) {
            return Ok(fd);
        }
        let r = c(&self.rel(g))?;
        let fd = match sys::openat(
            Some(self.hdir.as_fd()),
            &r,
            libc::O_PATH | libc::O_NOFOLLOW,
            0,
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Err(STALE),
            Err(e) => return Err(e),
        };
        let st = sys::fstat(fd.as_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFLNK {
            return Ok(Arc::new(fd));
        }
        // A symlink is either the object itself (hard link to a user symlink, carrying the
        // GFID xattr) or a directory handle (no xattr).
        let p = sys::proc_path(fd.as_fd());
        if self.gx.read(XTarget::Follow(&p))? == Some(g) {
            return Ok(Arc::new(fd));
        }
        let target = sys::readlinkat(fd.as_fd(), c"")?;
        let (pg, name) = self.layout.parse_dir_link(&target).ok_or(Errno::EIO)?;
        let pfd = self.resolve_depth(pg, depth + 1)?;
        let dfd = match sys::openat(
            Some(pfd.as_fd()),
            &c(&name)?,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
            0,
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Err(STALE),
            Err(e) => return Err(e),
        };
        let dp = sys::proc_path(dfd.as_fd());
        if self.gx.read(XTarget::Follow(&dp))? != Some(g) {
            return Err(STALE);
        }
        let dfd = Arc::new(dfd);
        self.cache(g, dfd.clone());
        Ok(dfd)
    }

    fn cached(&self, g: Gfid) -> Option<ObjFd> {
        self.dirs.lock().ok()?.get(&g).cloned()
    }

    fn cache(&self, g: Gfid, fd: ObjFd) {
        if let Ok(mut m) = self.dirs.lock() {
            if m.len() >= DIR_CACHE_MAX {
                m.clear();
            }
            m.insert(g, fd);
        }
    }

    /// Forgets the cached fd of a removed directory.
    pub fn forget_dir(&self, g: Gfid) {
        if let Ok(mut m) = self.dirs.lock() {
            m.remove(&g);
        }
    }

    fn make_parents(&self, g: Gfid) -> Result<(), Errno> {
        let n = self.layout.bucket_index(g);
        if self.buckets.known(n) {
            return Ok(());
        }
        for d in self.layout.buckets(g) {
            match sys::mkdirat(self.hdir.as_fd(), &c(&d)?, 0o700) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e),
            }
        }
        self.buckets.set(n, true);
        Ok(())
    }

    /// Runs `make` (which creates the handle of `g`) in its bucket, making the bucket first
    /// if needed and again if it vanished (ENOENT).
    fn in_bucket(&self, g: Gfid, make: impl Fn() -> Result<(), Errno>) -> Result<(), Errno> {
        self.make_parents(g)?;
        let n = self.layout.bucket_index(g);
        match make() {
            Err(Errno::ENOENT) if self.buckets.known(n) => {
                self.buckets.set(n, false);
                self.make_parents(g)?;
                make()
            }
            r => r,
        }
    }

    /// Hard-links the non-directory `(dir, name)` as the handle of `g`. EEXIST when `g`
    /// already names an object.
    pub fn link_object(&self, g: Gfid, dir: BorrowedFd<'_>, name: &str) -> Result<(), Errno> {
        let src = sys::proc_child(dir, name)?;
        let dst = c(&self.rel(g))?;
        self.in_bucket(g, || sys::linkat(None, &src, self.hdir.as_fd(), &dst, 0))
    }

    /// Hard-links the open (possibly `O_TMPFILE`) file `fd` as the handle of `g`. EEXIST when
    /// `g` already names an object.
    pub fn link_fd(&self, g: Gfid, fd: BorrowedFd<'_>) -> Result<(), Errno> {
        let src = sys::proc_path(fd);
        let dst = c(&self.rel(g))?;
        self.in_bucket(g, || {
            sys::linkat(None, &src, self.hdir.as_fd(), &dst, libc::AT_SYMLINK_FOLLOW)
        })
    }

    /// Points the handle of directory `g` at `(parent, name)`, replacing it atomically.
    pub fn set_dir_link(&self, g: Gfid, parent: Gfid, name: &str) -> Result<(), Errno> {
        let target = c(&self.layout.dir_link(parent, name))?;
        let r = self.rel(g);
        let tmp = c(&format!("{r}.tmp"))?;
        let dst = c(&r)?;
        self.in_bucket(g, || {
            let _ = sys::unlinkat(self.hdir.as_fd(), &tmp, 0);
            sys::symlinkat(&target, self.hdir.as_fd(), &tmp)?;
            sys::renameat2(self.hdir.as_fd(), &tmp, self.hdir.as_fd(), &dst, 0)
        })
    }

    /// Creates the handle of a new directory; EEXIST when `g` is already taken.
    pub fn new_dir_link(&self, g: Gfid, parent: Gfid, name: &str) -> Result<(), Errno> {
        let target = c(&self.layout.dir_link(parent, name))?;
        let dst = c(&self.rel(g))?;
        self.in_bucket(g, || sys::symlinkat(&target, self.hdir.as_fd(), &dst))
    }

    /// Removes the handle of `g` (missing is fine).
    pub fn remove(&self, g: Gfid) -> Result<(), Errno> {
        self.forget_dir(g);
        match sys::unlinkat(self.hdir.as_fd(), &c(&self.rel(g))?, 0) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes the handle of the non-directory `g` if it is that object's last link
    /// (`ino` guards against a GFID reused for another inode); whether it did.
    pub fn drop_if_last(&self, g: Gfid, ino: u64) -> Result<bool, Errno> {
        if self.is_last_link(g, ino)? {
            self.remove(g).map(|()| true)
        } else {
            Ok(false)
        }
    }

    /// Whether the handle of the non-directory `g` (inode `ino`) is its object's only link.
    pub fn is_last_link(&self, g: Gfid, ino: u64) -> Result<bool, Errno> {
        match self.stat_handle(g) {
            Ok(st) => Ok(st.st_ino == ino
                && st.st_nlink <= 1
                && st.st_mode & libc::S_IFMT == libc::S_IFREG),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The handle directory.
    pub fn handles_path(&self) -> &Path {
        &self.hdir_path
    }

    /// Whether the handle of `g` is known to be missing. A caller without search permission
    /// on the handle directory (lookups run as the user) cannot tell: not missing.
    pub fn missing(&self, g: Gfid) -> bool {
        g != Gfid::ROOT && !self.is_pending(g) && self.stat_handle(g).err() == Some(Errno::ENOENT)
    }

    fn stat_handle(&self, g: Gfid) -> Result<libc::stat, Errno> {
        sys::fstatat(
            self.hdir.as_fd(),
            &c(&self.rel(g))?,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    }

    /// Whether the handle of `g` is a directory link whose place (its parent resolves) holds
    /// no directory of GFID `g`: a brick killed between making a new directory's link and
    /// renaming the directory into place (a staged mkdir) leaves one. Not one: an object
    /// whose last name went ([`Self::is_pending`]), a user symlink's handle, or a link whose
    /// parent does not resolve (whether `g` is there is unknown). Runs as root.
    pub fn dangling_dir_link(&self, g: Gfid) -> bool {
        if self.is_pending(g) {
            return false;
        }
        let Ok(r) = c(&self.rel(g)) else {
            return false;
        };
        let Ok(fd) = sys::openat(
            Some(self.hdir.as_fd()),
            &r,
            libc::O_PATH | libc::O_NOFOLLOW,
            0,
        ) else {
            return false;
        };
        let is_link =
            sys::fstat(fd.as_fd()).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK);
        if !is_link || self.gx.read(XTarget::Follow(&sys::proc_path(fd.as_fd()))) == Ok(Some(g)) {
            return false;
        }
        let Some((pg, name)) = sys::readlinkat(fd.as_fd(), c"")
            .ok()
            .and_then(|t| self.layout.parse_dir_link(&t))
        else {
            return false;
        };
        let Ok(pfd) = self.resolve(pg) else {
            return false;
        };
        let Ok(cname) = c(&name) else {
            return false;
        };
        match sys::openat(
            Some(pfd.as_fd()),
            &cname,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
            0,
        ) {
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => true,
            Err(_) => false,
            Ok(d) => matches!(
                self.gx.read(XTarget::Follow(&sys::proc_path(d.as_fd()))),
                Ok(found) if found != Some(g)
            ),
        }
    }

    /// Whether the handle of directory `g` names `(parent, name)`; ENOENT when it has none.
    pub fn dir_link_is(&self, g: Gfid, parent: Gfid, name: &str) -> Result<bool, Errno> {
        let t = sys::readlinkat(self.hdir.as_fd(), &c(&self.rel(g))?)?;
        Ok(t == self.layout.dir_link(parent, name).as_bytes())
    }

    /// Whether the handle of `g` exists.
    pub fn exists(&self, g: Gfid) -> bool {
        g == Gfid::ROOT || self.is_pending(g) || self.stat_handle(g).is_ok()
    }
}

/// The layout of the brick at `brick`: an existing `.xlfs/handles` keeps the nested one.
fn detect_layout(brick: &Path) -> Result<Layout, String> {
    let meta = brick.join(META_DIR);
    let has = |l: Layout| meta.join(l.dir_name()).symlink_metadata().is_ok();
    match (has(Layout::Nested), has(Layout::Flat)) {
        (true, true) => Err(format!(
            "{meta:?} holds both a nested ({}) and a flat ({}) handle directory; this brick was \
             changed by hand, so check which one its files are linked from and move the other away",
            Layout::Nested.dir_name(),
            Layout::Flat.dir_name()
        )),
        (true, false) => Ok(Layout::Nested),
        (false, _) => Ok(Layout::Flat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_links_round_trip_in_both_layouts() {
        let g = Gfid::random();
        for l in [Layout::Nested, Layout::Flat] {
            let t = l.dir_link(g, "some name");
            assert_eq!(
                l.parse_dir_link(t.as_bytes()),
                Some((g, "some name".to_owned())),
                "{l:?}"
            );
            assert_eq!(l.parse_dir_link(l.root_link().to_bytes()), None, "{l:?}");
            assert_eq!(l.parse_dir_link(b"/etc/passwd"), None, "{l:?}");
        }
        assert_eq!(
            Layout::Flat.parse_dir_link(Layout::Nested.dir_link(g, "n").as_bytes()),
            None
        );
        assert_eq!(
            Layout::Nested.parse_dir_link(Layout::Flat.dir_link(g, "n").as_bytes()),
            None
        );
        assert_eq!(Layout::Flat.rel(g), format!("{:02x}/{g}", g.0[0]));
        assert_eq!(
            Layout::Nested.rel(g),
            format!("{:02x}/{:02x}/{g}", g.0[0], g.0[1])
        );
    }
}
