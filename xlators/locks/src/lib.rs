#![doc = include_str!("../README.md")]

mod entry;
mod range;
mod table;
mod xlator;

pub use xlator::Locks;

xlator_api::export_translators!(Locks);
