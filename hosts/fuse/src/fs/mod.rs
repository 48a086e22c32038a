//! The `fuser::Filesystem` shim: each request is decoded on the fuser thread, then its fop
//! runs on the tokio runtime and the task replies (fuser's reply objects are `Send`), so many
//! requests are in flight at once. The graph (`Arc`) is held for the life of each fop: the
//! current one, or for a fop on an open fd the one that fd is open on (`fds.rs`), after it
//! moved to the current one if it may (`migrate.rs`).

use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, FileAttr, FileHandle, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyIoctl, ReplyLock, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request,
    TimeOrNow, WriteFlags,
};
use tokio::runtime::Handle;
use xlator_api::abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{
    BackingWanted, Buf, Ctx, Entry, Errno, Fd, Fop, Gfid, Iatt, LkCmd, Loc, SeekWhat, SetAttr,
    Subvol, TimeSet, Xattr,
};
use xlfs_core::graph::Graph;
use xlfs_core::volume::Volume;

use crate::attr::{errno, file_attr, flock, lock_reply, time_set};
use crate::capcache::{CAPABILITY_XATTR, CapCache};
use crate::creds::{Need, ctx, ctx_builder};
use crate::dir;
use crate::fds::{FdTable, FdUse};
use crate::fresh::FreshDirs;
use crate::inodes::{DirStamp, InodeTable, Stamp};
use crate::notify::KernelCache;
use crate::options::FsOptions;
use crate::passthrough::{Mode, Passthrough};

/// The access ACL, which also sets the mode's group bits.
const ACCESS_ACL_XATTR: &str = "system.posix_acl_access";

/// Largest readahead to ask for; the kernel offers 128 KiB here and we take what it offers.
const MAX_READAHEAD: u32 = 1 << 20;
/// Background requests (readahead, writeback) the kernel keeps in flight; GlusterFS uses 64/48.
const MAX_BACKGROUND: u16 = 64;
const CONGESTION_THRESHOLD: u16 = 48;

/// State shared by the shim and its tasks.
pub struct Shared {
    volume: Arc<Volume>,
    pub inodes: InodeTable,
    pub fds: FdTable,
    pub opts: FsOptions,
    caps: CapCache,
    fresh: FreshDirs,
    /// How files are open, when `--passthrough` is on.
    pub pt: Passthrough,
    /// Notifications to the kernel: pages a direct write made stale, attributes an ACL
    /// changed (see `write`, `setxattr`).
    pub kernel: KernelCache,
    pub(crate) rt: Handle,
}

impl Shared {
    pub fn new(volume: Arc<Volume>, opts: FsOptions, rt: Handle) -> Arc<Shared> {
        let caps = CapCache::new(opts.capability_timeout);
        let fresh = FreshDirs::new(opts.fresh_dir_timeout);
        Arc::new(Shared {
            volume,
            inodes: InodeTable::new(),
            fds: FdTable::new(),
            opts,
            caps,
            fresh,
            pt: Passthrough::default(),
            kernel: KernelCache::default(),
            rt,
        })
    }

    /// The negative cache of `security.capability`.
    pub(crate) fn caps(&self) -> &CapCache {
        &self.caps
    }

    /// Directories this mount made a moment ago.
    pub(crate) fn fresh(&self) -> &FreshDirs {
        &self.fresh
    }

    /// The current graph; hold it for the life of a fop.
    pub fn graph(&self) -> Arc<Graph> {
        self.volume.graph()
    }

    /// Registers the kernel's reference on the object of an entry reply and builds the
    /// attributes to send. Fails with EIO for a reply without a GFID (a translator bug).
    /// `stamp` is [`InodeTable::stamp`] taken before the fop was sent.
    fn entry_attr(&self, a: &Iatt, stamp: Stamp) -> Result<FileAttr, fuser::Errno> {
        if a.gfid.is_null() {
            tracing::error!("entry reply without a GFID");
            return Err(fuser::Errno::EIO);
        }
        let node = self.inodes.remember(a.gfid);
        self.inodes.note_attr(node, a, stamp);
        Ok(file_attr(node, a))
    }

    /// Ends the entry fop in `parent` started with `ds`, recording the parent's attributes
    /// its reply carried (`postparent` of an `Entry` or `Removed`).
    fn end_dir_op(&self, parent: INodeNo, ds: DirStamp, post: Option<&ROption<Iatt>>) {
        let post = post.and_then(|p| p.as_ref().into_option());
        self.inodes.end_dir_op(parent, ds, post);
    }

    /// An entry reply for the name `name` in `parent`, which a non-directory's node then
    /// remembers (see [`Shared::drop_dead_name`]).
    fn reply_entry_at(
        &self,
        reply: ReplyEntry,
        r: Result<Entry, Errno>,
        stamp: Stamp,
        parent: INodeNo,
        name: &str,
        lookup: bool,
    ) {
        self.reply_entry_made(reply, r, stamp, None, Some((parent, name, lookup)));
    }

    /// The graph's answer `r` to an entry fop of thread `pid` in directory `parent`, its
    /// ESTALE for a removed directory turned into ENOENT on the kernel's retry (see
    /// [`InodeTable::in_removed_dir`]).
    fn in_dir<T>(&self, pid: u32, parent: INodeNo, r: Result<T, Errno>) -> Result<T, Errno> {
        match r {
            Err(e) if e == Errno::ESTALE && self.inodes.in_removed_dir(pid, parent) => {
                Err(Errno::ENOENT)
            }
            r => r,
        }
    }

    /// What an open checks beside the open fop (close-to-open): the attributes of `gfid`
    /// now, and whether one of `names`, the names this mount gave the kernel for it, no
    /// longer names it (another client renamed a file over it, or removed it): the kernel
    /// may have come through that name. The names are looked up (the reply carries the
    /// attributes); without a name the GFID is asked. A name this mount itself renamed
    /// away also counts: that costs the open one retry by the kernel, which then finds it
    /// under its new name.
    async fn current(&self, cx: &Ctx, gfid: Gfid, names: Vec<Loc>) -> (Result<Iatt, Errno>, bool) {
        let graph = self.graph();
        let mut found = None;
        let mut moved = false;
        for loc in names {
            match graph.top().lookup(cx, loc).await {
                Ok(e) if e.attr.gfid == gfid => found = Some(e.attr),
                Ok(_) | Err(Errno::ENOENT) => moved = true,
                Err(_) => {}
            }
        }
        match found {
            Some(a) => (Ok(a), moved),
            None => (graph.top().stat(cx, gfid).await, moved),
        }
    }

    /// Whether an open of `node` must fail with ESTALE, from what [`Shared::current`]
    /// found (`now`: the attributes, and whether a name the kernel may have come through
    /// names something else now): then the kernel looks the name up again (LOOKUP_REVAL)
    /// and opens what it names now, unless this open is the one right after such a lookup
    /// (`fresh`), which opens the file the lookup found.
    async fn stale_open(
        &self,
        node: INodeNo,
        fresh: bool,
        now: &(Result<Iatt, Errno>, bool),
    ) -> bool {
        if now.1 && !fresh {
            self.drop_names(node).await;
            return true;
        }
        match &now.0 {
            Ok(a) => self.drop_dead_name(node, a, fresh).await,
            Err(_) => false,
        }
    }

    /// A reply shows that non-directory `node` has no name left (`attr.nlink` 0): another
    /// client removed it or renamed a file over it, while the kernel still maps the name
    /// it knew to this node, and would refuse a link(2) through that name with ENOENT (an
    /// inode with no links). The name is dropped from the kernel's cache, so its next use
    /// looks it up again and finds what it names now. Returns whether the request should
    /// fail with ESTALE instead of answering (see [`FRESH_NAME`]).
    /// `fresh`: the request came right after the lookup that gave the node
    /// ([`InodeTable::take_fresh`]).
    async fn drop_dead_name(&self, node: INodeNo, attr: &Iatt, fresh: bool) -> bool {
        if attr.nlink != 0 || attr.is_dir() {
            return false;
        }
        let stale = !fresh && !self.fds.is_open(&attr.gfid);
        self.drop_names(node).await;
        stale
    }

    /// A create without O_EXCL that found the name taken: opens what the name is now, as
    /// open(2) would (EISDIR for a directory), and answers with its entry.
    async fn open_existing(&self, top: &Graph, cx: &Ctx, loc: Loc, fd: Fd) -> Result<Entry, Errno> {
        let e = top.top().lookup(cx, loc).await?;
        match e.attr.kind {
            xlator_api::FileType::Directory => return Err(Errno::EISDIR),
            xlator_api::FileType::Regular => {}
            // A device, FIFO or socket the kernel opens itself: not through a create.
            _ => return Err(Errno::EEXIST),
        }
        let fd = Fd {
            gfid: e.attr.gfid,
            flags: fd.flags & !(libc::O_CREAT | libc::O_EXCL),
            ..fd
        };
        top.top().open(cx, fd).await?;
        Ok(e)
    }

    /// Drops every name recorded for `node` from the kernel's cache (and the record).
    async fn drop_names(&self, node: INodeNo) {
        for (parent, name) in self.inodes.take_names(node) {
            self.kernel.drop_entry(parent, name).await;
        }
    }

    /// An entry reply; for mkdir, `made` is when it was sent (see fresh.rs); `named`: the
    /// name a non-directory's node remembers and whether a lookup gave it, recorded before
    /// the kernel sees the reply (its next request may overtake anything done after).
    fn reply_entry_made(
        &self,
        reply: ReplyEntry,
        r: Result<Entry, Errno>,
        stamp: Stamp,
        made: Option<Instant>,
        named: Option<(INodeNo, &str, bool)>,
    ) {
        match r
            .map_err(errno)
            .and_then(|e| self.entry_attr(&e.attr, stamp))
        {
            Ok(attr) => {
                if let Some(t) = made {
                    self.fresh.made(attr.ino, t);
                }
                if let Some((parent, name, lookup)) = named {
                    if attr.kind != fuser::FileType::Directory {
                        self.inodes.note_name(attr.ino, parent, OsStr::new(name));
                    }
                    if lookup {
                        self.inodes.looked_up(attr.ino);
                    }
                }
                reply.entry_with_ttls(
                    &self.opts.attr_timeout,
                    &self.opts.entry_timeout,
                    &attr,
                    Generation(0),
                )
            }
            Err(e) => reply.error(e),
        }
    }

    fn reply_attr(&self, node: INodeNo, reply: ReplyAttr, r: Result<Iatt, Errno>, stamp: Stamp) {
        match r {
            Ok(a) => {
                self.inodes.note_attr(node, &a, stamp);
                reply.attr(&self.opts.attr_timeout, &file_attr(node, &a))
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Ends the removal in `parent` started with `ds` and replies.
    fn end_removal(
        &self,
        parent: INodeNo,
        ds: DirStamp,
        reply: ReplyEmpty,
        r: Result<xlator_api::Removed, Errno>,
    ) {
        self.end_dir_op(parent, ds, r.as_ref().ok().map(|e| &e.postparent));
        reply_empty(reply, r.map(drop));
    }

    /// Flags for the reply to an open (or create) with `flags`.
    fn fopen_flags(&self, flags: i32) -> FopenFlags {
        if self.kernel_direct(flags) {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            // The page cache survives reopen. Without the writeback cache,
            // FUSE_AUTO_INVAL_DATA drops it when the size or mtime the graph reports changes;
            // with it the kernel's own size and mtime are the reference (see `init`).
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    /// Whether the kernel reads and writes through an open with `flags` without its page
    /// cache (FOPEN_DIRECT_IO). Writable O_APPEND opens always do: through the page cache
    /// the kernel splits a write that ends inside a page it does not hold into two write
    /// requests, and two appends placed separately at the end of file by the bricks tear a
    /// record that another client's append lands between (see [`write_flags_for_graph`]).
    fn kernel_direct(&self, flags: i32) -> bool {
        self.opts.direct_io || appends(flags)
    }

    /// Answers an open or create of `ino` (graph fd `fd`) on a passthrough mount with
    /// `answer`, which replies and says how. A non-root writer (`non_root_writer`) that passes
    /// through writes the brick's file with the mount's root credentials, which clear nothing:
    /// setuid/setgid are cleared for it here, as its first write would (its open through the
    /// graph checked that it may write), before the reply when the inode already passes
    /// through, else right after a reply that passed through.
    async fn answer_passthrough(
        &self,
        graph: &Graph,
        ino: INodeNo,
        fd: Fd,
        non_root_writer: bool,
        answer: impl FnOnce() -> Mode,
    ) {
        let root = Ctx::root();
        let kill = || kill_suidgid_after_write(graph.top(), &root, fd, None);
        let before = non_root_writer && self.pt.has_backing(ino);
        if before {
            kill().await;
        }
        if answer() == Mode::Passthrough && non_root_writer && !before {
            kill().await;
        }
    }

    /// The host's own statedump section.
    pub fn dump(&self) -> String {
        let (pt_inodes, pt_opens, tracked) = self.pt.counts();
        let (cached, passed) = self.pt.answered();
        let current = self.graph().id();
        // Graphs fds were opened on that are still alive: the current one, and older ones
        // kept by fds that did not move yet (see migrate.rs) or by fops in flight.
        let older: Vec<String> = (self.fds.graphs().into_iter())
            .filter(|(id, _)| *id != current)
            .map(|(id, n)| format!("{id} ({n} fds)"))
            .collect();
        format!(
            "[fuse]\nknown inodes: {}\nopen fds: {}\ngraph: {current}\nolder graphs alive: {}\n\
             passthrough: {} (inodes {pt_inodes}, opens {pt_opens} of {tracked}; answered so \
             far: {passed} passing through, {cached} through the page cache)\n\
             upcalls: {} applied, {} dropped on a full queue\n",
            self.inodes.len(),
            self.fds.len(),
            if older.is_empty() {
                "none".to_string()
            } else {
                older.join(", ")
            },
            if self.pt.on() { "on" } else { "off" },
            crate::upcall::APPLIED.load(std::sync::atomic::Ordering::Relaxed),
            crate::upcall::DROPPED.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// The flags of the reply to an opendir of `ino` on `graph`. The kernel caches the
    /// listing (FOPEN_CACHE_DIR) and checks it against the directory's mtime and its own
    /// changes; an upcall of another client's change drops it (upcall.rs). It keeps it over
    /// the open (FOPEN_KEEP_CACHE; an open without the flag drops the cached listing) only
    /// while
    /// - the listing came from `graph`: its offsets are that graph's cookies, which another
    ///   graph's translators may read differently (see dir.rs);
    /// - and it is younger than the attribute timeout: a listing from the cache carries no
    ///   attributes, so once those readdirplus gave have expired, `ls -l` would look every
    ///   name up (a round trip each) where a new listing costs one per page of entries.
    pub(crate) fn dir_fopen_flags(&self, ino: INodeNo, graph: &Graph) -> FopenFlags {
        if !self.opts.dir_cache {
            return FopenFlags::empty();
        }
        match self.inodes.listed_on(ino) {
            Some((g, at)) if g != graph.id() || at.elapsed() >= self.opts.attr_timeout => {
                FopenFlags::FOPEN_CACHE_DIR
            }
            _ => FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
        }
    }

    /// What fstat of directory `ino`, open here through `u`, answers once the graph no
    /// longer has it (another client removed it): the attributes last seen with no link
    /// left, as a local file system reports a removed directory that is still open.
    pub(crate) fn removed_dir_attr(&self, ino: INodeNo, u: &FdUse) -> Option<Iatt> {
        if !is_dir_flags(u.fd().flags) {
            return None;
        }
        let mut a = self.inodes.seen_dir_attr(ino)?;
        a.nlink = 0;
        Some(a)
    }

    /// Releases every fd the kernel did not (lazy unmount, connection abort).
    pub async fn release_all(&self) {
        let cx = Ctx::root();
        for u in self.fds.drain().into_iter().filter(FdUse::opened) {
            let fd = u.fd();
            let r = if is_dir_flags(fd.flags) {
                u.top().releasedir(&cx, fd).await
            } else {
                u.top().release(&cx, fd).await
            };
            if let Err(e) = r {
                tracing::debug!(fd = fd.id.0, error = ?e, "release at shutdown failed");
            }
        }
    }
}

/// "No such name", cached by the kernel for `ttl`: node id 0 in an entry reply.
fn reply_negative(reply: ReplyEntry, ttl: &Duration) {
    let mut none = crate::attr::dot_attr(INodeNo(0));
    none.kind = fuser::FileType::RegularFile;
    reply.entry_with_ttls(&Duration::ZERO, ttl, &none, Generation(0));
}

/// Open flags as the graph should see them. With the writeback cache the kernel reads pages
/// through write-only fds (as libfuse's examples do). O_APPEND never reaches the graph's fd:
/// the kernel may write cached pages back (mmap, the writeback cache) through any writable
/// fd of the file, an O_APPEND one included, and those writes belong at their offsets.
/// Appends are marked per write instead ([`write_flags_for_graph`]).
fn graph_open_flags(writeback_cache: bool, flags: i32) -> i32 {
    let mut f = flags & !libc::O_APPEND;
    if writeback_cache && f & libc::O_ACCMODE == libc::O_WRONLY {
        f = (f & !libc::O_ACCMODE) | libc::O_RDWR;
    }
    f
}

/// Whether an open with `flags` appends: writable, with O_APPEND.
fn appends(flags: i32) -> bool {
    flags & libc::O_APPEND != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// The per-write flags a write request sends to the graph: the open's flags (O_SYNC,
/// O_DSYNC, O_DIRECT), with O_APPEND only on a write(2) through an O_APPEND open. The
/// bricks then place it at the end of file as they find it, so appends from any number of
/// clients never overlap (the kernel's offset, from the size it last knew, is ignored).
/// A write-back of cached pages (`FUSE_WRITE_CACHE`) goes to its offset whatever fd the
/// kernel picked for it.
fn write_flags_for_graph(writeback_cache: bool, open_flags: i32, cached: bool) -> i32 {
    let f = graph_open_flags(writeback_cache, open_flags);
    if !cached && appends(open_flags) {
        f | libc::O_APPEND
    } else {
        f
    }
}

/// Whether `attr` changes nothing but (at most) the mtime, to the value `last` already has.
fn resends_known_times(attr: &SetAttr, last: &Iatt) -> bool {
    let only_times = SetAttr {
        mtime: TimeSet::Omit,
        ..*attr
    } == SetAttr::default();
    only_times
        && match attr.mtime {
            TimeSet::Omit => true,
            TimeSet::At(t) => t == last.mtime,
            TimeSet::Now => false,
        }
}

/// The mtime to send with a setattr that changes `size` to `mtime`. No system call sets a
/// size and times together, so an mtime beside a size is the truncate's own "now"; with the
/// writeback cache the kernel sends it as an explicit time (its clock). An explicit time, or
/// even "now" for the mtime alone, needs ownership, where a truncate needs only write
/// permission: a group member or other user allowed to write was refused `O_TRUNC` and
/// `ftruncate` with EPERM. Left out, as the brick's own truncate sets mtime and ctime.
fn size_mtime(size: Option<u64>, mtime: TimeSet) -> TimeSet {
    match size {
        Some(_) => TimeSet::Omit,
        None => mtime,
    }
}

/// Whether a refused `fsetattr` is the writeback cache's flush of the times it kept for
/// writes (at close or writeback: an explicit mtime, no atime, on a writable fd). The
/// writer may write but need not own the file, and an explicit time needs ownership, so
/// close(2) failed with EPERM for a writer who is not the owner; the brick already set the
/// mtime when it wrote, so the flush is dropped instead. (A non-owner's own
/// `futimens({UTIME_OMIT, t})` on a writable fd is then a silent no-op instead of EPERM.)
fn is_times_flush(attr: &SetAttr, fd: &Fd) -> bool {
    let only_mtime = SetAttr {
        mtime: TimeSet::Omit,
        ..*attr
    } == SetAttr::default();
    only_mtime
        && matches!(attr.mtime, TimeSet::At(_))
        && fd.flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// Whether a file's attributes `now` differ from the ones this mount last gave the kernel
/// (`before`) in what tells that its data changed (size, mtime, ctime); unknown on either
/// side counts as changed.
fn changed_since(before: Option<&Iatt>, now: Option<&Iatt>) -> bool {
    match (before, now) {
        (Some(b), Some(n)) => b.size != n.size || b.mtime != n.mtime || b.ctime != n.ctime,
        _ => true,
    }
}

/// A file with no name left (another client removed it or renamed a file over it) reached
/// by a getattr or open: if the request is the first to use the node after a lookup gave it,
/// no longer ago than this, the path walk found the file just now, before the change, and
/// it is used as found (stat, open and read see it as it was, never ESTALE; storage/posix
/// keeps it reachable for `unlinked-grace`). Otherwise the kernel reached it through a
/// cached name and gets ESTALE, which it answers by looking the name up again once
/// (LOOKUP_REVAL): the walk then finds what the name is now, or that it is gone. The next
/// getattr or open of a non-directory from the thread this mount answered ESTALE is that
/// retry's request ([`InodeTable::expect_retry`]: the thread is still inside the system
/// call), and it opens or stats what the walk found even if it comes later than this (a
/// loaded machine), other requests used the node meanwhile (a permission check's getattr)
/// or the name changed again: the walk began after the change the ESTALE was for, and the
/// kernel would not retry twice.
const FRESH_NAME: Duration = Duration::from_millis(100);

/// How many times a create without O_EXCL is tried when the name it found taken is gone
/// again (or not yet whole) by the time it is opened.
const CREATE_TRIES: u32 = 8;

/// The pause before try `tries + 1` of such a create: 1 ms, doubling, at most 50 ms (about
/// 0.1 s over every try): under load a racing create can take that long to reach every child.
fn create_backoff(tries: u32) -> Duration {
    Duration::from_millis(1 << tries.saturating_sub(1).min(6)).min(Duration::from_millis(50))
}

/// Whether a fop by GFID failed because the object has no name left (unlinked while open).
fn gone(e: Errno) -> bool {
    e == Errno::ESTALE || e == Errno::ENOENT
}

/// Directory fds are opened with O_DIRECTORY by the host, so shutdown knows which release to
/// send.
fn is_dir_flags(flags: i32) -> bool {
    flags & libc::O_DIRECTORY != 0
}

/// FUSE_HANDLE_KILLPRIV_V2 makes clearing setuid/setgid on write our job. The brick writes with
/// the caller's credentials, so its own kernel clears them already for a caller without
/// CAP_FSETID (the only case the kernel flags); this covers a brick that wrote with more
/// privilege. Costs a call only for the rare write flagged by the kernel (a setuid/setgid file).
async fn kill_suidgid_after_write(top: &Subvol, cx: &Ctx, fd: Fd, attr: Option<Iatt>) {
    let attr = match attr {
        Some(a) => a,
        None => match top.fstat(cx, fd).await {
            Ok(a) => a,
            Err(_) => return,
        },
    };
    let mut perm = attr.perm & !libc::S_ISUID;
    // setgid without group execute is mandatory locking, not a privilege: kept.
    if attr.perm & libc::S_IXGRP != 0 {
        perm &= !libc::S_ISGID;
    }
    if perm != attr.perm {
        let change = SetAttr {
            perm: ROption::RSome(perm),
            ..SetAttr::default()
        };
        if let Err(e) = top.fsetattr(cx, fd, change).await {
            tracing::warn!(gfid = %fd.gfid, "could not clear setuid/setgid after a write: {e}");
        }
    }
}

/// The filesystem object handed to fuser.
pub struct XlfsFs {
    s: Arc<Shared>,
}

impl XlfsFs {
    pub fn new(s: Arc<Shared>) -> XlfsFs {
        XlfsFs { s }
    }

    /// Runs `f`'s future, which owns the reply and must send it: first polled once right here
    /// on the FUSE reading thread, and only moved to the runtime if it must wait. A fop the
    /// graph answers from memory (a write acknowledged by write-behind, a cache hit) is then
    /// replied to without any thread handoff: on this machine a cross-thread wakeup costs more
    /// than the whole translator stack.
    fn spawn<F, Fut>(&self, f: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Translators and the protocol client may use the runtime (timers, spawns) when polled.
        let _rt = self.s.rt.enter();
        // A lone call to the brick may spin for its reply here (protocol/client `reply-spin`):
        // the request then completes on this thread without the reader's wakeup.
        xlfs_core::services::with_reply_spin(|| {
            xlfs_core::services::poll_here_then_spawn(f(self.s.clone()), false)
        });
    }

    /// Whether a write must drop the kernel's cached pages of its range before it is
    /// acknowledged: a direct write (O_DIRECT) on a mount that caches pages. The kernel
    /// drops them itself after a direct write it waits for, but not after one it queued
    /// (FUSE_ASYNC_DIO: io_submit, or a large write split into parallel requests), so a
    /// buffered read racing the write cached the old data and kept it (generic/451).
    /// Never for a write of the page cache itself (FUSE_WRITE_CACHE): the kernel holds
    /// those pages under writeback until the reply, so invalidating them would wait forever.
    /// And only while the file is open without O_DIRECT somewhere on this mount: otherwise
    /// the kernel holds no pages of it (a file only ever opened O_DIRECT, as by fio's direct
    /// small-file runs, pays no notification per write). A shared mapping of an O_DIRECT fd
    /// is the exception this misses.
    fn drops_pages_after(&self, write_flags: WriteFlags, flags: OpenFlags, gfid: &Gfid) -> bool {
        !self.s.opts.direct_io
            && flags.0 & libc::O_DIRECT != 0
            && !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE)
            && self.s.fds.open_buffered(gfid)
    }

    fn gfid(&self, node: INodeNo) -> Result<Gfid, fuser::Errno> {
        // An id the kernel still uses but we forgot cannot happen with correct counting.
        self.s.inodes.gfid(node).ok_or(fuser::Errno::ESTALE)
    }

    /// The fd of `fh` and the graph it is open on; inside the fop, [`Shared::follow`] moves
    /// it to the current graph first if it may (see migrate.rs).
    fn fd(&self, fh: FileHandle) -> Result<FdUse, fuser::Errno> {
        self.s.fds.get(fh).ok_or(fuser::Errno::EBADF)
    }

    fn loc(&self, parent: INodeNo, name: &OsStr) -> Result<Loc, fuser::Errno> {
        Ok(Loc::new(self.gfid(parent)?, name_str(name)?))
    }

    /// `lookup(node, ".")`: the kernel opens a file handle (`open_by_handle_at`, an NFS
    /// re-export; FUSE_EXPORT_SUPPORT) whose inode it no longer has, so `node` may be one it
    /// forgot (see inodes.rs). The reply must carry `node` itself; an object that is gone, or
    /// an id that no longer names it, is ESTALE.
    fn lookup_handle(&self, req: &Request, node: INodeNo, reply: ReplyEntry) {
        let Some(gfid) = self.s.inodes.handle_gfid(node) else {
            return reply.error(fuser::Errno::ESTALE);
        };
        let cx = ctx(req, Need::of(Fop::Stat), None);
        let stamp = self.s.inodes.stamp();
        self.spawn(|s| async move {
            let mut a = match s.graph().top().stat(&cx, gfid).await {
                Ok(a) => a,
                Err(e) if gone(e) => return reply.error(fuser::Errno::ESTALE),
                Err(e) => return reply.error(errno(e)),
            };
            if a.gfid.is_null() {
                a.gfid = gfid;
            }
            if a.gfid != gfid {
                return reply.error(fuser::Errno::ESTALE);
            }
            // A file with no name left may still be reachable on the bricks for a while
            // (storage/posix `unlinked-grace`); through a handle it is gone, as on a local
            // file system, unless it is open here.
            if a.nlink == 0 && !a.is_dir() && !s.fds.is_open(&gfid) {
                return reply.error(fuser::Errno::ESTALE);
            }
            let Some(id) = s.inodes.remember_at(gfid, node) else {
                return reply.error(fuser::Errno::ESTALE);
            };
            s.inodes.note_attr(id, &a, stamp);
            reply.entry_with_ttls(
                &s.opts.attr_timeout,
                &s.opts.entry_timeout,
                &file_attr(id, &a),
                Generation(0),
            );
        });
    }
}

/// Names cross the fop boundary as UTF-8 strings.
fn name_str(name: &OsStr) -> Result<RString, fuser::Errno> {
    name.to_str().map(RString::from).ok_or(fuser::Errno::EILSEQ)
}

/// Returns from the enclosing fn with `reply.error(e)` on `Err`.
macro_rules! tri {
    ($reply:ident, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return $reply.error(e),
        }
    };
}

/// Inside a fop's future: the [`FdUse`] `$u` of handle `$fh` moved to the current graph when
/// it may ([`Shared::follow`]); replies with the error and returns if the handle is gone.
macro_rules! follow {
    ($s:ident, $reply:ident, $fh:expr, $u:expr) => {
        match $s.follow($fh, $u).await {
            Ok(u) => u,
            Err(e) => return $reply.error(e),
        }
    };
}

// Each fop's work, by kind; the `Filesystem` impl below only hands the kernel's requests
// to them.
mod attrs;
mod dirs;
mod entry;
mod file;
mod locks;
mod xattr;

impl Filesystem for XlfsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let o = &self.s.opts;
        let mut want = vec![
            ("PARALLEL_DIROPS", InitFlags::FUSE_PARALLEL_DIROPS),
            ("ASYNC_DIO", InitFlags::FUSE_ASYNC_DIO),
            ("CACHE_SYMLINKS", InitFlags::FUSE_CACHE_SYMLINKS),
            // The kernel then marks the superblock SB_NOSEC: without it every write(2) first
            // asks for `security.capability` with a GETXATTR round trip (half the cost of a
            // 4 KiB write). Setuid/setgid clearing: see `kill_suidgid_after_write`.
            ("HANDLE_KILLPRIV_V2", InitFlags::FUSE_HANDLE_KILLPRIV_V2),
            // File handles (open_by_handle_at, NFS re-export) of inodes the kernel evicted:
            // it asks `lookup(node, ".")` and, for a directory's parent, `lookup(node, "..")`.
            ("EXPORT_SUPPORT", InitFlags::FUSE_EXPORT_SUPPORT),
            // Modes of create/mkdir/mknod arrive unmasked, with the caller's umask beside
            // them: the brick applies the umask, or a default ACL of the parent in its place.
            ("DONT_MASK", InitFlags::FUSE_DONT_MASK),
        ];
        if o.default_permissions {
            // The kernel's own permission checks then honour POSIX ACLs (it reads them as
            // `system.posix_acl_*` xattrs and caches them), and it drops its cached ACLs
            // when it changes the mode (the brick's chmod updates the ACL mask). The kernel
            // turns `default_permissions` on with it, so without that the brick, which
            // checks as the caller, is the one that honours ACLs.
            want.push(("POSIX_ACL", InitFlags::FUSE_POSIX_ACL));
        }
        if o.writeback_cache {
            want.push(("WRITEBACK_CACHE", InitFlags::FUSE_WRITEBACK_CACHE));
        } else {
            // Drop cached pages when the size or mtime the graph reports changes. With the
            // writeback cache the kernel keeps size and mtime itself and never compares them,
            // so there it would only add a GETATTR before reads once the attributes expire.
            want.push(("AUTO_INVAL_DATA", InitFlags::FUSE_AUTO_INVAL_DATA));
        }
        if o.direct_io {
            // Shared mmap of direct-io files goes through the page cache instead of failing.
            want.push(("DIRECT_IO_ALLOW_MMAP", InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP));
        }
        if o.readdirplus {
            want.push(("READDIRPLUS", InitFlags::FUSE_DO_READDIRPLUS));
            if o.readdirplus_auto {
                want.push(("READDIRPLUS_AUTO", InitFlags::FUSE_READDIRPLUS_AUTO));
            }
        }
        if o.posix_locks {
            want.push(("POSIX_LOCKS", InitFlags::FUSE_POSIX_LOCKS));
        }
        if o.flock_locks {
            // flock(2) goes to the bricks as a whole-file lock (see locks.rs).
            want.push(("FLOCK_LOCKS", InitFlags::FUSE_FLOCK_LOCKS));
        }
        for (name, flags) in want {
            if let Err(missing) = config.add_capabilities(flags) {
                tracing::warn!(
                    capability = name,
                    ?missing,
                    "the kernel does not offer this FUSE capability"
                );
            }
        }
        if let Err(max) = config.set_max_write(o.max_write) {
            let _ = config.set_max_write(max);
        }
        if let Err(max) = config.set_max_readahead(MAX_READAHEAD) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(CONGESTION_THRESHOLD);
        if o.passthrough {
            // Depth 1: backing files on an ordinary file system (not overlayfs).
            let offered = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(1).is_ok();
            if offered {
                self.s.pt.enable();
                tracing::info!(
                    "FUSE passthrough on: read-only opens of files on a brick on this \
                     machine are read by the kernel directly (no writeback cache)"
                );
            } else {
                tracing::warn!(
                    "the kernel does not offer FUSE passthrough (Linux 6.9 with \
                     CONFIG_FUSE_PASSTHROUGH); reads go through the mount"
                );
            }
        }
        tracing::debug!(abi = %config.kernel_abi(), "FUSE session initialised");
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.do_lookup(req, parent, name, reply)
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.do_forget(ino, nlookup)
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.do_getattr(req, ino, fh, reply)
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.do_setattr(req, ino, mode, uid, gid, size, atime, mtime, fh, reply)
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.do_readlink(req, ino, reply)
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.do_mknod(req, parent, name, mode, umask, rdev, reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.do_mkdir(req, parent, name, mode, umask, reply)
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.do_unlink(req, parent, name, reply)
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.do_rmdir(req, parent, name, reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.do_symlink(req, parent, link_name, target, reply)
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.do_rename(req, parent, name, newparent, newname, flags, reply)
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.do_link(req, ino, newparent, newname, reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.do_open(req, ino, flags, reply)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.do_create(req, parent, name, mode, umask, flags, reply)
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.do_read(req, ino, fh, offset, size, lock_owner, reply)
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.do_write(
            req,
            ino,
            fh,
            offset,
            data,
            write_flags,
            flags,
            lock_owner,
            reply,
        )
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.do_flush(req, fh, lock_owner, reply)
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        self.do_release(req, fh, lock_owner, flush, reply)
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.do_fsync(req, fh, datasync, reply)
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.do_opendir(req, ino, flags, reply)
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.do_readdir(req, ino, fh, offset, reply)
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.do_readdirplus(req, ino, fh, offset, reply)
    }

    fn releasedir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.do_releasedir(req, fh, reply)
    }

    fn fsyncdir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.do_fsyncdir(req, fh, datasync, reply)
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.do_statfs(req, ino, reply)
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        self.do_setxattr(req, ino, name, value, flags, position, reply)
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.do_getxattr(req, ino, name, size, reply)
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.do_listxattr(req, ino, size, reply)
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.do_removexattr(req, ino, name, reply)
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        self.do_access(req, ino, mask, reply)
    }

    fn getlk(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        self.do_getlk(req, fh, lock_owner, start, end, typ, pid, reply)
    }

    fn setlk(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        self.do_setlk(req, fh, lock_owner, start, end, typ, pid, sleep, reply)
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.do_fallocate(req, ino, fh, offset, length, mode, reply)
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        self.do_ioctl(reply)
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        self.do_copy_file_range(reply)
    }

    fn lseek(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.do_lseek(req, fh, offset, whence, reply)
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

/// getxattr/listxattr size protocol: size 0 asks for the length; a buffer too small is ERANGE.
fn reply_xattr(reply: ReplyXattr, size: u32, value: &[u8]) {
    match xattr_answer(size, value.len()) {
        XattrAnswer::Size(n) => reply.size(n),
        XattrAnswer::Data => reply.data(value),
        XattrAnswer::Range => reply.error(fuser::Errno::ERANGE),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum XattrAnswer {
    Size(u32),
    Data,
    Range,
}

fn xattr_answer(size: u32, len: usize) -> XattrAnswer {
    match u32::try_from(len) {
        Err(_) => XattrAnswer::Range,
        Ok(n) if size == 0 => XattrAnswer::Size(n),
        Ok(n) if n > size => XattrAnswer::Range,
        Ok(_) => XattrAnswer::Data,
    }
}

/// listxattr's wire form: every name NUL-terminated.
fn xattr_list(names: &RVec<RString>) -> Vec<u8> {
    let mut out = Vec::with_capacity(names.iter().map(|n| n.len() + 1).sum());
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_size_protocol() {
        assert_eq!(xattr_answer(0, 10), XattrAnswer::Size(10));
        assert_eq!(xattr_answer(0, 0), XattrAnswer::Size(0));
        assert_eq!(xattr_answer(10, 10), XattrAnswer::Data);
        assert_eq!(xattr_answer(64, 10), XattrAnswer::Data);
        assert_eq!(xattr_answer(9, 10), XattrAnswer::Range);
    }

    #[test]
    fn xattr_names_are_nul_terminated() {
        let names: RVec<RString> = vec![RString::from("user.a"), RString::from("user.bc")].into();
        assert_eq!(xattr_list(&names), b"user.a\0user.bc\0");
        assert!(xattr_list(&RVec::new()).is_empty());
    }

    #[test]
    fn only_a_resent_mtime_is_answered_locally() {
        let last = Iatt {
            mtime: xlator_api::Timespec { sec: 7, nsec: 9 },
            ..Iatt::default()
        };
        let at = |sec, nsec| TimeSet::At(xlator_api::Timespec { sec, nsec });
        let set = |mtime| SetAttr {
            mtime,
            ..SetAttr::default()
        };
        assert!(resends_known_times(&SetAttr::default(), &last));
        assert!(resends_known_times(&set(at(7, 9)), &last));
        assert!(!resends_known_times(&set(at(7, 8)), &last));
        assert!(!resends_known_times(&set(TimeSet::Now), &last));
        for other in [
            SetAttr {
                perm: ROption::RSome(0o644),
                ..set(at(7, 9))
            },
            SetAttr {
                size: ROption::RSome(0),
                ..SetAttr::default()
            },
            SetAttr {
                atime: at(7, 9),
                ..set(at(7, 9))
            },
            SetAttr {
                uid: ROption::RSome(0),
                ..SetAttr::default()
            },
        ] {
            assert!(!resends_known_times(&other, &last), "{other:?}");
        }
    }

    #[test]
    fn writeback_cache_widens_write_only_opens_and_no_graph_fd_appends() {
        let wa = libc::O_WRONLY | libc::O_APPEND;
        assert_eq!(graph_open_flags(false, wa), libc::O_WRONLY);
        assert_eq!(graph_open_flags(true, wa), libc::O_RDWR);
        assert_eq!(graph_open_flags(true, libc::O_RDONLY), libc::O_RDONLY);
        assert_eq!(
            graph_open_flags(false, libc::O_RDWR | libc::O_SYNC),
            libc::O_RDWR | libc::O_SYNC
        );
    }

    #[test]
    fn only_a_write_through_an_append_open_is_an_append() {
        let wa = libc::O_WRONLY | libc::O_APPEND;
        for wb in [false, true] {
            assert_ne!(write_flags_for_graph(wb, wa, false) & libc::O_APPEND, 0);
            // A write-back of cached pages belongs at its offset, whatever fd carries it.
            assert_eq!(write_flags_for_graph(wb, wa, true) & libc::O_APPEND, 0);
            assert_eq!(
                write_flags_for_graph(wb, libc::O_RDWR, false) & libc::O_APPEND,
                0
            );
            assert_eq!(
                write_flags_for_graph(wb, libc::O_RDONLY | libc::O_APPEND, false) & libc::O_APPEND,
                0,
                "not writable: not an append"
            );
        }
        assert!(appends(libc::O_RDWR | libc::O_APPEND));
        assert!(!appends(libc::O_RDONLY | libc::O_APPEND));
    }

    #[test]
    fn a_file_changed_when_anything_that_tells_data_changed_differs() {
        let a = Iatt {
            size: 10,
            ..Iatt::default()
        };
        assert!(!changed_since(Some(&a), Some(&a)));
        assert!(changed_since(None, Some(&a)), "unknown before: changed");
        assert!(changed_since(Some(&a), None), "unknown now: changed");
        for b in [
            Iatt { size: 11, ..a },
            Iatt {
                mtime: xlator_api::Timespec { sec: 1, nsec: 0 },
                ..a
            },
            Iatt {
                ctime: xlator_api::Timespec { sec: 0, nsec: 1 },
                ..a
            },
        ] {
            assert!(changed_since(Some(&a), Some(&b)), "{b:?}");
        }
        let atime_only = Iatt {
            atime: xlator_api::Timespec { sec: 5, nsec: 0 },
            ..a
        };
        assert!(!changed_since(Some(&a), Some(&atime_only)));
    }
}
