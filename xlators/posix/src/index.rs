//! The brick-side heal index (GlusterFS's `.glusterfs/indices/xattrop`): one empty file
//! `.xlfs/indices/xattrop/<gfid>` for every object that may hold a non-zero replicate
//! pending counter (an xattr under [`PENDING_PREFIX`]). The heal daemon and `xlfs volume heal`
//! read this directory instead of crawling the whole brick.
//!
//! Guarantee: **an object with a non-zero pending counter always has an entry** (a missing
//! entry loses a heal; an extra one only costs a check). So, under the object's stripe lock
//! (the one xattrop holds for its read-modify-write):
//! - an xattrop that writes a non-zero value under a pending key creates the entry *before*
//!   the xattr is written; if the entry cannot be made the xattrop fails and writes nothing;
//! - an xattrop that writes a pending key and leaves every pending key of the object all-zero
//!   (the ones it touched and, by `listxattr`, the others) removes the entry *after* the
//!   writes. A crash in between leaves an entry with zero counters: harmless, dropped by the
//!   next such xattrop or by the scan.
//!
//! An entry is not removed by the xattrop that zeroes the counters: that xattrop marks it
//! idle, and the settle pass (every half second, in the scan thread) removes the entries
//! idle for [`SETTLE`] whose counters are still all zero, under the object's stripe lock. A
//! directory that takes one transaction after another (every create of `tar x` marks its
//! parent) keeps its entry meanwhile: no create and unlink of the entry per transaction (a
//! pre-op finding its entry there costs one link answered EEXIST, no write).
//!
//! The scan ([`Brick::index_scan`]) runs at start and every [`SCAN_EVERY`]: it removes
//! entries whose GFID no longer resolves (the object's last name went, its handle was reaped)
//! and entries whose counters are all zero. The reaper also drops the entry of a file whose
//! handle it removes. Entries are hard links of a base file of the index (not of the
//! handle, see [`BASE_PREFIX`]): they keep no object's inode alive and removing one never
//! touches the object.
//!
//! Without an fsync the entry and the xattr reach the disk in the brick file system's order;
//! ext4 and xfs journal both as metadata in order of the calls, which is what the guarantee
//! needs after a power cut.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use xlator_api::{Errno, Gfid};

use crate::brick::Brick;
use crate::handle::META_DIR;
use crate::sys::{self, XTarget};

/// The xattrs whose non-zero values put an object in the index (replicate's changelog).
pub const PENDING_PREFIX: &str = "trusted.afr.";
/// The index directory, relative to the brick.
pub const INDEX_DIR: &str = "indices/xattrop";
/// How often the brick drops stale entries (besides once at start).
pub const SCAN_EVERY: Duration = Duration::from_secs(600);
/// The index's base files (`base-0`, `base-1`...): every entry is a hard link of one, as
/// GlusterFS links its entries to `xattrop-<uuid>`, so adding an entry allocates no inode (on
/// ext4 without a journal, allocating one right after many were freed scans the inode
/// tables: that, for each file written through a replicated volume, cost more than the
/// file's own create). A base that reaches the file system's link limit is followed by the
/// next. Their names are no GFIDs: listings skip them.
pub const BASE_PREFIX: &str = "base-";
/// How long an entry whose counters went back to zero stays before the settle pass drops it.
pub const SETTLE: Duration = Duration::from_secs(2);

/// Whether `name` is a pending-counter xattr.
pub fn is_pending_key(name: &str) -> bool {
    name.starts_with(PENDING_PREFIX)
}

/// The open index directory of one brick.
pub struct Index {
    brick: PathBuf,
    /// Replaced when the directory was removed under the brick (made again on the next add).
    dir: std::sync::Mutex<Arc<OwnedFd>>,
    /// Entries whose counters an xattrop left all zero, and since when (see the module doc).
    idle: std::sync::Mutex<HashMap<Gfid, Instant>>,
    /// The number of the base file new entries link to ([`BASE_PREFIX`]).
    base: std::sync::Mutex<u32>,
}

fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes (if needed) and opens `<brick>/.xlfs/indices/xattrop`, mode 0700.
fn open_dir(brick: &Path) -> Result<OwnedFd, String> {
    let mut path = brick.join(META_DIR);
    for part in INDEX_DIR.split('/') {
        path.push(part);
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create the heal index {path:?}: {e}")),
        }
        let _ =
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    }
    let p = path
        .to_str()
        .ok_or_else(|| format!("heal index path {path:?} is not UTF-8"))?;
    sys::openat(
        None,
        &sys::cstr(p).map_err(|e| e.to_string())?,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
    )
    .map_err(|e| format!("cannot open the heal index {path:?}: {e}"))
}

impl Index {
    /// Opens `<brick>/.xlfs/indices/xattrop`, creating it (mode 0700) if needed (after the
    /// handle directory made `.xlfs`).
    pub fn open(brick: &Path) -> Result<Index, String> {
        Ok(Index {
            brick: brick.to_owned(),
            dir: std::sync::Mutex::new(Arc::new(open_dir(brick)?)),
            idle: std::sync::Mutex::new(HashMap::new()),
            base: std::sync::Mutex::new(0),
        })
    }

    fn dir(&self) -> Arc<OwnedFd> {
        self.dir.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn name(g: Gfid) -> Result<CString, Errno> {
        sys::cstr(&g.to_string())
    }

    /// Makes `g`'s entry, a hard link of the current base file (present already is fine:
    /// the link answers EEXIST without a write; a missing base is made, a full one, EMLINK,
    /// replaced by the next). A directory removed under the brick is made again (once per
    /// call). Runs as root. Callers hold `g`'s stripe lock.
    pub fn add(&self, g: Gfid) -> Result<(), Errno> {
        locked(&self.idle).remove(&g);
        let n = Self::name(g)?;
        let create = |dir: &OwnedFd| {
            for _ in 0..6 {
                let k = *locked(&self.base);
                let base = sys::cstr(&format!("{BASE_PREFIX}{k}"))?;
                match sys::linkat(Some(dir.as_fd()), &base, dir.as_fd(), &n, 0) {
                    Ok(()) | Err(Errno::EEXIST) => return Ok(()),
                    Err(Errno::ENOENT) => {
                        // No base yet (or the directory itself is gone: this open says so).
                        sys::openat(
                            Some(dir.as_fd()),
                            &base,
                            libc::O_CREAT | libc::O_WRONLY | libc::O_NOFOLLOW,
                            0o600,
                        )?;
                    }
                    Err(Errno::EMLINK) => {
                        let mut b = locked(&self.base);
                        if *b == k {
                            *b += 1;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(Errno::EMLINK)
        };
        crate::creds::as_root(|| match create(&self.dir()) {
            Err(Errno::ENOENT) => match open_dir(&self.brick) {
                Ok(fd) => {
                    let fd = Arc::new(fd);
                    *self.dir.lock().unwrap_or_else(|p| p.into_inner()) = fd.clone();
                    tracing::warn!(target: "xlfs::posix", "the heal index of {:?} was removed; made it again", self.brick);
                    create(&fd)
                }
                Err(msg) => {
                    tracing::warn!(target: "xlfs::posix", "{msg}");
                    Err(Errno::ENOENT)
                }
            },
            r => r,
        })
    }

    /// Removes `g`'s entry (absent is fine). Runs as root. Callers hold `g`'s stripe lock.
    pub fn remove(&self, g: Gfid) -> Result<(), Errno> {
        locked(&self.idle).remove(&g);
        let n = Self::name(g)?;
        crate::creds::as_root(|| match sys::unlinkat(self.dir().as_fd(), &n, 0) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e),
        })
    }

    /// Marks `g`'s entry idle: its counters were left all zero. The settle pass removes it
    /// after [`SETTLE`] unless a counter leaves zero again meanwhile.
    pub fn idle(&self, g: Gfid) {
        locked(&self.idle).entry(g).or_insert_with(Instant::now);
    }

    /// The idle entries older than [`SETTLE`] (taken out of the idle set).
    fn settled(&self) -> Vec<Gfid> {
        let mut idle = locked(&self.idle);
        let now = Instant::now();
        let due: Vec<Gfid> = idle
            .iter()
            .filter(|(_, t)| now.duration_since(**t) >= SETTLE)
            .map(|(g, _)| *g)
            .collect();
        for g in &due {
            idle.remove(g);
        }
        due
    }

    /// How many entries are idle now (statedump).
    pub fn idle_count(&self) -> usize {
        locked(&self.idle).len()
    }

    /// Removes `g`'s entry, logging (not failing) when that is impossible: an extra entry is
    /// harmless.
    pub fn drop_entry(&self, g: Gfid) {
        if let Err(e) = self.remove(g) {
            tracing::warn!(target: "xlfs::posix", "cannot remove heal index entry {g}: {e:?}");
        }
    }
}

/// The GFIDs listed in the heal index of the brick at `brick` (read from disk: for tools
/// running beside a brick, such as `xlfs volume heal`). A brick without an index has none.
pub fn entries(brick: &Path) -> std::io::Result<Vec<Gfid>> {
    let dir = brick.join(META_DIR).join(INDEX_DIR);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e?;
        if let Some(g) = e.file_name().to_str().and_then(Gfid::parse) {
            out.push(g);
        }
    }
    out.sort_unstable_by_key(|g| g.0);
    Ok(out)
}

/// Every pending counter stored on `t` (name → value).
pub fn pending_counters(t: XTarget<'_>) -> Result<BTreeMap<String, Vec<u8>>, Errno> {
    let mut out = BTreeMap::new();
    for name in sys::listxattr(t)? {
        if !is_pending_key(&name) {
            continue;
        }
        match sys::getxattr(t, &sys::cstr(&name)?) {
            Ok(v) => {
                out.insert(name, v);
            }
            Err(Errno::ENODATA) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn all_zero(v: &[u8]) -> bool {
    v.iter().all(|b| *b == 0)
}

impl Brick {
    /// Called by xattrop under `g`'s stripe lock before it writes: `writes` are the
    /// (name, new value) pairs it is about to store. Makes the entry when one of them is a
    /// non-zero pending counter.
    pub(crate) fn index_before(&self, g: Gfid, writes: &[(&str, &[u8])]) -> Result<(), Errno> {
        if writes
            .iter()
            .any(|(n, v)| is_pending_key(n) && !all_zero(v))
        {
            self.index.add(g).inspect_err(|e| {
                tracing::warn!(target: "xlfs::posix", "cannot add {g} to the heal index ({e:?}): its xattrop is refused so no pending counter goes unindexed");
            })?;
        }
        Ok(())
    }

    /// Called by xattrop under `g`'s stripe lock after its writes succeeded: when it wrote
    /// pending counters and left every one it wrote all-zero, the entry is marked idle; the
    /// settle pass removes it once every counter of the object is still zero [`SETTLE`]
    /// later.
    pub(crate) fn index_after(&self, g: Gfid, writes: &[(&str, &[u8])]) {
        if writes.iter().any(|(n, _)| is_pending_key(n))
            && !writes
                .iter()
                .any(|(n, v)| is_pending_key(n) && !all_zero(v))
        {
            self.index.idle(g);
        }
    }

    /// Removes the idle entries that settled ([`Index::idle`]): each under its stripe lock,
    /// if its object is gone or its counters are all zero. Returns how many it removed.
    pub fn index_settle(&self) -> usize {
        let mut removed = 0;
        for g in self.index.settled() {
            if self.drop_if_clean(g) {
                removed += 1;
            }
        }
        removed
    }

    /// Under `g`'s stripe lock: removes its entry if the object is gone or every pending
    /// counter of it is zero; whether it did.
    fn drop_if_clean(&self, g: Gfid) -> bool {
        let _lock = self.stripe(g);
        let stale = match self.h.resolve(g) {
            Err(Errno::ESTALE | Errno::ENOENT) => true,
            Err(e) => {
                tracing::debug!(target: "xlfs::posix", "heal index: cannot resolve {g}: {e:?}");
                false
            }
            Ok(fd) => {
                // As xattrop reaches it (see xattr.rs `with_target`).
                let p = sys::proc_path(fd.as_fd());
                crate::creds::as_root(|| pending_counters(XTarget::Follow(&p)))
                    .is_ok_and(|all| all.values().all(|v| all_zero(v)))
            }
        };
        stale && self.index.remove(g).is_ok()
    }

    /// Drops the index entries of objects that no longer resolve by GFID and of objects whose
    /// pending counters are all zero (a crash between the last xattrop's write and its removal
    /// of the entry). Returns how many entries it removed.
    pub fn index_scan(&self) -> usize {
        let list = match entries(self.h.brick()) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(target: "xlfs::posix", "cannot read the heal index of {:?}: {e}", self.h.brick());
                return 0;
            }
        };
        let mut removed = 0;
        for g in list {
            if self.drop_if_clean(g) {
                removed += 1;
            }
        }
        removed
    }
}

/// Starts the background thread that scans the index now and every [`SCAN_EVERY`]; it ends
/// when the brick goes.
pub fn start_scans(brick: &Arc<Brick>) {
    let weak: Weak<Brick> = Arc::downgrade(brick);
    let spawned = std::thread::Builder::new()
        .name("xlfs-posix-index".into())
        .spawn(move || {
            let mut next = Instant::now();
            loop {
                if Instant::now() >= next {
                    let Some(b) = weak.upgrade() else { return };
                    let n = b.index_scan();
                    if n > 0 {
                        tracing::info!(target: "xlfs::posix", "heal index: dropped {n} entries with no pending counters or no object");
                    }
                    next = Instant::now() + SCAN_EVERY;
                }
                if let Some(b) = weak.upgrade() {
                    b.index_settle();
                }
                std::thread::sleep(Duration::from_millis(500));
                if weak.strong_count() == 0 {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(target: "xlfs::posix", "cannot start the heal index scan thread: {e}");
    }
}

/// Where the index of the brick at `brick` lives.
pub fn index_path(brick: &Path) -> PathBuf {
    brick.join(META_DIR).join(INDEX_DIR)
}

/// What an index entry names, found from the brick's files alone (for `xlfs volume heal
/// info`, which runs beside a brick, as root, without going through it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub gfid: Gfid,
    pub what: Found,
    /// The object's path in the volume (`/a/b`), when known.
    pub path: Option<String>,
    /// Its pending counters on this brick (name → value).
    pub counters: BTreeMap<String, Vec<u8>>,
    /// When the object last changed on this brick (its ctime: every write, attribute or
    /// name change, and every changelog update moves it), when known.
    pub changed: Option<std::time::SystemTime>,
}

/// What kind of object an entry names on this brick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Directory,
    /// Not a directory, with at least one name on the brick.
    Other,
    /// Not a directory, with no name left (unlinked; the handle awaits the reaper).
    Nameless,
    /// The GFID does not resolve on this brick (no handle, or a directory link that leads
    /// nowhere): the entry is stale and the brick drops it at its next scan.
    Gone,
}

/// Finds the objects of `gfids` on the brick at `brick`: directories through their handle
/// chain (`../<bucket>/<parent-gfid>/<name>` links up to the root), other objects through
/// their hard-linked handle, then one walk of the brick's tree (only when some have no path
/// yet, stopping once all are found) matching inode numbers.
pub fn locate(brick: &Path, gfids: &[Gfid]) -> Vec<Located> {
    let meta = brick.join(META_DIR);
    let layout = if meta.join(crate::Layout::Nested.dir_name()).exists() {
        crate::Layout::Nested
    } else {
        crate::Layout::Flat
    };
    let hdir = meta.join(layout.dir_name());
    let handle = |g: Gfid| hdir.join(layout.rel(g));
    let mut out = Vec::with_capacity(gfids.len());
    let mut by_ino: std::collections::HashMap<(u64, u64), usize> = Default::default();
    for &g in gfids {
        let mut l = Located {
            gfid: g,
            what: Found::Gone,
            path: None,
            counters: BTreeMap::new(),
            changed: None,
        };
        if g == Gfid::ROOT {
            l.what = Found::Directory;
            l.path = Some("/".into());
            l.counters = counters_at(brick, true);
            l.changed = std::fs::metadata(brick).ok().and_then(|m| ctime(&m));
            out.push(l);
            continue;
        }
        let h = handle(g);
        match std::fs::symlink_metadata(&h) {
            Err(_) => {}
            Ok(md) if md.file_type().is_symlink() && !is_object(&h, g) => {
                if let Some(rel) = dir_path(&handle, g, 0) {
                    let real = brick.join(rel.trim_start_matches('/'));
                    if let Ok(m) = std::fs::symlink_metadata(&real)
                        && m.is_dir()
                    {
                        l.what = Found::Directory;
                        l.counters = counters_at(&real, true);
                        l.changed = ctime(&m);
                        l.path = Some(rel);
                    }
                }
            }
            Ok(md) => {
                use std::os::unix::fs::MetadataExt;
                l.counters = counters_at(&h, false);
                l.changed = ctime(&md);
                if md.nlink() <= 1 {
                    l.what = Found::Nameless;
                } else {
                    l.what = Found::Other;
                    by_ino.insert((md.dev(), md.ino()), out.len());
                }
            }
        }
        out.push(l);
    }
    if !by_ino.is_empty() {
        find_names(brick, "", &mut by_ino, &mut out, true);
    }
    out
}

/// The status-change time of `md`.
fn ctime(md: &std::fs::Metadata) -> Option<std::time::SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let secs = u64::try_from(md.ctime()).ok()?;
    let nanos = u32::try_from(md.ctime_nsec()).ok()?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// Whether the symlink `h` is `g`'s object itself (a user symlink carries the GFID xattr; a
/// directory handle does not).
fn is_object(h: &Path, g: Gfid) -> bool {
    let Some(p) = h.to_str().and_then(|s| sys::cstr(s).ok()) else {
        return false;
    };
    [crate::gfid::TRUSTED, crate::gfid::USER]
        .iter()
        .any(|n| sys::getxattr(XTarget::NoFollow(&p), n).is_ok_and(|v| v == g.0))
}

/// The volume path of directory `g` from its handle chain.
fn dir_path(handle: &dyn Fn(Gfid) -> PathBuf, g: Gfid, depth: usize) -> Option<String> {
    if g == Gfid::ROOT {
        return Some(String::new());
    }
    if depth > 4096 {
        return None;
    }
    let target = std::fs::read_link(handle(g)).ok()?;
    let t = target.to_str()?;
    let mut parts = t.rsplitn(3, '/');
    let name = parts.next()?;
    let parent = Gfid::parse(parts.next()?)?;
    let up = dir_path(handle, parent, depth + 1)?;
    Some(format!("{up}/{name}"))
}

/// Walks `dir` (relative to the brick) matching inodes of `want`; fills their paths.
fn find_names(
    brick: &Path,
    dir: &str,
    want: &mut std::collections::HashMap<(u64, u64), usize>,
    out: &mut [Located],
    top: bool,
) {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(brick.join(dir.trim_start_matches('/'))) else {
        return;
    };
    let mut subdirs = Vec::new();
    for e in rd.flatten() {
        if want.is_empty() {
            return;
        }
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if top && name == META_DIR {
            continue;
        }
        let Ok(md) = e.metadata() else { continue };
        let rel = format!("{dir}/{name}");
        if md.is_dir() {
            subdirs.push(rel);
        } else if let Some(i) = want.remove(&(md.dev(), md.ino())) {
            out[i].path = Some(rel);
        }
    }
    for d in subdirs {
        if want.is_empty() {
            return;
        }
        find_names(brick, &d, want, out, false);
    }
}

/// The pending counters on the object at `p` (a directory followed, anything else not).
fn counters_at(p: &Path, follow: bool) -> BTreeMap<String, Vec<u8>> {
    let Some(c) = p.to_str().and_then(|s| sys::cstr(s).ok()) else {
        return BTreeMap::new();
    };
    let t = if follow {
        XTarget::Follow(&c)
    } else {
        XTarget::NoFollow(&c)
    };
    pending_counters(t).unwrap_or_default()
}
