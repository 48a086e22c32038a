//! POSIX byte-range locks (fcntl, OFD) and flock(2) locks: getlk and setlk. With
//! FUSE_FLOCK_LOCKS the kernel sends a flock as a whole-file lock whose owner is the open
//! file description (so a fork shares it), and gives it back with the description's last
//! release (FUSE_RELEASE_FLOCK_UNLOCK), where features/locks drops the locks taken through
//! the fd. fuser does not pass the request's FUSE_LK_FLOCK flag on, so on the bricks a flock
//! is a POSIX lock of its own owner: it excludes the flocks and the fcntl locks of other
//! owners, as flock over NFS does on Linux.

use super::*;

impl XlfsFs {
    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_getlk(
        &self,
        req: &Request,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let lock = tri!(
            reply,
            flock(start, end, typ, pid, lock_owner.0).ok_or(fuser::Errno::EINVAL)
        );
        let cx = ctx(req, Need::of(Fop::Lk), Some(lock_owner.0));
        self.spawn(|s| async move {
            let u = follow!(s, reply, fh, fd);
            match u.top().lk(&cx, u.fd(), LkCmd::Get, lock).await {
                Ok(l) => {
                    let (start, end, typ, pid) = lock_reply(&l);
                    reply.locked(start, end, typ, pid);
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_setlk(
        &self,
        req: &Request,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let lock = tri!(
            reply,
            flock(start, end, typ, pid, lock_owner.0).ok_or(fuser::Errno::EINVAL)
        );
        let cmd = if sleep { LkCmd::SetWait } else { LkCmd::Set };
        // The kernel checked the fd's access mode for an fcntl lock, and a flock(2) lock
        // (which comes here too with FUSE_FLOCK_LOCKS) needs none.
        let cx = crate::creds::ctx_builder(req, Need::of(Fop::Lk), Some(lock_owner.0))
            .ext(&xlator_api::LkModeChecked)
            .build();
        // The caller's thread, watched while the lock waits (see lkwait.rs).
        let caller = if sleep { req.pid() } else { 0 };
        // A waiting lock parks in its task, never on the fuser thread.
        let unlock = typ == libc::F_UNLCK;
        self.spawn(|s| async move {
            let u = follow!(s, reply, fh, fd);
            if !unlock {
                // Its locks live on this graph's connections: it stays there (migrate.rs).
                s.fds.mark_locking(fh);
            }
            let lk = u.top().lk(&cx, u.fd(), cmd, lock);
            let r = crate::lkwait::interruptible(caller, lk).await;
            if unlock && r.is_ok() {
                s.unlock_elsewhere(&cx, &u, lock).await;
            }
            reply_empty(reply, r.map(drop));
        });
    }
}
