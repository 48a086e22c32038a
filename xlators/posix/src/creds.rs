//! Per-thread caller identity. Every blocking job runs its syscalls with the caller's fs uid,
//! fs gid and supplementary groups, so the kernel applies its own permission rules (search and
//! write on the parent, sticky directories, owner-only chmod, chown needing root, setgid
//! inheritance and clearing, suid dropped on write...) exactly as on a local file system. This
//! is what GlusterFS and NFS servers do. Brick bookkeeping (the handle directory, GFID xattrs)
//! runs briefly as root through [`as_root`].
//!
//! For a fop that creates an object the thread's umask is set to 0 for the job (on a private
//! fs_struct, see [`sys::unshare_fs`]) so the caller's `umask` argument is the only one
//! applied.

use std::cell::Cell;

use xlator_api::Ctx;

use crate::sys;

/// Who a fop runs for.
#[derive(Clone, Debug)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Caller {
    pub fn from_ctx(cx: &Ctx) -> Caller {
        Caller {
            uid: cx.uid(),
            gid: cx.gid(),
            groups: cx.groups().to_vec(),
        }
    }
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

thread_local! {
    /// Whether this thread has its own fs_struct (so `umask` is private to it).
    static PRIVATE_FS: Cell<Option<bool>> = const { Cell::new(None) };
    /// The (uid, gid) this thread currently runs a job for, if switched.
    static CURRENT: Cell<Option<(u32, u32)>> = const { Cell::new(None) };
}

/// Restores root credentials and the umask when the job ends (also on panic).
pub struct CredsGuard {
    switched: bool,
    old_umask: Option<u32>,
    base_groups: Option<Vec<u32>>,
}

/// Switches this thread to `caller` (when `switch` is set: the brick runs as root), with a
/// umask of 0 when `creating`.
pub fn enter(caller: &Caller, switch: bool, base_groups: &[u32], creating: bool) -> CredsGuard {
    let private = creating
        && PRIVATE_FS.with(|p| match p.get() {
            Some(v) => v,
            None => {
                let ok = sys::unshare_fs().is_ok();
                p.set(Some(ok));
                ok
            }
        });
    let old_umask = private.then(|| sys::umask(0));
    let needs = switch && (caller.uid != 0 || caller.gid != 0 || !caller.groups.is_empty());
    if needs {
        // Groups first: once fsuid is not 0 we still hold CAP_SETGID, but keep a clear order.
        let _ = sys::set_thread_groups(&caller.groups);
        sys::set_fsgid(caller.gid);
        sys::set_fsuid(caller.uid);
        CURRENT.with(|c| c.set(Some((caller.uid, caller.gid))));
    }
    CredsGuard {
        switched: needs,
        old_umask,
        base_groups: needs.then(|| base_groups.to_vec()),
    }
}

impl Drop for CredsGuard {
    fn drop(&mut self) {
        if self.switched {
            sys::set_fsuid(0);
            sys::set_fsgid(0);
            if let Some(g) = &self.base_groups {
                let _ = sys::set_thread_groups(g);
            }
            CURRENT.with(|c| c.set(None));
        }
        if let Some(m) = self.old_umask {
            sys::umask(m);
        }
    }
}

/// Runs `f` with root fs credentials (brick bookkeeping), then switches back.
pub fn as_root<R>(f: impl FnOnce() -> R) -> R {
    struct Back(Option<(u32, u32)>);
    impl Drop for Back {
        fn drop(&mut self) {
            if let Some((u, g)) = self.0 {
                sys::set_fsgid(g);
                sys::set_fsuid(u);
            }
        }
    }
    let cur = CURRENT.with(Cell::get);
    if cur.is_some() {
        sys::set_fsuid(0);
        sys::set_fsgid(0);
    }
    let _back = Back(cur);
    f()
}
