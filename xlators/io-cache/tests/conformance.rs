//! The POSIX conformance suite through performance/io-cache on the in-memory leaf.

use xlfs_io_cache::IoCache;
use xlfs_testkit::build::build;
use xlfs_testkit::conformance::{self, Caps};
use xlfs_testkit::memfs::MemLeaf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_passes_with_default_options() {
    let top = build::<IoCache>(&[], vec![MemLeaf::new()]);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
    assert_eq!(report.skipped(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_passes_with_small_pages_a_tiny_cache_and_no_timeout() {
    let set = [
        ("page-size", "512"),
        ("cache-size", "8KiB"),
        ("cache-timeout", "0"),
    ];
    let top = build::<IoCache>(&set, vec![MemLeaf::new()]);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}
