//! One client connection on the server: handshake (address, version, fop table, secret,
//! volume; a Unix-socket peer's ids from the kernel, see [`super::identity`]), then a reader
//! that validates every frame, sets the ids each call runs as, and starts each request as its own
//! future (bounded by `max-inflight-per-connection`; lock requests bounded apart and
//! cancellable, see [`LockWaits`]), and a writer coalescing the replies. Any bad input closes
//! this connection only, with one log line. When the connection ends, its waiting lock
//! requests are dropped, its fds and locks released and `forget_client` sent down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::collections::HashMap;

use tokio::sync::{Semaphore, oneshot};
use xlator_api::{BackingWanted, ClientId, Errno, Fop, FopAttrs, PipePayloadOk};

use super::Shared;
use super::identity::{self, Peer};
use super::limits::{Slot, Throttle};
use super::session::Session;
use super::stuck::{self, Running as Requests};
use crate::wire::spin::Backoff;
use crate::wire::{
    self, ClientMsg, FrameReader, FrameSender, HANDSHAKE_MAX_FRAME, Hello, ReadHalf, SendError,
    ServerMsg, Stream, VOLFILE_MAX_FRAME, VolfileReply, VolfileRequest, VolfileWatch, WireError,
    WriteHalf,
};

/// Gives `sock` a send buffer of `size` bytes as the kernel counts them (it doubles what it
/// is asked for): SO_SNDBUFFORCE, which may exceed net.core.wmem_max but needs
/// CAP_NET_ADMIN, else SO_SNDBUF (capped at wmem_max).
fn set_send_buffer(sock: &tokio::net::UnixStream, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let half = libc::c_int::try_from(size / 2).unwrap_or(libc::c_int::MAX);
    let set = |opt| {
        // SAFETY: a valid socket fd and a pointer to a c_int of the size passed.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const half).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    set(libc::SO_SNDBUFFORCE).or_else(|_| set(libc::SO_SNDBUF))
}

impl Shared {
    /// Counts a connection refused (told why, or closed for what it sent) and logs why, at
    /// most once a second ([`Throttle`]): a flood of bad clients does not flood the log.
    pub(super) fn refused_because(&self, why: std::fmt::Arguments<'_>) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = self.refused_log.admit() {
            tracing::warn!("{}: {why}{}", self.name, Throttle::more(n, "refused"));
        }
    }

    /// Counts a connection dropped (gone quiet, or broken) and logs why, like
    /// [`Shared::refused_because`].
    pub(super) fn dropped_because(&self, why: std::fmt::Arguments<'_>) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = self.dropped_log.admit() {
            tracing::warn!("{}: {why}{}", self.name, Throttle::more(n, "dropped"));
        }
    }
}

/// Serves one accepted socket until it closes.
/// `slot` is its place under the connection bounds (`limits`), given back when it ends.
pub async fn serve(shared: Arc<Shared>, sock: Stream, peer: SocketAddr, mut slot: Slot) {
    let sock = match (sock, &shared.tls) {
        (Stream::Tcp(t), Some(tls)) => {
            let _ = t.set_nodelay(true);
            let accept = tokio::time::timeout(shared.handshake_timeout, tls.acceptor.accept(t));
            let s = tokio::select! {
                r = accept => r,
                () = slot.evicted() => return,
            };
            let s = match s {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    shared
                        .refused_because(format_args!("refused {peer}: TLS handshake failed: {e}"));
                    return;
                }
                Err(_) => {
                    shared.dropped_because(format_args!(
                        "dropping {peer}: no TLS handshake within {:?}",
                        shared.handshake_timeout
                    ));
                    return;
                }
            };
            let (io, conn) = s.into_inner();
            if let Err(why) = tls.allows(conn.peer_certificates().and_then(|c| c.first())) {
                shared.refused_because(format_args!("refused {peer}: {why}"));
                let Ok((_, mut w)) =
                    Stream::Tls(crate::wire::tls::TlsIo::new(io, conn)).into_split()
                else {
                    return;
                };
                refuse(&mut w, format!("refused by brick {:?}: {why}", shared.name)).await;
                return;
            }
            Stream::Tls(crate::wire::tls::TlsIo::new(io, conn))
        }
        (s, _) => s,
    };
    // Who the kernel says a Unix-socket peer is (see `identity`); a TLS peer's certificate
    // was checked.
    let mut ids = match &sock {
        Stream::Tcp(_) => Peer::Remote { trusted: false },
        Stream::Tls(_) => Peer::Remote { trusted: true },
        Stream::Unix(u) => match Peer::of_unix(std::os::fd::AsFd::as_fd(u)) {
            Ok(p) => p,
            Err(e) => {
                shared.dropped_because(format_args!(
                    "dropping a connection on the Unix socket: the kernel does not say \
                     who its peer is ({e})"
                ));
                return;
            }
        },
    };
    // Root on this machine (the Unix socket) may be given backing files.
    let local = ids.is_local_root();
    match &sock {
        Stream::Tcp(t) => {
            let _ = t.set_nodelay(true);
        }
        Stream::Tls(_) => {}
        Stream::Unix(u) => {
            let size = shared.unix_send_buffer.load(Ordering::Relaxed);
            if size > 0
                && let Err(e) = set_send_buffer(u, size)
            {
                tracing::debug!("{}: unix-send-buffer not set for {peer}: {e}", shared.name);
            }
        }
    }
    let (r, mut w) = match sock.into_split() {
        Ok(halves) => halves,
        Err(e) => {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return tracing::debug!("{}: dropping {peer}: {e}", shared.name);
        }
    };
    let mut reader = FrameReader::new(r, HANDSHAKE_MAX_FRAME);
    let first_frame = async {
        tokio::select! {
            r = tokio::time::timeout(shared.handshake_timeout, read_first(&mut reader, &shared)) => Some(r),
            () = slot.evicted() => None,
        }
    };
    let Some(first) = first_frame.await else {
        shared.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            "{}: {peer} evicted before its handshake: max-pending-handshakes is full and its \
             address held the most pending connections",
            shared.name
        );
        return;
    };
    let first = match first {
        Ok(Ok(Some(h))) => {
            slot.handshake_done();
            h
        }
        Ok(Ok(None)) => {
            // Connected and closed without a byte: a port probe (`xlfs up` waits for the
            // brick this way), not a misbehaving client.
            tracing::debug!(
                "{}: {peer} connected and closed without a handshake",
                shared.name
            );
            return;
        }
        Ok(Err(e)) => {
            shared.dropped_because(format_args!(
                "dropping connection from {peer} before handshake: {e}"
            ));
            return;
        }
        Err(_) => {
            shared.dropped_because(format_args!(
                "dropping connection from {peer}: no handshake within {:?}",
                shared.handshake_timeout
            ));
            return;
        }
    };
    // The secret's challenge, once the request passed the other checks (a refused one is
    // answered with its refusal below).
    let (volume, nonce, checked) = match &first {
        First::OtherVersion(v) => {
            let reason = super::same_release(*v, wire::SCHEMA, "brick")
                .err()
                .unwrap_or_default();
            shared.refused_because(format_args!("refused {peer}: {reason}"));
            refuse(&mut w, reason).await;
            return;
        }
        First::Hello(h) => (&h.volume, &h.nonce, shared.admit(h, peer).map(drop)),
        First::Volfile(r) => (&r.volume, &r.nonce, shared.volfile_for(r, peer).map(drop)),
        First::Watch(w) => (
            &w.request.volume,
            &w.request.nonce,
            shared.volfile_for(&w.request, peer).map(drop),
        ),
    };
    if let (Ok(()), Some(secret)) = (checked, shared.secret()) {
        let from = match first {
            First::Hello(_) => super::CLIENT_SECRET,
            _ => super::FETCH_SECRET,
        };
        let exchange = challenge(&mut reader, &mut w, &secret, volume, nonce, from);
        match tokio::time::timeout(shared.handshake_timeout, exchange).await {
            Ok(Ok(())) => {
                if let Peer::Remote { trusted } = &mut ids {
                    *trusted = true;
                }
            }
            Ok(Err(Challenged::Refuse(reason))) => {
                shared.refused_because(format_args!("refused {peer}: {reason}"));
                refuse(&mut w, reason).await;
                return;
            }
            Ok(Err(Challenged::Gone(why))) => {
                shared.refused_because(format_args!(
                    "{peer} did not answer the secret's challenge ({why}): a client \
                     without the volume's secret, or with another one"
                ));
                return;
            }
            Err(_) => {
                shared.dropped_because(format_args!(
                    "dropping {peer}: no answer to the secret's challenge within {:?}",
                    shared.handshake_timeout
                ));
                return;
            }
        }
    }
    let hello = match first {
        First::OtherVersion(_) => return,
        First::Hello(h) => h,
        First::Volfile(req) => return serve_volfile(&shared, w, req, peer, false).await,
        First::Watch(watch) => return serve_watch(&shared, w, watch, peer).await,
    };
    let welcome = match shared.admit(&hello, peer) {
        Ok(w) => w,
        Err(reason) => {
            shared.refused_because(format_args!(
                "refused client {:?} from {peer}: {reason}",
                hello.client
            ));
            refuse(&mut w, reason).await;
            return;
        }
    };
    let peer_max = (hello.max_frame as usize).min(shared.max_frame);
    match wire::encode(
        &ServerMsg::Welcome(welcome),
        Vec::new(),
        HANDSHAKE_MAX_FRAME,
    ) {
        Ok(f) => {
            if let Err(e) = wire::write_frames(&mut w, std::slice::from_ref(&f)).await {
                tracing::debug!("{}: {peer} went away during handshake: {e}", shared.name);
                return;
            }
        }
        Err(e) => {
            tracing::error!("{}: cannot encode welcome: {e}", shared.name);
            return;
        }
    }
    reader.set_max(shared.max_frame);
    shared.connections.fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        "{}: client {:?} connected from {peer} ({})",
        shared.name,
        hello.client,
        ids.describe()
    );

    let session = Arc::new(Session::new(
        shared.child.clone(),
        shared.next_fd.clone(),
        shared.max_fds,
    ));
    shared.register(&session);
    let tx = FrameSender::with_deadline(w, 1024, Some(shared.send_timeout));
    let work = InFlight {
        requests: Arc::new(Semaphore::new(shared.max_inflight)),
        reply_bytes: Arc::new(Semaphore::new(shared.reply_kib)),
        locks: Arc::new(LockWaits::new()),
        running: Arc::new(Requests::default()),
    };

    let client = Client {
        id: ClientId(shared.next_client.fetch_add(1, Ordering::Relaxed)),
        local,
    };
    shared.upcalls.attach(client.id, tx.clone(), peer_max);
    // A task of its own: it must run even while this connection's reader is the thread
    // stuck in a fop (see `stuck`).
    let sweeper = tokio::spawn({
        let (name, child) = (shared.name.clone(), shared.child.clone());
        let (running, tx) = (work.running.clone(), tx.clone());
        async move { stuck::answer_stuck(&name, &child, &running, &tx, peer_max).await }
    });
    let outcome = read_loop(
        &shared,
        &mut reader,
        &session,
        (client, &ids),
        &tx,
        &work,
        peer_max,
    )
    .await;
    match &outcome {
        Ok(why) => {
            tracing::info!("{}: client {:?} ({peer}) {why}", shared.name, hello.client);
        }
        Err(e) => {
            shared.dropped_because(format_args!(
                "dropping connection of client {:?} ({peer}): {e}",
                hello.client
            ));
        }
    }
    // Close the socket now; replies still being computed are discarded. Waiting lock
    // requests stop waiting (their futures are dropped).
    sweeper.abort();
    shared.upcalls.detach(client.id);
    tx.close().await;
    drop(reader);
    work.locks.cancel_all();
    // Requests still running finish on their own; those that open an fd or take a lock
    // after this point give it back at once (the session is closed).
    let released = session.close(client.id).await;
    shared.unregister(&session);
    shared.connections.fetch_sub(1, Ordering::Relaxed);
    if released > 0 {
        tracing::info!(
            "{}: released {released} fds (and their locks) of client {:?}",
            shared.name,
            hello.client
        );
    }
}

/// Sends a refusal and closes the connection.
pub(crate) async fn refuse(w: &mut WriteHalf, reason: String) {
    if let Ok(f) = wire::encode(&ServerMsg::Refused(reason), Vec::new(), HANDSHAKE_MAX_FRAME) {
        let _ = wire::write_frames(w, std::slice::from_ref(&f)).await;
    }
    let _ = tokio::io::AsyncWriteExt::shutdown(w).await;
}

/// How the secret's challenge failed.
pub(crate) enum Challenged {
    /// The client answered wrongly: tell it why.
    Refuse(String),
    /// It went away or sent something else (a client without the secret closes when it sees
    /// the challenge; one with another secret closes when the brick's proof does not match).
    Gone(String),
}

/// The brick's half of the challenge-response (see [`crate::creds`]): sends its nonce and
/// proof, then checks the client's proof.
pub(crate) async fn challenge(
    reader: &mut FrameReader<ReadHalf>,
    w: &mut WriteHalf,
    secret: &str,
    volume: &str,
    client_nonce: &[u8],
    from: &str,
) -> Result<(), Challenged> {
    use crate::creds::{self, Role};
    if client_nonce.len() != creds::NONCE_LEN {
        return Err(Challenged::Refuse(format!(
            "the client's nonce has {} bytes, not {}",
            client_nonce.len(),
            creds::NONCE_LEN
        )));
    }
    let nonce = creds::nonce();
    let msg = ServerMsg::Challenge(wire::Challenge {
        nonce: nonce.to_vec(),
        proof: creds::proof(secret, Role::Server, volume, client_nonce, &nonce),
    });
    let f = wire::encode(&msg, Vec::new(), HANDSHAKE_MAX_FRAME)
        .map_err(|e| Challenged::Gone(e.to_string()))?;
    wire::write_frames(w, std::slice::from_ref(&f))
        .await
        .map_err(|e| Challenged::Gone(e.to_string()))?;
    let body = match reader.next(HANDSHAKE_TIMEOUT_CAP).await {
        Ok(Some(b)) => b,
        Ok(None) => return Err(Challenged::Gone("it closed the connection".into())),
        Err(e) => return Err(Challenged::Gone(e.to_string())),
    };
    match wire::decode::<ClientMsg>(body).map(|m| m.0) {
        Ok(ClientMsg::Prove(p))
            if creds::verify(secret, Role::Client, volume, client_nonce, &nonce, &p) =>
        {
            Ok(())
        }
        Ok(ClientMsg::Prove(_)) => Err(Challenged::Refuse(format!(
            "wrong secret: {from} does not hold this volume's secret"
        ))),
        Ok(_) => Err(Challenged::Gone(
            "it sent another message than its proof".into(),
        )),
        Err(e) => Err(Challenged::Gone(e.to_string())),
    }
}

/// A bound on one frame of the challenge (the whole exchange is under `handshake-timeout`).
const HANDSHAKE_TIMEOUT_CAP: Duration = Duration::from_secs(600);

/// What a connection starts with.
enum First {
    /// A hello or volfile request of another protocol version (which this brick cannot
    /// decode): refused with a message naming both versions.
    OtherVersion(u32),
    Hello(Hello),
    Volfile(VolfileRequest),
    Watch(VolfileWatch),
}

/// The first message, or `None` if the peer closed before sending anything.
async fn read_first(
    reader: &mut FrameReader<ReadHalf>,
    shared: &Shared,
) -> Result<Option<First>, WireError> {
    let Some(body) = reader.next(shared.frame_receive_timeout).await? else {
        return Ok(None);
    };
    if let Some(v) = wire::claimed_version(&body)
        && v != wire::PROTOCOL_VERSION
    {
        return Ok(Some(First::OtherVersion(v)));
    }
    match wire::decode::<ClientMsg>(body)?.0 {
        ClientMsg::Hello(h) => Ok(Some(First::Hello(h))),
        ClientMsg::GetVolfile(r) => Ok(Some(First::Volfile(r))),
        ClientMsg::WatchVolfile(w) => Ok(Some(First::Watch(w))),
        _ => Err(WireError::Io(std::io::Error::other(
            "first frame is neither a hello nor a volfile request",
        ))),
    }
}

/// Answers a volfile request (the volfile or a refusal), then closes the connection. No
/// session is attached.
/// `renewal`: the answer to a watch whose hold passed with the text unchanged (logged at debug
/// level: every watching client renews twice a minute).
async fn serve_volfile(
    shared: &Shared,
    mut w: WriteHalf,
    req: VolfileRequest,
    peer: SocketAddr,
    renewal: bool,
) {
    let answer = match shared.volfile_for(&req, peer) {
        Ok(path) => match read_volfile(&path).await {
            Ok(text) => Ok(text),
            Err(e) => {
                tracing::error!("{}: {e}", shared.name);
                Err(format!(
                    "the brick cannot serve volume {:?}: {e}",
                    req.volume
                ))
            }
        },
        Err(reason) => Err(reason),
    };
    let msg = match answer {
        Ok(text) => {
            shared.volfiles_served.fetch_add(1, Ordering::Relaxed);
            if renewal {
                tracing::debug!(
                    "{}: the client volfile of {:?} is unchanged for {:?} ({peer})",
                    shared.name,
                    req.volume,
                    req.client
                );
            } else {
                tracing::info!(
                    "{}: sent the client volfile of {:?} to {:?} ({peer})",
                    shared.name,
                    req.volume,
                    req.client
                );
            }
            ServerMsg::Volfile(VolfileReply {
                volume: req.volume,
                text,
            })
        }
        Err(reason) => {
            shared.refused_because(format_args!(
                "refused the volfile of {:?} to {:?} ({peer}): {reason}",
                req.volume, req.client
            ));
            ServerMsg::Refused(reason)
        }
    };
    match wire::encode(&msg, Vec::new(), VOLFILE_MAX_FRAME) {
        Ok(f) => {
            // Up to 4 MiB: a peer that does not read it is dropped after `send-timeout`.
            let write = wire::write_frames(&mut w, std::slice::from_ref(&f));
            if tokio::time::timeout(shared.send_timeout, write)
                .await
                .is_err()
            {
                tracing::warn!(
                    "{}: dropped {peer}: it did not read the volfile answer within the \
                     send-timeout ({:?})",
                    shared.name,
                    shared.send_timeout
                );
                return;
            }
        }
        Err(e) => tracing::error!("{}: cannot encode the volfile answer: {e}", shared.name),
    }
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
}

/// The longest a volfile watch is held before the server answers with the same text.
const WATCH_HOLD_MAX: std::time::Duration = std::time::Duration::from_secs(60);
/// How often a held watch rereads the volfile (`xlfs volume set` rewrites it in place).
const WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Answers a volfile watch: checked like a volfile request, then held until the served
/// volfile's text differs from the client's (`known`), the hold time passes, or the client
/// goes away; then answered like a request (the volfile, or a refusal) and closed. The
/// volfile is reread from its file every [`WATCH_POLL`], so whatever rewrites it (volume set,
/// later add-brick) reaches every watching client within that.
async fn serve_watch(shared: &Shared, w: WriteHalf, watch: VolfileWatch, peer: SocketAddr) {
    let hold = std::time::Duration::from_millis(u64::from(watch.hold_ms)).min(WATCH_HOLD_MAX);
    let deadline = tokio::time::Instant::now() + hold;
    let mut unchanged = false;
    if shared.volfile_for(&watch.request, peer).is_ok() {
        while let Ok(path) = shared.volfile_for(&watch.request, peer) {
            unchanged = matches!(
                read_volfile(&path).await,
                Ok(text) if crate::fetch::volfile_version(&text) == watch.known
            );
            if !unchanged || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(WATCH_POLL).await;
        }
    }
    serve_volfile(shared, w, watch.request, peer, unchanged).await;
}

/// Reads a client volfile, refusing one that does not fit a frame.
async fn read_volfile(path: &std::path::Path) -> Result<String, String> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| format!("cannot read its client volfile {}: {e}", path.display()))?;
    if text.len() > VOLFILE_MAX_FRAME - 1024 {
        return Err(format!(
            "its client volfile {} is {} bytes, more than the {} a volfile answer carries",
            path.display(),
            text.len(),
            VOLFILE_MAX_FRAME - 1024
        ));
    }
    Ok(text)
}

/// Fops that cost a few system calls on the brick and no data transfer (candidates to run on
/// the reader itself). Exhaustive, so a new fop is classified when it is added.
fn short_metadata_fop(fop: Fop) -> bool {
    match fop {
        Fop::Lookup
        | Fop::Stat
        | Fop::Fstat
        | Fop::Setattr
        | Fop::Fsetattr
        | Fop::Access
        | Fop::Readlink
        | Fop::Mknod
        | Fop::Mkdir
        | Fop::Unlink
        | Fop::Rmdir
        | Fop::Symlink
        | Fop::Rename
        | Fop::Link
        | Fop::Create
        | Fop::Open
        | Fop::Opendir
        | Fop::Flush
        | Fop::Release
        | Fop::Releasedir
        | Fop::Statfs
        | Fop::Getxattr
        | Fop::Fgetxattr
        | Fop::Setxattr
        | Fop::Fsetxattr
        | Fop::Removexattr
        | Fop::Fremovexattr
        | Fop::Getxattrs
        | Fop::Setxattrs => true,
        // Data, sync and listings may take long; lock requests have their own path
        // (`LockWaits`); forget_client never comes from the wire.
        Fop::Readv
        | Fop::Writev
        | Fop::Fsync
        | Fop::Fsyncdir
        | Fop::Readdirp
        | Fop::Listxattr
        | Fop::Fallocate
        | Fop::Discard
        | Fop::Zerofill
        | Fop::Seek
        | Fop::Lk
        | Fop::Inodelk
        | Fop::Entrylk
        | Fop::Xattrop
        | Fop::Fxattrop
        | Fop::Rchecksum
        | Fop::ForgetClient => false,
    }
}

/// Lock requests of one connection in flight (a waiting one may wait for long): they do not
/// count against `max-inflight-per-connection`, so waiting locks never stop the reader (and
/// the client's pings) from being read, and each can be cancelled by the client
/// ([`ClientMsg::Cancel`]) or when the connection ends: dropping the request's future
/// withdraws a waiting request from features/locks.
struct LockWaits {
    slots: Arc<Semaphore>,
    cancels: std::sync::Mutex<HashMap<u64, Running>>,
}

/// A lock request in flight: fire `cancel` to drop it; `dropped` resolves (its sender is
/// dropped) once the request's future has let go of the graph's.
struct Running {
    cancel: oneshot::Sender<()>,
    dropped: oneshot::Receiver<()>,
}

/// KiB of reply bytes `req` reserves before it runs (`max-reply-bytes-per-connection`, `total`
/// KiB in all): a `readv`'s or `readdirp`'s size (already clamped to `max-read` by `bounds`);
/// other replies are small and reserve nothing.
fn reply_reserve(req: &wire::Request, total: usize) -> u32 {
    let bytes = match req {
        wire::Request::Readv { size, .. } | wire::Request::Readdirp { size, .. } => *size,
        _ => return 0,
    };
    (bytes.div_ceil(1024).max(1) as usize).min(total) as u32
}

/// What the request future keeps: the cancel signal, and what tells the reader it is done.
struct Cancel {
    rx: oneshot::Receiver<()>,
    _done: oneshot::Sender<()>,
}

/// What one connection has running: requests (bounded by `max-inflight-per-connection`; at
/// the limit the reader waits) and lock requests (see [`LockWaits`]).
struct InFlight {
    requests: Arc<Semaphore>,
    /// KiB of replies reserved (`max-reply-bytes-per-connection`): see [`reply_reserve`].
    reply_bytes: Arc<Semaphore>,
    locks: Arc<LockWaits>,
    /// The requests (not lock requests) running, for [`stuck::answer_stuck`].
    running: Arc<Requests>,
}

/// Most lock requests of one connection in flight; more are answered ENOLCK.
const MAX_LOCK_WAITS: usize = 4096;

impl LockWaits {
    fn new() -> LockWaits {
        LockWaits {
            slots: Arc::new(Semaphore::new(MAX_LOCK_WAITS)),
            cancels: std::sync::Mutex::new(HashMap::new()),
        }
    }

    fn cancels(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Running>> {
        self.cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers call `id`.
    fn start(&self, id: u64) -> Cancel {
        let (cancel, rx) = oneshot::channel();
        let (done, dropped) = oneshot::channel();
        self.cancels().insert(id, Running { cancel, dropped });
        Cancel { rx, _done: done }
    }

    fn done(&self, id: u64) {
        self.cancels().remove(&id);
    }

    /// Cancels call `id` if it is still running, and waits until its future has dropped the
    /// request it made below (features/locks then no longer has it waiting): a cancel takes
    /// effect before the next frame of the connection is read.
    async fn cancel(&self, id: u64) {
        let Some(r) = self.cancels().remove(&id) else {
            return;
        };
        let _ = r.cancel.send(());
        // Bounded, though the drop happens at the future's next poll, right away.
        let _ = tokio::time::timeout(Duration::from_secs(1), r.dropped).await;
    }

    /// Cancels every request still running (the connection is gone).
    fn cancel_all(&self) {
        for (_, r) in self.cancels().drain() {
            let _ = r.cancel.send(());
        }
    }
}

/// Runs `fut` unless `cancel` fires first (then drops it and gives EINTR).
async fn cancellable<T>(
    fut: impl Future<Output = Result<T, Errno>>,
    cancel: Cancel,
) -> Result<T, Errno> {
    let Cancel { rx, _done: done } = cancel;
    let cancelled = async {
        // A dropped sender is a request that finished (`LockWaits::done`), not a cancel.
        if rx.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let r = tokio::select! {
        biased;
        r = fut => r,
        () = cancelled => Err(Errno::EINTR),
    };
    // `fut` is gone (dropped with the select): tell a waiting cancel.
    drop(done);
    r
}

/// `request-spin`: polls the socket until a request is there or the budget has passed. The
/// following read then finds it without the reactor's sleep.
fn wait_for_next(reader: &FrameReader<ReadHalf>, shared: &Shared, backoff: &Backoff) {
    let (sock, buffered) = reader.get_ref();
    if !buffered {
        let budget = Duration::from_micros(shared.request_spin_us.load(Ordering::Relaxed));
        backoff.poll_until(budget, || sock.ready_now());
    }
}

/// Who sends a connection's requests.
#[derive(Clone, Copy)]
struct Client {
    id: ClientId,
    /// Root on this machine, through the Unix socket: it can fetch backing files (fds
    /// opened read-write as root) from this process. A non-root local peer cannot: such an
    /// fd would let it write files it may only read.
    local: bool,
}

/// The context a request runs with: the caller's identity and wire extensions (minus any
/// server-set or local key the client sent: [`wire::WireCtx::to_builder`]), then what only
/// the server knows: the connection's [`ClientId`], whether a read may come back in a pipe,
/// whether a local client may take a backing file.
fn request_ctx(call: &wire::Call, client: Client, pipe_ok: bool) -> xlator_api::Ctx {
    let cx = call.ctx.to_builder().ext(&client.id);
    let cx = if pipe_ok { cx.ext(&PipePayloadOk) } else { cx };
    let backing =
        client.local && call.ctx.backing_wanted && matches!(call.req, wire::Request::Open { .. });
    if backing { cx.ext(&BackingWanted) } else { cx }.build()
}

/// Sends the reply to call `id`; false if the connection is gone.
async fn reply_now(
    tx: &FrameSender<WriteHalf>,
    id: u64,
    result: Result<wire::ReplyBody, Errno>,
    peer_max: usize,
) -> bool {
    match wire::encode_reply(id, result, peer_max) {
        Ok(f) => tx.send(f).await.is_ok(),
        Err(_) => true,
    }
}

/// Starts a lock request (`inodelk`, `entrylk`, `lk`): polled once right here (features/locks
/// answers from memory; blocking jobs, if any, go to the pool), then, if it must wait, parked
/// until the lock is granted or the request is cancelled. False if the connection is gone.
async fn start_lock_request(
    session: &Arc<Session>,
    client: Client,
    tx: &Arc<FrameSender<WriteHalf>>,
    locks: &Arc<LockWaits>,
    call: wire::Call,
    peer_max: usize,
) -> bool {
    let Ok(slot) = locks.slots.clone().try_acquire_owned() else {
        return reply_now(tx, call.id, Err(Errno::ENOLCK), peer_max).await;
    };
    let cancel = locks.start(call.id);
    let (session, tx, locks) = (session.clone(), tx.clone(), locks.clone());
    let request = async move {
        let cx = request_ctx(&call, client, false);
        let result = cancellable(session.execute(&cx, call.req), cancel).await;
        locks.done(call.id);
        let _ = reply_now(&tx, call.id, result, peer_max).await;
        drop(slot);
    };
    xlfs_core::services::poll_here_then_spawn(request, false);
    true
}

/// When a connection last showed life: a frame read from it, or one of its requests done.
struct Activity {
    start: tokio::time::Instant,
    /// Milliseconds after `start`.
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: tokio::time::Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn last(&self) -> tokio::time::Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// Resolves once nothing happened for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let due = self.last() + idle;
            if tokio::time::Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }
}

/// Serves a connection's requests until the client leaves (`Ok(why)`), sends bad input or
/// cannot be written to (`Err`), or the server stops.
///
/// Whatever the reader is doing (waiting for a frame, for a free request slot at
/// `max-inflight-per-connection`, or to send a pong), two bounds hold: a reply that cannot be
/// written within `send-timeout` closes the connection (a client that stopped reading), and
/// a connection from which no frame arrived and none of whose requests finished for
/// `client-idle-timeout` is closed. Either way the client's fds and locks are then released
/// like at any disconnect: a client cannot keep them by not reading.
async fn read_loop(
    shared: &Arc<Shared>,
    reader: &mut FrameReader<ReadHalf>,
    session: &Arc<Session>,
    client: (Client, &Peer),
    tx: &Arc<FrameSender<WriteHalf>>,
    work: &InFlight,
    peer_max: usize,
) -> Result<&'static str, WireError> {
    let activity = Arc::new(Activity::new());
    tokio::select! {
        r = read_requests(shared, reader, session, client, tx, work, peer_max, &activity) => r,
        () = activity.idle_for(shared.client_idle_timeout) => {
            Ok("sent nothing and had no request finish for the client-idle-timeout; \
                disconnected")
        }
        e = tx.broken() => match e {
            e @ SendError::TimedOut(_) => Err(WireError::Io(std::io::Error::other(format!(
                "a reply could not be sent within the send-timeout: {e}"
            )))),
            // The peer went away (reset, broken pipe): an ordinary disconnect.
            _ => Ok("disconnected"),
        },
    }
}

#[allow(clippy::too_many_arguments)]
async fn read_requests(
    shared: &Arc<Shared>,
    reader: &mut FrameReader<ReadHalf>,
    session: &Arc<Session>,
    (client, ids): (Client, &Peer),
    tx: &Arc<FrameSender<WriteHalf>>,
    work: &InFlight,
    peer_max: usize,
    activity: &Arc<Activity>,
) -> Result<&'static str, WireError> {
    let (inflight, locks) = (&work.requests, &work.locks);
    let mut stop = shared.stop.clone();
    let spin = Backoff::default();
    // Whether the last request came while the client had nothing else in flight.
    let mut last_alone = false;
    // What a reply may carry (`max-read`, the frame limits): see `bounds`.
    let read_cap = super::bounds::read_cap(shared.max_read, peer_max);
    loop {
        if last_alone {
            wait_for_next(reader, shared, &spin);
        }
        // `client-idle-timeout` is kept by `read_loop`, in every state.
        let next = tokio::select! {
            r = reader.next(shared.frame_receive_timeout) => r,
            _ = stop.wait_for(|s| *s) => return Ok("disconnected: server shutting down"),
        };
        let Some(body) = next? else {
            return Ok("disconnected");
        };
        activity.touch();
        match wire::decode::<ClientMsg>(body)? {
            (ClientMsg::Call(mut call), mut payloads) => {
                call.req.restore_payload(&mut payloads)?;
                // The ids it runs as: a local peer's own, squashed as configured.
                identity::apply(&mut call.ctx, ids, &shared.squash);
                if let Err(e) = call
                    .ctx
                    .check_ext()
                    .and_then(|()| super::bounds::apply(&mut call.req, read_cap))
                {
                    // Over the extension or size limits: refused, the connection stays.
                    if !reply_now(tx, call.id, Err(e), peer_max).await {
                        return Ok("disconnected");
                    }
                    continue;
                }
                if call.req.fop().attrs().contains(FopAttrs::LOCKS) {
                    if !start_lock_request(session, client, tx, locks, call, peer_max).await {
                        return Ok("disconnected");
                    }
                    continue;
                }
                let alone = inflight.available_permits() == shared.max_inflight;
                last_alone = alone;
                // Back-pressure: at the limit, stop reading from this client.
                let permit = tokio::select! {
                    p = inflight.clone().acquire_owned() => p,
                    _ = stop.wait_for(|s| *s) => return Ok("disconnected: server shutting down"),
                };
                let Ok(permit) = permit else {
                    return Ok("disconnected");
                };
                // The reply's bytes, reserved until it is written: at the budget, stop
                // reading (a client that does not read its replies cannot pile them up).
                let kib = reply_reserve(&call.req, shared.reply_kib);
                let hold = if kib == 0 {
                    None
                } else {
                    let r = tokio::select! {
                        r = work.reply_bytes.clone().acquire_many_owned(kib) => r,
                        _ = stop.wait_for(|s| *s) => return Ok("disconnected: server shutting down"),
                    };
                    match r {
                        Ok(h) => Some(h),
                        Err(_) => return Ok("disconnected"),
                    }
                };
                let reads_an_open_fd =
                    matches!(&call.req, wire::Request::Readv { fd, .. } if !fd.is_anonymous());
                // A small buffered write usually only copies into the page cache.
                let write_max = shared.inline_write_max.load(Ordering::Relaxed);
                let small_write = matches!(&call.req, wire::Request::Writev { data, flags, .. }
                    if (data.len() as u64) <= write_max
                        && !data.is_empty()
                        && flags & (libc::O_SYNC | libc::O_DSYNC | libc::O_DIRECT) == 0);
                let fop = call.req.fop();
                // A large read may come back in a pipe, spliced on to the socket.
                let splice_min = shared.splice_read_min.load(Ordering::Relaxed);
                let pipe_ok = matches!(&call.req, wire::Request::Readv { fd, size, .. }
                    if splice_min > 0 && u64::from(*size) >= splice_min && !fd.is_anonymous());
                let (session, tx, activity) = (session.clone(), tx.clone(), activity.clone());
                let running = work.running.clone();
                running.start(call.id);
                // What to record and tell once it succeeds (see `upcall`).
                let upcalls = shared
                    .upcalls
                    .enabled()
                    .then(|| super::upcall::effects(&call.req))
                    .filter(|fx| !fx.is_empty())
                    .map(|fx| (fx, shared.clone()));
                // Run on a blocking-pool thread: the brick's disk work happens right there
                // and the reply goes out from it, with no further thread switch (one
                // wakeup per request instead of three). See `poll_here_then_spawn`.
                let request = async move {
                    let cx = request_ctx(&call, client, pipe_ok);
                    let fop = call.req.fop();
                    let result = session.execute(&cx, call.req).await;
                    if let Some((fx, shared)) = upcalls {
                        shared
                            .upcalls
                            .done(client.id, fx, result.as_ref().map_err(|e| *e));
                    }
                    // Unless the server answered it already (stuck on a brick gone down).
                    if running.finish(call.id) {
                        let frame = wire::encode_reply(call.id, result, peer_max).or_else(|e| {
                            tracing::warn!("reply to {fop} (call {}) not sendable: {e}", call.id);
                            wire::encode_reply(call.id, Err(Errno::EOVERFLOW), peer_max)
                        });
                        if let Ok(f) = frame {
                            let _ = tx.send_holding(f, hold).await;
                        }
                    }
                    activity.touch();
                    drop(permit);
                };
                if reads_an_open_fd {
                    // storage/posix answers a read of cached data without blocking: answer it
                    // from the reader, no wakeup. Otherwise posix submits a blocking job, and
                    // the job and the rest of the request (the reply) go to one pool thread.
                    xlfs_core::services::poll_here_then_pool(request);
                } else if ((alone && short_metadata_fop(fop)) || small_write)
                    && shared
                        .inline_busy
                        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    // Run it right here on the reader, saving the hand-off to a pool
                    // thread and its wakeup: a short metadata fop when nothing else from
                    // this client is in flight (it waits for each reply, as `tar x` through
                    // one mount does), or a small buffered write (`inline-write-max`),
                    // which usually only copies into the page cache. Reads of data, sync
                    // and listing fops, other fops while others are in flight, and any
                    // while another reader is doing the same go to the pool: at most one
                    // runtime thread waits on the disk.
                    xlfs_core::services::poll_here_then_spawn(request, true);
                    shared.inline_busy.store(false, Ordering::Release);
                } else {
                    tokio::task::spawn_blocking(move || {
                        xlfs_core::services::poll_here_then_spawn(request, true);
                    });
                }
            }
            (ClientMsg::Ping(seq), _) => {
                if let Ok(f) = wire::encode(&ServerMsg::Pong(seq), Vec::new(), peer_max)
                    && tx.send(f).await.is_err()
                {
                    return Ok("disconnected");
                }
            }
            (ClientMsg::Cancel(id), _) => locks.cancel(id).await,
            (ClientMsg::Hello(_), _)
            | (ClientMsg::GetVolfile(_), _)
            | (ClientMsg::WatchVolfile(_), _)
            | (ClientMsg::Prove(_), _) => {
                return Err(WireError::Io(std::io::Error::other(
                    "handshake message in the middle of a connection",
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn send_buffer(sock: &tokio::net::UnixStream) -> i64 {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid socket fd, an int to write and its size.
        let r = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&raw mut v).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0, "getsockopt: {}", std::io::Error::last_os_error());
        i64::from(v)
    }

    /// The kernel keeps what `unix-send-buffer` says (root may exceed wmem_max; others get
    /// at most wmem_max, still more than the default when wmem_max allows).
    #[tokio::test]
    async fn unix_send_buffer_is_what_the_option_says() {
        let (a, _b) = tokio::net::UnixStream::pair().expect("pair");
        let before = send_buffer(&a);
        set_send_buffer(&a, 4 << 20).expect("set");
        let after = send_buffer(&a);
        // SAFETY: no arguments.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(after, 4 << 20, "before: {before}");
        } else {
            assert!(after >= before, "{before} -> {after}");
        }
    }
}
