//! A byte-accounted LRU with priority levels: eviction takes the least recently used entry of
//! the lowest priority first (GlusterFS's `ioc_prune` order: lowest-priority LRU first, page
//! by page, until the cache fits again). Pure bookkeeping: no I/O, no data.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Where an entry sits in the eviction order: lower sorts first (evicted first).
type Rank = (u32, u64);

/// The LRU. Every operation is O(log n).
#[derive(Debug)]
pub struct Lru<K> {
    /// Eviction order: (priority, last-use tick) -> key.
    order: BTreeMap<Rank, K>,
    /// Key -> (rank, bytes).
    index: HashMap<K, (Rank, u64)>,
    tick: u64,
    used: u64,
}

impl<K> Default for Lru<K> {
    fn default() -> Self {
        Lru {
            order: BTreeMap::new(),
            index: HashMap::new(),
            tick: 0,
            used: 0,
        }
    }
}

impl<K: Hash + Eq + Clone> Lru<K> {
    pub fn new() -> Lru<K> {
        Lru::default()
    }

    /// Bytes accounted to all entries.
    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Adds (or replaces) `key` as the most recently used entry of `priority`.
    pub fn insert(&mut self, key: K, priority: u32, bytes: u64) {
        self.remove(&key);
        let rank = (priority, self.next_tick());
        self.order.insert(rank, key.clone());
        self.index.insert(key, (rank, bytes));
        self.used += bytes;
    }

    /// Marks `key` used now, at `priority` (the file's priority may have changed since).
    pub fn touch(&mut self, key: &K, priority: u32) {
        let tick = self.next_tick();
        if let Some((rank, _)) = self.index.get_mut(key)
            && let Some(k) = self.order.remove(rank)
        {
            *rank = (priority, tick);
            self.order.insert(*rank, k);
        }
    }

    /// Removes `key`; its bytes, if it was present.
    pub fn remove(&mut self, key: &K) -> Option<u64> {
        let (rank, bytes) = self.index.remove(key)?;
        self.order.remove(&rank);
        self.used -= bytes;
        Some(bytes)
    }

    /// Removes and returns the entry to evict next: lowest priority, least recently used.
    pub fn pop_victim(&mut self) -> Option<(K, u64)> {
        let (_, key) = self.order.pop_first()?;
        let (_, bytes) = self.index.remove(&key)?;
        self.used -= bytes;
        Some((key, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_first() {
        let mut l = Lru::new();
        l.insert("a", 1, 10);
        l.insert("b", 1, 20);
        l.insert("c", 1, 30);
        assert_eq!(l.used(), 60);
        l.touch(&"a", 1);
        assert_eq!(l.pop_victim(), Some(("b", 20)));
        assert_eq!(l.pop_victim(), Some(("c", 30)));
        assert_eq!(l.pop_victim(), Some(("a", 10)));
        assert_eq!(l.pop_victim(), None);
        assert_eq!(l.used(), 0);
    }

    #[test]
    fn lower_priority_goes_first_even_if_recent() {
        let mut l = Lru::new();
        l.insert("keep", 2, 1);
        l.insert("cheap", 1, 1);
        l.touch(&"cheap", 1);
        assert_eq!(l.pop_victim().map(|v| v.0), Some("cheap"));
        // Touching with a new priority moves the entry to that level.
        l.insert("x", 3, 1);
        l.touch(&"x", 1);
        assert_eq!(l.pop_victim().map(|v| v.0), Some("x"));
    }

    #[test]
    fn replace_and_remove_keep_accounting_exact() {
        let mut l = Lru::new();
        l.insert(1u32, 1, 100);
        l.insert(1u32, 1, 40);
        assert_eq!((l.len(), l.used()), (1, 40));
        assert_eq!(l.remove(&1), Some(40));
        assert_eq!(l.remove(&1), None);
        assert!(l.is_empty());
        assert_eq!(l.used(), 0);
        l.touch(&7, 1);
        assert!(l.is_empty(), "touching a missing key adds nothing");
    }
}
