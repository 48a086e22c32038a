//! Whole graphs in-process: init order, events, reconfigure, graph switch with fops in flight,
//! dumps, per-hop spans.

use std::sync::Arc;
use std::time::Duration;

use xlator_api::{Ctx, DumpFormat, Errno, Gfid, Loc};
use xlfs_core::graph::Graph;
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;
use xlfs_core::volume::{Reload, Volume};
use xlfs_integration_tests::probe::{gate, journal_lines};

fn registry() -> Arc<Registry> {
    Arc::new(Registry::with_search_path(
        Registry::default_search_path(),
        true,
    ))
}

fn vf(text: &str) -> Volfile {
    Volfile::parse(text, "test.vol").unwrap_or_else(|e| panic!("{e}"))
}

/// leaf-a and leaf-b under a parent under a top, all probes labelled with `p`.
fn diamond(p: &str, tag: &str, fixed: u32) -> Volfile {
    vf(&format!(
        r#"(
        volumes: [
            (name: "a", type: "test/probe", options: {{ "label": "{p}a" }}),
            (name: "b", type: "test/probe", options: {{ "label": "{p}b" }}),
            (name: "mid", type: "test/probe", options: {{ "label": "{p}mid", "tag": "{tag}", "fixed": "{fixed}" }},
             subvolumes: ["a", "b"]),
            (name: "top", type: "test/probe", options: {{ "label": "{p}top" }}, subvolumes: ["mid"]),
        ],
    )"#
    ))
}

#[test]
fn children_init_before_parents_and_child_up_flows_to_each_parent() {
    let g = Graph::build(diamond("g1-", "x", 1), &registry()).expect("builds");
    let lines = journal_lines("g1-");
    let pos = |s: &str| {
        lines
            .iter()
            .position(|l| l == s)
            .unwrap_or_else(|| panic!("{s} missing in {lines:?}"))
    };
    assert!(pos("g1-a init children=0") < pos("g1-mid init children=2"));
    assert!(pos("g1-b init children=0") < pos("g1-mid init children=2"));
    assert!(pos("g1-mid init children=2") < pos("g1-top init children=1"));
    pos("g1-mid event ChildUp 0");
    pos("g1-mid event ChildUp 1");
    pos("g1-top event ChildUp 0");
    assert!(
        !lines.iter().any(|l| l.starts_with("g1-a event")),
        "leaves have no children: {lines:?}"
    );
    assert_eq!(g.top().name(), "top");
    drop(g);
    let lines = journal_lines("g1-");
    for v in ["a", "b", "mid", "top"] {
        pos_in(&lines, &format!("g1-{v} dropped"));
    }
}

fn pos_in(lines: &[String], s: &str) -> usize {
    lines
        .iter()
        .position(|l| l == s)
        .unwrap_or_else(|| panic!("{s} missing in {lines:?}"))
}

#[test]
fn reconfigurable_option_changes_in_place_and_others_switch_graphs() {
    let vol = Volume::new(diamond("g2-", "one", 1), registry()).expect("builds");
    let first = vol.graph().id();
    assert_eq!(
        vol.reload(diamond("g2-", "one", 1)).expect("same"),
        Reload::Unchanged
    );
    assert_eq!(
        vol.reload(diamond("g2-", "two", 1)).expect("reconfigures"),
        Reload::Reconfigured(vec!["mid".into()])
    );
    assert_eq!(vol.graph().id(), first, "same graph after reconfigure");
    pos_in(&journal_lines("g2-"), "g2-mid reconfigure tag=two");
    // The options applied in place are the ones later volfiles are compared with: the same
    // volfile again changes nothing, and going back to the first value reconfigures again.
    assert_eq!(
        vol.reload(diamond("g2-", "two", 1)).expect("same"),
        Reload::Unchanged
    );
    assert_eq!(
        vol.reload(diamond("g2-", "one", 1))
            .expect("reconfigures back"),
        Reload::Reconfigured(vec!["mid".into()])
    );
    pos_in(&journal_lines("g2-"), "g2-mid reconfigure tag=one");
    // `fixed` is not reconfigurable: a new graph.
    let r = vol.reload(diamond("g2-", "two", 2)).expect("switches");
    assert!(
        matches!(r, Reload::Switched { old_graph, .. } if old_graph == first),
        "{r:?}"
    );
    assert_ne!(vol.graph().id(), first);
    // An invalid volfile leaves the current graph in place.
    let cur = vol.graph().id();
    assert!(vol.reload(diamond("g2-", "two", 200)).is_err());
    assert_eq!(vol.graph().id(), cur);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_switch_lets_inflight_fops_finish_and_drops_the_old_graph_after_them() {
    let vol = Arc::new(Volume::new(diamond("g3-", "x", 1), registry()).expect("builds"));
    let old_id = vol.graph().id();
    // A fop enters the old graph and parks in `top`.
    let v = vol.clone();
    let inflight = tokio::spawn(async move {
        let graph = v.graph();
        graph
            .top()
            .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "wait"))
            .await
    });
    while !journal_lines("g3-top lookup waiting").iter().any(|_| true) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Switch (non-reconfigurable change) while it is in flight.
    let r = vol.reload(diamond("g3-", "x", 5)).expect("switch");
    assert!(matches!(r, Reload::Switched { .. }));
    assert_ne!(vol.graph().id(), old_id);
    let lines = journal_lines("g3-");
    pos_in(&lines, "g3-top event GraphSwitch 0");
    // The old graph is still alive: its top is serving the parked call.
    let drops = lines.iter().filter(|l| l.ends_with("dropped")).count();
    assert_eq!(
        drops, 0,
        "old graph dropped with a fop in flight: {lines:?}"
    );
    // New fops go to the new graph and are not blocked by the parked one.
    let r = vol
        .graph()
        .top()
        .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "nothing"))
        .await;
    assert_eq!(r, Err(Errno::ENOENT));
    // Release the parked call: it completes on the old graph, which then drops.
    gate("g3-top").notify_one();
    assert!(inflight.await.expect("join").is_ok());
    let lines = journal_lines("g3-");
    let drops = lines.iter().filter(|l| l.ends_with("dropped")).count();
    assert_eq!(
        drops, 4,
        "each old translator dropped exactly once: {lines:?}"
    );
}

#[test]
fn dump_collects_every_translator_top_down_as_text_and_json() {
    let g = Graph::build(diamond("g4-", "x", 1), &registry()).expect("builds");
    let text = g.dump(DumpFormat::Text);
    let top = text.find("[top (test/probe)]").expect("top section");
    let a = text.find("[a (test/probe)]").expect("leaf section");
    assert!(top < a, "{text}");
    let json = g.dump(DumpFormat::Json);
    assert!(
        json.starts_with("{\"top\":{\"type\": \"test/probe\", \"lookups\": 0}"),
        "{json}"
    );
    assert!(
        json.contains("\"a\":{\"type\": \"test/probe\", \"lookups\": 0}"),
        "{json}"
    );
}

mod spans {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::*;

    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<Vec<String>>>);

    struct Fields(String);
    impl Visit for Fields {
        fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
            self.0.push_str(&format!("{}={:?} ", f.name(), v));
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Spans {
        fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
            let mut f = Fields(String::new());
            attrs.record(&mut f);
            self.0
                .lock()
                .expect("spans")
                .push(f.0.trim().replace('"', ""));
        }
    }

    #[test]
    fn every_hop_gets_a_span_when_fop_tracing_is_on_and_none_when_off() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        let run = |filter: &str| -> Vec<String> {
            let spans = Spans::default();
            let sub = tracing_subscriber::registry().with(
                spans
                    .clone()
                    .with_filter(tracing_subscriber::EnvFilter::new(filter)),
            );
            tracing::subscriber::with_default(sub, || {
                let g = Graph::build(diamond("g5-", "x", 1), &registry()).expect("builds");
                let cx = Ctx::builder(0, 0).request_id(77).build();
                rt.block_on(g.top().lookup(&cx, Loc::new(Gfid::ROOT, "f")))
                    .ok();
            });
            spans.0.lock().expect("spans").clone()
        };
        let on = run("xlfs::fop=trace");
        assert_eq!(
            on,
            vec![
                "xl=top fop=lookup req=77",
                "xl=mid fop=lookup req=77",
                "xl=a fop=lookup req=77"
            ],
            "one span per translator the lookup passed through"
        );
        assert!(run("info").is_empty());
    }
}

mod conformance_over_plugins {
    use super::*;
    use xlfs_testkit::{Caps, conformance};

    /// The issue-2 bar: the POSIX conformance suite on an in-memory graph with pass-through
    /// translators loaded from real `.so` files stacked on the leaf.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conformance_passes_through_three_so_translators_on_the_memory_leaf() {
        let reg = registry();
        for t in ["example/template", "features/read-only", "debug/trace"] {
            let r = reg.resolve(t).unwrap_or_else(|e| panic!("{e}"));
            let lib = r
                .library
                .unwrap_or_else(|| panic!("{t} is built in; this test needs the .so"));
            assert!(
                lib.extension().is_some_and(|e| e == "so"),
                "{}",
                lib.display()
            );
        }
        let g = Graph::build(
            vf(r#"(
                volumes: [
                    (name: "mem", type: "storage/memory"),
                    (name: "tmpl", type: "example/template", subvolumes: ["mem"]),
                    (name: "ro", type: "features/read-only", options: { "read-only": "off" },
                     subvolumes: ["tmpl"]),
                    (name: "trace", type: "debug/trace", subvolumes: ["ro"]),
                ],
            )"#),
            &reg,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let report = conformance::run(g.top(), Caps::all()).await;
        println!("{report}");
        report.assert_all_passed();
        assert!(report.passed() >= 70, "{report}");
    }

    /// And the read-only layer really acts when switched on at run time (reconfigure through
    /// the .so's vtable).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_only_from_so_reconfigures_on_a_live_volume() {
        let text = |ro: &str| {
            vf(&format!(
                r#"( volumes: [
                    (name: "mem", type: "storage/memory"),
                    (name: "ro", type: "features/read-only", options: {{ "read-only": "{ro}" }},
                     subvolumes: ["mem"]),
                ] )"#
            ))
        };
        let vol = Volume::new(text("off"), registry()).expect("builds");
        let cx = Ctx::root();
        let mk = |name: &'static str| {
            let g = vol.graph();
            async move {
                g.top()
                    .mkdir(&Ctx::root(), Loc::new(Gfid::ROOT, name), 0o755, 0)
                    .await
            }
        };
        assert!(mk("d1").await.is_ok());
        assert_eq!(
            vol.reload(text("on")).expect("reload"),
            Reload::Reconfigured(vec!["ro".into()])
        );
        assert_eq!(mk("d2").await.map(|_| ()), Err(Errno::EROFS));
        assert!(
            vol.graph()
                .top()
                .lookup(&cx, Loc::new(Gfid::ROOT, "d1"))
                .await
                .is_ok()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translators_raise_child_up_and_down_to_every_parent() {
    let g = Graph::build(
        vf(r#"( volumes: [
            (name: "net", type: "test/announcer"),
            (name: "other", type: "test/probe", options: { "label": "g6-other" }),
            (name: "p1", type: "test/probe", options: { "label": "g6-p1" }, subvolumes: ["other", "net"]),
            (name: "p2", type: "test/probe", options: { "label": "g6-p2" }, subvolumes: ["net"]),
            (name: "top", type: "test/probe", options: { "label": "g6-top" }, subvolumes: ["p1", "p2"]),
        ] )"#),
        &registry(),
    )
    .expect("builds");
    let lines = journal_lines("g6-");
    pos_in(&lines, "g6-p1 event ChildUp 0");
    assert!(
        !lines.contains(&"g6-p1 event ChildUp 1".to_owned()),
        "core must not announce net: {lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("g6-p2 event")),
        "{lines:?}"
    );
    let net = g.get("net").expect("net").clone();
    net.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "up"))
        .await
        .expect("up");
    let lines = journal_lines("g6-");
    pos_in(&lines, "g6-p1 event ChildUp 1");
    pos_in(&lines, "g6-p2 event ChildUp 0");
    net.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "down"))
        .await
        .expect("down");
    let lines = journal_lines("g6-");
    pos_in(&lines, "g6-p1 event ChildDown 1");
    pos_in(&lines, "g6-p2 event ChildDown 0");
    // Dropping the graph frees the parents even though `net` (held here) can still call up.
    drop(g);
    let lines = journal_lines("g6-");
    for p in ["g6-p1 dropped", "g6-p2 dropped", "g6-top dropped"] {
        pos_in(&lines, p);
    }
    net.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "down"))
        .await
        .expect("late up-call is harmless");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_can_wait_until_the_top_says_whether_it_is_up() {
    // A top that announces itself says nothing until it does.
    let g = Graph::build(
        vf(r#"( volumes: [ (name: "net", type: "test/announcer") ] )"#),
        &registry(),
    )
    .expect("builds");
    let t = std::time::Duration::from_millis(50);
    let wait = |g: &Graph| tokio::task::block_in_place(|| g.wait_ready(t));
    assert_eq!(wait(&g), ["net"], "not said yet");
    let net = g.top().clone();
    net.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "down"))
        .await
        .expect("down");
    assert!(
        wait(&g).is_empty(),
        "a brick refusing connections has spoken"
    );
    assert_eq!(g.announced("net"), Some(false));
    net.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "up"))
        .await
        .expect("up");
    assert_eq!(g.announced("net"), Some(true));
    // Under a translator that does not announce itself (the core says it is up at once),
    // the graph is ready only once the one below that does has spoken.
    let g = Graph::build(
        vf(r#"( volumes: [
            (name: "net", type: "test/announcer"),
            (name: "top", type: "test/probe", options: { "label": "g9-top" }, subvolumes: ["net"]),
        ] )"#),
        &registry(),
    )
    .expect("builds");
    assert_eq!(g.announced("top"), Some(true));
    assert_eq!(wait(&g), ["net"]);
    g.get("net")
        .expect("net")
        .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "up"))
        .await
        .expect("up");
    assert!(wait(&g).is_empty());
}

/// cluster/replicate says it is up once every child has said whether it is (or after
/// HEAR_ALL_WAIT): a mount must not start on a replica set that knows one brick only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicate_says_it_is_up_once_it_has_heard_from_every_child() {
    let g = Graph::build(
        vf(r#"( volumes: [
            (name: "a", type: "test/announcer"),
            (name: "b", type: "test/announcer"),
            (name: "r", type: "cluster/replicate", subvolumes: ["a", "b"]),
        ] )"#),
        &registry(),
    )
    .expect("builds");
    let t = std::time::Duration::from_millis(200);
    let say = |child: &str, what: &str| {
        let c = g.get(child).expect("child").clone();
        let what = what.to_owned();
        async move {
            c.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, what.as_str()))
                .await
                .expect("announce")
        }
    };
    say("a", "up").await;
    assert_eq!(g.announced("r"), None, "b has not spoken");
    let wait = || tokio::task::block_in_place(|| g.wait_ready(t));
    assert_eq!(wait(), ["b", "r"]);
    say("b", "down").await;
    assert!(wait().is_empty());
    assert_eq!(g.announced("r"), Some(true), "up with a");
}

#[test]
fn an_up_call_raised_during_the_build_is_delivered_once_parents_are_wired() {
    let _g = Graph::build(
        vf(r#"( volumes: [
            (name: "early", type: "test/announcer"),
            (name: "p", type: "test/probe", options: { "label": "g7-p" }, subvolumes: ["early"]),
        ] )"#),
        &registry(),
    )
    .expect("builds");
    let lines = journal_lines("g7-");
    assert_eq!(
        lines
            .iter()
            .filter(|l| *l == "g7-p event ChildUp 0")
            .count(),
        1,
        "{lines:?}"
    );
}

/// A backing file (FUSE passthrough) reaches the top only through translators that declare
/// `KEEPS_FILE_DATA`: debug/trace does, example/template does not, and the engine drops it
/// there even though the template passes `open` through untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backing_files_pass_only_through_translators_that_keep_file_data() {
    use xlator_api::{BackingWanted, Fd, FdId};
    let dir = tempfile::tempdir().expect("tempdir");
    let brick = dir.path().to_string_lossy().into_owned();
    let graph = |middle: &str| {
        Graph::build(
            vf(&format!(
                r#"(
                volumes: [
                    (name: "posix", type: "storage/posix", options: {{ "directory": "{brick}" }}),
                    (name: "mid", type: "{middle}", subvolumes: ["posix"]),
                ],
            )"#
            )),
            &registry(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let cx = Ctx::root();
    let want = Ctx::root().to_builder().ext(&BackingWanted).build();
    let fd = |id: u64, gfid: Gfid, flags: i32| Fd {
        id: FdId(id),
        gfid,
        flags,
    };
    let g = graph("debug/trace");
    let e = g
        .top()
        .create(
            &cx,
            Loc::new(Gfid::ROOT, "f"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create");
    let gfid = e.attr.gfid;
    let o = g
        .top()
        .open(&want, fd(2, gfid, libc::O_RDONLY))
        .await
        .expect("open");
    let b = o
        .backing
        .into_option()
        .expect("a backing file through debug/trace");
    let st = std::fs::metadata(dir.path().join("f")).expect("stat");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((b.dev(), b.ino()), (st.dev(), st.ino()));
    let o = g
        .top()
        .open(&cx, fd(3, gfid, libc::O_RDONLY))
        .await
        .expect("open");
    assert!(o.backing.is_none(), "not asked for");
    let o = g
        .top()
        .open(&want, fd(4, gfid, libc::O_RDWR))
        .await
        .expect("open");
    assert!(o.backing.is_none(), "only read-only opens bring one");
    for id in 1..=4 {
        let _ = g.top().release(&cx, fd(id, gfid, 0)).await;
    }
    drop(g);

    let g = graph("example/template");
    let o = g
        .top()
        .open(&want, fd(5, gfid, libc::O_RDONLY))
        .await
        .expect("open");
    assert!(
        o.backing.is_none(),
        "a translator that does not keep file data is never read around"
    );
    let _ = g.top().release(&cx, fd(5, gfid, 0)).await;
}

/// A graph switch waits (bounded) for the new graph to say whether its bricks are up, and the
/// old graph serves meanwhile: a mount switching at once sent its first fops to bricks still
/// connecting (ENOTCONN on a create right after an add-brick, seen in tests/cluster/mgmt.rs).
#[test]
fn a_switch_waits_for_the_new_graph_to_be_ready_and_the_old_one_serves_meanwhile() {
    let old =
        r#"( volumes: [ (name: "top", type: "test/probe", options: { "label": "g10-a" }) ] )"#;
    let new = r#"( volumes: [
        (name: "net", type: "test/announcer"),
        (name: "top", type: "test/probe", options: { "label": "g10-b" }, subvolumes: ["net"]),
    ] )"#;
    let vol = Arc::new(Volume::new(vf(old), registry()).expect("builds"));
    let first = vol.graph().id();
    let limit = std::time::Duration::from_millis(600);
    let v = vol.clone();
    let switching = std::thread::spawn(move || v.reload_when_ready(vf(new), Some(limit)));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        vol.graph().id(),
        first,
        "switched before the new graph's brick said anything"
    );
    // It never speaks: the switch happens at the limit all the same.
    assert!(matches!(
        switching.join().expect("reload"),
        Ok(Reload::Switched { .. })
    ));
    assert_ne!(vol.graph().id(), first);
    // Without a limit (current-thread hosts, tests) it switches at once, as before.
    let v2 = Arc::new(Volume::new(vf(old), registry()).expect("builds"));
    let before = v2.graph().id();
    assert!(matches!(v2.reload(vf(new)), Ok(Reload::Switched { .. })));
    assert_ne!(v2.graph().id(), before);
}
