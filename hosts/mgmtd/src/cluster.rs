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
    /// The whole configuration: what a compaction of the log squashes the changes applied
    /// before it into ([`squash`]).
    Restore(Box<Cluster>),
}

/// One entry that builds what `log` builds (the log's compaction).
pub fn squash(log: &[Entry<Change>]) -> Entry<Change> {
    Entry {
        id: 0,
        value: Change::Restore(Box::new(Cluster::from_log(log))),
    }
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
    /// In a proposal: the volume's [`Cluster::versions`] entry it was made on. Applied only if
    /// the volume is still at that version, so a change that waited (a proposal delayed on
    /// its way to the leader) never undoes one made after it. `None` (entries of logs kept
    /// before this existed): applied whatever came before. Never kept in [`Cluster::volumes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<u64>,
}

/// The configuration after some prefix of the log.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    pub id: u64,
    pub peers: BTreeMap<PeerId, String>,
    pub volumes: BTreeMap<String, VolumeFiles>,
    /// How many changes of each volume were applied since it was created.
    pub versions: BTreeMap<String, u64>,
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
                let version = self.version(&v.name);
                if v.base.is_some_and(|b| b != version) {
                    // Made on a description another change has replaced since: stale.
                    return;
                }
                let mut v = v.clone();
                v.base = None;
                self.versions.insert(v.name.clone(), version + 1);
                self.volumes.insert(v.name.clone(), v);
            }
            Change::DeleteVolume { name } => {
                self.volumes.remove(name);
                self.versions.remove(name);
            }
            Change::Restore(c) => *self = (**c).clone(),
        }
    }

    /// The version of volume `name` (0 when it does not exist).
    pub fn version(&self, name: &str) -> u64 {
        self.versions.get(name).copied().unwrap_or(0)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn put(spec: &str, base: Option<u64>) -> Change {
        Change::PutVolume(VolumeFiles {
            name: "gv0".into(),
            spec: spec.into(),
            secret: None,
            started: false,
            base,
        })
    }

    #[test]
    fn a_change_made_on_a_replaced_description_is_not_applied() {
        let mut c = Cluster::default();
        c.apply(&put("created", Some(0)));
        c.apply(&put("grown", Some(1)));
        // Made on version 1, arriving after version 2: it would undo "grown".
        c.apply(&put("set on the old one", Some(1)));
        assert_eq!(c.volumes["gv0"].spec, "grown");
        assert_eq!(c.version("gv0"), 2);
        assert_eq!(c.volumes["gv0"].base, None);
        // Entries of older logs carry no base: applied in order.
        c.apply(&put("old log", None));
        assert_eq!(c.volumes["gv0"].spec, "old log");
    }

    #[test]
    fn a_squashed_log_builds_the_same_configuration_and_versions() {
        let e = |id, value| Entry { id, value };
        let log = vec![
            e(
                1,
                Change::Found {
                    cluster: 7,
                    peer: 1,
                    addr: "a:1".into(),
                },
            ),
            e(
                2,
                Change::AddPeer {
                    peer: 2,
                    addr: "b:1".into(),
                },
            ),
            e(3, put("created", Some(0))),
            e(4, put("set", Some(1))),
            e(5, Change::RemovePeer { peer: 2 }),
        ];
        let squashed = squash(&log);
        assert_eq!(squashed.id, 0);
        let whole = Cluster::from_log(&log);
        assert_eq!(Cluster::from_log(std::slice::from_ref(&squashed)), whole);
        // Changes after the squash apply as they would have: a change made on version 2
        // lands, one made on version 1 does not.
        let mut a = whole.clone();
        let mut b = Cluster::from_log(std::slice::from_ref(&squashed));
        for c in [put("late", Some(1)), put("next", Some(2))] {
            a.apply(&c);
            b.apply(&c);
        }
        assert_eq!(a, b);
        assert_eq!(b.volumes["gv0"].spec, "next");
        assert_eq!(b.version("gv0"), 3);
        // And it survives the log's JSON.
        let json = serde_json::to_string(&squashed).expect("json");
        let back: Entry<Change> = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, squashed);
    }
}
