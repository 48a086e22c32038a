//! `xlfs volume status NAME`: bricks up/down with ports and pids, and mounts. Exits 7 when
//! a brick is down. On a host managed by xlfs-mgmtd, each other peer's daemon adds what only
//! its host knows: its bricks' pids, its self-heal daemon, its bricks' heal indexes.

use serde::{Deserialize, Serialize};

use super::{BrickState, Ctx, XLFS_MOUNT, brick_states, print_json};
use crate::error::{Result, code};
use crate::procs;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume status gv0
  xlfs volume status gv0 --json || echo some bricks are down")]
pub struct Args {
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Status {
    volume: String,
    layout: String,
    online: bool,
    bricks: Vec<BrickState>,
    mounts: Vec<Mount>,
    /// The last rebalance / remove-brick run, if any left a status.
    #[serde(skip_serializing_if = "Option::is_none")]
    rebalance: Option<Rebalance>,
    /// The self-heal daemon this host runs for the volume (replicated volumes).
    shd: Option<Shd>,
    /// Replicated volumes: entries in each local brick's heal index (objects with a non-zero
    /// replication counter, or whose counters returned to zero in the last seconds), read
    /// from disk (`volume heal VOL info` lists them by path).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    heal_index: Vec<HealCount>,
    /// The other peers of the cluster (hosts managed by xlfs-mgmtd), as each reported its
    /// own host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    peers: Vec<PeerReport>,
}

#[derive(Serialize)]
struct PeerReport {
    addr: String,
    /// Its daemon answered.
    reached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    shd: Option<Shd>,
}

/// What another peer reports of its own host (the fields of its `status --json` used here).
#[derive(Deserialize)]
struct Remote {
    bricks: Vec<RemoteBrick>,
    shd: Option<Shd>,
    #[serde(default)]
    heal_index: Vec<HealCount>,
}

#[derive(Deserialize)]
struct RemoteBrick {
    index: usize,
    local: bool,
    pid: Option<u32>,
}

#[derive(Serialize, Deserialize)]
struct HealCount {
    index: usize,
    brick: String,
    /// None: the index could not be read (the message is printed).
    entries: Option<usize>,
}

#[derive(Serialize)]
struct Rebalance {
    mode: String,
    state: String,
    /// The runner process is alive.
    running: bool,
    files_scanned: u64,
    files_moved: u64,
    files_skipped: u64,
    failures: u64,
}

/// The self-heal daemon on this host.
#[derive(Serialize, Deserialize)]
struct Shd {
    pid: u32,
    running: bool,
}

#[derive(Serialize)]
struct Mount {
    mountpoint: String,
    pid: u32,
    running: bool,
    mounted: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let run = vd.load_run()?;
    let bricks = brick_states(&spec, &run);
    let mounts: Vec<Mount> = run
        .mounts
        .iter()
        .map(|m| Mount {
            mountpoint: m.mountpoint.display().to_string(),
            pid: m.pid,
            running: procs::alive(m.pid, XLFS_MOUNT),
            mounted: procs::is_mounted(&m.mountpoint),
        })
        .collect();
    let online = bricks.iter().all(|b| b.online);
    // A broken status file is `rebalance status`'s to report; here it is left out.
    let rebalance = super::rebalance::read_status(&vd)
        .ok()
        .flatten()
        .map(|(s, _)| Rebalance {
            running: s.alive(),
            mode: s.mode,
            state: s.state,
            files_scanned: s.files_scanned,
            files_moved: s.files_moved,
            files_skipped: s.files_skipped,
            failures: s.failures,
        });
    let shd = run
        .shd
        .as_ref()
        .filter(|_| super::start::shd_wanted(&spec))
        .map(|s| Shd {
            pid: s.pid,
            running: procs::alive(s.pid, crate::state::SHD_MARK),
        });
    let here = procs::local_host_names();
    let heal_index: Vec<HealCount> = (0..spec.bricks.len())
        .filter(|p| spec.replica > 1 && spec.bricks[*p].is_on(&here))
        .map(|p| {
            let path = std::path::Path::new(spec.bricks[p].path());
            let entries = match xlfs_posix::index_entries(path) {
                Ok(v) => Some(v.len()),
                Err(e) => {
                    eprintln!("heal index of brick {}: {e}", spec.bricks[p]);
                    None
                }
            };
            HealCount {
                index: spec.brick_id(p),
                brick: spec.bricks[p].to_string(),
                entries,
            }
        })
        .collect();
    let mut status = Status {
        volume: spec.name.clone(),
        layout: spec.layout().to_string(),
        online,
        bricks,
        mounts,
        rebalance,
        shd,
        heal_index,
        peers: Vec::new(),
    };
    if let Some((_, secret)) = super::peer::daemon(ctx) {
        add_peers(ctx, &secret, &mut status);
    }
    if a.json {
        print_json(&status)?;
    } else {
        print_human(&status);
    }
    Ok(if online { code::OK } else { code::DOWN })
}

/// Asks every other peer's daemon for its host's part (see the module doc).
fn add_peers(ctx: &Ctx, secret: &[u8], status: &mut Status) {
    let peers = match super::peer::peers(ctx) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("the other peers' part is missing: {e}");
            return;
        }
    };
    let others: Vec<_> = peers.iter().filter(|p| !p.me).collect();
    let volume = &status.volume;
    let answers: Vec<Option<Remote>> = super::peer::ask_each(&others, |p| {
        super::peer::local_status(&p.addr, secret, volume)
            .ok()
            .and_then(|text| serde_json::from_str::<Remote>(&text).ok())
    });
    for (p, remote) in others.iter().zip(answers) {
        let Some(r) = remote else {
            status.peers.push(PeerReport {
                addr: p.addr.clone(),
                reached: false,
                shd: None,
            });
            continue;
        };
        for rb in r.bricks.iter().filter(|b| b.local) {
            if let Some(b) = status.bricks.iter_mut().find(|b| b.index == rb.index) {
                b.pid = rb.pid;
            }
        }
        status.heal_index.extend(r.heal_index);
        status.peers.push(PeerReport {
            addr: p.addr.clone(),
            reached: true,
            shd: r.shd,
        });
    }
    status.heal_index.sort_by_key(|h| h.index);
}

fn print_human(s: &Status) {
    let up = s.bricks.iter().filter(|b| b.online).count();
    println!(
        "Volume {} ({}): {up} of {} bricks online",
        s.volume,
        s.layout,
        s.bricks.len()
    );
    let width = s
        .bricks
        .iter()
        .map(|b| b.brick.len())
        .max()
        .unwrap_or(5)
        .max(5);
    println!(
        "  {:>3}  {:width$}  {:>5}  {:6}  {:>7}",
        "#", "Brick", "Port", "Online", "Pid"
    );
    for b in &s.bricks {
        let pid = b.pid.map_or_else(|| "-".to_owned(), |p| p.to_string());
        let online = if b.online { "yes" } else { "no" };
        let remote = if b.local { "" } else { "  (remote)" };
        println!(
            "  {:>3}  {:width$}  {:>5}  {online:6}  {pid:>7}{remote}",
            b.index, b.brick, b.port
        );
    }
    for m in &s.mounts {
        let state = match (m.running, m.mounted) {
            (true, true) => "mounted",
            (true, false) => "starting or stuck",
            (false, true) => "stale (mount process gone; xlfs umount it)",
            (false, false) => "gone",
        };
        println!("  mount {}  pid {}  {state}", m.mountpoint, m.pid);
    }
    if !s.heal_index.is_empty() {
        let counts: Vec<String> = s
            .heal_index
            .iter()
            .map(|h| match h.entries {
                Some(n) => format!("brick {} {n}", h.index),
                None => format!("brick {} unreadable", h.index),
            })
            .collect();
        println!(
            "  heal index  {} (xlfs volume heal VOL info lists them)",
            counts.join(", ")
        );
    }
    if let Some(d) = &s.shd {
        let state = if d.running {
            "running"
        } else {
            "gone (xlfs volume start starts it again)"
        };
        println!("  self-heal daemon  pid {}  {state}", d.pid);
    }
    for p in &s.peers {
        match (&p.shd, p.reached) {
            (_, false) => println!(
                "  peer {}  unreachable: its bricks' pids are unknown",
                p.addr
            ),
            (Some(d), true) => println!(
                "  peer {}  self-heal daemon  pid {}  {}",
                p.addr,
                d.pid,
                if d.running { "running" } else { "gone" }
            ),
            (None, true) => println!("  peer {}  reached", p.addr),
        }
    }
    if let Some(r) = &s.rebalance {
        let state = match (r.state.as_str(), r.running) {
            ("running", false) => "interrupted",
            (st, _) => st,
        };
        println!(
            "  {} {state}: {} files scanned, {} moved, {} skipped, {} failed (xlfs volume \
             rebalance {} status)",
            r.mode, r.files_scanned, r.files_moved, r.files_skipped, r.failures, s.volume
        );
    }
}
