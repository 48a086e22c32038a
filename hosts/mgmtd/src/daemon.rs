//! The running daemon: answers peers and the `xlfs` command, proposes changes, follows the
//! log, and keeps this host's state directory and bricks in line with it.

use std::collections::{BTreeMap, HashMap};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use xlfs_protocol::server::volfiles;
use xlfs_volgen::VolumeSpec;

use crate::cluster::{Change, Cluster, VolumeFiles, host_of};
use crate::proto::{PeerInfo, Request, Response, Status};
use crate::replog::{self, Durable, Entry, PeerId, Proposal, Replica};
use crate::rpc;
use crate::store::{DaemonFile, FORMAT, Node, Store, write_durably};

/// Environment variable that makes `xlfs` act on its state directory itself instead of asking
/// the daemon (set for the commands the daemon runs).
pub const LOCAL_ENV: &str = "XLFS_MGMT_LOCAL";
/// The name of the file in a volume's directory that marks it as the cluster's (the volume's
/// description as last applied here).
pub const MARK: &str = "cluster.json";
/// The answer to a log request of another cluster than the daemon's.
const OTHER_CLUSTER: &str = "this peer is in another cluster";
/// How long a connection may sit with no request before the daemon closes it.
const IDLE: Duration = Duration::from_secs(60);

/// What the daemon was started with.
pub struct Config {
    pub listen: String,
    pub state_dir: PathBuf,
    pub secret_file: PathBuf,
    /// How often the log is compared with the peers' and the bricks checked.
    pub tick: Duration,
    /// Bound on one request to a peer.
    pub timeout: Duration,
    /// The `xlfs` binary the daemon runs on the state directory.
    pub xlfs: PathBuf,
    /// The port on the --listen host where client volfiles are served (0: not served).
    pub volfile_port: u16,
    /// How many applied entries the log keeps before it is compacted.
    pub compact_after: usize,
}

pub struct Daemon {
    cfg: Config,
    store: Store,
    secret: Vec<u8>,
    node: Mutex<State>,
    /// Proposals of this peer waiting to be applied, by entry id.
    waiters: Mutex<HashMap<u64, mpsc::Sender<()>>>,
    /// What goes to each other peer, handed to its sender thread.
    senders: Mutex<HashMap<PeerId, mpsc::Sender<Batch>>>,
    /// Where each peer is reached: the applied configuration's peers, and the address each
    /// peer that sent this one a message gave.
    addrs: Mutex<HashMap<PeerId, String>>,
    logger: slog::Logger,
    this: std::sync::Weak<Daemon>,
    /// One proposal at a time from this peer.
    proposing: Mutex<()>,
    /// One pass over the state directory at a time.
    reconciling: Mutex<()>,
    kick: Mutex<mpsc::Sender<()>>,
    /// The last message of each periodic command, so a failure is logged once, not every tick.
    last: Mutex<std::collections::BTreeMap<String, String>>,
}

/// Prints a line to the daemon's log (stderr) with a timestamp.
pub fn log(msg: impl std::fmt::Display) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    eprintln!("[{}.{:03}] {msg}", t.as_secs(), t.subsec_millis());
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    u64::from_le_bytes(b) | 1
}

/// Raft messages for one peer, and when they were made.
type Batch = (Instant, Vec<raft::prelude::Message>);

/// How long a join that was asked for may take before this peer gives up waiting and is a
/// cluster of one again.
const JOIN_WAIT_SECS: u64 = 120;

/// How many applied entries the log keeps before it is compacted by default (each may be a
/// whole volume description; node.json is rewritten whole at each change).
pub const COMPACT_AFTER: usize = 256;

/// This peer, and its copy of the log.
struct State {
    id: PeerId,
    addr: String,
    r: Replica<Change>,
}

impl State {
    fn to_node(&self) -> Node {
        Node {
            format: FORMAT,
            id: self.id,
            addr: self.addr.clone(),
            raft: self.r.durable().clone(),
        }
    }
}

/// A new cluster of one: this peer.
fn found(id: PeerId, addr: &str) -> Durable<Change> {
    let cluster = random_u64();
    Durable::found(
        cluster,
        id,
        Entry {
            id: random_u64(),
            value: Change::Found {
                cluster,
                peer: id,
                addr: addr.to_owned(),
            },
        },
    )
}

/// The cluster a durable log describes (as far as it is applied).
fn cluster_of(d: &Durable<Change>) -> Cluster {
    Cluster::from_log(&d.chosen)
}

impl Daemon {
    /// Loads this host's node (or founds a cluster of one), binds, and records where it
    /// listens.
    pub fn start(cfg: Config) -> Result<(Arc<Daemon>, TcpListener), String> {
        let store = Store::new(&cfg.state_dir);
        let secret = store.secret(&cfg.secret_file, true)?;
        let addr = rpc::with_port(&cfg.listen);
        let node = match store.load()? {
            Some(mut n) => {
                if n.addr != addr {
                    let c = cluster_of(&n.raft);
                    if c.peers.len() > 1 {
                        return Err(format!(
                            "this peer is {} in its cluster; it cannot listen at {addr} (other \
                             peers reach it at the first); start it with --listen {}",
                            n.addr, n.addr
                        ));
                    }
                    n.addr = addr.clone();
                    n.raft = found(n.id, &addr);
                    store.save(&n)?;
                }
                n
            }
            None => {
                let id = random_u64();
                let n = Node {
                    format: FORMAT,
                    id,
                    addr: addr.clone(),
                    raft: found(id, &addr),
                };
                store.save(&n)?;
                log(format_args!(
                    "founded a cluster of one: peer {id:016x} at {addr}"
                ));
                n
            }
        };
        let logger = if std::env::var_os("XLFS_MGMTD_RAFT_LOG").is_some() {
            raft::default_logger()
        } else {
            replog::quiet_logger()
        };
        let state = State {
            id: node.id,
            addr: node.addr.clone(),
            r: Replica::open(node.id, node.raft, &logger)
                .map_err(|e| format!("{}: {e}", store.node_file().display()))?
                .compacting(cfg.compact_after, crate::cluster::squash),
        };
        let listener =
            TcpListener::bind(&addr).map_err(|e| format!("cannot listen at {addr}: {e}"))?;
        let volfiles = match cfg.volfile_port {
            0 => None,
            port => {
                let host = listener.local_addr().map_err(|e| e.to_string())?.ip();
                let at = std::net::SocketAddr::new(host, port);
                Some(TcpListener::bind(at).map_err(|e| {
                    format!(
                        "cannot serve client volfiles at {at}: {e} (another xlfs-mgmtd?                          --volfile-port 0 serves none)"
                    )
                })?)
            }
        };
        write_durably(
            &store.daemon_file(),
            serde_json::to_string(&DaemonFile {
                addr: addr.clone(),
                pid: std::process::id(),
                secret_file: std::path::absolute(&cfg.secret_file)
                    .unwrap_or_else(|_| cfg.secret_file.clone()),
            })
            .map_err(|e| e.to_string())?
            .as_bytes(),
            0o644,
        )?;
        let (tx, rx) = mpsc::channel();
        let d = Arc::new_cyclic(|this| Daemon {
            this: this.clone(),
            cfg,
            store,
            secret,
            node: Mutex::new(state),
            waiters: Mutex::new(HashMap::new()),
            senders: Mutex::new(HashMap::new()),
            addrs: Mutex::new(HashMap::new()),
            logger,
            proposing: Mutex::new(()),
            reconciling: Mutex::new(()),
            kick: Mutex::new(tx),
            last: Mutex::new(Default::default()),
        });
        d.learn_addrs();
        if let Some(l) = volfiles {
            d.serve_volfiles(l)?;
        }
        let t = d.clone();
        std::thread::spawn(move || t.follow(rx));
        let t = d.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(replog::TICK);
                t.pump(|r| r.tick());
            }
        });
        // Whatever the stored log had committed but not applied yet; a sole voter elects
        // itself.
        d.pump(|_| ());
        d.pump(|r| r.tick());
        Ok((d, listener))
    }

    /// Serves the client volfile of every started volume of the cluster on `l` (see
    /// `xlfs_protocol::server::volfiles`), from this host's copy of it, with the volume's
    /// secret and auth.allow.
    fn serve_volfiles(&self, l: TcpListener) -> Result<(), String> {
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let at = l.local_addr().map_err(|e| e.to_string())?;
        let this = self.this.clone();
        let lookup: Arc<volfiles::Lookup> = Arc::new(move |name: &str| {
            let d = this.upgrade().ok_or("the daemon is stopping")?;
            d.volfile(name)
        });
        std::thread::Builder::new()
            .name("volfiles".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return log(format_args!("client volfiles not served: {e}")),
                };
                rt.block_on(async move {
                    match tokio::net::TcpListener::from_std(l) {
                        Ok(l) => volfiles::serve(l, lookup).await,
                        Err(e) => log(format_args!("client volfiles not served: {e}")),
                    }
                });
            })
            .map_err(|e| e.to_string())?;
        log(format_args!("serving client volfiles at {at}"));
        Ok(())
    }

    /// What the volfile server hands out for volume `name`.
    fn volfile(&self, name: &str) -> Result<volfiles::Served, String> {
        let c = self.cluster();
        let Some(v) = c.volumes.get(name) else {
            let names: Vec<&str> = c.volumes.keys().map(String::as_str).collect();
            return Err(format!(
                "no volume {name:?} in this cluster (its volumes: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ));
        };
        if !v.started {
            return Err(format!(
                "volume {name} is not started (xlfs volume start {name})"
            ));
        }
        let spec =
            VolumeSpec::from_ron(&v.spec, Path::new("cluster")).map_err(|e| e.to_string())?;
        let dir = self.cfg.state_dir.join("volumes").join(name);
        let text = std::fs::read_to_string(dir.join("client.vol")).map_err(|e| {
            format!("this host has not applied volume {name} yet ({e}); ask another peer")
        })?;
        let allow = if spec.auth_allow.is_empty() {
            None
        } else {
            Some(xlfs_protocol::server::AllowList::parse(
                &spec.auth_allow.join(","),
            )?)
        };
        Ok(volfiles::Served {
            text,
            secret: v.secret.clone(),
            allow,
        })
    }

    /// A copy of the log for this daemon, compacted every `--compact-after` applied entries.
    fn replica(&self, id: PeerId, d: Durable<Change>) -> Result<Replica<Change>, String> {
        Ok(Replica::open(id, d, &self.logger)?
            .compacting(self.cfg.compact_after, crate::cluster::squash))
    }

    fn node(&self) -> MutexGuard<'_, State> {
        self.node.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cluster(&self) -> Cluster {
        cluster_of(self.node().r.durable())
    }

    /// Runs `f` on the log, then persists what changed and sends what it produced: the one
    /// path by which the log moves.
    fn pump<T>(&self, f: impl FnOnce(&mut Replica<Change>) -> T) -> T {
        let mut st = self.node();
        let t = f(&mut st.r);
        let out = st.r.advance();
        if out.changed {
            self.save(&st);
        }
        let me = st.id;
        drop(st);
        let mut by_peer: BTreeMap<PeerId, Vec<raft::prelude::Message>> = BTreeMap::new();
        for m in out.messages {
            if m.to != me {
                by_peer.entry(m.to).or_default().push(m);
            }
        }
        for (peer, msgs) in by_peer {
            self.send(peer, msgs);
        }
        if !out.applied.is_empty() {
            self.learn_addrs();
            let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            for e in &out.applied {
                if let Some(tx) = w.remove(&e.id) {
                    let _ = tx.send(());
                }
            }
            drop(w);
            self.kick();
        }
        t
    }

    /// Records this peer's state before anything that depends on it leaves. If it cannot be
    /// written, Raft's state in memory is past what is on disk, and the only safe way on is
    /// from the disk, as after a crash: the daemon exits.
    fn save(&self, st: &State) {
        if let Err(e) = self.store.save(&st.to_node()) {
            log(format_args!(
                "cannot record the log ({e}); exiting so a restart goes on from what is recorded"
            ));
            std::process::exit(1);
        }
    }

    /// Takes the peers' addresses from the applied configuration.
    fn learn_addrs(&self) {
        let c = self.cluster();
        let mut a = self.addrs.lock().unwrap_or_else(|e| e.into_inner());
        for (p, addr) in c.peers {
            a.insert(p, addr);
        }
    }

    /// Hands `msgs` to peer `peer`'s sender thread (started on first use).
    fn send(&self, peer: PeerId, msgs: Vec<raft::prelude::Message>) {
        let mut s = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        let batch = (Instant::now(), msgs);
        let batch = match s.get(&peer) {
            Some(tx) => match tx.send(batch) {
                Ok(()) => return,
                Err(mpsc::SendError(batch)) => batch,
            },
            None => batch,
        };
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(batch);
        s.insert(peer, tx);
        let Some(me) = self.this.upgrade() else {
            return;
        };
        std::thread::spawn(move || me.sender(peer, rx));
    }

    /// The sender of one peer: one authenticated connection kept open, each batch of Raft
    /// messages (with whatever queued meanwhile) in one request. A batch that cannot be
    /// delivered is dropped: Raft sends again what still matters. Messages that waited longer
    /// than a peer timeout (the peer was unreachable) are dropped too: a proposal handed on
    /// to the leader must not arrive long after its proposer reported it refused.
    fn sender(self: Arc<Self>, peer: PeerId, rx: mpsc::Receiver<Batch>) {
        let mut conn: Option<rpc::Conn> = None;
        while let Ok(first) = rx.recv() {
            let fresh = |(made, _): &Batch| made.elapsed() < self.cfg.timeout;
            // Whether a snapshot arrived is reported: Raft sends that peer nothing until told.
            let snapshot = |m: &raft::prelude::Message| {
                m.get_msg_type() == raft::prelude::MessageType::MsgSnapshot
            };
            let mut batch = Vec::new();
            let mut lost_snapshot = false;
            for b in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                if fresh(&b) {
                    batch.extend(b.1);
                } else {
                    lost_snapshot |= b.1.iter().any(snapshot);
                }
            }
            if lost_snapshot {
                self.pump(|r| r.snapshot_sent(peer, false));
            }
            if batch.is_empty() {
                continue;
            }
            let addr = self
                .addrs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&peer)
                .cloned();
            let Some(addr) = addr else { continue };
            let (cluster, from, from_addr) = {
                let st = self.node();
                (st.r.cluster(), st.id, st.addr.clone())
            };
            let req = Request::Raft {
                cluster,
                from,
                from_addr,
                msgs: batch.iter().map(replog::encode).collect(),
            };
            let mut delivered = false;
            for _ in 0..2 {
                if conn.as_ref().is_none_or(|c| c.addr() != addr) {
                    conn = rpc::Conn::open(&addr, &self.secret, self.cfg.timeout).ok();
                }
                let Some(c) = conn.as_mut() else { break };
                match c.call(&req) {
                    Ok(_) => {
                        delivered = true;
                        break;
                    }
                    // A connection kept open may have been closed by the other side: once
                    // more on a new one.
                    Err(_) => conn = None,
                }
            }
            let sent_snapshot = batch.iter().any(snapshot);
            if !delivered {
                self.pump(|r| r.unreachable(peer));
            }
            if sent_snapshot {
                self.pump(|r| r.snapshot_sent(peer, delivered));
            }
        }
    }

    fn kick(&self) {
        let _ = self.kick.lock().unwrap_or_else(|e| e.into_inner()).send(());
    }

    /// Serves connections until the process ends.
    pub fn serve(self: &Arc<Daemon>, listener: TcpListener) {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let d = self.clone();
            std::thread::spawn(move || d.connection(conn));
        }
    }

    fn connection(&self, mut s: TcpStream) {
        let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        if let Err(why) = rpc::accept(&mut s, &self.secret, self.cfg.timeout) {
            log(format_args!("refused {peer}: {why}"));
            return;
        }
        // Requests one after the other until the caller closes (peers keep a connection
        // open for the log's messages; the `xlfs` command sends one request).
        let _ = s.set_read_timeout(Some(IDLE));
        let mut first = true;
        loop {
            let req: Request = match rpc::read_frame(&mut s) {
                Ok(r) => r,
                Err(e) => {
                    if first {
                        log(format_args!("{peer}: no request: {e}"));
                    }
                    return;
                }
            };
            first = false;
            // Operations run as long as they need; the answer is written when they end.
            let _ = s.set_write_timeout(Some(self.cfg.timeout));
            let resp = self.handle(req);
            if rpc::write_frame(&mut s, &resp).is_err() {
                return;
            }
        }
    }

    fn handle(&self, req: Request) -> Response {
        match req {
            Request::Raft {
                cluster,
                from,
                from_addr,
                msgs,
            } => {
                if self.node().r.cluster() != cluster {
                    return Response::Error(OTHER_CLUSTER.into());
                }
                self.addrs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(from, from_addr);
                let msgs: Vec<_> = msgs.iter().filter_map(|m| replog::decode(m)).collect();
                self.pump(|r| {
                    for m in msgs {
                        // A message of an older configuration or term is Raft's to ignore.
                        let _ = r.step(m);
                    }
                });
                Response::Done
            }
            Request::Status => Response::Status(self.status()),
            Request::Join { cluster } => self.join(cluster),
            Request::Leave { cluster } => self.leave(cluster),
            Request::Probe { addr } => self.probe(&addr),
            Request::Detach { addr } => self.detach(&addr),
            Request::Peers => Response::Peers(self.peers()),
            Request::Volume { args } => self.volume(&args),
            Request::LocalStatus { name } => {
                self.local_output(&["volume", "status", &name, "--json"])
            }
            Request::LocalHealInfo { name } => {
                self.local_output(&["volume", "heal", &name, "info", "--json"])
            }
        }
    }

    fn status(&self) -> Status {
        let n = self.node();
        let c = cluster_of(n.r.durable());
        Status {
            id: n.id,
            addr: n.addr.clone(),
            cluster: n.r.cluster(),
            chosen: n.r.durable().applied,
            peers: c.peers.len(),
            volumes: c.volumes.len(),
            version: rpc::VERSION.to_owned(),
            leader: n.r.leader(),
            term: n.r.term(),
        }
    }

    fn call(&self, addr: &str, req: &Request) -> Result<Response, rpc::RpcError> {
        rpc::call(addr, &self.secret, req, self.cfg.timeout)
    }

    // ----- following the log -----

    /// The follower loop: apply the log to this host, every tick or when it moved.
    fn follow(self: Arc<Self>, kicks: mpsc::Receiver<()>) {
        loop {
            self.reconcile();
            match kicks.recv_timeout(self.cfg.tick) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            while kicks.try_recv().is_ok() {}
        }
    }

    /// Makes this peer a cluster of one again (detached, or a join that never completed).
    fn refound(&self, why: &str) {
        let mut st = self.node();
        let (id, addr) = (st.id, st.addr.clone());
        match self.replica(id, found(id, &addr)) {
            Ok(r) => st.r = r,
            Err(e) => {
                log(format_args!("cannot found a cluster of one: {e}"));
                return;
            }
        }
        self.save(&st);
        drop(st);
        log(why);
        self.pump(|_| ());
        self.pump(|r| r.tick());
    }

    /// Brings this host's state directory and bricks in line with the log.
    fn reconcile(&self) {
        let _r = self.reconciling.lock().unwrap_or_else(|e| e.into_inner());
        let (me, c, joining, applied) = {
            let n = self.node();
            let d = n.r.durable();
            (n.id, cluster_of(d), d.joining_since, d.applied)
        };
        if applied == 0 && joining.is_none() {
            // Just founded (or converted): the first entries are not applied yet, so this
            // peer is not in the configuration yet either.
            return;
        }
        if !c.peers.contains_key(&me) {
            match joining {
                Some(t) if replog::now_secs() < t + JOIN_WAIT_SECS => {}
                Some(_) => self.refound(
                    "the join asked of this peer did not complete: it is a cluster of one again",
                ),
                None => self.refound(
                    "this peer was detached from its cluster: it is a cluster of one again",
                ),
            }
            return;
        }
        if joining.is_some() {
            let mut st = self.node();
            if st.r.joined() && self.store.save(&st.to_node()).is_ok() {
                log(format_args!(
                    "joined cluster {:016x} ({} peers, {} volumes)",
                    c.id,
                    c.peers.len(),
                    c.volumes.len()
                ));
            }
        }
        let vols = self.cfg.state_dir.join("volumes");
        for (name, v) in &c.volumes {
            let dir = vols.join(name);
            let applied: Option<VolumeFiles> = std::fs::read_to_string(dir.join(MARK))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            let described = applied.as_ref().map(|a| (&a.spec, &a.secret));
            if described != Some((&v.spec, &v.secret)) {
                match self.sync(v) {
                    Ok(out) => log(format_args!("volume {name}: description applied. {out}")),
                    Err(e) => {
                        self.once(
                            name,
                            format!("volume {name}: cannot apply its description: {e}"),
                        );
                        continue;
                    }
                }
            }
            let running = has_processes(&dir);
            let verb = match (v.started, running) {
                (true, _) => "start",
                (false, true) => "stop",
                (false, false) => "",
            };
            if !verb.is_empty() {
                match self.xlfs(&["volume", verb, name]) {
                    Ok(out) => {
                        if !out.contains("already started") {
                            log(format_args!("volume {name}: {verb}: {}", out.trim()));
                        }
                        self.once(name, String::new());
                    }
                    Err(e) => self.once(name, format!("volume {name}: {verb}: {e}")),
                }
            }
            if applied.as_ref() != Some(v)
                && let Ok(text) = serde_json::to_string_pretty(v)
            {
                let _ = write_durably(&dir.join(MARK), text.as_bytes(), 0o600);
            }
        }
        // Volumes this daemon applied that the cluster no longer has.
        for entry in std::fs::read_dir(&vols).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if c.volumes.contains_key(&name) || !entry.path().join(MARK).exists() {
                continue;
            }
            if has_processes(&entry.path()) {
                let _ = self.xlfs(&["volume", "stop", &name]);
            }
            match self.xlfs(&["volume", "delete", &name]) {
                Ok(out) => log(format_args!("volume {name}: {}", out.trim())),
                Err(e) => self.once(&name, format!("volume {name}: delete: {e}")),
            }
        }
    }

    /// Logs `msg` if it differs from the last one logged for `key` (periodic failures once).
    fn once(&self, key: &str, msg: String) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.get(key) != Some(&msg) {
            if !msg.is_empty() {
                log(&msg);
            }
            last.insert(key.to_owned(), msg);
        }
    }

    /// Writes a volume's description (and secret) here with `xlfs volume sync`.
    fn sync(&self, v: &VolumeFiles) -> Result<String, String> {
        let tmp = self.store.dir.join(format!("sync-{:x}", random_u64()));
        std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
        let spec = tmp.join("volume.ron");
        let out = (|| {
            write_durably(&spec, v.spec.as_bytes(), 0o600)?;
            let mut args = vec![
                "volume".to_owned(),
                "sync".to_owned(),
                v.name.clone(),
                "--spec".to_owned(),
                spec.display().to_string(),
            ];
            if let Some(s) = &v.secret {
                let f = tmp.join("secret");
                write_durably(&f, format!("{s}\n").as_bytes(), 0o600)?;
                args.extend(["--secret-file".to_owned(), f.display().to_string()]);
            }
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            self.xlfs(&refs)
        })();
        let _ = std::fs::remove_dir_all(&tmp);
        out
    }

    /// Runs `xlfs ARGS` on this host's state directory; its output, or why it failed.
    fn xlfs(&self, args: &[&str]) -> Result<String, String> {
        self.xlfs_in(&self.cfg.state_dir, args)
            .and_then(|(code, out, err)| {
                if code == 0 {
                    Ok(out)
                } else {
                    Err(format!("{}{}", out.trim(), err.trim()))
                }
            })
    }

    /// `xlfs ARGS` on this host's state alone, as an answer.
    fn local_output(&self, args: &[&str]) -> Response {
        match self.xlfs_in(&self.cfg.state_dir, args) {
            Ok((code, stdout, stderr)) => Response::Output {
                code,
                stdout,
                stderr,
            },
            Err(e) => Response::Error(e),
        }
    }

    fn xlfs_in(&self, state: &Path, args: &[&str]) -> Result<(u8, String, String), String> {
        let out = Command::new(&self.cfg.xlfs)
            .args(args)
            .env("XLFS_STATE_DIR", state)
            .env(LOCAL_ENV, "1")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.cfg.xlfs.display()))?;
        Ok((
            out.status.code().unwrap_or(1).clamp(0, 255) as u8,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    // ----- proposing -----

    /// Proposes `change` to the cluster; on success it is applied here before this returns.
    fn propose(&self, change: Change) -> Result<(), String> {
        self.propose_as(change, Proposal::Change)
    }

    /// [`Daemon::propose`], as the kind of proposal `kind` makes of the entry.
    fn propose_as(
        &self,
        change: Change,
        kind: impl FnOnce(Entry<Change>) -> Proposal<Change>,
    ) -> Result<(), String> {
        let id = random_u64();
        let proposal = kind(Entry { id, value: change });
        let (tx, rx) = mpsc::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let forget = || {
            self.waiters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        };
        let limit = self.commit_limit();
        let deadline = std::time::Instant::now() + limit;
        // Right after a start, or while a leader is being elected, no leader is known for up
        // to an election timeout: wait for one rather than refuse.
        loop {
            match self.pump(|r| r.propose(proposal.clone())) {
                Ok(()) => break,
                Err(replog::ProposeError::NoLeader) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(replog::TICK);
                }
                Err(e) => {
                    forget();
                    return Err(format!("{e} ({})", self.reach()));
                }
            }
        }
        match rx.recv_timeout(limit) {
            Ok(()) => {
                self.reconcile();
                Ok(())
            }
            Err(_) => {
                forget();
                Err(format!(
                    "no majority: the change was not committed within {} s; a change needs a \
                     majority of the peers up and reachable ({})",
                    limit.as_secs(),
                    self.reach()
                ))
            }
        }
    }

    /// How long a proposal waits to be committed.
    fn commit_limit(&self) -> Duration {
        (self.cfg.timeout * 4).max(Duration::from_secs(5))
    }

    /// How many of the peers this one reaches now, for a refusal's message.
    fn reach(&self) -> String {
        let peers = self.peers();
        let up = peers.iter().filter(|p| p.connected).count();
        format!(
            "this peer reaches {up} of the {} peers, {} needed",
            peers.len(),
            peers.len() / 2 + 1
        )
    }

    fn lock_proposals(&self) -> MutexGuard<'_, ()> {
        self.proposing.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn probe(&self, addr: &str) -> Response {
        let _p = self.lock_proposals();
        let addr = rpc::with_port(addr);
        let st = match self.call(&addr, &Request::Status) {
            Ok(Response::Status(st)) => st,
            Ok(other) => return Response::Error(format!("{addr} answered {other:?}")),
            Err(e) => return Response::Error(probe_error(e)),
        };
        let c = self.cluster();
        let me = self.node().id;
        if st.id == me {
            return Response::Error(format!("{addr} is this peer"));
        }
        if st.addr != addr {
            return Response::Error(format!(
                "the daemon at {addr} calls itself {}; probe it by that address",
                st.addr
            ));
        }
        if c.peers.contains_key(&st.id) && st.cluster == c.id {
            return out(format!("peer probe: {addr} is already in the pool\n"));
        }
        if st.cluster != c.id && (st.peers > 1 || st.volumes > 0) {
            return Response::Error(format!(
                "{addr} is in another cluster ({} peers, {} volumes); detach it there \
                 first (xlfs peer detach, on one of its peers)",
                st.peers, st.volumes
            ));
        }
        // It empties its log and waits for this cluster's leader, then the leader makes it a
        // voter: from then on it gets the whole log from the leader.
        match self.call(&addr, &Request::Join { cluster: c.id }) {
            Ok(Response::Done) => {}
            Ok(Response::Error(e)) => return Response::Error(format!("{addr} did not join: {e}")),
            Ok(other) => return Response::Error(format!("{addr} answered {other:?}")),
            Err(e) => return Response::Error(probe_error(e)),
        }
        if !c.peers.contains_key(&st.id) {
            let change = Change::AddPeer {
                peer: st.id,
                addr: addr.clone(),
            };
            if let Err(e) = self.propose_as(change, |e| Proposal::AddPeer(st.id, e)) {
                return Response::Error(format!(
                    "peer probe {addr}: {e}. It gives up waiting to join in {JOIN_WAIT_SECS} s"
                ));
            }
        }
        // Answer once it holds the configuration, as a probe's caller expects of "in the pool".
        let want = self.node().r.durable().applied;
        let deadline = std::time::Instant::now() + self.commit_limit();
        loop {
            match self.call(&addr, &Request::Status) {
                Ok(Response::Status(s)) if s.cluster == c.id && s.chosen >= want => break,
                _ if std::time::Instant::now() >= deadline => {
                    return out(format!(
                        "peer probe: success ({addr} is in the pool; it is still copying the \
                         configuration: `xlfs pool list` shows how far it is)\n"
                    ));
                }
                _ => std::thread::sleep(replog::TICK),
            }
        }
        out(format!("peer probe: success ({addr} is in the pool)\n"))
    }

    /// Asked by a peer that probes this one: empty the log and wait for cluster `cluster`'s
    /// leader.
    fn join(&self, cluster: u64) -> Response {
        let mut st = self.node();
        if st.r.cluster() == cluster {
            return Response::Done;
        }
        let mine = cluster_of(st.r.durable());
        if mine.peers.len() > 1 || !mine.volumes.is_empty() {
            return Response::Error(format!(
                "this peer is in another cluster ({} peers, {} volumes)",
                mine.peers.len(),
                mine.volumes.len()
            ));
        }
        let id = st.id;
        match self.replica(id, Durable::joining(cluster)) {
            Ok(r) => st.r = r,
            Err(e) => return Response::Error(e),
        }
        self.save(&st);
        log(format_args!(
            "asked to join cluster {cluster:016x}: waiting for its leader"
        ));
        Response::Done
    }

    fn leave(&self, cluster: u64) -> Response {
        if self.node().r.cluster() != cluster {
            return Response::Error("not in that cluster".into());
        }
        self.refound("detached: a cluster of one again");
        Response::Done
    }

    fn detach(&self, addr: &str) -> Response {
        let _p = self.lock_proposals();
        let c = self.cluster();
        let me = self.node().id;
        let Some(peer) = c.peer_at(addr) else {
            return Response::Error(format!("{addr} is not in the pool (xlfs pool list)"));
        };
        if peer == me {
            return Response::Error(
                "a peer cannot detach itself: run `xlfs peer detach` on another peer".into(),
            );
        }
        let host = host_of(&c.peers[&peer]);
        let used: Vec<String> = c
            .volumes
            .values()
            .filter(|v| {
                VolumeSpec::from_ron(&v.spec, Path::new("cluster"))
                    .map(|s| s.bricks.iter().any(|b| b.host() == Some(host.as_str())))
                    .unwrap_or(false)
            })
            .map(|v| v.name.clone())
            .collect();
        if !used.is_empty() {
            return Response::Error(format!(
                "{addr} holds bricks of volume(s) {}; move them off (remove-brick) or delete the \
                 volume(s) first",
                used.join(", ")
            ));
        }
        if let Err(e) = self.propose_as(Change::RemovePeer { peer }, |e| {
            Proposal::RemovePeer(peer, e)
        }) {
            return Response::Error(format!("peer detach {addr}: {e}"));
        }
        let _ = self.call(&c.peers[&peer], &Request::Leave { cluster: c.id });
        out(format!("peer detach: success ({addr} left the pool)\n"))
    }

    fn peers(&self) -> Vec<PeerInfo> {
        let c = self.cluster();
        let me = self.node().id;
        std::thread::scope(|s| {
            let hs: Vec<_> = c
                .peers
                .iter()
                .map(|(p, addr)| {
                    s.spawn(move || {
                        let st = if *p == me {
                            Some(self.status())
                        } else {
                            match self.call(addr, &Request::Status) {
                                Ok(Response::Status(st)) if st.cluster == c.id => Some(st),
                                _ => None,
                            }
                        };
                        PeerInfo {
                            id: *p,
                            addr: addr.clone(),
                            me: *p == me,
                            connected: st.is_some(),
                            chosen: st.map(|s| s.chosen),
                        }
                    })
                })
                .collect();
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    }

    /// `xlfs volume VERB NAME ...` for the whole cluster.
    fn volume(&self, args: &[String]) -> Response {
        let _p = self.lock_proposals();
        let (Some(verb), Some(name)) = (args.first(), args.get(1)) else {
            return Response::Error("no volume command".into());
        };
        let c = self.cluster();
        let current = c.volumes.get(name);
        let change = match (verb.as_str(), current) {
            ("create", Some(_)) => {
                return Response::Error(format!("volume {name} exists in the cluster"));
            }
            ("create", None) | ("set", Some(_)) | ("reset", Some(_)) | ("add-brick", Some(_)) => {
                return self.scratch_change(&c, args, name, verb);
            }
            // The description change of a remove-brick start, stop or commit; the xlfs that
            // asks runs the rest (the runner, the checks) on its host.
            ("remove-brick", Some(_)) if args.iter().any(|a| a == "--describe-only") => {
                return self.scratch_change(&c, args, name, verb);
            }
            ("start" | "stop", Some(v)) => {
                let want = verb == "start";
                if v.started == want {
                    return out(format!("{name}: already {verb}ed in the cluster\n"));
                }
                let mut v = v.clone();
                v.started = want;
                return match self.put_volume(&c, v) {
                    Ok(()) => out(format!(
                        "volume {verb}: {name}: success{}",
                        self.spread_note()
                    )),
                    Err(e) => Response::Error(not_made(&e)),
                };
            }
            ("delete", Some(v)) => {
                if v.started {
                    return Response::Error(format!(
                        "volume {name} is started; `xlfs volume stop {name}` first"
                    ));
                }
                Change::DeleteVolume { name: name.clone() }
            }
            (_, None) => {
                return Response::Error(format!(
                    "no volume {name} in the cluster (xlfs volume list)"
                ));
            }
            _ => {
                return Response::Error(format!(
                    "`xlfs volume {verb}` is not a cluster operation of this xlfs-mgmtd"
                ));
            }
        };
        match self.propose(change) {
            Ok(()) => out(format!(
                "volume {verb}: {name}: success{}",
                self.spread_note()
            )),
            Err(e) => Response::Error(not_made(&e)),
        }
    }

    /// A change made by running the command on a copy of the cluster's volumes, then
    /// proposed as the volume's new description.
    fn scratch_change(&self, c: &Cluster, args: &[String], name: &str, verb: &str) -> Response {
        let current = c.volumes.get(name);
        match self.scratch(c, args, name, current.is_some_and(|v| v.started)) {
            Ok((files, printed)) => {
                let printed = if verb == "add-brick" {
                    cluster_add_brick_text(&printed, files.started)
                } else {
                    printed
                };
                if current == Some(&files) {
                    return out(printed);
                }
                match self.put_volume(c, files) {
                    Ok(()) => out(printed + &self.spread_note()),
                    Err(e) => Response::Error(not_made(&e)),
                }
            }
            Err(r) => r,
        }
    }

    /// Proposes `files` as the volume's description, made on `c`: applied only if no other
    /// change of the volume was applied since (see [`VolumeFiles::base`]).
    fn put_volume(&self, c: &Cluster, files: VolumeFiles) -> Result<(), String> {
        let name = files.name.clone();
        let proposed = VolumeFiles {
            base: Some(c.version(&name)),
            ..files.clone()
        };
        self.propose(Change::PutVolume(proposed))?;
        if self.cluster().volumes.get(&name) != Some(&files) {
            return Err(format!(
                "volume {name} was changed by another command while this one was made, so this \
                 one was not applied; look at `xlfs volume info {name}` and run it again"
            ));
        }
        Ok(())
    }

    fn spread_note(&self) -> String {
        let n = self.cluster().peers.len();
        format!(" (decided by a majority of the {n} peers; each applies it on its host)\n")
    }

    /// Runs a create, set or reset on a copy of the cluster's volumes and returns the
    /// volume's resulting files and what the command printed.
    fn scratch(
        &self,
        c: &Cluster,
        args: &[String],
        name: &str,
        started: bool,
    ) -> Result<(VolumeFiles, String), Response> {
        let dir = self.store.dir.join(format!("scratch-{:x}", random_u64()));
        let res = (|| {
            for v in c.volumes.values() {
                let vd = dir.join("volumes").join(&v.name);
                let spec = localize(v, &vd).map_err(Response::Error)?;
                write_durably(&vd.join("volume.ron"), spec.as_bytes(), 0o600)
                    .map_err(Response::Error)?;
                if let Some(s) = &v.secret {
                    write_durably(&vd.join("secret"), format!("{s}\n").as_bytes(), 0o600)
                        .map_err(Response::Error)?;
                }
            }
            let refs: Vec<&str> = std::iter::once("volume")
                .chain(args.iter().map(String::as_str))
                .collect();
            let (code, stdout, stderr) = self.xlfs_in(&dir, &refs).map_err(Response::Error)?;
            let real = self.cfg.state_dir.display().to_string();
            let fix = |s: &str| s.replace(&dir.display().to_string(), &real);
            if code != 0 {
                return Err(Response::Output {
                    code,
                    stdout: fix(&stdout),
                    stderr: fix(&stderr),
                });
            }
            let vd = dir.join("volumes").join(name);
            let text = std::fs::read_to_string(vd.join("volume.ron"))
                .map_err(|e| Response::Error(format!("the command left no description: {e}")))?;
            let mut spec = VolumeSpec::from_ron(&text, &vd.join("volume.ron"))
                .map_err(|e| Response::Error(e.to_string()))?;
            let secret = match &spec.secret_file {
                Some(_) => Some(
                    std::fs::read_to_string(vd.join("secret"))
                        .map_err(|e| Response::Error(format!("no secret file: {e}")))?
                        .trim()
                        .to_owned(),
                ),
                None => spec.secret.take(),
            };
            spec.secret_file = None;
            Ok((
                VolumeFiles {
                    name: name.to_owned(),
                    spec: spec.to_ron(),
                    secret,
                    started,
                    base: None,
                },
                fix(&stdout),
            ))
        })();
        let _ = std::fs::remove_dir_all(&dir);
        res
    }
}

/// What `add-brick` printed on the scratch copy, told as the cluster does it: each peer
/// writes the new description and, if the volume is started, starts its own new bricks; the
/// scratch copy was never started, so its hints about starting them are not the cluster's.
fn cluster_add_brick_text(printed: &str, started: bool) -> String {
    let mut text: String = printed
        .lines()
        .filter(|l| !l.contains("is not started") && !l.contains("on another host: start it"))
        .map(|l| format!("{l}\n"))
        .collect();
    text.push_str(if started {
        "  each peer starts its new bricks; mounts switch to the grown graph without a remount\n"
    } else {
        "  the volume is not started: `xlfs volume start` starts the new bricks too\n"
    });
    text
}

/// A volume's description as stored under `vd`: its secret file is `vd/secret`.
pub fn localize(v: &VolumeFiles, vd: &Path) -> Result<String, String> {
    let mut spec =
        VolumeSpec::from_ron(&v.spec, Path::new("cluster")).map_err(|e| e.to_string())?;
    if v.secret.is_some() {
        spec.secret = None;
        spec.secret_file = Some(std::path::absolute(vd.join("secret")).map_err(|e| e.to_string())?);
    }
    Ok(spec.to_ron())
}

fn out(stdout: String) -> Response {
    Response::Output {
        code: 0,
        stdout,
        stderr: String::new(),
    }
}

fn probe_error(e: rpc::RpcError) -> String {
    match e {
        rpc::RpcError::WrongSecret { addr } => format!(
            "{addr} holds another cluster secret: copy this peer's secret file to it (same \
             path, mode 0600) and restart its xlfs-mgmtd"
        ),
        e => e.to_string(),
    }
}

/// Whether `run.json` of a volume directory lists bricks or a heal daemon started here.
fn has_processes(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("run.json")) else {
        return false;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    let pids = v["bricks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["pid"].as_u64())
        .chain(v["shd"]["pid"].as_u64());
    pids.into_iter()
        .any(|p| Path::new(&format!("/proc/{p}")).exists())
}

/// Why a volume change was refused. A change handed to a leader just before it lost its
/// majority may still be committed by it, so "not made" is as far as this peer knows.
fn not_made(e: &str) -> String {
    format!(
        "{e}. The change is not made as far as this peer knows (one that reached the leader \
         just before it was cut off can still be made: check with `xlfs volume info`)"
    )
}
