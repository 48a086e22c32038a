//! Per-thread caller identity. Every blocking job runs its syscalls with the caller's fs uid,
//! fs gid and supplementary groups, so the kernel applies its own permission rules (search and
//! write on the parent, sticky directories, owner-only chmod, chown needing root, setgid
//! inheritance and clearing, suid dropped on write...) exactly as on a local file system. This
//! is what GlusterFS and NFS servers do. Brick bookkeeping (the handle directory, GFID xattrs)
//! runs briefly as root through [`as_root`].
//!
//! For a fop that creates an object the thread's umask is set to the caller's `umask`
//! argument for the job (on a private fs_struct, see [`sys::unshare_fs`]) and the mode goes to
//! the kernel unmasked, so the kernel decides as for a local caller: a parent's default ACL
//! replaces the umask (`posix_acl_create`), otherwise the umask applies. Brick bookkeeping
//! inside such a job ([`as_root`]) runs with a umask of 0. Where a private fs_struct cannot be
//! had, the umask is applied to the mode in user space instead (and default ACLs then see a
//! mode already masked).
//!
//! # Setuid and setgid
//! The kernel clears them by the credentials of the thread that makes the change, which is
//! why every write, truncate, fallocate and chown here runs as the caller (a thread whose fs
//! uid is not 0 has no CAP_FSETID). Its rules (fs/attr.c `setattr_should_drop_suidgid`,
//! `setattr_should_drop_sgid`, fs/inode.c `file_remove_privs`, fs/open.c `chown_common`,
//! `inode_init_owner`/`mode_strip_sgid`, as of Linux 6.x), which the brick relies on and
//! which `tests/privs.rs` checks:
//! - write, truncate (also `open(O_TRUNC)`), fallocate, punch hole, zero range of a regular
//!   file by a caller without CAP_FSETID: S_ISUID is cleared; S_ISGID is cleared when S_IXGRP
//!   is set, or when the caller is not in the file's group. Root (CAP_FSETID) keeps both.
//! - chown/chgrp of a non-directory, by anyone, root included: S_ISUID is cleared; S_ISGID
//!   when S_IXGRP is set, or when the caller is not in the group and lacks CAP_FSETID. A mode
//!   given in the same setattr is applied after the chown and stands as given.
//! - a new object in a setgid directory gets the directory's group; a new directory also
//!   S_ISGID; a new non-directory asked with S_ISGID and S_IXGRP loses S_ISGID unless its
//!   creator is in that group or has CAP_FSETID.
//!
//! A caller who is root but lacks CAP_FSETID (a FUSE request flagged `FUSE_WRITE_KILL_SUIDGID`
//! from uid 0) is not visible here: the host clears the bits for it.

use std::cell::Cell;

use xlator_api::{Ctx, Errno};

use crate::sys;

/// Who a fop runs for.
#[derive(Clone, Debug)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// Set by [`enter`] for a creating job: the kernel applies the caller's umask (it is the
    /// thread's), so modes go to it unmasked. Otherwise [`Caller::create_mode`] masks them.
    pub kernel_umask: bool,
}

impl Caller {
    pub fn from_ctx(cx: &Ctx) -> Caller {
        Caller {
            uid: cx.uid(),
            gid: cx.gid(),
            groups: cx.groups().to_vec(),
            kernel_umask: false,
        }
    }
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
    /// Whether the caller is in group `gid` (its own or a supplementary one).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
    /// The permission bits of `mode` to pass to a creating syscall, given the caller's
    /// `umask`: as they are when the kernel applies the umask itself (see the module docs).
    pub fn create_mode(&self, mode: u32, umask: u32) -> u32 {
        if self.kernel_umask {
            mode & 0o7777
        } else {
            mode & !umask & 0o7777
        }
    }
}

thread_local! {
    /// Whether this thread has its own fs_struct (so `umask` is private to it).
    static PRIVATE_FS: Cell<Option<bool>> = const { Cell::new(None) };
    /// The (uid, gid) this thread currently runs a job for, if switched.
    static CURRENT: Cell<Option<(u32, u32)>> = const { Cell::new(None) };
    /// The caller's umask while a creating job has set it (not 0), for [`as_root`].
    static JOB_UMASK: Cell<u32> = const { Cell::new(0) };
}

/// Restores root credentials and the umask when the job ends (also on panic).
pub struct CredsGuard {
    switched: bool,
    old_umask: Option<u32>,
    base_groups: Option<Vec<u32>>,
}

/// The id no caller may have: `(uid_t)-1` is "no id" to the kernel (`setfsuid(-1)` changes
/// nothing and `chown(-1)` means "leave it"), so a caller named so would run as whatever the
/// thread was, root on a brick. Refused (EPERM) with every other id the kernel will not
/// switch to.
pub const NO_ID: u32 = u32::MAX;

/// Switches this thread to `caller` (when `switch` is set: the brick runs as root), with the
/// umask `creating` (the caller's, for a fop that creates an object: see the module docs).
/// Sets `caller.kernel_umask` when the kernel will apply it.
///
/// Fails closed: EPERM, with the thread back at root and the fop not run, when the caller
/// names [`NO_ID`] (as uid, gid or a group) or when the kernel does not switch to its ids
/// (setgroups fails, or the fs uid or fs gid read back is not the one asked for: setfsuid
/// and setfsgid report no error, they leave the old id).
pub fn enter(
    caller: &mut Caller,
    switch: bool,
    base_groups: &[u32],
    creating: Option<u32>,
) -> Result<CredsGuard, Errno> {
    if caller.uid == NO_ID || caller.gid == NO_ID || caller.groups.contains(&NO_ID) {
        tracing::debug!(
            "refused a caller with uid {} gid {} groups {:?}: (uid_t)-1 is no id",
            caller.uid,
            caller.gid,
            caller.groups
        );
        return Err(Errno::EPERM);
    }
    let private = creating.is_some()
        && PRIVATE_FS.with(|p| match p.get() {
            Some(v) => v,
            None => {
                let ok = sys::unshare_fs().is_ok();
                p.set(Some(ok));
                ok
            }
        });
    let old_umask = match creating {
        Some(mask) if private => {
            let mask = mask & 0o777;
            JOB_UMASK.with(|m| m.set(mask));
            caller.kernel_umask = true;
            Some(sys::umask(mask))
        }
        _ => None,
    };
    let mut guard = CredsGuard {
        switched: false,
        old_umask,
        base_groups: None,
    };
    let needs = switch && (caller.uid != 0 || caller.gid != 0 || !caller.groups.is_empty());
    if needs {
        // From here on the guard puts root back, also when the switch fails half way.
        guard.switched = true;
        guard.base_groups = Some(base_groups.to_vec());
        if let Err(why) = switch_to(caller.uid, caller.gid, &caller.groups) {
            tracing::warn!("refused a fop (EPERM): cannot run it as the caller: {why}");
            return Err(Errno::EPERM);
        }
        CURRENT.with(|c| c.set(Some((caller.uid, caller.gid))));
    }
    Ok(guard)
}

/// Switches this thread's groups, fs gid and fs uid, reading each id back.
pub(crate) fn switch_to(uid: u32, gid: u32, groups: &[u32]) -> Result<(), String> {
    // Groups first: once fsuid is not 0 we still hold CAP_SETGID, but keep a clear order.
    sys::set_thread_groups(groups).map_err(|e| format!("setgroups({groups:?}): {e}"))?;
    sys::set_fsgid(gid);
    let now = sys::fsgid();
    if now != gid {
        return Err(format!("setfsgid({gid}) left the fs gid at {now}"));
    }
    sys::set_fsuid(uid);
    let now = sys::fsuid();
    if now != uid {
        return Err(format!("setfsuid({uid}) left the fs uid at {now}"));
    }
    Ok(())
}

impl Drop for CredsGuard {
    fn drop(&mut self) {
        if self.switched {
            sys::set_fsuid(0);
            sys::set_fsgid(0);
            if sys::fsuid() != 0 || sys::fsgid() != 0 {
                // Cannot happen while the process is root (it keeps CAP_SETUID); the thread
                // then runs its next jobs with less privilege, never more.
                tracing::error!("could not switch a brick thread back to root fs ids");
            }
            if let Some(g) = &self.base_groups {
                let _ = sys::set_thread_groups(g);
            }
            CURRENT.with(|c| c.set(None));
        }
        if let Some(m) = self.old_umask {
            JOB_UMASK.with(|j| j.set(0));
            sys::umask(m);
        }
    }
}

/// Runs `f` with root fs credentials and a umask of 0 (brick bookkeeping: its modes are meant
/// as given), then switches back.
pub fn as_root<R>(f: impl FnOnce() -> R) -> R {
    struct Back(Option<(u32, u32)>, u32);
    impl Drop for Back {
        fn drop(&mut self) {
            if let Some((u, g)) = self.0 {
                sys::set_fsgid(g);
                sys::set_fsuid(u);
            }
            if self.1 != 0 {
                sys::umask(self.1);
            }
        }
    }
    let cur = CURRENT.with(Cell::get);
    if cur.is_some() {
        sys::set_fsuid(0);
        sys::set_fsgid(0);
    }
    let mask = JOB_UMASK.with(Cell::get);
    if mask != 0 {
        sys::umask(0);
    }
    let _back = Back(cur, mask);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-back catches a switch the kernel did not make, whatever the reason: here
    /// (uid_t)-1, given straight to [`switch_to`] past [`enter`]'s own check.
    #[test]
    fn a_switch_the_kernel_did_not_make_is_an_error() {
        if sys::geteuid() != 0 {
            println!("SKIPPED: needs root");
            return;
        }
        // A thread of its own: the ids are per thread and must not leak into other tests.
        std::thread::spawn(|| {
            let base = sys::get_groups();
            let e = switch_to(NO_ID, 1000, &[]).expect_err("uid -1");
            assert!(e.contains("setfsuid"), "{e}");
            assert_eq!(sys::fsuid(), 0, "still root: the caller must not run");
            let e = switch_to(1000, NO_ID, &[]).expect_err("gid -1");
            assert!(e.contains("setfsgid"), "{e}");
            switch_to(1000, 1000, &[1000]).expect("a plain user");
            assert_eq!((sys::fsuid(), sys::fsgid()), (1000, 1000));
            switch_to(0, 0, &base).expect("back to root");
            assert_eq!((sys::fsuid(), sys::fsgid()), (0, 0));
        })
        .join()
        .expect("test thread");
    }

    #[test]
    fn enter_refuses_the_no_id_before_switching() {
        std::thread::spawn(|| {
            for (uid, gid, groups) in [(NO_ID, 0, vec![]), (0, NO_ID, vec![]), (5, 5, vec![NO_ID])]
            {
                let mut c = Caller {
                    uid,
                    gid,
                    groups,
                    kernel_umask: false,
                };
                let r = enter(&mut c, true, &[], None);
                assert_eq!(r.err(), Some(Errno::EPERM), "{c:?}");
                assert_eq!(sys::fsuid(), sys::geteuid(), "the thread was not switched");
            }
        })
        .join()
        .expect("test thread");
    }
}
