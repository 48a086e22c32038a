//! Extended attributes: namespaces and their rights, XATTR_CREATE/XATTR_REPLACE, the
//! `xattrop` counter arithmetic, and what cluster translators ask of a leaf: several at once
//! (`getxattrs`, `setxattrs`), in entry replies ([`XattrReq`]) and at creation
//! ([`xlator_api::CreateXattrs`]).
//!
//! Xattrs asked for with [`XattrReq`] and set with `CreateXattrs` are read and written
//! whatever the caller's rights (as a brick running as root does): they are the cluster
//! translators' bookkeeping (pending counters, layouts, link targets) on behalf of any user.

use std::collections::BTreeMap;

use xlator_api::{Buf, Ctx, Errno, FileType, Gfid, Timespec, Xattr, XattrReq, XattropOp, Xattrs};

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

/// Names storage/posix keeps for itself (its GFID xattr and the `*.xlfs.*` namespace): it
/// refuses them from above, so memfs does too, and a translator tested on memfs cannot pick
/// a name the real brick refuses.
fn brick_internal(name: &str) -> bool {
    name == "trusted.gfid" || name.starts_with("trusted.xlfs.") || name.starts_with("user.xlfs.")
}

/// Checks the names and sizes of creation xattrs (EINVAL, ERANGE, ENOTSUP, E2BIG; EPERM for
/// the brick's own names, as storage/posix).
pub(crate) fn check_create_xattrs(xs: &[(String, Vec<u8>)]) -> Result<(), Errno> {
    for (name, value) in xs {
        if brick_internal(name) {
            return Err(Errno::EPERM);
        }
        if space(name)? == Space::System {
            return Err(Errno::ENOTSUP);
        }
        if value.len() > XATTR_SIZE_MAX {
            return Err(Errno::E2BIG);
        }
    }
    Ok(())
}

/// Checks `setxattr` flags; returns (XATTR_CREATE, XATTR_REPLACE).
fn set_flags(flags: i32) -> Result<(bool, bool), Errno> {
    let (create, replace) = (
        flags & libc::XATTR_CREATE != 0,
        flags & libc::XATTR_REPLACE != 0,
    );
    if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 || (create && replace) {
        return Err(Errno::EINVAL);
    }
    Ok((create, replace))
}

impl Table {
    /// The xattrs of `gfid` that `req` asks for, in name order (none without a request).
    pub(crate) fn wanted_xattrs(
        &self,
        gfid: Gfid,
        req: Option<&XattrReq>,
    ) -> Result<Xattrs, Errno> {
        let Some(req) = req.filter(|r| !r.is_empty()) else {
            return Ok(Xattrs::new());
        };
        Ok(self
            .get(gfid)?
            .xattrs
            .iter()
            .filter(|(k, _)| req.wants(k))
            .map(|(k, v)| Xattr {
                name: k.as_str().into(),
                value: Buf::copy_from_slice(v),
            })
            .collect())
    }

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
        let (create, replace) = set_flags(flags)?;
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

    /// The values of `names` that `gfid` has and `cx` may read; the others are left out.
    /// Fails as `getxattr` would for anything but a missing or invisible name.
    pub(crate) fn getxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        names: &[impl AsRef<str>],
    ) -> Result<Xattrs, Errno> {
        let inode = self.get(gfid)?;
        let mut out = Xattrs::new();
        for name in names {
            let name = name.as_ref();
            match self.xattr_readable(cx, gfid, name) {
                Ok(()) => {}
                Err(Errno::ENODATA) => continue,
                Err(e) => return Err(e),
            }
            if let Some(v) = inode.xattrs.get(name) {
                out.push(Xattr {
                    name: name.into(),
                    value: Buf::copy_from_slice(v),
                });
            }
        }
        Ok(out)
    }

    /// Sets every xattr of `xs` or none: each is checked (rights, size, `flags` against what
    /// is stored and what earlier entries of `xs` set) before the first is written.
    pub(crate) fn setxattrs(
        &mut self,
        cx: &Ctx,
        gfid: Gfid,
        xs: &Xattrs,
        flags: i32,
    ) -> Result<(), Errno> {
        let (create, replace) = set_flags(flags)?;
        let mut staged: BTreeMap<&str, &Buf> = BTreeMap::new();
        {
            let inode = self.get(gfid)?;
            for x in xs.iter() {
                self.xattr_writable(cx, gfid, &x.name)?;
                if x.value.len() > XATTR_SIZE_MAX {
                    return Err(Errno::E2BIG);
                }
                let exists = staged.contains_key(x.name.as_str())
                    || inode.xattrs.contains_key(x.name.as_str());
                if create && exists {
                    return Err(Errno::EEXIST);
                }
                if replace && !exists {
                    return Err(Errno::ENODATA);
                }
                staged.insert(x.name.as_str(), &x.value);
            }
        }
        if staged.is_empty() {
            return Ok(());
        }
        let inode = self.get_mut(gfid)?;
        for (k, v) in staged {
            inode.xattrs.insert(k.to_owned(), v.to_vec());
        }
        inode.attr.ctime = Timespec::now();
        Ok(())
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
    /// for all keys (a key named twice gets both); returns the new values. EINVAL when a
    /// length is not a lane multiple. A zero delta only reads: the reply has the stored value
    /// (zeroes of the delta's length when missing) and nothing is written, so a key is not
    /// created and ctime does not move (replicate reads pending counters this way).
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
        // New values of the keys that change; every check passes before the first write.
        let mut changed: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        let mut results = Vec::with_capacity(xs.len());
        {
            let stored = &self.get(gfid)?.xattrs;
            for x in xs.iter() {
                self.xattr_writable(cx, gfid, &x.name)?;
                let cur = match changed.get(x.name.as_str()) {
                    Some(v) => Some(v.as_slice()),
                    None => stored.get(x.name.as_str()).map(Vec::as_slice),
                };
                let base = cur.unwrap_or_default();
                if x.value.len() % lane != 0 || base.len() % lane != 0 {
                    return Err(Errno::EINVAL);
                }
                let mut out = vec![0u8; base.len().max(x.value.len())];
                out[..base.len()].copy_from_slice(base);
                for (dst, add) in out.chunks_mut(lane).zip(x.value.chunks(lane)) {
                    add_lane(dst, add);
                }
                if x.value.iter().any(|b| *b != 0) {
                    changed.insert(x.name.as_str(), out.clone());
                }
                results.push(Xattr {
                    name: x.name.clone(),
                    value: Buf::from_vec(out),
                });
            }
        }
        if !changed.is_empty() {
            let inode = self.get_mut(gfid)?;
            for (name, v) in changed {
                inode.xattrs.insert(name.to_owned(), v);
            }
            inode.attr.ctime = Timespec::now();
        }
        Ok(results.into())
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
