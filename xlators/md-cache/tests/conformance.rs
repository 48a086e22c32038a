//! The POSIX conformance suite through performance/md-cache on the in-memory leaf, with long
//! timeouts: whatever the suite changes through it must show at once.

use xlfs_md_cache::MdCache;
use xlfs_testkit::build::build;
use xlfs_testkit::conformance::{self, Caps};
use xlfs_testkit::memfs::MemLeaf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_passes_with_long_timeouts() {
    let top = build::<MdCache>(
        &[("md-cache-timeout", "600s"), ("negative-timeout", "600s")],
        vec![MemLeaf::new()],
    );
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
    assert_eq!(report.skipped(), 0);
}
