//! The node id <-> GFID table.
//!
//! The kernel names objects by 64-bit node ids; fops name them by 128-bit GFIDs. Every entry
//! reply (lookup, create, mkdir, link, readdirplus...) hands the kernel one reference on a node
//! id, and `forget` gives references back; a node is dropped when its count reaches zero.
//!
//! Invariants:
//! - one node id per GFID, so hard links share it (and share `st_ino`: fuser sends the node id
//!   as the inode number);
//! - the root is `FUSE_ROOT_ID` <-> [`Gfid::ROOT`] and is never dropped;
//! - a node id is derived from its GFID (the two halves XORed, as GlusterFS derives inode
//!   numbers), so `st_ino` is the same across remounts; on a collision with a live node of
//!   another GFID the next free id is taken;
//! - the count is raised *before* the reply is sent, so it is never below the kernel's;
//! - a forgotten node's id keeps naming its GFID (up to [`RETIRED_MAX`] of them, oldest
//!   dropped first), and no other GFID takes that id meanwhile: a file handle the kernel
//!   gave out (`name_to_handle_at`, an NFS re-export) holds the node id, and after the
//!   kernel evicted the inode it asks `lookup(id, ".")`, whose reply must carry that same id
//!   ([`InodeTable::handle_gfid`], [`InodeTable::remember_at`]).
//!
//! Each node also keeps the attributes this mount last sent the kernel for it, while no write
//! through this mount could have changed them since (see [`InodeTable::note_attr`]). They let
//! `setattr` answer the kernel's re-send of times it already has without a round trip.
//!
//! A directory node keeps the attributes an entry fop in it returned (`postparent`), when no
//! other entry fop in that directory overlapped it: the kernel drops a directory's attributes
//! after each create or removal in it and asks again before its next permission check, and
//! [`InodeTable::fresh_attr`] answers that without a round trip.
//!
//! A regular file's node keeps the attributes the brick sent with its latest read (see
//! [`InodeTable::note_file_attr`]): with the writeback cache the kernel keeps size, mtime and
//! ctime itself, re-asks for the rest every attribute timeout, and
//! [`InodeTable::file_attr`] answers that from a read younger than the timeout. Any fop
//! through this mount that can change what the kernel does take from the reply (mode, owner,
//! link count: setattr, link, unlink, rename, xattrs, truncating open, fallocate) voids every
//! such record, so they are never older than the kernel's own cache could have been.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use fuser::INodeNo;
use libc::{S_ISGID, S_ISUID};
use xlator_api::{FileType, Gfid, Iatt};

/// Names remembered per non-directory node (hard links beyond this are rare; a name
/// forgotten here is only dropped from the kernel's cache later, at its entry timeout).
pub const NAMES_MAX: usize = 16;

/// How long after an ESTALE the next getattr or open of a non-directory from that thread is
/// taken as the kernel's retry (see [`InodeTable::expect_retry`]): the retry follows at
/// once, unless the machine is loaded.
pub const RETRY_WINDOW: Duration = Duration::from_secs(1);

/// The request a thread was answered ESTALE to, which the kernel's retry repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    Getattr,
    Open,
}

/// Threads waiting for such a retry that are remembered at once.
const RETRYING_MAX: usize = 1024;

/// The kernel's fixed node id of the mount root.
pub const ROOT: INodeNo = INodeNo(1);

/// How many forgotten node ids keep naming their GFID for file handles (about 60 bytes
/// each). A handle whose node was forgotten longer ago than this many forgets is stale.
pub const RETIRED_MAX: usize = 1 << 18;

#[derive(Debug)]
struct Node {
    gfid: Gfid,
    /// References the kernel holds (lookup replies not yet forgotten).
    nlookup: u64,
    /// The attributes last sent to the kernel, if no write began since they were fetched.
    last: Option<Iatt>,
    /// A directory's attributes as last sent to the kernel, kept when another client's
    /// change voids `last`: what a stat of the directory answers once it is removed (see
    /// [`InodeTable::seen_dir_attr`]).
    seen_dir: Option<Box<Iatt>>,
    /// A regular file's attributes from a read reply, when they arrived, and the
    /// `meta_seq` they were recorded under.
    file: Option<(Iatt, Instant, u64)>,
    dir: DirState,
    /// For a non-directory: the directories and names of the latest entry replies that
    /// gave the kernel this node (up to [`NAMES_MAX`], newest last), so that names another
    /// client removed can be dropped from the kernel's cache once a reply shows the object
    /// has no name left ([`InodeTable::take_names`]).
    names: Vec<(INodeNo, Box<std::ffi::OsStr>)>,
    /// When the latest lookup reply that gave the node was sent, until a request uses it.
    named_at: Option<Instant>,
    /// When the latest lookup reply that gave the node was sent (kept: a retry after an
    /// ESTALE must have looked the node up, see [`InodeTable::take_fresh_for`]).
    looked_up_at: Option<Instant>,
}

/// Entry fops in one directory, for its `postparent` attributes.
#[derive(Debug, Default)]
struct DirState {
    /// The directory's attributes as an entry fop left them, and when they arrived.
    fresh: Option<(Iatt, Instant)>,
    /// Entry fops in flight in it.
    ops: u32,
    /// Bumped when one starts.
    seq: u64,
    /// The graph whose listing of it the kernel may have cached, and when that listing
    /// started (see `Shared::dir_fopen_flags`).
    listed_on: Option<(u64, Instant)>,
}

#[derive(Debug, Default)]
struct Inner {
    nodes: HashMap<u64, Node>,
    by_gfid: HashMap<Gfid, u64>,
    /// Every recorded name (`Node::names`) -> its node: keeps a name on one node only, and
    /// lets a rename or unlink through this mount move or drop it.
    by_name: HashMap<(u64, Box<std::ffi::OsStr>), u64>,
    /// Bumped when a data-changing request (write, fallocate, truncating open) starts or ends.
    write_seq: u64,
    /// Data-changing requests in flight.
    writing: u64,
    /// Bumped when a fop that may change a file's mode, owner or link count starts or ends;
    /// a `file` record made under another value is void.
    meta_seq: u64,
    /// Such fops in flight.
    meta_ops: u64,
    /// The root's directory state (the root has no `Node`).
    root_dir: DirState,
    /// Forgotten node ids and their GFIDs (see the module invariants).
    retired: Retired,
    /// Threads answered ESTALE, when, and to which request ([`InodeTable::expect_retry`]).
    retrying: HashMap<u32, (Instant, Retry)>,
    /// Threads answered ESTALE by an entry fop in a directory that is gone, which directory
    /// and when ([`InodeTable::in_removed_dir`]).
    stale_dirs: HashMap<u32, (Instant, INodeNo)>,
}

/// Records `v` for thread `pid` at `now` in `map` (what this mount answered the thread, see
/// [`InodeTable::expect_retry`] and [`InodeTable::in_removed_dir`]): at most
/// [`RETRYING_MAX`] threads, those older than [`RETRY_WINDOW`] dropped first when full.
fn note_thread<V>(map: &mut HashMap<u32, (Instant, V)>, pid: u32, now: Instant, v: V) {
    if map.len() >= RETRYING_MAX {
        map.retain(|_, (t, _)| now - *t < RETRY_WINDOW);
    }
    if map.len() < RETRYING_MAX {
        map.insert(pid, (now, v));
    }
}

impl Inner {
    /// Forgets the index entry of `name` in `parent` if it points at `node`.
    fn unindex(&mut self, parent: INodeNo, name: Box<std::ffi::OsStr>, node: u64) {
        let key = (parent.0, name);
        if self.by_name.get(&key) == Some(&node) {
            self.by_name.remove(&key);
        }
    }

    /// Forgets the name `name` in `parent`, wherever it is recorded.
    fn drop_name(&mut self, parent: INodeNo, name: &std::ffi::OsStr) {
        if let Some(node) = self.by_name.remove(&(parent.0, name.into()))
            && let Some(n) = self.nodes.get_mut(&node)
        {
            n.names.retain(|(p, m)| !(*p == parent && **m == *name));
        }
    }
}

/// Forgotten node ids, oldest first.
#[derive(Debug, Default)]
struct Retired {
    /// id -> (GFID, the retirement's number).
    by_id: HashMap<u64, (Gfid, u64)>,
    by_gfid: HashMap<Gfid, u64>,
    /// (id, retirement number), oldest first; an entry whose number `by_id` no longer holds
    /// is void (revived, or retired again later).
    order: VecDeque<(u64, u64)>,
    seq: u64,
}

impl Retired {
    fn gfid(&self, id: u64) -> Option<Gfid> {
        self.by_id.get(&id).map(|e| e.0)
    }

    fn add(&mut self, id: u64, gfid: Gfid) {
        self.seq += 1;
        self.by_id.insert(id, (gfid, self.seq));
        self.by_gfid.insert(gfid, id);
        self.order.push_back((id, self.seq));
        while self.by_id.len() > RETIRED_MAX {
            let Some((old, seq)) = self.order.pop_front() else {
                break;
            };
            if let Some(&(g, s)) = self.by_id.get(&old)
                && s == seq
            {
                self.by_id.remove(&old);
                self.by_gfid.remove(&g);
            }
        }
        // Void entries pile up when the same objects are looked up and forgotten again and
        // again: drop them once they outnumber the live ones.
        if self.order.len() > 2 * self.by_id.len() + 1024 {
            let by_id = &self.by_id;
            self.order
                .retain(|(id, seq)| by_id.get(id).is_some_and(|e| e.1 == *seq));
        }
    }

    /// `gfid` is live again (under some id): its retired id goes.
    fn revive(&mut self, gfid: &Gfid) {
        if let Some(id) = self.by_gfid.remove(gfid) {
            self.by_id.remove(&id);
        }
    }
}

impl Inner {
    fn dir_state(&mut self, node: INodeNo) -> Option<(Gfid, &mut DirState)> {
        if node == ROOT {
            return Some((Gfid::ROOT, &mut self.root_dir));
        }
        self.nodes.get_mut(&node.0).map(|n| (n.gfid, &mut n.dir))
    }

    fn dir_ref(&self, node: INodeNo) -> Option<&DirState> {
        if node == ROOT {
            return Some(&self.root_dir);
        }
        self.nodes.get(&node.0).map(|n| &n.dir)
    }
}

/// When an entry fop in a directory was sent; see [`InodeTable::end_dir_op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStamp {
    seq: u64,
    /// No other entry fop was in flight in the directory when this one started.
    alone: bool,
}

/// When a request that fetches attributes was sent; see [`InodeTable::note_attr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp(u64);

/// When a read was sent; see [`InodeTable::note_file_attr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaStamp(u64);

/// The table; shared by every request.
#[derive(Debug, Default)]
pub struct InodeTable {
    inner: RwLock<Inner>,
}

/// The preferred node id of `gfid`: stable across mounts, never 0, 1 only for the root.
pub fn derived_id(gfid: &Gfid) -> u64 {
    let (hi, lo) = gfid.0.split_at(8);
    let hi = u64::from_be_bytes(hi.try_into().unwrap_or([0; 8]));
    let lo = u64::from_be_bytes(lo.try_into().unwrap_or([0; 8]));
    let id = hi ^ lo;
    if *gfid == Gfid::ROOT {
        ROOT.0
    } else if id <= ROOT.0 {
        // 0 is "no node" and 1 the root: move out of the way.
        id + 2
    } else {
        id
    }
}

/// The id after `id` when `id` is taken, never 0 or the root's.
fn next_id(id: u64) -> u64 {
    let n = id.wrapping_add(1);
    if n <= ROOT.0 { ROOT.0 + 1 } else { n }
}

impl InodeTable {
    pub fn new() -> InodeTable {
        InodeTable::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // The table stays consistent even if a holder panicked: every update is one insert or
        // remove pair done without calling out.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The GFID of a node the kernel refers to; `None` for an unknown (already forgotten) id.
    pub fn gfid(&self, node: INodeNo) -> Option<Gfid> {
        if node == ROOT {
            return Some(Gfid::ROOT);
        }
        self.read().nodes.get(&node.0).map(|n| n.gfid)
    }

    /// Takes one kernel reference on `gfid`'s node (creating it) and returns its id. Call it
    /// right before sending an entry reply for `gfid`.
    pub fn remember(&self, gfid: Gfid) -> INodeNo {
        if gfid == Gfid::ROOT {
            return ROOT;
        }
        let mut inner = self.write();
        if let Some(&id) = inner.by_gfid.get(&gfid)
            && let Some(n) = inner.nodes.get_mut(&id)
        {
            n.nlookup += 1;
            return INodeNo(id);
        }
        // The id it had before it was forgotten, so old file handles still name it.
        let mut id = inner
            .retired
            .by_gfid
            .get(&gfid)
            .copied()
            .unwrap_or_else(|| derived_id(&gfid));
        loop {
            if inner.retired.gfid(id).is_some_and(|g| g != gfid) {
                id = next_id(id);
                continue;
            }
            match inner.nodes.entry(id) {
                Entry::Vacant(v) => {
                    v.insert(Node {
                        gfid,
                        nlookup: 1,
                        last: None,
                        seen_dir: None,
                        file: None,
                        dir: DirState::default(),
                        names: Vec::new(),
                        named_at: None,
                        looked_up_at: None,
                    });
                    break;
                }
                Entry::Occupied(_) => id = next_id(id),
            }
        }
        inner.by_gfid.insert(gfid, id);
        inner.retired.revive(&gfid);
        INodeNo(id)
    }

    /// The GFID a file handle's node id names: a live node's, or a forgotten one's.
    pub fn handle_gfid(&self, node: INodeNo) -> Option<Gfid> {
        if node == ROOT {
            return Some(Gfid::ROOT);
        }
        let inner = self.read();
        match inner.nodes.get(&node.0) {
            Some(n) => Some(n.gfid),
            None => inner.retired.gfid(node.0),
        }
    }

    /// [`remember`](Self::remember) for the answer to a file handle naming `node`: `None`
    /// (nothing taken) unless `gfid` gets exactly that id, which the kernel requires.
    pub fn remember_at(&self, gfid: Gfid, node: INodeNo) -> Option<INodeNo> {
        if self.handle_gfid(node) != Some(gfid) {
            return None;
        }
        let got = self.remember(gfid);
        if got == node {
            Some(got)
        } else {
            self.forget(got, 1);
            None
        }
    }

    /// Gives back `nlookup` kernel references; the node goes when none are left.
    pub fn forget(&self, node: INodeNo, nlookup: u64) {
        if node == ROOT {
            return;
        }
        let mut inner = self.write();
        let gone = match inner.nodes.get_mut(&node.0) {
            Some(n) => {
                n.nlookup = n.nlookup.saturating_sub(nlookup);
                (n.nlookup == 0).then_some(n.gfid)
            }
            None => None,
        };
        if let Some(gfid) = gone {
            if let Some(n) = inner.nodes.remove(&node.0) {
                for (p, name) in n.names {
                    inner.unindex(p, name, node.0);
                }
            }
            inner.by_gfid.remove(&gfid);
            inner.retired.add(node.0, gfid);
        }
    }

    /// The live node of `gfid`, with every attribute this table recorded for it forgotten
    /// (another client changed it: see `upcall`); `None` when the kernel does not know it.
    pub fn stale(&self, gfid: &Gfid) -> Option<INodeNo> {
        let mut inner = self.write();
        if *gfid == Gfid::ROOT {
            inner.root_dir.fresh = None;
            return Some(ROOT);
        }
        let id = *inner.by_gfid.get(gfid)?;
        let n = inner.nodes.get_mut(&id)?;
        n.last = None;
        n.file = None;
        n.dir.fresh = None;
        Some(INodeNo(id))
    }

    /// The node id to show for `gfid` without taking a reference (plain readdir's `d_ino`):
    /// the live node's id, else the derived one.
    pub fn peek_id(&self, gfid: &Gfid) -> INodeNo {
        if *gfid == Gfid::ROOT {
            return ROOT;
        }
        match self.read().by_gfid.get(gfid) {
            Some(&id) => INodeNo(id),
            None => INodeNo(derived_id(gfid)),
        }
    }

    /// Stamp a request that will fetch attributes, before sending it.
    pub fn stamp(&self) -> Stamp {
        Stamp(self.read().write_seq)
    }

    /// Records `attr` as what the kernel now holds for `node`, but only if no data-changing
    /// request started or finished since `stamp` and none is in flight: then the attributes
    /// include every write this mount made. Anything else forgets what was recorded.
    pub fn note_attr(&self, node: INodeNo, attr: &Iatt, stamp: Stamp) {
        let mut inner = self.write();
        let fresh = inner.write_seq == stamp.0 && inner.writing == 0;
        if let Some(n) = inner.nodes.get_mut(&node.0) {
            n.last = (fresh && n.gfid == attr.gfid).then_some(*attr);
            if attr.is_dir() && n.gfid == attr.gfid {
                match &mut n.seen_dir {
                    Some(seen) => **seen = *attr,
                    None => n.seen_dir = Some(Box::new(*attr)),
                }
            }
        }
    }

    /// The attributes last sent to the kernel for directory `node`, however old: for a
    /// stat of it once another client removed it, which keeps its mode and owner (path
    /// walks check them) and nothing that can change any more.
    pub fn seen_dir_attr(&self, node: INodeNo) -> Option<Iatt> {
        self.read().nodes.get(&node.0)?.seen_dir.as_deref().copied()
    }

    /// The kernel now knows non-directory `node` as `name` in `parent` (a name another
    /// node had is taken from it).
    pub fn note_name(&self, node: INodeNo, parent: INodeNo, name: &std::ffi::OsStr) {
        let mut inner = self.write();
        if !inner.nodes.contains_key(&node.0) {
            return;
        }
        inner.drop_name(parent, name);
        let key: Box<std::ffi::OsStr> = name.into();
        let evicted = inner.nodes.get_mut(&node.0).and_then(|n| {
            let out = (n.names.len() >= NAMES_MAX).then(|| n.names.remove(0));
            n.names.push((parent, key.clone()));
            out
        });
        if let Some((p, old)) = evicted {
            inner.unindex(p, old, node.0);
        }
        inner.by_name.insert((parent.0, key), node.0);
    }

    /// This mount renamed `name` in `parent` to `new_name` in `new_parent`: the kernel moved
    /// its cached name, and the record follows it (a name it replaced is dropped).
    pub fn rename_name(
        &self,
        parent: INodeNo,
        name: &std::ffi::OsStr,
        new_parent: INodeNo,
        new_name: &std::ffi::OsStr,
    ) {
        let mut inner = self.write();
        let Some(node) = inner.by_name.get(&(parent.0, name.into())).copied() else {
            inner.drop_name(new_parent, new_name);
            return;
        };
        inner.drop_name(parent, name);
        drop(inner);
        self.note_name(INodeNo(node), new_parent, new_name);
    }

    /// This mount removed `name` in `parent`: the kernel dropped its cached name.
    pub fn unlink_name(&self, parent: INodeNo, name: &std::ffi::OsStr) {
        self.write().drop_name(parent, name);
    }

    /// A lookup (a path walk of the kernel) just gave the kernel `node` (see
    /// [`take_fresh`](Self::take_fresh)).
    pub fn looked_up(&self, node: INodeNo) {
        if let Some(n) = self.write().nodes.get_mut(&node.0) {
            let now = Instant::now();
            n.named_at = Some(now);
            n.looked_up_at = Some(now);
        }
    }

    /// This mount answered a getattr or open of thread `pid` with ESTALE: the kernel walks
    /// the path again from that thread (LOOKUP_REVAL, once) and repeats the request, which
    /// [`take_fresh_for`](Self::take_fresh_for) then takes as fresh (up to
    /// [`RETRY_WINDOW`] later). The walk may look the name up twice (to revalidate the
    /// cached name, then anew) and stat the node in a permission check before the request:
    /// only the thread tells the retry apart.
    pub fn expect_retry(&self, pid: u32, what: Retry) {
        note_thread(&mut self.write().retrying, pid, Instant::now(), what);
    }

    /// [`take_fresh`](Self::take_fresh) for a getattr or open of thread `pid`, which is
    /// also fresh when it is the kernel's retry after this mount answered that thread
    /// ESTALE ([`expect_retry`](Self::expect_retry)): the thread's first such request of a
    /// non-directory, of the kind answered ESTALE (`what`), of a node a lookup gave since
    /// the ESTALE (the retry's walk). A directory's getattr (a permission check on the way)
    /// leaves the retry to the request it is for; any other request ends it: the retry
    /// needed no request (a stat answered from the attributes its lookup gave) or its walk
    /// found nothing, and this is a new system call, checked as usual.
    pub fn take_fresh_for(&self, node: INodeNo, window: Duration, pid: u32, what: Retry) -> bool {
        let fresh = self.take_fresh(node, window);
        if self.read().retrying.is_empty() {
            return fresh;
        }
        let mut inner = self.write();
        let is_dir = (inner.nodes.get(&node.0))
            .and_then(|n| n.last.as_ref())
            .is_some_and(|a| a.is_dir());
        if is_dir {
            return fresh;
        }
        let looked_up = inner.nodes.get(&node.0).and_then(|n| n.looked_up_at);
        let retry = (inner.retrying.remove(&pid)).is_some_and(|(t, asked)| {
            asked == what && t.elapsed() < RETRY_WINDOW && looked_up.is_some_and(|l| l >= t)
        });
        fresh || retry
    }

    /// Whether an entry fop (a lookup, a removal, a create, a link or a rename) of thread
    /// `pid` in directory `parent`, which the graph answered ESTALE (the directory is gone:
    /// another client removed it), should answer ENOENT instead. The thread's first such
    /// answer stays ESTALE: the kernel walks the path again (LOOKUP_REVAL, once) and, when
    /// another client replaced the directory under its name, finds the new one. Its next
    /// ones in the same directory, each within [`RETRY_WINDOW`] of the one before, are that
    /// retry meeting the removed directory again (a walk that starts there: a directory fd
    /// of `unlinkat(2)`, the working directory; the retry may look the name up twice) and
    /// the thread's later calls there: ENOENT, as a local file system answers in a removed
    /// directory. (A GFID is never used again: a directory gone stays gone.) So is the
    /// thread's next one in another directory that a lookup gave the kernel since the one
    /// before: the retry's walk found the name replaced by a directory that went too (two
    /// renames over it at once from another client), and the kernel does not retry twice.
    pub fn in_removed_dir(&self, pid: u32, parent: INodeNo) -> bool {
        let mut inner = self.write();
        let now = Instant::now();
        if let Some(&(t, dir)) = inner.stale_dirs.get(&pid)
            && now - t < RETRY_WINDOW
            && (dir == parent
                || inner
                    .nodes
                    .get(&parent.0)
                    .and_then(|n| n.looked_up_at)
                    .is_some_and(|l| l >= t))
        {
            inner.stale_dirs.insert(pid, (now, parent));
            return true;
        }
        note_thread(&mut inner.stale_dirs, pid, now, parent);
        false
    }

    /// A request other than getattr/open used `node`: a lookup before it was for it.
    pub fn used(&self, node: INodeNo) {
        self.take_fresh(node, Duration::ZERO);
    }

    /// Whether an entry reply gave the kernel `node` by name within `window` and no
    /// request has used the node since: then the request now being answered is the one
    /// the path walk behind that lookup made. Taking it uses it up.
    pub fn take_fresh(&self, node: INodeNo, window: Duration) -> bool {
        // Most requests find nothing to take: a read lock decides that (every getattr, open
        // and write's capability probe asks).
        if self
            .read()
            .nodes
            .get(&node.0)
            .is_none_or(|n| n.named_at.is_none())
        {
            return false;
        }
        let mut inner = self.write();
        let Some(n) = inner.nodes.get_mut(&node.0) else {
            return false;
        };
        n.named_at.take().is_some_and(|t| t.elapsed() < window)
    }

    /// The names recorded for `node`, newest last.
    pub fn names(&self, node: INodeNo) -> Vec<(INodeNo, std::ffi::OsString)> {
        let inner = self.read();
        inner
            .nodes
            .get(&node.0)
            .map(|n| {
                n.names
                    .iter()
                    .map(|(p, name)| (*p, name.to_os_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Takes the names [`note_name`](Self::note_name) recorded for `node`.
    pub fn take_names(&self, node: INodeNo) -> Vec<(INodeNo, std::ffi::OsString)> {
        let mut inner = self.write();
        let Some(n) = inner.nodes.get_mut(&node.0) else {
            return Vec::new();
        };
        let names = std::mem::take(&mut n.names);
        for (p, name) in &names {
            inner.unindex(*p, name.clone(), node.0);
        }
        names
            .into_iter()
            .map(|(p, name)| (p, name.into_os_string()))
            .collect()
    }

    /// A part of a listing of directory `node` is answered from graph `graph`; `from_start`:
    /// the first part (its time is the listing's).
    pub fn note_listed(&self, node: INodeNo, graph: u64, from_start: bool) {
        let mut inner = self.write();
        if let Some((_, d)) = inner.dir_state(node)
            && (from_start || d.listed_on.is_none_or(|(g, _)| g != graph))
        {
            d.listed_on = Some((graph, Instant::now()));
        }
    }

    /// The graph the latest listing of directory `node` came from, and when it started.
    pub fn listed_on(&self, node: INodeNo) -> Option<(u64, Instant)> {
        self.read().dir_ref(node).and_then(|d| d.listed_on)
    }

    /// What [`note_attr`](Self::note_attr) recorded for `node`.
    pub fn last_attr(&self, node: INodeNo) -> Option<Iatt> {
        let inner = self.read();
        if inner.writing != 0 {
            return None;
        }
        inner.nodes.get(&node.0).and_then(|n| n.last)
    }

    /// A data-changing request on `node` starts: its recorded attributes are stale.
    pub fn begin_write(&self, node: INodeNo) {
        let mut inner = self.write();
        inner.writing += 1;
        inner.write_seq += 1;
        if let Some(n) = inner.nodes.get_mut(&node.0) {
            n.last = None;
        }
    }

    /// The request of a [`begin_write`](Self::begin_write) finished (either way).
    pub fn end_write(&self) {
        let mut inner = self.write();
        inner.writing = inner.writing.saturating_sub(1);
        inner.write_seq += 1;
    }

    /// A truncating open or fallocate of `node` starts: a data change that also changes
    /// allocation, so it voids the file records as well ([`end_reshape`](Self::end_reshape)).
    pub fn begin_reshape(&self, node: INodeNo) {
        self.begin_write(node);
        let mut inner = self.write();
        inner.meta_seq += 1;
        inner.meta_ops += 1;
    }

    /// The request of a [`begin_reshape`](Self::begin_reshape) finished (either way).
    pub fn end_reshape(&self) {
        self.end_write();
        let mut inner = self.write();
        inner.meta_seq += 1;
        inner.meta_ops = inner.meta_ops.saturating_sub(1);
    }

    /// Stamp a read before sending it.
    pub fn meta_stamp(&self) -> MetaStamp {
        MetaStamp(self.read().meta_seq)
    }

    /// Records the attributes a read of regular file `node` (stamped `stamp`) returned, if
    /// no fop that changes mode, owner or link count overlapped the read. Setuid/setgid files
    /// are left out: a write through this mount may clear those bits.
    pub fn note_file_attr(&self, node: INodeNo, attr: &Iatt, stamp: MetaStamp) {
        if attr.kind != FileType::Regular || attr.perm & (S_ISUID | S_ISGID) != 0 {
            return;
        }
        let mut inner = self.write();
        if inner.meta_seq != stamp.0 || inner.meta_ops != 0 {
            return;
        }
        if let Some(n) = inner.nodes.get_mut(&node.0)
            && n.gfid == attr.gfid
        {
            n.file = Some((*attr, Instant::now(), stamp.0));
        }
    }

    /// The attributes a read of `node` returned less than `max_age` ago, with how long they
    /// stay that young, if nothing since can have changed the fields the kernel takes from
    /// them (only meaningful with the writeback cache; see the module notes).
    pub fn file_attr(&self, node: INodeNo, max_age: Duration) -> Option<(Iatt, Duration)> {
        let inner = self.read();
        if inner.meta_ops != 0 {
            return None;
        }
        let (attr, at, seq) = inner.nodes.get(&node.0)?.file?;
        let left = max_age.checked_sub(at.elapsed())?;
        (seq == inner.meta_seq && !left.is_zero()).then_some((attr, left))
    }

    /// An entry fop in directory `dir` (or anything else that changes it) starts: its
    /// recorded attributes are stale from now on.
    pub fn begin_dir_op(&self, dir: INodeNo) -> DirStamp {
        let mut inner = self.write();
        // It may change a file's mode, owner or link count too.
        inner.meta_seq += 1;
        inner.meta_ops += 1;
        match inner.dir_state(dir) {
            Some((_, d)) => {
                d.seq += 1;
                d.fresh = None;
                let alone = d.ops == 0;
                d.ops += 1;
                DirStamp { seq: d.seq, alone }
            }
            None => DirStamp {
                seq: 0,
                alone: false,
            },
        }
    }

    /// The fop of `stamp` finished; `post` is the directory's attributes it returned. They
    /// are recorded only if no other entry fop in the directory overlapped this one, so they
    /// include every change this mount made to it.
    pub fn end_dir_op(&self, dir: INodeNo, stamp: DirStamp, post: Option<&Iatt>) {
        let mut inner = self.write();
        inner.meta_seq += 1;
        inner.meta_ops = inner.meta_ops.saturating_sub(1);
        if let Some((gfid, d)) = inner.dir_state(dir) {
            d.ops = d.ops.saturating_sub(1);
            // Started with none in flight and none started since: nothing overlapped.
            let alone = stamp.alone && d.seq == stamp.seq;
            d.fresh = post
                .filter(|a| alone && a.gfid == gfid)
                .map(|a| (*a, Instant::now()));
        }
    }

    /// The attributes an entry fop left directory `node` with, if recorded less than
    /// `max_age` ago.
    pub fn fresh_attr(&self, node: INodeNo, max_age: Duration) -> Option<Iatt> {
        self.read()
            .dir_ref(node)?
            .fresh
            .filter(|(_, at)| at.elapsed() < max_age)
            .map(|(a, _)| a)
    }

    /// Live nodes, the root excluded.
    pub fn len(&self) -> usize {
        self.read().nodes.len()
    }

    /// References held on `node` (0 when unknown).
    #[cfg(test)]
    pub fn nlookup(&self, node: INodeNo) -> u64 {
        self.read().nodes.get(&node.0).map_or(0, |n| n.nlookup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gfid(hi: u64, lo: u64) -> Gfid {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        Gfid(b)
    }

    fn attr(g: Gfid, mtime: i64) -> Iatt {
        Iatt {
            gfid: g,
            mtime: xlator_api::Timespec {
                sec: mtime,
                nsec: 0,
            },
            ..Iatt::default()
        }
    }

    #[test]
    fn every_recent_name_of_a_node_is_remembered_once_and_taken_together() {
        use std::ffi::{OsStr, OsString};
        let t = InodeTable::new();
        let n = t.remember(Gfid::random());
        let d = INodeNo(7);
        t.note_name(n, ROOT, OsStr::new("name"));
        // A hard link made and removed through another name must not hide the first.
        t.note_name(n, d, OsStr::new("lnk"));
        t.note_name(n, ROOT, OsStr::new("name"));
        let names = t.take_names(n);
        assert_eq!(
            names,
            vec![(d, OsString::from("lnk")), (ROOT, OsString::from("name"))]
        );
        assert!(t.take_names(n).is_empty(), "taken");
        for i in 0..NAMES_MAX + 6 {
            t.note_name(n, ROOT, OsStr::new(&format!("n{i}")));
        }
        let names = t.take_names(n);
        assert_eq!(names.len(), NAMES_MAX);
        let last = format!("n{}", NAMES_MAX + 5);
        assert_eq!(
            names.last().map(|(_, m)| m.as_os_str()),
            Some(OsStr::new(&last))
        );
        assert!(t.take_names(INodeNo(12345)).is_empty(), "unknown node");
    }

    #[test]
    fn a_removed_directory_is_estale_once_per_thread_then_enoent() {
        let t = InodeTable::new();
        let (gone, other) = (INodeNo(40), INodeNo(41));
        // The first answer in it lets the kernel walk the path again.
        assert!(!t.in_removed_dir(2, gone), "first: ESTALE");
        // The retry (and its second lookup), and the thread's later calls there: ENOENT.
        assert!(t.in_removed_dir(2, gone));
        assert!(t.in_removed_dir(2, gone));
        // Another thread, or another directory, starts over: its walk may find a new one.
        assert!(!t.in_removed_dir(3, gone), "another thread");
        assert!(!t.in_removed_dir(2, other), "another directory");
        assert!(t.in_removed_dir(2, other));
        // The thread's record of `gone` was replaced by `other`'s.
        assert!(!t.in_removed_dir(2, gone));
        // The retry's walk found a new directory under the name, and it went too: ENOENT
        // in it, the kernel does not retry twice. One the walk did not give is another one.
        let walked = t.remember(Gfid::random());
        let unseen = t.remember(Gfid::random());
        t.looked_up(walked);
        assert!(!t.in_removed_dir(5, unseen), "first: ESTALE");
        assert!(!t.in_removed_dir(5, gone), "not looked up since: ESTALE");
        t.looked_up(walked);
        assert!(t.in_removed_dir(5, walked), "the retry's walk gave it");
    }

    #[test]
    fn a_lookup_is_fresh_for_one_request_and_a_retry_for_longer() {
        let t = InodeTable::new();
        let n = t.remember(Gfid::random());
        let window = Duration::from_millis(50);
        assert!(!t.take_fresh(n, window), "no lookup yet");
        t.looked_up(n);
        assert!(t.take_fresh(n, window));
        assert!(!t.take_fresh(n, window), "used up by the first request");
        t.looked_up(n);
        std::thread::sleep(window);
        assert!(!t.take_fresh(n, window), "too long after the lookup");
        t.looked_up(n);
        t.used(n);
        assert!(!t.take_fresh(n, window), "another request used it");
        // After an ESTALE to thread 2, its next getattr or open of a non-directory is the
        // kernel's retry, however long after the lookups (and whatever used the node in
        // between); another thread's request is not, nor a directory's getattr.
        let a = Iatt {
            gfid: Gfid::random(),
            kind: FileType::Directory,
            ..Iatt::default()
        };
        let dir = t.remember(a.gfid);
        t.note_attr(dir, &a, t.stamp());
        t.expect_retry(2, Retry::Open);
        t.looked_up(n);
        t.used(n);
        std::thread::sleep(window);
        assert!(
            !t.take_fresh_for(n, window, 3, Retry::Open),
            "thread 3 made no retry"
        );
        assert!(
            !t.take_fresh_for(dir, window, 2, Retry::Open),
            "a directory on the way"
        );
        assert!(
            t.take_fresh_for(n, window, 2, Retry::Open),
            "thread 2's retry"
        );
        t.looked_up(n);
        std::thread::sleep(window);
        assert!(
            !t.take_fresh_for(n, window, 2, Retry::Open),
            "one retry per ESTALE"
        );
        // A retry whose walk did not look the node up (it found nothing): the thread's next
        // request, a new system call through a cached name, is checked as usual.
        t.expect_retry(2, Retry::Open);
        std::thread::sleep(window);
        assert!(
            !t.take_fresh_for(n, window, 2, Retry::Open),
            "no lookup since the ESTALE"
        );
        t.looked_up(n);
        std::thread::sleep(window);
        assert!(
            !t.take_fresh_for(n, window, 2, Retry::Open),
            "the retry ended with that request"
        );
        // A stat's retry answered from the attributes its lookup gave (no getattr): the
        // thread's next open is a new system call.
        t.expect_retry(2, Retry::Getattr);
        t.looked_up(n);
        assert!(
            !t.take_fresh_for(n, Duration::ZERO, 2, Retry::Open),
            "another request"
        );
        assert!(
            !t.take_fresh_for(n, Duration::ZERO, 2, Retry::Getattr),
            "ended by the open"
        );
    }

    #[test]
    fn a_name_belongs_to_one_node_and_follows_this_mounts_renames() {
        use std::ffi::{OsStr, OsString};
        let t = InodeTable::new();
        let (a, b) = (t.remember(Gfid::random()), t.remember(Gfid::random()));
        t.note_name(a, ROOT, OsStr::new("x"));
        t.note_name(b, ROOT, OsStr::new("x"));
        assert!(t.names(a).is_empty(), "x now names b only");
        t.rename_name(ROOT, OsStr::new("x"), INodeNo(9), OsStr::new("y"));
        assert_eq!(t.names(b), vec![(INodeNo(9), OsString::from("y"))]);
        t.note_name(a, ROOT, OsStr::new("z"));
        // A rename over a recorded name drops it from its old node.
        t.rename_name(INodeNo(9), OsStr::new("y"), ROOT, OsStr::new("z"));
        assert!(t.names(a).is_empty());
        assert_eq!(t.names(b), vec![(ROOT, OsString::from("z"))]);
        t.unlink_name(ROOT, OsStr::new("z"));
        assert!(t.names(b).is_empty());
        // Renaming an unrecorded name drops the target's record.
        t.note_name(a, ROOT, OsStr::new("w"));
        t.rename_name(ROOT, OsStr::new("nobody"), ROOT, OsStr::new("w"));
        assert!(t.names(a).is_empty());
        // A forgotten node leaves no name behind.
        t.note_name(a, ROOT, OsStr::new("v"));
        t.forget(a, 1);
        t.note_name(b, ROOT, OsStr::new("v"));
        assert_eq!(t.names(b), vec![(ROOT, OsString::from("v"))]);
    }

    #[test]
    fn recorded_attributes_never_predate_a_write() {
        let t = InodeTable::new();
        let g = Gfid::random();
        let n = t.remember(g);
        let s = t.stamp();
        t.note_attr(n, &attr(g, 1), s);
        assert_eq!(t.last_attr(n).map(|a| a.mtime.sec), Some(1));

        // A write starts: forgotten, and nothing fetched before or during it is recorded.
        let before = t.stamp();
        t.begin_write(n);
        assert_eq!(t.last_attr(n), None);
        let during = t.stamp();
        t.note_attr(n, &attr(g, 2), before);
        t.note_attr(n, &attr(g, 2), during);
        assert_eq!(t.last_attr(n), None);
        t.end_write();
        t.note_attr(n, &attr(g, 2), during);
        assert_eq!(
            t.last_attr(n),
            None,
            "fetched while the write was in flight"
        );

        // Fetched after it: recorded. A write on another file makes every stamp older.
        let after = t.stamp();
        t.note_attr(n, &attr(g, 3), after);
        assert_eq!(t.last_attr(n).map(|a| a.mtime.sec), Some(3));
        let other = t.remember(Gfid::random());
        t.begin_write(other);
        assert_eq!(
            t.last_attr(n),
            None,
            "nothing is trusted while any write is in flight"
        );
        t.end_write();
        assert_eq!(t.last_attr(n).map(|a| a.mtime.sec), Some(3));
        t.note_attr(n, &attr(g, 4), after);
        assert_eq!(
            t.last_attr(n),
            None,
            "a stale fetch replaces the record with nothing"
        );

        // Attributes of another GFID (a reused node id) are not recorded.
        let s = t.stamp();
        t.note_attr(n, &attr(Gfid::random(), 5), s);
        assert_eq!(t.last_attr(n), None);
    }

    #[test]
    fn read_attributes_serve_getattr_until_a_metadata_fop_or_the_timeout() {
        let t = InodeTable::new();
        let g = Gfid::random();
        let n = t.remember(g);
        let hour = Duration::from_secs(3600);
        let s = t.meta_stamp();
        t.note_file_attr(n, &attr(g, 1), s);
        let (a, left) = t.file_attr(n, hour).expect("recorded");
        assert_eq!(a.mtime.sec, 1);
        assert!(left <= hour && left > Duration::from_secs(3500));
        assert_eq!(
            t.file_attr(n, Duration::ZERO),
            None,
            "older than the timeout"
        );

        // Writes leave it (the kernel keeps size and times itself).
        t.begin_write(n);
        t.end_write();
        assert!(t.file_attr(n, hour).is_some());

        // A chmod anywhere voids it, during and after; a read overlapping one is not kept.
        let before = t.meta_stamp();
        let d = t.begin_dir_op(ROOT);
        assert_eq!(t.file_attr(n, hour), None);
        let during = t.meta_stamp();
        t.note_file_attr(n, &attr(g, 2), before);
        t.note_file_attr(n, &attr(g, 2), during);
        t.end_dir_op(ROOT, d, None);
        assert_eq!(t.file_attr(n, hour), None);
        t.note_file_attr(n, &attr(g, 2), during);
        assert_eq!(t.file_attr(n, hour), None, "read overlapped the chmod");
        let after = t.meta_stamp();
        t.note_file_attr(n, &attr(g, 3), after);
        assert_eq!(t.file_attr(n, hour).map(|(a, _)| a.mtime.sec), Some(3));

        // A truncating open or fallocate voids it too.
        t.begin_reshape(n);
        assert_eq!(t.file_attr(n, hour), None);
        t.end_reshape();
        assert_eq!(t.file_attr(n, hour), None);

        // Setuid files, directories and another GFID's attributes are never kept.
        let s = t.meta_stamp();
        let mut suid = attr(g, 4);
        suid.perm = 0o4755;
        t.note_file_attr(n, &suid, s);
        let mut dir = attr(g, 4);
        dir.kind = FileType::Directory;
        t.note_file_attr(n, &dir, s);
        t.note_file_attr(n, &attr(Gfid::random(), 4), s);
        assert_eq!(t.file_attr(n, hour), None);
    }

    #[test]
    fn directory_attributes_are_kept_only_from_a_lone_entry_fop() {
        let t = InodeTable::new();
        let g = Gfid::random();
        let d = t.remember(g);
        let hour = Duration::from_secs(3600);
        for dir in [d, ROOT] {
            let gfid = if dir == ROOT { Gfid::ROOT } else { g };
            let s = t.begin_dir_op(dir);
            t.end_dir_op(dir, s, Some(&attr(gfid, 1)));
            assert_eq!(t.fresh_attr(dir, hour).map(|a| a.mtime.sec), Some(1));
            assert_eq!(t.fresh_attr(dir, Duration::ZERO), None, "too old");

            // Two overlapping fops: neither reply is known to be the later state.
            let a = t.begin_dir_op(dir);
            assert_eq!(t.fresh_attr(dir, hour), None);
            let b = t.begin_dir_op(dir);
            t.end_dir_op(dir, a, Some(&attr(gfid, 2)));
            t.end_dir_op(dir, b, Some(&attr(gfid, 3)));
            assert_eq!(t.fresh_attr(dir, hour), None);

            // A reply without attributes, or with another object's, forgets them.
            let s = t.begin_dir_op(dir);
            t.end_dir_op(dir, s, Some(&attr(gfid, 4)));
            let s = t.begin_dir_op(dir);
            t.end_dir_op(dir, s, None);
            assert_eq!(t.fresh_attr(dir, hour), None);
            let s = t.begin_dir_op(dir);
            t.end_dir_op(dir, s, Some(&attr(Gfid::random(), 5)));
            assert_eq!(t.fresh_attr(dir, hour), None);

            // After the overlap is over, a lone fop records again.
            let s = t.begin_dir_op(dir);
            t.end_dir_op(dir, s, Some(&attr(gfid, 6)));
            assert_eq!(t.fresh_attr(dir, hour).map(|a| a.mtime.sec), Some(6));
        }
        // Unknown nodes are harmless.
        let s = t.begin_dir_op(INodeNo(12345));
        t.end_dir_op(INodeNo(12345), s, Some(&attr(g, 1)));
        assert_eq!(t.fresh_attr(INodeNo(12345), hour), None);
    }

    #[test]
    fn root_is_fixed_and_never_forgotten() {
        let t = InodeTable::new();
        assert_eq!(t.gfid(ROOT), Some(Gfid::ROOT));
        assert_eq!(t.remember(Gfid::ROOT), ROOT);
        t.forget(ROOT, 100);
        assert_eq!(t.gfid(ROOT), Some(Gfid::ROOT));
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn one_id_per_gfid_and_counts() {
        let t = InodeTable::new();
        let g = Gfid::random();
        let a = t.remember(g);
        let b = t.remember(g); // a hard link found under another name
        assert_eq!(a, b);
        assert_eq!(a.0, derived_id(&g));
        assert_eq!(t.nlookup(a), 2);
        assert_eq!(t.gfid(a), Some(g));
        t.forget(a, 1);
        assert_eq!(t.gfid(a), Some(g));
        t.forget(a, 1);
        assert_eq!(t.gfid(a), None);
        assert_eq!(t.len(), 0);
        // Looked up again: the same (derived) id.
        assert_eq!(t.remember(g), a);
    }

    #[test]
    fn forget_more_than_held_and_unknown_ids_are_harmless() {
        let t = InodeTable::new();
        let a = t.remember(Gfid::random());
        t.forget(a, 5);
        assert_eq!(t.len(), 0);
        t.forget(INodeNo(12345), 1);
        assert_eq!(t.gfid(INodeNo(12345)), None);
    }

    #[test]
    fn forgotten_ids_keep_naming_their_gfid_for_file_handles() {
        let t = InodeTable::new();
        let (g1, g2) = (gfid(0x10, 0x20), gfid(0x20, 0x10)); // same XOR fold
        let a = t.remember(g1);
        let b = t.remember(g2);
        t.forget(a, 1);
        t.forget(b, 1);
        assert_eq!(t.gfid(b), None, "no longer live");
        assert_eq!(t.handle_gfid(b), Some(g2));
        // A handle names b: the answer must be b itself, though g2's derived id is a's.
        assert_eq!(t.remember_at(g2, b), Some(b));
        assert_eq!(t.gfid(b), Some(g2));
        assert_eq!(t.remember_at(g1, b), None, "b names another GFID");
        assert_eq!(t.nlookup(b), 1);
        // g1's old id is not given to anyone else while retired, and g1 gets it back.
        let g3 = gfid(0x30, 0x00);
        assert_eq!(derived_id(&g3), a.0);
        let c = t.remember(g3);
        assert_ne!(c, a);
        assert_eq!(t.remember(g1), a);
        assert_eq!(t.handle_gfid(a), Some(g1));
        assert_eq!(t.handle_gfid(INodeNo(0x4242)), None);
    }

    #[test]
    fn retired_ids_are_bounded() {
        let t = InodeTable::new();
        let first = t.remember(gfid(1, 0x1000));
        t.forget(first, 1);
        // The same objects looked up and forgotten again and again leave nothing behind.
        for _ in 0..10_000 {
            let n = t.remember(gfid(2, 0x2000));
            t.forget(n, 1);
        }
        assert!(t.read().retired.order.len() < 2048);
        assert_eq!(t.handle_gfid(first), Some(gfid(1, 0x1000)));
        for i in 0..RETIRED_MAX as u64 {
            let n = t.remember(gfid(3, i << 8));
            t.forget(n, 1);
        }
        assert_eq!(t.read().retired.by_id.len(), RETIRED_MAX);
        assert_eq!(t.handle_gfid(first), None, "the oldest went first");
    }

    #[test]
    fn collisions_take_the_next_free_id() {
        let t = InodeTable::new();
        let g1 = gfid(0x10, 0x20);
        let g2 = gfid(0x20, 0x10); // same XOR fold
        assert_eq!(derived_id(&g1), derived_id(&g2));
        let a = t.remember(g1);
        let b = t.remember(g2);
        assert_ne!(a, b);
        assert_eq!(b.0, a.0 + 1);
        assert_eq!(t.gfid(a), Some(g1));
        assert_eq!(t.gfid(b), Some(g2));
        assert_eq!(t.peek_id(&g2), b);
    }

    #[test]
    fn derived_ids_avoid_zero_and_root() {
        assert_eq!(derived_id(&Gfid::ROOT), 1);
        assert_eq!(derived_id(&gfid(7, 7)), 2);
        assert_eq!(derived_id(&gfid(6, 7)), 3);
        let t = InodeTable::new();
        let n = t.remember(gfid(0, 1 ^ 0x100));
        assert!(n.0 > 1);
    }
}
