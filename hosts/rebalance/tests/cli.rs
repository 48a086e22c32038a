//! The `xlfs-rebalance` binary: its help, and its refusals before any work (each with exit
//! status 1, a message saying what is wrong, and the reason recorded in the status file when
//! that file is usable).

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_xlfs-rebalance");

fn rebalance(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("XLFS_SECRET")
        .output()
        .expect("run xlfs-rebalance")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn status_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("status file")).expect("json")
}

fn posix_only(dir: &Path) -> String {
    format!(
        r#"(volumes: [(name: "b", type: "storage/posix", options: {{"directory": "{}"}})])"#,
        dir.display()
    )
}

fn distribute_2(dir: &Path) -> String {
    let (b0, b1) = (dir.join("b0"), dir.join("b1"));
    std::fs::create_dir_all(&b0).expect("b0");
    std::fs::create_dir_all(&b1).expect("b1");
    format!(
        r#"(volumes: [
            (name: "v-0", type: "storage/posix", options: {{"directory": "{}"}}),
            (name: "v-1", type: "storage/posix", options: {{"directory": "{}"}}),
            (name: "v-dht", type: "cluster/distribute", subvolumes: ["v-0", "v-1"]),
        ])"#,
        b0.display(),
        b1.display()
    )
}

#[test]
fn help_explains_the_status_file_resume_stop_and_exit_codes() {
    let o = rebalance(&["--help"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "--server",
        "--volume",
        "--volfile",
        "--secret-file",
        "--status",
        "--mode",
        "--parallel",
        "--restart",
        "Status file",
        "done_dirs",
        "eta_s",
        "Resume:",
        "kill -9",
        "SIGTERM",
        "Exit status: 0 completed or stopped; 1 failed",
        "xlfs.dht.fix-layout",
        "xlfs.dht.commit-layout",
        "XLFS_XLATOR_PATH",
    ] {
        assert!(out.contains(want), "{want:?} missing from --help:\n{out}");
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(
        rebalance(&["--volfile", "v.ron"]).status.code(),
        Some(2),
        "no --status"
    );
    let o = rebalance(&["--status", "s.json"]);
    assert_eq!(o.status.code(), Some(2), "no source: {}", stderr(&o));
    let o = rebalance(&["--server", "h", "--status", "s.json"]);
    assert_eq!(o.status.code(), Some(2), "--server without --volume");
    let o = rebalance(&["--volfile", "v", "--status", "s", "--parallel", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_corrupt_status_file_is_refused_and_kept_unless_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("rebalance.json");
    std::fs::write(&status, b"{\"version\":1,\"state\":").expect("write");
    let missing = dir.path().join("missing.ron");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "--volfile".to_owned(),
            missing.display().to_string(),
            "--status".to_owned(),
            status.display().to_string(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let a = args(&[]);
    let o = rebalance(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&status.display().to_string()) && e.contains("--restart"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&status).expect("kept"),
        b"{\"version\":1,\"state\":"
    );
    // With --restart it goes on (and fails on the missing volfile, recorded in the file).
    let a = args(&["--restart"]);
    let o = rebalance(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("missing.ron"), "{e}");
    let v = status_json(&status);
    assert_eq!(v["state"], "failed");
    assert!(
        v["last_error"]
            .as_str()
            .expect("last_error")
            .contains("missing.ron"),
        "{v}"
    );
}

#[test]
fn a_bad_volfile_fails_with_its_name_in_the_message_and_the_status_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vol = dir.path().join("client.vol");
    std::fs::write(&vol, "(volumes: [ this is not RON").expect("write");
    let status = dir.path().join("rb.json");
    let o = rebalance(&[
        "--volfile",
        vol.to_str().expect("utf8"),
        "--status",
        status.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("client.vol"), "{e}");
    let v = status_json(&status);
    assert_eq!(
        (v["state"].as_str(), v["mode"].as_str()),
        (Some("failed"), Some("rebalance"))
    );
    assert!(
        v["last_error"]
            .as_str()
            .expect("error")
            .contains("client.vol"),
        "{v}"
    );
    assert!(v["finished"].is_u64(), "{v}");
}

#[test]
fn an_unreachable_server_fails_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("rb.json");
    // Port 1 on loopback: nothing listens there.
    let o = rebalance(&[
        "--server",
        "127.0.0.1:1",
        "--volume",
        "gv0",
        "--status",
        status.to_str().expect("utf8"),
        "--fetch-timeout",
        "3s",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("127.0.0.1:1"), "{e}");
    assert_eq!(status_json(&status)["state"], "failed");
}

#[test]
fn a_missing_secret_file_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("rb.json");
    let o = rebalance(&[
        "--server",
        "127.0.0.1:1",
        "--volume",
        "gv0",
        "--secret-file",
        "/nonexistent/secret",
        "--status",
        status.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/secret"), "{}", stderr(&o));
}

#[test]
fn a_secret_file_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("rb.json");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3\n").expect("write");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let o = rebalance(&[
        "--server",
        "127.0.0.1:1",
        "--volume",
        "gv0",
        "--secret-file",
        secret.to_str().expect("utf8"),
        "--status",
        status.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("chmod 600"), "{}", stderr(&o));
}

#[test]
fn a_graph_without_distribute_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let brick = dir.path().join("brick");
    std::fs::create_dir(&brick).expect("brick");
    let vol = dir.path().join("posix.vol");
    std::fs::write(&vol, posix_only(&brick)).expect("write");
    let status = dir.path().join("rb.json");
    let o = rebalance(&[
        "--volfile",
        vol.to_str().expect("utf8"),
        "--status",
        status.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("no cluster/distribute"), "{e}");
    assert_eq!(status_json(&status)["state"], "failed");
}

#[test]
fn remove_brick_mode_without_decommissioned_children_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vol = dir.path().join("dist.vol");
    std::fs::write(&vol, distribute_2(dir.path())).expect("write");
    let status = dir.path().join("rb.json");
    let o = rebalance(&[
        "--volfile",
        vol.to_str().expect("utf8"),
        "--status",
        status.to_str().expect("utf8"),
        "--mode",
        "remove-brick",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("decommissioned"), "{e}");
    let v = status_json(&status);
    assert_eq!(
        (v["state"].as_str(), v["mode"].as_str()),
        (Some("failed"), Some("remove-brick"))
    );
}

#[test]
fn a_running_file_of_a_live_runner_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = dir.path().join("xlfs-rebalance");
    std::fs::copy("/bin/sleep", &exe).expect("copy sleep");
    let mut other = Command::new(&exe).arg("30").spawn().expect("spawn");
    let status = dir.path().join("rb.json");
    let text = format!(
        r#"{{"version":1,"mode":"rebalance","state":"running","pid":{},"started":1,"updated":1,
        "finished":null,"dirs_done":0,"files_scanned":0,"files_moved":0,"bytes_moved":0,
        "files_skipped":0,"files_vanished":0,"failures":0,"files_total_estimate":null,
        "rate_files_per_s":0.0,"rate_bytes_per_s":0.0,"eta_s":null,"last_error":null,
        "done_dirs":[]}}"#,
        other.id()
    );
    std::fs::write(&status, &text).expect("write");
    let o = rebalance(&[
        "--volfile",
        "/nonexistent.vol",
        "--status",
        status.to_str().expect("utf8"),
    ]);
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains(&format!("pid {}", other.id())), "{e}");
    assert_eq!(std::fs::read_to_string(&status).expect("kept"), text);
}
