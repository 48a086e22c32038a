//! Directory read-ahead across children.
//!
//! A listing reads the children one after another, and each child's listing ends with a page
//! that comes back empty: a small directory over N children cost 2N round trips, one after
//! another. So while one child's page is read, the pages the listing will need next from
//! the following children ([`WINDOW`] of them) are read at the same time: a child's first
//! page, then the page after it (usually the empty one that ends it), at most [`PER_CHILD`]
//! pages held per child. A small directory over 4 children is then listed in 2 round trips
//! of parallel requests.
//!
//! A held page is used only for exactly the request it answers: the same child and offset,
//! a size no larger than the caller's, the same caller identity and xattr request. Anything
//! else is read from the child as before, and the held pages of that child are dropped. A
//! listing from the start (a new one or a rewind) drops every held page of the fd, and so
//! does releasedir. Pages are held only for named directory fds (NFS lists through anonymous
//! fds, within one request). Entries added or removed while a listing runs may or may not
//! show in it, as POSIX allows; one already answered by the child before the listing reached
//! that child is such an entry.

use std::collections::{HashMap, VecDeque};

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{Ctx, DirEntry, FdId, XattrReq};

/// How many of the following children are read ahead.
pub const WINDOW: usize = 4;

/// Pages held per child and fd.
pub const PER_CHILD: usize = 2;

/// Who asked, and for what: a page is used only for a request with the same.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Asker {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    xattrs: Option<XattrReq>,
}

impl Asker {
    pub fn of(cx: &Ctx) -> Asker {
        Asker {
            uid: cx.uid(),
            gid: cx.gid(),
            groups: cx.groups().to_vec(),
            xattrs: cx.ext::<XattrReq>(),
        }
    }
}

/// A child's page, read at `from` with `size` for `asker`.
#[derive(Clone, Debug)]
pub(crate) struct Page {
    pub from: u64,
    pub size: u32,
    pub asker: Asker,
    pub entries: RVec<DirEntry>,
}

impl Page {
    /// Where the page after this one starts; `None` when this page ended the child's listing.
    pub fn next(&self) -> Option<u64> {
        self.entries.last().map(|e| e.next_offset)
    }
}

/// The held pages of every open directory fd, per child.
#[derive(Default)]
pub(crate) struct Held {
    fds: HashMap<FdId, Vec<VecDeque<Page>>>,
}

impl Held {
    /// The held page answering (`child`, `from`, `size`, `asker`), taken out (an empty one,
    /// the child's end, is kept); on a miss the child's held pages are dropped (the listing
    /// went elsewhere).
    pub fn take(
        &mut self,
        fd: FdId,
        child: usize,
        from: u64,
        size: u32,
        asker: &Asker,
    ) -> Option<Page> {
        let q = self.fds.get_mut(&fd)?.get_mut(child)?;
        match q.front() {
            // An empty page (the child's end) stays: the call after a listing's last entries
            // asks for it again.
            Some(p) if p.from == from && p.size <= size && p.asker == *asker => {
                if p.entries.is_empty() {
                    Some(p.clone())
                } else {
                    q.pop_front()
                }
            }
            Some(_) => {
                q.clear();
                None
            }
            None => None,
        }
    }

    /// Where the next page of `child` to read ahead starts: 0 when nothing is held, after the
    /// last held page unless it ended the listing or [`PER_CHILD`] are held.
    pub fn wanted(&self, fd: FdId, child: usize) -> Option<u64> {
        let Some(q) = self.fds.get(&fd).and_then(|v| v.get(child)) else {
            return Some(0);
        };
        match q.back() {
            None => Some(0),
            Some(_) if q.len() >= PER_CHILD => None,
            Some(p) => p.next(),
        }
    }

    /// Holds `page` of `child`, if it continues what is held (a page read ahead while another
    /// request changed the child's pages is dropped).
    pub fn put(&mut self, fd: FdId, n: usize, child: usize, page: Page) {
        let v = self
            .fds
            .entry(fd)
            .or_insert_with(|| (0..n).map(|_| VecDeque::new()).collect());
        let Some(q) = v.get_mut(child) else {
            return;
        };
        let follows = match q.back() {
            None => page.from == 0,
            Some(b) => q.len() < PER_CHILD && b.next() == Some(page.from),
        };
        if follows {
            q.push_back(page);
        }
    }

    /// Drops every page held for `fd`.
    pub fn drop_fd(&mut self, fd: FdId) {
        self.fds.remove(&fd);
    }

    /// Drops every page of `child` (its connection went: its fds are opened again).
    pub fn drop_child(&mut self, child: usize) {
        for v in self.fds.values_mut() {
            if let Some(q) = v.get_mut(child) {
                q.clear();
            }
        }
    }

    /// Pages held in all.
    pub fn len(&self) -> usize {
        self.fds.values().flatten().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{Gfid, Iatt};

    fn entry(name: &str, next: u64) -> DirEntry {
        DirEntry {
            name: name.into(),
            next_offset: next,
            attr: Iatt {
                gfid: Gfid::random(),
                ..Iatt::default()
            },
            xattrs: RVec::new(),
        }
    }

    fn page(from: u64, next: &[u64], asker: &Asker) -> Page {
        Page {
            from,
            size: 4096,
            asker: asker.clone(),
            entries: next.iter().map(|n| entry(&n.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn pages_follow_each_other_and_are_taken_only_for_their_request() {
        let me = Asker::of(&Ctx::root());
        let other = Asker::of(&Ctx::builder(1000, 1000).build());
        let fd = FdId(7);
        let mut h = Held::default();
        assert_eq!(h.wanted(fd, 1), Some(0));
        h.put(fd, 4, 1, page(5, &[9], &me)); // not the first page: refused
        assert_eq!(h.len(), 0);
        h.put(fd, 4, 1, page(0, &[3, 8], &me));
        assert_eq!(h.wanted(fd, 1), Some(8));
        h.put(fd, 4, 1, page(3, &[], &me)); // does not follow the held page
        assert_eq!(h.len(), 1);
        h.put(fd, 4, 1, page(8, &[], &me));
        assert_eq!(h.wanted(fd, 1), None, "two held");
        assert!(h.take(fd, 1, 0, 4096, &other).is_none(), "another caller");
        assert_eq!(h.len(), 0, "a miss drops the child's pages");
        h.put(fd, 4, 1, page(0, &[3, 8], &me));
        h.put(fd, 4, 1, page(8, &[], &me));
        assert!(
            h.take(fd, 1, 0, 1024, &me).is_none(),
            "read with a larger size"
        );
        h.put(fd, 4, 1, page(0, &[3, 8], &me));
        h.put(fd, 4, 1, page(8, &[], &me));
        let p = h.take(fd, 1, 0, 8192, &me).expect("first");
        assert_eq!(p.next(), Some(8));
        let p = h.take(fd, 1, 8, 4096, &me).expect("second");
        assert_eq!(p.next(), None);
        assert!(h.take(fd, 1, 8, 4096, &me).is_some(), "the end stays");
        assert_eq!(h.wanted(fd, 1), None, "nothing after the end");
    }

    #[test]
    fn an_ended_listing_wants_nothing_more_and_drops_clear() {
        let me = Asker::of(&Ctx::root());
        let mut h = Held::default();
        h.put(FdId(1), 3, 2, page(0, &[], &me));
        assert_eq!(h.wanted(FdId(1), 2), None, "an empty page ends the child");
        h.put(FdId(2), 3, 2, page(0, &[4], &me));
        h.drop_child(2);
        assert_eq!(h.len(), 0);
        h.put(FdId(2), 3, 0, page(0, &[4], &me));
        h.drop_fd(FdId(2));
        assert_eq!(h.len(), 0);
        h.put(FdId(2), 3, 9, page(0, &[4], &me)); // no such child
        assert_eq!(h.len(), 0);
    }
}
