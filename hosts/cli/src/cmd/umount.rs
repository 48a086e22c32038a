//! `xlfs umount MOUNTPOINT`: stops the xlfs-mount process of a mount made with `xlfs mount`
//! (it unmounts cleanly on SIGTERM); a stuck mount is detached.

use std::path::PathBuf;
use std::time::Duration;

use super::{Ctx, XLFS_MOUNT};
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::MountRun;

/// How long xlfs-mount may take to unmount and exit.
const GRACE: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  xlfs umount /mnt/gv0")]
pub struct Args {
    pub mountpoint: PathBuf,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let state = ctx.state();
    let mp = std::path::absolute(&a.mountpoint).map_err(CliError::io(&a.mountpoint))?;
    let mp = mp.canonicalize().unwrap_or(mp);
    for name in state.list()? {
        let vd = state.volume_dir(&name);
        let mut run = vd.load_run()?;
        let Some(pos) = run.mounts.iter().position(|m| m.mountpoint == mp) else {
            continue;
        };
        let m = run.mounts.remove(pos);
        stop_mount(&m)?;
        vd.save_run(&run)?;
        println!("unmounted {} ({name})", mp.display());
        return Ok(0);
    }
    if procs::is_mounted(&mp) {
        return Err(CliError::State(format!(
            "{} was not mounted by xlfs in {}; unmount it with `umount {}`",
            mp.display(),
            state.root.display(),
            mp.display()
        )));
    }
    Err(CliError::State(format!("{} is not mounted", mp.display())))
}

/// Asks xlfs-mount to unmount and exit; detaches the mount if it does not.
pub fn stop_mount(m: &MountRun) -> Result<()> {
    if procs::alive(m.pid, XLFS_MOUNT) {
        procs::signal(m.pid, libc::SIGTERM);
        procs::wait_for(GRACE, || !procs::alive(m.pid, XLFS_MOUNT));
    }
    if procs::is_mounted(&m.mountpoint) {
        procs::lazy_unmount(&m.mountpoint);
    }
    if procs::alive(m.pid, XLFS_MOUNT) {
        procs::terminate(m.pid, XLFS_MOUNT, Duration::from_secs(1));
    }
    if procs::is_mounted(&m.mountpoint) {
        return Err(CliError::Process(format!(
            "{} is still mounted; try `umount -l {}`",
            m.mountpoint.display(),
            m.mountpoint.display()
        )));
    }
    Ok(())
}
