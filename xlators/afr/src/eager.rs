//! Eager locking with a delayed post-op (GlusterFS `eager-lock`, `post-op-delay-secs`): a
//! write through an fd keeps the file's inodelks (data and metadata domains) and its pre-op
//! (both lanes) after the write, so the next writes of the file from this client, and its
//! attribute changes while the file is open here (`fchmod`, `fchown`, `futimens`: what `tar
//! x` does after each file's data), go straight to the children (one round trip per replica
//! per fop instead of lock + pre-op + fop + post-op + unlock).
//!
//! A file created through the directory's hold gets its own hold with the create when every
//! child up takes a create's locks ([`adopt`], `transaction::born_held`): the create carries
//! the file's inodelks and the pre-op's marks, so not even the first write waits for a lock.
//!
//! Namespace fops get the same for their directory (`entry-eager-lock`): a create, mkdir,
//! mknod, symlink, link, unlink or rmdir takes the whole directory's entrylk and the pre-op of
//! its entry lane, and keeps both, so the next namespace fops of this client in that
//! directory (`tar x` creating a directory's files, `rm -rf` removing them) cost one round
//! trip per replica instead of three. Such fops of one client in one directory go one at a
//! time (the kernel already orders them so on a FUSE mount), so two fops of one name never
//! reach the replicas in different orders. A rename, and this client's own entry heal of the
//! directory, end the hold first.
//!
//! Attribute changes of a directory (`chown`, `chmod`, `utimes` by path: `tar x` sets them
//! for each directory once its files are in) get a hold of the directory's metadata
//! ([`On::Meta`]: its inodelk in the metadata domain, the pre-op of its metadata lane), so
//! the second and third cost one round trip per replica instead of three. It ends like the
//! others; a metadata heal or any other metadata transaction of this client on the
//! directory ends it first. A directory removed under it (`rm -rf` right after `tar x`)
//! takes its post-op with it: that post-op fails, the unlock still goes.
//!
//! A hold ends (post-op for the children that succeeded every fop of the hold, then
//! unlock):
//! - as soon as another client wants the lock: features/locks on each brick sends the
//!   holder a lock-contention upcall when another client's inodelk (entrylk, for a
//!   directory's hold) meets the hold, and
//!   [`release_now`] runs on it (`Translator::upcall` in xlator.rs);
//! - `post-op-delay` after its last write (a file written again and again keeps its hold:
//!   random writes over many files find their holds still there), but at most
//!   [`MAX_HOLD_DELAYS`] times `post-op-delay` after it was taken, so another client waiting
//!   for the lock waits at most that long even when the upcall is lost;
//! - at once when a fop of the hold failed on some child (its blame is made durable
//!   before the next one), and on fsync, a truncate, any other data or metadata
//!   transaction of this client on the file, or a heal of it ([`release_now`]); not at
//!   flush or release: the attribute changes that follow a close (`tar x` sets a file's
//!   times by path after closing it) go through the hold too, and a close waits for no
//!   post-op;
//! - when the graph is replaced or its host exits (`GraphSwitch`; hosts wait for the
//!   holds to end before exiting, see `PENDING_AT_EXIT`);
//! - right after its fop when taking it met contention (the non-blocking lock found
//!   another owner): a contended file gets plain transactions, so clients alternate.
//!
//! A child where some fop of the hold failed is accused in both lanes (its data heal may
//! then copy data that did not change: safe, only slower).
//!
//! A child that comes up during a hold is not written until the next hold (the pre-op
//! accused it, so it is healed, not read, meanwhile).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xlator_api::{Errno, Gfid, LkOwner};

use crate::changelog::Lanes;
use crate::shared::{Handle, Shared, lock};
use crate::transaction::{self, Plan, Replies};

/// A hold ends at the latest this many `post-op-delay`s after it was taken, however often it
/// is written (bounds the wait of a client whose lock-contention upcall got lost).
pub(crate) const MAX_HOLD_DELAYS: u32 = 10;

/// What a hold keeps locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum On {
    /// A file's data and metadata (inodelks in both domains, pre-op of both lanes).
    File,
    /// A directory's names (its whole-directory entrylk, pre-op of its entry lane).
    Dir,
    /// A directory's metadata (its inodelk in the metadata domain, pre-op of its metadata
    /// lane): `tar x` sets each directory's owner, mode and times by path once its files
    /// are in.
    Meta,
}

/// Every kind of hold, for what ends all holds of an object.
const EVERY: [On; 3] = [On::File, On::Dir, On::Meta];

impl On {
    fn plan(self, sh: &Shared, gfid: Gfid) -> Plan {
        match self {
            On::File => Plan::inode(sh, gfid, Lanes::DATA | Lanes::META),
            On::Dir => Plan::dir(sh, gfid),
            On::Meta => Plan::inode(sh, gfid, Lanes::META),
        }
    }
}

type Key = (Gfid, On);

/// The eager holds of one client, by file and by directory.
#[derive(Default)]
pub(crate) struct Eager {
    slots: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>,
}

#[derive(Default)]
struct Slot {
    held: Option<Held>,
    inflight: usize,
    /// Numbers holds, so a timer ends only the hold it was set for.
    hold_no: u64,
    release_when_idle: bool,
    /// When the hold was taken and when its last write ended (`Services::now`).
    taken_at: Duration,
    last_write: Duration,
}

struct Held {
    plan: Plan,
    owner: LkOwner,
    locked: Vec<bool>,
    pre: Vec<bool>,
    /// The participants that were good copies when the hold began.
    good: Vec<bool>,
    /// Children where some write of this hold failed: they stay accused.
    failed: Vec<bool>,
}

impl Eager {
    fn slot(&self, key: Key) -> Arc<tokio::sync::Mutex<Slot>> {
        lock(&self.slots).entry(key).or_default().clone()
    }

    fn existing(&self, key: Key) -> Option<Arc<tokio::sync::Mutex<Slot>>> {
        lock(&self.slots).get(&key).cloned()
    }

    /// Whether file `gfid` has a hold now (or is being taken or used at this instant).
    pub fn holds(&self, gfid: Gfid) -> bool {
        let Some(s) = self.existing((gfid, On::File)) else {
            return false;
        };
        s.try_lock().map_or(true, |s| s.held.is_some())
    }

    /// Whether file `gfid` has a hold now with no write in flight, in which child `i` was a
    /// good copy and took every write: the counters `gfid` carries are then this hold's own
    /// pre-op (nobody else can write the file while it lasts), and child `i`'s copy is as
    /// current as any. False when the slot is busy at this instant.
    pub fn holds_idle_with_good(&self, gfid: Gfid, i: usize) -> bool {
        let Some(s) = self.existing((gfid, On::File)) else {
            return false;
        };
        let Ok(s) = s.try_lock() else {
            return false;
        };
        s.inflight == 0
            && s.held
                .as_ref()
                .is_some_and(|h| h.pre.get(i) == Some(&true) && h.good[i] && !h.failed[i])
    }

    /// Whether `gfid` has a hold now, as a file or as a directory (or one is being taken or
    /// used at this instant).
    pub fn holds_any(&self, gfid: Gfid) -> bool {
        EVERY.into_iter().any(|on| {
            self.existing((gfid, on))
                .is_some_and(|s| s.try_lock().map_or(true, |s| s.held.is_some()))
        })
    }

    /// Files and directories with a hold now (a slot busy at this instant is counted as
    /// held).
    pub fn held(&self) -> Vec<Gfid> {
        let slots: Vec<(Gfid, Arc<tokio::sync::Mutex<Slot>>)> = lock(&self.slots)
            .iter()
            .map(|((g, _), s)| (*g, s.clone()))
            .collect();
        slots
            .into_iter()
            .filter(|(_, s)| s.try_lock().map_or(true, |s| s.held.is_some()))
            .map(|(g, _)| g)
            .collect()
    }

    /// Drops the slot of a closed file if nothing uses it.
    pub fn forget(&self, gfid: Gfid) {
        self.forget_key((gfid, On::File));
    }

    fn forget_key(&self, key: Key) {
        let mut m = lock(&self.slots);
        if let Some(s) = m.get(&key)
            && Arc::strong_count(s) == 1
            && s.try_lock()
                .is_ok_and(|s| s.held.is_none() && s.inflight == 0)
        {
            m.remove(&key);
        }
    }
}

/// A write (`lanes`: what it changes, data and/or metadata of a file, or the names of a
/// directory) of `gfid` under its eager hold (`on`; taken if there is none).
///
/// `prepare` runs first, under the hold, with the participants that are good copies; what it
/// answers is given to every child's `op` (an O_APPEND write's offset, see
/// [`crate::append`]). With `exclusive`, the write keeps the slot from `prepare` to the last
/// child's answer: no other write of this client to the file starts meanwhile (appends of one
/// client would otherwise resolve the same end of file, or reach the replicas in different
/// orders); writes already in flight go on (positional, they land alike everywhere).
/// Answers the children's replies and what `prepare` answered.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write<R, P, G, GFut, F, Fut>(
    sh: &Handle,
    gfid: Gfid,
    on: On,
    lanes: Lanes,
    exclusive: bool,
    prepare: G,
    op: F,
) -> Result<(Replies<R>, P), Errno>
where
    P: Copy,
    G: FnOnce(Vec<bool>) -> GFut,
    GFut: Future<Output = Result<P, Errno>>,
    F: Fn(usize, P) -> Fut,
    Fut: Future<Output = Result<R, Errno>>,
{
    let cfg = sh.cfg();
    let key = (gfid, on);
    let slot = sh.eager.slot(key);
    let mut s = slot.lock().await;
    let pre = 'acquire: loop {
        take(sh, key, &slot, &mut s).await?;
        let up = sh.up_set();
        // The hold's good copies all went down (or failed a write): not one more write to
        // stale copies only. The hold ends (the children that left missed nothing, so they
        // are not accused) and a new one checks again: it refuses, or finds a good copy.
        if let Some(h) = s.held.as_ref()
            && !(0..up.len()).any(|i| h.good[i] && h.pre[i] && up[i] && !h.failed[i])
        {
            if s.inflight > 0 {
                s.release_when_idle = true;
                return Err(Errno::ENOTCONN);
            }
            end_hold(sh, &mut s).await;
            continue 'acquire;
        }
        // Children that went down since the hold was taken: without quorum now, nothing
        // is written (the minority changes nothing) and the hold ends.
        let pre: Vec<bool> = s
            .held
            .as_ref()
            .map(|h| h.pre.iter().zip(&up).map(|(p, u)| *p && *u).collect())
            .unwrap_or_default();
        if !cfg.quorum.met(&pre) {
            if s.inflight > 0 {
                s.release_when_idle = true;
                return Err(Errno::EROFS);
            }
            end_hold(sh, &mut s).await;
            if cfg.quorum.met(&up) {
                // The children up now make a quorum: a new hold over them.
                continue 'acquire;
            }
            return Err(Errno::EROFS);
        }
        if let Some(h) = s.held.as_mut() {
            for (i, f) in h.failed.iter_mut().enumerate() {
                // Gone since the hold began: it misses this write and the next ones (marked
                // only now that a write goes ahead: a child that left a hold no write
                // followed missed nothing and is not accused).
                *f |= h.pre[i] && !pre[i];
            }
        }
        s.inflight += 1;
        break pre;
    };
    let sources: Vec<bool> = s.held.as_ref().map_or_else(Vec::new, |h| {
        (0..pre.len())
            .map(|i| pre[i] && h.good[i] && !h.failed[i])
            .collect()
    });
    let mut kept = Some(s);
    if !exclusive {
        kept = None;
    }
    let prepared = prepare(sources).await;
    let (replies, value, mut s) = match prepared {
        Ok(value) => {
            let replies = transaction::fan_out(&pre, &|i| op(i, value)).await;
            let s = match kept {
                Some(s) => s,
                None => slot.lock().await,
            };
            (replies, value, s)
        }
        Err(e) => {
            // Nothing was written: the hold goes on as it was.
            let mut s = match kept {
                Some(s) => s,
                None => slot.lock().await,
            };
            s.inflight -= 1;
            if s.release_when_idle && s.inflight == 0 {
                end_hold(sh, &mut s).await;
            }
            return Err(e);
        }
    };
    let mut replies = replies;
    // A data write the arbiter alone took changed no data: as refused everywhere, and the
    // hold ends (the next one checks for a good data copy again).
    let arbitrated = lanes.has(Lanes::DATA)
        && s.held
            .as_ref()
            .is_some_and(|h| transaction::arbitrate(sh, &h.plan, &mut replies));
    s.release_when_idle |= arbitrated;
    let ok = replies.succeeded();
    // A write every child refused (EFBIG, EINVAL...) changed nothing: nobody is stale.
    let refused = arbitrated || transaction::all_refused(&replies);
    s.inflight -= 1;
    s.last_write = sh.services.now();
    let mut failed = false;
    if let Some(h) = s.held.as_mut()
        && !refused
    {
        for (i, ok) in ok.iter().enumerate() {
            if h.pre[i] && !ok {
                h.failed[i] = true;
                failed = true;
            }
        }
    }
    s.release_when_idle |= failed;
    if s.release_when_idle && s.inflight == 0 {
        end_hold(sh, &mut s).await;
    }
    drop(s);
    if !refused {
        sh.after_write(gfid, lanes, &ok);
    }
    Ok((replies, value))
}

/// Takes the hold of `key` (lock and pre-op) into its slot `s` unless it has one.
async fn take(
    sh: &Handle,
    key: Key,
    slot: &Arc<tokio::sync::Mutex<Slot>>,
    s: &mut Slot,
) -> Result<(), Errno> {
    if s.held.is_some() {
        return Ok(());
    }
    let cfg = sh.cfg();
    let plan = key.1.plan(sh, key.0);
    let t = transaction::open(sh, &plan, cfg.quorum).await?;
    let n = sh.n();
    s.held = Some(Held {
        plan,
        owner: t.owner,
        locked: t.locked,
        pre: t.pre,
        good: t.good,
        failed: vec![false; n],
    });
    s.hold_no += 1;
    s.taken_at = sh.services.now();
    s.last_write = s.taken_at;
    s.release_when_idle = t.contended || cfg.post_op_delay.is_zero();
    if !s.release_when_idle {
        arm_timer(sh.clone(), key, slot.clone(), s.hold_no, cfg.post_op_delay);
    }
    Ok(())
}

/// Makes the hold a create brought with its new file ([`transaction::born_held`]: locked and
/// pre-op'ed on `made`, every child the create went to) the file's hold, as if the file's
/// first write had taken it: the writes and attribute changes that follow (`tar x`: the
/// data, then owner, mode and times) cost no lock and no pre-op.
pub(crate) async fn adopt(sh: &Handle, gfid: Gfid, plan: Plan, owner: LkOwner, made: Vec<bool>) {
    let key = (gfid, On::File);
    let slot = sh.eager.slot(key);
    let mut s = slot.lock().await;
    if s.held.is_some() {
        // Not for a GFID this create made; whatever holds it stays, the create's goes.
        drop(s);
        transaction::unborn(sh, &plan, owner, &made, &made).await;
        return;
    }
    let mut good = made.clone();
    if let Some(a) = sh.arbiter {
        // It holds no data (see `transaction::good_copies`).
        good[a] = false;
    }
    let n = made.len();
    s.held = Some(Held {
        plan,
        owner,
        locked: made.clone(),
        pre: made,
        good,
        failed: vec![false; n],
    });
    s.hold_no += 1;
    s.taken_at = sh.services.now();
    s.last_write = s.taken_at;
    let delay = sh.cfg().post_op_delay;
    if delay.is_zero() {
        end_hold(sh, &mut s).await;
    } else {
        arm_timer(sh.clone(), key, slot.clone(), s.hold_no, delay);
    }
}

fn arm_timer(
    sh: Handle,
    key: Key,
    slot: Arc<tokio::sync::Mutex<Slot>>,
    hold_no: u64,
    delay: Duration,
) {
    let services = sh.services;
    services.spawn(async move {
        let mut wait = delay;
        loop {
            sh.services.sleep(wait).await;
            let mut s = slot.lock().await;
            if s.hold_no != hold_no || s.held.is_none() {
                return;
            }
            let now = sh.services.now();
            let hard_end = s.taken_at + delay * MAX_HOLD_DELAYS;
            let idle_end = (s.last_write + delay).min(hard_end);
            if now < hard_end && (s.inflight > 0 || now < idle_end) {
                // In use, or written since: the hold lasts until `delay` after its last write.
                wait = if s.inflight > 0 {
                    delay.min(hard_end - now)
                } else {
                    idle_end - now
                };
                continue;
            }
            if s.inflight == 0 {
                end_hold(&sh, &mut s).await;
            } else {
                s.release_when_idle = true;
            }
            break;
        }
        drop(slot);
        sh.eager.forget_key(key);
    });
}

/// Post-op and unlock of the current hold.
async fn end_hold(sh: &Shared, s: &mut Slot) {
    s.release_when_idle = false;
    let Some(h) = s.held.take() else { return };
    let ok: Vec<bool> = (0..h.pre.len()).map(|i| h.pre[i] && !h.failed[i]).collect();
    transaction::post_op_and_unlock(sh, &h.plan, h.owner, &h.pre, &h.locked, &ok).await;
}

/// Ends every hold now (the graph is being replaced, or its host exits).
pub(crate) async fn release_all(sh: &Shared) {
    let keys: Vec<Key> = lock(&sh.eager.slots).keys().copied().collect();
    for (gfid, _) in keys {
        release_now(sh, gfid).await;
    }
}

/// Ends the holds of `gfid` now (fsync, truncate, heal, a rename in the directory, a
/// contention upcall). With writes of a hold still in flight, the last of them
/// ends it.
pub(crate) async fn release_now(sh: &Shared, gfid: Gfid) {
    for on in EVERY {
        let Some(slot) = sh.eager.existing((gfid, on)) else {
            continue;
        };
        let mut s = slot.lock().await;
        if s.inflight > 0 {
            s.release_when_idle = true;
        } else {
            end_hold(sh, &mut s).await;
        }
    }
}
