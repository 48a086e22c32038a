//! Deadlock detection for POSIX locks across every file of the brick: an F_SETLKW that
//! would wait for an owner who waits, directly or through other waiting owners and on any
//! file, for the requester fails with EDEADLK instead (fcntl(2); Linux looks across every
//! file of the machine, posix_locks_deadlock in fs/locks.c). Owners are (client, lock owner)
//! pairs, so cycles through several clients of this brick are found too; a cycle through
//! locks on several bricks is not (each sees only its part).
//!
//! The walk runs under the table mutex, only for a request that must wait: it gathers the
//! waiting requests of every inode with lock state once, then follows the wait-for graph
//! from the holders the request would wait for. Waiting requests are never stale: whatever
//! frees a range grants its waiters before the mutex is let go (a waiter withdrawn by its
//! client is still there until its cancel arrives, which can make a cycle it was in look
//! alive for that long).

use std::collections::{HashMap, HashSet};

use xlator_api::Gfid;

use crate::owner::Owner;
use crate::range::Held;
use crate::table::InodeLocks;

/// Whether `req` on inode `g` waiting would close a cycle of waiting POSIX lock owners.
pub(crate) fn posix_would_deadlock(
    inodes: &HashMap<Gfid, InodeLocks>,
    g: Gfid,
    req: &Held,
) -> bool {
    let blockers = |g: &Gfid, w: &Held| -> Vec<Owner> {
        inodes.get(g).map_or_else(Vec::new, |il| {
            il.posix
                .held()
                .iter()
                .filter(|h| h.conflicts(w))
                .map(|h| h.owner)
                .collect()
        })
    };
    let mut frontier = blockers(&g, req);
    if frontier.is_empty() {
        return false;
    }
    let mut waiting: HashMap<Owner, Vec<(Gfid, Held)>> = HashMap::new();
    for (ig, il) in inodes {
        for w in il.posix.waiters() {
            waiting.entry(w.owner).or_default().push((*ig, *w));
        }
    }
    let mut seen = HashSet::new();
    while let Some(o) = frontier.pop() {
        if o == req.owner {
            return true;
        }
        if !seen.insert(o) {
            continue;
        }
        for (wg, w) in waiting.get(&o).into_iter().flatten() {
            frontier.extend(blockers(wg, w));
        }
    }
    false
}
