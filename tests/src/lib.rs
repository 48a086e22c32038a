//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

/// The directory holding this test binary (`target/<profile>/deps`), where cargo puts the
/// `.so` files of cdylib dev-dependencies.
pub fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().expect("exe dir").to_path_buf()
}

/// `target/<profile>`, where `cargo build --workspace` puts the translator `.so` files.
pub fn profile_dir() -> PathBuf {
    let d = deps_dir();
    if d.ends_with("deps") {
        d.parent().expect("profile dir").to_path_buf()
    } else {
        d
    }
}

/// A library file next to the test binary, or a clear panic saying how to build it.
pub fn plugin(crate_name: &str) -> PathBuf {
    let file = format!("lib{}.so", crate_name.replace('-', "_"));
    for dir in [deps_dir(), profile_dir()] {
        let p = dir.join(&file);
        if p.is_file() {
            return p;
        }
    }
    panic!("{file} not found next to the test binary; run `cargo build --workspace` first")
}

/// A host binary built by `cargo build --workspace` (same profile as the test), or a clear
/// panic saying how to build it.
pub fn bin(name: &str) -> PathBuf {
    let p = profile_dir().join(name);
    assert!(
        p.is_file(),
        "{} missing: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// Whether something is mounted on `path` (this process's mount namespace).
pub fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let p = path.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*p))
}

/// Why tests that need FUSE and root cannot run here, if they cannot.
pub fn e2e_missing() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    None
}

/// Returns from a test that needs FUSE and root when they are missing (saying why), unless
/// XLFS_E2E_REQUIRE=1 (set by .ci/run) makes it fail instead.
#[macro_export]
macro_rules! require_e2e {
    () => {
        if let Some(why) = $crate::e2e_missing() {
            if std::env::var("XLFS_E2E_REQUIRE").as_deref() == Ok("1") {
                panic!("cannot run: {why}");
            }
            println!("SKIPPED: {why}");
            return;
        }
    };
}

pub use xlfs_testkit::ports::free_ports;

pub mod probe;

/// Every xattr of `p` (not following a symlink), sorted by name.
pub fn xattrs(p: &Path) -> Vec<(String, Vec<u8>)> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
    let mut names = vec![0u8; 64 << 10];
    // SAFETY: a NUL-terminated path and a buffer of the length given.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    assert!(n >= 0, "llistxattr {}", p.display());
    names.truncate(n as usize);
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let cn = std::ffi::CString::new(name).expect("name");
        let mut v = vec![0u8; 64 << 10];
        // SAFETY: NUL-terminated path and name, a buffer of the length given.
        let len =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
        assert!(len >= 0, "lgetxattr {} {:?}", p.display(), cn);
        v.truncate(len as usize);
        out.push((String::from_utf8_lossy(name).into_owned(), v));
    }
    out.sort();
    out
}

/// `rm -rf` of `name` under each of `dirs`, started at once, their stderr captured.
pub fn spawn_rm_rf(dirs: &[&Path], name: &str) -> Vec<std::process::Child> {
    dirs.iter()
        .map(|d| {
            std::process::Command::new("rm")
                .arg("-rf")
                .arg(d.join(name))
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("rm")
        })
        .collect()
}
