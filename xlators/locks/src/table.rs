//! The lock table: per GFID, the POSIX (`lk`) range locks, the `inodelk` range locks per
//! domain and the `entrylk` name locks per domain. A std mutex guards it and is never held
//! across an await; blocked requests wait on a oneshot channel ([`crate::wait`]), so no thread
//! blocks. Every send to a waiter happens under the mutex, so once a waiter is out of its
//! queue its outcome is already in its channel (what makes withdrawing a wait cancel-safe).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use futures::channel::oneshot;
use xlator_api::{Errno, FdId, Gfid};

use crate::deadlock::posix_would_deadlock;
use crate::entry::{EntryLocks, EntryWaiter};
use crate::owner::{Client, Owner};
use crate::range::{Held, Range, RangeLocks, Waiter};
use crate::wait::{Undo, Wait};

pub(crate) type Tx = oneshot::Sender<Result<(), Errno>>;

/// Which range-lock space of an inode.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Space {
    /// Application POSIX locks (`lk`).
    Posix,
    /// Internal `inodelk` locks of one domain.
    Domain(String),
}

#[derive(Default)]
pub(crate) struct InodeLocks {
    pub(crate) posix: RangeLocks<Tx>,
    pub(crate) domains: HashMap<String, RangeLocks<Tx>>,
    pub(crate) entries: HashMap<String, EntryLocks<Tx>>,
}

impl InodeLocks {
    pub(crate) fn space(&mut self, s: &Space) -> &mut RangeLocks<Tx> {
        match s {
            Space::Posix => &mut self.posix,
            Space::Domain(d) => self.domains.entry(d.clone()).or_default(),
        }
    }
    pub(crate) fn entries(&mut self, domain: &str) -> &mut EntryLocks<Tx> {
        self.entries.entry(domain.to_owned()).or_default()
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
pub(crate) fn wake_range(rl: &mut RangeLocks<Tx>) {
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

pub(crate) fn wake_entries(el: &mut EntryLocks<Tx>) {
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
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<Gfid, InodeLocks>> {
        self.inodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the inode's locks, dropping the inode's entry when it ends up empty.
    pub(crate) fn with<R>(&self, g: Gfid, f: impl FnOnce(&mut InodeLocks) -> R) -> R {
        let mut m = self.lock();
        let il = m.entry(g).or_default();
        let r = f(il);
        il.tidy();
        if il.is_empty() {
            m.remove(&g);
        }
        r
    }

    /// Runs `f` on every inode's locks; then drops inode `g`'s entry when it ends up empty.
    fn with_all<R>(&self, g: Gfid, f: impl FnOnce(&mut HashMap<Gfid, InodeLocks>) -> R) -> R {
        let mut m = self.lock();
        let r = f(&mut m);
        if let Some(il) = m.get_mut(&g) {
            il.tidy();
            if il.is_empty() {
                m.remove(&g);
            }
        }
        r
    }

    /// The locks held in space `s` of `g`.
    #[cfg(test)]
    pub(crate) fn held(&self, g: Gfid, s: &Space) -> Vec<Held> {
        self.with(g, |il| il.space(s).held().to_vec())
    }

    /// The first lock conflicting with `req` (F_GETLK).
    pub fn test(&self, g: Gfid, s: &Space, req: &Held) -> Option<Held> {
        self.with(g, |il| il.space(s).conflict(req))
    }

    /// Takes `req` now or fails with EAGAIN (F_SETLK). A downgrade (write to read) lets in
    /// the readers it no longer blocks.
    pub fn try_lock(&self, g: Gfid, s: &Space, req: Held) -> Result<(), Errno> {
        self.with(g, |il| {
            let rl = il.space(s);
            if rl.try_lock(req).map_err(|_| Errno::EAGAIN)? {
                wake_range(rl);
            }
            Ok(())
        })
    }

    /// Whether `g` has a granted POSIX lock or a waiting `lk` request (a migration barrier
    /// is refused then: application locks would not follow the data).
    pub fn posix_busy(&self, g: Gfid) -> bool {
        self.with(g, |il| !il.posix.is_empty())
    }

    /// [`try_lock`](Self::try_lock), but EBUSY first when [`posix_busy`](Self::posix_busy),
    /// both under one hold of the mutex.
    pub fn try_lock_unless_posix(&self, g: Gfid, s: &Space, req: Held) -> Result<(), Errno> {
        self.with(g, |il| {
            if !il.posix.is_empty() {
                return Err(Errno::EBUSY);
            }
            let rl = il.space(s);
            if rl.try_lock(req).map_err(|_| Errno::EAGAIN)? {
                wake_range(rl);
            }
            Ok(())
        })
    }

    /// Whether `owner` holds a write lock covering all of `r` in space `s` of `g`.
    pub fn holds_write(&self, g: Gfid, s: &Space, owner: Owner, r: Range) -> bool {
        self.with(g, |il| {
            il.space(s).held().iter().any(|h| {
                h.owner == owner
                    && h.kind == crate::range::Kind::Write
                    && h.range.start <= r.start
                    && h.range.end >= r.end
            })
        })
    }

    /// Takes `req`, waiting for conflicting locks to go away (F_SETLKW). EDEADLK when waiting
    /// would close a cycle of waiting owners: POSIX locks on any file ([`crate::deadlock`]),
    /// internal locks on this inode and domain. Dropping the future withdraws the request
    /// (or gives the lock back if it was granted meanwhile).
    pub async fn lock_wait(&self, g: Gfid, s: &Space, req: Held) -> Result<(), Errno> {
        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let rx = self.with_all(g, |inodes| {
            let rl = inodes.entry(g).or_default().space(s);
            if let Ok(downgrade) = rl.try_lock(req) {
                if downgrade {
                    wake_range(rl);
                }
                return Ok(None);
            }
            let dead = match s {
                Space::Posix => posix_would_deadlock(inodes, g, &req),
                // Internal locks: cycles on this inode and domain only.
                Space::Domain(_) => inodes.entry(g).or_default().space(s).would_deadlock(&req),
            };
            if dead {
                return Err(Errno::EDEADLK);
            }
            let (tx, rx) = oneshot::channel();
            inodes
                .entry(g)
                .or_default()
                .space(s)
                .enqueue(Waiter { id, req, tx });
            Ok(Some(rx))
        })?;
        match rx {
            None => Ok(()),
            Some(rx) => Wait::new(self, g, id, Undo::Range(s.clone(), req), rx).await,
        }
    }

    /// Unlocks `r` for `owner` and wakes waiters that can now go.
    pub fn unlock(&self, g: Gfid, s: &Space, owner: Owner, r: Range) {
        self.with(g, |il| {
            let rl = il.space(s);
            if rl.unlock(owner, r) {
                wake_range(rl);
            }
        })
    }

    /// Drops all POSIX locks of `owner` on `g` (close(2) semantics).
    pub fn release_owner(&self, g: Gfid, owner: Owner) {
        self.with(g, |il| {
            if il.posix.release_owner(owner) {
                wake_range(&mut il.posix);
            }
        })
    }

    /// Drops the POSIX locks taken through `client`'s `fd` and fails its waiting requests
    /// with EBADF.
    pub fn release_fd(&self, g: Gfid, client: Client, fd: FdId) {
        self.with(g, |il| {
            for w in il.posix.cancel_fd_waiters(client, fd) {
                let _ = w.tx.send(Err(Errno::EBADF));
            }
            if il.posix.release_fd(client, fd) {
                wake_range(&mut il.posix);
            }
        })
    }

    /// Drops every lock of `client` on every inode and fails its waiting requests with
    /// ENOTCONN, then grants what waited behind them. Returns (inodes touched, requests
    /// failed).
    pub fn forget_client(&self, client: Client) -> (usize, usize) {
        let mut m = self.lock();
        let (mut touched, mut failed) = (0, 0);
        for il in m.values_mut() {
            let mut any = false;
            // Waiters first, so that releasing the client's locks grants none of its own.
            let spaces = std::iter::once(&mut il.posix).chain(il.domains.values_mut());
            for rl in spaces {
                for w in rl.cancel_client_waiters(client) {
                    let _ = w.tx.send(Err(Errno::ENOTCONN));
                    failed += 1;
                    any = true;
                }
                if rl.release_client(client) {
                    wake_range(rl);
                    any = true;
                }
            }
            for el in il.entries.values_mut() {
                for w in el.cancel_client_waiters(client) {
                    let _ = w.tx.send(Err(Errno::ENOTCONN));
                    failed += 1;
                    any = true;
                }
                if el.release_client(client) {
                    wake_entries(el);
                    any = true;
                }
            }
            if any {
                touched += 1;
                il.tidy();
            }
        }
        m.retain(|_, il| !il.is_empty());
        (touched, failed)
    }

    /// The owner of an entry lock standing in the way of `(name, owner)`, if any.
    pub fn entry_holder(
        &self,
        g: Gfid,
        domain: &str,
        name: Option<&str>,
        owner: Owner,
    ) -> Option<Owner> {
        self.with(g, |il| il.entries(domain).conflicting(name, owner))
    }

    /// Takes an entry lock now (`false`: conflicting holder).
    pub fn entry_try(&self, g: Gfid, domain: &str, name: Option<&str>, owner: Owner) -> bool {
        self.with(g, |il| il.entries(domain).try_lock(name, owner))
    }

    /// Takes an entry lock, waiting for conflicting holders. Dropping the future withdraws
    /// the request (or gives the lock back if it was granted meanwhile).
    pub async fn entry_wait(
        &self,
        g: Gfid,
        domain: &str,
        name: Option<&str>,
        owner: Owner,
    ) -> Result<(), Errno> {
        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let name = name.map(str::to_owned);
        let rx = self.with(g, |il| {
            let el = il.entries(domain);
            if el.try_lock(name.as_deref(), owner) {
                return None;
            }
            let (tx, rx) = oneshot::channel();
            el.enqueue(EntryWaiter {
                id,
                name: name.clone(),
                owner,
                tx,
            });
            Some(rx)
        });
        let Some(rx) = rx else { return Ok(()) };
        let undo = Undo::Entry {
            domain: domain.to_owned(),
            name,
            owner,
        };
        Wait::new(self, g, id, undo, rx).await
    }

    pub fn entry_unlock(
        &self,
        g: Gfid,
        domain: &str,
        name: Option<&str>,
        owner: Owner,
    ) -> Result<(), Errno> {
        self.with(g, |il| {
            let el = il.entries(domain);
            el.unlock(name, owner)?;
            wake_entries(el);
            Ok(())
        })
    }
}
