//! Periodic dumps to a file, driven by `dump-interval`/`dump-path` and reconfigure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use xlator_api::{Ctx, Gfid, Loc};
use xlfs_io_stats::IoStats;
use xlfs_testkit::StubLeaf;
use xlfs_testkit::build::{try_build, try_options_for};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xlfs-io-stats-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Waits (up to 5 s) until `path` holds a dump satisfying `ok`.
async fn wait_for(path: &Path, ok: impl Fn(&str) -> bool) -> String {
    for _ in 0..500 {
        if let Ok(s) = std::fs::read_to_string(path)
            && ok(&s)
        {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no matching dump appeared at {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dumps_are_written_periodically_and_follow_reconfigure() {
    let dir = temp_dir("periodic");
    let json_path = dir.join("stats.json");
    let json_s = json_path.to_str().expect("utf-8 path");
    let set = [("dump-interval", "20ms"), ("dump-path", json_s)];
    let sv = try_build::<IoStats>("stats", &set, vec![StubLeaf::new()]).expect("builds");
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "a"))
        .await
        .expect("lookup");

    let s = wait_for(&json_path, |s| s.contains("\"lookup\"")).await;
    let v: serde_json::Value = serde_json::from_str(&s).expect("a whole JSON dump");
    assert_eq!(v["fops"]["lookup"]["calls"], 1);

    // Switch to a text dump in another file.
    let text_path = dir.join("stats.txt");
    let text_s = text_path.to_str().expect("utf-8 path");
    let set = [
        ("dump-interval", "20ms"),
        ("dump-path", text_s),
        ("dump-format", "text"),
    ];
    sv.reconfigure(try_options_for::<IoStats>(&set).expect("options"))
        .expect("reconfigure");
    let t = wait_for(&text_path, |s| s.contains("lookup")).await;
    assert!(t.starts_with("debug/io-stats \"stats\""), "{t}");

    // Off: the file stops changing.
    sv.reconfigure(try_options_for::<IoStats>(&[]).expect("options"))
        .expect("reconfigure");
    tokio::time::sleep(Duration::from_millis(60)).await;
    std::fs::remove_file(&text_path).expect("remove dump");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!text_path.exists(), "dumps continued after dump-interval 0");

    // And on again.
    sv.reconfigure(try_options_for::<IoStats>(&set).expect("options"))
        .expect("reconfigure");
    wait_for(&text_path, |s| s.contains("lookup")).await;

    drop(sv);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_task_ends_with_the_translator() {
    let dir = temp_dir("drop");
    let path = dir.join("stats.json");
    let set = [
        ("dump-interval", "10ms"),
        ("dump-path", path.to_str().expect("utf-8")),
    ];
    let sv = try_build::<IoStats>("stats", &set, vec![StubLeaf::new()]).expect("builds");
    wait_for(&path, |_| true).await;
    drop(sv);
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::remove_file(&path).expect("remove dump");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!path.exists(), "the dump task outlived its translator");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
