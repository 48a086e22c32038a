//! `protocol/client`: the leaf of a client graph that sends every fop to one brick over TCP.
//!
//! One connection per instance, many calls in flight on it, replies matched by id in any order.
//! A background task connects, handshakes, and reconnects with backoff (100 ms doubling to 3 s)
//! whenever the connection fails. While the brick is down every fop fails at once with ENOTCONN;
//! only the very first fops after start wait, at most `ping-timeout`, for the first connection
//! attempt to conclude. See `fds` for what happens to open fds and locks across a reconnect.

mod backing;
mod conn;
mod fds;
mod options;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
#[allow(unused_imports)] // names used by the generated fop signatures
use xlator_api::*;
use xlator_api::{Ctx, Dump, Errno, Fop, Gfid, Init, LkCmd, LockKind, Subvol, Translator};

pub use conn::{ConnectError, Handshaken, Timeouts, handshake};
pub use options::{ClientOptions, Target};

use crate::wire::{HEADER_ROOM, ReplyBody, Request};
use conn::Conn;
use fds::FdTable;

/// The translator type name.
pub const TYPE: &str = "protocol/client";

const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(3);

#[derive(Clone)]
enum State {
    /// A connection attempt is running; `first`: no attempt has concluded yet.
    Connecting {
        first: bool,
    },
    Up(Arc<Conn>),
    Down,
    Stopped,
}

struct Shared {
    name: String,
    /// Identity sent in the handshake.
    id: String,
    target: Target,
    timeouts: Arc<Timeouts>,
    state: watch::Sender<State>,
    stop: watch::Sender<bool>,
    fds: FdTable,
    last_error: Mutex<Option<String>>,
    connects: AtomicU64,
    disconnects: AtomicU64,
    /// Raises ChildUp after each handshake and ChildDown when the brick is lost.
    events: xlator_api::EventSink,
    /// `filter-o-direct`.
    filter_o_direct: std::sync::atomic::AtomicBool,
    /// Files this client ever sent a POSIX lock for. A flush of any other file has nothing
    /// to do on the brick (features/locks releases the owner's locks, storage/posix only
    /// checks the fd), so it is answered here, saving a round trip on every close(2).
    locked_files: Mutex<HashSet<Gfid>>,
}

impl Shared {
    fn locked(&self) -> MutexGuard<'_, HashSet<Gfid>> {
        self.locked_files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The live connection, or ENOTCONN. Waits only while the first attempt is running.
    async fn conn(&self) -> Result<Arc<Conn>, Errno> {
        let mut rx = self.state.subscribe();
        let first = rx.wait_for(|s| !matches!(s, State::Connecting { first: true }));
        let state = match tokio::time::timeout(self.timeouts.ping(), first).await {
            Ok(Ok(s)) => s.clone(),
            _ => return Err(Errno::ENOTCONN),
        };
        match state {
            State::Up(c) if !c.is_closed() => Ok(c),
            _ => Err(Errno::ENOTCONN),
        }
    }

    fn set_error(&self, e: Option<String>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = e;
    }

    fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Connects, and reconnects after every failure, until stopped.
async fn run(shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut backoff = MIN_BACKOFF;
    let mut first = true;
    let mut generation = 0u64;
    let addr = shared.target.addr();
    loop {
        shared.state.send_replace(State::Connecting { first });
        let attempt = tokio::select! {
            r = handshake(&shared.target, &shared.id, shared.timeouts.ping()) => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        first = false;
        match attempt {
            Ok(hs) => {
                generation += 1;
                let server = hs.welcome.server.clone();
                let conn = Conn::start(
                    generation,
                    hs,
                    &shared.target,
                    shared.timeouts.clone(),
                    shared.events,
                );
                shared.connects.fetch_add(1, Ordering::Relaxed);
                shared.set_error(None);
                backoff = MIN_BACKOFF;
                tracing::info!(
                    "{}: connected to brick {addr} over {} (volume {:?}, server {server})",
                    shared.name,
                    conn.transport(),
                    shared.target.volume
                );
                shared.state.send_replace(State::Up(conn.clone()));
                shared.events.notify_parents(EventKind::ChildUp);
                let reason = tokio::select! {
                    r = conn.closed() => r,
                    _ = stop.wait_for(|s| *s) => {
                        conn.fail("client shut down".into());
                        break;
                    }
                };
                shared.disconnects.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "{}: disconnected from brick {addr}: {reason}; fops fail with ENOTCONN \
                     until it is back",
                    shared.name
                );
                shared.set_error(Some(reason));
                shared.state.send_replace(State::Down);
                shared.events.notify_parents(EventKind::ChildDown);
            }
            Err(e) => {
                let msg = e.to_string();
                if shared.last_error().as_deref() != Some(msg.as_str()) {
                    match e {
                        ConnectError::Refused { .. } => tracing::error!(
                            "{}: {msg}; fops fail with ENOTCONN, retrying every {MAX_BACKOFF:?}",
                            shared.name
                        ),
                        _ => tracing::warn!(
                            "{}: {msg}; fops fail with ENOTCONN, retrying",
                            shared.name
                        ),
                    }
                } else {
                    tracing::debug!("{}: {msg}", shared.name);
                }
                // The reason first: a fop that sees `Down` can then find it in the dump.
                shared.set_error(Some(msg));
                let was_first = matches!(*shared.state.borrow(), State::Connecting { first: true });
                shared.state.send_replace(State::Down);
                if was_first {
                    // Parents wait for our first word: the brick is not there (yet).
                    shared.events.notify_parents(EventKind::ChildDown);
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    shared.state.send_replace(State::Stopped);
}

/// The protocol/client translator.
pub struct Client {
    shared: Arc<Shared>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shared.stop.send_replace(true);
    }
}

fn identity(name: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}:{name}", std::process::id())
}

fn release_reply(fop: Fop) -> ReplyBody {
    match fop {
        Fop::Releasedir => ReplyBody::Releasedir(()),
        _ => ReplyBody::Release(()),
    }
}

/// The local answer to a host-only fop: `forget_client` has nothing to forget here (the
/// brick forgets this client by itself when its connection ends); any other is ENOTSUP.
fn host_only_reply(fop: Fop) -> Result<ReplyBody, Errno> {
    match fop {
        Fop::ForgetClient => Ok(ReplyBody::ForgetClient(())),
        _ => Err(Errno::ENOTSUP),
    }
}

impl Client {
    fn new(init: Init<ClientOptions>) -> Result<Client, String> {
        let target = Target::from_options(&init.options)?;
        let (state, _) = watch::channel(State::Connecting { first: true });
        let (stop, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            id: identity(&init.name),
            name: init.name,
            target,
            timeouts: Arc::new(Timeouts::new(
                init.options.ping_timeout,
                init.options.frame_timeout,
                init.options.reply_spin,
            )),
            state,
            stop,
            fds: FdTable::default(),
            last_error: Mutex::new(None),
            connects: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            events: init.services.events,
            filter_o_direct: std::sync::atomic::AtomicBool::new(init.options.filter_o_direct),
            locked_files: Mutex::new(Default::default()),
        });
        // Built in, this crate shares the host's tokio; outside a runtime context (graph
        // built on a plain thread) go through the host services' fallback runtime.
        let task = run(shared.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn(task)),
            Err(_) => init.services.spawn(task),
        }
        Ok(Client { shared })
    }

    /// Sends one fop, keeping the fd table in step.
    async fn call(&self, cx: &Ctx, mut req: Request) -> Result<ReplyBody, Errno> {
        let fop = req.fop();
        if fop.host_only() {
            // Never sent (a brick refuses them from the wire): answered here.
            return host_only_reply(fop);
        }
        let filter = self.shared.filter_o_direct.load(Ordering::Relaxed);
        let mut fd_arg = None;
        req.visit_fds(&mut |fd| {
            if filter {
                fd.flags &= !libc::O_DIRECT;
            }
            fd_arg.get_or_insert(*fd);
            Ok(())
        })?;
        if filter && let Request::Writev { flags, .. } = &mut req {
            *flags &= !libc::O_DIRECT;
        }
        match &req {
            Request::Lk { fd, cmd, lock }
                if *cmd != LkCmd::Get && lock.kind != LockKind::Unlock =>
            {
                // Before sending: a flush racing with this lock must reach the brick.
                self.shared.locked().insert(fd.gfid);
            }
            Request::Flush { fd } if !self.shared.locked().contains(&fd.gfid) => {
                let boot_now = match &*self.shared.state.borrow() {
                    State::Up(c) if !c.is_closed() => Some(c.boot_id),
                    _ => None,
                };
                if self.shared.fds.take_lost(fd, boot_now) {
                    return Err(Errno::EIO);
                }
                return Ok(ReplyBody::Flush(()));
            }
            _ => {}
        }
        if fop.closes_fd() {
            // Release never fails: an fd of an older connection was released by the server
            // when that connection dropped, and so will this one if the call cannot be sent.
            let opened_on = fd_arg.and_then(|fd| self.shared.fds.closed(fd.id));
            return match self.shared.conn().await {
                Ok(conn) if opened_on.is_none_or(|g| g == conn.generation) => {
                    match conn.call(cx, req).await {
                        Err(Errno::ENOTCONN) => Ok(release_reply(fop)),
                        r => r,
                    }
                }
                _ => Ok(release_reply(fop)),
            };
        }
        let max_write = self.shared.target.max_frame - HEADER_ROOM;
        let too_big = match &req {
            Request::Readv { size, .. } => *size as usize > max_write,
            Request::Writev { data, .. } => data.len() > max_write,
            _ => false,
        };
        if too_big {
            return Err(Errno::EINVAL);
        }
        let conn = self.shared.conn().await?;
        if fop.opens_fd() {
            let body = conn.call(cx, req).await?;
            if let Some(fd) = fd_arg {
                let gfid = match &body {
                    ReplyBody::Create(e) => e.attr.gfid,
                    _ => fd.gfid,
                };
                self.shared
                    .fds
                    .opened(fd, gfid, fop == Fop::Opendir, conn.generation);
            }
            return Ok(body);
        }
        self.shared.fds.revalidate(&conn, &mut req).await?;
        let durability = match &req {
            Request::Fsync { fd, .. } | Request::Flush { fd } => Some(*fd),
            _ => None,
        };
        if let Some(fd) = &durability
            && self.shared.fds.take_lost(fd, Some(conn.boot_id))
        {
            return Err(Errno::EIO);
        }
        let wrote = fop
            .attrs()
            .contains(FopAttrs::WRITES_DATA)
            .then_some(fd_arg)
            .flatten();
        let locks_fd = match &req {
            Request::Lk { fd, cmd, lock }
                if *cmd != LkCmd::Get && lock.kind != LockKind::Unlock =>
            {
                Some(fd.id)
            }
            _ => None,
        };
        let fsync = matches!(req, Request::Fsync { .. });
        let body = conn.call(cx, req).await?;
        if let Some(id) = locks_fd {
            self.shared.fds.mark_locked(id);
        }
        if let Some(fd) = wrote {
            self.shared.fds.wrote(&fd, conn.boot_id);
        }
        if fsync && let Some(fd) = &durability {
            self.shared.fds.synced(fd);
        }
        Ok(body)
    }

    fn reconfigure_options(&self, o: ClientOptions) -> Result<(), String> {
        self.shared.timeouts.set(o.ping_timeout, o.frame_timeout);
        self.shared.timeouts.set_spin(o.reply_spin);
        self.shared
            .filter_o_direct
            .store(o.filter_o_direct, Ordering::Relaxed);
        Ok(())
    }

    fn dump_state(&self) -> Dump {
        let s = &self.shared;
        let (state, generation, inflight, transport) = match &*s.state.borrow() {
            State::Connecting { .. } => ("connecting", 0, 0, None),
            State::Up(c) => ("up", c.generation, c.inflight(), Some(c.transport())),
            State::Down => ("down", 0, 0, None),
            State::Stopped => ("stopped", 0, 0, None),
        };
        let v = serde_json::json!({
            "remote": s.target.addr(),
            "volume": s.target.volume,
            "state": state,
            "generation": generation,
            "transport": transport,
            "inflight": inflight,
            "open-fds": s.fds.len(),
            "connects": s.connects.load(Ordering::Relaxed),
            "disconnects": s.disconnects.load(Ordering::Relaxed),
            "ping-timeout-ms": s.timeouts.ping().as_millis() as u64,
            "last-error": s.last_error(),
        });
        Dump::from_json(v)
    }
}

macro_rules! gen_client {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        impl Translator for Client {
            const TYPE: &'static str = TYPE;
            const KEEPS_FILE_DATA: bool = true;
            const DOC: &'static str = "Sends every fop to one brick (a protocol/server) over \
                TCP; fails fast with ENOTCONN while the brick is unreachable and reconnects \
                with backoff.";
            const MIN_CHILDREN: u32 = 0;
            const MAX_CHILDREN: u32 = 0;
            const ANNOUNCES_CHILD_UP: bool = true;
            type Options = ClientOptions;

            fn init(init: Init<ClientOptions>) -> Result<Self, String> {
                Client::new(init)
            }

            fn children(&self) -> &[Subvol] {
                &[]
            }

            fn reconfigure(&self, options: ClientOptions) -> Result<(), String> {
                self.reconfigure_options(options)
            }

            fn dump(&self) -> Dump {
                self.dump_state()
            }

            $(
                async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                    match self.call(cx, Request::$Variant { $($arg),* }).await? {
                        ReplyBody::$Variant(r) => Ok(r),
                        _ => Err(Errno::EPROTO),
                    }
                }
            )*
        }
    };
}
xlator_api::for_each_fop!(gen_client);
