//! Self-heal (GlusterFS afr-self-heal-*.c): make the sinks of an object equal to a source,
//! then return the counters the heal read to zero. Each kind works under its own lock, taken
//! on every up child, and reads the counters again under it (the lookup that asked may be
//! stale):
//! - [`data`]: full file lock in the data domain (the client's own eager hold is ended first),
//!   copy in `heal-chunk-size` chunks (with `diff`, only chunks whose rchecksum differs),
//!   truncate the sink to the source's size, copy the times;
//! - [`metadata`]: metadata-domain lock; mode, owner, times and xattrs (replicate's own
//!   counters excepted; extra xattrs on a sink removed);
//! - [`entry`]: entrylk on the whole directory; names missing on a sink are made with the
//!   source's GFID (and blamed on the source, then healed), names only on a sink removed,
//!   names with different GFIDs reported as split-brain and left alone.
//!
//! - [`favorite`]: with `favorite-child-policy` other than none, a data or metadata lane in
//!   split-brain is healed from the copy the policy picks (as from a good copy: the sinks'
//!   counters and the source's accusations of them return to zero); otherwise it stays EIO.
//!
//! Heals on lookup run in the background, at most `background-self-heal-count` at once (one
//! per object; more are left to a later lookup); 0 runs them inline.

pub mod data;
pub mod entry;
pub mod favorite;
pub mod metadata;

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Ctx, Errno, FileType, Gfid, LkOwner, LogLevel, Xattr, XattropOp};

use crate::changelog::{self, Direction, Lanes, Matrix};
use crate::shared::{Handle, Shared, lock};
use crate::transaction::{self, Plan};

/// Heals running and their outcomes.
#[derive(Default)]
pub(crate) struct HealQueue {
    running: Mutex<HashSet<Gfid>>,
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub skipped: AtomicU64,
}

impl HealQueue {
    pub fn running(&self) -> usize {
        lock(&self.running).len()
    }
}

/// Whether a heal waits for the object's locks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Locks {
    /// Until granted: another client's eager hold is asked to end (lock-contention upcall).
    Wait,
    /// Only if every lock is free now; otherwise the heal is skipped (a lookup that found
    /// dirty counts alone: writes in flight on another client, which would lose its hold
    /// for a heal with nothing to do; counts a dead client left stay for the daemon and the
    /// next lookups).
    IfFree,
}

/// Heals `gfid` after a lookup found it needs it: inline (returns true once done) or in the
/// background (false). `path` names it in the log (a favorite-child-policy resolution).
pub(crate) async fn trigger(
    sh: &Handle,
    gfid: Gfid,
    kind: FileType,
    path: Option<String>,
    locks: Locks,
) -> bool {
    let max = sh.cfg().background_heals;
    {
        let mut running = lock(&sh.heals.running);
        if running.contains(&gfid) || (max > 0 && running.len() >= max) {
            sh.heals.skipped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        running.insert(gfid);
    }
    if max == 0 {
        run(sh, gfid, kind, path, locks).await;
        return true;
    }
    let bg = sh.clone();
    sh.services
        .spawn(async move { run(&bg, gfid, kind, path, locks).await });
    false
}

async fn run(sh: &Handle, gfid: Gfid, kind: FileType, path: Option<String>, locks: Locks) {
    match named(sh, gfid, kind, path, locks).await {
        Ok(()) => sh.heals.done.fetch_add(1, Ordering::Relaxed),
        Err(e) => {
            sh.log(LogLevel::Warn, &format!("heal of {gfid} failed: {e}"));
            sh.heals.failed.fetch_add(1, Ordering::Relaxed)
        }
    };
    lock(&sh.heals.running).remove(&gfid);
}

/// Heals every lane of `gfid` that an object of `kind` has.
pub(crate) fn object(sh: &Handle, gfid: Gfid, kind: FileType) -> BoxFuture<'_, Result<(), Errno>> {
    named(sh, gfid, kind, None, Locks::Wait)
}

/// [`object`], with the object's path (when known) for the log.
fn named(
    sh: &Handle,
    gfid: Gfid,
    kind: FileType,
    path: Option<String>,
    locks: Locks,
) -> BoxFuture<'_, Result<(), Errno>> {
    Box::pin(async move {
        let mut result = Ok(());
        let mut fav = favorite::Favorite::new(sh.cfg().favorite, path);
        if kind == FileType::Regular {
            result = result.and(data::heal(sh, gfid, &mut fav, locks).await);
        }
        if kind == FileType::Directory {
            result = result.and(entry::heal(sh, gfid, locks).await);
        }
        result = result.and(metadata::heal(sh, gfid, &mut fav, locks).await);
        sh.forget(gfid);
        result
    })
}

/// Where a heal goes: a source, the sinks, and every source.
pub(crate) type HealPlan = (usize, Vec<usize>, Vec<bool>);

/// A heal's lock, held on `locked`, and the counters read under it.
pub(crate) struct Held {
    pub plan: Plan,
    pub owner: LkOwner,
    pub locked: Vec<bool>,
    pub matrix: Matrix,
}

/// Takes `plan`'s locks on every up child and reads `gfid`'s counters there. `None` when
/// fewer than two children could be locked (nothing to heal between), or, with
/// [`Locks::IfFree`], when another owner holds one.
pub(crate) async fn begin(
    sh: &Shared,
    plan: Plan,
    gfid: Gfid,
    locks: Locks,
) -> Result<Option<Held>, Errno> {
    let owner = sh.new_owner();
    let up = sh.up_set();
    let mut locked = match locks {
        Locks::Wait => transaction::lock(sh, &plan, owner, &up).await.0,
        Locks::IfFree => match transaction::try_lock(sh, &plan, owner, &up).await {
            Some(locked) => locked,
            None => {
                sh.log(
                    LogLevel::Debug,
                    &format!("heal of {gfid} skipped: another client holds it (writes in flight)"),
                );
                return Ok(None);
            }
        },
    };
    let names: RVec<RString> = sh.keys.iter().map(|k| RString::from(k.as_str())).collect();
    let cx = Ctx::root();
    let mut rows = Vec::new();
    for (i, child) in sh.children.iter().enumerate() {
        rows.push(if locked[i] {
            child.getxattrs(&cx, gfid, names.clone()).await.ok()
        } else {
            None
        });
    }
    // A locked child that does not have the object takes no part (entry heal makes it).
    for (i, r) in rows.iter().enumerate() {
        if r.is_none() && locked[i] {
            transaction::unlock(sh, &plan, owner, &only(i, sh.n())).await;
            locked[i] = false;
        }
    }
    if locked.iter().filter(|l| **l).count() < 2 {
        transaction::unlock(sh, &plan, owner, &locked).await;
        return Ok(None);
    }
    let present: Vec<bool> = rows.iter().map(Option::is_some).collect();
    let matrix = Matrix::build(&sh.keys, &present, |i, k| {
        rows[i]
            .as_ref()
            .and_then(|xs| crate::shared::xattr_value(xs, k))
    });
    Ok(Some(Held {
        plan,
        owner,
        locked,
        matrix,
    }))
}

fn only(i: usize, n: usize) -> Vec<bool> {
    (0..n).map(|k| k == i).collect()
}

impl Held {
    /// The direction of `lane`: a source, the sinks and every source; `Ok(None)` when all
    /// counters are zero already; EIO (logged) on split-brain.
    pub fn direction(
        &self,
        sh: &Shared,
        gfid: Gfid,
        lane: Lanes,
    ) -> Result<Option<HealPlan>, Errno> {
        match self.matrix.direction(lane) {
            Direction::SplitBrain => {
                sh.split_brain(&gfid.to_string(), lane.name());
                Err(Errno::EIO)
            }
            Direction::Heal { sources, sinks } => {
                // An arbiter holds no data to copy: a data heal's source is a data child.
                let arbiter = sh.arbiter.filter(|_| lane == Lanes::DATA);
                let Some(src) = (0..sources.len()).find(|&i| sources[i] && Some(i) != arbiter)
                else {
                    if sources.iter().any(|s| *s) {
                        sh.log(
                            LogLevel::Info,
                            &format!(
                                "data heal of {gfid} waits: no good data copy is up (only the \
                                 arbiter)"
                            ),
                        );
                    }
                    return Ok(None);
                };
                let n = sh.n();
                let dirty = (0..n).any(|i| (0..n).any(|j| self.matrix.get(i, j, lane) > 0));
                let sinks: Vec<usize> = (0..sinks.len()).filter(|&i| sinks[i]).collect();
                // No sink but counters left (a post-op that never came on every child):
                // under this lock no transaction of the lane is open, so they are settled.
                Ok((dirty || !sinks.is_empty()).then_some((src, sinks, sources)))
            }
        }
    }

    /// Whether the `sources` of `lane` may differ from each other: more than one, and one of
    /// them dirty. Under the heal's lock no transaction of the lane is open, so a dirty count
    /// is a pre-op whose post-op never came (its client died mid-way): what that transaction
    /// changed may have reached some of them only. GlusterFS heals then too (its "witness").
    pub fn sources_may_differ(&self, lane: Lanes, sources: &[bool]) -> bool {
        let n = self.matrix.n().min(sources.len());
        (0..n).filter(|&i| sources[i]).count() > 1
            && (0..n).any(|i| sources[i] && self.matrix.get(i, i, lane) > 0)
    }

    /// As [`Held::direction`], but a split-brain is healed from the copy `fav` picks (the
    /// other present children are its sinks) when the policy picks one.
    pub async fn resolve(
        &self,
        sh: &Shared,
        gfid: Gfid,
        lane: Lanes,
        fav: &mut favorite::Favorite,
    ) -> Result<Option<HealPlan>, Errno> {
        if self.matrix.direction(lane) != Direction::SplitBrain {
            return self.direction(sh, gfid, lane);
        }
        let present: Vec<bool> = (0..sh.n())
            .map(|i| self.locked[i] && self.matrix.present(i))
            .collect();
        // The arbiter is never the copy picked (its data and times are not the file's); it
        // stays a sink.
        let mut cands = present.clone();
        if let Some(a) = sh.arbiter {
            cands[a] = false;
        }
        let Some(sources) = fav.pick(sh, gfid, lane.name(), &cands).await else {
            return self.direction(sh, gfid, lane);
        };
        let Some(src) = sources.iter().position(|s| *s) else {
            return self.direction(sh, gfid, lane);
        };
        let sinks = (0..sh.n()).filter(|&i| present[i] && !sources[i]).collect();
        Ok(Some((src, sinks, sources)))
    }

    /// Returns the counters of `lane` read under the lock to zero, for every pair of locked
    /// children whose accusation the heal settled (`healed[j]`: `j` is equal to the source
    /// now). Accusations of children not locked (down) stay.
    pub async fn settle(&self, sh: &Shared, gfid: Gfid, lane: Lanes, healed: &[bool]) {
        let cx = Ctx::root();
        for c in (0..sh.n()).filter(|&c| self.locked[c]) {
            let xs: RVec<Xattr> = (0..sh.n())
                .filter(|&j| healed[j] && self.matrix.get(c, j, lane) > 0)
                .filter_map(|j| {
                    let row = self.matrix.rows[c].as_ref()?;
                    Some(Xattr {
                        name: sh.keys[j].as_str().into(),
                        value: Buf::from_vec(changelog::undo(row[j], lane).to_vec()),
                    })
                })
                .collect();
            if xs.is_empty() {
                continue;
            }
            if let Err(e) = sh.children[c]
                .xattrop(&cx, gfid, XattropOp::AddArray32, xs)
                .await
            {
                sh.log(
                    LogLevel::Warn,
                    &format!("resetting counters of {gfid} on child {c}: {e}"),
                );
            }
        }
    }

    pub async fn end(self, sh: &Shared) {
        transaction::unlock(sh, &self.plan, self.owner, &self.locked).await;
    }
}
