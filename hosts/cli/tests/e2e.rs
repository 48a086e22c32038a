//! End to end with the CLI alone: create, start, mount, write/read/list/remove through the
//! mount, unmount, stop; and the one-command `xlfs up`. Needs root, /dev/fuse and the
//! `xlfsd` and `xlfs-mount` binaries next to `xlfs` (`cargo build --workspace --bins`).
//! Without them the tests say why and pass, unless `XLFS_E2E_REQUIRE=1` (CI) makes that a
//! failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn xlfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_xlfs"))
}

/// Why the environment cannot run these tests, if it cannot.
fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    let dir = xlfs_bin()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    for b in ["xlfsd", "xlfs-mount"] {
        if !dir.join(b).is_file() {
            return Some(format!(
                "{b} is not built in {} (cargo build --workspace --bins)",
                dir.display()
            ));
        }
    }
    None
}

fn skip(test: &str) -> bool {
    let Some(why) = missing() else { return false };
    if std::env::var_os("XLFS_E2E_REQUIRE").is_some_and(|v| v == "1") {
        panic!("{test}: cannot run: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    true
}

/// Stops whatever a test left behind: the volume through the CLI, then any recorded pid and
/// the mount point by force.
struct Cleanup {
    state: PathBuf,
    volume: String,
    mountpoint: PathBuf,
    child: Option<std::process::Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new(xlfs_bin())
            .arg("--state-dir")
            .arg(&self.state)
            .args(["volume", "stop", &self.volume])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let run = self
            .state
            .join("volumes")
            .join(&self.volume)
            .join("run.json");
        if let Ok(text) = std::fs::read_to_string(run) {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let pids = ["bricks", "mounts"]
                .iter()
                .filter_map(|k| v[k].as_array())
                .flatten()
                .filter_map(|e| e["pid"].as_i64());
            for pid in pids {
                // SAFETY: kill(2) with a positive pid recorded by the CLI for this test.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
        if mounted(&self.mountpoint) {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
    }
}

/// A port nobody listens on now (tests run in parallel, so each picks its own).
fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port().to_string()
}

fn mounted(path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .any(|l| l.split(' ').nth(4) == Some(&*path.to_string_lossy()))
}

fn xlfs(state: &Path, args: &[&str]) -> Output {
    let o = Command::new(xlfs_bin())
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .output()
        .expect("run xlfs");
    eprintln!(
        "$ xlfs {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Write, read, list and remove through the mount; the file lands on the brick.
fn smoke(mnt: &Path, brick: &Path) {
    let f = mnt.join("hello.txt");
    std::fs::write(&f, b"hello through xlfs\n").expect("write through the mount");
    assert_eq!(
        std::fs::read(&f).expect("read back"),
        b"hello through xlfs\n"
    );
    std::fs::create_dir(mnt.join("dir")).expect("mkdir");
    let mut names: Vec<String> = std::fs::read_dir(mnt)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["dir", "hello.txt"]);
    assert_eq!(
        std::fs::read(brick.join("hello.txt")).expect("on the brick"),
        b"hello through xlfs\n"
    );
    std::fs::remove_file(&f).expect("unlink");
    std::fs::remove_dir(mnt.join("dir")).expect("rmdir");
    assert_eq!(std::fs::read_dir(mnt).expect("list").count(), 0);
}

#[test]
fn create_start_mount_smoke_stop() {
    if skip("create_start_mount_smoke_stop") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let brick = tmp.path().join("brick");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir mnt");
    let _guard = Cleanup {
        state: state.clone(),
        volume: "e2e".into(),
        mountpoint: mnt.clone(),
        child: None,
    };
    let s = |p: &Path| p.to_string_lossy().into_owned();

    ok(&xlfs(
        &state,
        &[
            "volume",
            "create",
            "e2e",
            &s(&brick),
            "--port",
            &free_port(),
        ],
    ));
    ok(&xlfs(&state, &["volume", "start", "e2e"]));
    let o = xlfs(&state, &["volume", "status", "e2e", "--json"]);
    ok(&o);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).expect("status json");
    assert_eq!(st["online"], true);
    assert!(st["bricks"][0]["pid"].as_u64().is_some());

    ok(&xlfs(&state, &["mount", "e2e", &s(&mnt)]));
    assert!(mounted(&mnt));
    smoke(&mnt, &brick);

    ok(&xlfs(&state, &["umount", &s(&mnt)]));
    assert!(!mounted(&mnt));
    ok(&xlfs(&state, &["mount", "e2e", &s(&mnt)]));
    // stop unmounts too.
    ok(&xlfs(&state, &["volume", "stop", "e2e"]));
    assert!(!mounted(&mnt));
    let o = xlfs(&state, &["volume", "status", "e2e", "--json"]);
    assert_eq!(o.status.code(), Some(7), "bricks are down after stop");
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).expect("status json");
    assert_eq!(st["bricks"][0]["pid"], serde_json::Value::Null);
    assert_eq!(
        xlfs(&state, &["volume", "stop", "e2e"]).status.code(),
        Some(5)
    );
}

#[test]
fn up_serves_until_interrupted() {
    if skip("up_serves_until_interrupted") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let mnt = dir.join("mnt");
    let child = Command::new(xlfs_bin())
        .arg("up")
        .arg(&dir)
        .args(["--port", &free_port()])
        .env_remove("XLFS_STATE_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run xlfs up");
    let mut guard = Cleanup {
        state: dir.join("state"),
        volume: "demo".into(),
        mountpoint: mnt.clone(),
        child: Some(child),
    };
    let start = Instant::now();
    while !mounted(&mnt) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "xlfs up did not mount {}",
            mnt.display()
        );
        if let Some(c) = guard.child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            panic!("xlfs up exited with {status} before mounting");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    smoke(&mnt, &dir.join("brick"));

    let mut child = guard.child.take().expect("child");
    // SAFETY: kill(2) on the child we spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "xlfs up did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        use std::io::Read;
        let _ = o.read_to_string(&mut out);
    }
    eprintln!("{out}");
    assert!(status.success(), "xlfs up exited with {status}");
    assert!(out.contains("xlfs: volume demo is up"), "{out}");
    assert!(out.contains("xlfs: volume demo stopped"), "{out}");
    assert!(!mounted(&mnt));
    assert!(
        !dir.join("state/volumes/demo/run.json").exists(),
        "nothing left running"
    );
}
