//! xlfs-nfsd driven by libnfs-utils (`nfs-cp`, `nfs-cat`, `nfs-ls`; Debian package
//! libnfs-utils), the user-space client the GlusterFS/Ganesha comparisons use.
//!
//! Outside CI the test is skipped when the tools are missing; in CI (`CI` set, or `XLFS_E2E_REQUIRE=1`) that is an
//! error, so a missing install step cannot pass unnoticed.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output};

use common::Server;
use tempfile::TempDir;

fn have_libnfs_utils() -> bool {
    let found = Command::new("nfs-ls").arg("--help").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none()
                && std::env::var("XLFS_E2E_REQUIRE").as_deref() != Ok("1"),
            "libnfs-utils is missing: apt-get install -y libnfs-utils"
        );
        eprintln!("skipped: libnfs-utils is not installed (apt-get install -y libnfs-utils)");
    }
    found
}

fn url(port: u16, path: &str, extra: &str) -> String {
    format!("nfs://127.0.0.1/{path}?version=3&nfsport={port}&mountport={port}{extra}")
}

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .expect("run libnfs tool")
}

fn check(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn pseudo_random(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn copy_in_and_out_list_and_cat() {
    if !have_libnfs_utils() {
        return;
    }
    let tmp = TempDir::new().unwrap();
    let state = tmp.path().join("state");
    // 10,000 names made on the brick before serving: the brick adopts them (GFIDs on first
    // sight) and nfs-ls pages through them with READDIRPLUS.
    let many = state.join("brick").join("many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..10_000 {
        std::fs::write(many.join(format!("n{i:05}")), b"").unwrap();
    }
    let srv = Server::start(&state, &["--no-root-squash"]);
    let p = srv.port;

    let data = pseudo_random(3 << 20);
    let local = tmp.path().join("in.bin");
    std::fs::write(&local, &data).unwrap();
    let o = run(
        "nfs-cp",
        &[local.to_str().unwrap(), &url(p, "/big.bin", "")],
    );
    check(&o, "nfs-cp in");
    let back = tmp.path().join("out.bin");
    let o = run("nfs-cp", &[&url(p, "/big.bin", ""), back.to_str().unwrap()]);
    check(&o, "nfs-cp out");
    assert!(std::fs::read(&back).unwrap() == data, "round trip differs");
    assert_eq!(
        std::fs::read(state.join("brick/big.bin")).unwrap().len(),
        data.len()
    );

    std::fs::write(tmp.path().join("hello.txt"), b"hello, nfs\n").unwrap();
    let hello = tmp.path().join("hello.txt");
    check(
        &run(
            "nfs-cp",
            &[hello.to_str().unwrap(), &url(p, "/hello.txt", "")],
        ),
        "nfs-cp hello",
    );
    let o = run("nfs-cat", &[&url(p, "/hello.txt", "")]);
    check(&o, "nfs-cat");
    assert_eq!(o.stdout, b"hello, nfs\n");

    let o = run("nfs-ls", &[&url(p, "", "")]);
    check(&o, "nfs-ls /");
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(
        listing.contains("big.bin") && listing.contains("hello.txt"),
        "{listing}"
    );
    let o = run("nfs-ls", &[&url(p, "/many", "")]);
    check(&o, "nfs-ls /many");
    let names = String::from_utf8_lossy(&o.stdout);
    let n = names.lines().filter(|l| l.contains(" n")).count();
    assert_eq!(n, 10_000, "nfs-ls saw {n} entries");
    assert!(names.contains("n09999"));
}

#[test]
fn credentials_from_the_url_are_enforced() {
    if !have_libnfs_utils() || !common::is_root() {
        return;
    }
    let tmp = TempDir::new().unwrap();
    let state = tmp.path().join("state");
    let brick = state.join("brick");
    std::fs::create_dir_all(&brick).unwrap();
    std::fs::write(brick.join("secret"), b"top secret\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(brick.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let srv = Server::start(&state, &["--no-root-squash"]);
    let p = srv.port;
    check(
        &run("nfs-cat", &[&url(p, "/secret", "&uid=0&gid=0")]),
        "nfs-cat as root",
    );
    let o = run("nfs-cat", &[&url(p, "/secret", "&uid=1000&gid=1000")]);
    assert!(!o.status.success(), "uid 1000 read a 0600 root file");
    assert!(o.stdout.is_empty());
    let why = String::from_utf8_lossy(&o.stderr);
    assert!(why.contains("denied"), "{why}");
}
