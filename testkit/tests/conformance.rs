//! The conformance suite against `storage/memory`, and proof that the suite catches a broken
//! graph.

use xlator_api::{Fop, Loc};
use xlfs_testkit::conformance::{self, Caps, Outcome};
use xlfs_testkit::memfs::MemLeaf;
use xlfs_testkit::mock::{FopCall, FopReply, MockChild};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memleaf_passes_every_case() {
    let top = MemLeaf::new();
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
    assert_eq!(report.skipped(), 0);
    assert_eq!(report.passed(), conformance::case_names().len());
    assert!(report.passed() >= 40, "only {} cases", report.passed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_caps_skip_instead_of_failing() {
    let top = MemLeaf::new();
    let report = conformance::run(&top, Caps::none()).await;
    report.assert_all_passed();
    assert!(report.skipped() > 10, "{report}");
    assert!(matches!(
        report.outcome("links::symlink_and_readlink"),
        Some(Outcome::Skipped(_))
    ));
    assert_eq!(
        report.outcome("data::write_read_round_trip"),
        Some(&Outcome::Passed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_passes_through_a_recording_spy() {
    let (top, handle) = MockChild::spy(MemLeaf::new());
    let report = conformance::run_filtered(&top, Caps::all(), "rename::").await;
    report.assert_all_passed();
    assert_eq!(report.passed(), 10);
    assert!(handle.count(Fop::Rename) >= 10);
    handle.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_catches_a_rename_that_does_nothing() {
    let (top, handle) = MockChild::spy(MemLeaf::new());
    // A broken layer: claims success without renaming.
    handle.on(Fop::Rename, |_| FopReply::Rename(Ok(())));
    let report = conformance::run_filtered(&top, Caps::all(), "rename::").await;
    assert!(report.failed() >= 5, "{report}");
    assert!(matches!(
        report.outcome("rename::rename_file_in_same_dir"),
        Some(Outcome::Failed(_))
    ));
    let panicked = std::panic::catch_unwind(|| report.assert_all_passed());
    assert!(panicked.is_err(), "assert_all_passed accepted failures");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_catches_lost_writes_and_wrong_errors() {
    let (top, handle) = MockChild::spy(MemLeaf::new());
    // Writes claim success but store nothing; lookups of "missing" fail with the wrong errno.
    handle.on(Fop::Writev, |call| match call {
        FopCall::Writev { data, .. } => {
            FopReply::Writev(Ok(xlator_api::WriteReply::written(data.len() as u64)))
        }
        _ => FopReply::Writev(Err(xlator_api::Errno::EIO)),
    });
    handle.on(Fop::Lookup, |call| match call {
        FopCall::Lookup {
            loc: Loc { name, .. },
        } if name.as_str() == "missing" => FopReply::Lookup(Err(xlator_api::Errno::EIO)),
        _ => FopReply::Lookup(Err(xlator_api::Errno::ENOENT)),
    });
    let report = conformance::run_filtered(&top, Caps::all(), "data::").await;
    assert!(matches!(
        report.outcome("data::write_read_round_trip"),
        Some(Outcome::Failed(_))
    ));
    assert!(matches!(
        report.outcome("data::large_write_1mib"),
        Some(Outcome::Failed(_))
    ));
    let report = conformance::run_filtered(&top, Caps::all(), "lookup_missing").await;
    assert!(
        matches!(
            report.outcome("namespace::lookup_missing_is_enoent"),
            Some(Outcome::Failed(_))
        ),
        "{report}"
    );
}
