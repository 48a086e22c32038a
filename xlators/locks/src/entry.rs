//! Entry (name) lock engine (pure): exclusive locks on names of one directory in one domain;
//! the empty name locks the whole directory and conflicts with every name. An owner (client,
//! lock owner) never conflicts with itself and may take the same lock again (counted).

use std::collections::VecDeque;

use xlator_api::Errno;

use crate::owner::{Client, Owner};

/// A held entry lock.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HeldName {
    /// `None`: the whole directory.
    pub name: Option<String>,
    pub owner: Owner,
    /// How many times `owner` took it (unlocked as many times).
    pub count: u32,
}

/// A waiting entry lock request.
pub struct EntryWaiter<T> {
    pub id: u64,
    pub name: Option<String>,
    pub owner: Owner,
    pub tx: T,
}

pub struct EntryLocks<T> {
    held: Vec<HeldName>,
    waiters: VecDeque<EntryWaiter<T>>,
}

impl<T> Default for EntryLocks<T> {
    fn default() -> Self {
        EntryLocks {
            held: Vec::new(),
            waiters: VecDeque::new(),
        }
    }
}

impl<T> EntryLocks<T> {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.waiters.is_empty()
    }

    pub fn held(&self) -> &[HeldName] {
        &self.held
    }

    /// The waiting requests (name, owner), in arrival order.
    pub fn waiters(&self) -> impl Iterator<Item = (Option<&str>, Owner)> {
        self.waiters.iter().map(|w| (w.name.as_deref(), w.owner))
    }

    pub fn conflicts(&self, name: Option<&str>, owner: Owner) -> bool {
        self.conflicting(name, owner).is_some()
    }

    /// The owner of a held lock conflicting with `(name, owner)`, if any.
    pub fn conflicting(&self, name: Option<&str>, owner: Owner) -> Option<Owner> {
        self.held
            .iter()
            .find(|h| {
                h.owner != owner
                    && (h.name.is_none() || name.is_none() || h.name.as_deref() == name)
            })
            .map(|h| h.owner)
    }

    /// Takes the lock unless another owner holds a conflicting one.
    pub fn try_lock(&mut self, name: Option<&str>, owner: Owner) -> bool {
        if self.conflicts(name, owner) {
            return false;
        }
        match self
            .held
            .iter_mut()
            .find(|h| h.owner == owner && h.name.as_deref() == name)
        {
            Some(h) => h.count += 1,
            None => self.held.push(HeldName {
                name: name.map(str::to_owned),
                owner,
                count: 1,
            }),
        }
        true
    }

    /// Releases one hold of `(name, owner)`; EINVAL when not held.
    pub fn unlock(&mut self, name: Option<&str>, owner: Owner) -> Result<(), Errno> {
        let i = self
            .held
            .iter()
            .position(|h| h.owner == owner && h.name.as_deref() == name)
            .ok_or(Errno::EINVAL)?;
        self.held[i].count -= 1;
        if self.held[i].count == 0 {
            self.held.swap_remove(i);
        }
        Ok(())
    }

    /// Drops every lock of `client` (all its counts); true when anything was released.
    pub fn release_client(&mut self, client: Client) -> bool {
        let n = self.held.len();
        self.held.retain(|h| h.owner.client != client);
        n != self.held.len()
    }

    /// Drops the waiting requests of `client`, returning them (to be failed).
    pub fn cancel_client_waiters(&mut self, client: Client) -> Vec<EntryWaiter<T>> {
        let (gone, keep): (VecDeque<_>, VecDeque<_>) = self
            .waiters
            .drain(..)
            .partition(|w| w.owner.client == client);
        self.waiters = keep;
        gone.into_iter().collect()
    }

    pub fn enqueue(&mut self, w: EntryWaiter<T>) {
        self.waiters.push_back(w);
    }

    pub fn remove_waiter(&mut self, id: u64) -> Option<EntryWaiter<T>> {
        let pos = self.waiters.iter().position(|w| w.id == id)?;
        self.waiters.remove(pos)
    }

    /// Grants, in arrival order, every waiter that no longer conflicts.
    pub fn grant_waiters(&mut self) -> Vec<EntryWaiter<T>> {
        let mut granted = Vec::new();
        let mut still = VecDeque::new();
        while let Some(w) = self.waiters.pop_front() {
            if self.try_lock(w.name.as_deref(), w.owner) {
                granted.push(w);
            } else {
                still.push_back(w);
            }
        }
        self.waiters = still;
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{ClientId, LkOwner};

    fn o(client: Option<u64>, lk: u64) -> Owner {
        Owner {
            client: client.map(ClientId),
            lk: LkOwner(lk),
        }
    }

    #[test]
    fn names_dirs_and_owners() {
        let mut t = EntryLocks::<()>::default();
        let (a, b) = (o(None, 1), o(None, 2));
        assert!(t.try_lock(Some("x"), a));
        assert!(t.try_lock(Some("y"), b));
        assert!(!t.try_lock(Some("x"), b));
        assert!(
            !t.try_lock(None, b),
            "whole-dir lock conflicts with any name"
        );
        assert!(t.try_lock(Some("x"), a), "re-entrant for the same owner");
        t.unlock(Some("x"), a).expect("unlock");
        assert!(!t.try_lock(Some("x"), b), "still held once");
        t.unlock(Some("x"), a).expect("unlock");
        assert!(t.try_lock(Some("x"), b));
        assert_eq!(t.unlock(Some("x"), a), Err(Errno::EINVAL));
        t.unlock(Some("x"), b).expect("unlock");
        t.unlock(Some("y"), b).expect("unlock");
        assert!(t.try_lock(None, a));
        assert!(!t.try_lock(Some("z"), b));
    }

    #[test]
    fn waiters() {
        let mut t = EntryLocks::<u8>::default();
        let (a, b) = (o(None, 1), o(None, 2));
        assert!(t.try_lock(None, a));
        t.enqueue(EntryWaiter {
            id: 7,
            name: Some("n".into()),
            owner: b,
            tx: 0,
        });
        assert!(t.grant_waiters().is_empty());
        t.unlock(None, a).expect("unlock");
        let g = t.grant_waiters();
        assert_eq!(g.len(), 1);
        assert!(t.conflicts(Some("n"), a));
    }

    #[test]
    fn clients_with_the_same_owner_conflict() {
        let mut t = EntryLocks::<u8>::default();
        let (c1, c2) = (o(Some(1), 0), o(Some(2), 0));
        assert!(t.try_lock(Some("x"), c1));
        assert!(t.try_lock(Some("x"), c1), "same client and owner: counted");
        assert!(!t.try_lock(Some("x"), c2));
        t.enqueue(EntryWaiter {
            id: 1,
            name: Some("x".into()),
            owner: c2,
            tx: 0,
        });
        assert!(t.release_client(Some(ClientId(1))), "both counts go");
        assert_eq!(t.grant_waiters().len(), 1);
        assert!(t.cancel_client_waiters(Some(ClientId(2))).is_empty());
        assert!(t.release_client(Some(ClientId(2))));
        assert!(t.is_empty());
    }
}
