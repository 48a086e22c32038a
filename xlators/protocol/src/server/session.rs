//! What the server keeps per client connection: its fds (client fd ids mapped to ids the
//! server allocates, unique in the brick graph: two clients may use the same numbers) and the
//! locks it was granted. When the connection ends, its locks are unlocked and its fds released,
//! as GlusterFS does for a disconnected client; fops finishing after that clean up after
//! themselves.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use abi_stable::std_types::{ROption, RString};
use xlator_api::{
    BackingFile, ClientId, Ctx, EntrylkCmd, Errno, Fd, FdId, Flock, Fop, Gfid, LkCmd, LkOwner, Loc,
    LockKind, Subvol,
};

use crate::wire::{ReplyBody, Request};

/// A client fd as the server knows it.
#[derive(Clone, Debug)]
struct ServerFd {
    fd: Fd,
    dir: bool,
    /// Owners that took POSIX locks through this fd.
    owners: HashSet<LkOwner>,
    /// The backing file the open's reply handed the client, kept open (its number valid in
    /// this process) until the client releases the fd.
    _backing: Option<BackingFile>,
}

#[derive(Default)]
struct State {
    closed: bool,
    fds: HashMap<FdId, ServerFd>,
    /// Opens sent down and not answered yet (they count against `max-fds-per-client`).
    opening: usize,
    /// Inode locks granted: (domain, gfid, owner).
    inodelks: HashSet<(RString, Gfid, LkOwner)>,
    /// Entry locks granted (counted: they are re-entrant).
    entrylks: Vec<(RString, Loc, LkOwner)>,
}

/// Lock bookkeeping to do after a fop succeeds.
enum Grant {
    None,
    Posix {
        client_fd: FdId,
        owner: LkOwner,
    },
    Inode {
        domain: RString,
        gfid: Gfid,
        owner: LkOwner,
        unlock_all: bool,
        lock: bool,
    },
    Entry {
        domain: RString,
        loc: Loc,
        owner: LkOwner,
        lock: bool,
    },
}

pub struct Session {
    child: Subvol,
    next_fd: Arc<AtomicU64>,
    state: Mutex<State>,
    /// `max-fds-per-client`: fds held plus opens in progress at most.
    max_fds: usize,
}

fn owner_ctx(owner: LkOwner) -> Ctx {
    Ctx::builder(0, 0).lk_owner(owner).build()
}

fn unlock_all(owner: LkOwner) -> Flock {
    Flock {
        kind: LockKind::Unlock,
        start: 0,
        len: 0,
        pid: 0,
        owner,
    }
}

impl Session {
    pub fn new(child: Subvol, next_fd: Arc<AtomicU64>, max_fds: usize) -> Session {
        Session {
            child,
            next_fd,
            state: Mutex::new(State::default()),
            max_fds,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn open_fds(&self) -> usize {
        self.state().fds.len()
    }

    /// Runs one request from the client on the brick graph. Every fd the request names is
    /// taken from this connection's table (its server id, GFID and open flags), never from
    /// the request: a client cannot name its fd 5 with another file's GFID or other flags.
    /// Anonymous fds name only a GFID and go down as they came.
    pub async fn execute(&self, cx: &Ctx, mut req: Request) -> Result<ReplyBody, Errno> {
        let fop = req.fop();
        if fop.host_only() {
            // Sent only by a host inside its process (`forget_client`): a client must not
            // make the brick forget another client's locks.
            return Err(Errno::EPERM);
        }
        if fop.opens_fd() {
            return self.open(cx, req, fop).await;
        }
        if fop.closes_fd() {
            {
                let mut st = self.state();
                req.visit_fds(&mut |fd| {
                    if !fd.is_anonymous() {
                        *fd = st.fds.remove(&fd.id).ok_or(Errno::EBADF)?.fd;
                    }
                    Ok(())
                })?;
            }
            return super::dispatch(&self.child, cx, req).await;
        }
        let grant = {
            let st = self.state();
            let grant = grant_of(cx, &req);
            req.visit_fds(&mut |fd| {
                if !fd.is_anonymous() {
                    *fd = st.fds.get(&fd.id).ok_or(Errno::EBADF)?.fd;
                }
                Ok(())
            })?;
            grant
        };
        let r = super::dispatch(&self.child, cx, req).await;
        if r.is_ok() {
            self.record(grant).await;
        }
        r
    }

    async fn open(&self, cx: &Ctx, mut req: Request, fop: Fop) -> Result<ReplyBody, Errno> {
        let server_id = FdId(self.next_fd.fetch_add(1, Ordering::Relaxed));
        let mut client_fd = None;
        {
            let mut st = self.state();
            req.visit_fds(&mut |fd| {
                if fd.is_anonymous() || st.fds.contains_key(&fd.id) {
                    return Err(Errno::EBADF);
                }
                client_fd = Some(*fd);
                fd.id = server_id;
                Ok(())
            })?;
            if st.fds.len() + st.opening >= self.max_fds {
                // `max-fds-per-client`: the client's fd table on this brick is full.
                return Err(Errno::EMFILE);
            }
            st.opening += 1;
        }
        let mut r = {
            // Given back even if this future is dropped half-way.
            let _opening = Opening(self);
            super::dispatch(&self.child, cx, req).await
        };
        if let (Ok(body), Some(cfd)) = (&mut r, client_fd) {
            let gfid = match body {
                ReplyBody::Create(e) => e.attr.gfid,
                _ => cfd.gfid,
            };
            let fd = Fd {
                id: server_id,
                gfid,
                flags: cfd.flags,
            };
            let backing = match body {
                ReplyBody::Open(o) => o.backing.as_ref().into_option().cloned(),
                _ => None,
            };
            let sfd = ServerFd {
                fd,
                dir: fop == Fop::Opendir,
                owners: HashSet::new(),
                _backing: backing,
            };
            let late = {
                let mut st = self.state();
                if st.closed {
                    true
                } else {
                    st.fds.insert(cfd.id, sfd.clone());
                    false
                }
            };
            if late {
                if let ReplyBody::Open(o) = body {
                    o.backing = ROption::RNone;
                }
                self.release(sfd).await;
            }
        }
        r
    }

    async fn record(&self, grant: Grant) {
        let late = {
            let mut st = self.state();
            let closed = st.closed;
            match &grant {
                Grant::None => return,
                Grant::Posix { client_fd, owner } => {
                    if let Some(s) = st.fds.get_mut(client_fd) {
                        s.owners.insert(*owner);
                    }
                    return;
                }
                Grant::Inode {
                    domain,
                    gfid,
                    owner,
                    unlock_all,
                    lock,
                } => {
                    let key = (domain.clone(), *gfid, *owner);
                    if *lock && !closed {
                        st.inodelks.insert(key);
                    } else if *unlock_all {
                        st.inodelks.remove(&key);
                    }
                    *lock && closed
                }
                Grant::Entry {
                    domain,
                    loc,
                    owner,
                    lock,
                } => {
                    if *lock && !closed {
                        st.entrylks.push((domain.clone(), loc.clone(), *owner));
                    } else if !*lock
                        && let Some(i) = st
                            .entrylks
                            .iter()
                            .position(|(d, l, o)| d == domain && l == loc && o == owner)
                    {
                        st.entrylks.swap_remove(i);
                    }
                    *lock && closed
                }
            }
        };
        // Granted after the client went away: give it back at once.
        if late {
            match grant {
                Grant::Inode {
                    domain,
                    gfid,
                    owner,
                    ..
                } => self.unlock_inode(domain, gfid, owner).await,
                Grant::Entry {
                    domain, loc, owner, ..
                } => self.unlock_entry(domain, loc, owner).await,
                _ => {}
            }
        }
    }

    async fn unlock_inode(&self, domain: RString, gfid: Gfid, owner: LkOwner) {
        let cx = owner_ctx(owner);
        let _ = self
            .child
            .inodelk(&cx, domain, gfid, LkCmd::Set, unlock_all(owner))
            .await;
    }

    async fn unlock_entry(&self, domain: RString, loc: Loc, owner: LkOwner) {
        let cx = owner_ctx(owner);
        let _ = self
            .child
            .entrylk(&cx, domain, loc, EntrylkCmd::Unlock)
            .await;
    }

    async fn release(&self, sfd: ServerFd) {
        for owner in sfd.owners {
            let cx = owner_ctx(owner);
            let _ = self
                .child
                .lk(&cx, sfd.fd, LkCmd::Set, unlock_all(owner))
                .await;
        }
        let cx = Ctx::root();
        let _ = if sfd.dir {
            self.child.releasedir(&cx, sfd.fd).await
        } else {
            self.child.release(&cx, sfd.fd).await
        };
    }

    /// The client is gone: unlock what it holds and release its fds, then tell the graph
    /// below (`forget_client`), so features/locks drops whatever else it keeps for `client`
    /// (locks by any owner, waiting requests). Returns how many fds were released.
    pub async fn close(&self, client: ClientId) -> usize {
        let (fds, inodelks, entrylks) = {
            let mut st = self.state();
            st.closed = true;
            (
                std::mem::take(&mut st.fds),
                std::mem::take(&mut st.inodelks),
                std::mem::take(&mut st.entrylks),
            )
        };
        for (domain, gfid, owner) in inodelks {
            self.unlock_inode(domain, gfid, owner).await;
        }
        for (domain, loc, owner) in entrylks {
            self.unlock_entry(domain, loc, owner).await;
        }
        let n = fds.len();
        for sfd in fds.into_values() {
            self.release(sfd).await;
        }
        let cx = Ctx::builder(0, 0).ext(&client).build();
        if let Err(e) = self.child.forget_client(&cx, client).await {
            // ENOSYS/ENOTSUP: nothing below keeps per-client state.
            tracing::debug!("forget_client({}) below the server: {e:?}", client.0);
        }
        n
    }
}

/// An open in progress, counted in `State::opening` while it lives.
struct Opening<'a>(&'a Session);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.state().opening -= 1;
    }
}

/// The lock bookkeeping a request implies if it succeeds.
fn grant_of(cx: &Ctx, req: &Request) -> Grant {
    match req {
        Request::Lk { fd, cmd, lock } if *cmd != LkCmd::Get && lock.kind != LockKind::Unlock => {
            Grant::Posix {
                client_fd: fd.id,
                owner: lock.owner,
            }
        }
        Request::Inodelk {
            domain,
            gfid,
            cmd,
            lock,
        } if *cmd != LkCmd::Get => Grant::Inode {
            domain: domain.clone(),
            gfid: *gfid,
            owner: lock.owner,
            unlock_all: lock.kind == LockKind::Unlock && lock.start == 0 && lock.len == 0,
            lock: lock.kind != LockKind::Unlock,
        },
        Request::Entrylk { domain, loc, cmd } => Grant::Entry {
            domain: domain.clone(),
            loc: loc.clone(),
            owner: cx.lk_owner(),
            lock: *cmd != EntrylkCmd::Unlock,
        },
        _ => Grant::None,
    }
}
