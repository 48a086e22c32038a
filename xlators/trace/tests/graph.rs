//! debug/trace in a graph built by the core from a RON volfile.

use xlfs_core::graph::Graph;
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;

// Registers `test/leaf` with the core's registry, like a linked-in translator library.
xlator_api::export_translators!(xlfs_testkit::StubLeaf);

fn volfile(trace_options: &str) -> Volfile {
    let text = format!(
        r#"(
            volumes: [
                (name: "leaf", type: "test/leaf"),
                (name: "trace", type: "debug/trace", subvolumes: ["leaf"],
                 options: {{ {trace_options} }}),
            ],
        )"#
    );
    Volfile::parse(&text, "<test>").expect("the volfile parses")
}

#[test]
fn volfile_options_reach_the_translator() {
    // Keep the trace rlib (and its static registration) linked into this binary.
    let _ = xlfs_trace::TARGET;
    let registry = Registry::with_search_path(Vec::new(), true);
    let g = Graph::build(
        volfile(r#""log-level": "debug", "exclude": "lk, inodelk""#),
        &registry,
    )
    .expect("the graph builds");
    assert_eq!(g.top().type_name(), "debug/trace");

    let e = Graph::build(volfile(r#""include": "lookup,statt""#), &registry)
        .err()
        .expect("an unknown fop refuses the graph");
    let e = e.to_string();
    assert!(
        e.contains("unknown fop \"statt\"") && e.contains("\"trace\""),
        "{e}"
    );

    let e = Graph::build(volfile(r#""log-level": "warn""#), &registry)
        .err()
        .expect("a level that is not a choice");
    assert!(e.to_string().contains("log-level"), "{e}");
}
