#![doc = include_str!("../README.md")]

mod engine;
mod files;
pub mod flags;
pub mod handling;
pub mod options;
pub mod window;
mod xlator;

pub use options::WriteBehindOptions;
pub use xlator::WriteBehind;

xlator_api::export_translators!(WriteBehind);
