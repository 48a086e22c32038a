//! The cluster's configuration, as the log builds it: its peers and its volumes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::replog::{Entry, PeerId};

/// One entry of the log.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub enum Change {
    /// Slot 0 of every cluster: its id and first peer.
    Found {
        cluster: u64,
        peer: PeerId,
        addr: String,
    },
    AddPeer {
        peer: PeerId,
        addr: String,
    },
    RemovePeer {
        peer: PeerId,
    },
    /// A volume's whole description (new or changed), and whether it runs.
    PutVolume(VolumeFiles),
    DeleteVolume {
        name: String,
    },
}

/// What a peer writes into `<state>/volumes/NAME/`.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct VolumeFiles {
    pub name: String,
    /// `volume.ron`: the volume's `VolumeSpec` (its secret file's path is each peer's own).
    pub spec: String,
    /// The volume's secret (the first line of its `secret` file), if it has one.
    pub secret: Option<String>,
    pub started: bool,
}

/// The configuration after some prefix of the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    pub id: u64,
    pub peers: BTreeMap<PeerId, String>,
    pub volumes: BTreeMap<String, VolumeFiles>,
}

impl Cluster {
    /// The configuration `log` builds.
    pub fn from_log(log: &[Entry<Change>]) -> Cluster {
        let mut c = Cluster::default();
        for e in log {
            c.apply(&e.value);
        }
        c
    }

    pub fn apply(&mut self, change: &Change) {
        match change {
            Change::Found {
                cluster,
                peer,
                addr,
            } => {
                self.id = *cluster;
                self.peers.insert(*peer, addr.clone());
            }
            Change::AddPeer { peer, addr } => {
                self.peers.insert(*peer, addr.clone());
            }
            Change::RemovePeer { peer } => {
                self.peers.remove(peer);
            }
            Change::PutVolume(v) => {
                self.volumes.insert(v.name.clone(), v.clone());
            }
            Change::DeleteVolume { name } => {
                self.volumes.remove(name);
            }
        }
    }

    pub fn members(&self) -> Vec<PeerId> {
        self.peers.keys().copied().collect()
    }

    /// The peer reached at `addr` (as written, or with the default port).
    pub fn peer_at(&self, addr: &str) -> Option<PeerId> {
        let want = crate::rpc::with_port(addr);
        self.peers
            .iter()
            .find(|(_, a)| crate::rpc::with_port(a) == want)
            .map(|(p, _)| *p)
    }
}

/// The host part of a daemon address (`10.0.0.1:24017` -> `10.0.0.1`, `[::1]:9` -> `::1`).
pub fn host_of(addr: &str) -> String {
    let a = crate::rpc::with_port(addr);
    let host = a.rsplit_once(':').map_or(a.as_str(), |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}
