//! Running the `xlfs` CLI of this build against a state directory (the tests over real
//! bricks).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directory of this build's binaries and plugins (target/debug).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    if deps.ends_with("deps") {
        deps.parent().expect("profile").to_path_buf()
    } else {
        deps
    }
}

/// This build's `xlfs`; a missing one says how to get it.
pub fn xlfs_bin() -> PathBuf {
    let p = profile_dir().join("xlfs");
    assert!(
        p.is_file(),
        "{} missing: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// `xlfs ARGS` with state directory `state`.
pub fn xlfs(state: &Path, args: &[&str]) -> Output {
    Command::new(xlfs_bin())
        .args(args)
        .env("XLFS_STATE_DIR", state)
        .output()
        .expect("run xlfs")
}

/// [`xlfs`], which must succeed; its stdout.
pub fn xlfs_ok(state: &Path, args: &[&str]) -> String {
    let o = xlfs(state, args);
    assert!(
        o.status.success(),
        "xlfs {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}
