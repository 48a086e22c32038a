#![doc = include_str!("../README.md")]

pub mod histogram;
mod meter;
pub mod options;
mod periodic;
pub mod report;
pub mod stats;
mod xlator;

pub use options::IoStatsOptions;
pub use xlator::IoStats;

xlator_api::export_translators!(IoStats);
