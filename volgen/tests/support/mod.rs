//! Translator types for tests: the real built-in types (the translator crates linked as
//! dev-dependencies register themselves), plus made-up schemas for the translators that do
//! not exist yet (cluster and performance). Real types always win over fakes.
#![allow(dead_code)]

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{OptionSpec, TypeInfo};
use xlfs_core::registry::Registry;
use xlfs_core::volfile::TypeLookup;
use xlfs_volgen::{Brick, VolumeSpec};

// Force the linker to keep the translator rlibs, whose `inventory` entries register the
// built-in types.
use xlfs_io_stats as _;
use xlfs_locks as _;
use xlfs_posix as _;
use xlfs_protocol as _;
use xlfs_read_only as _;
use xlfs_trace as _;

/// Types that exist nowhere yet, by name.
pub const CLUSTER: [&str; 3] = ["cluster/replicate", "cluster/stripe", "cluster/distribute"];
pub const PERFORMANCE: [&str; 4] = [
    "performance/write-behind",
    "performance/read-ahead",
    "performance/io-cache",
    "performance/md-cache",
];

/// A lookup over some real types and some fakes.
pub struct Types {
    real: Option<Registry>,
    /// Real types this lookup pretends not to have.
    hidden: Vec<String>,
    fakes: Vec<TypeInfo>,
}

impl Types {
    /// Only the real built-in types (no plugin search path, so the result does not depend on
    /// what else is built in target/).
    pub fn real() -> Types {
        Types {
            real: Some(Registry::with_search_path(vec![], true)),
            hidden: vec![],
            fakes: vec![],
        }
    }

    /// The real types plus fakes for `names`.
    pub fn real_plus(names: &[&str]) -> Types {
        let mut t = Types::real();
        t.fakes.extend(names.iter().map(|n| fake(n)));
        t
    }

    /// Real types plus every fake: what a full build will have.
    pub fn everything() -> Types {
        let names: Vec<&str> = CLUSTER.iter().chain(PERFORMANCE.iter()).copied().collect();
        Types::real_plus(&names)
    }

    /// Without the real type `name` (as if the build lacked it).
    pub fn without(mut self, name: &str) -> Types {
        self.hidden.push(name.into());
        self
    }
}

impl TypeLookup for Types {
    fn type_info(&self, type_name: &str) -> Result<TypeInfo, String> {
        if self.hidden.iter().any(|h| h == type_name) {
            return Err(format!(
                "unknown translator type {type_name:?}; searched: (test)"
            ));
        }
        if let Some(r) = &self.real
            && let Ok(info) = r.type_info(type_name)
        {
            return Ok(info);
        }
        self.fakes
            .iter()
            .find(|f| f.name.as_str() == type_name)
            .cloned()
            .ok_or_else(|| format!("unknown translator type {type_name:?}; searched: (test)"))
    }

    fn known_types(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .real
            .as_ref()
            .map(|r| r.known_types())
            .unwrap_or_default();
        out.extend(self.fakes.iter().map(|f| f.name.to_string()));
        out.retain(|t| !self.hidden.contains(t));
        out
    }
}

fn info(name: &str, doc: &str, options: Vec<OptionSpec>, min: u32, max: u32) -> TypeInfo {
    // Start from a real type so fields added to TypeInfo later keep their defaults.
    let mut t = Registry::with_search_path(vec![], true)
        .type_info("debug/io-stats")
        .expect("debug/io-stats is built in");
    t.name = RString::from(name);
    t.doc = RString::from(doc);
    t.options = options.into_iter().collect::<RVec<_>>();
    t.min_children = min;
    t.max_children = max;
    t
}

/// A made-up schema shaped like the GlusterFS translator of that name.
pub fn fake(name: &str) -> TypeInfo {
    let s = OptionSpec::size;
    let d = OptionSpec::duration;
    match name {
        "cluster/replicate" => info(
            name,
            "Replication (test schema).",
            vec![
                OptionSpec::enumeration("quorum-type", "auto", &["none", "auto", "fixed"])
                    .reconfigurable()
                    .doc("Writes need a quorum of replicas."),
                OptionSpec::int("arbiter-count", "0")
                    .range(0, 1)
                    .doc("The last child is an arbiter."),
            ],
            2,
            u32::MAX,
        ),
        "cluster/stripe" => info(
            name,
            "Striping (test schema).",
            vec![
                s("block-size", "128KiB")
                    .range(16 << 10, 1 << 30)
                    .doc("Stripe unit."),
            ],
            2,
            u32::MAX,
        ),
        "features/arbiter" => info(name, "No data stored (test schema).", vec![], 1, 1),
        "cluster/distribute" => info(
            name,
            "Distribution by name hash (test schema).",
            vec![OptionSpec::bool("lookup-unhashed", "on").doc("Look everywhere on a miss.")],
            2,
            u32::MAX,
        ),
        "performance/write-behind" => info(
            name,
            "Acknowledges writes early (test schema).",
            vec![
                s("window-size", "1MiB")
                    .range(512 << 10, 1 << 30)
                    .reconfigurable()
                    .doc("Bytes of writes held per file."),
                OptionSpec::bool("flush-behind", "on")
                    .reconfigurable()
                    .doc("Flush in the background."),
            ],
            1,
            1,
        ),
        "performance/read-ahead" => info(
            name,
            "Prefetches sequential reads (test schema).",
            vec![
                OptionSpec::int("page-count", "4")
                    .range(1, 16)
                    .reconfigurable()
                    .doc("Pages ahead."),
                s("page-size", "128KiB")
                    .range(4096, 1 << 20)
                    .doc("Prefetch unit."),
            ],
            1,
            1,
        ),
        "performance/io-cache" => info(
            name,
            "Caches file data (test schema).",
            vec![
                s("cache-size", "32MiB")
                    .reconfigurable()
                    .doc("Cache bound."),
                s("page-size", "128KiB")
                    .range(4096, 1 << 20)
                    .doc("Cache unit."),
                d("cache-timeout", "1s")
                    .range(0, 60_000)
                    .reconfigurable()
                    .doc("Revalidate after."),
            ],
            1,
            1,
        ),
        "performance/md-cache" => info(
            name,
            "Caches attributes (test schema).",
            vec![
                d("md-cache-timeout", "1s")
                    .range(0, 600_000)
                    .reconfigurable()
                    .doc("Lifetime."),
            ],
            1,
            1,
        ),
        other => info(other, "A test type.", vec![], 0, u32::MAX),
    }
}

/// A spec over `bricks` (panics on a bad brick: tests give good ones).
pub fn spec(name: &str, bricks: &[&str]) -> VolumeSpec {
    let bricks = bricks
        .iter()
        .map(|b| Brick::parse(b).expect("test brick"))
        .collect();
    VolumeSpec::new(name, bricks)
}
