//! volgen: turns a volume description (bricks, layout, transport, option overrides) into one
//! server volfile per brick and the client volfile, with the translators the build has.
//!
//! ```
//! use xlfs_core::registry::Registry;
//! use xlfs_volgen::{Brick, VolumeSpec, generate};
//!
//! let spec = VolumeSpec::new("gv0", vec![Brick::parse("/srv/gv0/brick0")?]);
//! let registry = Registry::with_search_path(vec![], true);
//! match generate(&spec, &registry) {
//!     Ok(out) => {
//!         assert_eq!(out.servers.len(), 1);
//!         assert_eq!(out.client.top_name(), "gv0");
//!         println!("{}", out.client.to_ron());
//!     }
//!     // This doc test links no translators, so protocol/client is not built in.
//!     Err(e) => assert!(e.to_string().contains("not available in this build")),
//! }
//! # Ok::<(), xlfs_volgen::VolgenError>(())
//! ```
//!
//! Option keys (`volume set`) come from the schemas the translators export: see [`Catalog`].
//! Which translators go where, and which are optional, is the table in [`stack`].

mod brick;
mod check;
mod error;
mod generate;
mod keys;
mod spec;
pub mod stack;
pub mod user;

pub use brick::{Brick, LOOPBACK};
pub use check::{MAX_NAME_LEN, check_auth_entry, check_name};
pub use error::VolgenError;
pub use generate::{Generated, ServerVolfile, brick_volume_name, generate};
pub use keys::{AUTH_ALLOW, Catalog, KeyInfo, Target, describe_range};
pub use spec::{DEFAULT_BASE_PORT, Layout, Subvolume, Transport, VolumeSpec};
