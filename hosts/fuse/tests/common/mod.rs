//! What the real-mount tests share: skipping without FUSE, a running `xlfs-mount` that is
//! killed and lazily unmounted when dropped (so a failing test never leaves a mount behind),
//! and small helpers.
#![allow(dead_code)] // each test binary uses its own part

use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_xlfs-mount");
pub const MOUNT_TIMEOUT: Duration = Duration::from_secs(30);
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// `Some(reason)` when real mounts cannot run here.
pub fn skip_reason() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing (load the fuse module: `modprobe fuse`)".into());
    }
    None
}

/// Returns from the test when `$reason` is `Some` (a failure under XLFS_E2E_REQUIRE=1, as in CI).
macro_rules! skip_if {
    ($reason:expr) => {
        if let Some(reason) = $reason {
            if std::env::var("XLFS_E2E_REQUIRE").as_deref() == Ok("1") {
                panic!("cannot run real-mount tests: {reason}");
            }
            eprintln!("SKIPPED {}: {reason}", module_path!());
            println!("SKIPPED: {reason}");
            return;
        }
    };
}

macro_rules! require_fuse {
    () => {
        skip_if!(skip_reason())
    };
}
/// Whether `path` is a mount point now.
pub fn is_mounted(path: &Path) -> bool {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = path.as_os_str().as_bytes();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .map(|mp| unescape(mp) == want)
            .unwrap_or(false)
    })
}

pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// A running `xlfs-mount`. Dropping it kills the process and lazily unmounts, so a failing
/// test never leaves a mount behind.
pub struct Mounted {
    pub child: Option<Child>,
    pub mountpoint: PathBuf,
    pub log: PathBuf,
}

impl Mounted {
    /// Starts `xlfs-mount --local <vol> <mnt> <extra...>` and waits for the mount.
    pub fn start(vol: &Path, mnt: &Path, extra: &[&str]) -> Mounted {
        let args = [OsStr::new("--local"), vol.as_os_str(), mnt.as_os_str()];
        Mounted::start_with(&args, mnt, extra, &vol.with_extension("log"))
    }

    /// Starts `xlfs-mount --volfile <volfile> <mnt> <extra...>` (stderr to `log`) and waits
    /// for the mount.
    pub fn start_volfile(volfile: &Path, mnt: &Path, extra: &[&str], log: &Path) -> Mounted {
        let args = [
            OsStr::new("--volfile"),
            volfile.as_os_str(),
            mnt.as_os_str(),
        ];
        Mounted::start_with(&args, mnt, extra, log)
    }

    fn start_with(args: &[&OsStr], mnt: &Path, extra: &[&str], log: &Path) -> Mounted {
        let log = log.to_path_buf();
        let err = File::create(&log).expect("log file");
        let child = Command::new(BIN)
            .args(args)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("spawn xlfs-mount");
        let mut m = Mounted {
            child: Some(child),
            mountpoint: mnt.to_path_buf(),
            log,
        };
        let start = Instant::now();
        // Mounted and answering: a stale mount on the same path is listed but fails stat, and
        // once it is detached the plain directory answers stat, on its parent's device.
        let parent_dev = fs::metadata(mnt.parent().expect("mount point has a parent"))
            .expect("stat parent")
            .dev();
        let answering = || fs::metadata(mnt).is_ok_and(|m| m.dev() != parent_dev);
        while !(is_mounted(mnt) && answering()) {
            if let Some(status) = m.child_mut().try_wait().expect("try_wait") {
                panic!(
                    "xlfs-mount exited before mounting ({status}):\n{}",
                    m.log_text()
                );
            }
            assert!(
                start.elapsed() < MOUNT_TIMEOUT,
                "no mount after {MOUNT_TIMEOUT:?}:\n{}",
                m.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("child running")
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("child running").id() as i32
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) with the pid of a child we own and have not reaped yet.
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for the process to exit; returns its status and stdout.
    pub fn wait(&mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("child running");
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut out = String::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = o.read_to_string(&mut out);
                }
                return (status, out);
            }
            if start.elapsed() > EXIT_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "xlfs-mount did not exit within {EXIT_TIMEOUT:?}:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if is_mounted(&self.mountpoint) {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
    }
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("xlfs-mount-test")
        .tempdir()
        .expect("tempdir")
}

/// A small deterministic generator for test data.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL")
}
