//! ABI failure modes, each with a real `.so`: a library from another release, a library with
//! another layout, a panicking constructor, panicking fops, and a type that is nowhere.

use std::sync::Arc;

use xlator_api::{Ctx, Errno, Gfid, Loc};
use xlfs_core::graph::Graph;
use xlfs_core::loader::{self, LoadError};
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;
use xlfs_integration_tests::{deps_dir, plugin};

#[test]
fn library_from_another_release_is_refused_in_one_line_naming_both() {
    let path = plugin("xlfs-abi-wrong-build");
    let Err(err) = loader::load(&path) else {
        panic!("loaded a mismatched build")
    };
    assert!(matches!(err, LoadError::BuildMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(
        msg.contains("xlator-api 0.1.0"),
        "names the library's side: {msg}"
    );
    assert!(
        msg.contains(xlator_api::build_id()),
        "names the core's side: {msg}"
    );
    assert!(msg.contains("rebuild"), "says what to do: {msg}");
}

#[test]
fn library_with_another_layout_is_refused_in_one_line() {
    let path = plugin("xlfs-abi-wrong-layout");
    let Err(err) = loader::load(&path) else {
        panic!("loaded a mismatched layout")
    };
    let LoadError::Layout { summary, full, .. } = &err else {
        panic!("not a layout error: {err}")
    };
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(msg.contains("ABI layout differs"), "{msg}");
    assert!(
        summary.len() <= 300 && full.len() > summary.len(),
        "full report kept for debug"
    );
}

#[test]
fn missing_type_names_every_path_searched() {
    let dirs = vec![std::env::temp_dir().join("xlfs-no-such-dir"), deps_dir()];
    let reg = Registry::with_search_path(dirs.clone(), false);
    let Err(err) = reg.resolve("performance/no-such-thing") else {
        panic!("found a ghost")
    };
    let msg = err.to_string();
    for d in &dirs {
        assert!(
            msg.contains(&d.join("libxlfs_no_such_thing.so").display().to_string()),
            "{msg}"
        );
        assert!(
            msg.contains(&d.join("libno_such_thing.so").display().to_string()),
            "{msg}"
        );
    }
    assert!(
        msg.contains("performance/no_such_thing.so")
            || msg.contains("performance/no-such-thing.so"),
        "{msg}"
    );
}

fn panicky_registry() -> Arc<Registry> {
    let reg = Registry::with_search_path(vec![], true);
    reg.load_library(&plugin("xlfs-abi-panicky"))
        .expect("panicky plugin loads");
    Arc::new(reg)
}

#[test]
fn panicking_init_is_refused_with_an_error() {
    let reg = panicky_registry();
    let vf = Volfile::parse(
        r#"( volumes: [ (name: "p", type: "test/panic-init") ] )"#,
        "t.vol",
    )
    .expect("parses");
    let Err(err) = Graph::build(vf, &reg) else {
        panic!("built a graph with a panicking init")
    };
    let msg = err.to_string();
    assert!(msg.contains("\"p\"") && msg.contains("panicked"), "{msg}");
    assert!(msg.contains("constructor exploded on purpose"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_fops_return_eio_and_the_process_lives() {
    let reg = panicky_registry();
    let vf = Volfile::parse(
        r#"( volumes: [ (name: "p", type: "test/panic-fop") ] )"#,
        "t.vol",
    )
    .expect("parses");
    let graph = Graph::build(vf, &reg).expect("builds");
    let top = graph.top();
    let cx = Ctx::root();
    // Panic while polled.
    assert_eq!(
        top.lookup(&cx, Loc::new(Gfid::ROOT, "boom")).await,
        Err(Errno::EIO)
    );
    // Panic in the synchronous part of the fop method.
    assert_eq!(top.stat(&cx, Gfid::ROOT).await, Err(Errno::EIO));
    // Panic in a spawned background task: the fop itself succeeds.
    assert_eq!(top.access(&cx, Gfid::ROOT, 0).await, Ok(()));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Still alive and answering.
    assert_eq!(
        top.lookup(&cx, Loc::new(Gfid::ROOT, "calm"))
            .await
            .map(|_| ()),
        Err(Errno::ENOENT)
    );
    // Fops it does not override pass to its (absent) child: ENOSYS.
    assert_eq!(top.readlink(&cx, Gfid::ROOT).await, Err(Errno::ENOSYS));
}
