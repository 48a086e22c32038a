//! Running as a mount(8) helper: installed (or linked) as `/sbin/mount.fuse.xlfs` or
//! `/sbin/mount.xlfs`, the binary is called as `mount.fuse.xlfs SOURCE DIR [-sfnv] [-o OPTS]`.
//!
//! - `-o remount,...` changes the existing mount in place with mount(2) `MS_REMOUNT`: no
//!   daemon is started (the kernel makes the superblock read-only or writable again and
//!   refuses writes with EROFS itself; FUSE tells the daemon nothing). The mount's other
//!   per-mount flags (`nosuid`, `nodev`, ...) are kept unless the options change them, since
//!   a remount replaces them all.
//! - Otherwise it starts `xlfs-mount` in the background (its own session) and returns once
//!   the mount is listed, as mount(8) expects; if the daemon exits first, its error output
//!   is printed and the status is 32 (mount failure). SOURCE is `HOST:/VOLUME`, a directory
//!   (`--local`) or a volfile (`--volfile`). `ro` mounts read-only, `dev` without `nodev`,
//!   `log-file=PATH` appends the daemon's log to PATH (default: one file per mount point in
//!   /var/log/xlfs, `/mnt/gv0` -> `mnt-gv0.log`, as GlusterFS does; never a pipe, which
//!   would close under the daemon when mount(8) returns); the kernel shows SOURCE as the
//!   mount's source (`fsname`), so mount(8), findmnt and systemd match it with the fstab
//!   line; `noatime`, `relatime`, `strictatime`
//!   become `--atime MODE` and `nodiratime` `--nodiratime` (a remount cannot change them:
//!   the daemon is not told); other generic options (`rw`, `defaults`, `_netdev`, `atime`,
//!   ...) are accepted and ignored; any other `name[=value]` is passed on as
//!   `--name [value]`.

use std::ffi::{CString, OsString};
use std::fs::OpenOptions;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::mount::{mounts, unescape};

/// Names under which the binary acts as a mount helper.
const HELPER_NAMES: [&str; 3] = ["mount.fuse.xlfs", "mount.fuse3.xlfs", "mount.xlfs"];
/// mount(8)'s status for "mount failure".
const MOUNT_FAILURE: u8 = 32;
/// How long to wait for the daemon's mount to appear.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);

/// Per-mount flags a remount sets or clears: (option, flag, set).
const MOUNT_FLAGS: [(&str, libc::c_ulong, bool); 14] = [
    ("nosuid", libc::MS_NOSUID, true),
    ("suid", libc::MS_NOSUID, false),
    ("nodev", libc::MS_NODEV, true),
    ("dev", libc::MS_NODEV, false),
    ("noexec", libc::MS_NOEXEC, true),
    ("exec", libc::MS_NOEXEC, false),
    ("noatime", libc::MS_NOATIME, true),
    ("atime", libc::MS_NOATIME, false),
    ("nodiratime", libc::MS_NODIRATIME, true),
    ("diratime", libc::MS_NODIRATIME, false),
    ("relatime", libc::MS_RELATIME, true),
    ("norelatime", libc::MS_RELATIME, false),
    ("strictatime", libc::MS_STRICTATIME, true),
    ("nostrictatime", libc::MS_STRICTATIME, false),
];

/// Generic mount(8) options with no meaning for a new xlfs mount.
const IGNORED: [&str; 12] = [
    "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail", "async",
    "suid", "nosuid",
];

/// Runs the helper and returns its exit status when the binary was called by a helper name.
pub fn run_if_named() -> Option<ExitCode> {
    let argv0 = std::env::args_os().next()?;
    let name = Path::new(&argv0).file_name()?.to_str()?.to_owned();
    if !HELPER_NAMES.contains(&name.as_str()) {
        return None;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    Some(match Invocation::parse(&args).and_then(|i| i.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::from(MOUNT_FAILURE)
        }
    })
}

/// One call of the helper.
#[derive(Debug, Default, PartialEq)]
struct Invocation {
    source: OsString,
    mountpoint: PathBuf,
    /// `-o` options, in order.
    options: Vec<String>,
    /// `-f`: do everything but the mount.
    fake: bool,
}

impl Invocation {
    fn parse(args: &[OsString]) -> Result<Invocation, String> {
        let mut inv = Invocation::default();
        let mut positional = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.to_str() {
                Some("-o") => {
                    let o = it.next().ok_or("-o needs a value")?;
                    let o = o.to_str().ok_or("mount options must be UTF-8")?;
                    inv.options
                        .extend(o.split(',').filter(|s| !s.is_empty()).map(String::from));
                }
                Some("-f") => inv.fake = true,
                Some("-s" | "-n" | "-v") => {}
                Some("-t" | "-N") => {
                    it.next();
                }
                _ => positional.push(a.clone()),
            }
        }
        let [source, mountpoint] = <[OsString; 2]>::try_from(positional)
            .map_err(|_| "usage: mount.fuse.xlfs SOURCE DIR [-o OPTIONS]".to_string())?;
        inv.source = source;
        inv.mountpoint = PathBuf::from(mountpoint);
        Ok(inv)
    }

    fn run(self) -> Result<(), String> {
        let mountpoint = self
            .mountpoint
            .canonicalize()
            .map_err(|e| format!("mount point {}: {e}", self.mountpoint.display()))?;
        if self.options.iter().any(|o| o == "remount") {
            let flags = remount_flags(&current_options(&mountpoint)?, &self.options);
            return if self.fake {
                Ok(())
            } else {
                remount(&mountpoint, flags)
            };
        }
        let args = self.daemon_args()?;
        if self.fake {
            return Ok(());
        }
        let log = match self.log_file() {
            Some(p) => p,
            None => default_log(&mountpoint)?,
        };
        start_daemon(&args, &mountpoint, &log)
    }

    fn log_file(&self) -> Option<PathBuf> {
        self.options
            .iter()
            .find_map(|o| o.strip_prefix("log-file="))
            .map(PathBuf::from)
    }

    /// The daemon's command line for a new mount.
    fn daemon_args(&self) -> Result<Vec<OsString>, String> {
        let mut args: Vec<OsString> = Vec::new();
        for o in &self.options {
            let (name, value) = match o.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (o.as_str(), None),
            };
            let atime = MOUNT_FLAGS.iter().any(|(n, ..)| *n == name) && name != "dev";
            match name {
                "ro" => args.push("--read-only".into()),
                "noatime" | "relatime" | "strictatime" => {
                    args.push("--atime".into());
                    args.push(name.into());
                }
                "nodiratime" => args.push("--nodiratime".into()),
                "dev" => args.push("--dev".into()),
                "log-file" => {}
                _ if IGNORED.contains(&name)
                    || atime
                    || name.starts_with("x-")
                    || name == "comment" => {}
                _ => {
                    args.push(format!("--{}", name.replace('_', "-")).into());
                    if let Some(v) = value {
                        args.push(v.into());
                    }
                }
            }
        }
        if !self
            .options
            .iter()
            .any(|o| o.split('=').next() == Some("fsname"))
        {
            args.push("--fsname".into());
            args.push(self.source.clone());
        }
        let src = Path::new(&self.source);
        if src.is_dir() {
            args.push("--local".into());
            args.push(self.source.clone());
        } else if src.is_file() {
            args.push("--volfile".into());
            args.push(self.source.clone());
        } else {
            args.push(self.source.clone());
        }
        args.push(self.mountpoint.clone().into());
        Ok(args)
    }
}

/// The options of the xlfs mount on `mountpoint`: per-mount and superblock ones together.
fn current_options(mountpoint: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    text.lines()
        .rev()
        .find_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let mut pre = pre.split(' ');
            let mp = pre.nth(4)?;
            let per_mount = pre.next()?;
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let sb = post.nth(1).unwrap_or("");
            (unescape(mp) == mountpoint.as_os_str().as_bytes() && fstype == "fuse.xlfs").then(
                || {
                    per_mount
                        .split(',')
                        .chain(sb.split(','))
                        .map(String::from)
                        .collect()
                },
            )
        })
        .ok_or_else(|| format!("no xlfs mount on {} to remount", mountpoint.display()))
}

/// The mount(2) flags of a remount with `options` of a mount that has `current`.
fn remount_flags(current: &[String], options: &[String]) -> libc::c_ulong {
    let mut flags = libc::MS_REMOUNT;
    let mut apply = |o: &str| {
        if o == "ro" {
            flags |= libc::MS_RDONLY;
        } else if o == "rw" {
            flags &= !libc::MS_RDONLY;
        } else if let Some((_, f, set)) = MOUNT_FLAGS.iter().find(|(n, ..)| *n == o) {
            if *set {
                flags |= f;
            } else {
                flags &= !f;
            }
        }
    };
    current.iter().for_each(|o| apply(o));
    options.iter().for_each(|o| apply(o));
    flags
}

fn remount(mountpoint: &Path, flags: libc::c_ulong) -> Result<(), String> {
    let target = CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| "mount point contains NUL".to_string())?;
    // SAFETY: a NUL-terminated target; source, type and data may be null for MS_REMOUNT
    // (FUSE ignores mount data on a remount).
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!(
            "remount of {} failed: {}",
            mountpoint.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// How many xlfs mounts are stacked on `mountpoint`.
fn mounted_count(mountpoint: &Path) -> usize {
    mounts()
        .iter()
        .filter(|m| m.fstype == "fuse.xlfs" && m.mount_point == mountpoint)
        .count()
}

/// The daemon's log without `log-file=`: `/var/log/xlfs/<mount point, '/' as '-'>.log`.
fn default_log(mountpoint: &Path) -> Result<PathBuf, String> {
    let dir = Path::new(LOG_DIR);
    std::fs::create_dir_all(dir).map_err(|e| {
        format!("cannot create {LOG_DIR} for the mount's log ({e}); give one with -o log-file=PATH")
    })?;
    Ok(dir.join(log_name(mountpoint)))
}

/// `/mnt/gv0` -> `mnt-gv0.log`.
fn log_name(mountpoint: &Path) -> String {
    let name = mountpoint
        .to_string_lossy()
        .trim_matches('/')
        .replace('/', "-");
    let name = if name.is_empty() { "root".into() } else { name };
    format!("{name}.log")
}

/// Where mount logs go by default.
const LOG_DIR: &str = "/var/log/xlfs";

/// Starts the daemon in its own session, its log appended to `log`, and waits until its
/// mount is listed; if it exits first, what it logged since is the error.
fn start_daemon(args: &[OsString], mountpoint: &Path, log: &Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find xlfs-mount: {e}"))?;
    let before = mounted_count(mountpoint);
    let mut cmd = Command::new(exe);
    // Named so that it does not take itself for the helper.
    cmd.arg0("xlfs-mount")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("log file {}: {e}", log.display()))?;
    let from = f.metadata().map(|m| m.len()).unwrap_or(0);
    cmd.stderr(f);
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from mount(8)'s session
    // and terminal, so it outlives them.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start xlfs-mount: {e}"))?;
    let start = Instant::now();
    loop {
        if mounted_count(mountpoint) > before {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "xlfs-mount exited ({status}) without mounting (log: {}):\n{}",
                log.display(),
                logged_since(log, from)
            ));
        }
        if start.elapsed() > MOUNT_TIMEOUT {
            let _ = child.kill();
            return Err(format!(
                "no mount on {} after {MOUNT_TIMEOUT:?}",
                mountpoint.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What `log` holds past byte `from` (the last 8 KiB of it).
fn logged_since(log: &Path, from: u64) -> String {
    use std::io::{Seek as _, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return String::new();
    };
    let end = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = from.max(end.saturating_sub(8192));
    let mut text = String::new();
    if f.seek(SeekFrom::Start(from)).is_ok() {
        let _ = f.read_to_string(&mut text);
    }
    text
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn mount_8_arguments_are_parsed() {
        let inv = Invocation::parse(&os(&[
            "h:/vol",
            "/mnt",
            "-n",
            "-o",
            "rw,attr_timeout=2,dev",
            "-t",
            "fuse.xlfs",
        ]))
        .expect("parse");
        assert_eq!(inv.source, OsStr::new("h:/vol"));
        assert_eq!(inv.mountpoint, PathBuf::from("/mnt"));
        assert_eq!(inv.options, ["rw", "attr_timeout=2", "dev"]);
        let args = inv.daemon_args().expect("args");
        assert_eq!(
            args,
            os(&[
                "--attr-timeout",
                "2",
                "--dev",
                "--fsname",
                "h:/vol",
                "h:/vol",
                "/mnt"
            ])
        );
        assert!(Invocation::parse(&os(&["/mnt"])).is_err());
        let inv = Invocation::parse(&os(&["h:/v", "/m", "-o", "ro,noatime,nodiratime,atime"]))
            .expect("parse");
        assert_eq!(
            inv.daemon_args().expect("args"),
            os(&[
                "--read-only",
                "--atime",
                "noatime",
                "--nodiratime",
                "--fsname",
                "h:/v",
                "h:/v",
                "/m"
            ])
        );
        // A name given by hand is kept.
        let inv = Invocation::parse(&os(&["h:/v", "/m", "-o", "fsname=mine"])).expect("parse");
        assert_eq!(
            inv.daemon_args().expect("args"),
            os(&["--fsname", "mine", "h:/v", "/m"])
        );
    }

    #[test]
    fn the_default_log_is_named_after_the_mount_point() {
        assert_eq!(log_name(Path::new("/mnt/gv0")), "mnt-gv0.log");
        assert_eq!(log_name(Path::new("/")), "root.log");
    }

    #[test]
    fn a_remount_keeps_the_flags_it_does_not_change() {
        let cur: Vec<String> = ["rw", "nosuid", "nodev", "relatime", "user_id=0"]
            .map(String::from)
            .to_vec();
        let ro = remount_flags(&cur, &["remount".into(), "ro".into()]);
        let keep = libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RELATIME;
        assert_eq!(ro, keep | libc::MS_RDONLY);
        let back: Vec<String> = ["ro", "nosuid", "nodev", "relatime"]
            .map(String::from)
            .to_vec();
        assert_eq!(remount_flags(&back, &["remount".into(), "rw".into()]), keep);
    }
}
