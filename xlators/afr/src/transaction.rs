//! Write transactions (GlusterFS afr-transaction.c, with the v2 changelog of
//! [`crate::changelog`]):
//!
//! 1. quorum of the children up, else EROFS before anything is touched;
//! 2. lock: every lock item (inodelk on the object in the data and/or metadata domain, or
//!    entrylk on each parent name) on every up child, non-blocking and in parallel first; if
//!    any child reports contention, everything taken is given back and the locks are taken
//!    blocking, one child after the other in index order (two clients never wait on each
//!    other crosswise); a child whose lock fails for another reason stays out;
//! 3. quorum of the locked children, else unlock and EROFS (or, when no child could be
//!    locked, the children's own error: ENOTDIR for a parent that is a file, ESTALE...);
//! 4. pre-op: `xattrop AddArray32` in the transaction's lanes on every locked child: +1 under
//!    its own key (it is "dirty": a transaction is open there) and +1 under the key of every
//!    child that takes no part (down, or its lock failed: accused by the others from now on);
//!    children whose pre-op fails stay out; without quorum now, the pre-op is undone and the
//!    answer is EROFS (the children's error when it failed on all);
//! 5. the fop on every pre-op'ed child, in parallel;
//! 6. post-op, on every pre-op'ed child: -1 under its own key, +1 under the key of each
//!    participant where the fop failed (accused by the others); when every child refused the
//!    fop, nothing changed: the pre-op is undone entirely, absent children's accusations
//!    included, and no child stops being readable. Participants never accuse each other for an open transaction, so a reader
//!    of the counters during one (another client, an eager hold) sees dirty children and
//!    accusations of absent ones only, never a stale child passed off as good;
//! 7. unlock. Steps 2 and 4 go in one request per child (an xattrop carrying its locks,
//!    features/locks' [`LocksAround`]) when every child up honours it, the transaction marks
//!    one object and no child is busy or fails (else the steps above, one by one); steps 6
//!    and 7 likewise. A transaction is then 3 round trips: lock + pre-op, fop, post-op +
//!    unlock. The answer: the first success in child order if the successes make a quorum;
//!    no success: the children's error; some but too few: ENOTCONN.

use std::future::Future;

use futures::future::join_all;
use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{
    AroundLock, Buf, CreateXattrs, Ctx, EntrylkCmd, Errno, Flock, Gfid, LOCKS_AROUND_CREATE_XATTR,
    LOCKS_AROUND_XATTR, LkCmd, LkOwner, Loc, LockKind, LocksAround, LogLevel, Xattr, XattropOp,
};

use crate::changelog::{self, Lanes};
use crate::quorum::Quorum;
use crate::shared::{Shared, first_error, refused};

/// One lock a transaction takes on every child.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LockItem {
    Inode {
        domain: String,
        gfid: Gfid,
    },
    Entry {
        domain: String,
        parent: Gfid,
        name: String,
    },
}

/// What a transaction locks and whose counters it marks.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub items: Vec<LockItem>,
    /// Objects whose counters the pre-op and post-op change, with the lanes.
    pub targets: Vec<(Gfid, Lanes)>,
}

impl Plan {
    /// A data and/or metadata transaction on `gfid`: the whole file in the data domain (the
    /// instance name) and/or the metadata domain (`<name>:metadata`).
    pub fn inode(sh: &Shared, gfid: Gfid, lanes: Lanes) -> Plan {
        let mut items = Vec::new();
        if lanes.has(Lanes::DATA) {
            items.push(LockItem::Inode {
                domain: sh.name.clone(),
                gfid,
            });
        }
        if lanes.has(Lanes::META) {
            items.push(LockItem::Inode {
                domain: meta_domain(&sh.name),
                gfid,
            });
        }
        Plan {
            items,
            targets: vec![(gfid, lanes)],
        }
    }

    /// A namespace hold on directory `dir` (an eager one, or a heal's): its whole-directory
    /// entrylk (conflicting with every name in it), marking its entry lane.
    pub fn dir(sh: &Shared, dir: Gfid) -> Plan {
        Plan {
            items: vec![LockItem::Entry {
                domain: sh.name.clone(),
                parent: dir,
                name: String::new(),
            }],
            targets: vec![(dir, Lanes::ENTRY)],
        }
    }

    /// A namespace transaction on the names `locs` (entrylk on each, in a fixed order so two
    /// renames never lock crosswise), marking each parent's entry lane. Names in more than
    /// one directory (a rename to another parent) also take the instance's move lock first:
    /// an inodelk on the root in domain `<name>:move`, which every such rename takes, as
    /// the kernel takes `s_vfs_rename_mutex`. Two directories moved into each other at once
    /// from two clients (`mv a b/` beside `mv b a/`) lock different names; each child's file
    /// system refuses the second as a loop, but the children took them in different orders,
    /// so one kept `b/a` and the other `a/b` (each accusing the other: an entry
    /// split-brain), and both callers were told it worked.
    pub fn entry(sh: &Shared, locs: &[&Loc]) -> Plan {
        let mut items: Vec<LockItem> = locs
            .iter()
            .map(|l| LockItem::Entry {
                domain: sh.name.clone(),
                parent: l.parent,
                name: l.name.to_string(),
            })
            .collect();
        if locs.iter().any(|l| l.parent != locs[0].parent) {
            items.push(LockItem::Inode {
                domain: move_domain(&sh.name),
                gfid: Gfid::ROOT,
            });
        }
        items.sort();
        items.dedup();
        let mut targets: Vec<(Gfid, Lanes)> = Vec::new();
        for l in locs {
            if !targets.iter().any(|(g, _)| *g == l.parent) {
                targets.push((l.parent, Lanes::ENTRY));
            }
        }
        Plan { items, targets }
    }
}

impl LockItem {
    /// The same lock as features/locks takes it around an xattrop ([`LocksAround`]).
    fn around(&self) -> AroundLock {
        match self {
            LockItem::Inode { domain, gfid } => AroundLock::Inode {
                domain: domain.clone(),
                gfid: *gfid,
            },
            LockItem::Entry {
                domain,
                parent,
                name,
            } => AroundLock::Entry {
                domain: domain.clone(),
                parent: *parent,
                name: name.clone(),
            },
        }
    }
}

/// How a failed changelog update is logged: an object removed meanwhile (a directory held
/// eagerly by this client and then removed by it, a file another client unlinked) has
/// nothing left to record, so ENOENT and ESTALE are not warnings.
fn gone_level(e: Errno) -> LogLevel {
    if matches!(e, Errno::ENOENT | Errno::ESTALE) {
        LogLevel::Debug
    } else {
        LogLevel::Warn
    }
}

/// The xattrop list adding `delta(j)` in `lanes` under each child `j`'s key (keys whose
/// delta is 0 left out, or read with a zero delta when `read_all`).
fn changelog_xattrs(
    sh: &Shared,
    lanes: Lanes,
    read_all: bool,
    delta: impl Fn(usize) -> i32,
) -> RVec<Xattr> {
    sh.keys
        .iter()
        .enumerate()
        .filter(|(j, _)| read_all || delta(*j) != 0)
        .map(|(j, k)| Xattr {
            name: k.as_str().into(),
            value: Buf::from_vec(changelog::delta(lanes, delta(j)).to_vec()),
        })
        .collect()
}

/// The inodelk domain of the instance's move lock (see [`Plan::entry`]).
pub(crate) fn move_domain(name: &str) -> String {
    format!("{name}:move")
}

/// The metadata inodelk domain.
pub(crate) fn meta_domain(name: &str) -> String {
    format!("{name}:metadata")
}

/// Each child's answer: `None` for a child that took no part.
pub(crate) struct Replies<R>(pub Vec<Option<Result<R, Errno>>>);

impl<R> Replies<R> {
    pub fn succeeded(&self) -> Vec<bool> {
        self.0.iter().map(|r| matches!(r, Some(Ok(_)))).collect()
    }

    /// [`Replies::reply`], taking the success of the child reads of `gfid` would go to
    /// first (`read-policy` over the children that succeeded): the attributes a create, a
    /// link or a write answers with come from the copy a later stat or lookup reads. Each
    /// brick stamps times with its own clock, so copies can differ; an answer from another
    /// copy made a new file's times seem to change with nothing done to it.
    /// An arbiter's answer is taken only when no other child succeeded (its attributes
    /// describe a file without data).
    pub fn reply_as_read(mut self, cfg: &crate::options::Config, gfid: Gfid) -> Result<R, Errno> {
        let quorum = cfg.quorum;
        let ok = self.succeeded();
        if quorum.met(&ok) {
            let zeros = vec![0; ok.len()];
            let mut from = ok;
            if let Some(a) = cfg.arbiter
                && from.iter().enumerate().any(|(i, o)| *o && i != a)
            {
                from[a] = false;
            }
            if let Some(&i) = crate::read::order(&from, cfg.read_policy, gfid, &zeros).first()
                && let Some(Ok(v)) = self.0[i].take()
            {
                return Ok(v);
            }
        }
        self.reply(quorum)
    }

    /// The caller's answer (see the module doc).
    pub fn reply(self, quorum: Quorum) -> Result<R, Errno> {
        let ok = self.succeeded();
        let met = quorum.met(&ok);
        let mut errs = Vec::new();
        for r in self.0.into_iter().flatten() {
            match r {
                Ok(v) if met => return Ok(v),
                Ok(_) => {}
                Err(e) => errs.push(e),
            }
        }
        if ok.iter().any(|b| *b) {
            Err(Errno::ENOTCONN)
        } else {
            Err(first_error(errs))
        }
    }
}

async fn lock_item(
    sh: &Shared,
    i: usize,
    owner: LkOwner,
    item: &LockItem,
    blocking: bool,
) -> Result<(), Errno> {
    let child = &sh.children[i];
    let cx = sh.internal_ctx(owner);
    let r = match item {
        LockItem::Inode { domain, gfid } => {
            let cmd = if blocking { LkCmd::SetWait } else { LkCmd::Set };
            child
                .inodelk(
                    &cx,
                    domain.as_str().into(),
                    *gfid,
                    cmd,
                    whole(LockKind::Write, owner),
                )
                .await
        }
        LockItem::Entry {
            domain,
            parent,
            name,
        } => {
            let cmd = if blocking {
                EntrylkCmd::Lock
            } else {
                EntrylkCmd::LockNonBlocking
            };
            let loc = Loc::new(*parent, name.as_str());
            child.entrylk(&cx, domain.as_str().into(), loc, cmd).await
        }
    };
    // A child without lock support (no features/locks below it) is used unlocked.
    if r == Err(Errno::ENOSYS) { Ok(()) } else { r }
}

/// Gives back the locks child `i` kept while it was unreachable.
pub(crate) async fn unlock_stale(sh: &Shared, i: usize) {
    let stale: Vec<(usize, LkOwner, LockItem)> = {
        let mut all = crate::shared::lock(&sh.stale_locks);
        let (mine, rest) = all.drain(..).partition(|(c, _, _)| *c == i);
        *all = rest;
        mine
    };
    for (c, owner, item) in stale {
        unlock_item(sh, c, owner, &item).await;
    }
}

async fn unlock_item(sh: &Shared, i: usize, owner: LkOwner, item: &LockItem) {
    let child = &sh.children[i];
    let cx = sh.internal_ctx(owner);
    let r = match item {
        LockItem::Inode { domain, gfid } => {
            child
                .inodelk(
                    &cx,
                    domain.as_str().into(),
                    *gfid,
                    LkCmd::Set,
                    whole(LockKind::Unlock, owner),
                )
                .await
        }
        LockItem::Entry {
            domain,
            parent,
            name,
        } => {
            let loc = Loc::new(*parent, name.as_str());
            child
                .entrylk(&cx, domain.as_str().into(), loc, EntrylkCmd::Unlock)
                .await
        }
    };
    if r == Err(Errno::ENOTCONN) {
        // The child kept the lock (unreachable, not restarted): given back when it returns.
        crate::shared::lock(&sh.stale_locks).push((i, owner, item.clone()));
        return;
    }
    if let Err(e) = r
        && e != Errno::ENOSYS
    {
        sh.log(
            LogLevel::Warn,
            &format!("unlock of {item:?} on child {i}: {e}"),
        );
    }
}

fn whole(kind: LockKind, owner: LkOwner) -> Flock {
    Flock {
        kind,
        start: 0,
        len: 0,
        pid: 0,
        owner,
    }
}

/// Takes every item on child `i`; on failure gives back what it took.
async fn lock_child(
    sh: &Shared,
    i: usize,
    owner: LkOwner,
    items: &[LockItem],
    blocking: bool,
) -> Result<(), Errno> {
    for (k, item) in items.iter().enumerate() {
        if let Err(e) = lock_item(sh, i, owner, item, blocking).await {
            for taken in items[..k].iter().rev() {
                unlock_item(sh, i, owner, taken).await;
            }
            return Err(e);
        }
    }
    Ok(())
}

/// How replicate takes a lock on several children, its own and those asked from above:
/// `take(i, false)` on every candidate at once, without waiting; when some child reports
/// another owner (EAGAIN, EBUSY), what was taken is given back (`give(i)`) and, with
/// `wait`, taken again one child after another in index order, waiting (`take(i, true)`):
/// two clients never each hold a part the other waits for. Returns who holds the lock,
/// whether another owner held it at first, and the other errors (without `wait` and
/// contended, nothing is held).
pub(crate) async fn lock_in_order<T, TFut, G, GFut>(
    candidates: &[bool],
    wait: bool,
    take: T,
    give: G,
) -> (Vec<bool>, bool, Vec<Errno>)
where
    T: Fn(usize, bool) -> TFut,
    TFut: Future<Output = Result<(), Errno>>,
    G: Fn(usize) -> GFut,
    GFut: Future<Output = ()>,
{
    let tries = fan_out(candidates, &|i| take(i, false)).await.0;
    let busy = |e: &Errno| *e == Errno::EAGAIN || *e == Errno::EBUSY;
    let contended = tries.iter().flatten().any(|r| r.as_ref().is_err_and(busy));
    let mut locked: Vec<bool> = tries.iter().map(|r| matches!(r, Some(Ok(())))).collect();
    let mut errs: Vec<Errno> = tries
        .into_iter()
        .flatten()
        .filter_map(Result::err)
        .filter(|e| !busy(e))
        .collect();
    if !contended {
        return (locked, false, errs);
    }
    join_all((0..locked.len()).filter(|&i| locked[i]).map(&give)).await;
    locked.iter_mut().for_each(|l| *l = false);
    if wait {
        errs.clear();
        for (i, l) in locked.iter_mut().enumerate() {
            if candidates[i] {
                match take(i, true).await {
                    Ok(()) => *l = true,
                    Err(e) => errs.push(e),
                }
            }
        }
    }
    (locked, true, errs)
}

/// Gives back every item of `items` child `i` holds for `owner`, the last taken first.
async fn unlock_child(sh: &Shared, i: usize, owner: LkOwner, items: &[LockItem]) {
    for item in items.iter().rev() {
        unlock_item(sh, i, owner, item).await;
    }
}

/// Step 2 without waiting: `None` (and nothing kept) when some child reports another owner.
pub(crate) async fn try_lock(
    sh: &Shared,
    plan: &Plan,
    owner: LkOwner,
    candidates: &[bool],
) -> Option<Vec<bool>> {
    let (locked, contended, _) = lock_in_order(
        candidates,
        false,
        |i, w| lock_child(sh, i, owner, &plan.items, w),
        |i| unlock_child(sh, i, owner, &plan.items),
    )
    .await;
    (!contended).then_some(locked)
}

/// Step 2: which of `candidates` hold every lock of `plan` for `owner`, whether some other
/// owner held one (contention), and the errors of the children whose lock failed.
pub(crate) async fn lock(
    sh: &Shared,
    plan: &Plan,
    owner: LkOwner,
    candidates: &[bool],
) -> (Vec<bool>, bool, Vec<Errno>) {
    lock_in_order(
        candidates,
        true,
        |i, w| lock_child(sh, i, owner, &plan.items, w),
        |i| unlock_child(sh, i, owner, &plan.items),
    )
    .await
}

/// Step 7.
pub(crate) async fn unlock(sh: &Shared, plan: &Plan, owner: LkOwner, locked: &[bool]) {
    join_all(
        (0..sh.n())
            .filter(|&i| locked[i])
            .map(|i| unlock_child(sh, i, owner, &plan.items)),
    )
    .await;
}

/// On every child `i` marked in `on`, adds `delta(i, j)` in each target's lanes under child
/// `j`'s key (keys whose delta is 0 are left out, or read with a zero delta when `read_all`);
/// returns where it succeeded, per target what each child answered, and the errors of the
/// children where it failed.
async fn mark_read(
    sh: &Shared,
    plan: &Plan,
    on: &[bool],
    read_all: bool,
    delta: impl Fn(usize, usize) -> i32,
) -> (Vec<bool>, Vec<Vec<Option<RVec<Xattr>>>>, Vec<Errno>) {
    let cx = Ctx::root();
    let delta = &delta;
    let per_child = join_all((0..sh.n()).map(|i| {
        let cx = cx.clone();
        async move {
            let mut answers = Vec::with_capacity(plan.targets.len());
            if !on[i] {
                return (None, answers);
            }
            for (gfid, lanes) in &plan.targets {
                let xs = changelog_xattrs(sh, *lanes, read_all, |j| delta(i, j));
                if xs.is_empty() {
                    answers.push(None);
                    continue;
                }
                match sh.children[i]
                    .xattrop(&cx, *gfid, XattropOp::AddArray32, xs)
                    .await
                {
                    Ok(v) => answers.push(Some(v)),
                    Err(e) => {
                        sh.log(
                            gone_level(e),
                            &format!("changelog on {gfid} failed on child {i}: {e}"),
                        );
                        return (Some(Err(e)), answers);
                    }
                }
            }
            (Some(Ok(())), answers)
        }
    }))
    .await;
    let ok: Vec<bool> = per_child
        .iter()
        .map(|(r, _)| matches!(r, Some(Ok(()))))
        .collect();
    let errs = per_child
        .iter()
        .filter_map(|(r, _)| r.and_then(Result::err))
        .collect();
    let by_target = (0..plan.targets.len())
        .map(|t| {
            per_child
                .iter()
                .zip(&ok)
                .map(|((_, a), ok)| {
                    if *ok {
                        a.get(t).cloned().flatten()
                    } else {
                        None
                    }
                })
                .collect()
        })
        .collect();
    (ok, by_target, errs)
}

async fn mark(
    sh: &Shared,
    plan: &Plan,
    on: &[bool],
    delta: impl Fn(usize, usize) -> i32,
) -> Vec<bool> {
    mark_read(sh, plan, on, false, delta).await.0
}

/// The participants that are good copies of every target's data and metadata lanes after
/// the pre-op (no other participant accuses them, as the pre-op's answers say). None means
/// the write is refused: writing over stale copies only would lose what the good ones (down
/// now) hold. Entry lanes are left out: names a child missed are merged by entry heal, never
/// lost. Errs ENOTCONN when the good copy may be a child not taking part, EIO when the
/// participants accuse each other and nobody else can be good (split-brain).
fn good_copies(
    sh: &Shared,
    plan: &Plan,
    pre: &[bool],
    answers: &[Vec<Option<RVec<Xattr>>>],
) -> Result<Vec<bool>, Errno> {
    let n = sh.n();
    let mut good = pre.to_vec();
    for ((gfid, lanes), rows) in plan.targets.iter().zip(answers) {
        let m = changelog::Matrix::build(&sh.keys, pre, |i, k| {
            rows[i]
                .as_ref()
                .and_then(|xs| crate::shared::xattr_value(xs, k))
        });
        for (lane, _) in lanes.each() {
            if lane == Lanes::ENTRY {
                continue;
            }
            for (j, g) in good.iter_mut().enumerate() {
                *g &= !(0..n).any(|i| i != j && pre[i] && m.get(i, j, lane) > 0);
            }
            if lane == Lanes::DATA
                && let Some(a) = sh.arbiter
            {
                // It holds no data: a write needs a good data copy besides it.
                good[a] = false;
            }
            if !good.iter().any(|g| *g) {
                // The answers include this pre-op's own +1 for the children not taking part.
                let outside_may_be_good =
                    (0..n).any(|j| !pre[j] && !(0..n).any(|i| pre[i] && m.get(i, j, lane) > 1));
                sh.log(
                    LogLevel::Warn,
                    &format!(
                        "write to {gfid} refused: no good copy of its {} among the children up",
                        lane.name()
                    ),
                );
                return Err(if outside_may_be_good {
                    Errno::ENOTCONN
                } else {
                    Errno::EIO
                });
            }
        }
    }
    Ok(good)
}

/// Step 4: on every child in `on`, +1 under its own key (dirty) and under the key of every
/// child not in `on` (it misses this change); the other keys are read (zero delta), so the
/// answers say who accuses whom (and the errors of the children where it failed).
pub(crate) async fn pre_op(
    sh: &Shared,
    plan: &Plan,
    on: &[bool],
) -> (Vec<bool>, Vec<Vec<Option<RVec<Xattr>>>>, Vec<Errno>) {
    mark_read(sh, plan, on, true, |i, j| i32::from(i == j || !on[j])).await
}

/// Steps 6 and 7: the post-op on every pre-op'ed child (`pre`): -1 under its own key and
/// +1 under the key of each child the pre-op did not already accuse (it was in `locked`)
/// where the fop did not succeed (`ok[j]` false: it failed, or its pre-op did), so it stays
/// accused; then the unlock of `locked` (in one request per child where the bricks honour
/// [`LocksAround`]).
pub(crate) async fn post_op_and_unlock(
    sh: &Shared,
    plan: &Plan,
    owner: LkOwner,
    pre: &[bool],
    locked: &[bool],
    ok: &[bool],
) {
    let delta = |i: usize, j: usize| {
        if i == j {
            -1
        } else {
            i32::from(locked[j] && !ok[j])
        }
    };
    finish(sh, plan, owner, pre, locked, delta).await;
}

/// Steps 6 and 7 when nothing changed anywhere (every child refused the fop, or too few were
/// pre-op'ed): the pre-op is taken back entirely, absent children's accusations included;
/// then the unlock of `locked` (as [`post_op_and_unlock`]).
pub(crate) async fn undo_and_unlock(
    sh: &Shared,
    plan: &Plan,
    owner: LkOwner,
    pre: &[bool],
    locked: &[bool],
) {
    finish(sh, plan, owner, pre, locked, |i, j| {
        -i32::from(i == j || !locked[j])
    })
    .await;
}

/// The changelog `delta` on `pre`, then the unlock of `locked`: a post-op carrying its unlock
/// ([`LocksAround::give`]) where every child of `pre` honours it and the plan marks one
/// object; separate requests otherwise.
async fn finish(
    sh: &Shared,
    plan: &Plan,
    owner: LkOwner,
    pre: &[bool],
    locked: &[bool],
    delta: impl Fn(usize, usize) -> i32,
) {
    if plan.targets.len() != 1 || !around_everywhere(sh, pre).await {
        mark(sh, plan, pre, delta).await;
        unlock(sh, plan, owner, locked).await;
        return;
    }
    let delta = &delta;
    join_all((0..sh.n()).map(|i| async move {
        if pre[i] {
            let r = xattrop_around(sh, plan, i, owner, false, |j| delta(i, j), false).await;
            if r == Err(Errno::ENOTCONN) {
                // Perhaps never arrived: the locks are given back when the child returns.
                let mut stale = crate::shared::lock(&sh.stale_locks);
                for item in &plan.items {
                    stale.push((i, owner, item.clone()));
                }
            }
        } else if locked[i] {
            for item in plan.items.iter().rev() {
                unlock_item(sh, i, owner, item).await;
            }
        }
    }))
    .await;
}

/// What a brick may honour of [`LocksAround`].
#[derive(Clone, Copy)]
enum Around {
    /// Locks taken with an xattrop and given back with one.
    Xattrop,
    /// Also a create's locks, kept with the new file.
    Create,
}

/// Whether child `i`'s brick honours `what` of [`LocksAround`]: asked once (a `getxattr` of
/// [`LOCKS_AROUND_XATTR`] or [`LOCKS_AROUND_CREATE_XATTR`]) after each ChildUp;
/// `lock-with-changelog off` says no.
async fn around_ok(sh: &Shared, i: usize, what: Around) -> bool {
    use std::sync::atomic::Ordering;

    use crate::shared::{AROUND_NO, AROUND_YES};
    let (known, name) = match what {
        Around::Xattrop => (&sh.around[i], LOCKS_AROUND_XATTR),
        Around::Create => (&sh.around_create[i], LOCKS_AROUND_CREATE_XATTR),
    };
    match known.load(Ordering::Acquire) {
        AROUND_YES => return true,
        AROUND_NO => return false,
        _ => {}
    }
    let r = sh.children[i]
        .getxattr(&Ctx::root(), Gfid::ROOT, name.into())
        .await;
    match r {
        Ok(v) if v.as_slice() == b"1" => {
            known.store(AROUND_YES, Ordering::Release);
            true
        }
        // Not reached: asked again next time.
        Err(Errno::ENOTCONN) => false,
        _ => {
            known.store(AROUND_NO, Ordering::Release);
            false
        }
    }
}

/// Whether every child in `on` honours `what` of [`LocksAround`] (and the option is on).
async fn around_all(sh: &Shared, on: &[bool], what: Around) -> bool {
    if !sh.cfg().lock_with_changelog {
        return false;
    }
    join_all(
        (0..sh.n())
            .filter(|&i| on[i])
            .map(|i| around_ok(sh, i, what)),
    )
    .await
    .into_iter()
    .all(|ok| ok)
}

/// Whether every child in `on` honours [`LocksAround`] (and the option is on).
async fn around_everywhere(sh: &Shared, on: &[bool]) -> bool {
    around_all(sh, on, Around::Xattrop).await
}

/// Whether a new file can be made with its eager hold on every child in `on`: each takes a
/// create's [`LocksAround`] (and gives the post-op's back with it).
pub(crate) async fn born_held_everywhere(sh: &Shared, on: &[bool]) -> bool {
    around_everywhere(sh, on).await && around_all(sh, on, Around::Create).await
}

/// What a file made with its hold carries to child `i` (`on`: every child the create goes
/// to): the plan's locks ([`LocksAround::take`]) and, as [`CreateXattrs`], the pre-op an
/// open of the hold would have made there (+1 under `i`'s own key, +1 under the key of
/// every child not in `on`).
pub(crate) fn born_held(
    sh: &Shared,
    plan: &Plan,
    i: usize,
    on: &[bool],
) -> (LocksAround, CreateXattrs) {
    let (_, lanes) = plan.targets[0];
    let marks = changelog_xattrs(sh, lanes, false, |j| i32::from(i == j || !on[j]));
    let xs = marks
        .into_iter()
        .map(|x| (x.name.to_string(), x.value.as_slice().to_vec()))
        .collect();
    let around = LocksAround {
        take: plan.items.iter().map(LockItem::around).collect(),
        give: Vec::new(),
    };
    (around, CreateXattrs(xs))
}

/// Takes back what [`born_held`] made on the children of `made` (`on`: every child the
/// create went to): its marks, then its locks. For a create that did not succeed on all of
/// `on`, or not with quorum: the file goes on without a hold, as any new file.
pub(crate) async fn unborn(sh: &Shared, plan: &Plan, owner: LkOwner, made: &[bool], on: &[bool]) {
    finish(sh, plan, owner, made, made, |i, j| {
        -i32::from(i == j || !on[j])
    })
    .await;
}

/// The plan's one target's changelog `delta(j)` (under child `j`'s key) on child `i`, with
/// the plan's locks taken before it (`take`) or given back after it, in one request.
async fn xattrop_around(
    sh: &Shared,
    plan: &Plan,
    i: usize,
    owner: LkOwner,
    take: bool,
    delta: impl Fn(usize) -> i32,
    read_all: bool,
) -> Result<RVec<Xattr>, Errno> {
    let (gfid, lanes) = plan.targets[0];
    let locks: Vec<AroundLock> = plan.items.iter().map(LockItem::around).collect();
    let around = if take {
        LocksAround {
            take: locks,
            give: Vec::new(),
        }
    } else {
        LocksAround {
            take: Vec::new(),
            give: locks,
        }
    };
    let xs = changelog_xattrs(sh, lanes, read_all, delta);
    let cx = sh.internal_ctx(owner).to_builder().ext(&around).build();
    let r = sh.children[i]
        .xattrop(&cx, gfid, XattropOp::AddArray32, xs)
        .await;
    if let Err(e) = r
        && e != Errno::EAGAIN
    {
        sh.log(
            gone_level(e),
            &format!("changelog on {gfid} failed on child {i}: {e}"),
        );
    }
    r
}

/// Steps 2-4 in one request per child ([`LocksAround::take`] with the pre-op), when every
/// child up honours it and the plan marks one object. `None`: not possible, or some child
/// was busy (contention) or failed; what was taken is given back (pre-op undone) and the
/// caller goes the step-by-step way, which sorts out contention and failures.
async fn open_at_once(
    sh: &Shared,
    plan: &Plan,
    owner: LkOwner,
    up: &[bool],
) -> Option<Result<Open, Errno>> {
    if plan.targets.len() != 1 || !around_everywhere(sh, up).await {
        return None;
    }
    let tries = join_all((0..sh.n()).map(|i| async move {
        if up[i] {
            let delta = |j: usize| i32::from(i == j || !up[j]);
            Some(xattrop_around(sh, plan, i, owner, true, delta, true).await)
        } else {
            None
        }
    }))
    .await;
    let done: Vec<bool> = tries.iter().map(|r| matches!(r, Some(Ok(_)))).collect();
    if done != up {
        // Pre-op'ed as if every child up took part: undone the same way.
        finish(sh, plan, owner, &done, &done, |i, j| {
            -i32::from(i == j || !up[j])
        })
        .await;
        return None;
    }
    let answers = vec![tries.into_iter().map(|r| r.and_then(Result::ok)).collect()];
    let pre = up.to_vec();
    Some(match good_copies(sh, plan, &pre, &answers) {
        Ok(good) => Ok(Open {
            owner,
            locked: pre.clone(),
            pre,
            good,
            contended: false,
        }),
        Err(e) => {
            undo_and_unlock(sh, plan, owner, &pre, &pre).await;
            Err(e)
        }
    })
}

/// Whether every participant refused the fop (nothing changed anywhere: the pre-op is
/// undone).
/// With an arbiter, a data change that succeeded on the arbiter alone changed no data
/// anywhere (the arbiter stores none); counting it would leave the arbiter the only good copy
/// and every data copy accused. The arbiter's answer becomes the data children's error, and
/// true says so: the caller then takes the change as made nowhere (GlusterFS
/// `afr_txn_arbitrate_fop`).
pub(crate) fn arbitrate<R>(sh: &Shared, plan: &Plan, replies: &mut Replies<R>) -> bool {
    let Some(a) = sh.arbiter else {
        return false;
    };
    if !plan.targets.iter().any(|(_, l)| l.has(Lanes::DATA)) {
        return false;
    }
    let ok = replies.succeeded();
    if !ok.get(a).copied().unwrap_or(false) || ok.iter().enumerate().any(|(i, o)| *o && i != a) {
        return false;
    }
    let errs = replies
        .0
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != a)
        .filter_map(|(_, r)| r.as_ref().and_then(|r| r.as_ref().err().copied()));
    let e = first_error(errs);
    sh.log(
        LogLevel::Warn,
        &format!(
            "a data change of {:?} succeeded on the arbiter only ({e} elsewhere): failed",
            plan.targets.first().map(|t| t.0)
        ),
    );
    replies.0[a] = Some(Err(e));
    true
}

pub(crate) fn all_refused<R>(replies: &Replies<R>) -> bool {
    !replies.succeeded().iter().any(|b| *b)
        && replies
            .0
            .iter()
            .flatten()
            .all(|r| r.as_ref().err().is_some_and(|e| refused(*e)))
}

/// Runs `op` on the children marked in `on`, in parallel.
pub(crate) async fn fan_out<R, F, Fut>(on: &[bool], op: &F) -> Replies<R>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<R, Errno>>,
{
    Replies(
        join_all(
            (0..on.len()).map(|i| async move { if on[i] { Some(op(i).await) } else { None } }),
        )
        .await,
    )
}

/// Steps 1-4: the children locked and pre-op'ed for `plan`; EROFS without quorum, or the
/// children's own error when the lock or the pre-op failed on every child ([`refusal`]).
pub(crate) struct Open {
    pub owner: LkOwner,
    pub locked: Vec<bool>,
    pub pre: Vec<bool>,
    /// The participants that are good copies ([`good_copies`]).
    pub good: Vec<bool>,
    pub contended: bool,
}

pub(crate) async fn open(sh: &Shared, plan: &Plan, quorum: Quorum) -> Result<Open, Errno> {
    let up = sh.up_set();
    if !quorum.met(&up) {
        return Err(Errno::EROFS);
    }
    let owner = sh.new_owner();
    if let Some(r) = open_at_once(sh, plan, owner, &up).await {
        return r;
    }
    let (locked, contended, lock_errs) = lock(sh, plan, owner, &up).await;
    if !quorum.met(&locked) {
        unlock(sh, plan, owner, &locked).await;
        return Err(refusal(&locked, lock_errs));
    }
    let (pre, answers, pre_errs) = pre_op(sh, plan, &locked).await;
    if !quorum.met(&pre) {
        undo_and_unlock(sh, plan, owner, &pre, &locked).await;
        return Err(refusal(&pre, pre_errs));
    }
    let good = match good_copies(sh, plan, &pre, &answers) {
        Ok(g) => g,
        Err(e) => {
            undo_and_unlock(sh, plan, owner, &pre, &locked).await;
            return Err(e);
        }
    };
    Ok(Open {
        owner,
        locked,
        pre,
        good,
        contended,
    })
}

/// The answer when too few children passed a step (`passed`) of [`open`]. When none did, the
/// children answered for the object itself (ENOTDIR for a mkdir under a regular file,
/// ENOENT or ESTALE for an object gone, ENOTCONN when every child just went away): that
/// answer is the fop's, as a single brick would give it. Only a step passed by some children
/// but too few for the quorum is the quorum's EROFS.
fn refusal(passed: &[bool], errs: Vec<Errno>) -> Errno {
    if passed.iter().any(|p| *p) || errs.is_empty() {
        Errno::EROFS
    } else {
        first_error(errs)
    }
}

/// Steps 6-7 after `replies`.
pub(crate) async fn close<R>(sh: &Shared, plan: &Plan, t: &Open, replies: &Replies<R>) {
    if all_refused(replies) {
        undo_and_unlock(sh, plan, t.owner, &t.pre, &t.locked).await;
    } else {
        let ok = replies.succeeded();
        post_op_and_unlock(sh, plan, t.owner, &t.pre, &t.locked, &ok).await;
    }
}

/// A whole transaction: `op(i)` is the fop on child `i`.
pub(crate) async fn run<R, F, Fut>(sh: &Shared, plan: Plan, op: F) -> Result<Replies<R>, Errno>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<R, Errno>>,
{
    run_prepared(sh, plan, |_| async { Ok(()) }, |i, ()| op(i)).await
}

/// A whole transaction whose fop needs something learnt under its lock first: `prepare` gets
/// the participants that are good copies (pre-op'ed, accused by no other participant) and
/// answers a value every child's fop then uses (`op(i, value)`), the same for all; an O_APPEND
/// write's offset is resolved so, once for every replica. When `prepare` fails, nothing was
/// written: the pre-op is undone and its error is the answer.
pub(crate) async fn run_prepared<R, P, G, GFut, F, Fut>(
    sh: &Shared,
    plan: Plan,
    prepare: G,
    op: F,
) -> Result<Replies<R>, Errno>
where
    P: Copy,
    G: FnOnce(Vec<bool>) -> GFut,
    GFut: Future<Output = Result<P, Errno>>,
    F: Fn(usize, P) -> Fut,
    Fut: Future<Output = Result<R, Errno>>,
{
    let quorum = sh.cfg().quorum;
    let t = open(sh, &plan, quorum).await?;
    let sources: Vec<bool> = t.pre.iter().zip(&t.good).map(|(p, g)| *p && *g).collect();
    let value = match prepare(sources).await {
        Ok(v) => v,
        Err(e) => {
            undo_and_unlock(sh, &plan, t.owner, &t.pre, &t.locked).await;
            return Err(e);
        }
    };
    let mut replies = fan_out(&t.pre, &|i| op(i, value)).await;
    if arbitrate(sh, &plan, &mut replies) {
        // No data child took it: nothing changed that matters; nobody is accused.
        undo_and_unlock(sh, &plan, t.owner, &t.pre, &t.locked).await;
        return Ok(replies);
    }
    close(sh, &plan, &t, &replies).await;
    // A fop every participant refused changed nothing anywhere (its pre-op was undone): no
    // copy became stale, so none stops being readable. Without this, an rmdir answered
    // ENOTEMPTY (or an unlink ENOENT, a chmod EPERM) by every child left the parent with no
    // readable child: its listings failed with ENOTCONN until the next lookup, and `rm -rf`
    // after dbench ended in ENOTEMPTY.
    if !all_refused(&replies) {
        for (gfid, lanes) in &plan.targets {
            sh.after_write(*gfid, *lanes, &replies.succeeded());
        }
    }
    Ok(replies)
}
