//! The cluster: `xlfs peer probe|status|detach`, `xlfs pool list`, and volume commands handed
//! to this host's management daemon (`xlfs-mgmtd`) so they act on every peer.
//!
//! A host whose state directory has a running daemon (`<state>/mgmt/daemon.json`) is in
//! cluster mode: `volume create|set|reset|start|stop|delete|add-brick` go to the daemon, which makes
//! the change with a majority of the peers and applies it on each; `remove-brick` and
//! `rebalance` run here and hand their description changes to the daemon; the read-only
//! commands read the state directory, which the daemon keeps in line with the cluster.

use std::time::Duration;

use clap::Subcommand;
use xlfs_mgmt::daemon::LOCAL_ENV;
use xlfs_mgmt::proto::{Request, Response};
use xlfs_mgmt::store::{DaemonFile, Store};

use super::Ctx;
use crate::error::{CliError, Result};

/// How long a cluster operation may take (a brick start on every peer included).
const OP_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Subcommand, Debug)]
#[command(after_help = "\
Examples (with xlfs-mgmtd running on each host, the same secret file on each):
  xlfs peer probe 10.0.0.2        add the host to this cluster (port 24017 unless given)
  xlfs peer status                the other peers, connected or not
  xlfs peer detach 10.0.0.2       take a host without bricks out")]
pub enum PeerCommand {
    /// Add a host (its xlfs-mgmtd) to this host's cluster.
    Probe { host: String },
    /// The other peers of the cluster, and whether this host reaches them.
    Status,
    /// Take a host without bricks out of the cluster.
    Detach { host: String },
}

#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Every peer of the cluster, this one included.
    List,
}

/// The running daemon of this state directory and the secret to reach it, unless the
/// command was run by the daemon itself ([`LOCAL_ENV`]).
/// Whether this command was run by a daemon for its host's part of a cluster-wide answer
/// ([`LOCAL_ENV`]).
pub fn run_by_daemon() -> bool {
    std::env::var_os(LOCAL_ENV).is_some()
}

pub fn daemon(ctx: &Ctx) -> Option<(DaemonFile, Vec<u8>)> {
    if std::env::var_os(LOCAL_ENV).is_some() {
        return None;
    }
    let store = Store::new(&ctx.state().root);
    let text = std::fs::read_to_string(store.daemon_file()).ok()?;
    let d: DaemonFile = serde_json::from_str(&text).ok()?;
    if !crate::procs::alive(d.pid, "xlfs-mgmtd") {
        return None;
    }
    let secret = store.secret(&d.secret_file, false).ok()?;
    Some((d, secret))
}

fn ask(ctx: &Ctx, req: &Request) -> Result<Response> {
    let Some((d, secret)) = daemon(ctx) else {
        return Err(CliError::State(format!(
            "no xlfs-mgmtd runs for {}: start one on this host (xlfs-mgmtd --listen ADDR)",
            ctx.state().root.display()
        )));
    };
    xlfs_mgmt::rpc::call(&d.addr, &secret, req, OP_TIMEOUT)
        .map_err(|e| CliError::Process(e.to_string()))
}

/// `xlfs volume status NAME --json` as peer `addr` sees its own host (see
/// [`Request::LocalStatus`]).
pub fn local_status(addr: &str, secret: &[u8], name: &str) -> Result<String> {
    // Its exit code says whether every brick is online: the JSON is the answer either way.
    local_output(
        addr,
        secret,
        &Request::LocalStatus {
            name: name.to_owned(),
        },
        true,
    )
}

/// `xlfs volume heal NAME info --json` as peer `addr` sees its own host (see
/// [`Request::LocalHealInfo`]).
pub fn local_heal_info(addr: &str, secret: &[u8], name: &str) -> Result<String> {
    local_output(
        addr,
        secret,
        &Request::LocalHealInfo {
            name: name.to_owned(),
        },
        false,
    )
}

/// `ask(peer)` for every peer of `peers` at once (one thread each): a peer that is cut off
/// costs its timeout once, not once per peer. The answers in the peers' order.
pub fn ask_each<T: Send>(
    peers: &[&xlfs_mgmt::proto::PeerInfo],
    ask: impl Fn(&xlfs_mgmt::proto::PeerInfo) -> T + Sync,
) -> Vec<T> {
    let ask = &ask;
    std::thread::scope(|s| {
        let asks: Vec<_> = peers.iter().map(|p| s.spawn(move || ask(p))).collect();
        asks.into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// What a peer printed for one of its host's own commands; an error when it failed (exited
/// non-zero, unless `any_code`).
fn local_output(addr: &str, secret: &[u8], req: &Request, any_code: bool) -> Result<String> {
    match xlfs_mgmt::rpc::call(addr, secret, req, Duration::from_secs(10))
        .map_err(|e| CliError::Process(e.to_string()))?
    {
        Response::Output { code, stdout, .. } if code == 0 || any_code => Ok(stdout),
        Response::Output { stderr, .. } => {
            Err(CliError::State(format!("peer {addr}: {}", stderr.trim())))
        }
        Response::Error(e) => Err(CliError::State(e)),
        other => Err(CliError::Other(format!("unexpected answer {other:?}"))),
    }
}

/// In cluster mode, refuses when a rebalance or remove-brick runner of `volume` is alive on
/// another peer (or on any peer, this one included, with `include_me`): two runners, or an
/// add-brick under a running one, would move files by two different layouts. A peer that
/// does not answer is named in a warning (a runner there is not seen). Outside cluster mode,
/// nothing to check beyond this host's own status.
pub fn no_runner_elsewhere(ctx: &Ctx, volume: &str, include_me: bool) -> Result<()> {
    let Some((_, secret)) = daemon(ctx) else {
        return Ok(());
    };
    let mut running = Vec::new();
    for p in peers(ctx)?.iter().filter(|p| include_me || !p.me) {
        let status = local_status(&p.addr, &secret, volume)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        let Some(st) = status else {
            eprintln!(
                "xlfs: warning: peer {} did not answer: a rebalance or remove-brick running \
                 there is not seen",
                p.addr
            );
            continue;
        };
        let r = &st["rebalance"];
        if r["running"] == true {
            running.push(format!(
                "a {} on {}",
                r["mode"].as_str().unwrap_or("rebalance"),
                p.addr
            ));
        }
    }
    if running.is_empty() {
        return Ok(());
    }
    Err(CliError::State(format!(
        "{} of volume {volume} is running; wait for it or stop it there (`xlfs volume \
         rebalance {volume} status|stop` on that host)",
        running.join(" and ")
    )))
}

/// Prints a daemon's answer to a command; its exit code.
fn print(resp: Response) -> Result<u8> {
    match resp {
        Response::Output {
            code,
            stdout,
            stderr,
        } => {
            print!("{stdout}");
            eprint!("{stderr}");
            Ok(code)
        }
        Response::Error(e) => Err(CliError::State(e)),
        Response::Done => Ok(0),
        other => Err(CliError::Other(format!("unexpected answer {other:?}"))),
    }
}

pub fn run(ctx: &Ctx, c: PeerCommand) -> Result<u8> {
    match c {
        PeerCommand::Probe { host } => print(ask(ctx, &Request::Probe { addr: host })?),
        PeerCommand::Detach { host } => print(ask(ctx, &Request::Detach { addr: host })?),
        PeerCommand::Status => {
            let peers = peers(ctx)?;
            let others: Vec<_> = peers.iter().filter(|p| !p.me).collect();
            println!("Number of Peers: {}", others.len());
            for p in others {
                println!();
                println!("Hostname: {}", p.addr);
                println!("Uuid: {:016x}", p.id);
                println!(
                    "State: Peer in Cluster ({})",
                    if p.connected {
                        "Connected"
                    } else {
                        "Disconnected"
                    }
                );
            }
            Ok(0)
        }
    }
}

pub fn pool(ctx: &Ctx, c: PoolCommand) -> Result<u8> {
    match c {
        PoolCommand::List => {
            println!("{:<18}{:<28}{:<14}Log", "UUID", "Hostname", "State");
            for p in peers(ctx)? {
                let host = if p.me {
                    format!("{} (this host)", p.addr)
                } else {
                    p.addr.clone()
                };
                let state = if p.connected {
                    "Connected"
                } else {
                    "Disconnected"
                };
                let log = p.chosen.map_or("-".to_owned(), |c| c.to_string());
                println!("{:<18}{host:<28}{state:<14}{log}", format!("{:016x}", p.id));
            }
            Ok(0)
        }
    }
}

pub fn peers(ctx: &Ctx) -> Result<Vec<xlfs_mgmt::proto::PeerInfo>> {
    match ask(ctx, &Request::Peers)? {
        Response::Peers(p) => Ok(p),
        Response::Error(e) => Err(CliError::State(e)),
        other => Err(CliError::Other(format!("unexpected answer {other:?}"))),
    }
}

/// Volume commands that change the cluster's configuration: made by the daemon.
const CLUSTER_VERBS: [&str; 7] = [
    "create",
    "set",
    "reset",
    "start",
    "stop",
    "delete",
    "add-brick",
];

/// In cluster mode, hands `xlfs volume VERB ...` to the daemon and returns its exit code;
/// `None` when the command runs here as usual.
pub fn forward_volume(ctx: &Ctx) -> Option<Result<u8>> {
    daemon(ctx)?;
    let args = volume_args();
    let verb = args.first()?.as_str();
    if !CLUSTER_VERBS.contains(&verb) {
        return None;
    }
    // The daemon grows the volume on a scratch copy, which sees no runner.
    if verb == "add-brick"
        && let Some(name) = args.get(1)
        && let Err(e) = no_runner_elsewhere(ctx, name, true)
    {
        return Some(Err(e));
    }
    Some(ask(ctx, &Request::Volume { args }).and_then(print))
}

/// Asks the daemon to make the volume command `args` on the cluster's copy of the volume
/// (how `remove-brick`, which runs here, changes the description everywhere).
pub fn change_volume(ctx: &Ctx, args: Vec<String>) -> Result<()> {
    match ask(ctx, &Request::Volume { args })? {
        Response::Output { code: 0, .. } | Response::Done => Ok(()),
        Response::Output { stdout, stderr, .. } => Err(CliError::State(format!(
            "{}{}",
            stdout.trim(),
            stderr.trim()
        ))),
        Response::Error(e) => Err(CliError::State(e)),
        other => Err(CliError::Other(format!("unexpected answer {other:?}"))),
    }
}

/// This command's arguments after `volume`, without the global `--state-dir`.
fn volume_args() -> Vec<String> {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let mut out = Vec::new();
    let mut seen_volume = false;
    let mut it = all.into_iter();
    while let Some(a) = it.next() {
        if a == "--state-dir" {
            it.next();
            continue;
        }
        if a.starts_with("--state-dir=") {
            continue;
        }
        if !seen_volume {
            seen_volume = a == "volume";
            continue;
        }
        out.push(a);
    }
    out
}
