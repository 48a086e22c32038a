//! The `xlfs` binary without processes: create/set/get/volfile/delete, exit codes, and
//! that a rejected command writes nothing.

use std::path::Path;
use std::process::{Command, Output};

fn xlfs(state: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xlfs"))
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env_remove("XLFS_STATE_DIR")
        .output()
        .expect("run xlfs")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn create_set_get_volfile_delete() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let brick = tmp.path().join("b0");
    let brick_s = brick.to_str().expect("utf-8");

    let o = xlfs(
        &state,
        &["volume", "create", "gv0", brick_s, "--port", "41000"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("created volume gv0 (plain, 1 brick)"));
    assert!(brick.is_dir(), "brick directory created");
    let vol = state.join("volumes/gv0");
    for f in ["volume.ron", "client.vol", "brick-0.vol"] {
        assert!(vol.join(f).is_file(), "{f}");
    }

    // Exists already: exit 5, nothing changed.
    let o = xlfs(&state, &["volume", "create", "gv0", brick_s]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));

    // Options by key.
    let o = xlfs(&state, &["volume", "set", "gv0", "ping-timeout", "5s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("protocol.client.ping-timeout = 5s"));
    let client = std::fs::read_to_string(vol.join("client.vol")).expect("client volfile");
    assert!(client.contains("\"ping-timeout\": \"5s\""), "{client}");

    let before = std::fs::read_to_string(vol.join("volume.ron")).expect("spec");
    let o = xlfs(&state, &["volume", "set", "gv0", "ping-timeot", "5s"]);
    assert_eq!(code(&o), 3);
    assert!(
        stderr(&o).contains("did you mean \"ping-timeout\"?"),
        "{}",
        stderr(&o)
    );
    let o = xlfs(&state, &["volume", "set", "gv0", "ping-timeout", "1h"]);
    assert_eq!(code(&o), 3);
    assert!(
        stderr(&o).contains("is above the maximum"),
        "{}",
        stderr(&o)
    );
    let o = xlfs(
        &state,
        &["volume", "set", "gv0", "storage.posix.directory", "/x"],
    );
    assert_eq!(code(&o), 3);
    assert_eq!(
        std::fs::read_to_string(vol.join("volume.ron")).expect("spec"),
        before
    );

    let o = xlfs(&state, &["volume", "get", "gv0", "ping-timeout", "--json"]);
    assert_eq!(code(&o), 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["key"], "protocol.client.ping-timeout");
    assert_eq!(v[0]["value"], "5s");
    assert_eq!(v[0]["default"], false);

    let o = xlfs(&state, &["volfile", "gv0", "--server", "0"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("\"listen-port\": \"41000\""));
    let o = xlfs(&state, &["volfile", "gv0", "--server", "3"]);
    assert_eq!(code(&o), 3);

    let o = xlfs(&state, &["volume", "options", "--json"]);
    assert_eq!(code(&o), 0);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let keys: Vec<&str> = rows
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert!(keys.contains(&"protocol.client.ping-timeout"));
    assert!(keys.contains(&"storage.posix.gfid-xattr"));

    // Not started: status exits 7, stop exits 5.
    let o = xlfs(&state, &["volume", "status", "gv0"]);
    assert_eq!(code(&o), 7, "{}", stdout(&o));
    let o = xlfs(&state, &["volume", "stop", "gv0"]);
    assert_eq!(code(&o), 5);

    let o = xlfs(&state, &["volume", "delete", "gv0"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!vol.exists());
    assert!(brick.is_dir(), "brick data is kept");
    let o = xlfs(&state, &["volume", "info", "gv0"]);
    assert_eq!(code(&o), 4);
}

#[test]
fn rejected_descriptions_write_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let b = |n: &str| tmp.path().join(n).to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["bad name".into(), b("x")],
            "volume name \"bad name\" is not allowed",
        ),
        (vec!["v".into(), "rel/dir".into()], "the path is relative"),
        (vec!["v".into(), b("a"), b("a")], "is given twice"),
        (vec!["v".into(), b("a"), b("a/b")], "is inside brick"),
        (
            vec![
                "v".into(),
                b("a"),
                b("b"),
                b("c"),
                "--replica".into(),
                "2".into(),
            ],
            "multiple of 2",
        ),
    ];
    for (args, msg) in cases {
        let mut full = vec!["volume", "create"];
        full.extend(args.iter().map(String::as_str));
        let o = xlfs(&state, &full);
        assert_eq!(code(&o), 3, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
        assert!(!state.exists(), "{args:?} wrote state");
        assert!(!tmp.path().join("a").exists(), "{args:?} created a brick");
    }
    // A brick path that is a file.
    std::fs::write(tmp.path().join("file"), "x").expect("write");
    let o = xlfs(&state, &["volume", "create", "v", &b("file")]);
    assert_eq!(code(&o), 3);
    assert!(
        stderr(&o).contains("exists and is not a directory"),
        "{}",
        stderr(&o)
    );
    assert!(!state.exists());
    // Two bricks without replica are a distribute 2 volume (cluster/distribute is built).
    let o = xlfs(&state, &["volume", "create", "v", &b("a"), &b("b")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("distribute 2"), "{}", stdout(&o));
}

#[test]
fn a_second_volume_gets_its_own_ports_and_bricks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let b = |n: &str| tmp.path().join(n).to_string_lossy().into_owned();
    assert_eq!(
        code(&xlfs(
            &state,
            &["volume", "create", "one", &b("one"), "--port", "42000"]
        )),
        0
    );
    let o = xlfs(&state, &["volume", "create", "two", &b("one/inner")]);
    assert_eq!(code(&o), 3);
    assert!(stderr(&o).contains("overlaps brick"), "{}", stderr(&o));
    let o = xlfs(
        &state,
        &["volume", "create", "two", &b("two"), "--port", "42000"],
    );
    assert_eq!(code(&o), 3);
    assert!(
        stderr(&o).contains("overlap those of volume \"one\""),
        "{}",
        stderr(&o)
    );
    let o = xlfs(&state, &["volume", "list", "--json"]);
    assert_eq!(
        stdout(&o).split_whitespace().collect::<String>(),
        "[\"one\"]"
    );
}

/// `xlfs up --set` checks each setting before anything starts.
#[test]
fn up_refuses_a_bad_setting_before_starting() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let dir = tmp.path().join("demo");
    let dir_s = dir.to_str().expect("utf-8");
    let o = xlfs(&state, &["up", dir_s, "--set", "io-cache"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("is not KEY=VALUE"), "{}", stderr(&o));
    let o = xlfs(
        &state,
        &["up", dir_s, "--set", "performance.io-cache=maybe"],
    );
    assert_ne!(code(&o), 0, "{}", stdout(&o));
    assert!(stderr(&o).contains("not a boolean"), "{}", stderr(&o));
    assert!(
        !state.join("volumes/demo/run.json").exists(),
        "nothing was started"
    );
}

/// Every volume gets a secret file (0600) that its volfiles name without carrying the secret;
/// `--secret-file` copies one in (mode checked), `--no-secret` opts out, `--secret` is refused.
#[test]
fn volumes_get_a_secret_file() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let b = |n: &str| tmp.path().join(n).to_string_lossy().into_owned();
    let vol = |n: &str| state.join("volumes").join(n);
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    let no_secret_text = |n: &str, secret: &str| {
        for f in ["volume.ron", "client.vol", "brick-0.vol"] {
            let text = std::fs::read_to_string(vol(n).join(f)).expect("state file");
            assert!(
                !text.contains(secret),
                "{n}/{f} carries the secret:\n{text}"
            );
            if f != "volume.ron" {
                let named = format!("\"secret-file\": {:?}", vol(n).join("secret"));
                assert!(text.contains(&named), "{n}/{f} lacks {named}:\n{text}");
            }
        }
    };

    let o = xlfs(
        &state,
        &["volume", "create", "gen", &b("gen"), "--port", "43000"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let secret = std::fs::read_to_string(vol("gen").join("secret")).expect("secret file");
    assert_eq!(secret.trim().len(), 64, "{secret:?}");
    assert_eq!(mode(&vol("gen").join("secret")), 0o600);
    no_secret_text("gen", secret.trim());
    let o = xlfs(&state, &["volume", "info", "gen"]);
    assert!(stdout(&o).contains("secret      in "), "{}", stdout(&o));

    // An existing file: copied in; one others may read is refused, and nothing is written.
    let mine = tmp.path().join("mine");
    std::fs::write(&mine, "my own secret\n").expect("write");
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mine_s = mine.to_string_lossy().into_owned();
    let args = [
        "volume",
        "create",
        "own",
        &b("own"),
        "--port",
        "43010",
        "--secret-file",
        &mine_s,
    ];
    let o = xlfs(&state, &args);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("chmod 600"), "{}", stderr(&o));
    assert!(!vol("own").exists(), "nothing written");
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let o = xlfs(&state, &args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(vol("own").join("secret")).expect("copy"),
        "my own secret\n"
    );
    assert_eq!(mode(&vol("own").join("secret")), 0o600);
    no_secret_text("own", "my own secret");

    let o = xlfs(
        &state,
        &[
            "volume",
            "create",
            "open",
            &b("open"),
            "--port",
            "43020",
            "--no-secret",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!vol("open").join("secret").exists());
    let client = std::fs::read_to_string(vol("open").join("client.vol")).expect("client.vol");
    assert!(!client.contains("secret"), "{client}");

    let o = xlfs(
        &state,
        &["volume", "create", "argv", &b("argv"), "--secret", "s3"],
    );
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("--secret-file FILE"), "{}", stderr(&o));
    assert!(!vol("argv").exists(), "nothing written");
}

/// A volume made before secret files (`secret` in its description) keeps its inline secret.
#[test]
fn an_inline_secret_of_an_older_volume_is_kept() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let vol = state.join("volumes/old");
    std::fs::create_dir_all(&vol).expect("mkdir");
    let brick = tmp.path().join("b").to_string_lossy().into_owned();
    std::fs::write(
        vol.join("volume.ron"),
        format!("(name: \"old\", bricks: [{brick:?}], secret: Some(\"legacy\"))"),
    )
    .expect("write");
    let o = xlfs(&state, &["volume", "set", "old", "ping-timeout", "5s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let client = std::fs::read_to_string(vol.join("client.vol")).expect("client.vol");
    assert!(client.contains("\"secret\": \"legacy\""), "{client}");
}
