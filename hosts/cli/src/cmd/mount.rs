//! `xlfs mount NAME MOUNTPOINT`: runs `xlfs-mount` on the volume's client volfile, in the
//! background by default, and waits until the mount is there.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xlfs_volgen::VolumeSpec;

use super::{Ctx, XLFS_MOUNT};
use crate::error::{CliError, Result};
use crate::procs;
use crate::sibling;
use crate::state::{MountRun, Run, VolumeDir};

/// How long the mount may take to appear.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs mount gv0 /mnt/gv0
  xlfs mount gv0 /mnt/gv0 -- --writeback-cache --attr-timeout 2s   (options for xlfs-mount)
  xlfs mount gv0 /mnt/gv0 --foreground")]
pub struct Args {
    pub name: String,
    pub mountpoint: PathBuf,
    /// Run xlfs-mount in the foreground until Ctrl-C (it unmounts then).
    #[arg(long, short = 'f')]
    pub foreground: bool,
    /// Extra options for xlfs-mount (after `--`).
    #[arg(last = true, value_name = "XLFS-MOUNT OPTIONS")]
    pub extra: Vec<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let mut run = vd.load_run()?;
    let mp = check_mountpoint(&a.mountpoint)?;
    if !super::started(&spec, &run) && spec.bricks.iter().all(|b| b.is_local()) {
        return Err(CliError::State(format!(
            "volume {} is not started; run `xlfs volume start {}` first",
            spec.name, spec.name
        )));
    }
    if a.foreground {
        let prog = sibling::find(XLFS_MOUNT)?;
        let status = std::process::Command::new(&prog)
            .args(mount_args(&vd, &spec, &mp, &a.extra))
            .status()
            .map_err(|e| CliError::Process(format!("cannot run {}: {e}", prog.display())))?;
        return Ok(status
            .code()
            .map_or(crate::error::code::PROCESS, |c| c as u8));
    }
    let m = mount_background(&vd, &spec, &mut run, &mp, &a.extra)?;
    println!("mounted {} on {} (pid {})", spec.name, mp.display(), m.pid);
    println!("unmount with: xlfs umount {}", mp.display());
    Ok(0)
}

/// The mount point, absolute; it must be an existing directory that is not mounted on.
pub fn check_mountpoint(mp: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(mp).map_err(CliError::io(mp))?;
    if !abs.is_dir() {
        return Err(CliError::Rejected(format!(
            "mount point {} is not a directory; create it first (mkdir -p)",
            abs.display()
        )));
    }
    if procs::is_mounted(&abs) {
        return Err(CliError::State(format!(
            "{} is already a mount point; unmount it first (xlfs umount)",
            abs.display()
        )));
    }
    Ok(abs.canonicalize().unwrap_or(abs))
}

fn mount_args(vd: &VolumeDir, spec: &VolumeSpec, mp: &Path, extra: &[String]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--volfile".into(),
        vd.client_volfile().into(),
        "--fsname".into(),
        format!("xlfs:{}", spec.name).into(),
        "--control-socket".into(),
        vd.mount_socket(mp).into(),
    ];
    // No --secret-file: the client volfile names the volume's secret file itself
    // (`secret-file`; a volume made with an inline secret carries it there).
    args.extend(extra.iter().map(OsString::from));
    args.push(mp.into());
    args
}

/// Starts xlfs-mount in the background, waits for the mount, records it in `run`.
pub fn mount_background(
    vd: &VolumeDir,
    spec: &VolumeSpec,
    run: &mut Run,
    mp: &Path,
    extra: &[String],
) -> Result<MountRun> {
    let prog = sibling::find(XLFS_MOUNT)?;
    std::fs::create_dir_all(vd.log_dir()).map_err(CliError::io(vd.log_dir()))?;
    let n = (0..)
        .find(|n| !vd.log_dir().join(format!("mount-{n}.log")).exists())
        .unwrap_or(0);
    let log = vd.log_dir().join(format!("mount-{n}.log"));
    let mut child = procs::spawn_detached(&prog, &mount_args(vd, spec, mp, extra), &log)?;
    let deadline = Instant::now() + MOUNT_TIMEOUT;
    loop {
        if procs::is_mounted(mp) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(CliError::Process(format!(
                "xlfs-mount exited ({status}) before mounting {}:\n{}",
                mp.display(),
                procs::log_tail(&log, 8)
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CliError::Process(format!(
                "{} was not mounted within {}s:\n{}",
                mp.display(),
                MOUNT_TIMEOUT.as_secs(),
                procs::log_tail(&log, 8)
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let m = MountRun {
        mountpoint: mp.to_path_buf(),
        pid: child.id(),
    };
    run.mounts.push(m.clone());
    vd.save_run(run)?;
    Ok(m)
}
