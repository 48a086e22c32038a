//! debug/io-stats over a test leaf: what it counts, and that it changes nothing.

use serde_json::Value;
use xlator_api::{Buf, Ctx, Errno, Fop, Gfid, Loc, Subvol};
use xlfs_io_stats::IoStats;
use xlfs_testkit::build::{try_build, try_options_for};
use xlfs_testkit::every_fop::call_every_fop;
use xlfs_testkit::stub_leaf::{FILE_SIZE, FSYNC_DELAY, StubLeaf, ro_fd, rw_fd};

fn stats_over_leaf(set: &[(&str, &str)]) -> Subvol {
    try_build::<IoStats>("stats", set, vec![StubLeaf::new()]).expect("io-stats builds")
}

fn json(sv: &Subvol) -> Value {
    serde_json::from_str(&sv.dump().to_json()).expect("the JSON dump parses")
}

async fn lookup(sv: &Subvol, name: &str) -> Result<(), Errno> {
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, name))
        .await
        .map(|_| ())
}

#[tokio::test]
async fn every_fop_is_counted_and_replies_pass_unchanged() {
    let sv = stats_over_leaf(&[]);
    let cx = Ctx::root();
    let through = call_every_fop(&sv, &cx).await;
    let direct = call_every_fop(&StubLeaf::new(), &cx).await;
    assert_eq!(through, direct, "io-stats must not change any reply");
    assert_eq!(through.len(), Fop::COUNT);

    let v = json(&sv);
    assert_eq!(v["total_calls"], Fop::COUNT as u64);
    for (fop, r) in &through {
        let f = &v["fops"][fop.name()];
        assert_eq!(f["calls"], 1, "{fop} not counted: {f}");
        assert_eq!(f["latency_us"]["count"], 1, "{fop} not timed");
        match r {
            Ok(()) => assert_eq!(f["errors"], 0, "{fop}"),
            Err(e) => {
                assert_eq!(f["errors"], 1, "{fop}");
                let name = e.name().expect("a known errno");
                assert_eq!(f["errnos"][name], 1, "{fop}: {f}");
            }
        }
    }
    // The leaf implements only a few fops; the rest reached it and came back ENOSYS.
    assert_eq!(v["fops"]["statfs"]["errnos"]["ENOSYS"], 1);
}

#[tokio::test]
async fn errors_are_counted_per_errno() {
    let sv = stats_over_leaf(&[]);
    for name in ["a", "missing", "missing", "forbidden"] {
        let _ = lookup(&sv, name).await;
    }
    assert_eq!(lookup(&sv, "missing").await, Err(Errno::ENOENT));
    let v = json(&sv);
    let l = &v["fops"]["lookup"];
    assert_eq!(
        (l["calls"].as_u64(), l["errors"].as_u64()),
        (Some(5), Some(4))
    );
    assert_eq!(l["errnos"], serde_json::json!({"ENOENT": 3, "EACCES": 1}));
    assert_eq!(v["total_errors"], 4);
}

#[tokio::test]
async fn bytes_read_and_written_are_counted() {
    let sv = stats_over_leaf(&[]);
    let cx = Ctx::root();
    assert_eq!(
        sv.readv(&cx, rw_fd(), 0, 4096).await.map(|b| b.data.len()),
        Ok(4096)
    );
    // A short read at the end of the file counts what came back, not what was asked.
    assert_eq!(
        sv.readv(&cx, rw_fd(), FILE_SIZE - 100, 4096)
            .await
            .map(|b| b.data.len()),
        Ok(100)
    );
    assert_eq!(
        sv.writev(&cx, rw_fd(), 0, Buf::zeroed(8192), 0)
            .await
            .map(|r| r.written),
        Ok(8192)
    );
    assert_eq!(
        sv.writev(&cx, rw_fd(), 0, Buf::from("hello"), 0)
            .await
            .map(|r| r.written),
        Ok(5)
    );
    // A failed write moves no bytes.
    assert_eq!(
        sv.writev(&cx, ro_fd(), 0, Buf::zeroed(1000), 0).await,
        Err(Errno::EBADF)
    );

    let v = json(&sv);
    assert_eq!(v["bytes_read"], 4196);
    assert_eq!(v["bytes_written"], 8197);
    assert_eq!(v["fops"]["readv"]["bytes"], 4196);
    assert_eq!(v["fops"]["writev"]["bytes"], 8197);
    assert_eq!(v["fops"]["writev"]["errnos"]["EBADF"], 1);
    assert_eq!(v["write_sizes"]["count"], 2);
    assert_eq!(v["write_sizes"]["max"], 8192);
    assert_eq!(v["read_sizes"]["min"], 100);

    let text = sv.dump().to_text(0);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("writev "))
        .expect("a writev row")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["writev", "3", "1", "8197"], "{text}");
    assert!(text.contains("totals: 5 calls, 1 errors, 4196 bytes read, 8197 bytes written"));
    // The core heads the dump with `[name (debug/io-stats)]`: the type is not said again.
    assert!(!text.contains("debug/io-stats"), "{text}");
    assert!(text.starts_with("uptime "), "{text}");
}

#[tokio::test]
async fn latency_histogram_sees_slow_fops() {
    let sv = stats_over_leaf(&[]);
    for _ in 0..3 {
        sv.fsync(&Ctx::root(), rw_fd(), false).await.expect("fsync");
    }
    let _ = lookup(&sv, "a").await;
    let v = json(&sv);
    let h = &v["fops"]["fsync"]["latency_us"];
    let floor = FSYNC_DELAY.as_micros() as u64;
    assert_eq!(h["count"], 3);
    assert!(h["min"].as_u64() >= Some(floor), "{h}");
    assert!(h["p50"].as_u64() >= Some(floor / 2), "{h}");
    assert!(h["max"].as_u64() >= h["p99"].as_u64(), "{h}");
    let buckets = h["buckets"].as_array().expect("bucket list");
    let total: u64 = buckets.iter().filter_map(|b| b["count"].as_u64()).sum();
    assert_eq!(total, 3);
    // The in-memory lookup is far faster than the sleeping fsync.
    assert!(v["fops"]["lookup"]["latency_us"]["max"].as_u64() < h["min"].as_u64());
}

#[tokio::test]
async fn reconfigure_toggles_counting_and_timing() {
    let sv = stats_over_leaf(&[]);
    let _ = lookup(&sv, "a").await;

    let off = try_options_for::<IoStats>(&[("count-fop-hits", "off")]).expect("options");
    sv.reconfigure(off).expect("reconfigure");
    let _ = lookup(&sv, "a").await;
    let v = json(&sv);
    assert_eq!(v["count_fop_hits"], false);
    assert_eq!(
        v["fops"]["lookup"]["calls"], 1,
        "not counted while count-fop-hits is off"
    );
    assert_eq!(v["fops"]["lookup"]["latency_us"]["count"], 2, "still timed");
    assert!(
        sv.dump()
            .to_text(0)
            .contains("count-fop-hits off, latency-measurement on")
    );

    let off = try_options_for::<IoStats>(&[("latency-measurement", "off")]).expect("options");
    sv.reconfigure(off).expect("reconfigure");
    let _ = lookup(&sv, "a").await;
    let v = json(&sv);
    assert_eq!(v["latency_measurement"], false);
    assert_eq!(v["fops"]["lookup"]["calls"], 2);
    assert_eq!(
        v["fops"]["lookup"]["latency_us"]["count"], 2,
        "not timed while off"
    );

    sv.reconfigure(try_options_for::<IoStats>(&[]).expect("defaults"))
        .expect("reconfigure");
    let _ = lookup(&sv, "a").await;
    let v = json(&sv);
    assert_eq!(v["fops"]["lookup"]["calls"], 3);
    assert_eq!(v["fops"]["lookup"]["latency_us"]["count"], 3);
}

#[tokio::test]
async fn invalid_reconfigure_changes_nothing() {
    let sv = stats_over_leaf(&[]);
    let bad = try_options_for::<IoStats>(&[("count-fop-hits", "off"), ("dump-path", "rel/path")])
        .expect("options pass the schema; the path check is the translator's");
    let e = sv.reconfigure(bad).expect_err("relative dump-path");
    assert!(e.contains("dump-path"), "{e}");
    let _ = lookup(&sv, "a").await;
    assert_eq!(json(&sv)["fops"]["lookup"]["calls"], 1);
}

#[tokio::test]
async fn init_checks_children_and_options() {
    let e = try_build::<IoStats>("stats", &[], Vec::new()).expect_err("no child");
    assert!(e.contains("exactly one subvolume, got 0"), "{e}");
    let e = try_build::<IoStats>("stats", &[], vec![StubLeaf::new(), StubLeaf::new()])
        .expect_err("two children");
    assert!(e.contains("got 2"), "{e}");
    let e = try_build::<IoStats>("stats", &[("dump-path", "x.json")], vec![StubLeaf::new()])
        .expect_err("relative dump-path");
    assert!(e.contains("not an absolute path"), "{e}");
}

#[tokio::test]
async fn idle_dumps() {
    let sv = stats_over_leaf(&[]);
    let text = sv.dump().to_text(0);
    // The core heads each dump with the instance and its type (`[stats (debug/io-stats)]`,
    // `"type"` in JSON): the dump itself does not repeat them.
    assert!(text.starts_with("uptime "), "{text}");
    assert!(text.contains("no fops yet"), "{text}");
    let v = json(&sv);
    assert_eq!(v["fops"], serde_json::json!({}));
    assert!(v.get("type").is_none(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_fops_are_all_counted() {
    let sv = stats_over_leaf(&[]);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let sv = sv.clone();
            tokio::spawn(async move {
                for i in 0..500 {
                    let _ = lookup(&sv, if i % 5 == 0 { "missing" } else { "a" }).await;
                    let _ = sv
                        .writev(&Ctx::root(), rw_fd(), 0, Buf::zeroed(10), 0)
                        .await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let v = json(&sv);
    assert_eq!(v["fops"]["lookup"]["calls"], 4000);
    assert_eq!(v["fops"]["lookup"]["errnos"]["ENOENT"], 800);
    assert_eq!(v["fops"]["lookup"]["latency_us"]["count"], 4000);
    assert_eq!(v["bytes_written"], 40_000);
}
