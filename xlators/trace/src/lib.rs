#![doc = include_str!("../README.md")]

pub mod filter;
pub mod level;
pub mod options;
mod show;
mod tracer;
mod xlator;

pub use options::TraceOptions;
pub use tracer::TARGET;
pub use xlator::Trace;

xlator_api::export_translators!(Trace);
