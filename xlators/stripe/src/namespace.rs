//! Names: every object exists on every child with one GFID. Lookups ask every child (with the
//! geometry xattr, so a file's check and size come with the lookup itself); changes go to
//! every child at once and need every child up.
//!
//! Every change of a name holds the name's lock (an entrylk in [`NAME_LOCK_DOMAIN`] on child
//! 0, every client locking there), and a rename to another parent also the move lock first
//! ([`MOVE_LOCK_DOMAIN`], the root): the changes of one name reach every child in one order.
//! Without them, two clients renaming two files over one name at once left the name naming
//! one file on some children and the other on the rest (reads then mixed their stripes, or
//! failed), and two moving directories into each other kept `b/a` on some and `a/b` on
//! others. Two round trips more per change (lock and unlock on child 0).

use xlator_api::abi_stable::std_types::RString;
use xlator_api::{CreateXattrs, Ctx, Entry, Errno, Fd, FileType, Gfid, GfidReq, Loc, Removed};

use xlator_api::sdk::NameLocks;

use crate::geometry;
use crate::shared::{Shared, all_ok, child_fd, with_geometry_req};
use crate::units::Geometry;

/// What a new object is: a regular file gets its geometry xattr at create.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Other,
}

/// The entrylk domain of stripe's name locks.
pub const NAME_LOCK_DOMAIN: &str = "cluster/stripe.names";

/// The entrylk domain of stripe's move lock (the whole root, for renames to another parent).
pub const MOVE_LOCK_DOMAIN: &str = "cluster/stripe.move";

impl Shared {
    /// `op` with the names `locs` locked on child 0 (and the move lock first when they are in
    /// more than one directory), waiting for them.
    async fn with_names<R>(
        &self,
        locs: &[&Loc],
        op: impl Future<Output = Result<R, Errno>>,
    ) -> Result<R, Errno> {
        let child = &self.children[0];
        let moving = locs.iter().any(|l| l.parent != locs[0].parent);
        let root = Loc::new(Gfid::ROOT, "");
        let moves = if moving {
            Some(NameLocks::lock(child, MOVE_LOCK_DOMAIN, &[&root], true).await?)
        } else {
            None
        };
        let names = NameLocks::lock(child, NAME_LOCK_DOMAIN, locs, true).await;
        let r = match names {
            Ok(names) => {
                let r = op.await;
                names.unlock(child).await;
                r
            }
            Err(e) => Err(e),
        };
        if let Some(moves) = moves {
            moves.unlock(child).await;
        }
        r
    }

    /// The GFID a new object gets on every child: the caller's, or a fresh one.
    fn new_gfid(cx: &Ctx) -> Gfid {
        cx.ext::<GfidReq>()
            .map(|g| g.0)
            .filter(|g| !g.is_null())
            .unwrap_or_else(Gfid::random)
    }

    /// The context for making the object on child `i`: its GFID, the geometry xattr for a
    /// file (with the caller's own create xattrs) and the geometry asked back.
    fn make_cx(&self, cx: &Ctx, gfid: Gfid, geo: Option<Geometry>, i: usize) -> Ctx {
        let mut b = with_geometry_req(cx).to_builder().ext(&GfidReq(gfid));
        if let Some(geo) = geo {
            let mut xs = cx.ext::<CreateXattrs>().unwrap_or_default();
            xs.0.retain(|(k, _)| k != geometry::GEOMETRY_XATTR);
            xs.0.push((geometry::GEOMETRY_XATTR.into(), geometry::encode(geo, i)));
            b = b.ext(&xs);
        }
        b.build()
    }

    pub async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let gcx = with_geometry_req(cx);
        let replies = self
            .fan(|i| self.children[i].lookup(&gcx, loc.clone()))
            .await;
        let what = format!("lookup {}/{}", loc.parent, loc.name);
        self.merge_entries(cx, what, replies).map(|(e, _)| e)
    }

    /// Makes an object on every child with `op(i, cx)`; when some child fails, the copies
    /// made are removed again (best effort) and the error is the answer.
    pub async fn make<F, Fut>(
        &self,
        cx: &Ctx,
        loc: &Loc,
        kind: Kind,
        op: F,
    ) -> Result<(Entry, Option<Geometry>), Errno>
    where
        F: Fn(usize, Ctx) -> Fut,
        Fut: Future<Output = Result<Entry, Errno>>,
    {
        self.require_all_up()?;
        self.with_names(&[loc], async {
            let gfid = Self::new_gfid(cx);
            let geo = (kind == Kind::File).then(|| self.new_geometry());
            // Child 0 first: its brick makes the name atomically, so of two clients making one
            // name at once exactly one gets past it, and the other fails there (EEXIST) having
            // touched nothing. In parallel, each could win on some children and both would
            // undo what they made, losing the name for both.
            let first = op(0, self.make_cx(cx, gfid, geo, 0)).await;
            if let Err(e) = first {
                return Err(e);
            }
            let rest = futures::future::join_all(
                (1..self.n()).map(|i| op(i, self.make_cx(cx, gfid, geo, i))),
            )
            .await;
            let replies: Vec<Result<Entry, Errno>> = std::iter::once(first).chain(rest).collect();
            if replies.iter().any(Result::is_err) {
                self.undo_make(cx, loc, gfid, &replies).await;
            }
            let what = format!("create {}/{}", loc.parent, loc.name);
            self.merge_entries(cx, what, replies)
        })
        .await
    }

    /// Removes the copies this make created (those with its GFID) after another child failed.
    async fn undo_make(&self, cx: &Ctx, loc: &Loc, gfid: Gfid, replies: &[Result<Entry, Errno>]) {
        let made = |i: usize| matches!(&replies[i], Ok(e) if e.attr.gfid == gfid);
        let _ = self
            .fan(|i| async move {
                if !made(i) {
                    return Ok(());
                }
                let dir = replies[i]
                    .as_ref()
                    .is_ok_and(|e| e.attr.kind == FileType::Directory);
                if dir {
                    self.children[i].rmdir(cx, loc.clone()).await.map(drop)
                } else {
                    self.children[i].unlink(cx, loc.clone()).await.map(drop)
                }
            })
            .await;
    }

    pub async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let cfd = child_fd(fd);
        let (entry, geo) = match self
            .make(cx, &loc, Kind::File, |i, cx| {
                let loc = loc.clone();
                async move { self.children[i].create(&cx, loc, cfd, mode, umask).await }
            })
            .await
        {
            Ok(r) => r,
            Err(e) => {
                // Children that opened the fd (an existing file opened without O_EXCL whose
                // copies were then refused) let it go.
                let _ = self.fan(|i| self.children[i].release(cx, cfd)).await;
                return Err(e);
            }
        };
        self.opened(fd, geo, false, vec![true; self.n()]);
        Ok(entry)
    }

    pub async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let kind = match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => Kind::File,
            _ => Kind::Other,
        };
        self.make(cx, &loc, kind, |i, cx| {
            let loc = loc.clone();
            async move { self.children[i].mknod(&cx, loc, mode, rdev, umask).await }
        })
        .await
        .map(|(e, _)| e)
    }

    pub async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        self.make(cx, &loc, Kind::Other, |i, cx| {
            let loc = loc.clone();
            async move { self.children[i].mkdir(&cx, loc, mode, umask).await }
        })
        .await
        .map(|(e, _)| e)
    }

    pub async fn symlink(&self, cx: &Ctx, loc: Loc, target: RString) -> Result<Entry, Errno> {
        self.make(cx, &loc, Kind::Other, |i, cx| {
            let (loc, target) = (loc.clone(), target.clone());
            async move { self.children[i].symlink(&cx, loc, target).await }
        })
        .await
        .map(|(e, _)| e)
    }

    pub async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        self.require_all_up()?;
        let gcx = with_geometry_req(cx);
        let replies = self
            .with_names(&[&new], async {
                Ok(self
                    .fan(|i| self.children[i].link(&gcx, gfid, new.clone()))
                    .await)
            })
            .await?;
        let what = format!("link {}/{}", new.parent, new.name);
        self.merge_entries(cx, what, replies).map(|(e, _)| e)
    }

    pub async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.require_all_up()?;
        self.with_names(&[&loc], async {
            first_of(self.fan(|i| self.children[i].unlink(cx, loc.clone())).await)
        })
        .await
    }

    pub async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.require_all_up()?;
        self.with_names(&[&loc], async {
            first_of(self.fan(|i| self.children[i].rmdir(cx, loc.clone())).await)
        })
        .await
    }

    pub async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        self.require_all_up()?;
        self.with_names(&[&old, &new], async {
            first_of(
                self.fan(|i| self.children[i].rename(cx, old.clone(), new.clone(), flags))
                    .await,
            )
        })
        .await
    }
}

/// Child 0's reply when every child succeeded, else the first error.
pub(crate) fn first_of<R>(replies: Vec<Result<R, Errno>>) -> Result<R, Errno> {
    all_ok(replies)?.into_iter().next().ok_or(Errno::EIO)
}
