//! `xlfs volume rebalance VOL start|status|stop`: runs `xlfs-rebalance` (hosts/rebalance)
//! detached, like mounts, and reads the status file it keeps.
//!
//! The runner writes `<voldir>/rebalance.json` (atomically, every second) and logs to
//! `<voldir>/log/rebalance.log`. It is the one record of a run: `start` refuses while the
//! pid in it is alive, and a file left "running" by a dead runner (kill -9, a crash) or
//! "stopped" is resumed by the next `start` (the runner skips the directories it finished).
//! A file of another kind of run (a remove-brick) is set aside as `rebalance.json.prev`
//! first, so one kind never resumes the other. remove-brick (`remove_brick.rs`) uses the
//! same runner with `--mode remove-brick`.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use xlfs_volgen::VolumeSpec;

use super::{Ctx, brick_states, print_json};
use crate::error::{CliError, Result};
use crate::procs;
use crate::sibling;
use crate::state::VolumeDir;

/// Name of the rebalance runner binary.
pub const XLFS_REBALANCE: &str = "xlfs-rebalance";
/// The volume option that names the children being removed.
pub const DECOMMISSIONED: &str = "cluster.distribute.decommissioned";
/// How long the runner may take to write its first status.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long `start` waits for a killed runner to be reaped.
const ZOMBIE_WAIT: Duration = Duration::from_secs(15);
/// How long `stop` waits for the runner to finish its current file and exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start (or resume) a rebalance in the background.
    Start,
    /// Show the progress of the current or last run.
    Status,
    /// Stop the run (it finishes the file it is moving); `start` resumes it.
    Stop,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume add-brick gv0 /data/b2 /data/b3
  xlfs volume rebalance gv0 start      fix the layouts, then move files to their new bricks
  xlfs volume rebalance gv0 status     files scanned/moved/skipped/failed, bytes, rate, ETA
  xlfs volume rebalance gv0 status --json
  xlfs volume rebalance gv0 stop       stops after the current file; `start` resumes

The run goes on in the background (xlfs-rebalance) after the command returns; its status file
is <state>/volumes/VOL/rebalance.json, its log <state>/volumes/VOL/log/rebalance.log.
See docs/rebalance.md.")]
pub struct Args {
    pub name: String,
    pub action: Action,
    /// Print the runner's status file as it is (status, stop).
    #[arg(long)]
    pub json: bool,
}

/// The runner's status file (section C of the runner's contract); unknown fields ignored.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Status {
    pub mode: String,
    pub state: String,
    pub pid: u32,
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
    pub rate_files_per_s: f64,
    pub rate_bytes_per_s: f64,
    pub eta_s: Option<f64>,
    pub last_error: Option<String>,
}

impl Status {
    /// Whether the runner that wrote this is alive.
    pub fn alive(&self) -> bool {
        self.pid > 0 && procs::alive(self.pid, XLFS_REBALANCE)
    }

    /// Finished with every file in place: nothing skipped, nothing failed.
    pub fn clean(&self) -> bool {
        self.state == "completed" && self.files_skipped == 0 && self.failures == 0
    }
}

/// The status file and its raw JSON, or None when no run left one.
pub fn read_status(vd: &VolumeDir) -> Result<Option<(Status, serde_json::Value)>> {
    let path = vd.rebalance_status();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::Io { path, source: e }),
    };
    parse_status(&text, &path).map(Some)
}

fn parse_status(text: &str, path: &Path) -> Result<(Status, serde_json::Value)> {
    let bad = |e: serde_json::Error| {
        CliError::Other(format!(
            "{}: not a rebalance status file ({e}); move it away to start afresh",
            path.display()
        ))
    };
    let raw: serde_json::Value = serde_json::from_str(text).map_err(bad)?;
    let status: Status = serde_json::from_value(raw.clone()).map_err(bad)?;
    Ok((status, raw))
}

/// Moves the status file aside (`rebalance.json.prev`) so the next run starts afresh.
pub fn set_aside(vd: &VolumeDir) -> Result<()> {
    let path = vd.rebalance_status();
    if path.exists() {
        let prev = path.with_extension("json.prev");
        std::fs::rename(&path, &prev).map_err(CliError::io(&path))?;
    }
    Ok(())
}

/// The children being removed (`cluster.distribute.decommissioned`), in order.
pub fn decommissioned(spec: &VolumeSpec) -> Vec<String> {
    spec.options
        .get(DECOMMISSIONED)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Starts the runner in `mode` and waits until it wrote its status; returns it. Refuses
/// while a runner lives.
pub fn start_runner(vd: &VolumeDir, spec: &VolumeSpec, mode: &str) -> Result<Status> {
    if let Some((s, _)) = read_status(vd)? {
        if s.alive() {
            return Err(CliError::State(format!(
                "a {} of volume {} is running (pid {}); see `xlfs volume rebalance {} status`, \
                 or stop it first",
                s.mode, spec.name, s.pid, spec.name
            )));
        }
        // A killed runner nobody reaped yet still has its pid, and the new runner refuses to
        // start over a status file whose pid exists: wait until the orphan is reaped.
        if s.pid > 0 && !procs::wait_for(ZOMBIE_WAIT, || !procs::zombie(s.pid)) {
            return Err(CliError::Process(format!(
                "the last runner (pid {}) is dead but not reaped yet (a zombie); try again in \
                 a moment",
                s.pid
            )));
        }
    }
    let run = vd.load_run()?;
    let states = brick_states(spec, &run);
    let Some(brick) = states.iter().find(|b| b.online) else {
        return Err(CliError::State(format!(
            "no brick of volume {} is online; `xlfs volume start {}` first",
            spec.name, spec.name
        )));
    };
    let host = spec
        .position_of(brick.index)
        .map(|p| spec.bricks[p].connect_host().to_owned())
        .unwrap_or_else(|| xlfs_volgen::LOOPBACK.to_owned());
    let prog = sibling::find(XLFS_REBALANCE)?;
    let mut args: Vec<OsString> = vec![
        "--server".into(),
        format!("{host}:{}", brick.port).into(),
        "--volume".into(),
        spec.name.clone().into(),
        "--status".into(),
        vd.rebalance_status().into(),
        "--mode".into(),
        mode.into(),
    ];
    if let Some(file) = super::secret_file(vd, spec)? {
        args.push("--secret-file".into());
        args.push(file.into());
    }
    std::fs::create_dir_all(vd.log_dir()).map_err(CliError::io(vd.log_dir()))?;
    let log = vd.rebalance_log();
    let mut child = procs::spawn_detached(&prog, &args, &log)?;
    let pid = child.id();
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        // The runner writes the file at start: wait for one with its pid.
        if let Ok(Some((s, _))) = read_status(vd)
            && s.pid == pid
        {
            return Ok(s);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // It may have finished at once (nothing to move): its status says so.
            if let Ok(Some((s, _))) = read_status(vd)
                && s.pid == pid
            {
                return Ok(s);
            }
            return Err(CliError::Process(format!(
                "{XLFS_REBALANCE} exited ({status}) before writing its status:\n{}",
                procs::log_tail(&log, 8)
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CliError::Process(format!(
                "{XLFS_REBALANCE} wrote no status within {}s (killed):\n{}",
                START_TIMEOUT.as_secs(),
                procs::log_tail(&log, 8)
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM to the runner, then waits (bounded) until it exited; returns its last status,
/// None when no runner was alive.
pub fn stop_runner(vd: &VolumeDir) -> Result<Option<Status>> {
    let Some((s, _)) = read_status(vd)? else {
        return Ok(None);
    };
    if !s.alive() {
        return Ok(None);
    }
    procs::signal(s.pid, libc::SIGTERM);
    if !procs::wait_for(STOP_TIMEOUT, || !procs::alive(s.pid, XLFS_REBALANCE)) {
        return Err(CliError::Process(format!(
            "{XLFS_REBALANCE} (pid {}) did not stop within {}s of SIGTERM (a large file in \
             its move?); wait, or kill -9 it: the next start resumes",
            s.pid,
            STOP_TIMEOUT.as_secs()
        )));
    }
    Ok(read_status(vd)?.map(|(s, _)| s))
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    match a.action {
        Action::Start => {
            let removing = decommissioned(&spec);
            if !removing.is_empty() {
                return Err(CliError::State(format!(
                    "volume {} has a remove-brick in progress (children {}); finish it with \
                     `xlfs volume remove-brick {} BRICK... commit`, or cancel it with `... stop`",
                    spec.name,
                    removing.join(", "),
                    spec.name
                )));
            }
            super::peer::no_runner_elsewhere(ctx, &spec.name, false)?;
            let resumed = match read_status(&vd)? {
                Some((s, _)) if s.mode != "rebalance" && !s.alive() => {
                    set_aside(&vd)?;
                    false
                }
                Some((s, _)) => !s.alive() && s.state != "completed",
                None => false,
            };
            let s = start_runner(&vd, &spec, "rebalance")?;
            let how = if resumed {
                "resumed (directories finished before are skipped)"
            } else {
                "started"
            };
            println!("rebalance of {} {how} (pid {})", spec.name, s.pid);
            println!("  progress: xlfs volume rebalance {} status", spec.name);
            println!("  log: {}", vd.rebalance_log().display());
            Ok(0)
        }
        Action::Status => {
            let Some((s, raw)) = read_status(&vd)? else {
                return Err(CliError::State(format!(
                    "no rebalance has run on volume {}; `xlfs volume rebalance {} start`",
                    spec.name, spec.name
                )));
            };
            if a.json {
                print_json(&raw)?;
            } else {
                print_human(&spec.name, &s);
            }
            Ok(0)
        }
        Action::Stop => match stop_runner(&vd)? {
            None => Err(CliError::State(format!(
                "no rebalance runs on volume {}",
                spec.name
            ))),
            Some(s) => {
                if a.json {
                    if let Some((_, raw)) = read_status(&vd)? {
                        print_json(&raw)?;
                    }
                } else {
                    println!(
                        "{} of {} {}; `xlfs volume rebalance {} start` resumes it",
                        s.mode, spec.name, s.state, spec.name
                    );
                }
                Ok(0)
            }
        },
    }
}

/// `1.5 GiB`-style sizes.
fn bytes(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// `1h02m03s`-style durations.
fn duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m:02}m{s:02}s")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The human view of a status: state, counters, bytes, rate, ETA, elapsed.
pub fn human(volume: &str, s: &Status) -> String {
    let alive = s.alive();
    let state = match (s.state.as_str(), alive) {
        ("running", false) => {
            "interrupted (the runner is gone: killed or crashed; `start` resumes)".to_owned()
        }
        ("stopped", _) => "stopped (`start` resumes)".to_owned(),
        (st, _) => st.to_owned(),
    };
    let mut out = vec![format!("{} of volume {volume}: {state}", s.mode)];
    let runner = if alive { "running" } else { "not running" };
    out.push(format!("  runner pid {} ({runner})", s.pid));
    let total = s
        .files_total_estimate
        .map_or_else(String::new, |t| format!(" of ~{t}"));
    out.push(format!(
        "  files: scanned {}{total}, moved {}, skipped {}, vanished {}, failed {}",
        s.files_scanned, s.files_moved, s.files_skipped, s.files_vanished, s.failures
    ));
    out.push(format!(
        "  moved {}, directories done {}",
        bytes(s.bytes_moved as f64),
        s.dirs_done
    ));
    out.push(format!(
        "  rate {:.1} files/s, {}/s",
        s.rate_files_per_s,
        bytes(s.rate_bytes_per_s)
    ));
    let end = match s.finished {
        Some(f) => f,
        None if alive => now(),
        None => s.updated,
    };
    let elapsed = duration(end.saturating_sub(s.started));
    let eta = match (s.state.as_str(), s.eta_s) {
        ("running", Some(e)) if alive => format!(", ETA {}", duration(e.max(0.0).round() as u64)),
        ("running", None) if alive => ", ETA unknown".to_owned(),
        _ => String::new(),
    };
    out.push(format!("  elapsed {elapsed}{eta}"));
    if let Some(e) = &s.last_error {
        out.push(format!("  last error: {e}"));
    }
    if s.files_skipped > 0 && s.state == "completed" {
        out.push(
            "  skipped files stay where they are (open with locks, hard links, busy...): \
             start again later to retry them"
                .into(),
        );
    }
    out.join("\n")
}

fn print_human(volume: &str, s: &Status) {
    println!("{}", human(volume, s));
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{ "version":1, "mode":"rebalance", "state":"completed",
      "pid":4194303, "started":1000, "updated":1065, "finished":1065,
      "dirs_done":101, "files_scanned":10000, "files_moved":5012, "bytes_moved":52428800,
      "files_skipped":1, "files_vanished":3, "failures":0, "files_total_estimate":10100,
      "rate_files_per_s":153.8, "rate_bytes_per_s":806596.9, "eta_s":null, "last_error":null,
      "done_dirs":["00000000-0000-0000-0000-000000000001"], "future_field": 7 }"#;

    #[test]
    fn status_file_parses_and_reads_well() {
        let (s, raw) = parse_status(SAMPLE, Path::new("r.json")).expect("parses");
        assert_eq!(s.files_moved, 5012);
        assert_eq!(raw["future_field"], 7);
        assert!(!s.clean(), "a skipped file is not clean");
        let text = human("gv0", &s);
        assert!(
            text.starts_with("rebalance of volume gv0: completed"),
            "{text}"
        );
        assert!(
            text.contains("scanned 10000 of ~10100, moved 5012, skipped 1"),
            "{text}"
        );
        assert!(
            text.contains("moved 50.0 MiB, directories done 101"),
            "{text}"
        );
        assert!(text.contains("rate 153.8 files/s, 787.7 KiB/s"), "{text}");
        assert!(text.contains("elapsed 1m05s"), "{text}");
        assert!(text.contains("skipped files stay"), "{text}");
    }

    #[test]
    fn a_dead_running_runner_reads_as_interrupted() {
        let text = SAMPLE
            .replace("\"completed\"", "\"running\"")
            .replace("\"finished\":1065", "\"finished\":null");
        let (s, _) = parse_status(&text, Path::new("r.json")).expect("parses");
        // pid 4194303 is past the default pid_max; nothing runs there.
        assert!(!s.alive());
        let h = human("gv0", &s);
        assert!(h.contains("interrupted"), "{h}");
        assert!(!h.contains("ETA"), "{h}");
    }

    #[test]
    fn a_corrupt_status_file_names_itself() {
        let e = parse_status("{ not json", Path::new("/s/rebalance.json")).expect_err("corrupt");
        assert!(
            e.to_string()
                .starts_with("/s/rebalance.json: not a rebalance status")
        );
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(duration(3723), "1h02m03s");
        assert_eq!(duration(59), "59s");
    }
}
