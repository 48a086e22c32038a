//! Byte-range locks (POSIX `lk` and internal `inodelk`) and entry locks, per owner, with
//! blocking waits woken on every unlock.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use xlator_api::{EntrylkCmd, Errno, Flock, Gfid, LkCmd, LkOwner, LockKind};

/// One held range lock; `end` is inclusive.
#[derive(Clone, Copy)]
struct Held {
    owner: LkOwner,
    kind: LockKind,
    start: u64,
    end: u64,
    pid: u32,
}

/// The lock space of one object: `lk` locks (domain `None`) or an `inodelk` domain.
type RangeKey = (Option<String>, Gfid);

/// One held entry lock (`name` empty: the whole directory).
struct EntryHeld {
    domain: String,
    parent: Gfid,
    name: String,
    owner: LkOwner,
}

#[derive(Default)]
struct State {
    ranges: HashMap<RangeKey, Vec<Held>>,
    entries: Vec<EntryHeld>,
}

/// All locks of one volume.
#[derive(Default)]
pub(crate) struct Locks {
    state: Mutex<State>,
    changed: Notify,
}

fn range(lock: &Flock) -> Result<(u64, u64), Errno> {
    let end = match lock.len {
        0 => u64::MAX,
        n => lock.start.checked_add(n - 1).ok_or(Errno::EINVAL)?,
    };
    Ok((lock.start, end))
}

fn conflict(held: &[Held], owner: LkOwner, kind: LockKind, start: u64, end: u64) -> Option<&Held> {
    held.iter().find(|h| {
        h.owner != owner
            && h.start <= end
            && start <= h.end
            && (h.kind == LockKind::Write || kind == LockKind::Write)
    })
}

/// Removes `owner`'s locks over `[start, end]`, splitting partial overlaps.
fn carve(held: &mut Vec<Held>, owner: LkOwner, start: u64, end: u64) {
    let mut kept = Vec::with_capacity(held.len() + 1);
    for h in held.drain(..) {
        if h.owner != owner || h.end < start || h.start > end {
            kept.push(h);
            continue;
        }
        if h.start < start {
            kept.push(Held {
                end: start - 1,
                ..h
            });
        }
        if h.end > end {
            kept.push(Held {
                start: end + 1,
                ..h
            });
        }
    }
    *held = kept;
}

impl Locks {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes, releases or tests a range lock in the space `key`.
    pub(crate) async fn range_lock(
        &self,
        key: RangeKeyArg<'_>,
        cmd: LkCmd,
        lock: Flock,
    ) -> Result<Flock, Errno> {
        let key: RangeKey = (key.domain.map(str::to_owned), key.gfid);
        let (start, end) = range(&lock)?;
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.state();
                let held = s.ranges.entry(key.clone()).or_default();
                let blocker = conflict(held, lock.owner, lock.kind, start, end).copied();
                match (cmd, blocker) {
                    (LkCmd::Get, Some(h)) => {
                        let len = if h.end == u64::MAX {
                            0
                        } else {
                            h.end - h.start + 1
                        };
                        return Ok(Flock {
                            kind: h.kind,
                            start: h.start,
                            len,
                            pid: h.pid,
                            owner: h.owner,
                        });
                    }
                    (LkCmd::Get, None) => {
                        return Ok(Flock {
                            kind: LockKind::Unlock,
                            ..lock
                        });
                    }
                    (_, _) if lock.kind == LockKind::Unlock => {
                        carve(held, lock.owner, start, end);
                        drop(s);
                        self.changed.notify_waiters();
                        return Ok(lock);
                    }
                    (LkCmd::Set, Some(_)) => return Err(Errno::EAGAIN),
                    (_, None) => {
                        carve(held, lock.owner, start, end);
                        held.push(Held {
                            owner: lock.owner,
                            kind: lock.kind,
                            start,
                            end,
                            pid: lock.pid,
                        });
                        drop(s);
                        // A downgrade (write to read) may let readers in.
                        self.changed.notify_waiters();
                        return Ok(lock);
                    }
                    (LkCmd::SetWait, Some(_)) => {}
                }
            }
            notified.await;
        }
    }

    /// Drops every `lk` lock of `owner` on `gfid` (close semantics).
    pub(crate) fn release_owner(&self, gfid: Gfid, owner: LkOwner) {
        if let Some(held) = self.state().ranges.get_mut(&(None, gfid)) {
            held.retain(|h| h.owner != owner);
        }
        self.changed.notify_waiters();
    }

    /// Entry lock on `parent`/`name` in `domain` for `owner`.
    pub(crate) async fn entry_lock(
        &self,
        domain: &str,
        parent: Gfid,
        name: &str,
        owner: LkOwner,
        cmd: EntrylkCmd,
    ) -> Result<(), Errno> {
        let same = |e: &EntryHeld| e.domain == domain && e.parent == parent;
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.state();
                if cmd == EntrylkCmd::Unlock {
                    let at = s
                        .entries
                        .iter()
                        .position(|e| same(e) && e.name == name && e.owner == owner);
                    let at = at.ok_or(Errno::EINVAL)?;
                    s.entries.remove(at);
                    drop(s);
                    self.changed.notify_waiters();
                    return Ok(());
                }
                let busy = s.entries.iter().any(|e| {
                    same(e)
                        && e.owner != owner
                        && (e.name.is_empty() || name.is_empty() || e.name == name)
                });
                if !busy {
                    s.entries.push(EntryHeld {
                        domain: domain.to_owned(),
                        parent,
                        name: name.to_owned(),
                        owner,
                    });
                    return Ok(());
                }
                if cmd == EntrylkCmd::LockNonBlocking {
                    return Err(Errno::EAGAIN);
                }
            }
            notified.await;
        }
    }
}

/// Names a range-lock space: `domain` `None` for POSIX `lk` locks.
pub(crate) struct RangeKeyArg<'a> {
    pub(crate) domain: Option<&'a str>,
    pub(crate) gfid: Gfid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carve_splits_ranges() {
        let o = LkOwner(1);
        let mut v = vec![Held {
            owner: o,
            kind: LockKind::Write,
            start: 0,
            end: 99,
            pid: 1,
        }];
        carve(&mut v, o, 10, 19);
        let spans: Vec<(u64, u64)> = v.iter().map(|h| (h.start, h.end)).collect();
        assert_eq!(spans, vec![(0, 9), (20, 99)]);
        assert!(conflict(&v, LkOwner(2), LockKind::Read, 15, 15).is_none());
        assert!(conflict(&v, LkOwner(2), LockKind::Read, 5, 15).is_some());
        assert!(conflict(&v, o, LockKind::Write, 5, 15).is_none());
    }
}
