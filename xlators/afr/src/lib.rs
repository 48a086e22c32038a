#![doc = include_str!("../README.md")]

mod append;
pub mod changelog;
mod eager;
mod fds;
mod heal;
pub mod options;
pub mod quorum;
pub mod read;
mod reads;
mod shared;
mod status;
mod transaction;
mod xlator;

pub use options::AfrOptions;
pub use xlator::{Afr, AfrAlias, HEAL_XATTR, Primary, Replicate, ReplicateAs, Spelling};

xlator_api::export_translators!(Replicate, Afr);
