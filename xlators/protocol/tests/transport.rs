//! Transports: a client of a brick on this machine connects over the brick's Unix socket,
//! with the same checks as TCP; without the socket it uses TCP.

mod common;

use std::time::Duration;

use xlator_api::{Ctx, Errno, Gfid};
use xlfs_testkit::memfs::MemLeaf;

fn transport(client: &xlator_api::Subvol) -> serde_json::Value {
    common::json_field(client, "transport")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_client_uses_the_unix_socket_and_tcp_without_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[("unix-socket-dir", d)]);
    let sock = dir.path().join(format!("brick-{}.sock", addr.port()));
    assert!(sock.exists(), "the brick made {}", sock.display());
    assert_eq!(
        common::json_field(&server, "unix-socket"),
        serde_json::json!(sock.display().to_string())
    );

    let unix = common::client(addr, &[("unix-socket-dir", d)]);
    common::wait_up(&unix).await;
    assert_eq!(transport(&unix), "unix");
    let tcp = common::client(addr, &[("unix-socket-dir", "")]);
    common::wait_up(&tcp).await;
    assert_eq!(transport(&tcp), "tcp");

    // Both see the same brick.
    let c = Ctx::root();
    unix.mkdir(
        &c,
        xlator_api::Loc::new(Gfid::ROOT, "made-over-unix"),
        0o755,
        0,
    )
    .await
    .expect("mkdir");
    let e = tcp
        .lookup(&c, xlator_api::Loc::new(Gfid::ROOT, "made-over-unix"))
        .await
        .expect("lookup over tcp");
    assert!(e.attr.is_dir());

    // A brick without a socket there (another directory): TCP.
    let other = tempfile::tempdir().expect("tempdir");
    let fallback = common::client(
        addr,
        &[("unix-socket-dir", other.path().to_str().expect("utf-8"))],
    );
    common::wait_up(&fallback).await;
    assert_eq!(transport(&fallback), "tcp");

    // The socket goes away with the brick.
    drop((unix, tcp, fallback));
    drop(server);
    assert!(!sock.exists(), "socket removed when the brick stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unix_socket_gets_the_same_checks_as_loopback_tcp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let leaf = MemLeaf::new();
    // Only a remote network may connect: a local client is refused over either transport.
    let (_server, addr) = common::server(
        &leaf,
        &[
            ("unix-socket-dir", d),
            ("auth-allow", "10.0.0.0/8"),
            ("secret", "s"),
        ],
    );
    for dir_opt in [d, ""] {
        let c = common::client(addr, &[("unix-socket-dir", dir_opt), ("secret", "s")]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            c.stat(&Ctx::root(), Gfid::ROOT).await.map(|_| ()),
            Err(Errno::ENOTCONN),
            "refused with unix-socket-dir {dir_opt:?}"
        );
        let err = common::json_field(&c, "last-error").to_string();
        assert!(err.contains("127.0.0.1"), "{err}");
    }
    // The secret is checked over the Unix socket too.
    let (_server2, addr2) = common::server(&leaf, &[("unix-socket-dir", d), ("secret", "s")]);
    let wrong = common::client(addr2, &[("unix-socket-dir", d), ("secret", "nope")]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        wrong.stat(&Ctx::root(), Gfid::ROOT).await.map(|_| ()),
        Err(Errno::ENOTCONN)
    );
    let right = common::client(addr2, &[("unix-socket-dir", d), ("secret", "s")]);
    common::wait_up(&right).await;
    assert_eq!(transport(&right), "unix");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brick_that_cannot_make_its_socket_serves_tcp() {
    let file = tempfile::NamedTempFile::new().expect("tempfile");
    // A regular file where the directory should be.
    let d = file.path().to_str().expect("utf-8");
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[("unix-socket-dir", d)]);
    assert_eq!(
        common::json_field(&server, "unix-socket"),
        serde_json::Value::Null
    );
    let c = common::client(addr, &[("unix-socket-dir", d)]);
    common::wait_up(&c).await;
    assert_eq!(transport(&c), "tcp");
}
