//! Notifications to the kernel (fuser's `Notifier`): dropping cached pages that a direct
//! write made stale, cached attributes that an ACL changed, and whatever another client
//! changed (`upcall`).
//!
//! A notification is a write to `/dev/fuse` that the kernel acts on in the writer's context:
//! invalidating pages locks each one, and a page is locked while a read of it is in flight
//! to us (or written back, for a dirty one). So it never runs on a fuser thread, which may
//! be the one that has to answer that read: it runs on the blocking pool.

use std::sync::OnceLock;

use fuser::{INodeNo, Notifier};

/// The session's notifier, once the session exists (it is made after [`crate::fs::Shared`]
/// and set before any request is served).
#[derive(Default)]
pub struct KernelCache {
    notifier: OnceLock<Notifier>,
}

impl KernelCache {
    pub fn set(&self, n: Notifier) {
        let _ = self.notifier.set(n);
    }

    /// Drops the kernel's cached pages of `ino` over `[offset, offset + len)` (and its cached
    /// attributes, which the kernel invalidates with them), and returns once that is done.
    pub async fn drop_pages(&self, ino: INodeNo, offset: u64, len: u64) {
        let Some(n) = self.notifier.get().cloned() else {
            return;
        };
        let (Ok(off), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        if len == 0 {
            // 0 would mean "to the end of the file".
            return;
        }
        notify(ino, move || n.inval_inode(ino, off, len)).await;
    }

    /// Drops all of the kernel's cached pages of `ino`, and its attributes.
    pub async fn drop_file(&self, ino: INodeNo) {
        let Some(n) = self.notifier.get().cloned() else {
            return;
        };
        // Length 0 from offset 0: the whole file.
        notify(ino, move || n.inval_inode(ino, 0, 0)).await;
    }

    /// Drops the kernel's cached name `name` in directory `parent` (its next use is looked
    /// up again). Takes the directory's lock in the kernel: never await it while a request
    /// that holds that lock waits for this one.
    pub async fn drop_entry(&self, parent: INodeNo, name: std::ffi::OsString) {
        let Some(n) = self.notifier.get().cloned() else {
            return;
        };
        notify(parent, move || n.inval_entry(parent, &name)).await;
    }

    /// Drops the kernel's cached attributes of `ino` (not its pages).
    pub async fn drop_attrs(&self, ino: INodeNo) {
        let Some(n) = self.notifier.get().cloned() else {
            return;
        };
        // A negative offset: attributes only.
        notify(ino, move || n.inval_inode(ino, -1, 0)).await;
    }
}

/// Sends a notification from the blocking pool and waits for the kernel to act on it.
async fn notify(ino: INodeNo, send: impl FnOnce() -> std::io::Result<()> + Send + 'static) {
    match tokio::task::spawn_blocking(send).await {
        // ENOENT (an inode the kernel no longer has) is treated as done by fuser.
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(ino = ino.0, "cache invalidation refused: {e}"),
        Err(e) => tracing::warn!(ino = ino.0, "cache invalidation task failed: {e}"),
    }
}
