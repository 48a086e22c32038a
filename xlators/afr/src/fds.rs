//! Open fds: which children hold each one. An fd opened while a child was down (or lost when
//! the child's connection went) is opened there again on its first use (`reopen_fd`).

use std::collections::HashMap;
use std::sync::Mutex;

use xlator_api::{Ctx, Errno, Fd, FdId, Subvol, reopen_fd};

use crate::shared::lock;

#[derive(Clone, Debug)]
struct FdCtx {
    gfid: xlator_api::Gfid,
    dir: bool,
    held: Vec<bool>,
    /// The child a directory listing is read from (its offsets are that child's cookies).
    readdir_child: Option<usize>,
    /// Opened read-only on its read child alone; the others open it on first use.
    lazy: bool,
}

#[derive(Default)]
pub(crate) struct Fds {
    map: Mutex<HashMap<FdId, FdCtx>>,
}

impl Fds {
    /// Records `fd` as opened on the children marked in `held`.
    pub fn opened(&self, fd: Fd, dir: bool, held: Vec<bool>) {
        self.insert(fd, dir, held, false);
    }

    /// Records a read-only `fd` opened on child `i` alone: the other children open it on its
    /// first use there ([`Fds::ensure`]), and its locks go to every child
    /// ([`Fds::lock_targets`]).
    pub fn opened_lazily(&self, fd: Fd, i: usize, n: usize) {
        let mut held = vec![false; n];
        held[i] = true;
        self.insert(fd, false, held, true);
    }

    fn insert(&self, fd: Fd, dir: bool, held: Vec<bool>, lazy: bool) {
        if fd.is_anonymous() {
            return;
        }
        lock(&self.map).insert(
            fd.id,
            FdCtx {
                gfid: fd.gfid,
                dir,
                held,
                readdir_child: None,
                lazy,
            },
        );
    }

    /// Forgets `fd`; returns the children that held it (all, for an fd never seen).
    pub fn closed(&self, fd: Fd, n: usize) -> Vec<bool> {
        lock(&self.map)
            .remove(&fd.id)
            .map_or_else(|| vec![true; n], |c| c.held)
    }

    /// Child `i` lost its fds (its connection went down).
    pub fn child_lost(&self, i: usize) {
        for c in lock(&self.map).values_mut() {
            if let Some(h) = c.held.get_mut(i) {
                *h = false;
            }
        }
    }

    /// Makes sure child `i` holds `fd`, opening it again there if needed. Anonymous fds and
    /// fds not opened through this translator pass as they are.
    pub async fn ensure(&self, i: usize, child: &Subvol, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        if fd.is_anonymous() {
            return Ok(());
        }
        let dir = match lock(&self.map).get(&fd.id) {
            None => return Ok(()),
            Some(c) if c.held.get(i).copied().unwrap_or(false) => return Ok(()),
            Some(c) => c.dir,
        };
        reopen_fd(child, cx, fd, dir).await?;
        if let Some(c) = lock(&self.map).get_mut(&fd.id)
            && let Some(h) = c.held.get_mut(i)
        {
            *h = true;
        }
        Ok(())
    }

    /// The child a listing of `fd` sticks to, choosing `pick` on the first call.
    pub fn readdir_child(&self, fd: Fd, pick: impl FnOnce() -> Option<usize>) -> Option<usize> {
        let mut m = lock(&self.map);
        match m.get_mut(&fd.id) {
            Some(c) => {
                if c.readdir_child.is_none() {
                    c.readdir_child = pick();
                }
                c.readdir_child
            }
            None => pick(),
        }
    }

    /// The child a listing sticks to failed: the next call (from offset 0) picks again.
    pub fn reset_readdir(&self, fd: Fd) {
        if let Some(c) = lock(&self.map).get_mut(&fd.id) {
            c.readdir_child = None;
        }
    }

    /// Whether a file (not a directory) `gfid` is open through this translator.
    pub fn file_open(&self, gfid: xlator_api::Gfid) -> bool {
        lock(&self.map).values().any(|c| !c.dir && c.gfid == gfid)
    }

    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }
}

impl Fds {
    /// The children holding `fd` (`None`: not opened through this translator; every child).
    pub fn holders(&self, fd: Fd) -> Option<Vec<bool>> {
        lock(&self.map).get(&fd.id).map(|c| c.held.clone())
    }

    /// The children a lock through `fd` goes to: those holding it, or every child up for an
    /// fd opened lazily (a read-only fd's locks are replicated like any other's).
    pub fn lock_targets(&self, fd: Fd) -> Option<Vec<bool>> {
        lock(&self.map)
            .get(&fd.id)
            .filter(|c| !c.lazy)
            .map(|c| c.held.clone())
    }
}
