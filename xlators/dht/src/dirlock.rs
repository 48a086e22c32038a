//! Directory locks: `mkdir`, `rmdir` and a directory's `rename` hold an entrylk on their
//! names (domain [`DIR_LOCK_DOMAIN`]) on child 0, where every client locks a name, for the
//! whole operation; a lookup that would make a missing copy of a directory takes the name's
//! lock without waiting (and leaves the repair to a later lookup when it is busy), then
//! checks the directory is still there. Without them, a lookup could make copies of a
//! directory another client was removing (copies left behind with no copy on child 0), or
//! a mkdir's own copies before it made them (it then failed EEXIST and removed child 0's).
//! GlusterFS takes an entrylk on the hashed child, and inodelks on every child for rmdir.
//!
//! A directory's layout is written (a lookup's repair, `fix-layout`, `commit-layout`) under
//! its layout lock: an inodelk in domain [`LAYOUT_LOCK_DOMAIN`] on child 0's copy, waited
//! for, with the slices read again under it. Two clients that find one anomalous layout at
//! once then write one layout: the second finds the first's and uses it. Without the lock
//! each wrote the layout it computed, possibly from slices read halfway through the other's
//! writes, and a layout marked trusted by one could replace the other's under which files
//! were already placed. (GlusterFS locks a layout heal in its own inodelk domain too.)
//!
//! A directory's rename to another parent holds the volume's directory-move lock (an
//! inodelk in domain [`MOVE_LOCK_DOMAIN`] on child 0's root) around its name locks, as the
//! kernel holds `s_vfs_rename_mutex` around a local one: two such renames from two clients
//! (`mv a b/` beside `mv b a/`) lock different names, and each child's file system refused
//! the second of them as a loop, but the children took them in different orders, so the
//! children kept `b/a` on some and `a/b` on the others. One at a time, the second finds
//! the first done everywhere and every child refuses it alike (EINVAL).

use std::future::Future;

use xlator_api::{Ctx, Errno, Gfid, LkCmd, Loc, LockKind};

use crate::migrate::{new_owner, whole};
use crate::shared::Shared;

/// The entrylk domain of distribute's directory locks.
pub const DIR_LOCK_DOMAIN: &str = "cluster/distribute.dir";

/// The inodelk domain of distribute's layout lock.
pub const LAYOUT_LOCK_DOMAIN: &str = "cluster/distribute.layout";

/// The inodelk domain of distribute's directory-move lock (on the root, child 0).
pub const MOVE_LOCK_DOMAIN: &str = "cluster/distribute.move";

pub(crate) use xlator_api::sdk::NameLocks;

impl Shared {
    /// Locks `locs` in [`DIR_LOCK_DOMAIN`] on child 0 ([`NameLocks::lock`]).
    pub(crate) async fn lock_names(&self, locs: &[&Loc], wait: bool) -> Result<NameLocks, Errno> {
        NameLocks::lock(&self.children[0], DIR_LOCK_DOMAIN, locs, wait).await
    }

    pub(crate) async fn unlock_names(&self, held: NameLocks) {
        for (loc, e) in held.unlock(&self.children[0]).await {
            // Freed anyway when this client's connection to the brick goes.
            self.log(
                xlator_api::LogLevel::Warn,
                &format!("unlocking directory name {}/{}: {e}", loc.parent, loc.name),
            );
        }
    }

    /// `op` with `locs` locked (waiting for them).
    pub(crate) async fn with_names<R>(
        &self,
        locs: &[&Loc],
        op: impl Future<Output = Result<R, Errno>>,
    ) -> Result<R, Errno> {
        let held = self.lock_names(locs, true).await?;
        let r = op.await;
        self.unlock_names(held).await;
        r
    }

    /// `op` with directory `dir`'s layout lock held (see the module docs). Without lock
    /// support on child 0 (ENOSYS), `op` runs unlocked; another failure to lock is `op`'s.
    pub(crate) async fn with_layout_lock<R>(
        &self,
        dir: Gfid,
        op: impl Future<Output = Result<R, Errno>>,
    ) -> Result<R, Errno> {
        self.with_inodelk(LAYOUT_LOCK_DOMAIN, dir, op).await
    }

    /// `op` with the volume's directory-move lock held (see the module docs): a directory's
    /// rename to another parent. Without lock support on child 0, `op` runs unlocked.
    pub(crate) async fn with_move_lock<R>(
        &self,
        op: impl Future<Output = Result<R, Errno>>,
    ) -> Result<R, Errno> {
        self.with_inodelk(MOVE_LOCK_DOMAIN, Gfid::ROOT, op).await
    }

    /// `op` with a whole-object inodelk in `domain` on child 0's `gfid`, waited for.
    async fn with_inodelk<R>(
        &self,
        domain: &str,
        gfid: Gfid,
        op: impl Future<Output = Result<R, Errno>>,
    ) -> Result<R, Errno> {
        let owner = new_owner();
        let cx = Ctx::builder(0, 0).lk_owner(owner).build();
        let lock =
            |kind, cmd| self.children[0].inodelk(&cx, domain.into(), gfid, cmd, whole(kind, owner));
        match lock(LockKind::Write, LkCmd::SetWait).await {
            Ok(()) => {}
            Err(Errno::ENOSYS) => return op.await,
            Err(e) => return Err(e),
        }
        let r = op.await;
        if let Err(e) = lock(LockKind::Unlock, LkCmd::Set).await {
            // Freed anyway when this client's connection to the brick goes.
            self.log(
                xlator_api::LogLevel::Warn,
                &format!("unlocking {gfid} in lock domain {domain}: {e}"),
            );
        }
        r
    }
}
