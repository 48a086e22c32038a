//! Conversions between fop values and fuser's: attributes, times, lock ranges, errnos.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, INodeNo, TimeOrNow};
use xlator_api::{Errno, FileType, Flock, Iatt, LkOwner, LockKind, TimeSet, Timespec};

/// The fuser file type of a fop file type.
pub fn file_type(kind: FileType) -> fuser::FileType {
    match kind {
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
    }
}

/// Seconds + nanoseconds since the epoch (negative seconds: before it) as a `SystemTime`.
pub fn system_time(t: Timespec) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(t.nsec.min(999_999_999)));
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.sec as u64) + nsec
    } else {
        // -1.25 s is stored as sec = -2, nsec = 750_000_000.
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + nsec
    }
}

/// The inverse of [`system_time`].
pub fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            let (sec, nsec) = (d.as_secs() as i64, d.subsec_nanos());
            if nsec == 0 {
                Timespec { sec: -sec, nsec: 0 }
            } else {
                Timespec {
                    sec: -sec - 1,
                    nsec: 1_000_000_000 - nsec,
                }
            }
        }
    }
}

/// How `setattr` should set a time.
pub fn time_set(t: Option<TimeOrNow>) -> TimeSet {
    match t {
        None => TimeSet::Omit,
        Some(TimeOrNow::Now) => TimeSet::Now,
        Some(TimeOrNow::SpecificTime(t)) => TimeSet::At(timespec(t)),
    }
}

/// The kernel's view of `a`, as node `node` (fuser sends the node id as `st_ino`).
pub fn file_attr(node: INodeNo, a: &Iatt) -> FileAttr {
    FileAttr {
        ino: node,
        size: a.size,
        blocks: a.blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: UNIX_EPOCH,
        kind: file_type(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        // The kernel's 32-bit encoding (major << 8 | minor low byte | minor high bits << 12)
        // is the low half of glibc's 64-bit dev_t for majors < 4096 and minors < 2^20.
        rdev: a.rdev as u32,
        blksize: if a.blksize == 0 { 4096 } else { a.blksize },
        flags: 0,
    }
}

/// Minimal attributes for a directory entry that carries no real attributes (`.`/`..` in
/// readdirplus, which the kernel never links).
pub fn dot_attr(node: INodeNo) -> FileAttr {
    FileAttr {
        ino: node,
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: fuser::FileType::Directory,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// A fop errno as a FUSE reply errno (EIO for nonsense values).
pub fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.0)
}

/// FUSE's inclusive end offset meaning "to end of file" (`OFFSET_MAX`).
const LOCK_EOF: u64 = i64::MAX as u64;

/// A FUSE lock request (`[start, end]` inclusive, `F_RDLCK`/`F_WRLCK`/`F_UNLCK`) as a
/// [`Flock`]; `None` for an unknown type.
pub fn flock(start: u64, end: u64, typ: i32, pid: u32, owner: u64) -> Option<Flock> {
    let kind = match typ {
        libc::F_RDLCK => LockKind::Read,
        libc::F_WRLCK => LockKind::Write,
        libc::F_UNLCK => LockKind::Unlock,
        _ => return None,
    };
    let len = if end >= LOCK_EOF || end < start {
        0
    } else {
        end - start + 1
    };
    Some(Flock {
        kind,
        start,
        len,
        pid,
        owner: LkOwner(owner),
    })
}

/// The inverse of [`flock`]: `(start, end, typ, pid)` for `ReplyLock::locked`.
pub fn lock_reply(l: &Flock) -> (u64, u64, i32, u32) {
    let typ = match l.kind {
        LockKind::Read => libc::F_RDLCK,
        LockKind::Write => libc::F_WRLCK,
        LockKind::Unlock => libc::F_UNLCK,
    };
    let end = if l.len == 0 {
        LOCK_EOF
    } else {
        l.start.saturating_add(l.len - 1)
    };
    (l.start, end, typ, l.pid)
}

#[cfg(test)]
mod tests {
    use xlator_api::Gfid;

    use super::*;

    #[test]
    fn times_round_trip_including_before_the_epoch() {
        for ts in [
            Timespec { sec: 0, nsec: 0 },
            Timespec {
                sec: 1_700_000_000,
                nsec: 123_456_789,
            },
            Timespec { sec: -1, nsec: 0 },
            Timespec {
                sec: -2,
                nsec: 750_000_000,
            },
        ] {
            assert_eq!(timespec(system_time(ts)), ts, "{ts:?}");
        }
        assert_eq!(
            system_time(Timespec {
                sec: -2,
                nsec: 750_000_000
            }),
            UNIX_EPOCH - Duration::from_millis(1250)
        );
        assert_eq!(time_set(None), TimeSet::Omit);
        assert_eq!(time_set(Some(TimeOrNow::Now)), TimeSet::Now);
        assert_eq!(
            time_set(Some(TimeOrNow::SpecificTime(
                UNIX_EPOCH + Duration::from_secs(5)
            ))),
            TimeSet::At(Timespec { sec: 5, nsec: 0 })
        );
    }

    #[test]
    fn iatt_to_file_attr() {
        let a = Iatt {
            gfid: Gfid::random(),
            ino: 99,
            kind: FileType::CharDevice,
            perm: 0o4755,
            nlink: 3,
            uid: 1000,
            gid: 100,
            rdev: libc::makedev(8, 300),
            size: 4096,
            blksize: 0,
            blocks: 8,
            mtime: Timespec { sec: 10, nsec: 5 },
            ..Iatt::default()
        };
        let f = file_attr(INodeNo(42), &a);
        assert_eq!(f.ino, INodeNo(42));
        assert_eq!(f.kind, fuser::FileType::CharDevice);
        assert_eq!(f.perm, 0o4755);
        assert_eq!(
            (f.nlink, f.uid, f.gid, f.size, f.blocks),
            (3, 1000, 100, 4096, 8)
        );
        assert_eq!(f.blksize, 4096);
        assert_eq!(f.mtime, UNIX_EPOCH + Duration::new(10, 5));
        // Kernel new_encode_dev(MKDEV(8, 300)).
        let (major, minor) = (8u32, 300u32);
        assert_eq!(
            f.rdev,
            (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
        );
    }

    #[test]
    fn lock_ranges() {
        let l = flock(10, LOCK_EOF, libc::F_WRLCK, 7, 99).expect("valid");
        assert_eq!(
            (l.kind, l.start, l.len, l.pid, l.owner),
            (LockKind::Write, 10, 0, 7, LkOwner(99))
        );
        assert_eq!(lock_reply(&l), (10, LOCK_EOF, libc::F_WRLCK, 7));
        let l = flock(0, 9, libc::F_RDLCK, 1, 1).expect("valid");
        assert_eq!(l.len, 10);
        assert_eq!(lock_reply(&l), (0, 9, libc::F_RDLCK, 1));
        assert!(flock(0, 1, 42, 0, 0).is_none());
    }

    #[test]
    fn errnos_pass_through() {
        assert_eq!(errno(Errno::ENOENT).code(), libc::ENOENT);
        assert_eq!(errno(Errno(0)).code(), libc::EIO);
        assert_eq!(errno(Errno(-5)).code(), libc::EIO);
    }
}
