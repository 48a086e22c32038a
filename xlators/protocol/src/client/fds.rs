//! The client's table of open fds, and their re-open after a reconnect.
//!
//! The server forgets a client's fds when its connection drops (it releases them, which also
//! drops the POSIX locks taken through them). After a reconnect, the first fop on an fd opened
//! over an older connection re-opens it transparently by GFID with its original flags (minus
//! `O_CREAT|O_EXCL|O_TRUNC`), as GlusterFS does. An fd through which a POSIX lock was taken is
//! not re-opened: it fails with EBADF, so the application learns that its lock is gone instead
//! of writing unprotected (GlusterFS's `strict-locks`). A re-open that fails (the file was
//! removed meanwhile) also gives EBADF.
//!
//! Writes the brick acknowledged but nobody synced are lost if its machine crashes. Each fd
//! remembers the brick's boot id ([`crate::wire::Welcome::boot_id`]) its unsynced writes were
//! acknowledged under; re-opened on a brick with another boot id, its next fsync or flush
//! fails with EIO (once, as the kernel reports a lost writeback on each fd once), instead of
//! the 0 that would tell the application its data is safe. A successful fsync clears it.
//! Writes through anonymous fds (xlfs-nfsd's) are remembered by GFID the same way, and the
//! next fsync of that GFID through an anonymous fd fails with EIO once (NFS COMMIT then gives
//! its clients a new write verifier, so that they send those writes again).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use xlator_api::{Ctx, Errno, Fd, FdId, Gfid};

use super::conn::Conn;
use crate::wire::Request;

#[derive(Clone, Copy, Debug)]
struct OpenFd {
    gfid: Gfid,
    flags: i32,
    dir: bool,
    /// Connection generation the fd is open on.
    generation: u64,
    /// A POSIX lock was taken through it.
    locked: bool,
    /// The boot id its writes not yet synced were acknowledged under.
    unsynced: Option<u64>,
    /// Such writes were acknowledged by a brick that has rebooted since: the next fsync or
    /// flush fails with EIO.
    lost: bool,
}

/// Files with writes through anonymous fds not yet synced that are remembered at most; past
/// it new ones are not (logged once).
const ANON_MAX: usize = 1 << 18;

#[derive(Default)]
pub struct FdTable {
    map: Mutex<HashMap<FdId, OpenFd>>,
    /// Per GFID, the boot id its unsynced writes through anonymous fds were acknowledged under.
    anon: Mutex<HashMap<Gfid, u64>>,
    anon_full: std::sync::atomic::AtomicBool,
    reopen: tokio::sync::Mutex<()>,
}

impl FdTable {
    fn map(&self) -> MutexGuard<'_, HashMap<FdId, OpenFd>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn opened(&self, fd: Fd, gfid: Gfid, dir: bool, generation: u64) {
        if fd.is_anonymous() {
            return;
        }
        let o = OpenFd {
            gfid,
            flags: fd.flags,
            dir,
            generation,
            locked: false,
            unsynced: None,
            lost: false,
        };
        self.map().insert(fd.id, o);
    }

    /// Forgets `id`; returns the generation it was open on.
    pub fn closed(&self, id: FdId) -> Option<u64> {
        self.map().remove(&id).map(|o| o.generation)
    }

    /// A write through `id` was acknowledged by a brick of boot id `boot` (not for O_SYNC or
    /// O_DSYNC fds, whose writes are synced before they are acknowledged).
    pub fn wrote(&self, fd: &Fd, boot: u64) {
        if fd.flags & (libc::O_SYNC | libc::O_DSYNC) != 0 {
            return;
        }
        if fd.is_anonymous() {
            let mut anon = self.anon.lock().unwrap_or_else(PoisonError::into_inner);
            if anon.len() < ANON_MAX || anon.contains_key(&fd.gfid) {
                anon.entry(fd.gfid).or_insert(boot);
            } else if !self
                .anon_full
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    "{ANON_MAX} files have writes through anonymous fds (NFS) not yet synced: \
                     a brick reboot's loss of writes to further files is not detected"
                );
            }
            return;
        }
        if let Some(o) = self.map().get_mut(&fd.id) {
            o.unsynced.get_or_insert(boot);
        }
    }

    /// An fsync through `fd` succeeded: its writes (an anonymous fd's: its file's) are safe.
    pub fn synced(&self, fd: &Fd) {
        if fd.is_anonymous() {
            self.anon
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&fd.gfid);
            return;
        }
        if let Some(o) = self.map().get_mut(&fd.id) {
            o.unsynced = None;
        }
    }

    /// Whether `fd` lost acknowledged writes to a brick reboot, given the boot id of the
    /// brick now (`None`: not connected, not known yet); reported once.
    pub fn take_lost(&self, fd: &Fd, boot_now: Option<u64>) -> bool {
        if fd.is_anonymous() {
            let mut anon = self.anon.lock().unwrap_or_else(PoisonError::into_inner);
            return match (anon.get(&fd.gfid), boot_now) {
                (Some(then), Some(now)) if *then != now => {
                    anon.remove(&fd.gfid);
                    true
                }
                _ => false,
            };
        }
        let mut map = self.map();
        let Some(o) = map.get_mut(&fd.id) else {
            return false;
        };
        if let (Some(then), Some(now)) = (o.unsynced, boot_now)
            && then != now
        {
            o.lost = true;
            o.unsynced = None;
        }
        std::mem::take(&mut o.lost)
    }

    pub fn mark_locked(&self, id: FdId) {
        if let Some(o) = self.map().get_mut(&id) {
            o.locked = true;
        }
    }

    /// Makes every fd named by `req` valid on `conn`, re-opening stale ones.
    pub async fn revalidate(&self, conn: &Conn, req: &mut Request) -> Result<(), Errno> {
        let mut stale = Vec::new();
        {
            let map = self.map();
            req.visit_fds(&mut |fd| {
                match map.get(&fd.id) {
                    Some(o) if !fd.is_anonymous() && o.generation != conn.generation => {
                        if o.locked {
                            return Err(Errno::EBADF);
                        }
                        stale.push(fd.id);
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }
        if stale.is_empty() {
            return Ok(());
        }
        let _one_at_a_time = self.reopen.lock().await;
        for id in stale {
            let Some(o) = self.map().get(&id).copied() else {
                return Err(Errno::EBADF);
            };
            if o.generation == conn.generation {
                continue;
            }
            if o.locked {
                return Err(Errno::EBADF);
            }
            let flags = o.flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC);
            let fd = Fd {
                id,
                gfid: o.gfid,
                flags,
            };
            let req = if o.dir {
                Request::Opendir { fd }
            } else {
                Request::Open { fd }
            };
            match conn.call(&Ctx::root(), req).await {
                Ok(_) => {
                    if let Some(o) = self.map().get_mut(&id) {
                        o.generation = conn.generation;
                        if o.unsynced.is_some_and(|b| b != conn.boot_id) {
                            tracing::warn!(
                                "{}: fd {} (gfid {}) had writes the brick acknowledged before \
                                 its machine restarted and nobody synced: they may be lost; \
                                 its next fsync or flush fails with EIO",
                                conn.peer,
                                id.0,
                                o.gfid
                            );
                            o.lost = true;
                            o.unsynced = None;
                        }
                    }
                    tracing::debug!(
                        "{}: re-opened fd {} (gfid {}) after reconnect",
                        conn.peer,
                        id.0,
                        o.gfid
                    );
                }
                Err(Errno::ENOTCONN) => return Err(Errno::ENOTCONN),
                Err(e) => {
                    tracing::warn!(
                        "{}: fd {} (gfid {}) could not be re-opened after reconnect: {e:?}; \
                         it fails with EBADF",
                        conn.peer,
                        id.0,
                        o.gfid
                    );
                    return Err(Errno::EBADF);
                }
            }
        }
        Ok(())
    }
}
