#![doc = include_str!("../README.md")]

mod barrier;
mod deadlock;
mod dump;
mod entry;
mod gate;
mod migrate;
#[cfg(test)]
mod model;
mod owner;
mod range;
mod table;
mod wait;
mod xlator;

pub use xlator::Locks;

xlator_api::export_translators!(Locks);
