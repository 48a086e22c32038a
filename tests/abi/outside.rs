//! Translators built outside the workspace, the way an outside developer builds one: a crate
//! written by `xlfs translator new` in a temporary directory, built with its own `cargo build`
//! against xlator-api by path (this tree's, or an edited copy of it). Every build shares one
//! target directory (target/tmp/xlfs-outside) so dependencies compile once; each crate has its
//! own name, so their libraries do not overwrite each other.

use std::path::{Path, PathBuf};
use std::process::Command;

use xlfs_integration_tests::profile_dir;

/// The workspace root (this crate is `<root>/tests`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The `xlfs` binary of this build.
pub fn xlfs_bin() -> PathBuf {
    let p = profile_dir().join("xlfs");
    assert!(
        p.is_file(),
        "{} not found; run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// Runs `xlfs translator new NAME DIR [extra...]`, asserting it succeeds.
pub fn scaffold(name: &str, dir: &Path, extra: &[&str]) {
    let out = Command::new(xlfs_bin())
        .args(["translator", "new", name])
        .arg(dir)
        .args(extra)
        .output()
        .expect("runs xlfs");
    assert!(
        out.status.success(),
        "xlfs translator new failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the crate in `dir` with its own cargo invocation (offline, the workspace's
/// Cargo.lock for pinned versions) and returns its library, `lib<crate>.so`.
pub fn cargo_build(dir: &Path, krate: &str) -> PathBuf {
    std::fs::copy(workspace_root().join("Cargo.lock"), dir.join("Cargo.lock"))
        .expect("copy Cargo.lock");
    let target = workspace_root().join("target/tmp/xlfs-outside");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--offline", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("runs cargo");
    assert!(
        out.status.success(),
        "cargo build in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let so = target
        .join("debug")
        .join(format!("lib{}.so", krate.replace('-', "_")));
    assert!(so.is_file(), "{} was not built", so.display());
    so
}

/// Copies the xlator-api sources of this tree to `dest` (for editing).
pub fn copy_api(dest: &Path) -> PathBuf {
    let api = dest.join("xlator-api");
    copy_dir(&workspace_root().join("xlator-api"), &api);
    api
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

/// Replaces `old` (which must occur) by `new` in `file`.
pub fn edit(file: &Path, old: &str, new: &str) {
    let text = std::fs::read_to_string(file).expect("read");
    assert!(text.contains(old), "{} has no {old:?}", file.display());
    std::fs::write(file, text.replacen(old, new, 1)).expect("write");
}
