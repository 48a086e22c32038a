#![doc = include_str!("../README.md")]

mod attrs;
mod fds;
pub mod geometry;
pub mod io;
mod meta;
mod namespace;
pub mod options;
mod shared;
pub mod units;
mod xlator;

pub use geometry::GEOMETRY_XATTR;
pub use options::StripeOptions;
pub use units::Geometry;
pub use xlator::Stripe;

xlator_api::export_translators!(Stripe);
