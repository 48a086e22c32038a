//! Entry (name) lock engine (pure): exclusive locks on names of one directory in one domain;
//! the empty name locks the whole directory and conflicts with every name. An owner never
//! conflicts with itself and may take the same lock again (counted).

use std::collections::VecDeque;

use xlator_api::{Errno, LkOwner};

#[derive(Clone, PartialEq, Eq, Debug)]
struct HeldName {
    /// `None`: the whole directory.
    name: Option<String>,
    owner: LkOwner,
    count: u32,
}

/// A waiting entry lock request.
pub struct EntryWaiter<T> {
    pub id: u64,
    pub name: Option<String>,
    pub owner: LkOwner,
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

    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    pub fn conflicts(&self, name: Option<&str>, owner: LkOwner) -> bool {
        self.held.iter().any(|h| {
            h.owner != owner && (h.name.is_none() || name.is_none() || h.name.as_deref() == name)
        })
    }

    /// Takes the lock unless another owner holds a conflicting one.
    pub fn try_lock(&mut self, name: Option<&str>, owner: LkOwner) -> bool {
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
    pub fn unlock(&mut self, name: Option<&str>, owner: LkOwner) -> Result<(), Errno> {
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

    #[test]
    fn names_dirs_and_owners() {
        let mut t = EntryLocks::<()>::default();
        let (a, b) = (LkOwner(1), LkOwner(2));
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
        let (a, b) = (LkOwner(1), LkOwner(2));
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
}
