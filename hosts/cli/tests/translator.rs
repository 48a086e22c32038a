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

/// Builds a crate written by `xlfs translator new` in `dir` with its own cargo, outside the
/// workspace (offline, the workspace's Cargo.lock), into the shared target/tmp/xlfs-outside;
/// returns the library.
fn build_outside(dir: &std::path::Path, krate: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");
    let target = root.join("target/tmp/xlfs-outside");
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
        "cargo build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let so = target
        .join("debug")
        .join(format!("lib{}.so", krate.replace('-', "_")));
    assert!(so.is_file(), "{} not built", so.display());
    so
}

/// Polls `f` every 100 ms for up to 15 s until it returns `Some`.
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The done-when test of issue 27: a translator scaffolded and built outside the workspace
/// joins a running volume by a graph switch (no remount) on a mount started by `xlfs mount`
/// and on one that fetched its volfile from the brick (which only the brick's volfile watch
/// can tell), shows in their live statedumps (text and JSON), and goes out the same way.
#[test]
fn a_scaffolded_translator_joins_a_running_volume_by_graph_switch() {
    if common::skip("a_scaffolded_translator_joins_a_running_volume_by_graph_switch") {
        return;
    }
    let s = common::scratch();
    // The translator, outside the workspace.
    let src = s.tmp.path().join("gs-counter");
    let (ok, _, err) = run(
        "xlfs",
        &[
            "translator",
            "new",
            "gs-counter",
            src.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");
    let so = build_outside(&src, "xlfs-gs-counter");
    let plugin = so.to_str().expect("utf-8").to_owned();
    let env = [("XLFS_XLATOR_PATH", plugin.as_str())];
    let state = s.state.to_str().expect("utf-8").to_owned();
    let xl = |args: &[&str]| {
        let mut all = vec!["--state-dir", state.as_str()];
        all.extend_from_slice(args);
        let r = run("xlfs", &all, &env);
        eprintln!("$ xlfs {}\n{}{}", args.join(" "), r.1, r.2);
        r
    };

    let mut cleanup = common::Cleanup {
        state: s.state.clone(),
        volume: "gs".into(),
        mountpoints: vec![s.mnt.clone()],
        children: vec![],
    };
    let port = common::free_port().to_string();
    let brick = s.brick.to_str().expect("utf-8");
    assert!(xl(&["volume", "create", "gs", brick, "--port", &port]).0);
    assert!(xl(&["volume", "start", "gs"]).0);
    let mnt = s.mnt.to_str().expect("utf-8");
    assert!(xl(&["mount", "gs", mnt]).0);
    // A second mount that fetched its volfile from the brick: nothing signals it.
    let mnt2 = s.tmp.path().join("mnt2");
    std::fs::create_dir(&mnt2).expect("mkdir");
    cleanup.mountpoints.push(mnt2.clone());
    let sock2 = s.tmp.path().join("mnt2.sock");
    let child = Command::new(bin("xlfs-mount"))
        .arg(format!("127.0.0.1:{port}:/gs"))
        .arg("--secret-file")
        .arg(s.state.join("volumes/gs/secret"))
        .arg(&mnt2)
        .arg("--control-socket")
        .arg(&sock2)
        .env("XLFS_XLATOR_PATH", &plugin)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("xlfs-mount");
    cleanup.children.push(child);
    eventually("the second mount", || common::mounted(&mnt2).then_some(()));
    std::fs::write(s.mnt.join("before"), b"written before the switch").expect("write");

    let dump1 = || {
        let (ok, out, err) = xl(&["volume", "statedump", "gs", "--client", mnt]);
        assert!(ok, "{err}");
        out
    };
    let dump2 = |req| {
        xlfs_host::control::ask(&sock2, req, std::time::Duration::from_secs(10)).expect("ask")
    };
    let text = xlfs_host::control::Request::StatedumpText;
    let header = "[gs-user-gs-counter (user/gs-counter)]";
    let before = dump1();
    assert!(before.contains("\ngraph: 1\n"), "{before}");
    assert!(!before.contains(header), "{before}");
    // The text dump names each translator's type once.
    assert_eq!(before.matches("debug/io-stats").count(), 1, "{before}");

    let (ok, out, err) = xl(&[
        "volume",
        "set",
        "gs",
        "user.gs-counter",
        "user/gs-counter above performance.write-behind",
    ]);
    assert!(ok, "{out}{err}");
    let after = eventually("the translator in the first mount", || {
        let d = dump1();
        d.contains(header).then_some(d)
    });
    let after2 = eventually("the translator in the fetched mount", || {
        let d = dump2(text);
        d.contains(header).then_some(d)
    });
    // The CLI asks any host by its socket too.
    let (ok, by_socket, err) = run(
        "xlfs",
        &[
            "volume",
            "statedump",
            "--socket",
            sock2.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok && by_socket.contains(header), "{by_socket}{err}");
    for d in [&after, &after2] {
        assert!(!d.contains("\ngraph: 1\n"), "a new graph: {d}");
        // Placed above write-behind: between io-stats/read-ahead and write-behind.
        let at = |h: &str| d.find(h).unwrap_or_else(|| panic!("{h} in {d}"));
        assert!(at(header) < at("(performance/write-behind)]"), "{d}");
        assert!(at("(performance/read-ahead)]") < at(header), "{d}");
    }
    // Same mounts, no remount: the file written before is there, through the new graph.
    assert_eq!(
        std::fs::read(s.mnt.join("before")).expect("read"),
        b"written before the switch"
    );
    assert!(mnt2.join("before").exists());
    let _ = std::fs::metadata(mnt2.join("no-such-name"));
    let json = dump2(xlfs_host::control::Request::StatedumpJson);
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert!(
        v["state"].is_object(),
        "the host's own state as JSON: {json}"
    );
    let mine = &v["xlators"]["gs-user-gs-counter"];
    assert_eq!(mine["type"], "user/gs-counter", "{json}");
    assert!(mine["lookups"].as_u64().is_some_and(|n| n >= 1), "{json}");

    // Out the same way.
    assert!(xl(&["volume", "reset", "gs", "user.gs-counter"]).0);
    eventually("the translator gone from the first mount", || {
        (!dump1().contains(header)).then_some(())
    });
    eventually("the translator gone from the fetched mount", || {
        (!dump2(text).contains(header)).then_some(())
    });
    assert!(s.mnt.join("before").exists());
    assert!(xl(&["umount", mnt]).0);
}
