#![doc = include_str!("../README.md")]

mod ahead;
pub mod dump;
pub mod fds;
pub mod options;
pub mod window;
mod xlator;

pub use ahead::Snapshot;
pub use options::ReadAheadOptions;
pub use xlator::{ReadAhead, TYPE};

xlator_api::export_translators!(ReadAhead);
