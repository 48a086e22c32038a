//! The running daemon: answers peers and the `xlfs` command, proposes changes, follows the
//! log, and keeps this host's state directory and bricks in line with it.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use xlfs_volgen::VolumeSpec;

use crate::cluster::{Change, Cluster, VolumeFiles, host_of};
use crate::paxos::{self, Acceptor, Entry, Local, PeerId, Transport};
use crate::proto::{PeerInfo, Request, Response, Status};
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
}

pub struct Daemon {
    cfg: Config,
    store: Store,
    secret: Vec<u8>,
    node: Mutex<Node>,
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

/// A new cluster of one: this peer.
fn found(id: PeerId, addr: &str) -> paxos::Durable<Change> {
    paxos::Durable {
        chosen: vec![Entry {
            id: random_u64(),
            value: Change::Found {
                cluster: random_u64(),
                peer: id,
                addr: addr.to_owned(),
            },
        }],
        ..Default::default()
    }
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
                    let c = Cluster::from_log(&n.paxos.chosen);
                    if c.peers.len() > 1 {
                        return Err(format!(
                            "this peer is {} in its cluster; it cannot listen at {addr} (other \
                             peers reach it at the first); start it with --listen {}",
                            n.addr, n.addr
                        ));
                    }
                    n.addr = addr.clone();
                    n.paxos = found(n.id, &addr);
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
                    paxos: found(id, &addr),
                };
                store.save(&n)?;
                log(format_args!(
                    "founded a cluster of one: peer {id:016x} at {addr}"
                ));
                n
            }
        };
        let listener =
            TcpListener::bind(&addr).map_err(|e| format!("cannot listen at {addr}: {e}"))?;
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
        let d = Arc::new(Daemon {
            cfg,
            store,
            secret,
            node: Mutex::new(node),
            proposing: Mutex::new(()),
            reconciling: Mutex::new(()),
            kick: Mutex::new(tx),
            last: Mutex::new(Default::default()),
        });
        let t = d.clone();
        std::thread::spawn(move || t.follow(rx));
        Ok((d, listener))
    }

    fn node(&self) -> MutexGuard<'_, Node> {
        self.node.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cluster(&self) -> Cluster {
        Cluster::from_log(&self.node().paxos.chosen)
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
        let req: Request = match rpc::read_frame(&mut s) {
            Ok(r) => r,
            Err(e) => {
                log(format_args!("{peer}: no request: {e}"));
                return;
            }
        };
        // Operations run as long as they need; the answer is written when they end.
        let _ = s.set_write_timeout(Some(self.cfg.timeout));
        let resp = self.handle(req);
        let _ = rpc::write_frame(&mut s, &resp);
    }

    fn handle(&self, req: Request) -> Response {
        match req {
            Request::Paxos { cluster, req: r } => {
                let mut n = self.node();
                if Cluster::from_log(&n.paxos.chosen).id != cluster {
                    return Response::Error(OTHER_CLUSTER.into());
                }
                let (reply, changed) = Acceptor { d: &mut n.paxos }.handle(r);
                if changed && let Err(e) = self.store.save(&n) {
                    log(format_args!("cannot record a promise: {e}"));
                    return Response::Error(e);
                }
                Response::Paxos(reply)
            }
            Request::Learn {
                cluster,
                slot,
                entry,
            } => match self.learn_for(cluster, slot, entry) {
                Ok(()) => Response::Done,
                Err(e) => Response::Error(e),
            },
            Request::Fetch { from } => {
                let n = self.node();
                Response::Entries(n.paxos.chosen.iter().skip(from as usize).cloned().collect())
            }
            Request::Status => Response::Status(self.status()),
            Request::Join { log } => self.join(log),
            Request::Leave { cluster } => self.leave(cluster),
            Request::Probe { addr } => self.probe(&addr),
            Request::Detach { addr } => self.detach(&addr),
            Request::Peers => Response::Peers(self.peers()),
            Request::Volume { args } => self.volume(&args),
        }
    }

    fn status(&self) -> Status {
        let n = self.node();
        let c = Cluster::from_log(&n.paxos.chosen);
        Status {
            id: n.id,
            addr: n.addr.clone(),
            cluster: c.id,
            chosen: n.paxos.chosen.len() as u64,
            peers: c.peers.len(),
            volumes: c.volumes.len(),
            version: rpc::VERSION.to_owned(),
        }
    }

    /// [`Daemon::learn`], for a peer of cluster `cluster`.
    fn learn_for(&self, cluster: u64, slot: u64, entry: Entry<Change>) -> Result<(), String> {
        if self.cluster().id != cluster {
            return Err(OTHER_CLUSTER.into());
        }
        self.learn(slot, entry)
    }

    /// Records a decided slot (the next one; a later one is fetched in order by the next
    /// catch-up).
    fn learn(&self, slot: u64, entry: Entry<Change>) -> Result<(), String> {
        let mut n = self.node();
        match (Acceptor { d: &mut n.paxos }).learn(slot, entry) {
            Ok(true) => {
                self.store.save(&n)?;
                drop(n);
                self.kick();
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => {
                log(format_args!("DISAGREEMENT with a peer: {e}"));
                Err(e.to_string())
            }
        }
    }

    fn call(&self, addr: &str, req: &Request) -> Result<Response, rpc::RpcError> {
        rpc::call(addr, &self.secret, req, self.cfg.timeout)
    }

    // ----- following the log -----

    /// The follower loop: catch up with the peers and apply, every tick or when kicked.
    fn follow(self: Arc<Self>, kicks: mpsc::Receiver<()>) {
        loop {
            self.catch_up();
            self.reconcile();
            match kicks.recv_timeout(self.cfg.tick) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            while kicks.try_recv().is_ok() {}
        }
    }

    /// Copies the chosen entries this peer lacks from the peer that has most.
    fn catch_up(&self) {
        let (me, mine, peers) = {
            let n = self.node();
            let c = Cluster::from_log(&n.paxos.chosen);
            (n.id, n.paxos.chosen.len() as u64, c.peers)
        };
        let others: Vec<(PeerId, String)> = peers.into_iter().filter(|(p, _)| *p != me).collect();
        let statuses: Vec<(String, Status)> = std::thread::scope(|s| {
            let hs: Vec<_> = others
                .iter()
                .map(|(_, addr)| {
                    s.spawn(move || match self.call(addr, &Request::Status) {
                        Ok(Response::Status(st)) => Some((addr.clone(), st)),
                        _ => None,
                    })
                })
                .collect();
            hs.into_iter()
                .filter_map(|h| h.join().ok().flatten())
                .collect()
        });
        let cluster = self.cluster().id;
        let Some((addr, best)) = statuses
            .into_iter()
            .filter(|(_, st)| st.cluster == cluster)
            .max_by_key(|(_, st)| st.chosen)
        else {
            return;
        };
        if best.chosen <= mine {
            return;
        }
        if let Ok(Response::Entries(es)) = self.call(&addr, &Request::Fetch { from: mine }) {
            let n = es.len();
            for (i, e) in es.into_iter().enumerate() {
                if self.learn(mine + i as u64, e).is_err() {
                    return;
                }
            }
            log(format_args!("caught up with {addr}: {n} change(s)"));
        }
    }

    /// Brings this host's state directory and bricks in line with the log.
    fn reconcile(&self) {
        let _r = self.reconciling.lock().unwrap_or_else(|e| e.into_inner());
        let (me, c) = {
            let n = self.node();
            (n.id, Cluster::from_log(&n.paxos.chosen))
        };
        if !c.peers.contains_key(&me) {
            let mut n = self.node();
            let addr = n.addr.clone();
            n.paxos = found(me, &addr);
            if self.store.save(&n).is_ok() {
                log("this peer was detached from its cluster: it is a cluster of one again");
            }
            return;
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

    /// Proposes `change` to the cluster; on success it is recorded here, told to the peers,
    /// and applied here before this returns.
    fn propose(&self, change: Change) -> Result<(), String> {
        let entry = Entry {
            id: random_u64(),
            value: change,
        };
        let p = Proposer { d: self };
        let slot = paxos::propose(&p, &p, entry.clone()).map_err(|e| e.to_string())?;
        self.tell_all(slot, entry);
        self.reconcile();
        Ok(())
    }

    /// Tells every other peer that `slot` is decided (best effort: a peer that misses it
    /// catches up on its next tick).
    fn tell_all(&self, slot: u64, entry: Entry<Change>) {
        let (me, c) = {
            let n = self.node();
            (n.id, Cluster::from_log(&n.paxos.chosen))
        };
        std::thread::scope(|s| {
            for (p, addr) in &c.peers {
                if *p == me {
                    continue;
                }
                let req = Request::Learn {
                    cluster: c.id,
                    slot,
                    entry: entry.clone(),
                };
                s.spawn(move || {
                    let _ = self.call(addr, &req);
                });
            }
        });
    }

    /// Catches up first, so a proposal starts from the newest configuration a peer has.
    fn lock_proposals(&self) -> MutexGuard<'_, ()> {
        let g = self.proposing.lock().unwrap_or_else(|e| e.into_inner());
        self.catch_up();
        g
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
        let (me, log) = {
            let n = self.node();
            (n.id, n.paxos.chosen.clone())
        };
        if st.id == me {
            return Response::Error(format!("{addr} is this peer"));
        }
        if st.addr != addr {
            return Response::Error(format!(
                "the daemon at {addr} calls itself {}; probe it by that address",
                st.addr
            ));
        }
        if c.peers.contains_key(&st.id) {
            if st.cluster == c.id {
                return out(format!("peer probe: {addr} is already in the pool\n"));
            }
        } else {
            if st.cluster != c.id && (st.peers > 1 || st.volumes > 0) {
                return Response::Error(format!(
                    "{addr} is in another cluster ({} peers, {} volumes); detach it there \
                     first (xlfs peer detach, on one of its peers)",
                    st.peers, st.volumes
                ));
            }
            if let Err(e) = self.propose(Change::AddPeer {
                peer: st.id,
                addr: addr.clone(),
            }) {
                return Response::Error(format!("peer probe {addr}: {e}"));
            }
        }
        let log = {
            let n = self.node();
            if n.paxos.chosen.len() >= log.len() {
                n.paxos.chosen.clone()
            } else {
                log
            }
        };
        match self.call(&addr, &Request::Join { log }) {
            Ok(Response::Done) => out(format!("peer probe: success ({addr} is in the pool)\n")),
            Ok(Response::Error(e)) => Response::Error(format!("{addr} did not join: {e}")),
            Ok(other) => Response::Error(format!("{addr} answered {other:?}")),
            Err(e) => Response::Error(format!(
                "{addr} is in the pool, but did not take the configuration yet ({e}); probe it \
                 again once it is reachable"
            )),
        }
    }

    fn join(&self, entries: Vec<Entry<Change>>) -> Response {
        let mut n = self.node();
        let mine = Cluster::from_log(&n.paxos.chosen);
        let theirs = Cluster::from_log(&entries);
        if mine.id == theirs.id {
            drop(n);
            for (i, e) in entries.into_iter().enumerate() {
                let _ = self.learn(i as u64, e);
            }
            return Response::Done;
        }
        if mine.peers.len() > 1 || !mine.volumes.is_empty() {
            return Response::Error(format!(
                "this peer is in another cluster ({} peers, {} volumes)",
                mine.peers.len(),
                mine.volumes.len()
            ));
        }
        if !theirs.peers.contains_key(&n.id) {
            return Response::Error("the log sent does not list this peer".into());
        }
        let max_round = n.paxos.max_round;
        n.paxos = paxos::Durable {
            chosen: entries,
            max_round,
            ..Default::default()
        };
        if let Err(e) = self.store.save(&n) {
            return Response::Error(e);
        }
        log(format_args!(
            "joined cluster {:016x} ({} peers, {} volumes)",
            theirs.id,
            theirs.peers.len(),
            theirs.volumes.len()
        ));
        drop(n);
        self.kick();
        Response::Done
    }

    fn leave(&self, cluster: u64) -> Response {
        let mut n = self.node();
        let c = Cluster::from_log(&n.paxos.chosen);
        if c.id != cluster {
            return Response::Error("not in that cluster".into());
        }
        let (id, addr) = (n.id, n.addr.clone());
        n.paxos = found(id, &addr);
        match self.store.save(&n) {
            Ok(()) => {
                log("detached: a cluster of one again");
                Response::Done
            }
            Err(e) => Response::Error(e),
        }
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
        if let Err(e) = self.propose(Change::RemovePeer { peer }) {
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
            ("create", None) | ("set", Some(_)) | ("reset", Some(_)) => {
                match self.scratch(&c, args, name, current.is_some_and(|v| v.started)) {
                    Ok((files, printed)) => {
                        if current == Some(&files) {
                            return out(printed);
                        }
                        match self.propose(Change::PutVolume(files)) {
                            Ok(()) => return out(printed + &self.spread_note()),
                            Err(e) => return Response::Error(not_made(&e)),
                        }
                    }
                    Err(r) => return r,
                }
            }
            ("start" | "stop", Some(v)) => {
                let want = verb == "start";
                if v.started == want {
                    return out(format!("{name}: already {verb}ed in the cluster\n"));
                }
                let mut v = v.clone();
                v.started = want;
                Change::PutVolume(v)
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
                },
                fix(&stdout),
            ))
        })();
        let _ = std::fs::remove_dir_all(&dir);
        res
    }
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

/// The proposer's view of this daemon and its peers.
struct Proposer<'a> {
    d: &'a Daemon,
}

impl Local<Change> for Proposer<'_> {
    fn me(&self) -> PeerId {
        self.d.node().id
    }
    fn next_slot(&self) -> u64 {
        self.d.node().paxos.chosen.len() as u64
    }
    fn members(&self, slot: u64) -> Vec<PeerId> {
        let n = self.d.node();
        Cluster::from_log(&n.paxos.chosen[..(slot as usize).min(n.paxos.chosen.len())]).members()
    }
    fn next_round(&self) -> u64 {
        let mut n = self.d.node();
        n.paxos.max_round += 1;
        let r = n.paxos.max_round;
        if let Err(e) = self.d.store.save(&n) {
            log(format_args!("cannot record a round: {e}"));
        }
        r
    }
    fn saw_round(&self, round: u64) {
        let mut n = self.d.node();
        n.paxos.max_round = n.paxos.max_round.max(round);
    }
    fn chosen(&self, slot: u64, entry: Entry<Change>) {
        let _ = self.d.learn(slot, entry);
    }
    fn chosen_id(&self, slot: u64) -> Option<u64> {
        self.d.node().paxos.chosen.get(slot as usize).map(|e| e.id)
    }
}

impl Transport<Change> for Proposer<'_> {
    fn call_all(
        &self,
        to: &[PeerId],
        req: &paxos::Request<Change>,
    ) -> Vec<(PeerId, paxos::Reply<Change>)> {
        let (me, c) = {
            let n = self.d.node();
            (n.id, Cluster::from_log(&n.paxos.chosen))
        };
        let (cluster, peers) = (c.id, c.peers);
        std::thread::scope(|s| {
            let hs: Vec<_> = to
                .iter()
                .map(|p| {
                    let addr = peers.get(p).cloned();
                    s.spawn(move || {
                        if *p == me {
                            let mut n = self.d.node();
                            let (reply, changed) = Acceptor { d: &mut n.paxos }.handle(req.clone());
                            if changed && self.d.store.save(&n).is_err() {
                                return None;
                            }
                            return Some((*p, reply));
                        }
                        let req = Request::Paxos {
                            cluster,
                            req: req.clone(),
                        };
                        match self.d.call(&addr?, &req) {
                            Ok(Response::Paxos(r)) => Some((*p, r)),
                            _ => None,
                        }
                    })
                })
                .collect();
            hs.into_iter()
                .filter_map(|h| h.join().ok().flatten())
                .collect()
        })
    }
}

/// Why a volume change was refused. A value accepted by a minority may still be finished by
/// the next proposal that finds it (Paxos), so "not made" is as far as this peer knows.
fn not_made(e: &str) -> String {
    format!(
        "{e}. The change is not made (if a minority took it, the next change made on a \
         majority may still find and finish it: check with `xlfs volume info`)"
    )
}
