//! Page geometry and reply assembly: shared with read-ahead through the SDK.

pub use xlator_api::pages::{Geometry, assemble};
