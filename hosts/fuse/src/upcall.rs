//! Upcalls: what another client changed, dropped from this mount's caches and the kernel's.
//!
//! The bricks tell each client which inodes and names other clients changed (see
//! protocol/server's `upcall`); the graph passes that up to the host's hook, which queues it
//! here without blocking (it runs on a connection's reader). A task then forgets what the
//! host recorded about the inode (attributes, a fresh directory's known-absent names, the
//! capability cache) and tells the kernel to drop its attributes, its pages or the name.
//! The kernel's timeouts still bound staleness when an upcall is lost; upcalls only make it
//! usually much shorter.

use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::mpsc;
use xlator_api::Upcall;
use xlfs_core::volume::Volume;

use crate::fs::Shared;

/// Upcalls waiting to be applied; more are dropped (the timeouts still hold).
const QUEUE: usize = 8192;

/// Upcalls dropped on a full queue (for the host's dump).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Upcalls applied.
pub static APPLIED: AtomicU64 = AtomicU64::new(0);

/// Starts applying the upcalls that reach the top of `volume`'s graphs to `shared`.
pub fn start(shared: &Arc<Shared>, volume: &Volume) {
    let (tx, mut rx) = mpsc::channel::<Upcall>(QUEUE);
    volume.on_upcall(Arc::new(move |up: &Upcall| {
        if tx.try_send(up.clone()).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let weak: Weak<Shared> = Arc::downgrade(shared);
    shared.rt.spawn(async move {
        while let Some(up) = rx.recv().await {
            let Some(s) = weak.upgrade() else {
                return;
            };
            apply(&s, up).await;
        }
    });
}

/// Drops what `up` says is stale, here and in the kernel.
async fn apply(s: &Shared, up: Upcall) {
    APPLIED.fetch_add(1, Ordering::Relaxed);
    // An inode the kernel does not hold has nothing cached.
    let Some(node) = s.inodes.stale(&up.gfid) else {
        return;
    };
    tracing::trace!(ino = node.0, what = up.what, name = %up.name, "upcall");
    if up.says(Upcall::XATTR) {
        s.caps().invalidate(&up.gfid);
    }
    if up.says(Upcall::ENTRY) {
        s.fresh().forget(node);
        let name = std::ffi::OsString::from_vec(up.name.as_bytes().to_vec());
        s.kernel.drop_entry(node, name).await;
    }
    // A directory's "pages" are the kernel's cached listing (FOPEN_CACHE_DIR), which the
    // entry's invalidation drops only when the kernel knew that name.
    if up.says(Upcall::DATA | Upcall::ENTRY) {
        s.kernel.drop_file(node).await;
    } else if up.says(Upcall::ATTR | Upcall::XATTR) {
        s.kernel.drop_attrs(node).await;
    }
}
