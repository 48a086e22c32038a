//! Test tools for translators: a mock child ([`mock`]), an in-memory leaf translator
//! ([`memfs`]) and a POSIX-semantics conformance suite for any graph ([`conformance`]).
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)] async fn main() {
//! use xlfs_testkit::{conformance, memfs::MemLeaf};
//!
//! let top = MemLeaf::new();
//! let report = conformance::run(&top, conformance::Caps::all()).await;
//! report.assert_all_passed();
//! # }
//! ```

pub mod conformance;
pub mod memfs;
pub mod mock;

pub use conformance::{Caps, Report};
pub use memfs::MemLeaf;
pub use mock::{FopCall, FopReply, MockChild, MockHandle};

// Lets volfiles name `testing/mock` and `storage/memory` in statically linked test binaries.
xlator_api::export_translators!(MockChild, MemLeaf);
