//! The state one replicate instance shares between its fops, its timers and its heals.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use xlator_api::{
    ChildState, Ctx, Errno, EventKind, FileType, Gfid, HostServices, LkOwner, LogLevel, Subvol,
    Xattr,
};

use crate::changelog::{Direction, Lanes, Matrix};
use crate::eager::Eager;
use crate::fds::Fds;
use crate::heal::HealQueue;
use crate::options::Config;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What is known of one object's copies: per lane, which children are good to read, and
/// whether the lane is in split-brain. Valid for the child-up generation it was learnt in.
#[derive(Clone, Debug)]
pub(crate) struct InodeCtx {
    pub generation: u64,
    pub kind: FileType,
    pub readable: [Vec<bool>; 3],
    pub split: [bool; 3],
}

impl InodeCtx {
    /// Children good for every lane in `lanes`.
    pub fn readable(&self, lanes: Lanes) -> Vec<bool> {
        let n = self.readable[0].len();
        (0..n)
            .map(|i| lanes.each().all(|(_, k)| self.readable[k][i]))
            .collect()
    }
    pub fn split(&self, lanes: Lanes) -> bool {
        lanes.each().any(|(_, k)| self.split[k])
    }
}

pub(crate) struct Shared {
    /// Instance name: the inodelk/entrylk domain.
    pub name: String,
    pub children: Vec<Subvol>,
    /// Pending-counter xattr of each child.
    pub keys: Vec<String>,
    pub up: ChildState,
    pub services: HostServices,
    pub cfg: Mutex<Config>,
    /// The arbiter child (`arbiter-count 1`), fixed for the instance's life (reconfigure
    /// refuses a change): read without the config's lock on every fop that needs it.
    pub arbiter: Option<usize>,
    /// Bumped on every ChildUp: what was learnt of the copies before may be stale.
    pub generation: AtomicU64,
    pub inodes: Mutex<HashMap<Gfid, InodeCtx>>,
    pub fds: Fds,
    pub eager: Eager,
    pub heals: HealQueue,
    /// Reads in flight per child (least-outstanding policy).
    pub outstanding: Vec<AtomicU64>,
    /// Whether ChildUp was raised to the parents (and not taken back).
    pub announced: AtomicBool,
    /// Children that have said whether they are up (a first ChildUp or ChildDown), and
    /// whether [`HEAR_ALL_WAIT`] has passed since init: ChildUp is raised once every child
    /// has spoken or that time is up (see `xlator.rs`, `notify`).
    pub heard: Vec<AtomicBool>,
    pub waited: AtomicBool,
    owner_base: u64,
    next_owner: AtomicU64,
    /// Objects found in split-brain, by path or GFID (bounded, for the dump).
    pub split_brains: Mutex<BTreeSet<String>>,
    /// Locks whose unlock found the child unreachable: (child, owner, lock), unlocked when
    /// the child is up again (a brick that restarted has forgotten them anyway).
    pub stale_locks: Mutex<Vec<(usize, LkOwner, crate::transaction::LockItem)>>,
    /// Per child, whether its bricks honour `LocksAround` (lock with the pre-op, unlock with
    /// the post-op): [`AROUND_UNKNOWN`] until asked, again after each ChildUp.
    pub around: Vec<std::sync::atomic::AtomicU8>,
    /// Per child, whether its bricks also take a create's `LocksAround` (a new file made
    /// with its eager hold), as `around`.
    pub around_create: Vec<std::sync::atomic::AtomicU8>,
}

pub const AROUND_UNKNOWN: u8 = 0;
pub const AROUND_YES: u8 = 1;
pub const AROUND_NO: u8 = 2;

/// How long after init replicate waits to hear from every child before it says it is up
/// with the children it has heard from: a mount's first fops would otherwise meet a replica
/// set that knows one brick only (writes that skip a copy still connecting, or EROFS when
/// quorum needs the one not heard from yet). A brick refusing connections is heard from at
/// once (its client's first attempt fails); this bounds the wait for one that does not
/// answer at all.
pub const HEAR_ALL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Most split-brain objects remembered for the dump.
const SPLIT_BRAIN_LIST: usize = 256;

impl Shared {
    pub fn new(
        name: String,
        children: Vec<Subvol>,
        keys: Vec<String>,
        up: ChildState,
        services: HostServices,
        cfg: Config,
    ) -> Shared {
        let n = children.len();
        let seed = Gfid::random().0;
        let mut base = [0u8; 8];
        base.copy_from_slice(&seed[..8]);
        Shared {
            name,
            children,
            keys,
            up,
            services,
            arbiter: cfg.arbiter,
            cfg: Mutex::new(cfg),
            generation: AtomicU64::new(1),
            inodes: Mutex::new(HashMap::new()),
            fds: Fds::default(),
            eager: Eager::default(),
            heals: HealQueue::default(),
            outstanding: (0..n).map(|_| AtomicU64::new(0)).collect(),
            announced: AtomicBool::new(false),
            heard: (0..n).map(|_| AtomicBool::new(false)).collect(),
            waited: AtomicBool::new(false),
            // The high bit marks replicate's owners; the random rest keeps clients apart.
            owner_base: u64::from_le_bytes(base) | (1 << 63),
            next_owner: AtomicU64::new(1),
            split_brains: Mutex::new(BTreeSet::new()),
            stale_locks: Mutex::new(Vec::new()),
            around: (0..n)
                .map(|_| std::sync::atomic::AtomicU8::new(AROUND_UNKNOWN))
                .collect(),
            around_create: (0..n)
                .map(|_| std::sync::atomic::AtomicU8::new(AROUND_UNKNOWN))
                .collect(),
        }
    }

    /// Child `i` has said whether it is up.
    pub fn heard_from(&self, i: usize) {
        if let Some(h) = self.heard.get(i) {
            h.store(true, Ordering::Release);
        }
    }

    /// Raises ChildUp to the parents if it is due and not raised yet: a child is up, and
    /// every child has spoken or [`HEAR_ALL_WAIT`] has passed.
    pub fn announce_if_ready(&self) {
        let all = self.heard.iter().all(|h| h.load(Ordering::Acquire));
        if self.up.up_count() > 0
            && (all || self.waited.load(Ordering::Acquire))
            && !self.announced.swap(true, Ordering::AcqRel)
        {
            self.services.notify_parents(EventKind::ChildUp);
        }
    }

    pub fn n(&self) -> usize {
        self.children.len()
    }

    pub fn cfg(&self) -> Config {
        lock(&self.cfg).clone()
    }

    /// Which children are up now.
    pub fn up_set(&self) -> Vec<bool> {
        (0..self.n()).map(|i| self.up.is_up(i)).collect()
    }

    /// A lock owner no other transaction of any client uses.
    pub fn new_owner(&self) -> LkOwner {
        let k = self.next_owner.fetch_add(1, Ordering::Relaxed);
        LkOwner(self.owner_base ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// The context of replicate's own calls (locks, counters, heal): root, with `owner`.
    pub fn internal_ctx(&self, owner: LkOwner) -> Ctx {
        Ctx::builder(0, 0).lk_owner(owner).build()
    }

    pub fn log(&self, level: LogLevel, msg: &str) {
        self.services
            .log(level, "xlfs::afr", &format!("{}: {msg}", self.name));
    }

    /// Records and logs an object found in split-brain.
    pub fn split_brain(&self, what: &str, lanes: &str) {
        self.log(
            LogLevel::Error,
            &format!("split-brain ({lanes}) on {what}: reads fail with EIO until it is resolved"),
        );
        let mut s = lock(&self.split_brains);
        if s.len() < SPLIT_BRAIN_LIST {
            s.insert(what.to_owned());
        }
    }

    /// What the children's counters say of `gfid`, learnt from `xattrs[i]` (`None`: child
    /// `i` did not answer); cached as the object's [`InodeCtx`].
    pub fn learn(
        &self,
        gfid: Gfid,
        kind: FileType,
        xattrs: &[Option<&[Xattr]>],
    ) -> (InodeCtx, Matrix) {
        let present: Vec<bool> = xattrs.iter().map(Option::is_some).collect();
        let m = Matrix::build(&self.keys, &present, |i, k| {
            xattrs[i].and_then(|xs| xattr_value(xs, k))
        });
        let n = self.n();
        let mut ctx = InodeCtx {
            generation: self.generation.load(Ordering::Acquire),
            kind,
            readable: [vec![false; n], vec![false; n], vec![false; n]],
            split: [false; 3],
        };
        for (lane, k) in (Lanes::DATA | Lanes::META | Lanes::ENTRY).each() {
            match m.direction(lane) {
                Direction::SplitBrain => ctx.split[k] = true,
                d => ctx.readable[k] = d.sources(n),
            }
        }
        self.mask_arbiter(&mut ctx);
        self.keep(gfid, ctx.clone());
        (ctx, m)
    }

    /// A new object of `kind` was made on the children in `made` (in generation `generation`,
    /// read before the transaction began: a ChildUp meanwhile voids what is learnt here). Its
    /// copies there are the only ones, all good: cached as such, a listing of its directory
    /// need not ask the children about it.
    pub fn made(&self, gfid: Gfid, kind: FileType, made: &[bool], generation: u64) {
        let mut ctx = InodeCtx {
            generation,
            kind,
            readable: [made.to_vec(), made.to_vec(), made.to_vec()],
            split: [false; 3],
        };
        self.mask_arbiter(&mut ctx);
        self.keep(gfid, ctx);
    }

    /// An arbiter child is never readable for a file's data (it holds none; nor its
    /// attributes, which go with the data lane: see [`crate::reads::lanes_of`]).
    fn mask_arbiter(&self, ctx: &mut InodeCtx) {
        if ctx.kind == FileType::Regular
            && let Some(a) = self.arbiter
        {
            ctx.readable[0][a] = false;
        }
    }

    fn keep(&self, gfid: Gfid, ctx: InodeCtx) {
        let generation = self.generation.load(Ordering::Acquire);
        keep_bounded(&mut lock(&self.inodes), gfid, ctx, generation, MAX_KNOWN);
    }

    /// The cached state of `gfid` if learnt in the current generation.
    pub fn cached(&self, gfid: Gfid) -> Option<InodeCtx> {
        let g = self.generation.load(Ordering::Acquire);
        lock(&self.inodes)
            .get(&gfid)
            .filter(|c| c.generation == g)
            .cloned()
    }

    /// After a modification of `lanes` of `gfid`: a child that did not succeed is no longer
    /// readable for them (its counters say so too; this saves the next lookup).
    pub fn after_write(&self, gfid: Gfid, lanes: Lanes, succeeded: &[bool]) {
        if let Some(c) = lock(&self.inodes).get_mut(&gfid) {
            for (_, k) in lanes.each() {
                for (i, ok) in succeeded.iter().enumerate() {
                    if !ok {
                        c.readable[k][i] = false;
                    }
                }
            }
        }
    }

    pub fn forget(&self, gfid: Gfid) {
        lock(&self.inodes).remove(&gfid);
    }
}

/// Objects whose [`InodeCtx`] is kept at most (about 100 bytes each). What is not kept is
/// asked of the children again when needed: the cache only saves round trips.
const MAX_KNOWN: usize = 1 << 18;

/// Inserts `ctx` for `gfid` into `known`, keeping it at most `max` long: when full, states
/// of older generations go first (they are void), then an arbitrary eighth.
fn keep_bounded(
    known: &mut HashMap<Gfid, InodeCtx>,
    gfid: Gfid,
    ctx: InodeCtx,
    generation: u64,
    max: usize,
) {
    if known.len() >= max && !known.contains_key(&gfid) {
        known.retain(|_, c| c.generation == generation);
        if known.len() >= max {
            let evict: Vec<Gfid> = known.keys().take(max.div_ceil(8)).copied().collect();
            for g in evict {
                known.remove(&g);
            }
        }
    }
    known.insert(gfid, ctx);
}

/// The bytes of xattr `name` in `xs`.
pub(crate) fn xattr_value<'a>(xs: &'a [Xattr], name: &str) -> Option<&'a [u8]> {
    xs.iter()
        .find(|x| x.name.as_str() == name)
        .map(|x| x.value.as_slice())
}

/// Errors a child answers that mean "nothing was changed here" (the fop was refused): when
/// every participant refuses, the transaction leaves no blame behind.
pub(crate) fn refused(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOENT
            | Errno::EEXIST
            | Errno::EACCES
            | Errno::EPERM
            | Errno::ENOTEMPTY
            | Errno::ENOTDIR
            | Errno::EISDIR
            | Errno::EINVAL
            | Errno::ENAMETOOLONG
            | Errno::ENODATA
            | Errno::ERANGE
            | Errno::ESTALE
            | Errno::EXDEV
            | Errno::ENOTSUP
            | Errno::ENOSYS
            | Errno::EMLINK
            | Errno::EFBIG
            | Errno::ELOOP
            | Errno::EBUSY
    )
}

/// Errors after which a read tries the next readable child.
pub(crate) fn fails_over(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOTCONN
            | Errno::EIO
            | Errno::ESTALE
            | Errno::EBADF
            | Errno::EBADFD
            | Errno::ETIMEDOUT
            | Errno::ENODEV
            | Errno::ENXIO
    )
}

/// The error to answer when no child succeeded: a real answer (ENOENT, EEXIST...) before
/// "not connected".
pub(crate) fn first_error(errs: impl IntoIterator<Item = Errno>) -> Errno {
    let mut first = None;
    for e in errs {
        if e != Errno::ENOTCONN {
            return e;
        }
        first.get_or_insert(e);
    }
    first.unwrap_or(Errno::ENOTCONN)
}

pub(crate) type Handle = Arc<Shared>;

impl Shared {
    /// The kind last learnt of `gfid`, whatever its generation.
    pub fn cached_kind(&self, gfid: Gfid) -> Option<FileType> {
        lock(&self.inodes).get(&gfid).map(|c| c.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(generation: u64) -> InodeCtx {
        InodeCtx {
            generation,
            kind: FileType::Regular,
            readable: [vec![true], vec![true], vec![true]],
            split: [false; 3],
        }
    }

    #[test]
    fn the_known_states_stay_bounded_and_void_ones_go_first() {
        let mut known = HashMap::new();
        let old: Vec<Gfid> = (0..60).map(|_| Gfid::random()).collect();
        for g in &old {
            keep_bounded(&mut known, *g, ctx(1), 1, 100);
        }
        let new: Vec<Gfid> = (0..40).map(|_| Gfid::random()).collect();
        for g in &new {
            keep_bounded(&mut known, *g, ctx(2), 2, 100);
        }
        assert_eq!(known.len(), 100);
        // Full: the generation-1 states are void and make room.
        let g = Gfid::random();
        keep_bounded(&mut known, g, ctx(2), 2, 100);
        assert_eq!(known.len(), 41);
        assert!(new.iter().all(|n| known.contains_key(n)) && known.contains_key(&g));
        // Full of current states: an eighth goes.
        for _ in 0..200 {
            keep_bounded(&mut known, Gfid::random(), ctx(2), 2, 100);
            assert!(known.len() <= 100);
        }
        // Replacing a kept state never evicts.
        let len = known.len();
        let some = *known.keys().next().expect("a state");
        keep_bounded(&mut known, some, ctx(2), 2, len);
        assert_eq!(known.len(), len);
    }
}
