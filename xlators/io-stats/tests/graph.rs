//! debug/io-stats in a graph built by the core from a RON volfile: schema validation, fops
//! through the top, the graph's statedump, and in-place reconfigure on reload.

use std::sync::Arc;

use xlator_api::{Ctx, DumpFormat, Gfid, Loc};
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;
use xlfs_core::volume::{Reload, Volume};

// Registers `test/leaf` with the core's registry, like a linked-in translator library.
xlator_api::export_translators!(xlfs_testkit::StubLeaf);

fn volfile(stats_options: &str) -> Volfile {
    let text = format!(
        r#"(
            volumes: [
                (name: "leaf", type: "test/leaf"),
                (name: "stats", type: "debug/io-stats", subvolumes: ["leaf"],
                 options: {{ {stats_options} }}),
            ],
        )"#
    );
    Volfile::parse(&text, "<test>").expect("the volfile parses")
}

#[tokio::test]
async fn counts_in_a_graph_and_reconfigures_on_reload() {
    // Keep the io-stats rlib (and its static registration) linked into this binary.
    let _ = xlfs_io_stats::IoStats::snapshot;
    let registry = Arc::new(Registry::with_search_path(Vec::new(), true));
    let volume =
        Volume::new(volfile(r#""latency-measurement": "on""#), registry).expect("the graph builds");

    let graph = volume.graph();
    for name in ["a", "missing"] {
        let _ = graph
            .top()
            .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, name))
            .await;
    }
    let text = graph.dump(DumpFormat::Text);
    assert!(text.contains("[stats (debug/io-stats)]"), "{text}");
    assert!(text.contains("lookup       ENOENT=1"), "{text}");
    let stats = graph.get("stats").expect("the stats volume");
    let v: serde_json::Value = serde_json::from_str(&stats.dump().to_json()).expect("JSON dump");
    assert_eq!(v["fops"]["lookup"]["calls"], 2);

    let r = volume
        .reload(volfile(r#""count-fop-hits": "off""#))
        .expect("reload");
    assert_eq!(r, Reload::Reconfigured(vec!["stats".to_owned()]));
    let graph = volume.graph();
    let _ = graph
        .top()
        .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "a"))
        .await;
    let stats = graph.get("stats").expect("the stats volume");
    let v: serde_json::Value = serde_json::from_str(&stats.dump().to_json()).expect("JSON dump");
    assert_eq!(v["fops"]["lookup"]["calls"], 2, "counting is off");
    assert_eq!(v["count_fop_hits"], false);

    let e = volume
        .reload(volfile(r#""dump-path": "stats.json""#))
        .expect_err("relative path");
    assert!(e.to_string().contains("dump-path"), "{e}");
}

#[tokio::test]
async fn core_refuses_unknown_options_and_bad_values() {
    let registry = Registry::with_search_path(Vec::new(), true);
    for bad in [
        r#""latency-measurment": "on""#,
        r#""dump-interval": "soon""#,
    ] {
        let e = xlfs_core::graph::Graph::build(volfile(bad), &registry)
            .err()
            .expect("the volfile is refused");
        assert!(e.to_string().contains("<test>"), "{e}");
    }
}
