//! `protocol/server`: the top of a brick graph. It listens on TCP, admits clients at handshake
//! (address allow-list, protocol version, fop table, secret, volume name) and runs their fops on
//! its one child, each request as its own task. Fops sent to the translator itself (in-process)
//! pass through to the child.

mod auth;
mod bounds;
mod conn;
mod identity;
mod limits;
mod options;
mod registry;
mod session;
mod stuck;
mod upcall;
pub mod volfiles;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use xlator_api::{Ctx, Dump, Errno, Init, Subvol, Translator};

pub use auth::AllowList;
pub use options::ServerOptions;

use crate::wire::{
    self, HEADER_ROOM, Hello, MAGIC, PROTOCOL_VERSION, ReplyBody, Request, Stream, VolfileRequest,
    Welcome, unix_socket_path,
};
use session::Session;

/// The translator type name.
pub const TYPE: &str = "protocol/server";

/// Access policy (reconfigurable).
struct Policy {
    allow: AllowList,
    /// `secret` or the first line of `secret-file`.
    secret: Option<String>,
    volfile: Option<ServedVolfile>,
}

/// The client volfile a brick hands out (`client-volfile`, `client-volfile-name`).
#[derive(Clone, Debug)]
struct ServedVolfile {
    name: String,
    path: PathBuf,
}

impl ServedVolfile {
    fn from_options(o: &ServerOptions) -> Result<Option<ServedVolfile>, String> {
        let (path, name) = (o.client_volfile.trim(), o.client_volfile_name.trim());
        match (path.is_empty(), name.is_empty()) {
            (true, true) => Ok(None),
            (true, false) => Err(format!(
                "client-volfile-name {name:?} is set but client-volfile is empty: name the \
                 client volfile to serve"
            )),
            (false, true) => Err(format!(
                "client-volfile {path:?} needs client-volfile-name: the volume name clients \
                 fetch it by (xlfs-mount HOST:/NAME)"
            )),
            (false, false) => Ok(Some(ServedVolfile {
                name: name.to_owned(),
                path: PathBuf::from(path),
            })),
        }
    }
}

/// State shared by the accept loop and every connection.
static NEXT_FD: std::sync::OnceLock<Arc<AtomicU64>> = std::sync::OnceLock::new();
static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

struct Shared {
    name: String,
    id: String,
    child: Subvol,
    volume_names: Vec<String>,
    policy: RwLock<Policy>,
    /// `root-squash`, `all-squash`, `anonuid`, `anongid` (see [`identity`]).
    squash: identity::Squash,
    max_frame: usize,
    /// Option `tls` and its files.
    tls: Option<crate::creds::ServerTls>,
    /// See [`Welcome::boot_id`] and option `boot-id`.
    boot_id: u64,
    /// `max-read` (bytes): see [`bounds`].
    max_read: usize,
    max_inflight: usize,
    /// `max-reply-bytes-per-connection`, in KiB (the permits of each connection's budget).
    reply_kib: usize,
    /// Held while a connection's reader runs a fop itself (see `conn::read_loop`): one at a
    /// time, so the other runtime threads keep serving the network while it blocks.
    inline_busy: AtomicBool,
    /// `request-spin` in microseconds.
    request_spin_us: AtomicU64,
    /// `inline-write-max` in bytes.
    inline_write_max: AtomicU64,
    /// Option `unix-send-buffer` (bytes; 0: the kernel's).
    unix_send_buffer: AtomicU64,
    splice_read_min: AtomicU64,
    /// Options `upcall`, `upcall-timeout`, `upcall-max-inodes`: see [`upcall`].
    upcalls: upcall::Upcalls,
    handshake_timeout: Duration,
    frame_receive_timeout: Duration,
    client_idle_timeout: Duration,
    send_timeout: Duration,
    /// `max-connections`, `max-connections-per-address`, `max-pending-handshakes`.
    limits: Arc<limits::Limits>,
    /// `max-fds-per-client`.
    max_fds: usize,
    /// Server-side fd ids: one counter for the whole process, so that they stay unique in a
    /// brick graph across all clients even when several servers (a reloaded graph's, or a
    /// test's) sit over the same subvolume.
    next_fd: Arc<AtomicU64>,
    /// The next connection's [`xlator_api::ClientId`], from one counter for the process for
    /// the same reason (features/locks keys locks by it).
    next_client: &'static AtomicU64,
    stop: watch::Receiver<bool>,
    sessions: Mutex<Vec<Arc<Session>>>,
    connections: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    dropped: AtomicU64,
    /// Log lines about refused and dropped connections ([`Shared::refused_because`]).
    refused_log: limits::Throttle,
    dropped_log: limits::Throttle,
    /// Connections closed at accept for being over a bound of [`limits`].
    over_limit: AtomicU64,
    volfiles_served: AtomicU64,
}

/// The checks every xlfs server (`what`: "brick", "volfile server") makes of a client's
/// release: the protocol version and the fop table it was built from.
pub(crate) fn same_release(version: u32, schema: u64, what: &str) -> Result<(), String> {
    if version != PROTOCOL_VERSION {
        return Err(format!(
            "client speaks protocol version {version}, this {what} speaks {PROTOCOL_VERSION}: \
             run the same xlfs release on clients and {what}s"
        ));
    }
    if schema != wire::SCHEMA {
        return Err(format!(
            "client and {what} were built from different fop tables (client {schema:016x}, \
             {what} {:016x}): run the same xlfs release on clients and {what}s",
            wire::SCHEMA
        ));
    }
    Ok(())
}

/// Where the client's secret comes from, for refusal messages.
pub(crate) const CLIENT_SECRET: &str = "the client's `secret-file` option";
pub(crate) const FETCH_SECRET: &str = "the mount's --secret-file";

impl Shared {
    /// The checks a hello and a volfile request share. The address is checked first, so a
    /// client from a refused address learns nothing else about the brick.
    #[allow(clippy::too_many_arguments)]
    fn check_peer(
        &self,
        policy: &Policy,
        magic: [u8; 4],
        version: u32,
        schema: u64,
        peer: SocketAddr,
    ) -> Result<(), String> {
        if magic != MAGIC {
            return Err("not an xlfs client (bad magic)".into());
        }
        if !policy.allow.allows(peer.ip()) {
            return Err(format!(
                "address {} is not allowed by brick {:?}: add it to the brick's auth-allow",
                peer.ip(),
                self.name
            ));
        }
        same_release(version, schema, "brick")
    }

    /// The brick's secret, which a client must prove it holds (see [`crate::creds`]).
    fn secret(&self) -> Option<String> {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .secret
            .clone()
    }

    /// Admits or refuses a client (before the secret's challenge).
    fn admit(&self, hello: &Hello, peer: SocketAddr) -> Result<Welcome, String> {
        let policy = self.policy.read().unwrap_or_else(PoisonError::into_inner);
        self.check_peer(&policy, hello.magic, hello.version, hello.schema, peer)?;
        if !self.volume_names.contains(&hello.volume) {
            return Err(format!(
                "volume {:?} is not served here; this brick serves {}: fix the client's \
                 remote-subvolume",
                hello.volume,
                self.volume_names
                    .iter()
                    .map(|v| format!("{v:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        Ok(Welcome {
            volume: hello.volume.clone(),
            server: self.id.clone(),
            max_frame: u32::try_from(self.max_frame).unwrap_or(u32::MAX),
            boot_id: self.boot_id,
        })
    }

    /// Checks a volfile request; returns the file to send.
    fn volfile_for(&self, req: &VolfileRequest, peer: SocketAddr) -> Result<PathBuf, String> {
        let policy = self.policy.read().unwrap_or_else(PoisonError::into_inner);
        self.check_peer(&policy, req.magic, req.version, req.schema, peer)?;
        match &policy.volfile {
            Some(v) if v.name == req.volume => Ok(v.path.clone()),
            Some(v) => Err(format!(
                "volume {:?} is not served by this brick; it serves: {:?}",
                req.volume, v.name
            )),
            None => Err(format!(
                "volume {:?} is not served by this brick; it serves no client volfile (start \
                 it with `xlfsd --client-volfile FILE`, as `xlfs volume start` does, or mount \
                 with --volfile)",
                req.volume
            )),
        }
    }

    fn register(&self, s: &Arc<Session>) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(s.clone());
    }

    fn unregister(&self, s: &Arc<Session>) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|x| !Arc::ptr_eq(x, s));
    }
}

/// The protocol/server translator.
pub struct Server {
    children: Vec<Subvol>,
    shared: Arc<Shared>,
    local: SocketAddr,
    /// The Unix socket for local clients, removed when the server stops.
    unix_path: Option<PathBuf>,
    stop: watch::Sender<bool>,
    /// This server's entry in the process-wide table [`listen_addr`] reads.
    _bound: registry::Registration,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(p) = &self.unix_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A listening socket of either transport.
enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl Listener {
    fn into_tokio(self) -> std::io::Result<TokioListener> {
        Ok(match self {
            Listener::Tcp(l) => TokioListener::Tcp(tokio::net::TcpListener::from_std(l)?),
            Listener::Unix(l) => TokioListener::Unix(tokio::net::UnixListener::from_std(l)?),
        })
    }
}

enum TokioListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

impl TokioListener {
    /// The next connection and its peer address; the Unix socket's clients count as
    /// 127.0.0.1 for `auth-allow`.
    async fn accept(&self) -> std::io::Result<(Stream, SocketAddr)> {
        match self {
            TokioListener::Tcp(l) => l.accept().await.map(|(s, a)| (Stream::Tcp(s), a)),
            TokioListener::Unix(l) => l.accept().await.map(|(s, _)| {
                let local = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
                (Stream::Unix(s), local)
            }),
        }
    }
}

/// `dir/brick-<port>.sock`, or the error that another process answers on it (see
/// [`bind_unix`]).
fn refuse_live_unix(name: &str, dir: &str, port: u16) -> Result<PathBuf, String> {
    let path = unix_socket_path(std::path::Path::new(dir), port);
    if let Some(pid) = live_socket(&path) {
        return Err(format!(
            "{name}: another process ({pid}) serves the Unix socket {}: stop that brick, or \
             give this one another listen-port or unix-socket-dir",
            path.display()
        ));
    }
    Ok(path)
}

/// Binds `dir/brick-<port>.sock`, mode 0660 (the brick's user and group: not every local
/// user, as the loopback port is; a peer's ids are checked anyway, see [`identity`]).
/// `Ok(None)` (with a warning) if it cannot; an error if another process answers on that
/// path: its socket is live (a brick on another address with this port, or in another
/// network namespace) and is never taken over. A socket nobody answers on is stale (its
/// brick died) and is replaced.
fn bind_unix(
    name: &str,
    dir: &str,
    port: u16,
) -> Result<Option<(std::os::unix::net::UnixListener, PathBuf)>, String> {
    use std::os::unix::fs::PermissionsExt;
    let path = refuse_live_unix(name, dir, port)?;
    let made = (|| {
        std::fs::create_dir_all(dir)?;
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let l = std::os::unix::net::UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660))?;
        l.set_nonblocking(true)?;
        Ok(l)
    })();
    match made {
        Ok(l) => Ok(Some((l, path))),
        Err(e) => {
            tracing::warn!(
                "{name}: no Unix socket at {} ({e}); local clients use TCP",
                path.display()
            );
            Ok(None)
        }
    }
}

/// Whether something answers on the Unix socket `path`: `Some("pid N")` (the peer's pid from
/// `SO_PEERCRED`, or "pid unknown"). A refused connection, or no such file, is `None`.
fn live_socket(path: &std::path::Path) -> Option<String> {
    let s = std::os::unix::net::UnixStream::connect(path).ok()?;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket fd, a ucred buffer and its size.
    let r = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    Some(if r == 0 && cred.pid > 0 {
        format!("pid {}", cred.pid)
    } else {
        "pid unknown".into()
    })
}

async fn accept_loop(shared: Arc<Shared>, listener: Listener) {
    let what = match &listener {
        Listener::Tcp(_) => "the listening socket",
        Listener::Unix(_) => "the Unix socket",
    };
    let listener = match listener.into_tokio() {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{}: cannot serve {what}: {e}", shared.name);
            return;
        }
    };
    let mut stop = shared.stop.clone();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        match accepted {
            Ok((sock, peer)) => {
                shared.accepted.fetch_add(1, Ordering::Relaxed);
                let addr = match &sock {
                    Stream::Tcp(_) | Stream::Tls(_) => Some(peer.ip()),
                    Stream::Unix(_) => None,
                };
                match shared.limits.admit(addr) {
                    Ok(slot) => drop(tokio::spawn(conn::serve(shared.clone(), sock, peer, slot))),
                    Err(why) => refuse_over_limit(&shared, sock, peer, &why),
                }
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("{}: accept on {what} failed: {e}", shared.name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Closes a connection over a bound of [`limits`] at once: a `Refused` frame saying which is
/// written if the socket takes it without waiting, nothing is read. Logged at most once a
/// second.
fn refuse_over_limit(shared: &Shared, sock: Stream, peer: SocketAddr, why: &str) {
    shared.over_limit.fetch_add(1, Ordering::Relaxed);
    if let Some(suppressed) = shared.limits.should_log() {
        let more = limits::Throttle::more(suppressed, "refused");
        tracing::warn!(
            "{}: closed a new connection from {peer}: {why}{more}; raise the option if this \
             load is expected",
            shared.name
        );
    }
    let msg = wire::ServerMsg::Refused(format!("brick {:?} is busy: {why}", shared.name));
    if let Ok(f) = wire::encode(&msg, Vec::new(), wire::HANDSHAKE_MAX_FRAME) {
        let mut bytes = f.head.clone();
        for p in &f.payload {
            bytes.extend_from_slice(p);
        }
        let _ = match &sock {
            Stream::Tcp(t) => t.try_write(&bytes),
            Stream::Unix(u) => u.try_write(&bytes),
            Stream::Tls(_) => Ok(0),
        };
    }
}

/// The boot id of option `boot-id`: the kernel's (hashed to 64 bits) for `host`, else (or if
/// the kernel does not say) a random one.
fn boot_id(mode: &str) -> u64 {
    let random = || u64::from_be_bytes(crate::creds::nonce()[..8].try_into().unwrap_or([7; 8]));
    if mode != "host" {
        return random();
    }
    match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        Ok(text) => {
            let d = ring::digest::digest(&ring::digest::SHA256, text.trim().as_bytes());
            u64::from_be_bytes(d.as_ref()[..8].try_into().unwrap_or([7; 8]))
        }
        Err(e) => {
            tracing::warn!("no kernel boot id ({e}): a new boot id at every brick start");
            random()
        }
    }
}

fn identity(name: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}:{name}", std::process::id())
}

impl Server {
    fn new(init: Init<ServerOptions>) -> Result<Server, String> {
        let o = init.options;
        let child = init
            .children
            .first()
            .cloned()
            .ok_or("protocol/server needs one child")?;
        let allow = AllowList::parse(&o.auth_allow)?;
        let volfile = ServedVolfile::from_options(&o)?;
        let port = u16::try_from(o.listen_port).map_err(|_| "listen-port out of range")?;
        // A live brick on this port's Unix socket is the conflict to name, whatever the TCP
        // bind below would say (on another address it may succeed, or fail for a reason of
        // its own); a port of 0 is known only once bound.
        if port != 0 && !o.unix_socket_dir.is_empty() {
            refuse_live_unix(&init.name, &o.unix_socket_dir, port)?;
        }
        let listener = std::net::TcpListener::bind((o.listen_host.as_str(), port))
            .map_err(|e| format!("cannot listen on {}:{port}: {e}", o.listen_host))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen: {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("cannot listen: {e}"))?;
        let mut volume_names = vec![child.name().to_owned()];
        if !o.volume_name.is_empty() && o.volume_name != child.name() {
            volume_names.insert(0, o.volume_name.clone());
        }
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            id: identity(&init.name),
            name: init.name,
            child,
            volume_names,
            policy: RwLock::new(Policy {
                allow,
                secret: crate::creds::secret_of(&o.secret, &o.secret_file)?,
                volfile,
            }),
            squash: identity::Squash::new(
                identity::RootSquash::parse(&o.root_squash),
                o.all_squash,
                o.anonuid,
                o.anongid,
            ),
            max_frame: o.max_write as usize + HEADER_ROOM,
            boot_id: boot_id(&o.boot_id),
            tls: crate::creds::tls_files_of(o.tls, &o.tls_cert, &o.tls_key, &o.tls_ca)?
                .map(|f| crate::creds::ServerTls::new(&f, &o.tls_allow))
                .transpose()?,
            max_read: usize::try_from(o.max_read).unwrap_or(usize::MAX),
            max_inflight: o.max_inflight_per_connection as usize,
            reply_kib: (o.max_reply_bytes_per_connection / 1024) as usize,
            inline_busy: AtomicBool::new(false),
            request_spin_us: AtomicU64::new(o.request_spin.as_micros() as u64),
            inline_write_max: AtomicU64::new(o.inline_write_max),
            unix_send_buffer: AtomicU64::new(o.unix_send_buffer),
            splice_read_min: AtomicU64::new(o.splice_read_min),
            upcalls: upcall::Upcalls::new(o.upcall, o.upcall_timeout, o.upcall_max_inodes),
            handshake_timeout: o.handshake_timeout,
            frame_receive_timeout: o.frame_receive_timeout,
            client_idle_timeout: o.client_idle_timeout,
            send_timeout: o.send_timeout,
            limits: limits::Limits::new(limits::Bounds {
                total: o.max_connections as usize,
                per_address: o.max_connections_per_address as usize,
                pending: o.max_pending_handshakes as usize,
            }),
            max_fds: o.max_fds_per_client as usize,
            next_fd: NEXT_FD.get_or_init(|| Arc::new(AtomicU64::new(1))).clone(),
            next_client: &NEXT_CLIENT,
            stop: stop_rx,
            sessions: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            refused_log: limits::Throttle::default(),
            dropped_log: limits::Throttle::default(),
            over_limit: AtomicU64::new(0),
            volfiles_served: AtomicU64::new(0),
        });
        tracing::info!(
            "{}: serving volume {} on {local}",
            shared.name,
            shared
                .volume_names
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(" / ")
        );
        let unix = if o.unix_socket_dir.is_empty() {
            None
        } else {
            bind_unix(&shared.name, &o.unix_socket_dir, local.port())?
        };
        let spawn = |listener| {
            let task = accept_loop(shared.clone(), listener);
            match tokio::runtime::Handle::try_current() {
                Ok(h) => drop(h.spawn(task)),
                Err(_) => init.services.spawn(task),
            }
        };
        spawn(Listener::Tcp(listener));
        let unix_path = unix.map(|(l, path)| {
            tracing::info!("{}: local clients: {}", shared.name, path.display());
            spawn(Listener::Unix(l));
            path
        });
        Ok(Server {
            _bound: registry::register(&shared.name, local),
            children: init.children,
            shared,
            local,
            unix_path,
            stop,
        })
    }

    /// The address the server listens on (with the port picked when `listen-port` is 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn reconfigure_options(&self, o: ServerOptions) -> Result<(), String> {
        let allow = AllowList::parse(&o.auth_allow)?;
        let volfile = ServedVolfile::from_options(&o)?;
        let secret = crate::creds::secret_of(&o.secret, &o.secret_file)?;
        self.shared
            .request_spin_us
            .store(o.request_spin.as_micros() as u64, Ordering::Relaxed);
        self.shared
            .inline_write_max
            .store(o.inline_write_max, Ordering::Relaxed);
        self.shared
            .unix_send_buffer
            .store(o.unix_send_buffer, Ordering::Relaxed);
        self.shared
            .splice_read_min
            .store(o.splice_read_min, Ordering::Relaxed);
        self.shared
            .upcalls
            .configure(o.upcall, o.upcall_timeout, o.upcall_max_inodes);
        self.shared.squash.set(
            identity::RootSquash::parse(&o.root_squash),
            o.all_squash,
            o.anonuid,
            o.anongid,
        );
        let mut p = self
            .shared
            .policy
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        *p = Policy {
            allow,
            secret,
            volfile,
        };
        Ok(())
    }

    fn dump_state(&self) -> Dump {
        let s = &self.shared;
        let open_fds: usize = s
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|x| x.open_fds())
            .sum();
        let (allow, volfile) = {
            let p = s.policy.read().unwrap_or_else(PoisonError::into_inner);
            let v = p.volfile.as_ref().map(
                |v| serde_json::json!({ "name": v.name, "path": v.path.display().to_string() }),
            );
            (p.allow.as_str().to_owned(), v)
        };
        let (watched, upcalls_sent, upcalls_dropped) = s.upcalls.counters();
        let v = serde_json::json!({
            "listen": self.local.to_string(),
            "unix-socket": self.unix_path.as_ref().map(|p| p.display().to_string()),
            "volume-names": s.volume_names,
            "auth-allow": allow,
            "squash": s.squash.dump(),
            "connections": s.connections.load(Ordering::Relaxed),
            "accepted": s.accepted.load(Ordering::Relaxed),
            "refused": s.refused.load(Ordering::Relaxed),
            "dropped": s.dropped.load(Ordering::Relaxed),
            "over-limit": s.over_limit.load(Ordering::Relaxed),
            "pending-handshakes": s.limits.dump().1,
            "client-volfile": volfile,
            "volfiles-served": s.volfiles_served.load(Ordering::Relaxed),
            "open-fds": open_fds,
            "upcall": {
                "on": s.upcalls.enabled(),
                "inodes-watched": watched,
                "sent": upcalls_sent,
                "dropped": upcalls_dropped,
            },
        });
        Dump::from_json(v)
    }
}

/// The listening address of a protocol/server instance (hosts use this to print the port
/// picked for `listen-port` 0), from the process-wide table each server fills when it binds.
/// Servers are told apart by instance name: the most recently bound live one of that name.
pub fn listen_addr(server: &Subvol) -> Option<SocketAddr> {
    listen_addr_of(server.name())
}

/// [`listen_addr`] by instance name.
pub fn listen_addr_of(name: &str) -> Option<SocketAddr> {
    registry::lookup(name)
}

macro_rules! gen_dispatch {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// Calls the fop `req` names on `child`.
        async fn dispatch(child: &Subvol, cx: &Ctx, req: Request) -> Result<ReplyBody, Errno> {
            match req {
                $( Request::$Variant { $($arg),* } => {
                    child.$name(cx $(, $arg)*).await.map(ReplyBody::$Variant)
                } )*
            }
        }
    };
}
xlator_api::for_each_fop!(gen_dispatch);

impl Translator for Server {
    const TYPE: &'static str = TYPE;
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Serves the brick graph below it to protocol/client instances over \
        TCP, with an address allow-list and an optional shared secret.";
    const MIN_CHILDREN: u32 = 1;
    const MAX_CHILDREN: u32 = 1;
    type Options = ServerOptions;

    fn init(init: Init<ServerOptions>) -> Result<Self, String> {
        Server::new(init)
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, options: ServerOptions) -> Result<(), String> {
        self.reconfigure_options(options)
    }

    /// A lock-contention upcall from the brick graph goes to the lock's holder; other
    /// upcalls from below (none are raised today) stop here.
    fn upcall(&self, _child: usize, up: &xlator_api::Upcall) -> bool {
        if up.says(xlator_api::Upcall::LOCK_CONTENTION) && up.client != 0 {
            self.shared
                .upcalls
                .tell(xlator_api::ClientId(up.client), up.clone());
        }
        false
    }

    fn dump(&self) -> Dump {
        self.dump_state()
    }
}
