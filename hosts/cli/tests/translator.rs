//! `xlfs translator list|show|new` and the plugin search path in every host's `--help`.

mod common;

use std::process::Command;

use common::bin;

fn run(prog: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(bin(prog))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run {prog}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_host_names_the_plugin_path_in_its_help() {
    for prog in ["xlfs", "xlfsd", "xlfs-mount", "xlfs-nfsd"] {
        if !bin(prog).is_file() {
            panic!("{prog} is not built (cargo build --workspace)");
        }
        let (ok, out, err) = run(prog, &["--help"], &[]);
        assert!(ok, "{prog} --help: {err}");
        assert!(out.contains("XLFS_XLATOR_PATH"), "{prog} --help:\n{out}");
    }
}

#[test]
fn list_shows_built_in_types_and_plugins_on_the_path() {
    let plugins = bin("libxlfs_read_only.so");
    assert!(plugins.is_file(), "cargo build --workspace first");
    let dir = plugins.parent().expect("dir").display().to_string();
    let (ok, out, err) = run(
        "xlfs",
        &["translator", "list", "--json"],
        &[("XLFS_XLATOR_PATH", &dir)],
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let rows = v.as_array().expect("a list");
    let find = |name: &str| rows.iter().find(|r| r["name"] == name);
    let posix = find("storage/posix").expect("built-in storage/posix");
    assert_eq!(posix["source"], "built-in");
    assert!(
        posix["options"]
            .as_array()
            .expect("options")
            .iter()
            .any(|o| o["key"] == "directory"),
        "{posix}"
    );
    let ro = find("features/read-only").expect("plugin features/read-only");
    assert!(
        ro["source"]
            .as_str()
            .is_some_and(|s| s.ends_with("libxlfs_read_only.so")),
        "{ro}"
    );
    assert!(!ro["doc"].as_str().unwrap_or_default().is_empty(), "{ro}");
}

#[test]
fn show_prints_docs_and_every_option() {
    let (ok, out, err) = run("xlfs", &["translator", "show", "storage/posix"], &[]);
    assert!(ok, "{err}");
    assert!(out.starts_with("storage/posix  (built-in)"), "{out}");
    assert!(out.contains("\noptions:\n"), "{out}");
    assert!(out.contains("  directory  (path"), "{out}");
    let (ok, _, err) = run("xlfs", &["translator", "show", "user/nothing-here"], &[]);
    assert!(!ok);
    assert!(err.contains("XLFS_XLATOR_PATH"), "{err}");
}

#[test]
fn new_refuses_bad_names_and_non_empty_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, _, err) = run(
        "xlfs",
        &[
            "translator",
            "new",
            "Bad_Name",
            dir.path().join("x").to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(!ok && err.contains("not a translator name"), "{err}");
    std::fs::write(dir.path().join("file"), "x").expect("write");
    let (ok, _, err) = run(
        "xlfs",
        &[
            "translator",
            "new",
            "good",
            dir.path().to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(!ok && err.contains("not empty"), "{err}");
}
