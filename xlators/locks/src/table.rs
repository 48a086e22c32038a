//! The lock table: per GFID, the POSIX (`lk`) range locks, the `inodelk` range locks per
//! domain and the `entrylk` name locks per domain. A std mutex guards it and is never held
//! across an await; blocked requests wait on a oneshot channel, so no thread blocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use futures::channel::oneshot;
use xlator_api::{Errno, FdId, Gfid, LkOwner};

use crate::entry::{EntryLocks, EntryWaiter};
use crate::range::{Held, Range, RangeLocks, Waiter};

type Tx = oneshot::Sender<Result<(), Errno>>;

/// Which range-lock space of an inode.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Space {
    /// Application POSIX locks (`lk`).
    Posix,
    /// Internal `inodelk` locks of one domain.
    Domain(String),
}

#[derive(Default)]
struct InodeLocks {
    posix: RangeLocks<Tx>,
    domains: HashMap<String, RangeLocks<Tx>>,
    entries: HashMap<String, EntryLocks<Tx>>,
}

impl InodeLocks {
    fn space(&mut self, s: &Space) -> &mut RangeLocks<Tx> {
        match s {
            Space::Posix => &mut self.posix,
            Space::Domain(d) => self.domains.entry(d.clone()).or_default(),
        }
    }
    fn is_empty(&self) -> bool {
        self.posix.is_empty()
            && self.domains.values().all(RangeLocks::is_empty)
            && self.entries.values().all(EntryLocks::is_empty)
    }
    fn tidy(&mut self) {
        self.domains.retain(|_, d| !d.is_empty());
        self.entries.retain(|_, e| !e.is_empty());
    }
}

#[derive(Default)]
pub struct LockTable {
    inodes: Mutex<HashMap<Gfid, InodeLocks>>,
    next_waiter: AtomicU64,
}

/// Grants waiters that no longer conflict and wakes them; a waiter that went away meanwhile
/// has its grant undone (which may let others in).
fn wake_range(rl: &mut RangeLocks<Tx>) {
    loop {
        let granted = rl.grant_waiters();
        if granted.is_empty() {
            return;
        }
        let mut undone = false;
        for w in granted {
            if w.tx.send(Ok(())).is_err() {
                rl.unlock(w.req.owner, w.req.range);
                undone = true;
            }
        }
        if !undone {
            return;
        }
    }
}

fn wake_entries(el: &mut EntryLocks<Tx>) {
    loop {
        let granted = el.grant_waiters();
        if granted.is_empty() {
            return;
        }
        let mut undone = false;
        for w in granted {
            if w.tx.send(Ok(())).is_err() {
                let _ = el.unlock(w.name.as_deref(), w.owner);
                undone = true;
            }
        }
        if !undone {
            return;
        }
    }
}

impl LockTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<Gfid, InodeLocks>> {
        self.inodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the inode's locks, dropping the inode's entry when it ends up empty.
    fn with<R>(&self, g: Gfid, f: impl FnOnce(&mut InodeLocks) -> R) -> R {
        let mut m = self.lock();
        let il = m.entry(g).or_default();
        let r = f(il);
        il.tidy();
        if il.is_empty() {
            m.remove(&g);
        }
        r
    }

    /// The first lock conflicting with `req` (F_GETLK).
    pub fn test(&self, g: Gfid, s: &Space, req: &Held) -> Option<Held> {
        self.with(g, |il| il.space(s).conflict(req))
    }

    /// Takes `req` now or fails with EAGAIN (F_SETLK).
    pub fn try_lock(&self, g: Gfid, s: &Space, req: Held) -> Result<(), Errno> {
        self.with(g, |il| il.space(s).try_lock(req).map_err(|_| Errno::EAGAIN))
    }

    /// Takes `req`, waiting for conflicting locks to go away (F_SETLKW). EDEADLK when waiting
    /// would close a cycle of owners on this inode.
    pub async fn lock_wait(&self, g: Gfid, s: &Space, req: Held) -> Result<(), Errno> {
        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let rx = self.with(g, |il| {
            let rl = il.space(s);
            if rl.conflict(&req).is_none() {
                let _ = rl.try_lock(req);
                return Ok(None);
            }
            if rl.would_deadlock(&req) {
                return Err(Errno::EDEADLK);
            }
            let (tx, rx) = oneshot::channel();
            rl.enqueue(Waiter { id, req, tx });
            Ok(Some(rx))
        })?;
        let Some(rx) = rx else { return Ok(()) };
        let mut guard = WaitGuard {
            table: self,
            g,
            s: s.clone(),
            id,
            undo: Undo::Range(req),
            done: false,
        };
        let r = rx.await.unwrap_or(Err(Errno::EINTR));
        guard.done = true;
        r
    }

    /// Unlocks `r` for `owner` and wakes waiters that can now go.
    pub fn unlock(&self, g: Gfid, s: &Space, owner: LkOwner, r: Range) {
        self.with(g, |il| {
            let rl = il.space(s);
            if rl.unlock(owner, r) {
                wake_range(rl);
            }
        })
    }

    /// Drops all POSIX locks of `owner` on `g` (close(2) semantics).
    pub fn release_owner(&self, g: Gfid, owner: LkOwner) {
        self.with(g, |il| {
            if il.posix.release_owner(owner) {
                wake_range(&mut il.posix);
            }
        })
    }

    /// Drops the POSIX locks taken through `fd` and fails its waiting requests with EBADF.
    pub fn release_fd(&self, g: Gfid, fd: FdId) {
        self.with(g, |il| {
            for w in il.posix.cancel_fd_waiters(fd) {
                let _ = w.tx.send(Err(Errno::EBADF));
            }
            if il.posix.release_fd(fd) {
                wake_range(&mut il.posix);
            }
        })
    }

    /// Takes an entry lock now (`Ok(false)`: conflicting holder).
    pub fn entry_try(&self, g: Gfid, domain: &str, name: Option<&str>, owner: LkOwner) -> bool {
        self.with(g, |il| {
            il.entries
                .entry(domain.to_owned())
                .or_default()
                .try_lock(name, owner)
        })
    }

    /// Takes an entry lock, waiting for conflicting holders.
    pub async fn entry_wait(
        &self,
        g: Gfid,
        domain: &str,
        name: Option<&str>,
        owner: LkOwner,
    ) -> Result<(), Errno> {
        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let rx = self.with(g, |il| {
            let el = il.entries.entry(domain.to_owned()).or_default();
            if el.try_lock(name, owner) {
                return None;
            }
            let (tx, rx) = oneshot::channel();
            el.enqueue(EntryWaiter {
                id,
                name: name.map(str::to_owned),
                owner,
                tx,
            });
            Some(rx)
        });
        let Some(rx) = rx else { return Ok(()) };
        let undo = Undo::Entry(name.map(str::to_owned), owner);
        let s = Space::Domain(domain.to_owned());
        let mut guard = WaitGuard {
            table: self,
            g,
            s,
            id,
            undo,
            done: false,
        };
        let r = rx.await.unwrap_or(Err(Errno::EINTR));
        guard.done = true;
        r
    }

    pub fn entry_unlock(
        &self,
        g: Gfid,
        domain: &str,
        name: Option<&str>,
        owner: LkOwner,
    ) -> Result<(), Errno> {
        self.with(g, |il| {
            let el = il.entries.entry(domain.to_owned()).or_default();
            el.unlock(name, owner)?;
            wake_entries(el);
            Ok(())
        })
    }

    /// (inodes with state, held locks, waiting requests).
    pub fn counts(&self) -> (usize, usize, usize) {
        let m = self.lock();
        let mut held = 0;
        let mut waiting = 0;
        for il in m.values() {
            held += il.posix.held().len();
            waiting += il.posix.waiting();
            for d in il.domains.values() {
                held += d.held().len();
                waiting += d.waiting();
            }
            for e in il.entries.values() {
                held += e.held_count();
                waiting += e.waiting();
            }
        }
        (m.len(), held, waiting)
    }
}

enum Undo {
    Range(Held),
    Entry(Option<String>, LkOwner),
}

/// Withdraws a waiting request whose caller went away (the fop future was dropped); if it was
/// granted but never delivered, gives the lock back.
struct WaitGuard<'a> {
    table: &'a LockTable,
    g: Gfid,
    s: Space,
    id: u64,
    undo: Undo,
    done: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (id, s) = (self.id, self.s.clone());
        match &self.undo {
            Undo::Range(req) => self.table.with(self.g, |il| {
                let rl = il.space(&s);
                if rl.remove_waiter(id).is_none() && rl.unlock(req.owner, req.range) {
                    wake_range(rl);
                }
            }),
            Undo::Entry(name, owner) => {
                let Space::Domain(d) = &s else { return };
                self.table.with(self.g, |il| {
                    let el = il.entries.entry(d.clone()).or_default();
                    if el.remove_waiter(id).is_none() && el.unlock(name.as_deref(), *owner).is_ok()
                    {
                        wake_entries(el);
                    }
                })
            }
        }
    }
}
