//! xlfs-mgmtd: the management daemon of one host (GlusterFS's glusterd). Run one on every
//! host of a cluster; `xlfs peer probe HOST` joins them, and `xlfs volume ...` run on any of
//! them then acts on the whole cluster.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use xlfs_mgmt::daemon::{Config, Daemon, log};
use xlfs_mgmt::rpc::DEFAULT_PORT;

const AFTER_HELP: &str = "\
On each host (the same secret file on all of them; the first daemon creates one if missing):
  xlfs-mgmtd --listen 10.0.0.1 &              (port 24017 by default)
Then on one of them:
  xlfs peer probe 10.0.0.2 && xlfs peer probe 10.0.0.3
  xlfs volume create gv0 10.0.0.1:/b 10.0.0.2:/b 10.0.0.3:/b --replica 3
  xlfs volume start gv0
  xlfs-mount 10.0.0.1,10.0.0.2,10.0.0.3:/gv0 /mnt/gv0 --secret-file S

A change (probe, detach, volume create/set/reset/start/stop/delete/add-brick, and the
description changes of remove-brick start/stop/commit) is made only when a majority of the
peers accept it; without one it is refused (one that reached a leader just before it was cut
off may still be made: `xlfs volume info` shows). A peer that was down or cut off catches up
when it is back. Each daemon starts the bricks of its own host
and starts again any that dies (checked every --tick).

Clients mount any started volume from any peer: the daemon serves its client volfile at port
24018 of the --listen address (--volfile-port) with the volume's auth.allow and secret, and
`xlfs-mount h1,h2,h3:/VOL` asks there first.

Files: <state>/mgmt/node.json (this peer and its copy of the log), <state>/mgmt/secret,
<state>/mgmt/daemon.json (where `xlfs` finds the daemon). The volumes are in
<state>/volumes/, as `xlfs` keeps them. Logs go to stderr.";

/// The xlfs management daemon.
#[derive(Parser, Debug)]
#[command(name = "xlfs-mgmtd", version, about, after_help = AFTER_HELP)]
struct Args {
    /// This host's address on the cluster network, HOST[:PORT] (port 24017 if left out): it
    /// listens there and the other peers reach it there. Bricks named by this HOST are this
    /// host's. There is no default: a daemon never listens on every address unasked.
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// The state directory (the one `xlfs` uses on this host).
    #[arg(
        long,
        value_name = "DIR",
        env = "XLFS_STATE_DIR",
        default_value = "/var/lib/xlfs"
    )]
    state_dir: PathBuf,
    /// The cluster secret, the same on every peer [default: <state>/mgmt/secret, created with
    /// a random secret when missing].
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    /// How often this host's state directory and bricks are checked against the log, in
    /// milliseconds (the log itself moves on Raft's own 100 ms tick).
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    tick_ms: u64,
    /// Bound on one request to another peer, in milliseconds (an unreachable peer costs this).
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    peer_timeout_ms: u64,
    /// The port, on the --listen host, where the client volfile of every started volume of
    /// the cluster is served (`xlfs-mount HOST:/VOLUME` asks there first); 0: none.
    #[arg(long, value_name = "PORT", default_value_t = xlfs_protocol::fetch::VOLFILE_PORT)]
    volfile_port: u16,
    /// How many applied entries the log keeps before it is compacted into a snapshot (tests
    /// set it low to exercise catching up from snapshots).
    #[arg(long, value_name = "N", default_value_t = xlfs_mgmt::daemon::COMPACT_AFTER, hide = true)]
    compact_after: usize,
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.listen.trim().is_empty() {
        eprintln!(
            "xlfs-mgmtd: --listen is empty: give this host's address on the cluster network \
             (with systemd: XLFS_MGMTD_LISTEN in /etc/default/xlfs-mgmtd)"
        );
        return ExitCode::from(2);
    }
    let xlfs = match sibling("xlfs") {
        Some(p) => p,
        None => {
            eprintln!(
                "xlfs-mgmtd: cannot find the `xlfs` command next to xlfs-mgmtd or on PATH \
                 (cargo build --workspace --bins)"
            );
            return ExitCode::from(1);
        }
    };
    let cfg = Config {
        listen: a.listen,
        secret_file: a
            .secret_file
            .unwrap_or_else(|| xlfs_mgmt::store::Store::new(&a.state_dir).secret_file()),
        state_dir: a.state_dir,
        tick: Duration::from_millis(a.tick_ms.max(100)),
        timeout: Duration::from_millis(a.peer_timeout_ms.max(100)),
        xlfs,
        volfile_port: a.volfile_port,
        compact_after: a.compact_after.max(1),
    };
    let (d, listener) = match Daemon::start(cfg) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("xlfs-mgmtd: {e}");
            return ExitCode::from(1);
        }
    };
    log(format_args!(
        "xlfs-mgmtd {} listening at {} (default port {DEFAULT_PORT})",
        env!("CARGO_PKG_VERSION"),
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    ));
    notify_ready();
    d.serve(listener);
    ExitCode::SUCCESS
}

/// Tells systemd the daemon listens (`Type=notify` in xlfs-mgmtd.service: units ordered
/// after it, such as an fstab mount with `x-systemd.requires=xlfs-mgmtd.service`, start only
/// then). Nothing without `NOTIFY_SOCKET`.
fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    let sent = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt as _;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|a| sock.send_to_addr(b"READY=1", &a))
        }
        None => sock.send_to(b"READY=1", &path),
    };
    if let Err(e) = sent {
        log(format_args!(
            "cannot tell systemd this daemon is ready: {e}"
        ));
    }
}

/// `name` next to this executable (or its parent, for cargo's `deps`), then on PATH.
fn sibling(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("XLFS_BIN_DIR") {
        dirs.push(d.into());
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        if dir.ends_with("deps") {
            dirs.extend(dir.parent().map(PathBuf::from));
        }
        dirs.push(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
}
