//! Growing and shrinking a mounted volume with the CLI (issue 23 part 6): `volume add-brick`
//! while mounted, `volume rebalance` with a writer running (and a runner killed halfway),
//! `volume remove-brick start/status/commit`. Needs root, /dev/fuse and `xlfsd`, `xlfs-mount`
//! and `xlfs-rebalance` next to `xlfs` (`cargo build --workspace`). Without them the tests
//! say why and pass, unless `XLFS_E2E_REQUIRE=1`.
//!
//! `XLFS_KEEP_TEST_DIR=1` keeps each test's bricks, state and logs for a look after a failure.
//! `XLFS_REBALANCE_FILES` sizes the process tests (files in up to 100 directories; default
//! 10000 for the test with a writer, 3000 for the killed-and-resumed run).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{Cleanup, bin, free_port, mounted, ok, skip, xlfs_raw};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A scratch directory; kept (bricks, state, logs) when `XLFS_KEEP_TEST_DIR=1`, to look at
/// a failure (the processes are stopped either way).
fn scratch_dir() -> tempfile::TempDir {
    let keep = std::env::var_os("XLFS_KEEP_TEST_DIR").is_some_and(|v| v == "1");
    let dir = tempfile::Builder::new()
        .prefix("xlfs-rebalance-test.")
        .disable_cleanup(keep)
        .tempdir()
        .expect("tempdir");
    if keep {
        eprintln!("keeping {}", dir.path().display());
    }
    dir
}

/// Skips unless xlfs-rebalance is built too.
fn skip_all(test: &str) -> bool {
    if skip(test) {
        return true;
    }
    if !bin("xlfs-rebalance").is_file() {
        if std::env::var_os("XLFS_E2E_REQUIRE").is_some_and(|v| v == "1") {
            panic!("{test}: xlfs-rebalance is not built next to xlfs");
        }
        eprintln!("SKIPPED {test}: xlfs-rebalance is not built (cargo build --workspace)");
        return true;
    }
    false
}

/// Kills a rebalance runner a test left behind (the status file names it), after the volume's
/// own cleanup ran.
struct RunnerGuard {
    status: PathBuf,
}

impl Drop for RunnerGuard {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(&self.status)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["pid"].as_i64())
            .unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if pid > 0 && String::from_utf8_lossy(&cmdline).contains("xlfs-rebalance") {
            // SAFETY: kill(2) on the runner this test started (checked by its command line).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

/// A volume of this test: state dir, bricks, mount points, and the guards.
struct Vol {
    tmp: PathBuf,
    state: PathBuf,
    name: String,
    // Dropped in order: the volume (stop, kill, unmount), then a stray runner.
    _cleanup: Cleanup,
    _runner: RunnerGuard,
}

impl Vol {
    fn new(tmp: &Path, name: &str, mounts: usize) -> Vol {
        let state = tmp.join("state");
        let mountpoints: Vec<PathBuf> = (0..mounts).map(|i| tmp.join(format!("mnt{i}"))).collect();
        for m in &mountpoints {
            std::fs::create_dir_all(m).expect("mkdir mnt");
        }
        Vol {
            tmp: tmp.to_path_buf(),
            state: state.clone(),
            name: name.into(),
            _cleanup: Cleanup {
                state: state.clone(),
                volume: name.into(),
                mountpoints,
                children: Vec::new(),
            },
            _runner: RunnerGuard {
                status: state.join("volumes").join(name).join("rebalance.json"),
            },
        }
    }

    fn brick(&self, i: usize) -> PathBuf {
        self.tmp.join(format!("b{i}"))
    }

    fn mnt(&self, i: usize) -> PathBuf {
        self.tmp.join(format!("mnt{i}"))
    }

    fn x(&self, args: &[&str]) -> Output {
        xlfs_raw(&self.state, args)
    }

    /// `xlfs volume ARGS...` with the volume name second.
    fn vol(&self, verb: &str, rest: &[&str]) -> Output {
        let mut args = vec!["volume", verb, &self.name];
        args.extend_from_slice(rest);
        self.x(&args)
    }

    fn create_start_mount(&self, bricks: usize, mounts: usize) {
        let list: Vec<String> = (0..bricks).map(|i| s(&self.brick(i))).collect();
        let mut args = vec!["volume", "create", &self.name];
        args.extend(list.iter().map(String::as_str));
        // Room above the first ports for the bricks added later.
        let port = free_port().to_string();
        args.extend(["--port", &port]);
        ok(&self.x(&args));
        ok(&self.vol("start", &[]));
        for m in 0..mounts {
            ok(&self.x(&["mount", &self.name, &s(&self.mnt(m))]));
            assert!(mounted(&self.mnt(m)));
        }
    }

    /// The runner's status file as `rebalance status --json` prints it.
    fn status(&self, verb: &str) -> serde_json::Value {
        let o = if verb == "rebalance" {
            self.vol("rebalance", &["status", "--json"])
        } else {
            self.vol("remove-brick", &["status", "--json"])
        };
        ok(&o);
        json(&o)
    }

    /// Waits until the run is no longer running (or `timeout`), returns its status.
    fn wait_done(&self, verb: &str, timeout: Duration) -> serde_json::Value {
        let end = Instant::now() + timeout;
        loop {
            let st = self.status(verb);
            if st["state"] != "running" {
                return st;
            }
            assert!(
                Instant::now() < end,
                "the {verb} did not finish within {timeout:?}: {st}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// The content of file `name` before any append: 64 to ~4 KiB, from the name.
fn content(name: &str) -> Vec<u8> {
    let mut h = DefaultHasher::new();
    h.write(name.as_bytes());
    let n = 64 + (h.finish() % 4000) as usize;
    let line = format!("{name} ");
    line.bytes().cycle().take(n).collect()
}

fn checksum(data: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(data);
    h.finish()
}

/// Names of the files: `dNN/fNNNNN`, `dirs` directories.
fn names(files: usize, dirs: usize) -> Vec<String> {
    (0..files)
        .map(|i| format!("d{:02}/f{i:05}", i % dirs))
        .collect()
}

/// A cluster/distribute link file: mode `---------T`, no data.
fn is_link_file(m: &std::fs::Metadata) -> bool {
    let mode = m.permissions().mode() & 0o7777;
    m.is_file() && mode == 0o1000
}

/// Where each file's data is, brick by brick; fails on a link file or a second data copy of
/// `names`, and with `everywhere` on any link file in the bricks' top two levels.
fn placement(bricks: &[PathBuf], names: &[String], everywhere: bool) -> Vec<usize> {
    let mut per_brick = vec![0; bricks.len()];
    let mut problems = Vec::new();
    for name in names {
        let mut holders = Vec::new();
        for (i, b) in bricks.iter().enumerate() {
            let Ok(m) = std::fs::symlink_metadata(b.join(name)) else {
                continue;
            };
            if is_link_file(&m) {
                problems.push(format!("{name}: link file left on brick {i}"));
            } else {
                holders.push(i);
            }
        }
        match holders.as_slice() {
            [one] => per_brick[*one] += 1,
            other => problems.push(format!("{name}: data on bricks {other:?}")),
        }
    }
    // No link file anywhere else either (names the test did not write).
    for (i, b) in bricks.iter().enumerate().filter(|_| everywhere) {
        for d in std::fs::read_dir(b).expect("brick").flatten() {
            if !d.path().is_dir() || d.file_name() == ".xlfs" {
                continue;
            }
            for e in std::fs::read_dir(d.path()).expect("brick dir").flatten() {
                if e.metadata().is_ok_and(|m| is_link_file(&m)) {
                    problems.push(format!("brick {i}: link file {}", e.path().display()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} placement problems, first: {:?}",
        problems.len(),
        &problems[..problems.len().min(10)]
    );
    per_brick
}

/// Every file reads back as expected through `mnt`.
fn verify_all(mnt: &Path, names: &[String], expected: &BTreeMap<String, Vec<u8>>) {
    let mut bad = Vec::new();
    for n in names {
        let want = &expected[n];
        match std::fs::read(mnt.join(n)) {
            Ok(d) if checksum(&d) == checksum(want) => {}
            Ok(d) => {
                let first = d.iter().zip(want.iter()).position(|(a, b)| a != b);
                let at = |v: &[u8], i: usize| {
                    String::from_utf8_lossy(&v[i.min(v.len())..(i + 40).min(v.len())]).into_owned()
                };
                let i = first.unwrap_or(d.len().min(want.len()));
                bad.push(format!(
                    "{n}: {} bytes, want {}; first difference at {i}: {:?} instead of {:?}",
                    d.len(),
                    want.len(),
                    at(&d, i),
                    at(want, i)
                ));
            }
            Err(e) => bad.push(format!("{n}: {e}")),
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} files wrong through {}: {:?}",
        bad.len(),
        names.len(),
        mnt.display(),
        &bad[..bad.len().min(10)]
    );
}

/// Appends a line to each of `files` in turn through `mnt` until told to stop; returns each
/// file's appended bytes.
fn appender(
    mnt: PathBuf,
    files: Vec<String>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<String, Vec<u8>>> {
    std::thread::spawn(move || {
        let mut added: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut round = 0;
        while !stop.load(Ordering::Relaxed) {
            for f in &files {
                let line = format!("append {round} to {f}\n");
                let mut h = std::fs::OpenOptions::new()
                    .append(true)
                    .open(mnt.join(f))
                    .unwrap_or_else(|e| panic!("open {f} to append (round {round}): {e}"));
                h.write_all(line.as_bytes())
                    .unwrap_or_else(|e| panic!("append to {f} (round {round}): {e}"));
                drop(h);
                added.entry(f.clone()).or_default().extend(line.as_bytes());
            }
            round += 1;
        }
        added
    })
}

#[test]
fn add_brick_grows_a_mounted_distribute_2_and_the_mount_follows() {
    if skip_all("add_brick_grows_a_mounted_distribute_2_and_the_mount_follows") {
        return;
    }
    let tmp = scratch_dir();
    let v = Vol::new(tmp.path(), "grow", 1);
    v.create_start_mount(2, 1);
    let mnt = v.mnt(0);
    let files = names(60, 3);
    for d in 0..3 {
        std::fs::create_dir(mnt.join(format!("d{d:02}"))).expect("mkdir");
    }
    for n in &files {
        std::fs::write(mnt.join(n), content(n)).expect("write");
    }

    // Bad input first: nothing changes.
    let o = v.x(&["volume", "add-brick", "nosuch", &s(&v.brick(2))]);
    assert_eq!(code(&o), Some(4), "unknown volume: {}", text(&o));
    let o = v.vol("add-brick", &[&s(&v.brick(1))]);
    assert_eq!(code(&o), Some(3), "{}", text(&o));
    assert!(text(&o).contains("already used"), "{}", text(&o));
    let o = v.vol("add-brick", &[&s(&v.brick(1).join("inside"))]);
    assert_eq!(code(&o), Some(3), "nested: {}", text(&o));
    // Wrong multiple: a replica 2 volume (not started) of another state directory.
    let other = tmp.path().join("other-state");
    let o = xlfs_raw(
        &other,
        &[
            "volume",
            "create",
            "r2",
            &s(&tmp.path().join("r0")),
            &s(&tmp.path().join("r1")),
            "--replica",
            "2",
            "--port",
            &free_port().to_string(),
        ],
    );
    ok(&o);
    let o = xlfs_raw(
        &other,
        &["volume", "add-brick", "r2", &s(&tmp.path().join("r2"))],
    );
    assert_eq!(code(&o), Some(3), "{}", text(&o));
    assert!(text(&o).contains("added 2 at a time"), "{}", text(&o));
    let info = json(&v.vol("info", &["--json"]));
    assert_eq!(info["bricks"].as_array().map(Vec::len), Some(2));

    let o = v.vol("add-brick", &[&s(&v.brick(2)), &s(&v.brick(3))]);
    ok(&o);
    assert!(
        text(&o).contains("distribute 2 -> distribute 4"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("next: xlfs volume rebalance grow start"),
        "{}",
        text(&o)
    );
    let info = json(&v.vol("info", &["--json"]));
    assert_eq!(info["layout"], "distribute 4");
    assert_eq!(
        info["bricks"],
        serde_json::json!([
            s(&v.brick(0)),
            s(&v.brick(1)),
            s(&v.brick(2)),
            s(&v.brick(3))
        ])
    );
    let subs: Vec<&str> = info["subvolumes"]
        .as_array()
        .expect("subvolumes")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        subs,
        [
            "grow-client-0",
            "grow-client-1",
            "grow-client-2",
            "grow-client-3"
        ]
    );
    let st = v.vol("status", &["--json"]);
    ok(&st);
    let st = json(&st);
    assert_eq!(st["bricks"].as_array().map(Vec::len), Some(4));
    assert_eq!(st["online"], true);

    // The mount switched to the new graph by itself: its dump shows the new clients.
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let o = v.vol("statedump", &["--client", &s(&mnt), "--json"]);
        ok(&o);
        if text(&o).contains("grow-client-3") {
            break;
        }
        assert!(
            Instant::now() < end,
            "the mount did not take the new graph: {}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let expected: BTreeMap<String, Vec<u8>> =
        files.iter().map(|n| (n.clone(), content(n))).collect();
    verify_all(&mnt, &files, &expected);
    // New directories are made on every brick, the new ones included.
    std::fs::create_dir(mnt.join("after")).expect("mkdir after the switch");
    for i in 0..4 {
        assert!(v.brick(i).join("after").is_dir(), "brick {i} lacks the dir");
    }
    let many: Vec<String> = (0..40).map(|i| format!("after/n{i}")).collect();
    for n in &many {
        std::fs::write(mnt.join(n), content(n)).expect("write after");
    }
    let per = placement(
        &(0..4).map(|i| v.brick(i)).collect::<Vec<_>>(),
        &many,
        false,
    );
    assert!(
        per[2] + per[3] > 0,
        "no new file on the new bricks: {per:?}"
    );
}

/// `XLFS_REBALANCE_FILES`, or `default`.
fn file_count(default: usize) -> usize {
    std::env::var("XLFS_REBALANCE_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A started distribute 2 volume with two mounts, filled with `n_files` files in up to 100
/// directories from mount A while mount B reads each file as soon as it is written.
fn filled(tmp: &Path, name: &str, n_files: usize) -> (Vol, Vec<String>) {
    let t0 = Instant::now();
    let n_dirs = 100.min(n_files.max(1));
    let v = Vol::new(tmp, name, 2);
    v.create_start_mount(2, 2);
    let (a, b) = (v.mnt(0), v.mnt(1));
    let files = names(n_files, n_dirs);
    for d in 0..n_dirs {
        std::fs::create_dir(a.join(format!("d{d:02}"))).expect("mkdir");
    }
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut read = 0;
        for n in rx {
            let d = std::fs::read(b.join(&n)).unwrap_or_else(|e| panic!("mount B reads {n}: {e}"));
            assert_eq!(checksum(&d), checksum(&content(&n)), "mount B reads {n}");
            read += 1;
        }
        read
    });
    for n in &files {
        std::fs::write(a.join(n), content(n)).unwrap_or_else(|e| panic!("write {n}: {e}"));
        tx.send(n.clone()).expect("reader alive");
    }
    drop(tx);
    assert_eq!(reader.join().expect("reader"), n_files);
    eprintln!("filled {n_files} files in {:?}", t0.elapsed());
    (v, files)
}

/// add-brick two bricks (ids `first`, `first + 1`) and give both mounts time to switch
/// (they poll the client volfile every second).
fn add_two(v: &Vol, first: usize) {
    ok(&v.vol("add-brick", &[&s(&v.brick(first)), &s(&v.brick(first + 1))]));
    std::thread::sleep(Duration::from_secs(2));
}

/// The process test: distribute 2 filled from one mount while another reads,
/// add-brick two bricks, rebalance to completion with a writer appending meanwhile; then
/// every file reads back right from both mounts, has exactly one data copy, no link file is
/// left, and the new bricks hold their share.
#[test]
fn rebalance_after_add_brick_with_a_writer_moves_every_file_once() {
    if skip_all("rebalance_after_add_brick_with_a_writer_moves_every_file_once") {
        return;
    }
    let t0 = Instant::now();
    let n_files = file_count(10_000);
    let tmp = scratch_dir();
    let (v, files) = filled(tmp.path(), "reb", n_files);
    let (a, b) = (v.mnt(0), v.mnt(1));
    add_two(&v, 2);

    // Rebalance with a writer appending to some files meanwhile.
    let appended: Vec<String> = files.iter().step_by(97).cloned().collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = appender(a.clone(), appended, stop.clone());
    let t1 = Instant::now();
    ok(&v.vol("rebalance", &["start"]));
    let st = v.wait_done("rebalance", Duration::from_secs(900));
    let took = t1.elapsed();
    stop.store(true, Ordering::Relaxed);
    let added = writer.join().expect("the appender failed");
    let mut summary = st.clone();
    summary["done_dirs"] = serde_json::json!("...");
    eprintln!("rebalance took {took:?}: {summary}");
    assert_eq!(st["state"], "completed", "{summary}");
    assert_eq!(st["failures"], 0, "{summary}");
    assert_eq!(st["files_skipped"], 0, "{summary}");
    assert!(
        st["files_scanned"].as_u64() >= Some(n_files as u64),
        "{summary}"
    );
    let human = v.vol("rebalance", &["status"]);
    ok(&human);
    assert!(text(&human).contains("completed"), "{}", text(&human));
    assert!(
        added.values().all(|a| !a.is_empty()),
        "the appender never ran"
    );

    let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for n in &files {
        let mut data = content(n);
        if let Some(extra) = added.get(n) {
            data.extend_from_slice(extra);
        }
        expected.insert(n.clone(), data);
    }
    verify_all(&a, &files, &expected);
    verify_all(&b, &files, &expected);
    let four: Vec<PathBuf> = (0..4).map(|i| v.brick(i)).collect();
    let per = placement(&four, &files, true);
    eprintln!("files per brick after the rebalance: {per:?}");
    let on_new = (per[2] + per[3]) as u64;
    assert!(
        on_new >= n_files as u64 / 5,
        "only {on_new} of {n_files} files on the new bricks: {per:?}"
    );
    assert!(st["files_moved"].as_u64() >= Some(on_new), "{summary}");
    eprintln!("whole test {:?}", t0.elapsed());
}

/// A rebalance killed (-9) halfway reads as interrupted, and `start` resumes it (counters
/// kept) to completion with every file in place.
#[test]
fn a_rebalance_killed_halfway_resumes_and_finishes() {
    if skip_all("a_rebalance_killed_halfway_resumes_and_finishes") {
        return;
    }
    let t0 = Instant::now();
    let n_files = file_count(3_000);
    let tmp = scratch_dir();
    let (v, files) = filled(tmp.path(), "kill", n_files);
    add_two(&v, 2);
    ok(&v.vol("rebalance", &["start"]));
    let end = Instant::now() + Duration::from_secs(300);
    let killed = loop {
        let st = v.status("rebalance");
        let scanned = st["files_scanned"].as_u64().unwrap_or(0);
        assert!(
            st["state"] == "running",
            "the run ended ({}) before it could be killed halfway; raise \
             XLFS_REBALANCE_FILES: {st}",
            st["state"]
        );
        if scanned >= n_files as u64 / 3 {
            let pid = st["pid"].as_i64().expect("pid") as libc::pid_t;
            // SAFETY: kill(2) on the runner the CLI started for this test.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            break st;
        }
        assert!(Instant::now() < end, "no progress: {st}");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(300));
    let o = v.vol("rebalance", &["status"]);
    ok(&o);
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    // A second start while none runs resumes; while one runs it is refused.
    let o = v.vol("rebalance", &["start"]);
    ok(&o);
    assert!(text(&o).contains("resumed"), "{}", text(&o));
    let o = v.vol("rebalance", &["start"]);
    let st = v.status("rebalance");
    if st["state"] == "running" {
        assert_eq!(code(&o), Some(5), "{}", text(&o));
    }
    let st = v.wait_done("rebalance", Duration::from_secs(600));
    let mut summary = st.clone();
    summary["done_dirs"] = serde_json::json!("...");
    eprintln!(
        "killed at files_scanned {}; resumed to {summary}",
        killed["files_scanned"]
    );
    assert_eq!(st["state"], "completed", "{summary}");
    assert_eq!(st["failures"], 0, "{summary}");
    assert!(
        st["files_scanned"].as_u64() >= killed["files_scanned"].as_u64(),
        "counters were kept: {summary}"
    );
    let vs = json(&v.vol("status", &["--json"]));
    assert_eq!(vs["rebalance"]["state"], "completed", "{vs}");
    assert_eq!(vs["rebalance"]["running"], false, "{vs}");
    let expected: BTreeMap<String, Vec<u8>> =
        files.iter().map(|n| (n.clone(), content(n))).collect();
    verify_all(&v.mnt(0), &files, &expected);
    verify_all(&v.mnt(1), &files, &expected);
    let four: Vec<PathBuf> = (0..4).map(|i| v.brick(i)).collect();
    let per = placement(&four, &files, true);
    eprintln!("files per brick after the resumed rebalance: {per:?}");
    assert!(
        per[2] + per[3] >= n_files / 5,
        "the resumed run moved too little: {per:?}"
    );
    eprintln!("whole test {:?}", t0.elapsed());
}

#[test]
fn remove_brick_moves_the_files_off_then_commit_takes_it_out() {
    if skip_all("remove_brick_moves_the_files_off_then_commit_takes_it_out") {
        return;
    }
    let tmp = scratch_dir();
    let v = Vol::new(tmp.path(), "shrink", 1);
    v.create_start_mount(3, 1);
    let mnt = v.mnt(0);
    let files = names(300, 3);
    for d in 0..3 {
        std::fs::create_dir(mnt.join(format!("d{d:02}"))).expect("mkdir");
    }
    for n in &files {
        std::fs::write(mnt.join(n), content(n)).expect("write");
    }
    let three: Vec<PathBuf> = (0..3).map(|i| v.brick(i)).collect();
    let before = placement(&three, &files, true);
    assert!(before[2] > 0, "nothing on brick 2 to move: {before:?}");
    let expected: BTreeMap<String, Vec<u8>> =
        files.iter().map(|n| (n.clone(), content(n))).collect();

    let b2 = s(&v.brick(2));
    // Commit before any run is refused, and says why.
    let o = v.vol("remove-brick", &[&b2, "commit"]);
    assert_eq!(code(&o), Some(5), "{}", text(&o));
    assert!(text(&o).contains("no removal was started"), "{}", text(&o));
    let o = v.vol("remove-brick", &[&s(&tmp.path().join("nope")), "start"]);
    assert_eq!(code(&o), Some(3), "{}", text(&o));
    let o = v.vol("remove-brick", &[&b2, "begin"]);
    assert_eq!(code(&o), Some(3), "{}", text(&o));

    // start then stop cancels: the option goes, the brick stays, commit is refused.
    ok(&v.vol("remove-brick", &[&b2, "start"]));
    let o = v.vol("remove-brick", &[&s(&v.brick(1)), "stop"]);
    assert_eq!(code(&o), Some(5), "another brick's removal: {}", text(&o));
    let o = v.vol("remove-brick", &[&b2, "stop"]);
    ok(&o);
    assert!(text(&o).contains("cancelled"), "{}", text(&o));
    let info = json(&v.vol("info", &["--json"]));
    assert!(
        info["options"]["cluster.distribute.decommissioned"].is_null(),
        "{info}"
    );
    assert_eq!(info["bricks"].as_array().map(Vec::len), Some(3));
    let o = v.vol("remove-brick", &[&b2, "commit"]);
    assert_eq!(code(&o), Some(5), "{}", text(&o));
    verify_all(&mnt, &files, &expected);

    let o = v.vol("remove-brick", &[&b2, "start"]);
    ok(&o);
    let info = json(&v.vol("info", &["--json"]));
    assert_eq!(
        info["options"]["cluster.distribute.decommissioned"],
        "shrink-client-2"
    );
    let st = v.wait_done("remove-brick", Duration::from_secs(300));
    assert_eq!(st["mode"], "remove-brick", "{st}");
    assert_eq!(st["state"], "completed", "{st}");
    assert_eq!(st["failures"], 0, "{st}");
    assert_eq!(st["files_skipped"], 0, "{st}");
    let o = v.vol("remove-brick", &[&b2, "status"]);
    ok(&o);
    assert!(
        text(&o).contains("removing: shrink-client-2"),
        "{}",
        text(&o)
    );
    // Everything is already off brick 2, and still readable.
    let moved = placement(&three, &files, true);
    assert_eq!(
        moved[2], 0,
        "files left on the brick being removed: {moved:?}"
    );
    verify_all(&mnt, &files, &expected);

    let o = v.vol("remove-brick", &[&b2, "commit"]);
    ok(&o);
    assert!(
        text(&o).contains("distribute 3 -> distribute 2"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains(&b2),
        "says where the brick is: {}",
        text(&o)
    );
    let info = json(&v.vol("info", &["--json"]));
    assert_eq!(
        info["bricks"],
        serde_json::json!([s(&v.brick(0)), s(&v.brick(1))])
    );
    assert_eq!(info["brick_ids"], serde_json::json!([0, 1]));
    assert!(info["options"]["cluster.distribute.decommissioned"].is_null());
    let st = json(&v.vol("status", &["--json"]));
    assert_eq!(st["bricks"].as_array().map(Vec::len), Some(2));
    assert_eq!(st["online"], true);
    // The removed brick's server stopped; its directory stays.
    assert!(v.brick(2).is_dir());
    let removed_port_listens = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from((
            [127, 0, 0, 1],
            (info["base_port"].as_u64().expect("port") + 2) as u16,
        )),
        Duration::from_millis(300),
    )
    .is_ok();
    assert!(!removed_port_listens, "brick 2 still serves");
    // Through the mount (now on the 2-brick graph) every file reads back.
    std::thread::sleep(Duration::from_secs(1));
    verify_all(&mnt, &files, &expected);
    let two: Vec<PathBuf> = (0..2).map(|i| v.brick(i)).collect();
    placement(&two, &files, true);
    // New files go to the remaining bricks.
    std::fs::write(mnt.join("d00/late"), b"late").expect("write after commit");
    assert_eq!(std::fs::read(mnt.join("d00/late")).expect("read"), b"late");
}

/// Removing the *first* replica set of a distribute 2 x replica 2: the set that stays keeps
/// its names (`rs-replicate-1`, `rs-client-2/3`), ports and brick ids, its files read back,
/// and a brick set added afterwards takes new ids (4, 5), not the removed ones.
#[test]
fn remove_brick_of_a_replica_set_keeps_the_other_sets_names() {
    if skip_all("remove_brick_of_a_replica_set_keeps_the_other_sets_names") {
        return;
    }
    let tmp = scratch_dir();
    let v = Vol::new(tmp.path(), "rs", 1);
    let list: Vec<String> = (0..4).map(|i| s(&v.brick(i))).collect();
    let port = free_port();
    let mut args = vec!["volume", "create", "rs"];
    args.extend(list.iter().map(String::as_str));
    let port_s = port.to_string();
    args.extend(["--replica", "2", "--port", &port_s]);
    ok(&v.x(&args));
    ok(&v.vol("start", &[]));
    let mnt = v.mnt(0);
    ok(&v.x(&["mount", "rs", &s(&mnt)]));
    let files = names(120, 2);
    for d in 0..2 {
        std::fs::create_dir(mnt.join(format!("d{d:02}"))).expect("mkdir");
    }
    for n in &files {
        std::fs::write(mnt.join(n), content(n)).expect("write");
    }
    let expected: BTreeMap<String, Vec<u8>> =
        files.iter().map(|n| (n.clone(), content(n))).collect();

    // Half a set is refused.
    let o = v.vol("remove-brick", &[&list[0], "start"]);
    assert_eq!(code(&o), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("rs-replicate-0 is made of bricks"),
        "{}",
        text(&o)
    );

    ok(&v.vol("remove-brick", &[&list[0], &list[1], "start"]));
    let st = v.wait_done("remove-brick", Duration::from_secs(300));
    assert_eq!(st["state"], "completed", "{st}");
    assert_eq!(st["failures"], 0, "{st}");
    assert_eq!(st["files_skipped"], 0, "{st}");
    ok(&v.vol("remove-brick", &[&list[0], &list[1], "commit"]));

    let info = json(&v.vol("info", &["--json"]));
    assert_eq!(info["layout"], "replica 2");
    assert_eq!(info["brick_ids"], serde_json::json!([2, 3]));
    assert_eq!(info["subvolumes"][0]["name"], "rs-replicate-1");
    let vol = std::fs::read_to_string(tmp.path().join("state/volumes/rs/client.vol"))
        .expect("client volfile");
    assert!(vol.contains("\"rs-replicate-1\""), "{vol}");
    assert!(vol.contains("\"rs-client-3\""), "{vol}");
    assert!(!vol.contains("rs-client-0"), "{vol}");
    assert!(
        vol.contains(&format!("\"{}\"", port + 3)),
        "port of id 3 kept: {vol}"
    );
    let st = json(&v.vol("status", &["--json"]));
    assert_eq!(st["online"], true, "{st}");
    let ids: Vec<u64> = st["bricks"]
        .as_array()
        .expect("bricks")
        .iter()
        .filter_map(|b| b["index"].as_u64())
        .collect();
    assert_eq!(ids, [2, 3]);
    // Both copies of every file are on the set that stays.
    for n in &files {
        for b in [2, 3] {
            assert!(v.brick(b).join(n).is_file(), "{n} missing on brick {b}");
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    verify_all(&mnt, &files, &expected);

    // Growing again: new ids.
    ok(&v.vol("add-brick", &[&s(&v.brick(4)), &s(&v.brick(5))]));
    let info = json(&v.vol("info", &["--json"]));
    assert_eq!(info["brick_ids"], serde_json::json!([2, 3, 4, 5]));
    let subs: Vec<&str> = info["subvolumes"]
        .as_array()
        .expect("subvolumes")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(subs, ["rs-replicate-1", "rs-replicate-2"]);
    std::thread::sleep(Duration::from_secs(2));
    verify_all(&mnt, &files, &expected);
}

/// A plain one-brick volume, mounted, given a second brick becomes distribute 2 with the old
/// brick first: the mount follows, old files read back, a rebalance spreads them.
#[test]
fn a_plain_volume_grows_into_distribute_2_under_a_mount() {
    if skip_all("a_plain_volume_grows_into_distribute_2_under_a_mount") {
        return;
    }
    let tmp = scratch_dir();
    let v = Vol::new(tmp.path(), "plain", 1);
    v.create_start_mount(1, 1);
    let mnt = v.mnt(0);
    let files = names(100, 2);
    for d in 0..2 {
        std::fs::create_dir(mnt.join(format!("d{d:02}"))).expect("mkdir");
    }
    for n in &files {
        std::fs::write(mnt.join(n), content(n)).expect("write");
    }
    let expected: BTreeMap<String, Vec<u8>> =
        files.iter().map(|n| (n.clone(), content(n))).collect();
    let o = v.vol("add-brick", &[&s(&v.brick(1))]);
    ok(&o);
    assert!(text(&o).contains("plain -> distribute 2"), "{}", text(&o));
    let info = json(&v.vol("info", &["--json"]));
    let subs: Vec<&str> = info["subvolumes"]
        .as_array()
        .expect("subvolumes")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(subs, ["plain-client-0", "plain-client-1"]);
    let end = Instant::now() + Duration::from_secs(15);
    while !text(&v.vol("statedump", &["--client", &s(&mnt), "--json"])).contains("plain-dht") {
        assert!(
            Instant::now() < end,
            "the mount did not switch to distribute"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    verify_all(&mnt, &files, &expected);
    ok(&v.vol("rebalance", &["start"]));
    let st = v.wait_done("rebalance", Duration::from_secs(120));
    assert_eq!(st["state"], "completed", "{st}");
    assert_eq!(st["failures"], 0, "{st}");
    verify_all(&mnt, &files, &expected);
    let per = placement(&[v.brick(0), v.brick(1)], &files, true);
    assert!(per[1] > 10, "the new brick got too few files: {per:?}");
}

/// Files with hard links on a brick being removed: remove-brick completes with nothing
/// skipped, every name of each file still names one file (same inode, same link count, a
/// write through one name read through another), brick 2 keeps no file, and commit needs no
/// --force.
#[test]
fn remove_brick_moves_files_with_hard_links() {
    use std::os::unix::fs::MetadataExt as _;
    if skip_all("remove_brick_moves_files_with_hard_links") {
        return;
    }
    let tmp = scratch_dir();
    let v = Vol::new(tmp.path(), "links", 1);
    v.create_start_mount(3, 1);
    let mnt = v.mnt(0);
    for d in ["a", "b"] {
        std::fs::create_dir(mnt.join(d)).expect("mkdir");
    }
    // (names, content) per file: a/fK, b/gK, and for even K also a/fK.2.
    let mut files: Vec<(Vec<String>, Vec<u8>)> = Vec::new();
    for k in 0..60 {
        let first = format!("a/f{k}");
        let data = content(&first);
        std::fs::write(mnt.join(&first), &data).expect("write");
        let mut all = vec![first.clone(), format!("b/g{k}")];
        if k % 2 == 0 {
            all.push(format!("a/f{k}.2"));
        }
        for n in &all[1..] {
            std::fs::hard_link(mnt.join(&first), mnt.join(n)).expect("link");
        }
        files.push((all, data));
    }
    let held_by_2 = files
        .iter()
        .filter(|(all, _)| {
            std::fs::symlink_metadata(v.brick(2).join(&all[0])).is_ok_and(|m| !is_link_file(&m))
        })
        .count();
    assert!(held_by_2 > 3, "brick 2 holds few files: {held_by_2}");

    let b2 = s(&v.brick(2));
    ok(&v.vol("remove-brick", &[&b2, "start"]));
    let st = v.wait_done("remove-brick", Duration::from_secs(300));
    assert_eq!(st["state"], "completed", "{st}");
    assert_eq!(st["failures"], 0, "{st}");
    assert_eq!(st["files_skipped"], 0, "{st}");
    assert!(
        st["files_moved"].as_u64().unwrap_or(0) >= held_by_2 as u64,
        "{st}"
    );
    for (all, data) in &mut files {
        // A write through the last name is read through the others.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(mnt.join(all.last().expect("names")))
            .expect("open");
        std::io::Write::write_all(&mut f, b"XY").expect("write");
        data[..2].copy_from_slice(b"XY");
    }
    let check = |mnt: &Path, tag: &[u8]| {
        for (all, data) in &files {
            let m0 = std::fs::metadata(mnt.join(&all[0])).expect("stat");
            for n in all {
                let m = std::fs::metadata(mnt.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
                assert_eq!(
                    (m.ino(), m.nlink() as usize),
                    (m0.ino(), all.len()),
                    "{n} is not one file with {}",
                    all[0]
                );
                let got = std::fs::read(mnt.join(n)).expect("read");
                assert_eq!(&got[tag.len()..], &data[tag.len()..], "{n}");
                assert_eq!(&got[..tag.len()], tag, "{n}");
            }
        }
    };
    check(&mnt, b"XY");
    // No file (data or link) is left on brick 2: only the directories.
    for d in ["a", "b"] {
        let left: Vec<_> = std::fs::read_dir(v.brick(2).join(d))
            .expect("brick dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "left on brick 2 in {d}: {left:?}");
    }
    let o = v.vol("remove-brick", &[&b2, "commit"]);
    ok(&o);
    std::thread::sleep(Duration::from_secs(1));
    check(&mnt, b"XY");
}
