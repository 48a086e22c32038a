//! The brick under fuzz: protocol/server over features/locks over storage/posix on a temporary
//! directory, on a tokio runtime of its own, started once per process and shared by every
//! input. Each input's effects on the brick (files, xattrs) stay for the next ones, as on a
//! real brick; what a connection holds (fds, locks) must not ([`Brick::settle`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use xlator_api::Subvol;
use xlfs_protocol::wire;
use xlfs_testkit::build::try_build as build;

use crate::client::{self, Conn};

/// How long the brick may take to serve a good client, or to close a connection whose client
/// sent end of stream, before it counts as hung. Generous: the machine is small and shared.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub struct Brick {
    /// [`DEADLINE`] unless changed (tests shorten it).
    pub deadline: Duration,
    pub tcp: SocketAddr,
    pub unix: PathBuf,
    pub server: Subvol,
    pub locks: Subvol,
    pub posix: Subvol,
    pub dir: PathBuf,
    /// The server's tasks run on it (for the life of the process).
    rt: tokio::runtime::Runtime,
    /// The temporary directory the brick made for itself (none under `XLFS_FUZZ_DIR`).
    tmp: std::sync::Mutex<Option<tempfile::TempDir>>,
}

impl Brick {
    /// Starts the brick in `XLFS_FUZZ_DIR` (an empty directory; `ci/fuzz.sh` sets it) or in a
    /// new temporary directory.
    pub fn start() -> Result<Brick, String> {
        let (dir, tmp) = match std::env::var_os("XLFS_FUZZ_DIR") {
            Some(d) => (PathBuf::from(d), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("xlfs-fuzz-")
                    .tempdir()
                    .map_err(|e| format!("temporary directory: {e}"))?;
                (t.path().to_owned(), Some(t))
            }
        };
        let (data, sock) = (dir.join("brick"), dir.join("sock"));
        let volfile = dir.join("client.vol");
        std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        // What a volfile request is answered with (not parsed by the server).
        std::fs::write(&volfile, "( volumes: [] )\n")
            .map_err(|e| format!("{}: {e}", volfile.display()))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        xlfs_core::services::set_fallback_runtime(rt.handle().clone());
        let _in_rt = rt.enter();
        let text = |p: &Path| p.to_str().map(str::to_owned).ok_or("non-UTF-8 path");
        let posix = build::<xlfs_posix::Posix>(
            "posix",
            &[("directory", text(&data)?.as_str())],
            Vec::new(),
        )?;
        let locks = build::<xlfs_locks::Locks>("locks", &[], vec![posix.clone()])?;
        let sock_dir = text(&sock)?;
        let volfile = text(&volfile)?;
        // Its own name: `listen_addr` finds a server by name, and tests start several.
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!("fuzz-server-{}", N.fetch_add(1, Ordering::Relaxed));
        let server = build::<xlfs_protocol::Server>(
            &name,
            &[
                ("listen-host", "127.0.0.1"),
                ("volume-name", client::VOLUME),
                ("unix-socket-dir", sock_dir.as_str()),
                // The harness's calls carry uid 0 over TCP without a secret: not squashed, so
                // they reach posix's permission checks as root (and as whoever they claim).
                ("root-squash", "off"),
                // One connection per input, and a brick that keeps up with them: the bounds
                // are tested elsewhere (tests/hostile.rs), here they would only refuse.
                ("max-connections", "100000"),
                ("max-connections-per-address", "100000"),
                ("max-pending-handshakes", "100000"),
                ("client-volfile", volfile.as_str()),
                ("client-volfile-name", client::VOLUME),
                // Keeps each input cheap: a 1 MiB read per frame would dominate the run.
                ("max-read", "256KiB"),
            ],
            vec![locks.clone()],
        )?;
        let tcp = xlfs_protocol::server::listen_addr(&server).ok_or("no listen address")?;
        let unix = wire::unix_socket_path(&sock, tcp.port());
        drop(_in_rt);
        Ok(Brick {
            deadline: DEADLINE,
            tcp,
            unix,
            server,
            locks,
            posix,
            dir,
            rt,
            tmp: std::sync::Mutex::new(tmp),
        })
    }

    /// Removes the temporary directory the brick made for itself, if it did: for a brick in a
    /// `static`, which is never dropped (the fuzz target calls this at exit).
    pub fn remove_temp_dir(&self) {
        if let Some(t) = self
            .tmp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            let _ = t.close();
        }
    }

    /// Runs `f` (a fop called on the graph in this process) on the brick's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub fn connect(&self, unix: bool) -> std::io::Result<Conn> {
        if unix {
            Conn::unix(&self.unix)
        } else {
            Conn::tcp(self.tcp)
        }
    }

    /// A good client is served: a new connection (TCP or Unix), a hello answered with a
    /// welcome, a stat of the root answered, within the deadline.
    pub fn check_serving(&self, unix: bool) -> Result<(), String> {
        let c = self
            .connect(unix)
            .map_err(|e| format!("cannot connect: {e}"))?;
        client::stat_root(c, self.deadline)
    }

    /// Waits until every connection has ended on the server's side (within [`DEADLINE`]), then
    /// checks that nothing a connection held outlived it: no fd open in the server or in
    /// storage/posix, no lock held or waiting in features/locks.
    pub fn settle(&self) -> Result<(), String> {
        let until = Instant::now() + self.deadline;
        // Counters read from the dumps directly: rendering and parsing JSON here would add
        // coverage noise (the harness is instrumented too) and time to every input.
        let count = |v: &Subvol, k: &str| v.dump().find_u64(k).unwrap_or(u64::MAX);
        let mut pause = Duration::from_micros(20);
        loop {
            let busy = ["connections", "pending-handshakes", "open-fds"]
                .iter()
                .any(|k| count(&self.server, k) != 0);
            if !busy && count(&self.posix, "open-fds") == 0 {
                break;
            }
            if Instant::now() >= until {
                let (what, v) = if busy {
                    ("the server still has connections", &self.server)
                } else {
                    ("storage/posix still has fds open", &self.posix)
                };
                return Err(format!(
                    "{what} {:?} after every client closed: {}",
                    self.deadline,
                    json(v)
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        if count(&self.locks, "held") + count(&self.locks, "waiting") > 0 {
            return Err(format!(
                "features/locks holds locks after every client disconnected: {}",
                json(&self.locks)
            ));
        }
        Ok(())
    }
}

/// The statedump of `v` as JSON.
pub fn json(v: &Subvol) -> serde_json::Value {
    serde_json::from_str(&v.dump().to_json()).unwrap_or(serde_json::Value::Null)
}
