//! Requests to a daemon and its answers: from other peers (the log) and from the `xlfs`
//! command (peer and volume operations).

use serde::{Deserialize, Serialize};

use crate::cluster::Change;
use crate::paxos::{self, Entry, PeerId};

#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Request {
    /// Phase 1 or 2 of a slot of cluster `cluster`'s log.
    Paxos {
        cluster: u64,
        req: paxos::Request<Change>,
    },
    /// Slot `slot` of cluster `cluster`'s log is decided.
    Learn {
        cluster: u64,
        slot: u64,
        entry: Entry<Change>,
    },
    /// The chosen entries from slot `from` on.
    Fetch { from: u64 },
    /// Who the daemon is and how far its log goes.
    Status,
    /// Take this cluster's log (the daemon was probed); refused by a daemon already in a
    /// cluster with other peers or with volumes.
    Join { log: Vec<Entry<Change>> },
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
    Paxos(paxos::Reply<Change>),
    Done,
    Entries(Vec<Entry<Change>>),
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
