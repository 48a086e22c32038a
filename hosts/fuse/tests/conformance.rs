//! pjdfstest + fsx (ci/conformance/run.sh) on a real mount of a local posix volume.
//! Needs root, /dev/fuse, and pjdfstest/fsx on PATH (ci/conformance/install.sh). Without them
//! the test says why and passes, unless XLFS_E2E_REQUIRE=1 (set by .ci/run) makes it fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_xlfs-mount");

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn missing_prerequisite() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (pjdfstest switches users)".into());
    }
    for tool in ["pjdfstest", "fsx"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false)
            || dirs_cargo_bin().join(tool).is_file();
        if !found {
            return Some(format!("{tool} not installed (run ci/conformance/install.sh)"));
        }
    }
    None
}

fn dirs_cargo_bin() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default()
        .join("bin")
}

fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let p = path.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*p))
}

/// Kills the mount process and detaches the mount whatever happens.
struct MountGuard {
    child: Child,
    mnt: PathBuf,
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

#[test]
fn pjdfstest_and_fsx_pass_on_a_local_posix_volume() {
    if let Some(why) = missing_prerequisite() {
        if std::env::var("XLFS_E2E_REQUIRE").as_deref() == Ok("1") {
            panic!("conformance cannot run: {why}");
        }
        println!("SKIPPED: {why}");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).expect("mkdir");
    let child = Command::new(BIN)
        .arg("--local")
        .arg(&data)
        .arg(&mnt)
        .stdout(Stdio::null())
        .spawn()
        .expect("start xlfs-mount");
    let guard = MountGuard { child, mnt: mnt.clone() };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_mounted(&mnt) {
        assert!(Instant::now() < deadline, "xlfs-mount did not mount within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let kit = repo_root().join("ci/conformance");
    let out = tmp.path().join("out");
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    path.push(":");
    path.push(dirs_cargo_bin());
    let status = Command::new("bash")
        .arg(kit.join("run.sh"))
        .arg(&mnt)
        .arg(&out)
        .env("PATH", path)
        .env("PJDFSTEST_XFAIL", kit.join("xfail-xlfs.txt"))
        .status()
        .expect("run.sh");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap_or_default();
    println!("{summary}");
    drop(guard);
    assert!(status.success(), "conformance failed: {summary} (logs were in {})", out.display());
    // The bar: at least 383 of 398 pjdfstest cases pass.
    let passed: u32 = summary
        .split("pjdfstest: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(passed >= 383, "pjdfstest passed {passed} < 383: {summary}");
    assert!(summary.contains("fsx: ok"), "{summary}");
}
