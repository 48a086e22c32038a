//! What a parent's default POSIX ACL gives a new object, for creates the kernel cannot see
//! happen in the parent (staged in `.xlfs/tmp`, see [`crate::staged`]). Mirrors Linux's
//! `posix_acl_create` and `posix_acl_create_masq` (fs/posix_acl.c): the default ACL replaces
//! the umask; its entries are masked by the mode asked for, and the mode becomes what the
//! masked ACL grants; a directory inherits the default ACL itself; the access ACL is stored
//! only when the mode cannot say it all (named users or groups, or a mask entry).
//!
//! Values are the `system.posix_acl_*` xattr format: a little-endian u32 version (2), then
//! entries of (u16 tag, u16 perm, u32 id).

/// The xattr holding an object's access ACL.
pub const ACCESS: &std::ffi::CStr = c"system.posix_acl_access";
/// The xattr holding a directory's default ACL.
pub const DEFAULT: &std::ffi::CStr = c"system.posix_acl_default";

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AclEntry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// What a new object gets from its parent's default ACL.
#[derive(Debug, PartialEq, Eq)]
pub struct Inherited {
    /// The permission bits (setuid/setgid/sticky of the mode asked for kept).
    pub mode: u32,
    /// The access ACL to store, `None` when the mode says it all.
    pub access: Option<Vec<u8>>,
}

fn parse(v: &[u8]) -> Option<Vec<AclEntry>> {
    let (head, body) = v.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*head) != VERSION || !body.len().is_multiple_of(8) {
        return None;
    }
    Some(
        body.chunks_exact(8)
            .map(|e| AclEntry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u16::from_le_bytes([e[2], e[3]]),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect(),
    )
}

fn encode(entries: &[AclEntry]) -> Vec<u8> {
    let mut v = VERSION.to_le_bytes().to_vec();
    for e in entries {
        v.extend_from_slice(&e.tag.to_le_bytes());
        v.extend_from_slice(&e.perm.to_le_bytes());
        v.extend_from_slice(&e.id.to_le_bytes());
    }
    v
}

/// What an object created with `mode` (unmasked by any umask) under a parent whose default
/// ACL is `default` gets. `None` for a value the kernel would not have stored (EIO there).
pub fn inherit(default: &[u8], mode: u32) -> Option<Inherited> {
    let mut acl = parse(default)?;
    let mut m = mode & 0o777;
    let mut not_equiv = false;
    let (mut group_obj, mut mask) = (None, None);
    for (i, e) in acl.iter_mut().enumerate() {
        match e.tag {
            USER_OBJ => {
                e.perm &= ((m >> 6) & 7) as u16;
                m &= (u32::from(e.perm) << 6) | !0o700;
            }
            USER | GROUP => not_equiv = true,
            GROUP_OBJ => group_obj = Some(i),
            OTHER => {
                e.perm &= (m & 7) as u16;
                m &= u32::from(e.perm) | !0o007;
            }
            MASK => {
                mask = Some(i);
                not_equiv = true;
            }
            _ => return None,
        }
    }
    let g = acl.get_mut(mask.or(group_obj)?)?;
    g.perm &= ((m >> 3) & 7) as u16;
    m &= (u32::from(g.perm) << 3) | !0o070;
    Some(Inherited {
        mode: (mode & 0o7000) | (m & 0o777),
        access: not_equiv.then(|| encode(&acl)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(e: &[(u16, u16, u32)]) -> Vec<u8> {
        let v: Vec<AclEntry> = e
            .iter()
            .map(|&(tag, perm, id)| AclEntry { tag, perm, id })
            .collect();
        encode(&v)
    }
    const NO: u32 = u32::MAX;

    #[test]
    fn a_minimal_default_acl_masks_the_mode_and_stores_no_access_acl() {
        let d = acl(&[(USER_OBJ, 7, NO), (GROUP_OBJ, 5, NO), (OTHER, 0, NO)]);
        // No umask: 0666 asked, u::rwx g::r-x o::--- allowed.
        let got = inherit(&d, 0o666).expect("valid");
        assert_eq!(
            got,
            Inherited {
                mode: 0o640,
                access: None
            }
        );
        let got = inherit(&d, 0o2777).expect("valid");
        assert_eq!(got.mode, 0o2750, "setgid kept");
    }

    #[test]
    fn named_entries_keep_an_access_acl_whose_mask_gives_the_group_bits() {
        let d = acl(&[
            (USER_OBJ, 7, NO),
            (USER, 7, 1000),
            (GROUP_OBJ, 7, NO),
            (MASK, 7, NO),
            (OTHER, 5, NO),
        ]);
        let got = inherit(&d, 0o640).expect("valid");
        assert_eq!(got.mode, 0o640);
        let want = acl(&[
            (USER_OBJ, 6, NO),
            (USER, 7, 1000), // named entries are limited by the mask, not changed
            (GROUP_OBJ, 7, NO),
            (MASK, 4, NO),
            (OTHER, 0, NO),
        ]);
        assert_eq!(got.access, Some(want));
    }

    #[test]
    fn malformed_values_are_refused() {
        assert_eq!(inherit(&[1, 0, 0, 0], 0o777), None, "version 1");
        assert_eq!(inherit(&[2, 0, 0, 0, 1], 0o777), None, "a partial entry");
        assert_eq!(inherit(&acl(&[(USER_OBJ, 7, NO)]), 0o777), None, "no group");
        assert_eq!(inherit(&acl(&[(0x40, 7, NO)]), 0o777), None, "unknown tag");
    }
}
