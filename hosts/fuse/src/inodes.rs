//! The node id <-> GFID table.
//!
//! The kernel names objects by 64-bit node ids; fops name them by 128-bit GFIDs. Every entry
//! reply (lookup, create, mkdir, link, readdirplus...) hands the kernel one reference on a node
//! id, and `forget` gives references back; a node is dropped when its count reaches zero.
//!
//! Invariants:
//! - one node id per GFID, so hard links share it (and share `st_ino`: fuser sends the node id
//!   as the inode number);
//! - the root is `FUSE_ROOT_ID` <-> [`Gfid::ROOT`] and is never dropped;
//! - a node id is derived from its GFID (the two halves XORed, as GlusterFS derives inode
//!   numbers), so `st_ino` is the same across remounts; on a collision with a live node of
//!   another GFID the next free id is taken;
//! - the count is raised *before* the reply is sent, so it is never below the kernel's.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use fuser::INodeNo;
use xlator_api::Gfid;

/// The kernel's fixed node id of the mount root.
pub const ROOT: INodeNo = INodeNo(1);

#[derive(Debug)]
struct Node {
    gfid: Gfid,
    /// References the kernel holds (lookup replies not yet forgotten).
    nlookup: u64,
}

#[derive(Debug, Default)]
struct Inner {
    nodes: HashMap<u64, Node>,
    by_gfid: HashMap<Gfid, u64>,
}

/// The table; shared by every request.
#[derive(Debug, Default)]
pub struct InodeTable {
    inner: RwLock<Inner>,
}

/// The preferred node id of `gfid`: stable across mounts, never 0, 1 only for the root.
pub fn derived_id(gfid: &Gfid) -> u64 {
    let (hi, lo) = gfid.0.split_at(8);
    let hi = u64::from_be_bytes(hi.try_into().unwrap_or([0; 8]));
    let lo = u64::from_be_bytes(lo.try_into().unwrap_or([0; 8]));
    let id = hi ^ lo;
    if *gfid == Gfid::ROOT {
        ROOT.0
    } else if id <= ROOT.0 {
        // 0 is "no node" and 1 the root: move out of the way.
        id + 2
    } else {
        id
    }
}

impl InodeTable {
    pub fn new() -> InodeTable {
        InodeTable::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // The table stays consistent even if a holder panicked: every update is one insert or
        // remove pair done without calling out.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The GFID of a node the kernel refers to; `None` for an unknown (already forgotten) id.
    pub fn gfid(&self, node: INodeNo) -> Option<Gfid> {
        if node == ROOT {
            return Some(Gfid::ROOT);
        }
        self.read().nodes.get(&node.0).map(|n| n.gfid)
    }

    /// Takes one kernel reference on `gfid`'s node (creating it) and returns its id. Call it
    /// right before sending an entry reply for `gfid`.
    pub fn remember(&self, gfid: Gfid) -> INodeNo {
        if gfid == Gfid::ROOT {
            return ROOT;
        }
        let mut inner = self.write();
        if let Some(&id) = inner.by_gfid.get(&gfid)
            && let Some(n) = inner.nodes.get_mut(&id)
        {
            n.nlookup += 1;
            return INodeNo(id);
        }
        let mut id = derived_id(&gfid);
        loop {
            match inner.nodes.entry(id) {
                Entry::Vacant(v) => {
                    v.insert(Node { gfid, nlookup: 1 });
                    break;
                }
                Entry::Occupied(_) => {
                    id = id.wrapping_add(1);
                    if id <= ROOT.0 {
                        id = ROOT.0 + 1;
                    }
                }
            }
        }
        inner.by_gfid.insert(gfid, id);
        INodeNo(id)
    }

    /// Gives back `nlookup` kernel references; the node goes when none are left.
    pub fn forget(&self, node: INodeNo, nlookup: u64) {
        if node == ROOT {
            return;
        }
        let mut inner = self.write();
        let gone = match inner.nodes.get_mut(&node.0) {
            Some(n) => {
                n.nlookup = n.nlookup.saturating_sub(nlookup);
                (n.nlookup == 0).then_some(n.gfid)
            }
            None => None,
        };
        if let Some(gfid) = gone {
            inner.nodes.remove(&node.0);
            inner.by_gfid.remove(&gfid);
        }
    }

    /// The node id to show for `gfid` without taking a reference (plain readdir's `d_ino`):
    /// the live node's id, else the derived one.
    pub fn peek_id(&self, gfid: &Gfid) -> INodeNo {
        if *gfid == Gfid::ROOT {
            return ROOT;
        }
        match self.read().by_gfid.get(gfid) {
            Some(&id) => INodeNo(id),
            None => INodeNo(derived_id(gfid)),
        }
    }

    /// Live nodes, the root excluded.
    pub fn len(&self) -> usize {
        self.read().nodes.len()
    }

    /// References held on `node` (0 when unknown).
    #[cfg(test)]
    pub fn nlookup(&self, node: INodeNo) -> u64 {
        self.read().nodes.get(&node.0).map_or(0, |n| n.nlookup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gfid(hi: u64, lo: u64) -> Gfid {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        Gfid(b)
    }

    #[test]
    fn root_is_fixed_and_never_forgotten() {
        let t = InodeTable::new();
        assert_eq!(t.gfid(ROOT), Some(Gfid::ROOT));
        assert_eq!(t.remember(Gfid::ROOT), ROOT);
        t.forget(ROOT, 100);
        assert_eq!(t.gfid(ROOT), Some(Gfid::ROOT));
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn one_id_per_gfid_and_counts() {
        let t = InodeTable::new();
        let g = Gfid::random();
        let a = t.remember(g);
        let b = t.remember(g); // a hard link found under another name
        assert_eq!(a, b);
        assert_eq!(a.0, derived_id(&g));
        assert_eq!(t.nlookup(a), 2);
        assert_eq!(t.gfid(a), Some(g));
        t.forget(a, 1);
        assert_eq!(t.gfid(a), Some(g));
        t.forget(a, 1);
        assert_eq!(t.gfid(a), None);
        assert_eq!(t.len(), 0);
        // Looked up again: the same (derived) id.
        assert_eq!(t.remember(g), a);
    }

    #[test]
    fn forget_more_than_held_and_unknown_ids_are_harmless() {
        let t = InodeTable::new();
        let a = t.remember(Gfid::random());
        t.forget(a, 5);
        assert_eq!(t.len(), 0);
        t.forget(INodeNo(12345), 1);
        assert_eq!(t.gfid(INodeNo(12345)), None);
    }

    #[test]
    fn collisions_take_the_next_free_id() {
        let t = InodeTable::new();
        let g1 = gfid(0x10, 0x20);
        let g2 = gfid(0x20, 0x10); // same XOR fold
        assert_eq!(derived_id(&g1), derived_id(&g2));
        let a = t.remember(g1);
        let b = t.remember(g2);
        assert_ne!(a, b);
        assert_eq!(b.0, a.0 + 1);
        assert_eq!(t.gfid(a), Some(g1));
        assert_eq!(t.gfid(b), Some(g2));
        assert_eq!(t.peek_id(&g2), b);
    }

    #[test]
    fn derived_ids_avoid_zero_and_root() {
        assert_eq!(derived_id(&Gfid::ROOT), 1);
        assert_eq!(derived_id(&gfid(7, 7)), 2);
        assert_eq!(derived_id(&gfid(6, 7)), 3);
        let t = InodeTable::new();
        let n = t.remember(gfid(0, 1 ^ 0x100));
        assert!(n.0 > 1);
    }
}
