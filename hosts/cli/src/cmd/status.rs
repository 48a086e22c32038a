//! `xlfs volume status NAME`: bricks up/down with ports and pids, and mounts. Exits 7 when
//! a brick is down.

use serde::Serialize;

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
    let status = Status {
        volume: spec.name.clone(),
        layout: spec.layout().to_string(),
        online,
        bricks,
        mounts,
    };
    if a.json {
        print_json(&status)?;
    } else {
        print_human(&status);
    }
    Ok(if online { code::OK } else { code::DOWN })
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
}
