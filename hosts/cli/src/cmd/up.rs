//! `xlfs up DIR [MOUNTPOINT]`: the one-command local volume. Creates (or reuses) a
//! single-brick volume with its brick in DIR/brick, starts it, mounts it (DIR/mnt by
//! default), prints where, and on Ctrl-C or SIGTERM unmounts and stops everything.

use std::path::{Path, PathBuf};
use std::time::Duration;

use xlfs_volgen::{Brick, Catalog, VolumeSpec};

use super::{Ctx, XLFS_MOUNT, XLFSD};
use crate::error::{CliError, Result, code};
use crate::procs;
use crate::state::State;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
The volume's state (description, volfiles, logs) goes to DIR/state unless --state-dir or
XLFS_STATE_DIR says otherwise. Running it again on the same DIR reuses the volume and its data.

Examples:
  xlfs up /srv/demo                 brick /srv/demo/brick, mounted on /srv/demo/mnt
  xlfs up /srv/demo /mnt/demo --name demo
  xlfs up /srv/demo --set performance.io-cache=on -- --attr-timeout 5s")]
pub struct Args {
    /// Data directory (created if missing).
    pub dir: PathBuf,
    /// Where to mount (default DIR/mnt, created if missing).
    pub mountpoint: Option<PathBuf>,
    /// Volume name (default: from DIR's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Brick port (default: the first free from 49152).
    #[arg(long)]
    pub port: Option<u16>,
    /// Set a volume option first, as `xlfs volume set` does (repeatable; kept for later runs).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub set: Vec<(String, String)>,
    /// Extra options for xlfs-mount (after `--`).
    #[arg(last = true, value_name = "XLFS-MOUNT OPTIONS")]
    pub extra: Vec<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let dir = std::path::absolute(&a.dir).map_err(CliError::io(&a.dir))?;
    std::fs::create_dir_all(&dir).map_err(CliError::io(&dir))?;
    let state = match &ctx.state_dir {
        Some(_) => ctx.state(),
        None => State::new(dir.join("state")),
    };
    let name = match &a.name {
        Some(n) => n.clone(),
        None => name_from_dir(&dir),
    };
    let mp = a.mountpoint.clone().unwrap_or_else(|| dir.join("mnt"));
    std::fs::create_dir_all(&mp).map_err(CliError::io(&mp))?;
    // Before anything starts: a Ctrl-C during start-up is kept and stops what was started,
    // instead of killing this process and leaving bricks and a mount behind.
    let mut signals = Signals::install()?;

    let (vd, mut spec) = match state.load(&name) {
        Ok(found) => found,
        Err(CliError::NoVolume { .. }) => {
            let brick = dir.join("brick");
            let brick = Brick::parse(&brick.to_string_lossy())?;
            let mut spec = VolumeSpec::new(&name, vec![brick]);
            // A new volume gets a secret; a rerun finds the volume and keeps its secret.
            spec.transport.base_port = match a.port {
                Some(p) => p,
                None => super::create::pick_base_port(&spec, &state.others(&name)?),
            };
            super::create::create(&state, &mut spec, super::create::NewSecret::Generate)?;
            (state.volume_dir(&name), spec)
        }
        Err(e) => return Err(e),
    };
    if !a.set.is_empty() {
        let catalog = Catalog::new(&super::registry());
        for (key, value) in &a.set {
            catalog.set(&mut spec, key, value)?;
        }
        super::generate_and_write(&vd, &spec)?;
    }
    let mut run = vd.load_run()?;
    super::start::start_bricks(&vd, &spec, &mut run)?;
    let mp = match super::mount::check_mountpoint(&mp) {
        Ok(mp) => mp,
        Err(e) => {
            super::stop::stop_all(&vd, &spec)?;
            return Err(e);
        }
    };
    let mount = match super::mount::mount_background(&vd, &spec, &mut run, &mp, &a.extra) {
        Ok(m) => m,
        Err(e) => {
            super::stop::stop_all(&vd, &spec)?;
            return Err(e);
        }
    };
    println!("xlfs: volume {} is up", spec.name);
    println!("  mounted on  {}", mp.display());
    println!(
        "  brick       {} (port {})",
        spec.bricks[0],
        spec.brick_port(0)
    );
    println!("  state       {}", vd.dir.display());
    println!("Press Ctrl-C to unmount and stop.");

    let bricks: Vec<u32> = run.bricks.iter().map(|b| b.pid).collect();
    let why = signals.wait(mount.pid, &bricks);
    let report = super::stop::stop_all(&vd, &spec)?;
    for line in report {
        println!("{line}");
    }
    match why {
        Wake::Signal => {
            println!("xlfs: volume {} stopped", spec.name);
            Ok(code::OK)
        }
        Wake::Died(what) => Err(CliError::Process(format!(
            "{what} exited unexpectedly; everything was stopped (logs in {})",
            vd.log_dir().display()
        ))),
    }
}

/// `KEY=VALUE` of `--set`.
fn parse_setting(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!(
            "{s:?} is not KEY=VALUE (e.g. performance.io-cache=on; `xlfs volume options` lists the keys)"
        )),
    }
}

/// A volume name from the data directory's name (`/srv/My Data` -> `My-Data`).
fn name_from_dir(dir: &Path) -> String {
    let base = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned
        .trim_matches(|c: char| c == '-' || c == '_')
        .to_owned();
    if cleaned.is_empty() || xlfs_volgen::check_name(&cleaned).is_err() {
        "xlfs".into()
    } else {
        cleaned.chars().take(xlfs_volgen::MAX_NAME_LEN).collect()
    }
}

enum Wake {
    Signal,
    Died(String),
}

/// SIGINT and SIGTERM, caught from `install` on.
struct Signals {
    rt: tokio::runtime::Runtime,
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::Other(format!("cannot start the signal handler: {e}")))?;
        let _in_rt = rt.enter();
        let int = signal(SignalKind::interrupt())
            .map_err(|e| CliError::Other(format!("cannot handle SIGINT: {e}")))?;
        let term = signal(SignalKind::terminate())
            .map_err(|e| CliError::Other(format!("cannot handle SIGTERM: {e}")))?;
        drop(_in_rt);
        Ok(Signals { rt, int, term })
    }

    /// Waits for SIGINT/SIGTERM (also one that came during start-up), or for the mount or a
    /// brick to die.
    fn wait(&mut self, mount_pid: u32, bricks: &[u32]) -> Wake {
        let (int, term) = (&mut self.int, &mut self.term);
        self.rt.block_on(async {
            let watch = async {
                loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if !procs::alive(mount_pid, XLFS_MOUNT) {
                        return Wake::Died(format!("the mount (xlfs-mount pid {mount_pid})"));
                    }
                    if let Some(pid) = bricks.iter().find(|p| !procs::alive(**p, XLFSD)) {
                        return Wake::Died(format!("the brick (xlfsd pid {pid})"));
                    }
                }
            };
            tokio::select! {
                _ = int.recv() => Wake::Signal,
                _ = term.recv() => Wake::Signal,
                w = watch => w,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_dirs() {
        assert_eq!(name_from_dir(Path::new("/srv/demo")), "demo");
        assert_eq!(name_from_dir(Path::new("/srv/My Data")), "My-Data");
        assert_eq!(name_from_dir(Path::new("/srv/.hidden")), "hidden");
        assert_eq!(name_from_dir(Path::new("/")), "xlfs");
        assert_eq!(name_from_dir(Path::new("/srv/all")), "xlfs");
    }
}
