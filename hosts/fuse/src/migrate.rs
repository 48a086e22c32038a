//! Open files follow a graph switch.
//!
//! A volfile change that alters the topology (a brick added, a translator inserted) builds a
//! new graph and makes it current; fops in flight finish on the old one. An fd opened on the
//! old graph is unknown to the new one's translators (its protocol/client connections never
//! opened it on their bricks: a write there is EBADF). So a fop on such an fd first moves it,
//! once, as GlusterFS's fuse bridge does (`fuse_migrate_fd`): the same [`Fd`] (id, GFID,
//! flags without O_CREAT, O_EXCL and O_TRUNC) is opened (or opendir'ed) on the current
//! graph's top with root credentials (an open fd keeps the access it was opened with), the
//! table then binds it to the current graph, and it is released on the old graph once the
//! fops still in flight there through it have ended (in the background: the fop that moved
//! it does not wait). One migration per fd at a time: other fops of the fd that find it on an
//! old graph wait for it, then use the new binding. The old graph's `Arc` is held by its fds'
//! bindings, so it drops once each of them moved or was released.
//!
//! A directory fd moves only on a listing from the start (readdir at kernel offset 0, 1 or
//! 2, as after rewinddir): a listing in progress goes on with the cookies of the graph that
//! handed them out, on that graph (another graph's cluster/distribute reads a cookie's top
//! bits as its child index: a one-brick graph's cookie, or one of a distribute with fewer
//! children, would resume in the wrong child or fail with EINVAL). fsyncdir uses the graph
//! the directory is open on. So a directory kept open and never listed from the start again
//! keeps its old graph alive until closed. A directory fd moves without an `opendir` on the
//! new graph: it is opened there when a fop first needs it (see fds.rs), and released on the
//! old one only if it was opened there.
//!
//! What stays behind ([`Stay`]):
//! - an fd through which a lock was asked, and every other fd of that file on the same graph:
//!   its locks are held by the old graph's connections (the brick's features/locks keys them
//!   by connection and lock owner), and releasing the fd there would drop them. It uses the
//!   old graph until released. close(2) of any fd of the file releases the process's locks:
//!   a flush through an fd on another graph is also sent through the locking fds of the file
//!   on theirs ([`Shared::flush_locks_elsewhere`]). A process that locks the same file again
//!   through an fd opened after the switch gets a lock on the new graph's connection, which
//!   conflicts with its own lock on the old one (EAGAIN where a local file system would
//!   merge them). Unlocks are sent through the locking fds on other graphs too
//!   ([`Shared::unlock_elsewhere`]).
//! - an fd whose open on the new graph failed for good (ENOENT or ESTALE: the file was
//!   removed meanwhile and its GFID is gone from the bricks the new graph reaches; or any
//!   other error but the [`transient`] ones): it keeps using the old graph, where the brick
//!   still has it open, so the caller sees what it saw before the switch (an unlinked open
//!   file stays readable and writable). A transient failure (a brick of the new graph not
//!   connected yet: ENOTCONN) leaves that fop on the old graph, and the next fop tries again.
//!   If the old graph's connections are gone too, the caller sees their error (ENOTCONN), as
//!   it would have without a switch.
//!
//! Passthrough opens (the kernel reads the brick's file itself) need nothing more: the
//! kernel's backing file is independent of any graph, and the fops that still come (fstat,
//! flush, release) migrate like any other.

use fuser::FileHandle;
use xlator_api::{Ctx, Errno};

use crate::fds::{FdUse, Stay};
use crate::fs::Shared;

/// Flags of the original open that must not be repeated when reopening on a new graph.
const ONCE_FLAGS: i32 = libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC;

impl Shared {
    /// `u` (a use of the fd of `fh`) on the current graph, migrating the fd there first when
    /// it is open on an older one and may move (see the module).
    pub async fn follow(&self, fh: FileHandle, u: FdUse) -> Result<FdUse, fuser::Errno> {
        let current = self.graph();
        if std::sync::Arc::ptr_eq(u.graph(), &current) || self.fds.stays(fh) != Stay::No {
            return Ok(u);
        }
        // Our own use would keep the old binding busy.
        drop(u);
        let _one = self.fds.migration_lock(fh).lock().await;
        let u = self.fds.get(fh).ok_or(fuser::Errno::EBADF)?;
        let current = self.graph();
        if std::sync::Arc::ptr_eq(u.graph(), &current) || self.fds.stays(fh) != Stay::No {
            return Ok(u);
        }
        let fd = u.fd();
        let again = xlator_api::Fd {
            flags: fd.flags & !ONCE_FLAGS,
            ..fd
        };
        let root = Ctx::root();
        let dir = fd.flags & libc::O_DIRECTORY != 0;
        let r = if dir {
            // Opened on the new graph when first needed (`FdTable::rebind`).
            Ok(())
        } else {
            current.top().open(&root, again).await.map(drop)
        };
        let (old_graph, new_graph) = (u.graph().id(), current.id());
        match r {
            Ok(()) => {
                drop(u);
                let Some(old) = self.fds.rebind(fh, current.clone()) else {
                    // Released meanwhile: close it where it was just opened (a directory
                    // was not).
                    if !dir {
                        let _ = release(&current, &root, again, dir).await;
                    }
                    return Err(fuser::Errno::EBADF);
                };
                tracing::debug!(
                    fd = fd.id.0,
                    gfid = %fd.gfid,
                    old_graph,
                    new_graph,
                    "open fd moved to the current graph"
                );
                // Fops that took the old binding before the switch finish there first.
                self.rt.spawn(async move {
                    old.idle().await;
                    if !old.opened() {
                        return;
                    }
                    if let Err(e) = release(old.graph(), &Ctx::root(), fd, dir).await {
                        tracing::debug!(fd = fd.id.0, error = %e, old_graph, "release on the old graph failed");
                    }
                });
                self.fds.get(fh).ok_or(fuser::Errno::EBADF)
            }
            Err(e) if transient(e) => {
                // Tried again by the next fop; quietly, as that may be every fop for a while.
                tracing::debug!(
                    fd = fd.id.0,
                    gfid = %fd.gfid,
                    old_graph,
                    new_graph,
                    error = %e,
                    "an open fd could not move to the current graph yet; this fop uses its old one"
                );
                Ok(u)
            }
            Err(e) => {
                self.fds.pin(fh);
                tracing::info!(
                    fd = fd.id.0,
                    gfid = %fd.gfid,
                    old_graph,
                    new_graph,
                    error = %e,
                    "an open fd could not move to the current graph; it keeps using its old one"
                );
                Ok(u)
            }
        }
    }
}

impl Shared {
    /// After a flush (close(2)) through `u`: the same flush through each fd of the file that
    /// asked for locks and is open on another graph. features/locks keys POSIX locks by
    /// connection and lock owner, and close(2) of any fd of a file releases the process's
    /// locks on it, also those taken through an fd that stayed on an older graph.
    pub async fn flush_locks_elsewhere(&self, cx: &Ctx, u: &FdUse) {
        for other in self.fds.lockers_elsewhere(&u.fd().gfid, u.graph()) {
            if let Err(e) = other.top().flush(cx, other.fd()).await {
                tracing::debug!(fd = other.fd().id.0, error = %e, "flush of a locking fd on its graph failed");
            }
        }
    }
}

impl Shared {
    /// After an unlock through `u`: the same unlock through each fd of the file that asked
    /// for locks and is open on another graph, where the same owner may hold locks too.
    pub async fn unlock_elsewhere(&self, cx: &Ctx, u: &FdUse, lock: xlator_api::Flock) {
        for other in self.fds.lockers_elsewhere(&u.fd().gfid, u.graph()) {
            let r = other
                .top()
                .lk(cx, other.fd(), xlator_api::LkCmd::Set, lock)
                .await;
            if let Err(e) = r {
                tracing::debug!(fd = other.fd().id.0, error = %e, "unlock on another graph failed");
            }
        }
    }
}

/// Whether a failed open on the new graph may succeed later: a brick of it not connected (yet),
/// or busy. Anything else (ENOENT or ESTALE: the file is gone there; EACCES: a brick squashes
/// root) would fail again on every fop.
fn transient(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOTCONN | Errno::ETIMEDOUT | Errno::EAGAIN | Errno::EINTR
    )
}

async fn release(
    g: &xlfs_core::graph::Graph,
    cx: &Ctx,
    fd: xlator_api::Fd,
    dir: bool,
) -> Result<(), Errno> {
    if dir {
        g.top().releasedir(cx, fd).await
    } else {
        g.top().release(cx, fd).await
    }
}
