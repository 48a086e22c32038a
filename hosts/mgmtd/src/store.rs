//! What a daemon must not forget across a crash, in `<state>/mgmt/`:
//!
//! ```text
//! <state>/mgmt/node.json      this peer: its id and address, Raft's hard state, the log
//! <state>/mgmt/secret         the cluster secret (0600; the same file on every peer)
//! <state>/mgmt/daemon.json    the running daemon's address and pid (how `xlfs` finds it)
//! ```
//!
//! `node.json` is replaced whole (written beside, fsynced, renamed, directory fsynced) before
//! the daemon sends anything that depends on it: a vote or an acknowledged entry survives
//! kill -9.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::{Change, Cluster};
use crate::replog::{Durable, Entry, Member, PeerId};

/// One peer's durable state.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Node {
    /// Format of this file.
    pub format: u32,
    pub id: PeerId,
    /// The address other peers and clients reach this daemon at (`--listen`).
    pub addr: String,
    pub raft: Durable<Change>,
}

/// Format 2: the log kept by Raft. Format 1 (a Paxos log of chosen entries, xlfs 0.2 before
/// Raft) is read and converted.
pub const FORMAT: u32 = 2;

/// A format-1 node file.
#[derive(Deserialize)]
struct NodeV1 {
    id: PeerId,
    addr: String,
    paxos: PaxosV1,
}

#[derive(Deserialize)]
struct PaxosV1 {
    chosen: Vec<Entry<Change>>,
}

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
        let damaged = |e: serde_json::Error| format!("{} is damaged: {e}", path.display());
        let v: serde_json::Value = serde_json::from_str(&text).map_err(damaged)?;
        if v["format"].as_u64() == Some(1) {
            // Its chosen entries become the first entries of the Raft log, committed at term 1:
            // the peers' Paxos logs were prefixes of one log, so their Raft logs agree too.
            let old: NodeV1 = serde_json::from_value(v).map_err(damaged)?;
            let c = Cluster::from_log(&old.paxos.chosen);
            let node = Node {
                format: FORMAT,
                id: old.id,
                addr: old.addr,
                raft: Durable::seeded(c.id, &old.paxos.chosen, |v| match v {
                    Change::Found { peer, .. } | Change::AddPeer { peer, .. } => {
                        Some(Member::Add(*peer))
                    }
                    Change::RemovePeer { peer } => Some(Member::Remove(*peer)),
                    _ => None,
                }),
            };
            self.save(&node)?;
            return Ok(Some(node));
        }
        let node: Node = serde_json::from_value(v).map_err(damaged)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::VolumeFiles;
    use crate::replog::{Replica, quiet_logger};

    #[test]
    fn a_format_1_node_is_converted_to_a_raft_log_with_the_same_entries_and_voters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        let chosen = vec![
            Entry {
                id: 11,
                value: Change::Found {
                    cluster: 5,
                    peer: 1,
                    addr: "10.0.0.1:24017".into(),
                },
            },
            Entry {
                id: 12,
                value: Change::AddPeer {
                    peer: 2,
                    addr: "10.0.0.2:24017".into(),
                },
            },
            Entry {
                id: 13,
                value: Change::PutVolume(VolumeFiles {
                    name: "gv0".into(),
                    spec: "()".into(),
                    secret: None,
                    started: false,
                    base: None,
                }),
            },
        ];
        let v1 = serde_json::json!({
            "format": 1,
            "id": 2,
            "addr": "10.0.0.2:24017",
            "paxos": { "chosen": chosen, "slots": {}, "max_round": 4 },
        });
        std::fs::create_dir_all(&store.dir).expect("mkdir");
        std::fs::write(store.node_file(), v1.to_string()).expect("write");
        let node = store.load().expect("load").expect("a node");
        assert_eq!(node.format, FORMAT);
        assert_eq!(node.raft.cluster, 5);
        // Written back in the new format.
        let again = store.load().expect("load").expect("a node");
        assert_eq!(again.raft, node.raft);
        let mut r = Replica::open(node.id, node.raft, &quiet_logger()).expect("open");
        let out = r.advance();
        assert_eq!(out.applied, chosen);
        assert_eq!(r.durable().voters, vec![1, 2]);
    }
}
