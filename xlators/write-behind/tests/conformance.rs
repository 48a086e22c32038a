//! The testkit's POSIX conformance suite over write-behind on the in-memory leaf, with the
//! default options and with the most aggressive caching (no trickling, small window and
//! aggregates, flush-behind).

mod common;

use common::wb_over;
use xlfs_testkit::MemLeaf;
use xlfs_testkit::conformance::{self, Caps};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_with_default_options() {
    let top = wb_over(&[], MemLeaf::new());
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_with_aggressive_caching() {
    let set = [
        ("trickling-writes", "off"),
        ("window-size", "64KiB"),
        ("aggregate-size", "8KiB"),
        ("flush-behind", "on"),
    ];
    let top = wb_over(&set, MemLeaf::new());
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}
