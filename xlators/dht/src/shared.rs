//! State shared by the fops: children, the layout and placement caches, open fds, counters,
//! and the small helpers every concern module uses.
//!
//! Caches hold only facts that do not go stale on their own: a directory's layout changes only
//! by a repair, which writes the same deterministic ranges from any client ([`crate::layout`]);
//! a file's data never leaves the child it was created on (no rebalance yet), so the child
//! that holds a GFID is fixed for its life. Both caches are bounded and simply emptied when
//! full; a miss costs a fetch, never a wrong answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use xlator_api::{
    ChildState, CreateXattrs, Ctx, DirEntry, Entry, Errno, Fd, FdId, FileType, Gfid, HostServices,
    Iatt, LogLevel, Subvol, Xattr, XattrReq, reopen_fd,
};

use crate::cookie::Cookies;
use crate::layout::{LAYOUT_XATTR, Layout};
use crate::options::MinFree;

/// The link file xattr: the name of the child that holds the file (GlusterFS's
/// `trusted.glusterfs.dht.linkto`).
pub const LINKTO_XATTR: &str = "trusted.dht.linkto";

/// Every xattr this translator keeps for itself: hidden from listings and reads, refused to
/// writes from above.
pub const OWN_PREFIX: &str = "trusted.dht.";

/// A link file's permission bits: exactly the sticky bit (`---------T`).
pub const LINK_MODE: u32 = libc::S_ISVTX;

const CACHE_MAX: usize = 1 << 16;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where an object lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// A directory: on every child.
    Dir,
    /// Anything else: on this child only.
    File(usize),
}

/// An open fd and which children hold it (a file: exactly one).
#[derive(Clone, Debug)]
pub(crate) struct FdState {
    pub dir: bool,
    pub held: Vec<bool>,
    /// A file fd's child (where it was opened; it stays the fd's child across reconnects,
    /// and changes when rebalance moved its file: [`Shared::moved_to`]).
    pub child: usize,
    /// A reply showed the file nameless on its child and it was not moved (unlinked).
    pub unlinked: bool,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub lookups: AtomicU64,
    pub negative_one_call: AtomicU64,
    pub everywhere: AtomicU64,
    pub linkfiles_made: AtomicU64,
    pub linkfiles_followed: AtomicU64,
    pub stale_linkfiles: AtomicU64,
    pub dirs_healed: AtomicU64,
    pub layouts_repaired: AtomicU64,
    pub diverted_creates: AtomicU64,
    pub cross_renames: AtomicU64,
    pub renames_finished: AtomicU64,
    pub reopened: AtomicU64,
}

/// Reconfigurable settings.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub min_free: MinFree,
    pub statfs_interval: Duration,
    pub lookup_unhashed: bool,
    /// Names of the children being removed (option `decommissioned`).
    pub decommissioned: Vec<String>,
}

pub(crate) struct Shared {
    pub name: String,
    pub children: Vec<Subvol>,
    pub up: ChildState,
    pub services: HostServices,
    pub announced: AtomicBool,
    pub counters: Counters,
    cfg: Mutex<Config>,
    layouts: Mutex<HashMap<Gfid, Arc<Layout>>>,
    homes: Mutex<HashMap<Gfid, Home>>,
    fds: Mutex<HashMap<FdId, FdState>>,
    /// Serialises [`Shared::moved_to`] checks.
    pub move_checks: futures::lock::Mutex<()>,
    /// Directories' parent and name, from listings and lookups, for `fix-layout` (which
    /// heals missing copies and needs the name to make one).
    dir_names: Mutex<HashMap<Gfid, (Gfid, String)>>,
    /// The other way round: which names are directories, so that their lookup asks every
    /// child at once (one round trip, not the hashed child's and then the others').
    dir_by_name: Mutex<HashMap<(Gfid, String), Gfid>>,
    pub cookies: Mutex<Cookies>,
    /// Directory pages read ahead ([`crate::ahead`]).
    pub ahead: Mutex<crate::ahead::Held>,
    /// Per child: when its free space was read, free bytes, total bytes.
    space: Mutex<Vec<Option<(Duration, u64, u64)>>>,
}

impl Shared {
    pub fn new(
        name: String,
        children: Vec<Subvol>,
        up: ChildState,
        services: HostServices,
        cfg: Config,
    ) -> Shared {
        let n = children.len();
        Shared {
            name,
            children,
            up,
            services,
            announced: AtomicBool::new(false),
            counters: Counters::default(),
            cfg: Mutex::new(cfg),
            layouts: Mutex::new(HashMap::new()),
            homes: Mutex::new(HashMap::new()),
            fds: Mutex::new(HashMap::new()),
            move_checks: futures::lock::Mutex::new(()),
            dir_names: Mutex::new(HashMap::new()),
            dir_by_name: Mutex::new(HashMap::new()),
            cookies: Mutex::new(Cookies::new(n)),
            ahead: Mutex::new(crate::ahead::Held::default()),
            space: Mutex::new(vec![None; n]),
        }
    }

    pub fn n(&self) -> usize {
        self.children.len()
    }

    pub fn cfg(&self) -> Config {
        lock(&self.cfg).clone()
    }

    /// Applies new settings. A change of the decommissioned children empties the layout
    /// cache: the layouts they imply changed.
    pub fn set_cfg(&self, c: Config) {
        let mut cur = lock(&self.cfg);
        let dropped = cur.decommissioned != c.decommissioned;
        *cur = c;
        drop(cur);
        if dropped {
            lock(&self.layouts).clear();
        }
    }

    /// The indices of the decommissioned children (names that name no child are ignored).
    pub fn excluded(&self) -> Vec<usize> {
        let names = lock(&self.cfg).decommissioned.clone();
        names
            .iter()
            .filter_map(|n| self.child_named(n.as_bytes()))
            .collect()
    }

    /// The deterministic new layout of `dir` over the children not decommissioned.
    pub fn fresh_layout(&self, dir: Gfid, trusted: bool) -> Layout {
        Layout::generate_over(dir, self.n(), &self.excluded(), trusted)
    }

    pub fn all_up(&self) -> bool {
        self.up.up_count() == self.n()
    }

    /// ENOTCONN unless every child is up: directory changes go to every child, and one made
    /// while a child is unreachable would leave the copies disagreeing.
    pub fn require_all_up(&self) -> Result<(), Errno> {
        if self.all_up() {
            Ok(())
        } else {
            Err(Errno::ENOTCONN)
        }
    }

    pub fn log(&self, level: LogLevel, msg: &str) {
        self.services
            .log(level, "xlfs::dht", &format!("{}: {msg}", self.name));
    }

    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `op(i)` on every child at once, replies in child order.
    pub async fn fan<R, F, Fut>(&self, op: F) -> Vec<Result<R, Errno>>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        join_all((0..self.n()).map(op)).await
    }

    /// The index of the child named `name`.
    pub fn child_named(&self, name: &[u8]) -> Option<usize> {
        self.children
            .iter()
            .position(|c| c.name().as_bytes() == name)
    }

    // ---- caches ----

    pub fn cached_layout(&self, dir: Gfid) -> Option<Arc<Layout>> {
        lock(&self.layouts).get(&dir).cloned()
    }

    pub fn remember_layout(&self, dir: Gfid, l: Arc<Layout>) {
        let mut m = lock(&self.layouts);
        if m.len() >= CACHE_MAX {
            m.clear();
        }
        m.insert(dir, l);
    }

    pub fn forget_layout(&self, dir: Gfid) {
        lock(&self.layouts).remove(&dir);
    }

    pub fn cached_home(&self, gfid: Gfid) -> Option<Home> {
        lock(&self.homes).get(&gfid).copied()
    }

    pub fn remember_home(&self, gfid: Gfid, h: Home) {
        let mut m = lock(&self.homes);
        if m.len() >= CACHE_MAX {
            m.clear();
        }
        m.insert(gfid, h);
    }

    pub fn forget_home(&self, gfid: Gfid) {
        lock(&self.homes).remove(&gfid);
    }

    pub fn cache_sizes(&self) -> (usize, usize) {
        (lock(&self.layouts).len(), lock(&self.homes).len())
    }

    /// Where `gfid` lives: cached, or asked of every child at once (a directory answers on
    /// every child that has it, anything else on one).
    pub async fn home(&self, cx: &Ctx, gfid: Gfid) -> Result<Home, Errno> {
        if gfid == Gfid::ROOT {
            return Ok(Home::Dir);
        }
        if let Some(h) = self.cached_home(gfid) {
            return Ok(h);
        }
        let replies = self.fan(|i| self.children[i].stat(cx, gfid)).await;
        let mut down = false;
        let mut found = None;
        // While rebalance moves a file, its copy being made has the same GFID and a link
        // file's mode, and the old copy, once switched away from, no name: the copy with a
        // name and a file's mode is the file.
        let rank = |a: &Iatt| u8::from(a.perm & 0o7777 != LINK_MODE) + u8::from(a.nlink > 0);
        for (i, r) in replies.iter().enumerate() {
            match r {
                Ok(a) if a.is_dir() => {
                    self.remember_home(gfid, Home::Dir);
                    return Ok(Home::Dir);
                }
                Ok(a) if found.is_none_or(|(_, best)| rank(a) > best) => {
                    found = Some((i, rank(a)));
                }
                Ok(_) => {}
                Err(e) if *e == Errno::ENOTCONN => down = true,
                Err(_) => {}
            }
        }
        let found = found.map(|(i, _)| i);
        match found {
            Some(i) => {
                self.remember_home(gfid, Home::File(i));
                Ok(Home::File(i))
            }
            None if down => Err(Errno::ENOTCONN),
            None => Err(Errno::ESTALE),
        }
    }

    /// `op` on the child holding `gfid` (a directory: [`Shared::dir_reader`]). A file's child
    /// that answers ESTALE no longer has it (rebalance moved it, or a cached home outlived
    /// it): the GFID is looked for again and `op` sent once more where it is now.
    pub async fn at_home<R, F, Fut>(&self, cx: &Ctx, gfid: Gfid, op: F) -> Result<R, Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        match self.home(cx, gfid).await? {
            Home::Dir => op(self.dir_reader()).await,
            Home::File(c) => {
                let r = op(c).await;
                if !matches!(r, Err(Errno::ESTALE)) {
                    return r;
                }
                self.forget_home(gfid);
                match self.home(cx, gfid).await {
                    Ok(Home::File(n)) if n != c => op(n).await,
                    _ => r,
                }
            }
        }
    }

    /// The child that answers reads of a directory: child 0, or the first child up.
    pub fn dir_reader(&self) -> usize {
        if self.up.is_up(0) {
            0
        } else {
            self.up.up().first().copied().unwrap_or(0)
        }
    }

    // ---- fds ----

    pub fn opened(&self, fd: Fd, dir: bool, held: Vec<bool>) {
        if !fd.is_anonymous() {
            let child = held.iter().position(|h| *h).unwrap_or(0);
            lock(&self.fds).insert(
                fd.id,
                FdState {
                    dir,
                    held,
                    child,
                    unlinked: false,
                },
            );
        }
    }

    pub fn closed(&self, fd: Fd) -> Option<FdState> {
        lock(&self.fds).remove(&fd.id)
    }

    pub fn fd_state(&self, fd: Fd) -> Option<FdState> {
        if fd.is_anonymous() {
            return None;
        }
        lock(&self.fds).get(&fd.id).cloned()
    }

    /// After a move check of fd `id`: moved to child `to`, or (`None`) simply unlinked.
    pub fn fd_moved(&self, id: FdId, to: Option<usize>) {
        if let Some(s) = lock(&self.fds).get_mut(&id) {
            match to {
                Some(d) => {
                    s.child = d;
                    for (i, h) in s.held.iter_mut().enumerate() {
                        *h = i == d;
                    }
                }
                None => s.unlinked = true,
            }
        }
    }

    /// Remembers that directory `gfid` is `name` in `parent`.
    pub fn remember_dir_name(&self, gfid: Gfid, parent: Gfid, name: &str) {
        let mut m = lock(&self.dir_names);
        if m.len() >= CACHE_MAX * 4 {
            m.clear();
        }
        if let Some(was) = m.insert(gfid, (parent, name.to_owned()))
            && was != (parent, name.to_owned())
        {
            lock(&self.dir_by_name).remove(&was);
        }
        drop(m);
        let mut r = lock(&self.dir_by_name);
        if r.len() >= CACHE_MAX * 4 {
            r.clear();
        }
        r.insert((parent, name.to_owned()), gfid);
    }

    /// Forgets directory `gfid`'s name (it was removed).
    pub fn forget_dir_name(&self, gfid: Gfid) {
        if let Some(was) = lock(&self.dir_names).remove(&gfid) {
            lock(&self.dir_by_name).remove(&was);
        }
    }

    /// Whether `name` in `parent` was a directory when last seen (a hint: it may have been
    /// renamed or removed by another client since).
    pub fn seen_dir(&self, parent: Gfid, name: &str) -> bool {
        lock(&self.dir_by_name).contains_key(&(parent, name.to_owned()))
    }

    /// Forgets that `name` in `parent` is a directory (a lookup found otherwise).
    pub fn unsee_dir(&self, parent: Gfid, name: &str) {
        lock(&self.dir_by_name).remove(&(parent, name.to_owned()));
    }

    pub fn dir_name(&self, gfid: Gfid) -> Option<(Gfid, String)> {
        lock(&self.dir_names).get(&gfid).cloned()
    }

    pub fn open_fds(&self) -> usize {
        lock(&self.fds).len()
    }

    /// Child `i`'s connection went: the fds opened there are gone with it.
    pub fn child_lost(&self, i: usize) {
        for s in lock(&self.fds).values_mut() {
            if let Some(h) = s.held.get_mut(i)
                && *h
            {
                *h = false;
                // Remember it must be opened again: `held` false with the fd known.
            }
        }
        lock(&self.space)[i] = None;
        lock(&self.ahead).drop_child(i);
    }

    /// The child a file fd's fops go to, opened there again if its connection was lost since.
    pub async fn fd_child(&self, cx: &Ctx, fd: Fd) -> Result<usize, Errno> {
        match self.fd_state(fd) {
            Some(s) if !s.dir => {
                self.ensure(s.child, cx, fd).await?;
                Ok(s.child)
            }
            Some(_) => Ok(self.dir_reader()),
            None => match self.home(cx, fd.gfid).await? {
                Home::File(c) => Ok(c),
                Home::Dir => Ok(self.dir_reader()),
            },
        }
    }

    /// Makes sure child `i` holds `fd`, opening it there again if its connection was lost
    /// since. Anonymous and unknown fds pass as they are.
    pub async fn ensure(&self, i: usize, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let dir = {
            let fds = lock(&self.fds);
            match fds.get(&fd.id) {
                Some(s) if !fd.is_anonymous() && !s.held.get(i).copied().unwrap_or(true) => s.dir,
                _ => return Ok(()),
            }
        };
        reopen_fd(&self.children[i], cx, fd, dir).await?;
        Self::bump(&self.counters.reopened);
        if let Some(s) = lock(&self.fds).get_mut(&fd.id)
            && let Some(h) = s.held.get_mut(i)
        {
            *h = true;
        }
        Ok(())
    }

    // ---- free space ----

    /// Free and total bytes of child `i`, from a statfs at most `statfs-interval` old.
    pub async fn space_of(&self, i: usize) -> Option<(u64, u64)> {
        let now = self.services.now();
        let iv = self.cfg().statfs_interval;
        if let Some((at, free, total)) = lock(&self.space)[i]
            && now.saturating_sub(at) < iv
        {
            return Some((free, total));
        }
        let s = self.children[i]
            .statfs(&Ctx::root(), Gfid::ROOT)
            .await
            .ok()?;
        let free = s.bavail.saturating_mul(s.frsize.max(1));
        let total = s.blocks.saturating_mul(s.frsize.max(1));
        lock(&self.space)[i] = Some((now, free, total));
        Some((free, total))
    }

    /// Where a new file hashed to `h` goes: `h`, unless `min-free-disk` says it is too full
    /// and another child up has room (the one with the most free space).
    pub async fn placement(&self, h: usize) -> usize {
        let mf = self.cfg().min_free;
        if mf == MinFree::Off {
            return h;
        }
        match self.space_of(h).await {
            Some((free, total)) if mf.too_full(free, total) => {}
            _ => return h,
        }
        let mut best: Option<(u64, usize)> = None;
        let excluded = self.excluded();
        for i in self.up.up() {
            if i == h || excluded.contains(&i) {
                continue;
            }
            if let Some((free, total)) = self.space_of(i).await
                && !mf.too_full(free, total)
                && best.is_none_or(|(f, _)| free > f)
            {
                best = Some((free, i));
            }
        }
        best.map_or(h, |(_, i)| i)
    }
}

// ---- entries ----

/// Whether an entry (attributes and the xattrs it came with) is a link file.
pub fn is_linkfile(attr: &Iatt, xattrs: &[Xattr]) -> bool {
    attr.kind == FileType::Regular
        && attr.perm & 0o7777 == LINK_MODE
        && xlator_api::find_xattr(xattrs, LINKTO_XATTR).is_some()
}

pub fn entry_is_linkfile(e: &Entry) -> bool {
    is_linkfile(&e.attr, &e.xattrs)
}

pub fn dirent_is_linkfile(e: &DirEntry) -> bool {
    is_linkfile(&e.attr, &e.xattrs)
}

/// `cx` asking also for the link and layout xattrs. Returns the context and whether the caller
/// itself asked for any of this translator's xattrs (else they are stripped from replies).
pub fn with_own_req(cx: &Ctx) -> (Ctx, Option<XattrReq>) {
    let caller = cx.ext::<XattrReq>();
    let mut req = caller.clone().unwrap_or_default();
    for n in [LINKTO_XATTR, LAYOUT_XATTR] {
        if !req.wants(n) {
            req.names.push(n.into());
        }
    }
    (cx.to_builder().ext(&req).build(), caller)
}

/// Drops this translator's xattrs from a reply unless the caller asked for them by name.
pub fn strip_own(xattrs: &mut xlator_api::Xattrs, caller: Option<&XattrReq>) {
    let keep = |name: &str| {
        !name.starts_with(OWN_PREFIX) || caller.is_some_and(|r| r.names.iter().any(|n| n == name))
    };
    if xattrs.iter().any(|x| !keep(&x.name)) {
        let kept: Vec<Xattr> = xattrs.iter().filter(|x| keep(&x.name)).cloned().collect();
        *xattrs = kept.into();
    }
}

/// EPERM for an xattr name this translator keeps for itself.
pub fn refuse_own(name: &str) -> Result<(), Errno> {
    if name.starts_with(OWN_PREFIX) {
        Err(Errno::EPERM)
    } else {
        Ok(())
    }
}

/// A root context for internal fops (link files, repairs) with `ext` set.
pub fn internal_with(x: &CreateXattrs) -> Ctx {
    Ctx::builder(0, 0).ext(x).build()
}

/// A directory's attributes merged over its copies: the first copy's, with each time the
/// latest of any copy (a file created on child 2 changes child 2's copy's mtime only).
pub fn merge_dir_attrs<'a>(copies: impl IntoIterator<Item = &'a Iatt>) -> Option<Iatt> {
    let mut it = copies.into_iter();
    let mut out = *it.next()?;
    for a in it {
        out.atime = out.atime.max(a.atime);
        out.mtime = out.mtime.max(a.mtime);
        out.ctime = out.ctime.max(a.ctime);
    }
    Some(out)
}

/// The first error in child order, ENOTCONN first.
pub fn first_error(errs: impl IntoIterator<Item = Errno>) -> Errno {
    let errs: Vec<Errno> = errs.into_iter().collect();
    if errs.contains(&Errno::ENOTCONN) {
        return Errno::ENOTCONN;
    }
    errs.first().copied().unwrap_or(Errno::EIO)
}

/// Every reply, or the first error (ENOTCONN first).
pub fn all_ok<R>(replies: Vec<Result<R, Errno>>) -> Result<Vec<R>, Errno> {
    if replies.iter().any(|r| r.is_err()) {
        return Err(first_error(replies.into_iter().filter_map(Result::err)));
    }
    replies.into_iter().collect()
}
