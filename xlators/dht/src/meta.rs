//! Attributes, xattrs and everything else addressed by GFID or fd: a file's fops go to the
//! one child that holds it; a directory's reads to child 0 (the first child up when it is
//! down), its changes to every child (all must be up), its attributes merged over the copies
//! (latest times: a create on child 2 changes only child 2's copy's mtime).
//!
//! This translator's own xattrs (`trusted.dht.*`) are hidden from reads and listings and
//! refused to writes from above (EPERM).

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Ctx, Errno, Fd, Gfid, Iatt, Opened, SetAttr, Statfs, Xattrs};

use crate::shared::{Home, OWN_PREFIX, Shared, all_ok, first_error, merge_dir_attrs};

impl Shared {
    /// The child that answers reads of `gfid`.
    pub async fn reader(&self, cx: &Ctx, gfid: Gfid) -> Result<usize, Errno> {
        Ok(match self.home(cx, gfid).await? {
            Home::File(c) => c,
            Home::Dir => self.dir_reader(),
        })
    }

    /// A change of `gfid`: its child, or every child of a directory (all up); the first
    /// child's reply.
    pub async fn change<R, F, Fut>(&self, cx: &Ctx, gfid: Gfid, op: F) -> Result<R, Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        match self.home(cx, gfid).await? {
            Home::File(_) => self.at_home(cx, gfid, op).await,
            Home::Dir => {
                self.require_all_up()?;
                let mut v = all_ok(self.fan(op).await)?;
                Ok(v.swap_remove(0))
            }
        }
    }

    pub async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        match self.home(cx, gfid).await? {
            Home::File(_) => {
                self.at_home(cx, gfid, |c| self.children[c].stat(cx, gfid))
                    .await
            }
            Home::Dir => self.dir_attrs(self.fan(|i| self.children[i].stat(cx, gfid)).await),
        }
    }

    /// A directory's attributes from its copies' replies (down or missing copies left out).
    pub fn dir_attrs(&self, replies: Vec<Result<Iatt, Errno>>) -> Result<Iatt, Errno> {
        let ok: Vec<Iatt> = replies
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        if let Some(Err(e)) = replies.first()
            && *e != Errno::ENOTCONN
        {
            return Err(*e);
        }
        merge_dir_attrs(&ok).ok_or_else(|| first_error(replies.into_iter().filter_map(Result::err)))
    }

    pub async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        match self.home(cx, gfid).await? {
            Home::File(_) => {
                self.at_home(cx, gfid, |c| self.children[c].setattr(cx, gfid, attr))
                    .await
            }
            Home::Dir => {
                self.require_all_up()?;
                let v = all_ok(self.fan(|i| self.children[i].setattr(cx, gfid, attr)).await)?;
                merge_dir_attrs(&v).ok_or(Errno::EIO)
            }
        }
    }

    pub async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let (c, o) = self
            .at_home(cx, fd.gfid, |c| async move {
                self.children[c].open(cx, fd).await.map(|o| (c, o))
            })
            .await?;
        self.opened(fd, false, (0..self.n()).map(|k| k == c).collect());
        Ok(o)
    }

    pub async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let c = match self.closed(fd) {
            Some(s) if s.held.get(s.child).copied().unwrap_or(false) => s.child,
            Some(_) => return Ok(()), // its child's connection went, and the fd with it
            None => self.reader(cx, fd.gfid).await?,
        };
        self.children[c].release(cx, fd).await
    }

    pub async fn statfs(&self, cx: &Ctx, gfid: Gfid) -> Result<Statfs, Errno> {
        let replies = self.fan(|i| self.children[i].statfs(cx, gfid)).await;
        let ok: Vec<Statfs> = replies
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        let Some(first) = ok.first().copied() else {
            return Err(first_error(replies.into_iter().filter_map(Result::err)));
        };
        Ok(sum_statfs(first, &ok))
    }

    pub async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        if let Some(r) = self.rebalance_xattr(cx, gfid, &name).await {
            return r;
        }
        if name.starts_with(OWN_PREFIX) {
            return Err(Errno::ENODATA);
        }
        self.at_home(cx, gfid, |c| {
            self.children[c].getxattr(cx, gfid, name.clone())
        })
        .await
    }

    pub async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        let v = self
            .at_home(cx, gfid, |c| self.children[c].listxattr(cx, gfid))
            .await?;
        Ok(v.into_iter()
            .filter(|n| !n.starts_with(OWN_PREFIX))
            .collect())
    }

    pub async fn getxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        names: RVec<RString>,
    ) -> Result<Xattrs, Errno> {
        let names: RVec<RString> = names
            .into_iter()
            .filter(|n| !n.starts_with(OWN_PREFIX))
            .collect();
        self.at_home(cx, gfid, |c| {
            self.children[c].getxattrs(cx, gfid, names.clone())
        })
        .await
    }

    pub async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        if name.starts_with(OWN_PREFIX) {
            return Err(Errno::ENODATA);
        }
        let c = self.fd_child(cx, fd).await?;
        self.children[c].fgetxattr(cx, fd, name).await
    }
}

/// The children's statfs answers summed, in the first child's fragment size.
pub fn sum_statfs(first: Statfs, all: &[Statfs]) -> Statfs {
    let fr = first.frsize.max(1);
    let bytes = |f: fn(&Statfs) -> u64| -> u64 {
        all.iter()
            .map(|s| u128::from(f(s)) * u128::from(s.frsize.max(1)))
            .sum::<u128>()
            .checked_div(u128::from(fr))
            .map_or(u64::MAX, |v| u64::try_from(v).unwrap_or(u64::MAX))
    };
    let count = |f: fn(&Statfs) -> u64| all.iter().map(f).fold(0u64, u64::saturating_add);
    Statfs {
        bsize: first.bsize,
        frsize: fr,
        blocks: bytes(|s| s.blocks),
        bfree: bytes(|s| s.bfree),
        bavail: bytes(|s| s.bavail),
        files: count(|s| s.files),
        ffree: count(|s| s.ffree),
        favail: count(|s| s.favail),
        namemax: all.iter().map(|s| s.namemax).min().unwrap_or(first.namemax),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statfs_sums_in_the_first_childs_fragment_size() {
        let a = Statfs {
            bsize: 4096,
            frsize: 4096,
            blocks: 100,
            bfree: 50,
            bavail: 40,
            files: 10,
            ffree: 5,
            favail: 5,
            namemax: 255,
        };
        let b = Statfs {
            frsize: 1024,
            blocks: 400,
            bfree: 200,
            bavail: 100,
            namemax: 200,
            ..a
        };
        let s = sum_statfs(a, &[a, b]);
        assert_eq!((s.blocks, s.bfree, s.bavail), (200, 100, 65));
        assert_eq!((s.files, s.ffree, s.namemax), (20, 10, 200));
    }
}
