//! Inode fops addressed by GFID or fd: stat, setattr, access, readlink, statfs.

use std::os::fd::AsFd;

use xlator_api::abi_stable::std_types::{ROption, RString};
use xlator_api::{Errno, Fd, FdId, Gfid, Iatt, SetAttr, Statfs, TimeSet};

use crate::brick::Brick;
use crate::sys;

fn timespec(t: TimeSet) -> libc::timespec {
    match t {
        TimeSet::Omit => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        TimeSet::Now => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        TimeSet::At(ts) => libc::timespec {
            tv_sec: ts.sec,
            tv_nsec: i64::from(ts.nsec),
        },
    }
}

fn times(a: &SetAttr) -> Option<[libc::timespec; 2]> {
    if a.atime == TimeSet::Omit && a.mtime == TimeSet::Omit {
        None
    } else {
        Some([timespec(a.atime), timespec(a.mtime)])
    }
}

fn opt<T: Copy>(o: ROption<T>) -> Option<T> {
    o.into_option()
}

impl Brick {
    pub fn stat(&self, g: Gfid) -> Result<Iatt, Errno> {
        let obj = self.h.resolve(g)?;
        self.fd_iatt(obj.as_fd(), g)
    }

    pub fn fstat(&self, fd: &Fd) -> Result<Iatt, Errno> {
        if fd.id == FdId::ANONYMOUS {
            return self.stat(fd.gfid);
        }
        let f = self.fds.get(fd.id)?;
        self.fd_iatt(f.as_fd(), f.gfid)
    }

    /// chown, then chmod (so a requested setuid bit survives), then truncate, then times;
    /// the kernel checks each step against the caller's credentials.
    pub fn setattr(&self, g: Gfid, a: &SetAttr) -> Result<Iatt, Errno> {
        let obj = self.h.resolve(g)?;
        let p = sys::proc_path(obj.as_fd());
        let (uid, gid) = (opt(a.uid), opt(a.gid));
        if uid.is_some() || gid.is_some() {
            sys::fchown_obj(obj.as_fd(), uid, gid)?;
        }
        if let Some(perm) = opt(a.perm) {
            sys::chmod(&p, perm & 0o7777)?;
        }
        if let Some(size) = opt(a.size) {
            sys::truncate(&p, size)?;
        }
        if let Some(t) = times(a) {
            sys::utimens_path(&p, &t)?;
        }
        self.fd_iatt(obj.as_fd(), g)
    }

    pub fn fsetattr(&self, fd: &Fd, a: &SetAttr) -> Result<Iatt, Errno> {
        if fd.id == FdId::ANONYMOUS {
            return self.setattr(fd.gfid, a);
        }
        let f = self.fds.get(fd.id)?;
        let (uid, gid) = (opt(a.uid), opt(a.gid));
        if uid.is_some() || gid.is_some() {
            sys::fchown(f.as_fd(), uid, gid)?;
        }
        if let Some(perm) = opt(a.perm) {
            sys::fchmod(f.as_fd(), perm & 0o7777)?;
        }
        if let Some(size) = opt(a.size) {
            sys::ftruncate(f.as_fd(), size)?;
        }
        if let Some(t) = times(a) {
            sys::futimens(f.as_fd(), &t)?;
        }
        self.fd_iatt(f.as_fd(), f.gfid)
    }

    pub fn access(&self, g: Gfid, mask: u32) -> Result<(), Errno> {
        let obj = self.h.resolve(g)?;
        let mask = i32::try_from(mask & 0o7).map_err(|_| Errno::EINVAL)?;
        sys::eaccess(&sys::proc_path(obj.as_fd()), mask)
    }

    pub fn readlink(&self, g: Gfid) -> Result<RString, Errno> {
        let obj = self.h.resolve(g)?;
        let st = sys::fstat(obj.as_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFLNK {
            return Err(Errno::EINVAL);
        }
        let t = sys::readlinkat(obj.as_fd(), c"")?;
        // Non-UTF-8 targets cannot cross the API (`RString`).
        String::from_utf8(t)
            .map(RString::from)
            .map_err(|_| Errno::EIO)
    }

    pub fn statfs(&self, g: Gfid) -> Result<Statfs, Errno> {
        self.h.resolve(g)?;
        let s = sys::fstatvfs(self.root_fd())?;
        Ok(Statfs {
            bsize: s.f_bsize,
            frsize: s.f_frsize,
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            favail: s.f_favail,
            namemax: s.f_namemax,
        })
    }
}
