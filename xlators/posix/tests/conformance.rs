//! The testkit's POSIX conformance suite against a real brick, alone and under features/locks.

mod common;

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{InitArgs, Options};
use xlfs_testkit::{Caps, conformance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posix_alone() {
    let (_d, top) = common::new_brick();
    let caps = Caps {
        locks: false,
        ..Caps::all()
    };
    let report = conformance::run(&top, caps).await;
    eprintln!(
        "posix: {} passed, {} skipped",
        report.passed(),
        report.skipped()
    );
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posix_under_locks() {
    let (_d, brick) = common::new_brick();
    let top = xlator_api::sdk::instantiate::<xlfs_locks::Locks>(InitArgs {
        name: "locks".into(),
        options: Options::new(),
        children: RVec::from(vec![brick]),
        services: xlfs_core::services::host_services(),
    })
    .expect("locks init");
    conformance::run(&top, Caps::all())
        .await
        .assert_all_passed();
}
