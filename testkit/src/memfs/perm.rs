//! POSIX permission rules for callers given by [`Ctx`]: owner/group/other bits, root bypass,
//! the sticky-directory rule, and name validation.

use xlator_api::{Ctx, Errno, FileType, Iatt};

/// Read permission bit.
pub(crate) const R: u32 = 4;
/// Write permission bit.
pub(crate) const W: u32 = 2;
/// Execute / search permission bit.
pub(crate) const X: u32 = 1;

/// Longest name in a directory, in bytes.
pub(crate) const NAME_MAX: usize = 255;

pub(crate) fn is_root(cx: &Ctx) -> bool {
    cx.uid() == 0
}

/// Whether `cx` has all of `mask` (`R|W|X` bits) on `a`. Root has every right except
/// executing a non-directory with no execute bit at all.
pub(crate) fn allowed(cx: &Ctx, a: &Iatt, mask: u32) -> bool {
    if is_root(cx) {
        return mask & X == 0 || a.kind == FileType::Directory || a.perm & 0o111 != 0;
    }
    let bits = if cx.uid() == a.uid {
        a.perm >> 6
    } else if cx.in_group(a.gid) {
        a.perm >> 3
    } else {
        a.perm
    } & 7;
    bits & mask == mask
}

/// [`allowed`], as EACCES.
pub(crate) fn check(cx: &Ctx, a: &Iatt, mask: u32) -> Result<(), Errno> {
    if allowed(cx, a, mask) {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}

/// Root or the owner of `a`.
pub(crate) fn is_owner(cx: &Ctx, a: &Iatt) -> bool {
    is_root(cx) || cx.uid() == a.uid
}

/// The sticky-directory rule: in a `+t` directory only root, the directory's owner or the
/// victim's owner may remove or rename the victim (EPERM otherwise).
pub(crate) fn check_sticky(cx: &Ctx, dir: &Iatt, victim: &Iatt) -> Result<(), Errno> {
    if dir.perm & libc::S_ISVTX == 0 || is_owner(cx, dir) || cx.uid() == victim.uid {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

/// The `R|W` rights an `open(2)` with `flags` needs.
pub(crate) fn open_mask(flags: i32) -> u32 {
    let mut mask = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => R,
        libc::O_WRONLY => W,
        _ => R | W,
    };
    if flags & libc::O_TRUNC != 0 {
        mask |= W;
    }
    mask
}

/// Whether an fd with `flags` may read / write.
pub(crate) fn fd_can_read(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_WRONLY
}

pub(crate) fn fd_can_write(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// A name a new entry may have: non-empty (ENOENT), at most [`NAME_MAX`] bytes
/// (ENAMETOOLONG), no `/` or NUL (EINVAL).
pub(crate) fn check_name(name: &str) -> Result<(), Errno> {
    if name.is_empty() {
        Err(Errno::ENOENT)
    } else if name.len() > NAME_MAX {
        Err(Errno::ENAMETOOLONG)
    } else if name.contains(['/', '\0']) {
        Err(Errno::EINVAL)
    } else {
        Ok(())
    }
}

/// `.` or `..`.
pub(crate) fn is_dot(name: &str) -> bool {
    name == "." || name == ".."
}

/// Clears set-user-ID, and set-group-ID when group-executable, as Linux does when a
/// non-root caller writes or anyone changes ownership of a non-directory.
pub(crate) fn kill_suid(a: &mut Iatt) {
    if a.kind == FileType::Directory {
        return;
    }
    a.perm &= !libc::S_ISUID;
    if a.perm & libc::S_IXGRP != 0 {
        a.perm &= !libc::S_ISGID;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(perm: u32, uid: u32, gid: u32) -> Iatt {
        Iatt {
            perm,
            uid,
            gid,
            ..Iatt::default()
        }
    }

    #[test]
    fn owner_group_other_and_root() {
        let a = attr(0o640, 10, 20);
        assert!(allowed(&Ctx::new(10, 0), &a, R | W));
        assert!(!allowed(&Ctx::new(10, 0), &a, X));
        assert!(allowed(&Ctx::builder(11, 5).groups(&[20]).build(), &a, R));
        assert!(!allowed(&Ctx::new(11, 20), &a, W));
        assert!(!allowed(&Ctx::new(12, 12), &a, R));
        assert!(allowed(&Ctx::root(), &a, R | W));
        assert!(!allowed(&Ctx::root(), &a, X));
        // The owner class applies even when it grants less than "other".
        assert!(!allowed(&Ctx::new(10, 0), &attr(0o066, 10, 20), R));
    }

    #[test]
    fn sticky_and_names() {
        let dir = attr(0o1777, 0, 0);
        let victim = attr(0o644, 5, 5);
        assert_eq!(
            check_sticky(&Ctx::new(6, 6), &dir, &victim),
            Err(Errno::EPERM)
        );
        assert_eq!(check_sticky(&Ctx::new(5, 6), &dir, &victim), Ok(()));
        assert_eq!(check_name(&"x".repeat(256)), Err(Errno::ENAMETOOLONG));
        assert_eq!(check_name("a/b"), Err(Errno::EINVAL));
        assert_eq!(check_name(""), Err(Errno::ENOENT));
        assert_eq!(open_mask(libc::O_RDONLY | libc::O_TRUNC), R | W);
    }
}
