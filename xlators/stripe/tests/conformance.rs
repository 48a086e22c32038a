//! The testkit's POSIX conformance suite over stripe 4 on in-memory leaves, with small units
//! (so the suite's files span several children) and with the default.

use xlfs_stripe::Stripe;
use xlfs_testkit::MockCluster;
use xlfs_testkit::conformance::{self, Caps};

async fn run(set: &[(&str, &str)]) {
    let cluster = MockCluster::new(4);
    let top = cluster.build::<Stripe>(set);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_stripe_4_with_4k_units() {
    run(&[("block-size", "4KiB")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_stripe_4_with_default_units() {
    run(&[]).await;
}
