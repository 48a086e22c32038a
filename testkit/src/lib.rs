//! Test tools for translators: a mock child ([`mock`]), N children for a cluster translator
//! ([`MockCluster`]: mocks over in-memory leaves, taken down and up, failing, gated), an
//! in-memory leaf translator ([`memfs`]) and a POSIX-semantics conformance suite for any
//! graph ([`conformance`]).
//!
//! Smaller helpers for a translator's own tests: building an instance with schema defaults
//! ([`build`]), a leaf with fixed answers ([`stub_leaf`]), a call of every fop
//! ([`every_fop`]), a file served by a mock for caching translators ([`remote`]), GFID/fd
//! values and observations ([`fixtures`]), loading a translator from its `.so`
//! ([`plugin`]), and fixed TCP ports no other test is given ([`ports`]).
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

pub mod build;
pub mod conformance;
pub mod every_fop;
pub mod fixtures;
pub mod memfs;
pub mod mock;
pub mod on_file;
pub mod plugin;
pub mod ports;
pub mod remote;
pub mod stub_leaf;

pub use conformance::{Caps, Report};
pub use memfs::MemLeaf;
pub use mock::{FopCall, FopReply, MockChild, MockCluster, MockHandle};
pub use stub_leaf::StubLeaf;

// Lets volfiles name `testing/mock` and `storage/memory` in statically linked test binaries.
xlator_api::export_translators!(MockChild, MemLeaf);
