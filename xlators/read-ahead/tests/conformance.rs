//! The POSIX conformance suite through performance/read-ahead on the in-memory leaf, alone and
//! stacked over performance/io-cache as in a client graph.

use xlfs_io_cache::IoCache;
use xlfs_read_ahead::ReadAhead;
use xlfs_testkit::build::build;
use xlfs_testkit::conformance::{self, Caps};
use xlfs_testkit::memfs::MemLeaf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_passes_with_default_options() {
    let top = build::<ReadAhead>(&[], vec![MemLeaf::new()]);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
    assert_eq!(report.skipped(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_passes_over_io_cache_with_small_pages() {
    let ioc = build::<IoCache>(
        &[
            ("page-size", "1KiB"),
            ("cache-size", "16KiB"),
            ("cache-timeout", "0"),
        ],
        vec![MemLeaf::new()],
    );
    let top = build::<ReadAhead>(&[("page-size", "1KiB"), ("page-count", "16")], vec![ioc]);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}
