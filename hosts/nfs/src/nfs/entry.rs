//! Procedures on names in a directory: LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR,
//! RENAME, LINK. Replies carry the directory's post-op attributes (no pre-op attributes:
//! fetching them would cost a `stat` per call and could not be atomic with the change).

use nfs3_types::nfs3::{
    CREATE3args, CREATE3res, CREATE3resfail, CREATE3resok, LINK3args, LINK3res, LINK3resfail,
    LINK3resok, LOOKUP3args, LOOKUP3res, LOOKUP3resfail, LOOKUP3resok, MKDIR3args, MKDIR3res,
    MKDIR3resfail, MKDIR3resok, MKNOD3args, MKNOD3res, MKNOD3resfail, MKNOD3resok, Nfs3Result,
    REMOVE3args, REMOVE3res, REMOVE3resfail, REMOVE3resok, RENAME3args, RENAME3res, RENAME3resfail,
    RENAME3resok, RMDIR3args, RMDIR3res, RMDIR3resfail, RMDIR3resok, SYMLINK3args, SYMLINK3res,
    SYMLINK3resfail, SYMLINK3resok, createhow3, createverf3, mknoddata3, nfsstat3, post_op_attr,
    post_op_fh3, sattr3, wcc_data,
};
use xlator_api::abi_stable::std_types::{ROption, RString};
use xlator_api::{Ctx, Entry, Errno, Fd, FileType, Gfid, Iatt, Loc, SetAttr, TimeSet, Timespec};
use xlfs_core::graph::Graph;

use super::attr::{self, fattr, post_op, status, wcc};
use super::{Nfs, name, new_name};

/// Default modes when a creating procedure does not give one.
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;
/// Mode of a file made by an EXCLUSIVE create, until the client's SETATTR sets its own.
const EXCLUSIVE_MODE: u32 = 0o600;

/// Where an EXCLUSIVE create keeps the client's verifier (as Linux knfsd does): the first
/// word in mtime's seconds, the second in atime's, 31 bits each.
fn verifier_times(v: &createverf3) -> (Timespec, Timespec) {
    let w = |i: usize| {
        i64::from(u32::from_be_bytes([v.0[i], v.0[i + 1], v.0[i + 2], v.0[i + 3]]) & 0x7fff_ffff)
    };
    (
        Timespec { sec: w(0), nsec: 0 },
        Timespec { sec: w(4), nsec: 0 },
    )
}

/// How CREATE treats an existing name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CreateMode {
    Unchecked,
    Guarded,
    Exclusive(createverf3),
}

impl Nfs {
    /// The directory's post-op attributes as `wcc_data`.
    async fn dir_wcc(&self, g: &Graph, cx: &Ctx, dir: Gfid) -> wcc_data {
        wcc(None, self.attrs(g, cx, dir).await.as_ref(), self.fsid)
    }

    /// [`dir_wcc`](Self::dir_wcc), from the attributes the fop's reply carried when it has
    /// them (`postparent`, exactly the state after the fop), else by asking.
    async fn dir_wcc_from(
        &self,
        g: &Graph,
        cx: &Ctx,
        dir: Gfid,
        post: Option<&ROption<Iatt>>,
    ) -> wcc_data {
        match post.and_then(|p| p.as_ref().into_option()) {
            Some(a) if a.gfid == dir => wcc(None, Some(a), self.fsid),
            _ => self.dir_wcc(g, cx, dir).await,
        }
    }

    /// Applies what creation could not (owner, size, times), best effort: the object exists
    /// either way, and the client sees the attributes it ended up with.
    async fn apply_rest(&self, g: &Graph, cx: &Ctx, a: Iatt, set: SetAttr) -> Iatt {
        if attr::is_empty(&set) {
            return a;
        }
        match g.top().setattr(cx, a.gfid, set).await {
            Ok(after) => after,
            Err(e) => {
                tracing::debug!(gfid = %a.gfid, error = ?e, "attributes after create not applied");
                a
            }
        }
    }

    pub(super) async fn lookup(&self, cx: &Ctx, args: LOOKUP3args<'static>) -> LOOKUP3res {
        let fail = |s, d: Option<&Iatt>| {
            Nfs3Result::Err((
                s,
                LOOKUP3resfail {
                    dir_attributes: post_op(d, self.fsid),
                },
            ))
        };
        let dir = match self.gfid(&args.what.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, None),
        };
        let n = match name(&args.what.name) {
            Ok(n) => n,
            Err(s) => return fail(s, None),
        };
        let g = self.graph();
        let (found, d) = tokio::join!(
            g.top().lookup(cx, Loc::new(dir, n)),
            self.attrs(&g, cx, dir)
        );
        match found {
            Ok(e) if !e.attr.gfid.is_null() => Nfs3Result::Ok(LOOKUP3resok {
                object: self.fh(e.attr.gfid),
                obj_attributes: post_op_attr::Some(fattr(&e.attr, self.fsid)),
                dir_attributes: post_op(d.as_ref(), self.fsid),
            }),
            Ok(_) => fail(nfsstat3::NFS3ERR_SERVERFAULT, d.as_ref()),
            // The directory itself is gone: its handle is stale.
            Err(Errno::ENOENT) if d.is_none() => fail(nfsstat3::NFS3ERR_STALE, None),
            Err(e) => fail(status(e), d.as_ref()),
        }
    }

    pub(super) async fn create(&self, cx: &Ctx, args: CREATE3args<'static>) -> CREATE3res {
        let fail = |s, dir_wcc| Nfs3Result::Err((s, CREATE3resfail { dir_wcc }));
        let dir = match self.gfid(&args.where_.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let n = match new_name(&args.where_.name) {
            Ok(n) => n,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let (mode, how, sattr) = match args.how {
            createhow3::UNCHECKED(s) => (attr::mode_or(&s, FILE_MODE), CreateMode::Unchecked, s),
            createhow3::GUARDED(s) => (attr::mode_or(&s, FILE_MODE), CreateMode::Guarded, s),
            createhow3::EXCLUSIVE(v) => {
                (EXCLUSIVE_MODE, CreateMode::Exclusive(v), sattr3::default())
            }
        };
        let g = self.graph();
        let loc = Loc::new(dir, n);
        let r = match self.create_new(&g, cx, &loc, mode).await {
            Ok(a) => match how {
                CreateMode::Exclusive(v) => {
                    let (mtime, atime) = verifier_times(&v);
                    let set = SetAttr {
                        atime: TimeSet::At(atime),
                        mtime: TimeSet::At(mtime),
                        ..SetAttr::default()
                    };
                    g.top().setattr(cx, a.gfid, set).await
                }
                _ => {
                    let set = attr::without_mode(attr::set_attr(&sattr));
                    Ok(self.apply_rest(&g, cx, a, set).await)
                }
            },
            Err(Errno::EEXIST) if how != CreateMode::Guarded => {
                self.create_existing(&g, cx, &loc, how, &sattr).await
            }
            Err(e) => Err(e),
        };
        let dir_wcc = self.dir_wcc(&g, cx, dir).await;
        match r {
            Ok(a) => Nfs3Result::Ok(CREATE3resok {
                obj: post_op_fh3::Some(self.fh(a.gfid)),
                obj_attributes: post_op_attr::Some(fattr(&a, self.fsid)),
                dir_wcc,
            }),
            Err(e) => fail(status(e), dir_wcc),
        }
    }

    /// Creates a new regular file (EEXIST if the name is taken). `create` opens what it
    /// makes, so the host gives it a real fd and releases it at once.
    async fn create_new(&self, g: &Graph, cx: &Ctx, loc: &Loc, mode: u32) -> Result<Iatt, Errno> {
        let fd = Fd {
            id: self.fd_id(),
            gfid: Gfid::NULL,
            flags: libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
        };
        let Entry { attr: a, .. } = g.top().create(cx, loc.clone(), fd, mode, 0).await?;
        let opened = Fd { gfid: a.gfid, ..fd };
        if let Err(e) = g.top().release(cx, opened).await {
            tracing::warn!(gfid = %a.gfid, error = ?e, "release after create failed");
        }
        if a.gfid.is_null() {
            return Err(Errno::EIO);
        }
        Ok(a)
    }

    /// CREATE of a name that exists: UNCHECKED opens a regular file (truncating it if asked
    /// to set size 0, as knfsd); EXCLUSIVE succeeds only for the retransmission of the call
    /// that made it (same verifier, still empty).
    async fn create_existing(
        &self,
        g: &Graph,
        cx: &Ctx,
        loc: &Loc,
        how: CreateMode,
        sattr: &sattr3,
    ) -> Result<Iatt, Errno> {
        let a = g.top().lookup(cx, loc.clone()).await?.attr;
        if a.kind != FileType::Regular {
            return Err(Errno::EEXIST);
        }
        match how {
            CreateMode::Exclusive(v) => {
                let (mtime, atime) = verifier_times(&v);
                if a.mtime.sec == mtime.sec && a.atime.sec == atime.sec && a.size == 0 {
                    Ok(a)
                } else {
                    Err(Errno::EEXIST)
                }
            }
            _ => {
                let set = attr::set_attr(sattr);
                if set.size.into_option() == Some(0) && a.size != 0 {
                    let trunc = SetAttr {
                        size: set.size,
                        ..SetAttr::default()
                    };
                    return g.top().setattr(cx, a.gfid, trunc).await;
                }
                Ok(a)
            }
        }
    }

    pub(super) async fn mkdir(&self, cx: &Ctx, args: MKDIR3args<'static>) -> MKDIR3res {
        let fail = |s, dir_wcc| Nfs3Result::Err((s, MKDIR3resfail { dir_wcc }));
        let dir = match self.gfid(&args.where_.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let n = match new_name(&args.where_.name) {
            Ok(n) => n,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let g = self.graph();
        let mode = attr::mode_or(&args.attributes, DIR_MODE);
        let r = g.top().mkdir(cx, Loc::new(dir, n), mode, 0).await;
        let post = r.as_ref().ok().map(|e| e.postparent);
        let r = match r {
            Ok(e) => {
                let set = attr::without_mode(attr::set_attr(&args.attributes));
                Ok(self.apply_rest(&g, cx, e.attr, set).await)
            }
            Err(e) => Err(e),
        };
        let dir_wcc = self.dir_wcc_from(&g, cx, dir, post.as_ref()).await;
        match r {
            Ok(a) => Nfs3Result::Ok(MKDIR3resok {
                obj: post_op_fh3::Some(self.fh(a.gfid)),
                obj_attributes: post_op_attr::Some(fattr(&a, self.fsid)),
                dir_wcc,
            }),
            Err(e) => fail(status(e), dir_wcc),
        }
    }

    pub(super) async fn symlink(&self, cx: &Ctx, args: SYMLINK3args<'static>) -> SYMLINK3res {
        let fail = |s, dir_wcc| Nfs3Result::Err((s, SYMLINK3resfail { dir_wcc }));
        let dir = match self.gfid(&args.where_.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let n = match new_name(&args.where_.name) {
            Ok(n) => n,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let target = match String::from_utf8(args.symlink.symlink_data.0.into_owned()) {
            Ok(t) if !t.is_empty() && !t.contains('\0') => t,
            _ => return fail(nfsstat3::NFS3ERR_INVAL, wcc_data::default()),
        };
        let g = self.graph();
        let r = g
            .top()
            .symlink(cx, Loc::new(dir, n), RString::from(target))
            .await;
        let post = r.as_ref().ok().map(|e| e.postparent);
        let r = match r {
            Ok(e) => {
                // A symlink's mode means nothing on Linux.
                let set = attr::without_mode(attr::set_attr(&args.symlink.symlink_attributes));
                Ok(self.apply_rest(&g, cx, e.attr, set).await)
            }
            Err(e) => Err(e),
        };
        let dir_wcc = self.dir_wcc_from(&g, cx, dir, post.as_ref()).await;
        match r {
            Ok(a) => Nfs3Result::Ok(SYMLINK3resok {
                obj: post_op_fh3::Some(self.fh(a.gfid)),
                obj_attributes: post_op_attr::Some(fattr(&a, self.fsid)),
                dir_wcc,
            }),
            Err(e) => fail(status(e), dir_wcc),
        }
    }

    pub(super) async fn mknod(&self, cx: &Ctx, args: MKNOD3args<'static>) -> MKNOD3res {
        let fail = |s, dir_wcc| Nfs3Result::Err((s, MKNOD3resfail { dir_wcc }));
        let dir = match self.gfid(&args.where_.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let n = match new_name(&args.where_.name) {
            Ok(n) => n,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let (kind, sattr, rdev) = match args.what {
            mknoddata3::NF3CHR(d) => (
                FileType::CharDevice,
                d.dev_attributes,
                attr::makedev(d.spec.specdata1, d.spec.specdata2),
            ),
            mknoddata3::NF3BLK(d) => (
                FileType::BlockDevice,
                d.dev_attributes,
                attr::makedev(d.spec.specdata1, d.spec.specdata2),
            ),
            mknoddata3::NF3SOCK(s) => (FileType::Socket, s, 0),
            mknoddata3::NF3FIFO(s) => (FileType::Fifo, s, 0),
            mknoddata3::default => return fail(nfsstat3::NFS3ERR_BADTYPE, wcc_data::default()),
        };
        let g = self.graph();
        let mode = kind.mode_bits() | attr::mode_or(&sattr, FILE_MODE);
        let r = g.top().mknod(cx, Loc::new(dir, n), mode, rdev, 0).await;
        let post = r.as_ref().ok().map(|e| e.postparent);
        let r = match r {
            Ok(e) => {
                let set = attr::without_mode(attr::set_attr(&sattr));
                Ok(self.apply_rest(&g, cx, e.attr, set).await)
            }
            Err(e) => Err(e),
        };
        let dir_wcc = self.dir_wcc_from(&g, cx, dir, post.as_ref()).await;
        match r {
            Ok(a) => Nfs3Result::Ok(MKNOD3resok {
                obj: post_op_fh3::Some(self.fh(a.gfid)),
                obj_attributes: post_op_attr::Some(fattr(&a, self.fsid)),
                dir_wcc,
            }),
            Err(e) => fail(status(e), dir_wcc),
        }
    }

    pub(super) async fn remove(&self, cx: &Ctx, args: REMOVE3args<'static>) -> REMOVE3res {
        let fail = |s, dir_wcc| Nfs3Result::Err((s, REMOVE3resfail { dir_wcc }));
        let dir = match self.gfid(&args.object.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let n = match name(&args.object.name) {
            Ok(n) => n,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let g = self.graph();
        let r = g.top().unlink(cx, Loc::new(dir, n)).await;
        let post = r.as_ref().ok().map(|e| e.postparent);
        let dir_wcc = self.dir_wcc_from(&g, cx, dir, post.as_ref()).await;
        match r {
            Ok(_) => Nfs3Result::Ok(REMOVE3resok { dir_wcc }),
            Err(e) => fail(status(e), dir_wcc),
        }
    }

    pub(super) async fn rmdir(&self, cx: &Ctx, args: RMDIR3args<'static>) -> RMDIR3res {
        let fail = |s, dir_wcc| Nfs3Result::Err((s, RMDIR3resfail { dir_wcc }));
        let dir = match self.gfid(&args.object.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let n = match name(&args.object.name) {
            Ok(n) if n == "." => return fail(nfsstat3::NFS3ERR_INVAL, wcc_data::default()),
            Ok(n) if n == ".." => return fail(nfsstat3::NFS3ERR_NOTEMPTY, wcc_data::default()),
            Ok(n) => n,
            Err(s) => return fail(s, wcc_data::default()),
        };
        let g = self.graph();
        let r = g.top().rmdir(cx, Loc::new(dir, n)).await;
        let post = r.as_ref().ok().map(|e| e.postparent);
        let dir_wcc = self.dir_wcc_from(&g, cx, dir, post.as_ref()).await;
        match r {
            Ok(_) => Nfs3Result::Ok(RMDIR3resok { dir_wcc }),
            Err(e) => fail(status(e), dir_wcc),
        }
    }

    pub(super) async fn rename(&self, cx: &Ctx, args: RENAME3args<'static, 'static>) -> RENAME3res {
        let fail = |s, fromdir_wcc, todir_wcc| {
            Nfs3Result::Err((
                s,
                RENAME3resfail {
                    fromdir_wcc,
                    todir_wcc,
                },
            ))
        };
        let none = wcc_data::default;
        let (from, to) = match (self.gfid(&args.from.dir), self.gfid(&args.to.dir)) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(s), _) | (_, Err(s)) => return fail(s, none(), none()),
        };
        let (n1, n2) = match (name(&args.from.name), new_name(&args.to.name)) {
            (Ok(a), Ok(b)) if a != "." && a != ".." => (a, b),
            (Ok(_), Ok(_)) => return fail(nfsstat3::NFS3ERR_INVAL, none(), none()),
            (Err(s), _) | (_, Err(s)) => return fail(s, none(), none()),
        };
        let g = self.graph();
        let r = g
            .top()
            .rename(cx, Loc::new(from, n1), Loc::new(to, n2), 0)
            .await;
        let (fw, tw) = tokio::join!(self.dir_wcc(&g, cx, from), self.dir_wcc(&g, cx, to));
        match r {
            Ok(()) => Nfs3Result::Ok(RENAME3resok {
                fromdir_wcc: fw,
                todir_wcc: tw,
            }),
            // POSIX says EEXIST or ENOTEMPTY for a non-empty target directory; RFC 1813 wants
            // EXIST for every incompatible target.
            Err(Errno::ENOTEMPTY) => fail(nfsstat3::NFS3ERR_EXIST, fw, tw),
            Err(e) => fail(status(e), fw, tw),
        }
    }

    pub(super) async fn link(&self, cx: &Ctx, args: LINK3args<'static>) -> LINK3res {
        let fail = |s, a: Option<&Iatt>, linkdir_wcc| {
            Nfs3Result::Err((
                s,
                LINK3resfail {
                    file_attributes: post_op(a, self.fsid),
                    linkdir_wcc,
                },
            ))
        };
        let (file, dir) = match (self.gfid(&args.file), self.gfid(&args.link.dir)) {
            (Ok(f), Ok(d)) => (f, d),
            (Err(s), _) | (_, Err(s)) => return fail(s, None, wcc_data::default()),
        };
        let n = match new_name(&args.link.name) {
            Ok(n) => n,
            Err(s) => return fail(s, None, wcc_data::default()),
        };
        let g = self.graph();
        let r = g.top().link(cx, file, Loc::new(dir, n)).await;
        let post = r.as_ref().ok().map(|e| e.postparent);
        let linkdir_wcc = self.dir_wcc_from(&g, cx, dir, post.as_ref()).await;
        match r {
            Ok(e) => Nfs3Result::Ok(LINK3resok {
                file_attributes: post_op(Some(&e.attr), self.fsid),
                linkdir_wcc,
            }),
            Err(e) => {
                let a = self.attrs(&g, cx, file).await;
                // The source object is gone: its handle is stale.
                let s = if e == Errno::ENOENT && a.is_none() {
                    nfsstat3::NFS3ERR_STALE
                } else {
                    status(e)
                };
                fail(s, a.as_ref(), linkdir_wcc)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_verifier_in_times() {
        let v = createverf3([0x80, 0, 0, 5, 0, 0, 1, 0]);
        let (m, a) = verifier_times(&v);
        assert_eq!((m.sec, a.sec), (5, 256));
        assert_eq!((m.nsec, a.nsec), (0, 0));
    }
}
