//! Eager locking with a delayed post-op (GlusterFS `eager-lock`, `post-op-delay-secs`): a
//! write through an fd keeps the file's inodelks (data and metadata domains) and its pre-op
//! (both lanes) after the write, so the next writes of the file from this client, and its
//! attribute changes while the file is open here (`fchmod`, `fchown`, `futimens`: what `tar
//! x` does after each file's data), go straight to the children (one round trip per replica
//! per fop instead of lock + pre-op + fop + post-op + unlock).
//!
//! A hold ends (post-op for the children that succeeded every fop of the hold, then
//! unlock):
//! - as soon as another client wants the lock: features/locks on each brick sends the
//!   holder a lock-contention upcall when another client's inodelk meets the hold, and
//!   [`release_now`] runs on it (`Translator::upcall` in xlator.rs);
//! - `post-op-delay` after it was taken (the timer is not renewed by later writes, so
//!   another client waiting for the lock waits at most that long even when the upcall is
//!   lost);
//! - at once when a fop of the hold failed on some child (its blame is made durable
//!   before the next one), and on flush, fsync, release, a truncate, any other data or
//!   metadata transaction of this client on the file, or a heal of it ([`release_now`]);
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

use xlator_api::{Errno, Gfid, LkOwner};

use crate::changelog::Lanes;
use crate::shared::{Handle, Shared, lock};
use crate::transaction::{self, Plan, Replies};

/// The eager holds of one client, by file.
#[derive(Default)]
pub(crate) struct Eager {
    slots: Mutex<HashMap<Gfid, Arc<tokio::sync::Mutex<Slot>>>>,
}

#[derive(Default)]
struct Slot {
    held: Option<Held>,
    inflight: usize,
    /// Numbers holds, so a timer ends only the hold it was set for.
    hold_no: u64,
    release_when_idle: bool,
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
    fn slot(&self, gfid: Gfid) -> Arc<tokio::sync::Mutex<Slot>> {
        lock(&self.slots).entry(gfid).or_default().clone()
    }

    fn existing(&self, gfid: Gfid) -> Option<Arc<tokio::sync::Mutex<Slot>>> {
        lock(&self.slots).get(&gfid).cloned()
    }

    /// Whether `gfid` has a hold now (or is being taken or used at this instant).
    pub fn holds(&self, gfid: Gfid) -> bool {
        let Some(s) = self.existing(gfid) else {
            return false;
        };
        s.try_lock().map_or(true, |s| s.held.is_some())
    }

    /// Files with a hold now (a slot busy at this instant is counted as held).
    pub fn held(&self) -> Vec<Gfid> {
        let slots: Vec<(Gfid, Arc<tokio::sync::Mutex<Slot>>)> = lock(&self.slots)
            .iter()
            .map(|(g, s)| (*g, s.clone()))
            .collect();
        slots
            .into_iter()
            .filter(|(_, s)| s.try_lock().map_or(true, |s| s.held.is_some()))
            .map(|(g, _)| g)
            .collect()
    }

    /// Drops the slot of a closed file if nothing uses it.
    pub fn forget(&self, gfid: Gfid) {
        let mut m = lock(&self.slots);
        if let Some(s) = m.get(&gfid)
            && Arc::strong_count(s) == 1
            && s.try_lock()
                .is_ok_and(|s| s.held.is_none() && s.inflight == 0)
        {
            m.remove(&gfid);
        }
    }
}

/// A write (`lanes`: what it changes, data and/or metadata) of `gfid` under the file's eager
/// hold (taken if there is none).
///
/// `prepare` runs first, under the hold, with the participants that are good copies; what it
/// answers is given to every child's `op` (an O_APPEND write's offset, see
/// [`crate::append`]). With `exclusive`, the write keeps the slot from `prepare` to the last
/// child's answer: no other write of this client to the file starts meanwhile (appends of one
/// client would otherwise resolve the same end of file, or reach the replicas in different
/// orders); writes already in flight go on (positional, they land alike everywhere).
pub(crate) async fn write<R, P, G, GFut, F, Fut>(
    sh: &Handle,
    gfid: Gfid,
    lanes: Lanes,
    exclusive: bool,
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
    let cfg = sh.cfg();
    let slot = sh.eager.slot(gfid);
    let mut s = slot.lock().await;
    let pre = 'acquire: loop {
        if s.held.is_none() {
            let plan = Plan::inode(sh, gfid, Lanes::DATA | Lanes::META);
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
            s.release_when_idle = t.contended || cfg.post_op_delay.is_zero();
            if !s.release_when_idle {
                arm_timer(sh.clone(), slot.clone(), s.hold_no, cfg.post_op_delay);
            }
        }
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
    let (replies, mut s) = match prepared {
        Ok(value) => {
            let replies = transaction::fan_out(&pre, &|i| op(i, value)).await;
            let s = match kept {
                Some(s) => s,
                None => slot.lock().await,
            };
            (replies, s)
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
    Ok(replies)
}

fn arm_timer(
    sh: Handle,
    slot: Arc<tokio::sync::Mutex<Slot>>,
    hold_no: u64,
    delay: std::time::Duration,
) {
    let services = sh.services;
    services.spawn(async move {
        sh.services.sleep(delay).await;
        let mut s = slot.lock().await;
        if s.hold_no != hold_no || s.held.is_none() {
            return;
        }
        if s.inflight == 0 {
            end_hold(&sh, &mut s).await;
        } else {
            s.release_when_idle = true;
        }
    });
}

/// Post-op and unlock of the current hold.
async fn end_hold(sh: &Shared, s: &mut Slot) {
    s.release_when_idle = false;
    let Some(h) = s.held.take() else { return };
    let ok: Vec<bool> = (0..h.pre.len()).map(|i| h.pre[i] && !h.failed[i]).collect();
    transaction::post_op_and_unlock(sh, &h.plan, h.owner, &h.pre, &h.locked, &ok).await;
}

/// Ends the hold of `gfid` now (flush, fsync, release, truncate, heal). With writes of the
/// hold still in flight, the last of them ends it.
pub(crate) async fn release_now(sh: &Shared, gfid: Gfid) {
    let Some(slot) = sh.eager.existing(gfid) else {
        return;
    };
    let mut s = slot.lock().await;
    if s.inflight > 0 {
        s.release_when_idle = true;
    } else {
        end_hold(sh, &mut s).await;
    }
}
