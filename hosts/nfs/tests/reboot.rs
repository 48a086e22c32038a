//! NFS over a brick whose machine restarts (issue 25 item 6): the brick lost the UNSTABLE
//! writes it had acknowledged and not synced. Before, xlfs-nfsd kept its write verifier, so
//! a client's COMMIT was answered with the verifier its writes were made under: it dropped
//! them as safe. Now protocol/client reports the loss (an fsync fails with EIO once per file),
//! and COMMIT answers with a new write verifier, so the client sends those writes again.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nfs3_client::nfs3_types::nfs3::*;
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use tempfile::TempDir;

/// `target/debug/xlfsd`, built with the workspace.
fn xlfsd() -> std::path::PathBuf {
    Path::new(env!("CARGO_BIN_EXE_xlfs-nfsd")).with_file_name("xlfsd")
}

/// A brick process, killed when dropped (a failing test leaves none behind).
struct Brick(Child);

impl Drop for Brick {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A brick on `port` that says it booted anew at every start (`boot-id process`: as a brick
/// machine's crash would), TCP clients not squashed (no secret in this test).
fn brick(dir: &Path, port: u16) -> Brick {
    let vol = dir.join("brick.ron");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        &vol,
        format!(
            r#"(volumes: [
    (name: "p", type: "storage/posix", options: {{ "directory": "{}" }}),
    (name: "l", type: "features/locks", subvolumes: ["p"]),
    (name: "s", type: "protocol/server", subvolumes: ["l"], options: {{
        "listen-host": "127.0.0.1", "listen-port": "{port}", "volume-name": "brick",
        "boot-id": "process", "root-squash": "off", "unix-socket-dir": "" }}),
])"#,
            data.display()
        ),
    )
    .unwrap();
    let child = Command::new(xlfsd())
        .arg("--volfile")
        .arg(&vol)
        .args(["--log-level", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn xlfsd");
    let child = Brick(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "xlfsd did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

async fn unstable(c: &mut Conn, f: &nfs_fh3, data: &[u8]) -> writeverf3 {
    ok(c.write(&WRITE3args {
        file: f.clone(),
        offset: 0,
        count: data.len() as u32,
        stable: stable_how::UNSTABLE,
        data: Opaque::owned(data.to_vec()),
    })
    .await)
    .verf
}

async fn commit(c: &mut Conn, f: &nfs_fh3) -> Result<writeverf3, nfsstat3> {
    match c
        .commit(&COMMIT3args {
            file: f.clone(),
            offset: 0,
            count: 0,
        })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => Ok(r.verf),
        Nfs3Result::Err((s, _)) => Err(s),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_brick_reboot_renews_the_write_verifier_so_unstable_writes_are_sent_again() {
    if !is_root() || !xlfsd().is_file() {
        if std::env::var_os("XLFS_E2E_REQUIRE").is_some() {
            panic!("needs root and target/debug/xlfsd (cargo build --workspace)");
        }
        println!("SKIPPED: needs root and a built xlfsd");
        return;
    }
    let tmp = TempDir::new().unwrap();
    let port = xlfs_testkit::ports::free_ports(1);
    let b = brick(tmp.path(), port);
    let client = tmp.path().join("client.ron");
    std::fs::write(
        &client,
        format!(
            r#"(volumes: [
    (name: "c", type: "protocol/client", options: {{
        "remote-host": "127.0.0.1:{port}", "remote-subvolume": "brick",
        "unix-socket-dir": "", "ping-timeout": "2s" }}),
])"#
        ),
    )
    .unwrap();
    let srv = Server::start_on("--volfile", &client, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let top = c.root_nfs_fh3();
    let f = match c
        .create(&CREATE3args {
            where_: dirop(&top, "f"),
            how: createhow3::UNCHECKED(sattr3::default()),
        })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => r.obj.unwrap(),
        Nfs3Result::Err((s, _)) => panic!("create: {s:?}"),
    };
    let before = unstable(&mut c, &f, b"synced").await;
    assert_eq!(
        commit(&mut c, &f).await,
        Ok(before),
        "nothing lost: the same verifier"
    );
    assert_eq!(unstable(&mut c, &f, b"unsynced").await, before);

    // The brick's machine "restarts": kill -9, then a new brick (another boot id).
    drop(b);
    let _b = brick(tmp.path(), port);
    // Until the client reconnected, COMMIT fails (the client would retry it).
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        match commit(&mut c, &f).await {
            Ok(v) => break v,
            Err(s) => {
                assert!(Instant::now() < deadline, "COMMIT kept failing: {s:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_ne!(
        after, before,
        "the writes acknowledged before the reboot must be sent again"
    );
    assert_eq!(commit(&mut c, &f).await, Ok(after), "renewed once");
    assert_eq!(unstable(&mut c, &f, b"again").await, after);
}
