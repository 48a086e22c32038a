//! Directories: opendir and readdirp. Cookies are the file system's own `d_off` values
//! (telldir positions), so a listing resumes exactly after the last entry returned even when
//! entries are added or removed in between. `.` and `..` are left out (hosts add them) and the
//! brick's `.xlfs` directory is hidden at the root.

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{DirEntry, Errno, Fd, Gfid, XattrReq};

use crate::brick::Brick;
use crate::handle::META_DIR;
use crate::sys::{self, XTarget};

/// Bytes one entry costs against the `size` budget (FUSE's direntplus: 152 + padded name).
fn entry_cost(name_len: usize) -> usize {
    152 + name_len.div_ceil(8) * 8
}

impl Brick {
    pub fn opendir(&self, fd: &Fd) -> Result<(), Errno> {
        // O_NOATIME (a `noatime` or `nodiratime` client): listings leave the atime alone.
        let f = self.open_gfid(fd.gfid, libc::O_RDONLY | (fd.flags & libc::O_NOATIME))?;
        if !f.is_dir {
            return Err(Errno::ENOTDIR);
        }
        self.fds.insert(fd.id, f)
    }

    /// With `want`, each entry also carries the xattrs asked for (read through the open
    /// directory: no lookup of its own).
    pub fn readdirp(
        &self,
        fd: &Fd,
        offset: u64,
        size: u32,
        want: Option<&XattrReq>,
    ) -> Result<RVec<DirEntry>, Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        if !f.is_dir {
            return Err(Errno::ENOTDIR);
        }
        let _pos = f.dir_pos.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = sys::lseek(f.as_fd(), offset, libc::SEEK_SET) {
            // A directory removed since it was opened (by another client): ext4 no longer
            // takes its hash cookies (EINVAL). It lists as the kernel lists a removed
            // directory: ENOENT.
            let removed =
                e == Errno::EINVAL && sys::fstat(f.as_fd()).is_ok_and(|st| st.st_nlink == 0);
            return Err(if removed { Errno::ENOENT } else { e });
        }
        let budget = (size as usize).max(entry_cost(255));
        let mut used = 0;
        let mut out = RVec::new();
        let mut buf = vec![0u8; 32 * 1024];
        'outer: loop {
            let batch = sys::getdents(f.as_fd(), &mut buf)?;
            if batch.is_empty() {
                break;
            }
            for d in batch {
                let cost = entry_cost(d.name.len());
                if used + cost > budget && !out.is_empty() {
                    break 'outer;
                }
                let Ok(name) = String::from_utf8(d.name) else {
                    tracing::warn!(target: "xlfs::posix", "skipping a non-UTF-8 name in {}", f.gfid);
                    continue;
                };
                if name == "." || name == ".." || (f.gfid == Gfid::ROOT && name == META_DIR) {
                    continue;
                }
                let attr = match crate::creds::as_root(|| self.child_iatt(f.gfid, f.as_fd(), &name))
                {
                    Ok(a) => a,
                    Err(Errno::ENOENT) => continue, // removed since getdents
                    Err(e) => return Err(e),
                };
                let xattrs = match want {
                    Some(w) => {
                        let p = sys::proc_child(f.as_fd(), &name)?;
                        match crate::wanted::read(XTarget::NoFollow(&p), attr.gfid, w) {
                            Ok(x) => x,
                            Err(Errno::ENOENT) => continue, // removed since getdents
                            Err(e) => return Err(e),
                        }
                    }
                    None => Default::default(),
                };
                used += cost;
                out.push(DirEntry {
                    name: name.into(),
                    next_offset: d.off,
                    attr,
                    xattrs,
                });
            }
        }
        Ok(out)
    }
}
