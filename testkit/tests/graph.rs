//! `storage/memory` and `testing/mock` built by the core from a RON volfile, through the
//! static registration `export_translators!` gives them.

use xlator_api::Fop;
use xlfs_core::graph::Graph;
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;
use xlfs_testkit::conformance::{self, Caps};
use xlfs_testkit::mock::MockHandle;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volfile_graph_of_mock_over_memory_passes_the_suite() {
    let text = r#"(
        volumes: [
            (name: "graph-test-leaf", type: "storage/memory", options: { "capacity": "64MiB" }),
            (name: "graph-test-spy", type: "testing/mock", subvolumes: ["graph-test-leaf"]),
        ],
    )"#;
    let volfile = Volfile::parse(text, "<test>").expect("the volfile parses");
    let registry = Registry::with_search_path(Vec::new(), true);
    let graph = Graph::build(volfile, &registry).expect("the graph builds");
    let spy = MockHandle::attach("graph-test-spy").expect("the mock registered its name");

    let report = conformance::run_filtered(graph.top(), Caps::all(), "data::").await;
    report.assert_all_passed();
    assert!(
        spy.count(Fop::Writev) > 10,
        "writes did not pass through the mock"
    );
    let statfs = graph
        .top()
        .statfs(&xlator_api::Ctx::root(), xlator_api::Gfid::ROOT)
        .await;
    assert_eq!(statfs.expect("statfs").blocks, (64 << 20) / 4096);
}
