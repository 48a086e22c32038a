#![doc = include_str!("../README.md")]

mod cache;
pub mod dump;
pub mod lru;
pub mod options;
pub mod pages;
pub mod priority;
pub mod table;
mod xlator;

pub use cache::Snapshot;
pub use options::IoCacheOptions;
pub use xlator::{IoCache, TYPE};

xlator_api::export_translators!(IoCache);
