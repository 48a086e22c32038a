//! Procedures on the object a handle names: GETATTR, SETATTR, ACCESS, READLINK, and the file
//! system information ones (FSSTAT, FSINFO, PATHCONF).

use nfs3_types::nfs3::{
    ACCESS3_DELETE, ACCESS3_EXECUTE, ACCESS3_EXTEND, ACCESS3_LOOKUP, ACCESS3_MODIFY, ACCESS3_READ,
    ACCESS3args, ACCESS3res, ACCESS3resfail, ACCESS3resok, FSF3_CANSETTIME, FSF3_HOMOGENEOUS,
    FSF3_LINK, FSF3_SYMLINK, FSINFO3args, FSINFO3res, FSINFO3resfail, FSINFO3resok, FSSTAT3args,
    FSSTAT3res, FSSTAT3resfail, FSSTAT3resok, GETATTR3args, GETATTR3res, GETATTR3resok, Nfs3Result,
    PATHCONF3args, PATHCONF3res, PATHCONF3resfail, PATHCONF3resok, READLINK3args, READLINK3res,
    READLINK3resfail, READLINK3resok, SETATTR3args, SETATTR3res, SETATTR3resfail, SETATTR3resok,
    nfspath3, nfsstat3, nfstime3, sattrguard3,
};
use nfs3_types::xdr_codec::{Opaque, Void};
use xlator_api::{Ctx, FileType};

use super::attr::{self, fattr, post_op, stale, wcc};
use super::{DIR_PREF, MAX_IO, NAME_MAX, Nfs};

/// Hard links per object offered in PATHCONF (ext4's limit; bricks on other file systems
/// answer EMLINK at their own limit).
const LINK_MAX: u32 = 65_000;

impl Nfs {
    pub(super) async fn getattr(&self, cx: &Ctx, args: GETATTR3args) -> GETATTR3res {
        let gfid = match self.gfid(&args.object) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, Void)),
        };
        match self.graph().top().stat(cx, gfid).await {
            Ok(a) if super::attr::nameless(&a) => Nfs3Result::Err((nfsstat3::NFS3ERR_STALE, Void)),
            Ok(a) => Nfs3Result::Ok(GETATTR3resok {
                obj_attributes: fattr(&a, self.fsid),
            }),
            Err(e) => Nfs3Result::Err((stale(e), Void)),
        }
    }

    /// SETATTR with its guard: the change happens only if the object's ctime is still the one
    /// the client saw (checked just before; the check and the change are not atomic, as in
    /// every user-space NFS server).
    pub(super) async fn setattr(&self, cx: &Ctx, args: SETATTR3args) -> SETATTR3res {
        let fail = |s, before, after| {
            Nfs3Result::Err((
                s,
                SETATTR3resfail {
                    obj_wcc: wcc(before, after, self.fsid),
                },
            ))
        };
        let gfid = match self.gfid(&args.object) {
            Ok(g) => g,
            Err(s) => return fail(s, None, None),
        };
        let g = self.graph();
        let before = match g.top().stat(cx, gfid).await {
            Ok(a) => a,
            Err(e) => return fail(stale(e), None, None),
        };
        if let sattrguard3::Some(t) = args.guard {
            let ctime = attr::nfstime(before.ctime);
            if ctime != t {
                return fail(nfsstat3::NFS3ERR_NOT_SYNC, Some(&before), Some(&before));
            }
        }
        let set = attr::set_attr(&args.new_attributes);
        if set.size.is_some() && before.kind != FileType::Regular {
            let s = if before.is_dir() {
                nfsstat3::NFS3ERR_ISDIR
            } else {
                nfsstat3::NFS3ERR_INVAL
            };
            return fail(s, Some(&before), Some(&before));
        }
        if attr::is_empty(&set) {
            return Nfs3Result::Ok(SETATTR3resok {
                obj_wcc: wcc(Some(&before), Some(&before), self.fsid),
            });
        }
        match g.top().setattr(cx, gfid, set).await {
            Ok(after) => Nfs3Result::Ok(SETATTR3resok {
                obj_wcc: wcc(Some(&before), Some(&after), self.fsid),
            }),
            Err(e) => {
                let after = self.attrs(&g, cx, gfid).await;
                fail(stale(e), Some(&before), after.as_ref())
            }
        }
    }

    /// ACCESS: each right the client asks about is checked with the graph's `access` fop
    /// under the caller's credentials (so ACLs and read-only bricks count), concurrently.
    pub(super) async fn access(&self, cx: &Ctx, args: ACCESS3args) -> ACCESS3res {
        let gfid = match self.gfid(&args.object) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, ACCESS3resfail::default())),
        };
        let g = self.graph();
        let a = match g.top().stat(cx, gfid).await {
            Ok(a) => a,
            Err(e) => return Nfs3Result::Err((stale(e), ACCESS3resfail::default())),
        };
        let want = args.access;
        let (read, write, exec) = if a.is_dir() {
            (
                ACCESS3_READ,
                ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE,
                ACCESS3_LOOKUP,
            )
        } else {
            (
                ACCESS3_READ,
                ACCESS3_MODIFY | ACCESS3_EXTEND,
                ACCESS3_EXECUTE,
            )
        };
        let check = |bits: u32, mask: u32| {
            let top = g.top();
            async move {
                if want & bits == 0 {
                    return 0;
                }
                match top.access(cx, gfid, mask).await {
                    Ok(()) => want & bits,
                    Err(_) => 0,
                }
            }
        };
        let (r, w, x) = tokio::join!(
            check(read, libc::R_OK as u32),
            check(write, libc::W_OK as u32),
            check(exec, libc::X_OK as u32),
        );
        Nfs3Result::Ok(ACCESS3resok {
            obj_attributes: post_op(Some(&a), self.fsid),
            access: r | w | x,
        })
    }

    pub(super) async fn readlink(&self, cx: &Ctx, args: READLINK3args) -> READLINK3res<'static> {
        let gfid = match self.gfid(&args.symlink) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, READLINK3resfail::default())),
        };
        let g = self.graph();
        let (target, a) = tokio::join!(g.top().readlink(cx, gfid), self.attrs(&g, cx, gfid));
        match target {
            Ok(t) => Nfs3Result::Ok(READLINK3resok {
                symlink_attributes: post_op(a.as_ref(), self.fsid),
                data: nfspath3(Opaque::owned(t.into_bytes().into_vec())),
            }),
            Err(e) => Nfs3Result::Err((
                stale(e),
                READLINK3resfail {
                    symlink_attributes: post_op(a.as_ref(), self.fsid),
                },
            )),
        }
    }

    pub(super) async fn fsstat(&self, cx: &Ctx, args: FSSTAT3args) -> FSSTAT3res {
        let gfid = match self.gfid(&args.fsroot) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, FSSTAT3resfail::default())),
        };
        let g = self.graph();
        let (st, a) = tokio::join!(g.top().statfs(cx, gfid), self.attrs(&g, cx, gfid));
        match st {
            Ok(s) => {
                let unit = if s.frsize == 0 { s.bsize } else { s.frsize };
                Nfs3Result::Ok(FSSTAT3resok {
                    obj_attributes: post_op(a.as_ref(), self.fsid),
                    tbytes: s.blocks.saturating_mul(unit),
                    fbytes: s.bfree.saturating_mul(unit),
                    abytes: s.bavail.saturating_mul(unit),
                    tfiles: s.files,
                    ffiles: s.ffree,
                    afiles: s.favail,
                    invarsec: 0,
                })
            }
            Err(e) => Nfs3Result::Err((
                stale(e),
                FSSTAT3resfail {
                    obj_attributes: post_op(a.as_ref(), self.fsid),
                },
            )),
        }
    }

    pub(super) async fn fsinfo(&self, cx: &Ctx, args: FSINFO3args) -> FSINFO3res {
        let gfid = match self.gfid(&args.fsroot) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, FSINFO3resfail::default())),
        };
        let a = match self.graph().top().stat(cx, gfid).await {
            Ok(a) => a,
            Err(e) => return Nfs3Result::Err((stale(e), FSINFO3resfail::default())),
        };
        Nfs3Result::Ok(FSINFO3resok {
            obj_attributes: post_op(Some(&a), self.fsid),
            rtmax: MAX_IO,
            rtpref: MAX_IO,
            rtmult: 4096,
            wtmax: MAX_IO,
            wtpref: MAX_IO,
            wtmult: 4096,
            dtpref: DIR_PREF,
            maxfilesize: i64::MAX as u64,
            time_delta: nfstime3 {
                seconds: 0,
                nseconds: 1,
            },
            properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
        })
    }

    pub(super) async fn pathconf(&self, cx: &Ctx, args: PATHCONF3args) -> PATHCONF3res {
        let gfid = match self.gfid(&args.object) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, PATHCONF3resfail::default())),
        };
        let a = match self.graph().top().stat(cx, gfid).await {
            Ok(a) => a,
            Err(e) => return Nfs3Result::Err((stale(e), PATHCONF3resfail::default())),
        };
        Nfs3Result::Ok(PATHCONF3resok {
            obj_attributes: post_op(Some(&a), self.fsid),
            linkmax: LINK_MAX,
            name_max: NAME_MAX as u32,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        })
    }
}
