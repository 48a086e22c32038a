//! Shared test harness: the built `xlfs-nfsd` as a child process (killed on drop, so a failing
//! test never leaves a server behind) and nfs3_client connections with chosen credentials.
#![allow(dead_code, clippy::unwrap_used)]

use std::fmt::Debug;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nfs3_client::nfs3_types::nfs3::{
    GETATTR3args, LOOKUP3args, Nfs3Result, diropargs3, fattr3, filename3, nfs_fh3, nfsstat3,
};
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::tokio::{TokioConnector, TokioIo};
use nfs3_client::{Nfs3Connection, Nfs3ConnectionBuilder, RpcError};
use tokio::net::TcpStream;

pub type Conn = Nfs3Connection<TokioIo<TcpStream>>;

/// A running `xlfs-nfsd --local <state>`.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub state: PathBuf,
    log: PathBuf,
    stdout: Option<BufReader<std::process::ChildStdout>>,
}

impl Server {
    /// Starts the server on a free port with `extra` flags and waits for its ready line.
    pub fn start(state: &Path, extra: &[&str]) -> Server {
        Server::start_on("--local", state, extra)
    }

    /// Starts the server exporting `source` (`--local DIR` or `--volfile FILE`).
    pub fn start_on(kind: &str, source: &Path, extra: &[&str]) -> Server {
        let state = source;
        let log = state.with_extension(format!("log.{}", unique()));
        let err = std::fs::File::create(&log).expect("server log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_xlfs-nfsd"))
            .arg(kind)
            .arg(source)
            .args(["--port", "0", "--log-level", "warn"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("spawn xlfs-nfsd");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut server = Server {
            child: Some(child),
            port: 0,
            state: state.to_path_buf(),
            log,
            stdout: None,
        };
        let mut line = String::new();
        loop {
            line.clear();
            let n = stdout.read_line(&mut line).expect("read server stdout");
            if n == 0 {
                panic!("xlfs-nfsd exited before serving:\n{}", server.log());
            }
            if let Some(rest) = line.split(" on 127.0.0.1:").nth(1) {
                let port = rest.split_whitespace().next().expect("port");
                server.port = port.parse().expect("port number");
                break;
            }
        }
        server.stdout = Some(stdout);
        server
    }

    /// What the server wrote to stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then waits for the exit (SIGKILL after 10 s). Returns the status and the
    /// rest of stdout.
    pub fn stop(&mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("server running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("xlfs-nfsd did not stop on SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        if let Some(mut out) = self.stdout.take() {
            let _ = out.read_to_string(&mut rest);
        }
        (status, rest)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// An AUTH_UNIX credential.
pub fn cred(uid: u32, gid: u32, gids: &[u32]) -> opaque_auth<'static> {
    opaque_auth::auth_unix(&auth_unix {
        uid,
        gid,
        gids: gids.to_vec(),
        ..auth_unix::default()
    })
}

/// Mounts `/` as `uid`/`gid`/`gids`.
pub async fn connect(port: u16, uid: u32, gid: u32, gids: &[u32]) -> Conn {
    connect_path(port, "/", cred(uid, gid, gids))
        .await
        .expect("mount")
}

pub async fn connect_path(
    port: u16,
    path: &str,
    credential: opaque_auth<'static>,
) -> Result<Conn, nfs3_client::ConnectError> {
    Nfs3ConnectionBuilder::new(TokioConnector, "127.0.0.1", path)
        .connect_from_privileged_port(false)
        .mount_port(port)
        .nfs3_port(port)
        .credential(credential)
        .mount()
        .await
}

/// The success value of a call.
pub fn ok<T, E: Debug>(r: Result<Nfs3Result<T, E>, RpcError>) -> T {
    match r.expect("rpc") {
        Nfs3Result::Ok(v) => v,
        Nfs3Result::Err((s, e)) => panic!("expected success, got {s:?} ({e:?})"),
    }
}

/// The status of a call expected to fail.
pub fn err<T: Debug, E>(r: Result<Nfs3Result<T, E>, RpcError>) -> nfsstat3 {
    match r.expect("rpc") {
        Nfs3Result::Ok(v) => panic!("expected an error, got success: {v:?}"),
        Nfs3Result::Err((s, _)) => s,
    }
}

pub fn fname(s: &str) -> filename3<'static> {
    filename3::from(s.as_bytes().to_vec())
}

pub fn dirop(dir: &nfs_fh3, name: &str) -> diropargs3<'static> {
    diropargs3 {
        dir: dir.clone(),
        name: fname(name),
    }
}

pub async fn lookup(c: &mut Conn, dir: &nfs_fh3, name: &str) -> Result<nfs_fh3, nfsstat3> {
    match c
        .lookup(&LOOKUP3args {
            what: dirop(dir, name),
        })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => Ok(r.object),
        Nfs3Result::Err((s, _)) => Err(s),
    }
}

pub async fn getattr(c: &mut Conn, fh: &nfs_fh3) -> Result<fattr3, nfsstat3> {
    match c
        .getattr(&GETATTR3args { object: fh.clone() })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => Ok(r.obj_attributes),
        Nfs3Result::Err((s, _)) => Err(s),
    }
}

/// Whether this process runs as root (permission tests need credential switching on the
/// brick, which needs root).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .map(|u| u == "0")
        })
        .unwrap_or(false)
}
