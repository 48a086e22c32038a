//! Helpers shared by the end-to-end tests: finding the binaries, skipping (or failing under
//! `XLFS_E2E_REQUIRE=1`) where root or /dev/fuse is missing, and a guard that stops what a test
//! started even when it fails.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub fn bin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_xlfs"))
        .parent()
        .map(|d| d.join(name))
        .unwrap_or_default()
}

/// Why the environment cannot run these tests, if it cannot.
pub fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    for b in ["xlfsd", "xlfs-mount"] {
        if !bin(b).is_file() {
            return Some(format!(
                "{b} is not built next to xlfs (cargo build --workspace --bins)"
            ));
        }
    }
    None
}

pub fn skip(test: &str) -> bool {
    let Some(why) = missing() else { return false };
    if std::env::var_os("XLFS_E2E_REQUIRE").is_some_and(|v| v == "1") {
        panic!("{test}: cannot run: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    true
}

/// Stops whatever a test started, even when it fails: its own children (killed), the volume
/// (through the CLI, then every recorded pid by SIGKILL) and the mount points (lazily).
pub struct Cleanup {
    pub state: PathBuf,
    pub volume: String,
    pub mountpoints: Vec<PathBuf>,
    pub children: Vec<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new(bin("xlfs"))
            .arg("--state-dir")
            .arg(&self.state)
            .args(["volume", "stop", &self.volume])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for pid in recorded_pids(&self.state, &self.volume) {
            // SAFETY: kill(2) with a positive pid recorded by the CLI for this test.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for mp in &self.mountpoints {
            if mounted(mp) {
                let quiet = |prog: &str, args: &[&str]| {
                    Command::new(prog)
                        .args(args)
                        .arg(mp)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                };
                let _ = quiet("fusermount3", &["-u", "-z"]) || quiet("umount", &["-l"]);
            }
        }
    }
}

pub fn run_json(state: &Path, volume: &str) -> serde_json::Value {
    let path = state.join("volumes").join(volume).join("run.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

pub fn recorded_pids(state: &Path, volume: &str) -> Vec<libc::pid_t> {
    let v = run_json(state, volume);
    ["bricks", "mounts"]
        .iter()
        .filter_map(|k| v[k].as_array())
        .flatten()
        .filter_map(|e| e["pid"].as_i64())
        .filter(|p| *p > 0)
        .map(|p| p as libc::pid_t)
        .collect()
}

/// A scratch directory with `state/` and `brick/` paths and an existing `mnt/`.
pub struct Scratch {
    pub tmp: tempfile::TempDir,
    pub state: PathBuf,
    pub brick: PathBuf,
    pub mnt: PathBuf,
}

pub fn scratch() -> Scratch {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (state, brick, mnt) = (
        tmp.path().join("state"),
        tmp.path().join("brick"),
        tmp.path().join("mnt"),
    );
    std::fs::create_dir(&mnt).expect("mkdir mnt");
    Scratch {
        tmp,
        state,
        brick,
        mnt,
    }
}

/// The first of 16 consecutive ports that nobody listens on now and no other test process
/// is given (brick i of a volume made with `--port PORT` listens on PORT+i).
pub fn free_port() -> u16 {
    xlfs_testkit::ports::free_ports(xlfs_testkit::ports::BLOCK)
}

pub fn mounted(path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .any(|l| l.split(' ').nth(4) == Some(&*path.to_string_lossy()))
}

/// Runs `xlfs --state-dir STATE ARGS...`, echoing its output to the test log.
pub fn xlfs_raw(state: &Path, args: &[&str]) -> Output {
    let o = Command::new(bin("xlfs"))
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

/// Asserts that a command succeeded, showing its output if not.
pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}: {}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The pid `xlfs volume start` recorded for brick `i` of `vol`.
pub fn brick_pid(state: &Path, vol: &str, i: u64) -> libc::pid_t {
    run_json(state, vol)["bricks"]
        .as_array()
        .expect("bricks in run.json")
        .iter()
        .find(|b| b["index"] == i)
        .and_then(|b| b["pid"].as_i64())
        .expect("brick pid") as libc::pid_t
}
