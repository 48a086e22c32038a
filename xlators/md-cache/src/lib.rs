#![doc = include_str!("../README.md")]

pub mod options;
pub mod table;
mod xlator;

pub use options::MdCacheOptions;
pub use xlator::{MdCache, TYPE};

xlator_api::export_translators!(MdCache);
