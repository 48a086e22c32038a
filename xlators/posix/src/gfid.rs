//! Where an object's GFID lives: 16 raw bytes in the xattr `trusted.gfid` when the brick runs
//! as root, else in `user.xlfs.gfid` (trusted.* needs CAP_SYS_ADMIN). The choice is made once
//! per brick at init and can be forced with the `gfid-xattr` option.

use std::ffi::CStr;

use xlator_api::{Errno, Gfid};

use crate::sys::{self, XTarget};

/// The GFID xattr name GlusterFS uses (and we use as root).
pub const TRUSTED: &CStr = c"trusted.gfid";
/// The fallback for bricks run without root.
pub const USER: &CStr = c"user.xlfs.gfid";

/// Which xattr holds GFIDs on this brick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GfidXattr(pub &'static CStr);

impl GfidXattr {
    pub fn name(&self) -> &'static CStr {
        self.0
    }

    /// The GFID stored on `t`, `None` if it has none.
    pub fn read(&self, t: XTarget<'_>) -> Result<Option<Gfid>, Errno> {
        match sys::getxattr(t, self.0) {
            Ok(v) => match <[u8; 16]>::try_from(v.as_slice()) {
                Ok(b) => Ok(Some(Gfid(b))),
                Err(_) => Err(Errno::EIO),
            },
            Err(Errno::ENODATA) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Stores `g` on `t`; `create_only` fails with EEXIST when a GFID is already there.
    pub fn write(&self, t: XTarget<'_>, g: Gfid, create_only: bool) -> Result<(), Errno> {
        let flags = if create_only { libc::XATTR_CREATE } else { 0 };
        sys::setxattr(t, self.0, &g.0, flags)
    }
}

/// Whether `name` is brick-internal: the GFID xattrs and anything under `trusted.xlfs.` /
/// `user.xlfs.`. Such names are hidden from listxattr and cannot be set or removed.
pub fn is_internal(name: &str) -> bool {
    name == "trusted.gfid"
        || name == "user.xlfs.gfid"
        || name.starts_with("trusted.xlfs.")
        || name.starts_with("user.xlfs.")
}

/// Stable inode number of a GFID: its last 8 bytes (as GlusterFS's `gfid_to_ino`), so every
/// brick and every restart reports the same number. The root is 1.
pub fn ino_of(g: Gfid) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&g.0[8..]);
    u64::from_be_bytes(b)
}

/// Re-exported: the GFID a caller requests for a new object (lives in xlator-api so cluster
/// translators need not depend on posix).
pub use xlator_api::GfidReq;

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::CtxExtension;

    #[test]
    fn root_ino_is_one_and_internal_names() {
        assert_eq!(ino_of(Gfid::ROOT), 1);
        assert!(is_internal("trusted.gfid") && is_internal("user.xlfs.x"));
        assert!(!is_internal("trusted.afr.vol-client-0") && !is_internal("user.foo"));
        let g = Gfid::random();
        assert_eq!(GfidReq::decode(&GfidReq(g).encode()), Some(GfidReq(g)));
    }
}
