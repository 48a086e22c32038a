//! One client connection: handshake, a writer task coalescing frames, a reader task matching
//! replies to calls by id (in any order), and a pinger declaring the brick dead when nothing
//! arrives for the ping timeout.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{oneshot, watch};
use xlator_api::{
    BackingFile, BackingWanted, Buf, Ctx, EntrylkCmd, Errno, Flock, Fop, LkCmd, LockKind,
};

use super::options::Target;
use crate::wire::spin::Backoff;
use crate::wire::{
    self, ClientMsg, FramePump, FrameReader, FrameSender, HANDSHAKE_MAX_FRAME, Hello, MAGIC,
    PROTOCOL_VERSION, Pumped, ReadHalf, ReplyBody, Request, SCHEMA, SendError, ServerMsg, Stream,
    Welcome, WireCtx, WireError, WriteHalf,
};

/// Why a connection attempt failed.
#[derive(thiserror::Error, Debug)]
pub enum ConnectError {
    #[error("cannot connect to brick {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("brick {addr} refused the connection: {reason}")]
    Refused { addr: String, reason: String },
    #[error("brick {addr}: handshake failed: {source}")]
    Protocol {
        addr: String,
        #[source]
        source: WireError,
    },
    #[error("brick {addr}: handshake failed: {what}")]
    Unexpected { addr: String, what: String },
    #[error("brick {addr}: no answer to the handshake within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
}

/// Timeouts a live connection reads on every use (reconfigurable).
pub struct Timeouts {
    ping_ms: AtomicU64,
    frame_ms: AtomicU64,
    spin_us: AtomicU64,
}

impl Timeouts {
    pub fn new(ping: Duration, frame: Duration, spin: Duration) -> Timeouts {
        let t = Timeouts {
            ping_ms: AtomicU64::new(0),
            frame_ms: AtomicU64::new(0),
            spin_us: AtomicU64::new(0),
        };
        t.set(ping, frame);
        t.set_spin(spin);
        t
    }
    pub fn set_spin(&self, spin: Duration) {
        self.spin_us
            .store(spin.as_micros() as u64, Ordering::Relaxed);
    }
    /// The `reply-spin` budget.
    pub fn spin(&self) -> Duration {
        Duration::from_micros(self.spin_us.load(Ordering::Relaxed))
    }
    pub fn set(&self, ping: Duration, frame: Duration) {
        self.ping_ms
            .store(ping.as_millis() as u64, Ordering::Relaxed);
        self.frame_ms
            .store(frame.as_millis() as u64, Ordering::Relaxed);
    }
    pub fn ping(&self) -> Duration {
        Duration::from_millis(self.ping_ms.load(Ordering::Relaxed))
    }
    pub fn frame(&self) -> Duration {
        Duration::from_millis(self.frame_ms.load(Ordering::Relaxed))
    }
}

/// One [`Backoff`] per fop: a fop whose replies keep missing the `reply-spin` window stops
/// spinning, others keep it.
struct SpinPolicy([Backoff; FOP_SLOTS]);

const FOP_SLOTS: usize = 64;

impl SpinPolicy {
    fn new() -> SpinPolicy {
        SpinPolicy(std::array::from_fn(|_| Backoff::default()))
    }
    fn of(&self, fop: Fop) -> &Backoff {
        &self.0[fop as usize % FOP_SLOTS]
    }
}

/// A handshaken socket, ready for [`Conn::start`].
pub struct Handshaken {
    pub reader: FrameReader<ReadHalf>,
    pub writer: WriteHalf,
    pub welcome: Welcome,
    /// The brick's process, when it is on this machine (Unix socket): backing files are
    /// taken from it.
    pub brick_pidfd: Option<OwnedFd>,
}

/// The brick's Unix socket when it is local and has one, else TCP.
async fn connect(target: &Target, addr: &str) -> Result<Stream, ConnectError> {
    if let Some(path) = &target.unix_socket {
        match UnixStream::connect(path).await {
            Ok(s) => return Ok(Stream::Unix(s)),
            // No socket (an older brick, another directory, not root): TCP it is.
            Err(e) => tracing::debug!("{addr}: {}: {e}; using TCP", path.display()),
        }
    }
    let sock = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|source| ConnectError::Connect {
            addr: addr.to_owned(),
            source,
        })?;
    let _ = sock.set_nodelay(true);
    let Some(tls) = &target.tls else {
        return Ok(Stream::Tcp(sock));
    };
    let s = tls
        .connector
        .connect(tls.server_name.clone(), sock)
        .await
        .map_err(|e| ConnectError::Unexpected {
            addr: addr.to_owned(),
            what: format!("TLS handshake failed: {e}"),
        })?;
    let (sock, conn) = s.into_inner();
    Ok(Stream::Tls(crate::wire::tls::TlsIo::new(sock, conn)))
}

/// Connects to `target` and handshakes, all within `timeout`.
pub async fn handshake(
    target: &Target,
    client_id: &str,
    timeout: Duration,
) -> Result<Handshaken, ConnectError> {
    let addr = target.addr();
    match tokio::time::timeout(timeout, handshake_inner(target, client_id, timeout, &addr)).await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::Timeout { addr, timeout }),
    }
}

async fn handshake_inner(
    target: &Target,
    client_id: &str,
    timeout: Duration,
    addr: &str,
) -> Result<Handshaken, ConnectError> {
    let addr = addr.to_owned();
    let sock = connect(target, &addr).await?;
    let brick_pidfd = match &sock {
        Stream::Unix(u) => super::backing::peer_pidfd(u)
            .inspect_err(|e| tracing::debug!("{addr}: no pidfd of the brick: {e}"))
            .ok(),
        Stream::Tcp(_) | Stream::Tls(_) => None,
    };
    let (r, mut writer) = sock.into_split().map_err(|source| ConnectError::Connect {
        addr: addr.clone(),
        source,
    })?;
    let mut reader = FrameReader::new(r, HANDSHAKE_MAX_FRAME);
    let nonce = crate::creds::nonce();
    let hello = Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: target.volume.clone(),
        client: client_id.to_owned(),
        nonce: nonce.to_vec(),
        max_frame: u32::try_from(target.max_frame).unwrap_or(u32::MAX),
    };
    let proto = |source| ConnectError::Protocol {
        addr: addr.clone(),
        source,
    };
    let frame =
        wire::encode(&ClientMsg::Hello(hello), Vec::new(), HANDSHAKE_MAX_FRAME).map_err(proto)?;
    wire::write_frames(&mut writer, std::slice::from_ref(&frame))
        .await
        .map_err(|e| proto(WireError::Io(e)))?;
    let Some(body) = reader.next(timeout).await.map_err(proto)? else {
        return Err(ConnectError::Unexpected {
            addr,
            what: "the server closed the connection without answering".into(),
        });
    };
    let first = wire::decode::<ServerMsg>(body).map_err(proto)?.0;
    // A brick of a local Unix socket is vouched for by the kernel (it is the process that
    // owns the socket path root made); it still asks for the secret when it has one.
    let answer = wire::answer_challenge(
        &mut reader,
        &mut writer,
        first,
        target.secret.as_deref(),
        &target.volume,
        &nonce,
        timeout,
        "the client's `secret-file` option",
    )
    .await
    .map_err(|what| ConnectError::Unexpected {
        addr: addr.clone(),
        what,
    })?;
    match answer {
        ServerMsg::Welcome(welcome) => {
            reader.set_max(target.max_frame);
            Ok(Handshaken {
                reader,
                writer,
                welcome,
                brick_pidfd,
            })
        }
        ServerMsg::Refused(reason) => Err(ConnectError::Refused { addr, reason }),
        ServerMsg::Pong(_)
        | ServerMsg::Reply(_)
        | ServerMsg::Volfile(_)
        | ServerMsg::Upcall(_)
        | ServerMsg::Challenge(_) => Err(ConnectError::Unexpected {
            addr,
            what: "the server answered the hello with something other than a welcome".into(),
        }),
    }
}

type Waiter = oneshot::Sender<Result<ReplyBody, Errno>>;

struct Pending {
    closed: bool,
    waiters: HashMap<u64, Waiter>,
    /// Lock calls abandoned while waiting (a cancel was sent): if the brick granted one
    /// anyway before the cancel reached it, its reply is answered with this unlock.
    abandoned: HashMap<u64, Undo>,
}

/// The call that gives back a lock an abandoned call may still be granted.
struct Undo {
    ctx: WireCtx,
    req: Request,
}

impl Undo {
    /// For a lock acquisition (`inodelk`, `entrylk`, `lk` that takes a lock): its unlock.
    fn of(ctx: &WireCtx, req: &Request) -> Option<Undo> {
        let unlock = |lock: &Flock| Flock {
            kind: LockKind::Unlock,
            ..*lock
        };
        let req = match req {
            Request::Inodelk {
                domain,
                gfid,
                cmd,
                lock,
            } if *cmd != LkCmd::Get && lock.kind != LockKind::Unlock => Request::Inodelk {
                domain: domain.clone(),
                gfid: *gfid,
                cmd: LkCmd::Set,
                lock: unlock(lock),
            },
            Request::Lk { fd, cmd, lock }
                if *cmd != LkCmd::Get && lock.kind != LockKind::Unlock =>
            {
                Request::Lk {
                    fd: *fd,
                    cmd: LkCmd::Set,
                    lock: unlock(lock),
                }
            }
            Request::Entrylk { domain, loc, cmd } if *cmd != EntrylkCmd::Unlock => {
                Request::Entrylk {
                    domain: domain.clone(),
                    loc: loc.clone(),
                    cmd: EntrylkCmd::Unlock,
                }
            }
            _ => return None,
        };
        Some(Undo {
            ctx: ctx.clone(),
            req,
        })
    }
}

/// A live (or just failed) connection.
pub struct Conn {
    /// Counts connections of one client: fds opened on an older generation are stale.
    pub generation: u64,
    /// The brick's [`crate::wire::Welcome::boot_id`].
    pub boot_id: u64,
    pub peer: String,
    /// Largest frame the server accepts.
    send_max: usize,
    sender: Arc<FrameSender<WriteHalf>>,
    /// The socket's read side, read by the reader task when it is readable; frames are
    /// assembled under `pump`.
    rx: ReadHalf,
    pump: Mutex<FramePump>,
    pending: Mutex<Pending>,
    next_id: AtomicU64,
    epoch: Instant,
    last_rx_ms: AtomicU64,
    closed: watch::Sender<Option<String>>,
    timeouts: Arc<Timeouts>,
    /// See [`Handshaken::brick_pidfd`].
    brick_pidfd: Option<OwnedFd>,
    spin: SpinPolicy,
    /// Where the brick's upcalls go: this client's parents.
    events: xlator_api::EventSink,
    /// This connection, for a reply spin deferred past the host's first poll.
    me: std::sync::Weak<Conn>,
}

/// Longest interval between two pings.
const PING_MAX_INTERVAL: Duration = Duration::from_secs(10);
/// Bound of the queue to the writer task; senders wait when it is full.
const WRITE_QUEUE: usize = 1024;

impl Conn {
    /// Starts the tasks of a handshaken connection.
    pub fn start(
        generation: u64,
        hs: Handshaken,
        target: &Target,
        timeouts: Arc<Timeouts>,
        events: xlator_api::EventSink,
    ) -> Arc<Conn> {
        let sender = FrameSender::start(hs.writer, WRITE_QUEUE);
        let (closed, _) = watch::channel(None);
        let (rx, buffered, max) = hs.reader.into_parts();
        let conn = Arc::new_cyclic(|me| Conn {
            generation,
            boot_id: hs.welcome.boot_id,
            peer: target.addr(),
            send_max: (hs.welcome.max_frame as usize).min(target.max_frame),
            sender,
            rx,
            pump: Mutex::new(FramePump::new(buffered, max)),
            pending: Mutex::new(Pending {
                closed: false,
                waiters: HashMap::new(),
                abandoned: HashMap::new(),
            }),
            next_id: AtomicU64::new(1),
            epoch: Instant::now(),
            last_rx_ms: AtomicU64::new(0),
            closed,
            timeouts,
            brick_pidfd: hs.brick_pidfd,
            spin: SpinPolicy::new(),
            events,
            me: me.clone(),
        });
        tokio::spawn(close_on_failure(conn.clone()));
        tokio::spawn(read_loop(conn.clone()));
        tokio::spawn(ping_loop(conn.clone()));
        conn
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls in flight.
    pub fn inflight(&self) -> usize {
        self.pending().waiters.len()
    }

    /// Whether the connection has failed.
    pub fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }

    /// Resolves with the reason once the connection has failed.
    pub async fn closed(&self) -> String {
        let mut rx = self.closed.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(r) => r.clone().unwrap_or_default(),
            Err(_) => "connection dropped".into(),
        }
    }

    /// Fails the connection: every call in flight gets ENOTCONN, the tasks stop and the
    /// socket closes. Idempotent; the first reason wins.
    pub fn fail(&self, reason: String) {
        let waiters = {
            let mut p = self.pending();
            if p.closed {
                return;
            }
            p.closed = true;
            // The brick drops this client's locks when the connection ends.
            p.abandoned.clear();
            std::mem::take(&mut p.waiters)
        };
        // Dropping a waiter wakes its call with ENOTCONN.
        drop(waiters);
        self.closed.send_replace(Some(reason));
    }

    fn touch(&self) {
        self.last_rx_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_rx_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Sends `req` and waits for its reply (ENOTCONN if the connection fails first,
    /// ETIMEDOUT after the frame timeout; E2BIG if the context's extensions exceed the wire
    /// limits). The frame is written (or queued for the writer) at the first poll, which then
    /// returns to the caller: a caller that starts several calls at once (a fan-out over
    /// several bricks) has them all on the wire before it waits for any reply. A lock call
    /// abandoned while waiting (frame timeout, caller gone) is cancelled on the brick.
    pub async fn call(&self, cx: &Ctx, req: Request) -> Result<ReplyBody, Errno> {
        let fop = req.fop();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut wcx = WireCtx::from_ctx(cx)?;
        wcx.backing_wanted =
            fop == Fop::Open && self.brick_pidfd.is_some() && cx.ext::<BackingWanted>().is_some();
        let undo = Undo::of(&wcx, &req);
        let frame = wire::encode_call(id, wcx, req, self.send_max).map_err(|e| {
            tracing::debug!("{}: {fop} not sent: {e}", self.peer);
            Errno::EINVAL
        })?;
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending();
            if p.closed {
                return Err(Errno::ENOTCONN);
            }
            p.waiters.insert(id, tx);
        }
        let mut guard = PendingGuard {
            conn: self,
            id,
            rx,
            undo,
        };
        let exchange = async {
            if let Err(e) = self.sender.send(frame).await {
                self.fail(match e {
                    SendError::Io(e) => format!("write to brick failed: {e}"),
                    SendError::Closed => "connection closed".into(),
                    e @ SendError::TimedOut(_) => format!("write to brick failed: {e}"),
                });
                return Err(Errno::ENOTCONN);
            }
            self.defer_spin(id, fop);
            (&mut guard.rx).await.map_err(|_| Errno::ENOTCONN)?
        };
        let limit = self.timeouts.frame();
        let body = if limit.is_zero() {
            exchange.await?
        } else {
            match tokio::time::timeout(limit, exchange).await {
                Ok(r) => r?,
                Err(_) => {
                    tracing::warn!(
                        "{}: {fop} (call {id}) got no reply within {limit:?} (frame-timeout); \
                         failing it with ETIMEDOUT",
                        self.peer
                    );
                    return Err(Errno::ETIMEDOUT);
                }
            }
        };
        guard.undo = None;
        if body.fop() != fop {
            tracing::warn!(
                "{}: reply to {fop} (call {id}) is for {}",
                self.peer,
                body.fop()
            );
            return Err(Errno::EPROTO);
        }
        Ok(body)
    }

    /// On a host thread that polls a request first ([`xlfs_core::services::defer_reply_spin`]),
    /// with call `id` the only one in flight here: once the host's first poll of the request
    /// is over (every call of a fan-out sent), reads the socket on that thread until the reply
    /// has been delivered or the `reply-spin` budget is spent. The host then polls the request
    /// again on its thread, without the reader task's wakeup and the one it would cause.
    fn defer_spin(&self, id: u64, fop: Fop) {
        if !xlfs_core::services::may_spin_for_reply() || self.timeouts.spin().is_zero() {
            return;
        }
        let Some(conn) = self.me.upgrade() else {
            return;
        };
        xlfs_core::services::defer_reply_spin(move || conn.spin_for(id, fop));
    }

    fn spin_for(&self, id: u64, fop: Fop) {
        if self.pending().waiters.len() != 1 || !self.pending().waiters.contains_key(&id) {
            return;
        }
        let mut failed = None;
        self.spin.of(fop).poll_until(self.timeouts.spin(), || {
            if let Ok(pump) = self.pump.try_lock()
                && let Err(why) = self.drain(pump)
            {
                failed = Some(why);
                return true;
            }
            !self.pending().waiters.contains_key(&id)
        });
        if let Some(why) = failed {
            self.fail(why);
        }
    }

    /// Call `id` was abandoned while its reply was awaited: asks the brick to drop it and, if
    /// it is a lock call, remembers how to give the lock back should it be granted anyway.
    fn abandon(&self, id: u64, undo: Option<Undo>) {
        let Some(undo) = undo else {
            return;
        };
        {
            let mut p = self.pending();
            if p.closed {
                return;
            }
            p.abandoned.insert(id, undo);
        }
        match wire::encode(&ClientMsg::Cancel(id), Vec::new(), HANDSHAKE_MAX_FRAME) {
            // A full queue loses the cancel: the lock is then given back when its grant
            // comes (see `dispatch`).
            Ok(f) => self.sender.try_queue(f),
            Err(e) => tracing::debug!("cancel not encoded: {e}"),
        }
    }

    /// Sends `undo` without waiting for its reply (a late reply is dropped).
    fn send_undo(&self, undo: Undo) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        match wire::encode_call(id, undo.ctx, undo.req, self.send_max) {
            Ok(f) => self.sender.try_queue(f),
            Err(e) => tracing::debug!("{}: unlock not encoded: {e}", self.peer),
        }
    }
}

impl Conn {
    /// `"tcp"` or `"unix"`.
    pub fn transport(&self) -> &'static str {
        self.rx.kind()
    }

    /// Reads what the socket holds and delivers every complete frame. `Err` says why the
    /// connection must fail.
    fn drain(&self, mut pump: MutexGuard<'_, FramePump>) -> Result<(), String> {
        let mut bad = Ok(());
        let r = pump.pump(
            |v| self.rx.try_read_buf(v),
            |f| {
                self.touch();
                if bad.is_ok() {
                    bad = self.dispatch(f);
                }
            },
        );
        bad?;
        match r {
            Ok(Pumped::Drained) => Ok(()),
            Ok(Pumped::Closed) => Err("the brick closed the connection".into()),
            Err(e) => Err(format!("read from brick failed: {e}")),
        }
    }

    /// Delivers one frame from the server.
    fn dispatch(&self, body: Buf) -> Result<(), String> {
        let (msg, mut payloads) =
            wire::decode::<ServerMsg>(body).map_err(|e| format!("bad frame from brick: {e}"))?;
        match msg {
            ServerMsg::Reply(r) => {
                let result = match r.result {
                    Ok(mut body) => match body.restore_payload(&mut payloads) {
                        Ok(()) => {
                            if let (ReplyBody::Open(o), Some(w)) = (&mut body, r.backing) {
                                o.backing = self.take_backing(w).into();
                            }
                            Ok(body)
                        }
                        Err(e) => return Err(format!("bad reply from brick: {e}")),
                    },
                    Err(e) => Err(e),
                };
                let (waiter, undo) = {
                    let mut p = self.pending();
                    let w = p.waiters.remove(&r.id);
                    let u = if w.is_none() {
                        p.abandoned.remove(&r.id)
                    } else {
                        None
                    };
                    (w, u)
                };
                match (waiter, undo) {
                    (Some(w), _) => {
                        let _ = w.send(result);
                    }
                    (None, Some(undo)) if result.is_ok() => {
                        tracing::debug!(
                            "{}: abandoned lock call {} was granted; unlocking",
                            self.peer,
                            r.id
                        );
                        self.send_undo(undo);
                    }
                    _ => tracing::debug!("{}: late reply to call {} dropped", self.peer, r.id),
                }
                Ok(())
            }
            ServerMsg::Pong(_) => Ok(()),
            ServerMsg::Upcall(ups) => {
                for up in &ups {
                    self.events.upcall_parents(up);
                }
                Ok(())
            }
            ServerMsg::Welcome(_)
            | ServerMsg::Refused(_)
            | ServerMsg::Volfile(_)
            | ServerMsg::Challenge(_) => {
                Err("brick sent a handshake message mid-connection".into())
            }
        }
    }

    /// This process's copy of the backing file an open reply named, if it can be had.
    fn take_backing(&self, w: wire::WireBacking) -> Option<BackingFile> {
        let pidfd = self.brick_pidfd.as_ref()?;
        super::backing::fetch(pidfd, w)
            .inspect_err(|e| {
                if e.raw_os_error() == Some(libc::EPERM) {
                    super::backing::warn_once(&format!(
                        "{}: may not take the brick's descriptors ({e}; pidfd_getfd needs the \
                         right to ptrace the brick process); files are read through the brick",
                        self.peer
                    ));
                }
                tracing::debug!("{}: backing file not taken: {e}", self.peer)
            })
            .ok()
    }

    fn pump_lock(&self) -> MutexGuard<'_, FramePump> {
        self.pump.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a call's waiter when the call ends in any way (reply, error, cancellation). A call
/// whose waiter is still there was abandoned (frame timeout, caller dropped): the brick is
/// told to drop it. A lock granted into a reply nobody read is given back.
struct PendingGuard<'a> {
    conn: &'a Conn,
    id: u64,
    rx: oneshot::Receiver<Result<ReplyBody, Errno>>,
    /// For a lock call until its reply has been taken: how to give the lock back.
    undo: Option<Undo>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let waiting = self.conn.pending().waiters.remove(&self.id).is_some();
        if waiting {
            self.conn.abandon(self.id, self.undo.take());
        } else if let Some(undo) = self.undo.take()
            && matches!(self.rx.try_recv(), Ok(Ok(_)))
        {
            self.conn.send_undo(undo);
        }
    }
}

/// Closes the socket once the connection has failed (the frame being written completes).
async fn close_on_failure(conn: Arc<Conn>) {
    conn.closed().await;
    conn.sender.close().await;
}

/// Reads replies whenever the socket is readable. Once the first byte of a frame has
/// arrived, the rest must come within the ping timeout.
async fn read_loop(conn: Arc<Conn>) {
    let mut closed = conn.closed.subscribe();
    conn.touch();
    loop {
        let body_timeout = conn.timeouts.ping();
        let partial = conn.pump_lock().partial_since();
        let readable = async {
            match partial {
                None => conn.rx.readable().await.map(|()| true),
                Some(since) => {
                    let left = body_timeout.saturating_sub(since.elapsed());
                    match tokio::time::timeout(left, conn.rx.readable()).await {
                        Ok(r) => r.map(|()| true),
                        Err(_) => Ok(false),
                    }
                }
            }
        };
        let readable = tokio::select! {
            r = readable => r,
            _ = closed.wait_for(Option::is_some) => return,
        };
        match readable {
            Ok(true) => {}
            Ok(false) => {
                return conn.fail(format!(
                    "read from brick failed: {}",
                    WireError::SlowSender(body_timeout)
                ));
            }
            Err(e) => return conn.fail(format!("read from brick failed: {e}")),
        }
        if let Err(why) = conn.drain(conn.pump_lock()) {
            return conn.fail(why);
        }
    }
}

async fn ping_loop(conn: Arc<Conn>) {
    let mut closed = conn.closed.subscribe();
    let mut seq = 0u64;
    loop {
        let ping_timeout = conn.timeouts.ping();
        // At least every 10 s: servers drop clients silent for their client-idle-timeout.
        let tick = (ping_timeout / 4).clamp(Duration::from_millis(25), PING_MAX_INTERVAL);
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = closed.wait_for(Option::is_some) => return,
        }
        let silent = conn.silent_for();
        if silent > ping_timeout {
            return conn.fail(format!(
                "brick {} sent nothing for {silent:?} (ping-timeout {ping_timeout:?})",
                conn.peer
            ));
        }
        seq += 1;
        match wire::encode(&ClientMsg::Ping(seq), Vec::new(), HANDSHAKE_MAX_FRAME) {
            // A full queue means traffic is flowing; the silence check still applies.
            Ok(f) => conn.sender.try_queue(f),
            Err(e) => tracing::debug!("ping not encoded: {e}"),
        }
    }
}
