//! The xlfs graph engine: parses RON volfiles, finds translator types (built in or loaded from
//! cdylibs), builds and validates graphs, reconfigures them and switches graphs while fops
//! are in flight.
//!
//! ```no_run
//! use std::sync::Arc;
//! use xlfs_core::{registry::Registry, volfile::Volfile, volume::Volume};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let text = std::fs::read_to_string("/etc/xlfs/client.vol")?;
//! let volfile = Volfile::parse(&text, "/etc/xlfs/client.vol")?;
//! let volume = Volume::new(volfile, Arc::new(Registry::new()))?;
//! let graph = volume.graph(); // hold it while a fop runs
//! let _top = graph.top();
//! # Ok(()) }
//! ```
#![allow(non_local_definitions)]

pub mod graph;
pub mod hop;
pub mod loader;
pub mod logging;
pub mod malloc;
pub mod registry;
pub mod services;
pub mod source;
pub mod volfile;
pub mod volume;
