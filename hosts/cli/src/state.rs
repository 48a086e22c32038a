//! The state directory: one directory per volume with its description, generated volfiles,
//! what runs (pids, ports, mounts) and logs.
//!
//! ```text
//! <state>/volumes/<name>/volume.ron      the VolumeSpec
//! <state>/volumes/<name>/client.vol      client volfile (RON)
//! <state>/volumes/<name>/brick-<i>.vol   server volfile of brick id i
//! <state>/volumes/<name>/run.json        running bricks and mounts started by xlfs
//! <state>/volumes/<name>/rebalance.json  progress of the last rebalance / remove-brick run
//! <state>/volumes/<name>/secret          the volume's secret (0600): the volfiles name it
//! <state>/volumes/<name>/log/            brick-<i>.log, mount-<n>.log, rebalance.log
//! <state>/volumes/<name>/ctl/            control sockets: brick-<i>.sock, mount-<hash>.sock
//! ```
//!
//! `i` is the brick's id ([`VolumeSpec::brick_id`]): its position in the description until
//! bricks are removed, then unchanged for the bricks that stay.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xlfs_volgen::{Generated, VolumeSpec};

use crate::error::{CliError, Result};

/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/xlfs";
/// Environment variable naming the state directory.
pub const STATE_ENV: &str = "XLFS_STATE_DIR";

/// A state directory.
#[derive(Clone, Debug)]
pub struct State {
    pub root: PathBuf,
}

/// One volume's directory.
#[derive(Clone, Debug)]
pub struct VolumeDir {
    pub dir: PathBuf,
}

/// What xlfs started for a volume.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    #[serde(default)]
    pub bricks: Vec<BrickRun>,
    #[serde(default)]
    pub mounts: Vec<MountRun>,
    /// The self-heal daemon `volume start` runs for a replicated volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shd: Option<ShdRun>,
}

/// A self-heal daemon: `xlfs volume heal VOL --daemon` ([`SHD_MARK`] in its command line).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShdRun {
    pub pid: u32,
}

/// What tells a self-heal daemon's command line from another process's.
pub const SHD_MARK: &str = "--daemon";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BrickRun {
    pub index: usize,
    pub pid: u32,
    pub port: u16,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MountRun {
    pub mountpoint: PathBuf,
    pub pid: u32,
}

impl State {
    pub fn new(root: PathBuf) -> State {
        State { root }
    }

    fn volumes(&self) -> PathBuf {
        self.root.join("volumes")
    }

    pub fn volume_dir(&self, name: &str) -> VolumeDir {
        VolumeDir {
            dir: self.volumes().join(name),
        }
    }

    /// Names of the volumes, sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let dir = self.volumes();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(CliError::Io {
                    path: dir,
                    source: e,
                });
            }
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("volume.ron").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// The volume `name` and its description.
    pub fn load(&self, name: &str) -> Result<(VolumeDir, VolumeSpec)> {
        let vd = self.volume_dir(name);
        if !vd.spec_path().is_file() {
            return Err(CliError::NoVolume {
                name: name.into(),
                state_dir: self.root.clone(),
            });
        }
        let spec = VolumeSpec::load(&vd.spec_path())?;
        Ok((vd, spec))
    }

    /// Every other volume's description (for port and brick clashes).
    pub fn others(&self, name: &str) -> Result<Vec<VolumeSpec>> {
        let mut out = Vec::new();
        for n in self.list()? {
            if n != name {
                out.push(self.load(&n)?.1);
            }
        }
        Ok(out)
    }
}

impl VolumeDir {
    pub fn spec_path(&self) -> PathBuf {
        self.dir.join("volume.ron")
    }
    pub fn client_volfile(&self) -> PathBuf {
        self.dir.join("client.vol")
    }
    pub fn brick_volfile(&self, index: usize) -> PathBuf {
        self.dir.join(format!("brick-{index}.vol"))
    }
    fn run_path(&self) -> PathBuf {
        self.dir.join("run.json")
    }
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }
    /// The status file xlfs-rebalance writes (rebalance and remove-brick runs).
    pub fn rebalance_status(&self) -> PathBuf {
        self.dir.join("rebalance.json")
    }
    /// The log of xlfs-rebalance.
    pub fn rebalance_log(&self) -> PathBuf {
        self.log_dir().join("rebalance.log")
    }
    /// The volume's secret (first line; mode 0600), named by its volfiles' `secret-file` and
    /// given to xlfs-mount and xlfs-rebalance as `--secret-file`.
    pub fn secret_file(&self) -> PathBuf {
        self.dir.join("secret")
    }
    /// Where the bricks' and mounts' control sockets are (statedump, reload).
    pub fn control_dir(&self) -> PathBuf {
        self.dir.join("ctl")
    }
    /// The control socket of brick `index`.
    pub fn brick_socket(&self, index: usize) -> PathBuf {
        self.control_dir().join(format!("brick-{index}.sock"))
    }
    /// The control socket of the mount on `mountpoint` (named by a hash of the path: socket
    /// paths are limited to 107 bytes).
    pub fn mount_socket(&self, mountpoint: &Path) -> PathBuf {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in mountpoint.as_os_str().as_encoded_bytes() {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
        }
        self.control_dir().join(format!("mount-{h:016x}.sock"))
    }

    /// Writes the description and every volfile (each file replaced atomically; files hold
    /// the secret, so only the owner may read them).
    pub fn write(&self, spec: &VolumeSpec, generated: &Generated) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(CliError::io(&self.dir))?;
        std::fs::create_dir_all(self.log_dir()).map_err(CliError::io(self.log_dir()))?;
        write_atomic(&self.spec_path(), &spec.to_ron())?;
        write_atomic(&self.client_volfile(), &generated.client.to_ron())?;
        for s in &generated.servers {
            write_atomic(&self.brick_volfile(s.index), &s.volfile.to_ron())?;
        }
        // Volfiles of bricks the volume no longer has.
        let ids: Vec<usize> = generated.servers.iter().map(|s| s.index).collect();
        for id in self.brick_volfile_ids() {
            if !ids.contains(&id) {
                let _ = std::fs::remove_file(self.brick_volfile(id));
            }
        }
        Ok(())
    }

    /// The ids of the `brick-<i>.vol` files in the directory.
    fn brick_volfile_ids(&self) -> Vec<usize> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        rd.filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_prefix("brick-")?
                    .strip_suffix(".vol")?
                    .parse()
                    .ok()
            })
            .collect()
    }

    pub fn load_run(&self) -> Result<Run> {
        let path = self.run_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| CliError::Other(format!("{}: {e}; remove it", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Run::default()),
            Err(e) => Err(CliError::Io { path, source: e }),
        }
    }

    /// Saves `run`, or removes the file when nothing runs.
    pub fn save_run(&self, run: &Run) -> Result<()> {
        let path = self.run_path();
        if run.bricks.is_empty() && run.mounts.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(CliError::Io { path, source: e })
                }
                _ => Ok(()),
            };
        }
        let text = serde_json::to_string_pretty(run).map_err(|e| CliError::Other(e.to_string()))?;
        write_atomic(&path, &text)
    }
}

/// Writes `text` to `path` through a temporary file and a rename, mode 0600.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(CliError::io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(CliError::io(&tmp))?;
    f.sync_all().map_err(CliError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(CliError::io(path))
}
