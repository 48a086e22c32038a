//! What the crawl sends its fops to: the top of the volume's client graph as it is now.
//!
//! Guarantees: the crawl asks for the top once per directory and uses that one translator
//! for the directory's whole listing (opendir, readdirp pages, releasedir and its files'
//! migrations), so a graph switch (add-brick while rebalancing) never sends a readdirp with
//! an fd opened on another graph; the next directory uses the new graph. [`Target::topology`]
//! names the distribute layout of the graph, so the crawl can tell when bricks changed under
//! it and start again from the root.

use std::sync::Arc;

use xlator_api::Subvol;
use xlfs_core::graph::Graph;
use xlfs_core::volume::Volume;

/// Where the crawl's fops go.
pub trait Target: Send + Sync {
    /// The translator fops go to now.
    fn top(&self) -> Subvol;
    /// The children (and decommissioned children) of every cluster/distribute translator, as
    /// one string; `None` when unknown (a test's fake top).
    fn topology(&self) -> Option<String> {
        None
    }
}

/// A fixed translator (tests, embedders): no topology.
impl Target for Subvol {
    fn top(&self) -> Subvol {
        self.clone()
    }
}

/// A volume whose graph may be switched while the crawl runs.
pub struct VolumeTarget(pub Arc<Volume>);

impl Target for VolumeTarget {
    fn top(&self) -> Subvol {
        self.0.graph().top().clone()
    }
    fn topology(&self) -> Option<String> {
        Some(topology(&self.0.graph()))
    }
}

/// The type names cluster/distribute goes by (`TypeInfo::name` is the canonical one; the
/// alias is listed in case a registry reports it).
pub const DISTRIBUTE_TYPES: [&str; 2] = ["cluster/distribute", "cluster/dht"];

/// `name=child,child[;decommissioned=...]` for each cluster/distribute of `graph`, by name,
/// space separated; empty when there is none.
pub fn topology(graph: &Graph) -> String {
    graph
        .nodes()
        .filter(|(_, n)| DISTRIBUTE_TYPES.contains(&n.info.name.as_str()))
        .map(|(name, n)| {
            let mut t = format!("{name}={}", n.children.join(","));
            match n.options().get("decommissioned") {
                Some(d) if !d.trim().is_empty() => t.push_str(&format!(";decommissioned={d}")),
                _ => {}
            }
            t
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The cluster/distribute translators of `graph` with their `decommissioned` option (empty
/// when unset or unknown to that distribute).
pub fn distributes(graph: &Graph) -> Vec<(String, String)> {
    graph
        .nodes()
        .filter(|(_, n)| DISTRIBUTE_TYPES.contains(&n.info.name.as_str()))
        .map(|(name, n)| {
            let options = n.options();
            let d = options.get("decommissioned").unwrap_or("").trim();
            (name.to_owned(), d.to_owned())
        })
        .collect()
}
