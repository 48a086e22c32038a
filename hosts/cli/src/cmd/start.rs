//! `xlfs volume start NAME`: runs `xlfsd` for every brick of the volume on this host and
//! waits until each listens; records pids and ports. Each brick also hands out the volume's
//! client volfile, so `xlfs-mount HOST:PORT:/NAME MOUNTPOINT` can mount it from anywhere.
//! A replicated volume also gets its self-heal daemon on this host (`xlfs volume heal VOL
//! --daemon`), started again by the next `start` if it died.

use std::ffi::OsString;
use std::process::Child;
use std::time::{Duration, Instant};

use xlfs_volgen::VolumeSpec;

use super::{Ctx, XLFSD, generate_and_write};
use crate::error::{CliError, Result};
use crate::procs;
use crate::sibling;
use crate::state::{BrickRun, Run, SHD_MARK, ShdRun, VolumeDir};

/// How long a brick may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  xlfs volume start gv0 && xlfs volume status gv0\n  \
    xlfs-mount server1:49152:/gv0 /mnt/gv0   (any brick's host:port hands out the volfile)"
)]
pub struct Args {
    pub name: String,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let mut run = vd.load_run()?;
    let started = start_bricks(&vd, &spec, &mut run)?;
    let shd = ensure_shd(ctx, &vd, &spec)?;
    let local = spec
        .bricks
        .iter()
        .filter(|b| b.is_on(&procs::local_host_names()))
        .count();
    if local == 0 {
        println!(
            "{}: no brick of this volume is on this host; start it where its bricks are",
            spec.name
        );
        return Ok(0);
    }
    if started.is_empty() {
        println!("{}: already started", spec.name);
    } else {
        println!("started volume {}", spec.name);
    }
    for b in &run.bricks {
        let Some(pos) = spec.position_of(b.index) else {
            continue;
        };
        println!(
            "  brick {}  {}  port {}  pid {}",
            b.index, spec.bricks[pos], b.port, b.pid
        );
    }
    match shd {
        Some((pid, true)) => println!("  self-heal daemon  pid {pid} (started)"),
        Some((pid, false)) => println!("  self-heal daemon  pid {pid}"),
        None => {}
    }
    Ok(0)
}

/// The volume option that switches the self-heal daemon (replicate's `self-heal-daemon`).
pub const SHD_OPTION: &str = "cluster.replicate.self-heal-daemon";

/// Whether the volume has replicas and its self-heal daemon is not switched off.
pub fn shd_wanted(spec: &VolumeSpec) -> bool {
    spec.replica > 1
        && spec
            .options
            .get(SHD_OPTION)
            .is_none_or(|v| xlator_api::parse_bool(v).unwrap_or(true))
}

/// Starts the volume's self-heal daemon on this host (a replicated volume with a brick here)
/// unless it runs already; records it in run.json. Its pid, and whether it was started now.
pub fn ensure_shd(ctx: &Ctx, vd: &VolumeDir, spec: &VolumeSpec) -> Result<Option<(u32, bool)>> {
    let here = procs::local_host_names();
    if !shd_wanted(spec) || !spec.bricks.iter().any(|b| b.is_on(&here)) {
        return Ok(None);
    }
    let mut run = vd.load_run()?;
    if let Some(s) = &run.shd
        && procs::alive(s.pid, SHD_MARK)
    {
        return Ok(Some((s.pid, false)));
    }
    let exe = std::env::current_exe().map_err(|e| {
        CliError::Process(format!(
            "cannot find this program to run the self-heal daemon: {e}"
        ))
    })?;
    let args: Vec<OsString> = vec![
        "--state-dir".into(),
        ctx.state().root.into_os_string(),
        "volume".into(),
        "heal".into(),
        spec.name.clone().into(),
        SHD_MARK.into(),
    ];
    std::fs::create_dir_all(vd.log_dir()).map_err(CliError::io(vd.log_dir()))?;
    let child = procs::spawn_detached(&exe, &args, &vd.log_dir().join("shd.log"))?;
    run.shd = Some(ShdRun { pid: child.id() });
    vd.save_run(&run)?;
    Ok(Some((child.id(), true)))
}

/// Starts the local bricks that are not running; all or nothing (bricks started here are
/// stopped again if one fails). Returns the bricks it started; `run` is saved.
///
/// Bricks are handled by position in `spec.bricks` here; what is recorded and named (run
/// entries, volfiles, sockets, logs, ports) uses the brick's id.
pub fn start_bricks(vd: &VolumeDir, spec: &VolumeSpec, run: &mut Run) -> Result<Vec<BrickRun>> {
    let names = procs::local_host_names();
    let todo: Vec<usize> = (0..spec.bricks.len())
        .filter(|i| spec.bricks[*i].is_on(&names))
        .filter(|i| {
            !run.bricks
                .iter()
                .any(|r| r.index == spec.brick_id(*i) && procs::alive(r.pid, XLFSD))
        })
        .collect();
    run.bricks.retain(|r| procs::alive(r.pid, XLFSD));
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    let xlfsd = sibling::find(XLFSD)?;
    if (0..spec.bricks.len()).any(|i| !vd.brick_volfile(spec.brick_id(i)).is_file())
        || !vd.client_volfile().is_file()
    {
        generate_and_write(vd, spec)?;
    }
    std::fs::create_dir_all(vd.log_dir()).map_err(CliError::io(vd.log_dir()))?;
    let listen = |i: usize| match (&spec.transport.listen_host, spec.bricks[i].is_local()) {
        (Some(h), _) => h.clone(),
        (None, true) => xlfs_volgen::LOOPBACK.to_owned(),
        (None, false) => "0.0.0.0".to_owned(),
    };
    for &i in &todo {
        let port = spec.brick_port(i);
        if !procs::port_free(&listen(i), port) {
            return Err(CliError::Process(format!(
                "brick {} ({}): port {port} is in use by another program; stop it, or recreate \
                 the volume with another --port",
                spec.brick_id(i),
                spec.bricks[i]
            )));
        }
    }
    let mut children: Vec<(usize, Child)> = Vec::new();
    let mut failure = None;
    for &pos in &todo {
        let brick = &spec.bricks[pos];
        let i = spec.brick_id(pos);
        if let Err(e) = std::fs::create_dir_all(brick.path()) {
            failure = Some(format!(
                "brick {i} ({brick}): cannot create the directory: {e}"
            ));
            break;
        }
        // Every brick hands out the client volfile: `xlfs-mount HOST:PORT:/NAME` works
        // against any of them (re-read per request, so `volume set` is seen at once).
        let args: Vec<OsString> = vec![
            "--volfile".into(),
            vd.brick_volfile(i).into(),
            "--client-volfile".into(),
            vd.client_volfile().into(),
            "--client-volfile-name".into(),
            spec.name.clone().into(),
            "--control-socket".into(),
            vd.brick_socket(i).into(),
        ];
        let log = vd.log_dir().join(format!("brick-{i}.log"));
        match procs::spawn_detached(&xlfsd, &args, &log) {
            Ok(child) => children.push((pos, child)),
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    // Wait until every brick listens or one fails.
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pending: Vec<usize> = children.iter().map(|(i, _)| *i).collect();
    while failure.is_none() && !pending.is_empty() {
        for (i, child) in children.iter_mut() {
            if !pending.contains(i) {
                continue;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let id = spec.brick_id(*i);
                let log = vd.log_dir().join(format!("brick-{id}.log"));
                failure = Some(format!(
                    "brick {id} ({}) exited ({status}) while starting:\n{}",
                    spec.bricks[*i],
                    procs::log_tail(&log, 8)
                ));
                break;
            }
            if procs::port_open(spec.bricks[*i].connect_host(), spec.brick_port(*i)) {
                let idx = *i;
                pending.retain(|p| *p != idx);
            }
        }
        if Instant::now() > deadline && failure.is_none() {
            let ids: Vec<usize> = pending.iter().map(|p| spec.brick_id(*p)).collect();
            failure = Some(format!(
                "bricks {ids:?} did not listen within {}s; see the logs in {}",
                START_TIMEOUT.as_secs(),
                vd.log_dir().display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(msg) = failure {
        for (_, mut child) in children {
            let _ = child.kill();
            let _ = child.wait();
        }
        return Err(CliError::Process(msg));
    }
    let started: Vec<BrickRun> = children
        .iter()
        .map(|(i, c)| BrickRun {
            index: spec.brick_id(*i),
            pid: c.id(),
            port: spec.brick_port(*i),
        })
        .collect();
    run.bricks.extend(started.iter().cloned());
    run.bricks.sort_by_key(|b| b.index);
    vd.save_run(run)?;
    Ok(started)
}
