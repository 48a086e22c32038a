//! `xlfs volume stop NAME`: unmounts the volume's mounts started by xlfs, then stops its
//! bricks on this host (SIGTERM, SIGKILL after a grace period).

use std::time::Duration;

use xlfs_volgen::VolumeSpec;

use super::{Ctx, XLFSD};
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::VolumeDir;

/// How long a brick may take to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  xlfs volume stop gv0")]
pub struct Args {
    pub name: String,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let report = stop_all(&vd, &spec)?;
    if report.is_empty() {
        return Err(CliError::State(format!(
            "volume {} is not started on this host",
            spec.name
        )));
    }
    for line in &report {
        println!("{line}");
    }
    println!("stopped volume {}", spec.name);
    Ok(0)
}

/// Stops every recorded mount and brick of the volume; one line per thing stopped.
pub fn stop_all(vd: &VolumeDir, _spec: &VolumeSpec) -> Result<Vec<String>> {
    let mut run = vd.load_run()?;
    let mut report = Vec::new();
    // A rebalance would only fail once its bricks are gone: stop it (start resumes it).
    if let Some(s) = super::rebalance::stop_runner(vd)? {
        report.push(format!(
            "  stopped the {} (pid {}; start resumes it)",
            s.mode, s.pid
        ));
    }
    for m in std::mem::take(&mut run.mounts) {
        super::umount::stop_mount(&m)?;
        report.push(format!("  unmounted {}", m.mountpoint.display()));
    }
    if let Some(s) = run.shd.take() {
        // Unrecorded first: a daemon that sees its record gone exits by itself.
        vd.save_run(&run)?;
        if procs::alive(s.pid, crate::state::SHD_MARK) {
            procs::terminate(s.pid, crate::state::SHD_MARK, GRACE);
            report.push(format!("  stopped the self-heal daemon (pid {})", s.pid));
        }
    }
    vd.save_run(&run)?;
    for b in std::mem::take(&mut run.bricks) {
        if !procs::alive(b.pid, XLFSD) {
            continue;
        }
        let clean = procs::terminate(b.pid, XLFSD, GRACE);
        let how = if clean {
            ""
        } else {
            " (killed after no exit on SIGTERM)"
        };
        report.push(format!("  stopped brick {} (pid {}){how}", b.index, b.pid));
    }
    vd.save_run(&run)?;
    Ok(report)
}
