//! Conversions between fop values and NFSv3's: attributes, times, `sattr3`, errnos.

use nfs3_types::nfs3::{
    fattr3, ftype3, nfsstat3, nfstime3, post_op_attr, pre_op_attr, sattr3, set_atime, set_gid3,
    set_mode3, set_mtime, set_size3, set_uid3, specdata3, wcc_attr, wcc_data,
};
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Errno, FileType, Iatt, SetAttr, TimeSet, Timespec};

/// The NFS file type of a fop file type.
pub fn ftype(kind: FileType) -> ftype3 {
    match kind {
        FileType::Regular => ftype3::NF3REG,
        FileType::Directory => ftype3::NF3DIR,
        FileType::Symlink => ftype3::NF3LNK,
        FileType::BlockDevice => ftype3::NF3BLK,
        FileType::CharDevice => ftype3::NF3CHR,
        FileType::Fifo => ftype3::NF3FIFO,
        FileType::Socket => ftype3::NF3SOCK,
    }
}

/// NFSv3 times are unsigned 32-bit seconds: earlier times clamp to the epoch, later to 2106.
pub fn nfstime(t: Timespec) -> nfstime3 {
    nfstime3 {
        seconds: t.sec.clamp(0, i64::from(u32::MAX)) as u32,
        nseconds: if t.sec < 0 {
            0
        } else {
            t.nsec.min(999_999_999)
        },
    }
}

pub fn timespec(t: nfstime3) -> Timespec {
    Timespec {
        sec: i64::from(t.seconds),
        nsec: t.nseconds.min(999_999_999),
    }
}

/// The NFS `fileid`: the translator's inode number, or the GFID's low 8 bytes (what
/// storage/posix reports anyway) when a translator leaves it 0.
pub fn fileid(a: &Iatt) -> u64 {
    if a.ino != 0 {
        return a.ino;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&a.gfid.0[8..]);
    u64::from_be_bytes(b)
}

/// Full attributes as NFS sends them; `fsid` is the volume id.
pub fn fattr(a: &Iatt, fsid: u64) -> fattr3 {
    // glibc dev_t encoding, as storage/posix reports st_rdev.
    let (major, minor) = (
        ((a.rdev >> 32) & 0xffff_f000) | ((a.rdev >> 8) & 0x0000_0fff),
        ((a.rdev >> 12) & 0xffff_ff00) | (a.rdev & 0x0000_00ff),
    );
    fattr3 {
        type_: ftype(a.kind),
        mode: a.perm & 0o7777,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        used: a.blocks.saturating_mul(512),
        rdev: specdata3 {
            specdata1: major as u32,
            specdata2: minor as u32,
        },
        fsid,
        fileid: fileid(a),
        atime: nfstime(a.atime),
        mtime: nfstime(a.mtime),
        ctime: nfstime(a.ctime),
    }
}

/// glibc's `makedev`.
pub fn makedev(major: u32, minor: u32) -> u64 {
    let (major, minor) = (u64::from(major), u64::from(minor));
    ((major & 0xffff_f000) << 32)
        | ((major & 0x0000_0fff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0x0000_00ff)
}

pub fn post_op(a: Option<&Iatt>, fsid: u64) -> post_op_attr {
    match a {
        Some(a) => post_op_attr::Some(fattr(a, fsid)),
        None => post_op_attr::None,
    }
}

pub fn pre_op(a: Option<&Iatt>) -> pre_op_attr {
    match a {
        Some(a) => pre_op_attr::Some(wcc_attr {
            size: a.size,
            mtime: nfstime(a.mtime),
            ctime: nfstime(a.ctime),
        }),
        None => pre_op_attr::None,
    }
}

pub fn wcc(before: Option<&Iatt>, after: Option<&Iatt>, fsid: u64) -> wcc_data {
    wcc_data {
        before: pre_op(before),
        after: post_op(after, fsid),
    }
}

/// What a `sattr3` asks `setattr` to change.
pub fn set_attr(s: &sattr3) -> SetAttr {
    truncate_sets_its_own_mtime(sattr_to_setattr(s))
}

/// A client's truncate (Linux: `ftruncate`, `O_TRUNC`) sends the new size with mtime
/// SET_TO_SERVER_TIME. "Now" for the mtime alone (atime unchanged) needs ownership where the
/// truncate needs only write permission, so a group member or other user allowed to write
/// was refused with EPERM. The brick's truncate sets mtime and ctime itself: left out.
fn truncate_sets_its_own_mtime(mut a: SetAttr) -> SetAttr {
    if a.size.is_some() && a.mtime == TimeSet::Now && a.atime != TimeSet::Now {
        a.mtime = TimeSet::Omit;
    }
    a
}

fn sattr_to_setattr(s: &sattr3) -> SetAttr {
    SetAttr {
        perm: match s.mode {
            set_mode3::Some(m) => ROption::RSome(m & 0o7777),
            set_mode3::None => ROption::RNone,
        },
        uid: match s.uid {
            set_uid3::Some(u) => ROption::RSome(u),
            set_uid3::None => ROption::RNone,
        },
        gid: match s.gid {
            set_gid3::Some(g) => ROption::RSome(g),
            set_gid3::None => ROption::RNone,
        },
        size: match s.size {
            set_size3::Some(n) => ROption::RSome(n),
            set_size3::None => ROption::RNone,
        },
        atime: match s.atime {
            set_atime::DONT_CHANGE => TimeSet::Omit,
            set_atime::SET_TO_SERVER_TIME => TimeSet::Now,
            set_atime::SET_TO_CLIENT_TIME(t) => TimeSet::At(timespec(t)),
        },
        mtime: match s.mtime {
            set_mtime::DONT_CHANGE => TimeSet::Omit,
            set_mtime::SET_TO_SERVER_TIME => TimeSet::Now,
            set_mtime::SET_TO_CLIENT_TIME(t) => TimeSet::At(timespec(t)),
        },
    }
}

/// Whether `s` changes anything.
pub fn is_empty(s: &SetAttr) -> bool {
    s.perm.is_none()
        && s.uid.is_none()
        && s.gid.is_none()
        && s.size.is_none()
        && s.atime == TimeSet::Omit
        && s.mtime == TimeSet::Omit
}

/// The mode a creating procedure asked for, else `default`.
pub fn mode_or(s: &sattr3, default: u32) -> u32 {
    match s.mode {
        set_mode3::Some(m) => m & 0o7777,
        set_mode3::None => default,
    }
}

/// `s` without the mode (already applied at creation).
pub fn without_mode(mut s: SetAttr) -> SetAttr {
    s.perm = ROption::RNone;
    s
}

/// A fop error as an NFS status. `ENOENT` about the object a handle names is
/// [`stale`]: use that for inode procedures.
pub fn status(e: Errno) -> nfsstat3 {
    use nfsstat3::*;
    match e.0 {
        libc::EPERM => NFS3ERR_PERM,
        libc::ENOENT => NFS3ERR_NOENT,
        libc::ENXIO => NFS3ERR_NXIO,
        libc::EACCES => NFS3ERR_ACCES,
        libc::EEXIST => NFS3ERR_EXIST,
        libc::EXDEV => NFS3ERR_XDEV,
        libc::ENODEV => NFS3ERR_NODEV,
        libc::ENOTDIR => NFS3ERR_NOTDIR,
        libc::EISDIR => NFS3ERR_ISDIR,
        libc::EINVAL | libc::ELOOP | libc::ERANGE => NFS3ERR_INVAL,
        libc::EFBIG | libc::EOVERFLOW => NFS3ERR_FBIG,
        libc::ENOSPC => NFS3ERR_NOSPC,
        libc::EROFS => NFS3ERR_ROFS,
        libc::EMLINK => NFS3ERR_MLINK,
        libc::ENAMETOOLONG => NFS3ERR_NAMETOOLONG,
        libc::ENOTEMPTY => NFS3ERR_NOTEMPTY,
        libc::EDQUOT => NFS3ERR_DQUOT,
        libc::ESTALE => NFS3ERR_STALE,
        libc::ENOTSUP | libc::ENOSYS => NFS3ERR_NOTSUPP,
        // Transient (a brick reconnecting, a lock held): the client retries later.
        libc::EAGAIN | libc::ENOTCONN | libc::ETIMEDOUT | libc::EINTR => NFS3ERR_JUKEBOX,
        _ => NFS3ERR_IO,
    }
}

/// [`status`] for a fop on the object a handle names: if it is gone, the handle is stale.
pub fn stale(e: Errno) -> nfsstat3 {
    if e == Errno::ENOENT {
        nfsstat3::NFS3ERR_STALE
    } else {
        status(e)
    }
}

/// A file with no name left: removed, though the bricks may keep it reachable by GFID for a
/// while (storage/posix `unlinked-grace`, for FUSE clients that just looked it up). An NFS
/// handle of it is stale, as on a local file system exported by the kernel (NFS clients
/// keep their own open files alive by renaming them, not through the server).
pub(super) fn nameless(a: &Iatt) -> bool {
    a.nlink == 0 && !a.is_dir()
}

#[cfg(test)]
mod tests {
    use xlator_api::Gfid;

    use super::*;

    #[test]
    fn attributes() {
        let a = Iatt {
            gfid: Gfid::random(),
            ino: 42,
            kind: FileType::CharDevice,
            perm: 0o4755,
            nlink: 2,
            uid: 1000,
            gid: 100,
            rdev: makedev(8, 300),
            size: 5000,
            blocks: 16,
            mtime: Timespec { sec: 10, nsec: 5 },
            atime: Timespec { sec: -5, nsec: 7 },
            ..Iatt::default()
        };
        let f = fattr(&a, 9);
        assert_eq!(f.type_, ftype3::NF3CHR);
        assert_eq!((f.mode, f.nlink, f.uid, f.gid), (0o4755, 2, 1000, 100));
        assert_eq!((f.size, f.used, f.fsid, f.fileid), (5000, 8192, 9, 42));
        assert_eq!((f.rdev.specdata1, f.rdev.specdata2), (8, 300));
        assert_eq!((f.mtime.seconds, f.mtime.nseconds), (10, 5));
        assert_eq!((f.atime.seconds, f.atime.nseconds), (0, 0));
        assert_eq!(makedev(8, 300), libc::makedev(8, 300));
        let g = Gfid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        let zero = Iatt {
            gfid: g,
            ..Iatt::default()
        };
        assert_eq!(fileid(&zero), 0x102);
    }

    #[test]
    fn sattr_to_setattr() {
        let s = sattr3 {
            mode: set_mode3::Some(0o100644),
            uid: set_uid3::None,
            gid: set_gid3::Some(5),
            size: set_size3::Some(0),
            atime: set_atime::SET_TO_SERVER_TIME,
            mtime: set_mtime::SET_TO_CLIENT_TIME(nfstime3 {
                seconds: 3,
                nseconds: 4,
            }),
        };
        let a = set_attr(&s);
        assert_eq!(a.perm, ROption::RSome(0o644));
        assert_eq!(a.uid, ROption::RNone);
        assert_eq!(a.gid, ROption::RSome(5));
        assert_eq!(a.size, ROption::RSome(0));
        assert_eq!(a.atime, TimeSet::Now);
        assert_eq!(a.mtime, TimeSet::At(Timespec { sec: 3, nsec: 4 }));
        assert!(!is_empty(&a));
        assert!(is_empty(&without_mode(set_attr(&sattr3 {
            mode: set_mode3::Some(1),
            ..sattr3::default()
        }))));
        assert_eq!(mode_or(&s, 0o600), 0o644);
        assert_eq!(mode_or(&sattr3::default(), 0o600), 0o600);
    }

    #[test]
    fn a_truncate_leaves_the_mtime_to_the_brick() {
        let truncate = sattr3 {
            size: set_size3::Some(0),
            mtime: set_mtime::SET_TO_SERVER_TIME,
            ..sattr3::default()
        };
        let a = set_attr(&truncate);
        assert_eq!((a.size, a.mtime), (ROption::RSome(0), TimeSet::Omit));
        // Both times "now" needs only write permission: kept, as are times without a size.
        let both = set_attr(&sattr3 {
            atime: set_atime::SET_TO_SERVER_TIME,
            ..truncate.clone()
        });
        assert_eq!((both.atime, both.mtime), (TimeSet::Now, TimeSet::Now));
        let touch = set_attr(&sattr3 {
            size: set_size3::None,
            ..truncate
        });
        assert_eq!(touch.mtime, TimeSet::Now);
    }

    #[test]
    fn errnos() {
        assert_eq!(status(Errno::ENOENT), nfsstat3::NFS3ERR_NOENT);
        assert_eq!(stale(Errno::ENOENT), nfsstat3::NFS3ERR_STALE);
        assert_eq!(stale(Errno::ESTALE), nfsstat3::NFS3ERR_STALE);
        assert_eq!(stale(Errno::EACCES), nfsstat3::NFS3ERR_ACCES);
        assert_eq!(status(Errno::ENOTCONN), nfsstat3::NFS3ERR_JUKEBOX);
        assert_eq!(status(Errno(12345)), nfsstat3::NFS3ERR_IO);
    }
}
