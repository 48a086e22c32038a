//! The xattrs a caller asks for with [`XattrReq`] in the replies of the entry fops and of each
//! readdirp entry, read in the same job from the fd or handle path the fop already has (no
//! round trip of their own). Brick-internal names are hidden as `listxattr` hides them
//! (asked by exact name, `trusted.gfid` reads back the GFID, as `getxattr`).
//!
//! They are read with the brick's privileges, `trusted.*` included, whatever the caller:
//! `XattrReq` comes from the cluster translators of the graph (no host turns a user's request
//! into one), and replicate needs its pending counters in the reply of a user's lookup.

use std::ffi::CStr;

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{Buf, Errno, Gfid, Xattr, XattrReq, Xattrs};

use crate::gfid::is_internal;
use crate::sys::{self, XTarget};

/// The xattrs of object `g` (at `t`) that `req` asks for, sorted by name. Exact names only
/// cost one `getxattr` each; a prefix costs one `listxattr` more. Runs as root.
pub fn read(t: XTarget<'_>, g: Gfid, req: &XattrReq) -> Result<Xattrs, Errno> {
    crate::creds::as_root(|| read_as_root(t, g, req))
}

fn read_as_root(t: XTarget<'_>, g: Gfid, req: &XattrReq) -> Result<Xattrs, Errno> {
    let mut names: Vec<String> = if req.prefixes.is_empty() {
        req.names.clone()
    } else {
        let mut v = match sys::listxattr(t) {
            Ok(v) => v,
            Err(Errno::ENOTSUP) => Vec::new(),
            Err(e) => return Err(e),
        };
        v.retain(|n| req.wants(n));
        // Exact names not listed may still answer (the virtual `trusted.gfid`).
        v.extend(req.names.iter().cloned());
        v
    };
    names.sort_unstable();
    names.dedup();
    let mut out = RVec::new();
    for name in names {
        if name == "trusted.gfid" && req.names.contains(&name) {
            out.push(Xattr {
                name: name.into(),
                value: Buf::copy_from_slice(&g.0),
            });
            continue;
        }
        if is_internal(&name) {
            continue;
        }
        let Ok(cname) = sys::cstr(&name) else {
            continue;
        };
        if let Some(v) = get(t, &cname)? {
            out.push(Xattr {
                name: name.into(),
                value: Buf::from_vec(v),
            });
        }
    }
    Ok(out)
}

/// One value; `None` when the object lacks it (or cannot have it: ENOTSUP).
fn get(t: XTarget<'_>, name: &CStr) -> Result<Option<Vec<u8>>, Errno> {
    match sys::getxattr(t, name) {
        Ok(v) => Ok(Some(v)),
        Err(Errno::ENODATA | Errno::ENOTSUP) => Ok(None),
        Err(e) => Err(e),
    }
}
