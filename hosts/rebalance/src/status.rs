//! The status file: what a run has done, for `xlfs volume rebalance status` and for the next
//! start to resume from.
//!
//! Guarantees:
//! - [`store`] replaces the file atomically (a temporary file in the same directory, fsynced,
//!   mode 0644, renamed over it): a reader, or a start after a crash, sees the previous
//!   version or the new one, never a torn one.
//! - [`load`] refuses a file it cannot understand with an error naming the file (it is never
//!   overwritten silently: it may hold the only record of a long run), unless the caller asked
//!   for a fresh start.
//! - [`begin`] decides resume or fresh start from the previous file alone (pure, tested):
//!   a completed run, another mode or another topology starts afresh; a running (crashed),
//!   stopped or failed one resumes with its counters and `done_dirs`.
//! - [`check_not_running`] refuses to start while the pid a `running` file names is a live
//!   `xlfs-rebalance`: two runners on one status file would overwrite each other's record.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xlator_api::Gfid;

/// The format version written in `"version"`.
pub const VERSION: u32 = 1;

/// What the run does (recorded; the work is the same, the volfile's `decommissioned` option
/// says which children are leaving).
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Rebalance,
    RemoveBrick,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rebalance => "rebalance",
            Mode::RemoveBrick => "remove-brick",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Running,
    Completed,
    Stopped,
    Failed,
}

/// The file's content (section C of the interfaces brief), field for field.
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
pub struct Status {
    pub version: u32,
    pub mode: Mode,
    pub state: State,
    pub pid: u32,
    /// When the run began (kept across resumes).
    pub started: u64,
    pub updated: u64,
    pub finished: Option<u64>,
    pub dirs_done: u64,
    pub files_scanned: u64,
    pub files_moved: u64,
    pub bytes_moved: u64,
    pub files_skipped: u64,
    pub files_vanished: u64,
    pub failures: u64,
    pub files_total_estimate: Option<u64>,
    /// Files answered per second by this process (since it started or resumed).
    pub rate_files_per_s: f64,
    /// Bytes moved per second by this process.
    pub rate_bytes_per_s: f64,
    pub eta_s: Option<f64>,
    pub last_error: Option<String>,
    /// The volume's distribute topology the `done_dirs` were fixed for (children and
    /// decommissioned ones per cluster/distribute translator). Not in the brief's list: a
    /// resume under another topology would skip directories whose layouts lack the new
    /// children, so it starts afresh instead. Absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// GFIDs of the directories finished (fixed, every file answered, committed when nothing
    /// was skipped), in the order finished.
    pub done_dirs: Vec<String>,
}

impl Status {
    /// A new run: everything at zero, state running.
    pub fn fresh(mode: Mode, pid: u32, now: u64, topology: Option<String>) -> Status {
        Status {
            version: VERSION,
            mode,
            state: State::Running,
            pid,
            started: now,
            updated: now,
            finished: None,
            dirs_done: 0,
            files_scanned: 0,
            files_moved: 0,
            bytes_moved: 0,
            files_skipped: 0,
            files_vanished: 0,
            failures: 0,
            files_total_estimate: None,
            rate_files_per_s: 0.0,
            rate_bytes_per_s: 0.0,
            eta_s: None,
            last_error: None,
            topology,
            done_dirs: Vec::new(),
        }
    }

    /// `done_dirs` as GFIDs (checked by [`load`], so none is skipped here).
    pub fn done_gfids(&self) -> Vec<Gfid> {
        self.done_dirs
            .iter()
            .filter_map(|s| Gfid::parse(s))
            .collect()
    }
}

/// Why the status file cannot be used.
#[derive(thiserror::Error, Debug)]
pub enum StatusError {
    #[error("cannot read the status file {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the status file {} is not an xlfs-rebalance status file ({why}); it is left as it is: \
         move it away, or start with --restart to begin a new run over it",
        path.display()
    )]
    Corrupt { path: PathBuf, why: String },
    #[error(
        "another xlfs-rebalance (pid {pid}) is running with the status file {}; stop it first \
         (xlfs volume rebalance VOL stop, or kill -TERM {pid})",
        path.display()
    )]
    AlreadyRunning { path: PathBuf, pid: u32 },
    #[error("cannot write the status file {}: {source}", path.display())]
    Unwritable {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Reads the status file: `None` when there is none.
pub fn load(path: &Path) -> Result<Option<Status>, StatusError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StatusError::Unreadable {
                path: path.to_owned(),
                source,
            });
        }
    };
    parse(&text).map(Some).map_err(|why| StatusError::Corrupt {
        path: path.to_owned(),
        why,
    })
}

/// Parses the file's bytes; the error says what is wrong.
pub fn parse(text: &[u8]) -> Result<Status, String> {
    // The version first, so a newer format is named as such rather than as a missing field.
    let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| format!("{e}"))?;
    match v.get("version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(VERSION) => {}
        Some(n) => return Err(format!("format version {n}, this runner reads {VERSION}")),
        None => return Err("no \"version\" number".into()),
    }
    let s: Status = serde_json::from_value(v).map_err(|e| format!("{e}"))?;
    if let Some(bad) = s.done_dirs.iter().find(|d| Gfid::parse(d).is_none()) {
        return Err(format!("done_dirs holds {bad:?}, which is not a GFID"));
    }
    Ok(s)
}

/// The file's bytes (pretty JSON, a newline at the end).
pub fn render(s: &Status) -> Vec<u8> {
    // Serializing plain structs of numbers and strings cannot fail.
    let mut out = serde_json::to_vec_pretty(s).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Writes `bytes` to `path` atomically: temporary file beside it (mode 0644), fsync, rename.
pub fn store_bytes(path: &Path, bytes: &[u8]) -> Result<(), StatusError> {
    let err = |source| StatusError::Unwritable {
        path: path.to_owned(),
        source,
    };
    let name = path
        .file_name()
        .ok_or_else(|| err(std::io::Error::other("the path names no file")))?;
    let mut tmp_name = name.to_owned();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        // The umask may have taken bits away: readers (the CLI as another user) need 0644.
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// [`render`] then [`store_bytes`].
pub fn store(path: &Path, s: &Status) -> Result<(), StatusError> {
    store_bytes(path, &render(s))
}

/// Whether `pid` is a live process named `xlfs-rebalance` (its `/proc/PID/comm`). A zombie
/// (killed, not yet reaped: state `Z` in `/proc/PID/stat`) is dead: it does no work and its
/// status file is to be resumed (a start right after `kill -9` used to be refused until the
/// parent reaped it).
pub fn is_live_runner(pid: u32) -> bool {
    let named = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end() == "xlfs-rebalance")
        .unwrap_or(false);
    named && !is_zombie(pid)
}

/// Whether `pid`'s state in `/proc/PID/stat` is `Z` (or `X`, dead).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|st| {
            // "PID (COMM) STATE ...": COMM may hold spaces and parentheses; the state
            // follows the last ')'.
            let after = &st[st.rfind(')')? + 1..];
            after
                .split_whitespace()
                .next()
                .map(|s| s == "Z" || s == "X")
        })
        .unwrap_or(false)
}

/// Refuses when `prev` is a running run of another live `xlfs-rebalance` process.
pub fn check_not_running(
    path: &Path,
    prev: Option<&Status>,
    own_pid: u32,
) -> Result<(), StatusError> {
    match prev {
        Some(s) if s.state == State::Running && s.pid != own_pid && is_live_runner(s.pid) => {
            Err(StatusError::AlreadyRunning {
                path: path.to_owned(),
                pid: s.pid,
            })
        }
        _ => Ok(()),
    }
}

/// How a run begins.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// A new run; the reason when a previous file existed.
    Fresh(Option<String>),
    /// Resuming: the previous state and how many directories are already done.
    Resumed { from: State, done_dirs: usize },
}

/// The status a start runs with: a resume of `prev` (counters and `done_dirs` kept, state
/// running, this pid, `finished` and `last_error` cleared), or a fresh one.
pub fn begin(
    prev: Option<Status>,
    mode: Mode,
    restart: bool,
    topology: Option<String>,
    pid: u32,
    now: u64,
) -> (Status, Begin) {
    let fresh = |why: Option<String>, topology| {
        (Status::fresh(mode, pid, now, topology), Begin::Fresh(why))
    };
    let Some(mut s) = prev else {
        return fresh(None, topology);
    };
    let why = if restart {
        Some("--restart given".to_owned())
    } else if s.state == State::Completed {
        Some("the previous run completed".to_owned())
    } else if s.mode != mode {
        Some(format!(
            "the previous run was a {}, this one is a {}",
            s.mode.name(),
            mode.name()
        ))
    } else if s.topology.is_some() && topology.is_some() && s.topology != topology {
        Some(
            "the volume's bricks changed since the previous run (its finished directories' \
             layouts do not cover the new ones)"
                .to_owned(),
        )
    } else {
        None
    };
    if why.is_some() {
        return fresh(why, topology);
    }
    let from = s.state;
    s.state = State::Running;
    s.pid = pid;
    s.updated = now;
    s.finished = None;
    s.last_error = None;
    s.eta_s = None;
    s.rate_files_per_s = 0.0;
    s.rate_bytes_per_s = 0.0;
    if topology.is_some() {
        s.topology = topology;
    }
    let done_dirs = s.done_dirs.len();
    (s, Begin::Resumed { from, done_dirs })
}

/// Seconds left: the objects (files and directories) the estimate says remain, at the rate
/// this process has answered them. `None` without an estimate or before anything was done.
pub fn eta(
    estimate: Option<u64>,
    done_objects: u64,
    session_objects: u64,
    elapsed_s: f64,
) -> Option<f64> {
    let total = estimate?;
    if session_objects == 0 || elapsed_s <= 0.0 {
        return None;
    }
    let rate = session_objects as f64 / elapsed_s;
    Some(total.saturating_sub(done_objects) as f64 / rate)
}

/// A per-second rate, 0 before any time has passed.
pub fn rate(count: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        count as f64 / elapsed_s
    } else {
        0.0
    }
}

/// Seconds since the epoch.
pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Status {
        let mut s = Status::fresh(Mode::RemoveBrick, 42, 1000, Some("dht=a,b".into()));
        s.state = State::Stopped;
        s.updated = 1010;
        s.finished = Some(1010);
        s.dirs_done = 2;
        s.files_scanned = 7;
        s.files_moved = 3;
        s.bytes_moved = 4096;
        s.files_skipped = 1;
        s.files_vanished = 1;
        s.failures = 0;
        s.files_total_estimate = Some(100);
        s.rate_files_per_s = 0.7;
        s.eta_s = Some(12.5);
        s.last_error = Some("x".into());
        s.done_dirs = vec![Gfid::ROOT.to_string(), Gfid([7; 16]).to_string()];
        s
    }

    #[test]
    fn round_trip_through_the_file_with_mode_0644() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rebalance.json");
        let s = sample();
        store(&path, &s).expect("store");
        assert_eq!(load(&path).expect("load"), Some(s.clone()));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        // The temporary file is gone.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("rebalance.json")]);
        assert_eq!(s.done_gfids(), vec![Gfid::ROOT, Gfid([7; 16])]);
    }

    #[test]
    fn the_fields_have_the_brief_s_names_and_forms() {
        let v: serde_json::Value = serde_json::from_slice(&render(&sample())).expect("json");
        for key in [
            "version",
            "mode",
            "state",
            "pid",
            "started",
            "updated",
            "finished",
            "dirs_done",
            "files_scanned",
            "files_moved",
            "bytes_moved",
            "files_skipped",
            "files_vanished",
            "failures",
            "files_total_estimate",
            "rate_files_per_s",
            "rate_bytes_per_s",
            "eta_s",
            "last_error",
            "done_dirs",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["mode"], "remove-brick");
        assert_eq!(v["state"], "stopped");
        assert_eq!(v["done_dirs"][0], "00000000-0000-0000-0000-000000000001");
        let fresh = Status::fresh(Mode::Rebalance, 1, 5, None);
        let v: serde_json::Value = serde_json::from_slice(&render(&fresh)).expect("json");
        assert_eq!(v["mode"], "rebalance");
        assert_eq!(v["state"], "running");
        assert!(v["finished"].is_null() && v["eta_s"].is_null() && v["last_error"].is_null());
        assert!(v["files_total_estimate"].is_null());
        assert!(v.get("topology").is_none());
    }

    #[test]
    fn corrupt_files_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rb.json");
        for (bytes, what) in [
            (&b"{\"version\":1, \"mode\": "[..], "EOF"),
            (&b"[1,2]"[..], "no \"version\""),
            (&b"{\"version\":9}"[..], "format version 9"),
            (&b"{\"version\":1}"[..], "missing field"),
        ] {
            std::fs::write(&path, bytes).expect("write");
            let e = load(&path).expect_err("corrupt").to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(e.contains(what), "{what:?} not in {e}");
            assert!(e.contains("--restart"), "{e}");
        }
        let mut s = sample();
        s.done_dirs.push("not-a-gfid".into());
        std::fs::write(&path, render(&s)).expect("write");
        let e = load(&path).expect_err("bad gfid").to_string();
        assert!(e.contains("not-a-gfid"), "{e}");
        assert_eq!(load(&dir.path().join("none.json")).expect("missing"), None);
    }

    #[test]
    fn begin_resumes_unfinished_runs_and_starts_finished_ones_afresh() {
        let topo = Some("dht=a,b".to_owned());
        for state in [State::Running, State::Stopped, State::Failed] {
            let mut prev = sample();
            prev.state = state;
            prev.mode = Mode::Rebalance;
            let (s, how) = begin(
                Some(prev.clone()),
                Mode::Rebalance,
                false,
                topo.clone(),
                9,
                2000,
            );
            assert_eq!(
                how,
                Begin::Resumed {
                    from: state,
                    done_dirs: 2
                }
            );
            assert_eq!(
                (s.state, s.pid, s.updated, s.finished),
                (State::Running, 9, 2000, None)
            );
            assert_eq!(s.last_error, None);
            assert_eq!(s.started, prev.started);
            assert_eq!(
                (
                    s.dirs_done,
                    s.files_scanned,
                    s.files_moved,
                    s.bytes_moved,
                    s.done_dirs
                ),
                (2, 7, 3, 4096, prev.done_dirs)
            );
        }
        let mut prev = sample();
        prev.mode = Mode::Rebalance;
        let fresh = |p: Status, mode, restart, topo: Option<String>| {
            let (s, how) = begin(Some(p), mode, restart, topo, 9, 2000);
            assert_eq!(
                (s.files_scanned, s.done_dirs.len(), s.started),
                (0, 0, 2000)
            );
            match how {
                Begin::Fresh(Some(why)) => why,
                other => panic!("{other:?}"),
            }
        };
        let mut done = prev.clone();
        done.state = State::Completed;
        assert!(fresh(done, Mode::Rebalance, false, topo.clone()).contains("completed"));
        assert!(fresh(prev.clone(), Mode::Rebalance, true, topo.clone()).contains("--restart"));
        assert!(
            fresh(prev.clone(), Mode::RemoveBrick, false, topo.clone()).contains("remove-brick")
        );
        assert!(
            fresh(
                prev.clone(),
                Mode::Rebalance,
                false,
                Some("dht=a,b,c".into())
            )
            .contains("bricks")
        );
        let (_, how) = begin(None, Mode::Rebalance, false, None, 9, 2000);
        assert_eq!(how, Begin::Fresh(None));
        // An unknown topology on either side does not throw the record away.
        let (_, how) = begin(Some(prev), Mode::Rebalance, false, None, 9, 2000);
        assert!(matches!(how, Begin::Resumed { .. }));
    }

    #[test]
    fn a_running_file_of_a_live_runner_is_refused_a_dead_one_resumed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rb.json");
        // A live process named xlfs-rebalance: a copy of sleep(1) under that name.
        let exe = dir.path().join("xlfs-rebalance");
        std::fs::copy("/bin/sleep", &exe).expect("copy sleep");
        let mut child = std::process::Command::new(&exe)
            .arg("30")
            .spawn()
            .expect("spawn");
        let mut s = sample();
        s.state = State::Running;
        s.pid = child.id();
        let r = check_not_running(&path, Some(&s), std::process::id());
        let _ = child.kill();
        // Killed but not reaped yet: a zombie, no longer a live runner.
        for _ in 0..200 {
            if is_zombie(s.pid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            is_zombie(s.pid),
            "the killed child is a zombie until waited for"
        );
        assert!(
            check_not_running(&path, Some(&s), std::process::id()).is_ok(),
            "a zombie runner does not block a start"
        );
        let _ = child.wait();
        let e = r.expect_err("live runner").to_string();
        assert!(e.contains(&format!("pid {}", s.pid)), "{e}");
        // Now dead (the pid may be reused later, but not by an xlfs-rebalance right now).
        assert!(check_not_running(&path, Some(&s), std::process::id()).is_ok());
        // A live process of another name (pid 1) is not a runner.
        s.pid = 1;
        assert!(check_not_running(&path, Some(&s), std::process::id()).is_ok());
        // Stopped files never block.
        s.state = State::Stopped;
        assert!(check_not_running(&path, Some(&s), std::process::id()).is_ok());
    }

    #[test]
    fn eta_and_rates() {
        // 1000 objects estimated, 400 done of which 200 by this process in 10 s: 20/s, 30 s.
        assert_eq!(eta(Some(1000), 400, 200, 10.0), Some(30.0));
        assert_eq!(eta(None, 400, 200, 10.0), None);
        assert_eq!(eta(Some(1000), 0, 0, 10.0), None);
        assert_eq!(eta(Some(1000), 10, 10, 0.0), None);
        // More done than estimated (the estimate is low): nothing left, not negative.
        assert_eq!(eta(Some(100), 400, 200, 10.0), Some(0.0));
        assert_eq!(rate(50, 10.0), 5.0);
        assert_eq!(rate(50, 0.0), 0.0);
    }
}
