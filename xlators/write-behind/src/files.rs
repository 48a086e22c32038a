//! Per-file state by GFID (so anonymous fds and every fd of a file share one queue), created on
//! first use and dropped as soon as it is idle and unreferenced, so memory follows the files
//! with writes in progress, not every file ever written.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use xlator_api::{Ctx, Fd, Gfid};

use crate::window::{Origin, Window, WindowStats};

/// Who issued a cached write: the fd and the caller it is sent down with. Writes aggregate
/// only within one fd and one caller (credentials and lock owner), as in GlusterFS.
#[derive(Clone, Debug)]
pub(crate) struct Writer {
    pub cx: Ctx,
    pub fd: Fd,
    pub flags: i32,
}

impl Origin for Writer {
    fn can_merge(&self, other: &Writer) -> bool {
        self.fd == other.fd
            && self.flags == other.flags
            && self.cx.uid() == other.cx.uid()
            && self.cx.gid() == other.cx.gid()
            && self.cx.groups() == other.cx.groups()
            && self.cx.lk_owner() == other.cx.lk_owner()
    }
}

/// One file's state and the wake-up of everyone waiting on it.
pub(crate) struct File {
    gfid: Gfid,
    window: Mutex<Window<Writer>>,
    changed: Notify,
    /// Live [`FileRef`]s; changed from 0 only under the registry lock.
    users: AtomicUsize,
    /// A timer will end the growth of the held aggregate (`Engine::send_held_after`).
    hold_timer: AtomicBool,
}

impl File {
    /// Runs `f` on the window. The lock is never held across an await.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Window<Writer>) -> R) -> R {
        f(&mut self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Window<Writer>> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the caller is to start the hold timer (none is running).
    pub(crate) fn arm_hold_timer(&self) -> bool {
        !self.hold_timer.swap(true, Ordering::AcqRel)
    }

    /// The hold timer fired: the next held write starts another.
    pub(crate) fn disarm_hold_timer(&self) {
        self.hold_timer.store(false, Ordering::Release);
    }

    /// Wakes every waiter to re-check its condition.
    pub(crate) fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// A wake-up future for the next change; `enable` it before checking a condition.
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Waits until `done` holds (checked now and after every change).
    pub(crate) async fn wait_until(&self, mut done: impl FnMut(&mut Window<Writer>) -> bool) {
        loop {
            let mut notified = pin!(self.notified());
            // Register before checking, so a change in between still wakes us.
            notified.as_mut().enable();
            if self.with(&mut done) {
                return;
            }
            notified.await;
        }
    }
}

/// The registry of file states.
#[derive(Default)]
pub(crate) struct Files {
    map: Mutex<HashMap<Gfid, Arc<File>>>,
}

impl Files {
    fn map(&self) -> MutexGuard<'_, HashMap<Gfid, Arc<File>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_ref(self: &Arc<Self>, file: &Arc<File>) -> FileRef {
        file.users.fetch_add(1, Ordering::SeqCst);
        FileRef {
            files: self.clone(),
            file: file.clone(),
        }
    }

    /// The state of `gfid`, made if there is none.
    pub(crate) fn get_or_make(self: &Arc<Self>, gfid: Gfid) -> FileRef {
        let mut map = self.map();
        let file = map.entry(gfid).or_insert_with(|| {
            Arc::new(File {
                gfid,
                window: Mutex::new(Window::new()),
                changed: Notify::new(),
                users: AtomicUsize::new(0),
                hold_timer: AtomicBool::new(false),
            })
        });
        self.take_ref(file)
    }

    /// The state of `gfid` if it has one (no state: nothing cached or in flight).
    pub(crate) fn get(self: &Arc<Self>, gfid: Gfid) -> Option<FileRef> {
        let map = self.map();
        map.get(&gfid).map(|f| self.take_ref(f))
    }

    /// Every file with state.
    pub(crate) fn all(self: &Arc<Self>) -> Vec<FileRef> {
        let map = self.map();
        map.values().map(|f| self.take_ref(f)).collect()
    }

    /// Statistics of every file with state, for statedumps.
    pub(crate) fn stats(&self) -> Vec<(Gfid, WindowStats)> {
        let files: Vec<Arc<File>> = self.map().values().cloned().collect();
        files
            .iter()
            .map(|f| (f.gfid, f.with(|w| w.stats())))
            .collect()
    }
}

/// A counted reference to one file's state; the last one drops idle state.
pub(crate) struct FileRef {
    files: Arc<Files>,
    file: Arc<File>,
}

impl FileRef {
    pub(crate) fn gfid(&self) -> Gfid {
        self.file.gfid
    }
}

impl std::ops::Deref for FileRef {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Clone for FileRef {
    fn clone(&self) -> FileRef {
        // This reference keeps `users` above zero, so the entry cannot be dropped meanwhile.
        self.file.users.fetch_add(1, Ordering::SeqCst);
        FileRef {
            files: self.files.clone(),
            file: self.file.clone(),
        }
    }
}

impl Drop for FileRef {
    fn drop(&mut self) {
        // Lock order: registry, then window. Taking a reference needs the registry lock, so no
        // one can revive the entry between the checks and the removal.
        let mut map = self.files.map();
        if self.file.users.fetch_sub(1, Ordering::SeqCst) == 1
            && self.file.with(|w| w.is_idle())
            && map
                .get(&self.file.gfid)
                .is_some_and(|f| Arc::ptr_eq(f, &self.file))
        {
            map.remove(&self.file.gfid);
        }
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::Buf;

    use super::*;
    use crate::window::Limits;

    const L: Limits = Limits {
        window: 1 << 20,
        aggregate: 1 << 17,
        trickle: true,
    };

    fn writer() -> Writer {
        Writer {
            cx: Ctx::root(),
            fd: Fd::anonymous(Gfid::ROOT, 2),
            flags: 0,
        }
    }

    #[test]
    fn state_lives_while_referenced_or_busy() {
        let files = Arc::new(Files::default());
        let g = Gfid([7; 16]);
        let a = files.get_or_make(g);
        let b = a.clone();
        drop(a);
        assert!(files.get(g).is_some());
        let r = b.with(|w| w.admit(&mut None, &L, writer(), 0, Buf::zeroed(1), false));
        let crate::window::Admit::Acked(seq) = r else {
            panic!("not acked: {r:?}")
        };
        drop(b);
        let c = files.get(g).expect("busy state is kept without references");
        c.with(|w| w.complete(seq));
        drop(c);
        assert!(
            files.get(g).is_none(),
            "idle state is dropped with its last reference"
        );
        assert!(files.stats().is_empty());
    }

    #[test]
    fn merging_needs_same_fd_and_caller() {
        let a = writer();
        assert!(a.can_merge(&a.clone()));
        let other_uid = Writer {
            cx: Ctx::new(1, 0),
            ..a.clone()
        };
        assert!(!a.can_merge(&other_uid));
        let other_fd = Writer {
            fd: Fd::anonymous(Gfid([1; 16]), 2),
            ..a.clone()
        };
        assert!(!a.can_merge(&other_fd));
    }
}
