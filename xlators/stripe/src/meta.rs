//! Attributes and xattrs: attributes come from every child (a file's size needs them all),
//! changes go to every child (a size becomes each child's share), xattrs are read from
//! child 0. The geometry xattr is this translator's: hidden from listings and reads, and
//! refused to setters.

use xlator_api::abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{Buf, Ctx, Errno, Fd, Gfid, Iatt, SetAttr, Statfs, Xattr, Xattrs};

use crate::geometry::GEOMETRY_XATTR;
use crate::namespace::first_of;
use crate::shared::{Shared, all_ok, child_fd};
use crate::units::Geometry;

/// `attr` for child `i`: a size becomes the child's share of it.
fn for_child(attr: SetAttr, geo: Option<Geometry>, i: usize) -> SetAttr {
    match (attr.size, geo) {
        (ROption::RSome(size), Some(geo)) => SetAttr {
            size: ROption::RSome(geo.child_start(i, size)),
            ..attr
        },
        _ => attr,
    }
}

/// EPERM for a change of the geometry xattr from above.
pub(crate) fn refuse_geometry(name: &str) -> Result<(), Errno> {
    if name == GEOMETRY_XATTR {
        Err(Errno::EPERM)
    } else {
        Ok(())
    }
}

impl Shared {
    pub async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        let replies = self.fan(|i| self.children[i].stat(cx, gfid)).await;
        self.merge_attrs(cx, "stat", None, replies).await
    }

    pub async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        let cfd = child_fd(fd);
        let replies = self
            .fan(|i| async move {
                self.ensure(i, cx, fd).await?;
                self.children[i].fstat(cx, cfd).await
            })
            .await;
        self.merge_attrs(cx, "fstat", None, replies).await
    }

    pub async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        self.require_all_up()?;
        let geo = match attr.size {
            ROption::RSome(_) => Some(self.geometry_of(cx, gfid).await?),
            ROption::RNone => None,
        };
        let replies = self
            .fan(|i| self.children[i].setattr(cx, gfid, for_child(attr, geo, i)))
            .await;
        self.merge_attrs(cx, "setattr", geo, replies).await
    }

    pub async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        self.require_all_up()?;
        let geo = match attr.size {
            ROption::RSome(_) => Some(self.fd_geometry(cx, fd).await?),
            ROption::RNone => None,
        };
        let cfd = child_fd(fd);
        let replies = self
            .fan(|i| async move {
                self.ensure(i, cx, fd).await?;
                self.children[i]
                    .fsetattr(cx, cfd, for_child(attr, geo, i))
                    .await
            })
            .await;
        self.merge_attrs(cx, "fsetattr", geo, replies).await
    }

    /// Sum of the children's space (in child 0's fragment size); files as the fewest free.
    pub async fn statfs(&self, cx: &Ctx, gfid: Gfid) -> Result<Statfs, Errno> {
        let all = all_ok(self.fan(|i| self.children[i].statfs(cx, gfid)).await)?;
        let first = all[0];
        let frsize = first.frsize.max(1);
        let bytes = |f: fn(&Statfs) -> u64| -> u64 {
            let total: u128 = all
                .iter()
                .map(|s| u128::from(f(s)) * u128::from(s.frsize.max(1)))
                .sum();
            u64::try_from(total / u128::from(frsize)).unwrap_or(u64::MAX)
        };
        Ok(Statfs {
            blocks: bytes(|s| s.blocks),
            bfree: bytes(|s| s.bfree),
            bavail: bytes(|s| s.bavail),
            ffree: all.iter().map(|s| s.ffree).min().unwrap_or(0),
            favail: all.iter().map(|s| s.favail).min().unwrap_or(0),
            ..first
        })
    }

    /// An xattr change on every child.
    pub async fn set_everywhere<F, Fut>(&self, op: F) -> Result<(), Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<(), Errno>>,
    {
        self.require_all_up()?;
        first_of(self.fan(op).await)
    }

    pub async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        if name.as_str() == GEOMETRY_XATTR {
            return Err(Errno::ENODATA);
        }
        self.children[0].getxattr(cx, gfid, name).await
    }

    pub async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        if name.as_str() == GEOMETRY_XATTR {
            return Err(Errno::ENODATA);
        }
        self.ensure(0, cx, fd).await?;
        self.children[0].fgetxattr(cx, child_fd(fd), name).await
    }

    pub async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        let mut names = self.children[0].listxattr(cx, gfid).await?;
        names.retain(|n| n.as_str() != GEOMETRY_XATTR);
        Ok(names)
    }

    pub async fn getxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        names: RVec<RString>,
    ) -> Result<Xattrs, Errno> {
        let names: RVec<RString> = names
            .into_iter()
            .filter(|n| n.as_str() != GEOMETRY_XATTR)
            .collect();
        self.children[0].getxattrs(cx, gfid, names).await
    }
}

/// Refuses a set of xattrs that includes the geometry one.
pub(crate) fn refuse_geometry_in(xattrs: &[Xattr]) -> Result<(), Errno> {
    xattrs.iter().try_for_each(|x| refuse_geometry(&x.name))
}
