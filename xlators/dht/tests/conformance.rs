//! The testkit's POSIX conformance suite over distribute 4 (and 1 and 2) on in-memory leaves:
//! its files land on every child, so renames, links and listings cross children.

use xlfs_dht::Distribute;
use xlfs_testkit::MockCluster;
use xlfs_testkit::conformance::{self, Caps};

async fn run(n: usize) {
    let cluster = MockCluster::new(n);
    let top = cluster.build::<Distribute>(&[("min-free-disk", "0")]);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_distribute_1() {
    run(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_distribute_2() {
    run(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_distribute_4() {
    run(4).await;
}
