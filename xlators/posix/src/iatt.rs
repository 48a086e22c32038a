//! `struct stat` -> [`Iatt`].

use xlator_api::{FileType, Gfid, Iatt, Timespec};

use crate::gfid::ino_of;

fn ts(sec: i64, nsec: i64) -> Timespec {
    Timespec {
        sec,
        nsec: u32::try_from(nsec).unwrap_or(0),
    }
}

/// Attributes of the object `gfid` from its `stat`. A non-directory carries one extra hard
/// link (its handle), which is not shown: `nlink` is what a local file system would report.
pub fn from_stat(st: &libc::stat, gfid: Gfid) -> Iatt {
    let kind = FileType::from_mode(st.st_mode).unwrap_or_default();
    let mut nlink = u32::try_from(st.st_nlink).unwrap_or(u32::MAX);
    if kind != FileType::Directory && gfid != Gfid::ROOT {
        nlink = nlink.saturating_sub(1);
    }
    Iatt {
        gfid,
        ino: ino_of(gfid),
        dev: st.st_dev,
        kind,
        perm: st.st_mode & 0o7777,
        nlink,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
        size: u64::try_from(st.st_size).unwrap_or(0),
        blksize: u32::try_from(st.st_blksize).unwrap_or(4096),
        blocks: u64::try_from(st.st_blocks).unwrap_or(0),
        atime: ts(st.st_atime, st.st_atime_nsec),
        mtime: ts(st.st_mtime, st.st_mtime_nsec),
        ctime: ts(st.st_ctime, st.st_ctime_nsec),
    }
}
