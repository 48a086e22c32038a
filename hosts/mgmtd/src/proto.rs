//! Requests to a daemon and its answers: from other peers (the log) and from the `xlfs`
//! command (peer and volume operations).

use serde::{Deserialize, Serialize};

use crate::replog::PeerId;

#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Request {
    /// Raft messages of cluster `cluster`'s log from peer `from`, reached at `from_addr`
    /// (each a protobuf-encoded Raft message, in hex).
    Raft {
        cluster: u64,
        from: PeerId,
        from_addr: String,
        msgs: Vec<String>,
    },
    /// Who the daemon is and how far its log goes.
    Status,
    /// Empty the log and wait for cluster `cluster`'s leader (the daemon was probed); refused
    /// by a daemon already in a cluster with other peers or with volumes.
    Join { cluster: u64 },
    /// The daemon was detached: found a cluster of its own again.
    Leave { cluster: u64 },
    /// `xlfs peer probe HOST`.
    Probe { addr: String },
    /// `xlfs peer detach HOST`.
    Detach { addr: String },
    /// `xlfs peer status` / `xlfs pool list`.
    Peers,
    /// `xlfs volume ARGS...`, run for the whole cluster.
    Volume { args: Vec<String> },
    /// `xlfs volume status NAME --json` of this peer's host alone (its bricks' pids, its
    /// self-heal daemon, its bricks' heal indexes), for a status of the whole cluster.
    LocalStatus { name: String },
    /// `xlfs volume heal NAME info --json` of this peer's host alone (its bricks' heal
    /// indexes with their counters), merged by the asking peer into one view of the volume.
    LocalHealInfo { name: String },
}

/// A daemon's view of itself.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Status {
    pub id: PeerId,
    pub addr: String,
    pub cluster: u64,
    pub chosen: u64,
    pub peers: usize,
    pub volumes: usize,
    pub version: String,
    /// The leader this peer knows of.
    #[serde(default)]
    pub leader: Option<PeerId>,
    #[serde(default)]
    pub term: u64,
}

/// One peer as `peer status` shows it.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct PeerInfo {
    pub id: PeerId,
    pub addr: String,
    pub me: bool,
    pub connected: bool,
    /// How far its log goes, when connected.
    pub chosen: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Response {
    Done,
    Status(Status),
    Peers(Vec<PeerInfo>),
    /// What a command printed, and its exit code.
    Output {
        code: u8,
        stdout: String,
        stderr: String,
    },
    Error(String),
}
