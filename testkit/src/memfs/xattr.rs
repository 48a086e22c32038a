//! Extended attributes: namespaces and their rights, XATTR_CREATE/XATTR_REPLACE, and the
//! `xattrop` counter arithmetic.

use xlator_api::{Buf, Ctx, Errno, FileType, Gfid, Timespec, Xattr, XattropOp, Xattrs};

use super::inode::Table;
use super::perm::{self, R, W};

/// Longest value, in bytes (Linux's `XATTR_SIZE_MAX`).
const XATTR_SIZE_MAX: usize = 65536;

/// The namespace of an attribute name, by prefix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Space {
    User,
    /// `trusted.*` and `security.*`: root only (`trusted.*` is invisible to others).
    Privileged {
        hidden: bool,
    },
    /// `system.*` (POSIX ACLs): not supported.
    System,
}

fn space(name: &str) -> Result<Space, Errno> {
    if name.is_empty() {
        return Err(Errno::EINVAL);
    }
    if name.len() > perm::NAME_MAX {
        return Err(Errno::ERANGE);
    }
    let prefix = |p: &str| name.len() > p.len() && name.starts_with(p);
    if prefix("user.") {
        Ok(Space::User)
    } else if prefix("trusted.") {
        Ok(Space::Privileged { hidden: true })
    } else if prefix("security.") {
        Ok(Space::Privileged { hidden: false })
    } else if prefix("system.") {
        Ok(Space::System)
    } else {
        Err(Errno::ENOTSUP)
    }
}

impl Table {
    /// Checks that `cx` may change attribute `name` of `gfid`.
    fn xattr_writable(&self, cx: &Ctx, gfid: Gfid, name: &str) -> Result<(), Errno> {
        let a = self.attr(gfid)?;
        match space(name)? {
            Space::System => Err(Errno::ENOTSUP),
            Space::Privileged { .. } if !perm::is_root(cx) => Err(Errno::EPERM),
            Space::Privileged { .. } => Ok(()),
            Space::User if !matches!(a.kind, FileType::Regular | FileType::Directory) => {
                Err(Errno::EPERM)
            }
            Space::User => perm::check(cx, &a, W),
        }
    }

    /// Checks that `cx` may read attribute `name` (ENODATA for names it cannot see).
    fn xattr_readable(&self, cx: &Ctx, gfid: Gfid, name: &str) -> Result<(), Errno> {
        let a = self.attr(gfid)?;
        match space(name)? {
            Space::System => Err(Errno::ENODATA),
            Space::Privileged { hidden: true } if !perm::is_root(cx) => Err(Errno::ENODATA),
            Space::Privileged { .. } => Ok(()),
            Space::User => perm::check(cx, &a, R),
        }
    }

    pub(crate) fn setxattr(
        &mut self,
        cx: &Ctx,
        gfid: Gfid,
        x: &Xattr,
        flags: i32,
    ) -> Result<(), Errno> {
        self.xattr_writable(cx, gfid, &x.name)?;
        if x.value.len() > XATTR_SIZE_MAX {
            return Err(Errno::E2BIG);
        }
        let (create, replace) = (
            flags & libc::XATTR_CREATE != 0,
            flags & libc::XATTR_REPLACE != 0,
        );
        if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 || (create && replace) {
            return Err(Errno::EINVAL);
        }
        let inode = self.get_mut(gfid)?;
        let exists = inode.xattrs.contains_key(x.name.as_str());
        if create && exists {
            return Err(Errno::EEXIST);
        }
        if replace && !exists {
            return Err(Errno::ENODATA);
        }
        inode.xattrs.insert(x.name.to_string(), x.value.to_vec());
        inode.attr.ctime = Timespec::now();
        Ok(())
    }

    pub(crate) fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: &str) -> Result<Buf, Errno> {
        self.xattr_readable(cx, gfid, name)?;
        let v = self.get(gfid)?.xattrs.get(name).ok_or(Errno::ENODATA)?;
        Ok(Buf::copy_from_slice(v))
    }

    /// Names visible to `cx` (`trusted.*` only for root).
    pub(crate) fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<Vec<String>, Errno> {
        let inode = self.get(gfid)?;
        let root = perm::is_root(cx);
        Ok(inode
            .xattrs
            .keys()
            .filter(|k| root || !k.starts_with("trusted."))
            .cloned()
            .collect())
    }

    pub(crate) fn removexattr(&mut self, cx: &Ctx, gfid: Gfid, name: &str) -> Result<(), Errno> {
        self.xattr_writable(cx, gfid, name)?;
        let inode = self.get_mut(gfid)?;
        inode.xattrs.remove(name).ok_or(Errno::ENODATA)?;
        inode.attr.ctime = Timespec::now();
        Ok(())
    }

    /// Adds each value's big-endian lanes to the stored ones (missing: zeroes), atomically
    /// for all keys; returns the new values. EINVAL when a length is not a lane multiple.
    pub(crate) fn xattrop(
        &mut self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xs: &Xattrs,
    ) -> Result<Xattrs, Errno> {
        let lane = match op {
            XattropOp::AddArray32 => 4,
            XattropOp::AddArray64 => 8,
        };
        let mut results = Vec::with_capacity(xs.len());
        for x in xs.iter() {
            self.xattr_writable(cx, gfid, &x.name)?;
            let cur = self
                .get(gfid)?
                .xattrs
                .get(x.name.as_str())
                .cloned()
                .unwrap_or_default();
            if x.value.len() % lane != 0 || cur.len() % lane != 0 {
                return Err(Errno::EINVAL);
            }
            let mut out = vec![0u8; cur.len().max(x.value.len())];
            out[..cur.len()].copy_from_slice(&cur);
            for (dst, add) in out.chunks_mut(lane).zip(x.value.chunks(lane)) {
                add_lane(dst, add);
            }
            results.push((x.name.clone(), out));
        }
        let inode = self.get_mut(gfid)?;
        for (name, v) in &results {
            inode.xattrs.insert(name.to_string(), v.clone());
        }
        if !results.is_empty() {
            inode.attr.ctime = Timespec::now();
        }
        Ok(results
            .into_iter()
            .map(|(name, v)| Xattr {
                name,
                value: Buf::from_vec(v),
            })
            .collect())
    }
}

/// `dst += add` for one big-endian lane of 4 or 8 bytes, wrapping.
fn add_lane(dst: &mut [u8], add: &[u8]) {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    let n = dst.len();
    a[8 - n..].copy_from_slice(dst);
    b[8 - n..].copy_from_slice(add);
    let sum = u64::from_be_bytes(a).wrapping_add(u64::from_be_bytes(b));
    let bytes = sum.to_be_bytes();
    dst.copy_from_slice(&bytes[8 - n..]);
}

#[cfg(test)]
mod tests {
    use super::add_lane;

    #[test]
    fn lanes_add_big_endian_and_wrap() {
        let mut v = 1u32.to_be_bytes();
        add_lane(&mut v, &2u32.to_be_bytes());
        assert_eq!(u32::from_be_bytes(v), 3);
        let mut w = u32::MAX.to_be_bytes();
        add_lane(&mut w, &2u32.to_be_bytes());
        assert_eq!(u32::from_be_bytes(w), 1);
        let mut x = 5u64.to_be_bytes();
        add_lane(&mut x, &(-1i64).to_be_bytes());
        assert_eq!(u64::from_be_bytes(x), 4);
    }
}
