//! The translators volgen places, bottom to top, and which of them a build has.
//!
//! Each place is a [`Slot`]: a key (`performance.write-behind`, also the prefix of its option
//! keys), the translator types that can fill it (first one the registry knows wins), which
//! graph it is in and whether it is required, a cluster layer, or optional. Optional slots
//! are placed only when their type is known *and* the volume has not switched them off, so
//! volfiles keep working while translators land.

use xlator_api::TypeInfo;
use xlfs_core::volfile::TypeLookup;

/// Which generated graph a slot is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Server,
    Client,
    Both,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Server => "server",
            Side::Client => "client",
            Side::Both => "both",
        }
    }
    fn has(self, other: Side) -> bool {
        self == Side::Both || self == other
    }
}

/// How a slot is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Always present; a build without it cannot generate the volume.
    Required,
    /// Present when the layout needs it (replica, stripe, distribute).
    Cluster,
    /// Present when its type is known and `<key>` is on (`default_on` if unset).
    Optional { default_on: bool },
}

/// One place in a generated graph.
#[derive(Debug)]
pub struct Slot {
    /// `category.name`; option keys are `<key>.<option>`.
    pub key: &'static str,
    /// Candidate types, preferred first.
    pub types: &'static [&'static str],
    pub side: Side,
    pub role: Role,
    /// Options volgen writes itself (from the bricks, ports, auth); `volume set` refuses them
    /// with the reason.
    pub managed: &'static [(&'static str, &'static str)],
}

const BRICK_PATH: &str = "it is the brick directory; give the bricks when creating the volume";
const FROM_BRICKS: &str = "volgen derives it from the bricks and ports";
const FROM_LISTEN: &str =
    "it comes from the volume's listen address (`xlfs volume create --listen-host`)";
const FROM_AUTH: &str = "it comes from the volume's auth allow-list (`auth.allow`)";
const FROM_SECRET: &str =
    "it comes from the volume's secret file (`xlfs volume create` makes one; --secret-file)";
const FROM_ARBITER: &str = "it comes from the volume's layout (`xlfs volume create --replica 3 \
     --arbiter 1`): an arbiter brick stores no data, so it is fixed for the life of the volume";
const FROM_START: &str = "`xlfs volume start` makes every brick serve the volume's client volfile (xlfsd --client-volfile)";

/// Every slot, server stack bottom to top, then client stack bottom to top.
pub static SLOTS: &[Slot] = &[
    Slot {
        key: "storage.posix",
        types: &["storage/posix"],
        side: Side::Server,
        role: Role::Required,
        managed: &[("directory", BRICK_PATH)],
    },
    Slot {
        // Only on the arbiter bricks of `replica 3 arbiter 1` (the last of each set).
        key: "features.arbiter",
        types: &["features/arbiter"],
        side: Side::Server,
        role: Role::Cluster,
        managed: &[],
    },
    Slot {
        key: "features.locks",
        types: &["features/locks"],
        side: Side::Server,
        role: Role::Required,
        managed: &[],
    },
    Slot {
        key: "features.read-only",
        types: &["features/read-only"],
        side: Side::Server,
        role: Role::Optional { default_on: false },
        managed: &[],
    },
    Slot {
        key: "protocol.server",
        types: &["protocol/server"],
        side: Side::Server,
        role: Role::Required,
        managed: &[
            ("listen-host", FROM_LISTEN),
            ("listen-port", FROM_BRICKS),
            ("auth-allow", FROM_AUTH),
            ("secret", FROM_SECRET),
            ("secret-file", FROM_SECRET),
            ("client-volfile", FROM_START),
            ("client-volfile-name", FROM_START),
        ],
    },
    Slot {
        key: "protocol.client",
        types: &["protocol/client"],
        side: Side::Client,
        role: Role::Required,
        managed: &[
            ("remote-host", FROM_BRICKS),
            ("remote-port", FROM_BRICKS),
            ("remote-subvolume", FROM_BRICKS),
            ("secret", FROM_SECRET),
            ("secret-file", FROM_SECRET),
        ],
    },
    Slot {
        key: "cluster.replicate",
        types: &["cluster/replicate", "cluster/afr"],
        side: Side::Client,
        role: Role::Cluster,
        managed: &[("arbiter-count", FROM_ARBITER)],
    },
    Slot {
        key: "cluster.stripe",
        types: &["cluster/stripe"],
        side: Side::Client,
        role: Role::Cluster,
        managed: &[],
    },
    Slot {
        key: "cluster.distribute",
        types: &["cluster/distribute", "cluster/dht"],
        side: Side::Client,
        role: Role::Cluster,
        managed: &[],
    },
    // The client performance stack, in GlusterFS's order (each on top of the previous).
    Slot {
        key: "performance.write-behind",
        types: &["performance/write-behind"],
        side: Side::Client,
        role: Role::Optional { default_on: true },
        managed: &[],
    },
    Slot {
        key: "performance.read-ahead",
        types: &["performance/read-ahead"],
        side: Side::Client,
        role: Role::Optional { default_on: true },
        managed: &[],
    },
    // Off by default, as in GlusterFS since 2019: under FUSE the kernel page cache already
    // holds what it would, and caching every read a second time cost W4 (concurrent
    // whole-file reads) about 18% of its throughput. Useful where no page cache sits above
    // (the NFS host serving many clients re-reading the same data).
    Slot {
        key: "performance.io-cache",
        types: &["performance/io-cache"],
        side: Side::Client,
        role: Role::Optional { default_on: false },
        managed: &[],
    },
    // Off by default for now: upcalls reach other clients a moment after the change, not
    // before the changer's call returns, so with it on a stat on another client may be
    // answered from its cache in that moment (an open always asks the bricks). The
    // two-mount tests are run without it; turn it on for metadata-heavy NFS or FUSE loads.
    Slot {
        key: "performance.md-cache",
        types: &["performance/md-cache"],
        side: Side::Client,
        role: Role::Optional { default_on: false },
        managed: &[],
    },
    Slot {
        key: "debug.trace",
        types: &["debug/trace"],
        side: Side::Client,
        role: Role::Optional { default_on: false },
        managed: &[],
    },
    // On top of both graphs: under protocol/server on a brick, the top of the client graph.
    Slot {
        key: "debug.io-stats",
        types: &["debug/io-stats"],
        side: Side::Both,
        role: Role::Required,
        managed: &[],
    },
];

/// The slot called `key`.
pub fn slot(key: &str) -> Option<&'static Slot> {
    SLOTS.iter().find(|s| s.key == key)
}

/// The slots of one graph, bottom to top (io-stats, in both, comes last in `SLOTS`).
pub fn slots_of(side: Side) -> impl Iterator<Item = &'static Slot> {
    SLOTS.iter().filter(move |s| s.side.has(side))
}

impl Slot {
    /// The first candidate type the lookup knows, with its schema; `Err` explains the first
    /// candidate's failure.
    pub fn resolve(&self, types: &dyn TypeLookup) -> Result<TypeInfo, String> {
        let mut first_err = None;
        for t in self.types {
            match types.type_info(t) {
                Ok(info) => return Ok(info),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| "no candidate types".into()))
    }

    /// The preferred type name, for messages.
    pub fn type_name(&self) -> &'static str {
        self.types.first().copied().unwrap_or_default()
    }

    /// Why volgen refuses `option` of this slot, if it writes it itself.
    pub fn managed_reason(&self, option: &str) -> Option<&'static str> {
        self.managed
            .iter()
            .find(|(k, _)| *k == option)
            .map(|(_, why)| *why)
    }

    pub fn is_optional(&self) -> bool {
        matches!(self.role, Role::Optional { .. })
    }
}
