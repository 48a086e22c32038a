//! What a daemon must not forget across a crash, in `<state>/mgmt/`:
//!
//! ```text
//! <state>/mgmt/node.json      this peer: its id and address, the acceptor's promises, the log
//! <state>/mgmt/secret         the cluster secret (0600; the same file on every peer)
//! <state>/mgmt/daemon.json    the running daemon's address and pid (how `xlfs` finds it)
//! ```
//!
//! `node.json` is replaced whole (written beside, fsynced, renamed, directory fsynced) before
//! the daemon answers a request that changed it: an acceptor's promise survives kill -9.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::Change;
use crate::paxos::{Durable, PeerId};

/// One peer's durable state.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Node {
    /// Format of this file.
    pub format: u32,
    pub id: PeerId,
    /// The address other peers and clients reach this daemon at (`--listen`).
    pub addr: String,
    pub paxos: Durable<Change>,
}

pub const FORMAT: u32 = 1;

/// Where the running daemon can be reached.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct DaemonFile {
    pub addr: String,
    pub pid: u32,
    /// The cluster secret's file (`--secret-file`).
    pub secret_file: PathBuf,
}

/// The files under `<state>/mgmt/`.
#[derive(Clone, Debug)]
pub struct Store {
    pub dir: PathBuf,
}

impl Store {
    pub fn new(state_dir: &Path) -> Store {
        Store {
            dir: state_dir.join("mgmt"),
        }
    }

    pub fn node_file(&self) -> PathBuf {
        self.dir.join("node.json")
    }

    pub fn secret_file(&self) -> PathBuf {
        self.dir.join("secret")
    }

    pub fn daemon_file(&self) -> PathBuf {
        self.dir.join("daemon.json")
    }

    /// The node, if this host has one.
    pub fn load(&self) -> Result<Option<Node>, String> {
        let path = self.node_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let node: Node = serde_json::from_str(&text)
            .map_err(|e| format!("{} is damaged: {e}", path.display()))?;
        if node.format != FORMAT {
            return Err(format!(
                "{} has format {}; this xlfs-mgmtd reads format {FORMAT}",
                path.display(),
                node.format
            ));
        }
        Ok(Some(node))
    }

    /// Writes the node durably (see the module doc).
    pub fn save(&self, node: &Node) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(node).map_err(|e| e.to_string())?;
        write_durably(&self.node_file(), &text, 0o600)
    }

    /// The secret, created (32 random bytes, hex) if `create` and it is missing.
    pub fn secret(&self, path: &Path, create: bool) -> Result<Vec<u8>, String> {
        match std::fs::read_to_string(path) {
            Ok(t) if t.trim().len() >= 32 => Ok(t.trim().as_bytes().to_vec()),
            Ok(_) => Err(format!(
                "{} holds no secret (at least 32 characters)",
                path.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let mut b = [0u8; 32];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b)
                    .map_err(|_| "no randomness".to_owned())?;
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                std::fs::create_dir_all(&self.dir)
                    .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
                write_durably(path, format!("{hex}\n").as_bytes(), 0o600)?;
                Ok(hex.into_bytes())
            }
            Err(e) => Err(format!(
                "cannot read the cluster secret {}: {e}",
                path.display()
            )),
        }
    }
}

/// Writes `path` whole or not at all, and makes it survive a crash.
pub fn write_durably(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = path.with_extension("tmp");
    let err = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err)?;
    Ok(())
}
