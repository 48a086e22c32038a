//! Failure behaviour: a brick that goes away, one that hangs, one that comes back; refused
//! handshakes.

mod common;

use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Flock, Gfid, LkCmd, LkOwner, Loc, LockKind};
use xlfs_protocol::client::{ConnectError, Target, handshake};
use xlfs_protocol::wire::{self, ClientMsg, FrameReader, ServerMsg, Welcome};
use xlfs_testkit::build::options_for;
use xlfs_testkit::memfs::MemLeaf;

fn target(addr: std::net::SocketAddr, volume: &str, secret: Option<&str>) -> Target {
    Target {
        host: addr.ip().to_string(),
        port: addr.port(),
        volume: volume.into(),
        secret: secret.map(str::to_owned),
        max_frame: (1 << 20) + wire::HEADER_ROOM,
        unix_socket: None,
        tls: None,
    }
}

async fn refusal(t: &Target) -> String {
    match handshake(t, "test-client", Duration::from_secs(5)).await {
        // Refused by the brick, or by the client (the secret's challenge: a brick that cannot
        // prove it holds the client's secret, or asks for one the client does not have).
        Err(ConnectError::Refused { reason, .. }) => reason,
        Err(ConnectError::Unexpected { what, .. }) => what,
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, got a welcome"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handshake_refusals_say_what_to_fix() {
    let leaf = MemLeaf::new();
    let (_s, addr) = common::server(&leaf, &[("secret", "s3cret"), ("volume-name", "vol0")]);
    let r = refusal(&target(addr, "memory", None)).await;
    assert!(
        r.contains("requires the volume's secret") && r.contains("secret-file"),
        "{r}"
    );
    let r = refusal(&target(addr, "memory", Some("guess"))).await;
    assert!(
        r.contains("could not prove it holds the secret") && r.contains("another volume's"),
        "{r}"
    );
    let r = refusal(&target(addr, "other", Some("s3cret"))).await;
    assert!(
        r.contains("\"other\" is not served here") && r.contains("\"vol0\""),
        "{r}"
    );
    for volume in ["vol0", "memory"] {
        let ok = handshake(
            &target(addr, volume, Some("s3cret")),
            "t",
            Duration::from_secs(5),
        )
        .await;
        assert!(ok.is_ok(), "{volume}: {:?}", ok.err());
    }

    let (_s2, addr2) = common::server(&leaf, &[("auth-allow", "10.0.0.0/8, 192.168.0.1")]);
    let r = refusal(&target(addr2, "memory", None)).await;
    assert!(
        r.contains("address 127.0.0.1 is not allowed") && r.contains("auth-allow"),
        "{r}"
    );

    // Through the translator: fops fail fast, the reason is in the statedump.
    let top = common::client(addr, &[("secret", "nope")]);
    let t0 = Instant::now();
    assert_eq!(
        top.stat(&Ctx::root(), Gfid::ROOT).await,
        Err(Errno::ENOTCONN)
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
    let last = common::json_field(&top, "last-error").to_string();
    assert!(
        last.contains("could not prove it holds the secret"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_server_gives_enotconn_then_reconnects_and_reopens_fds() {
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[]);
    let top = common::client(addr, &[("ping-timeout", "2s")]);
    common::wait_up(&top).await;
    let c = Ctx::root();
    let f = Fd {
        id: FdId(1),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR,
    };
    let e = top
        .create(&c, Loc::new(Gfid::ROOT, "f"), f, 0o644, 0)
        .await
        .expect("create");
    let f = Fd {
        gfid: e.attr.gfid,
        ..f
    };
    top.writev(&c, f, 0, Buf::from("before"), 0)
        .await
        .expect("write");
    let locked = Fd { id: FdId(2), ..f };
    top.open(&c, locked).await.expect("open");
    let wl = Flock {
        kind: LockKind::Write,
        start: 0,
        len: 1,
        pid: 1,
        owner: LkOwner(1),
    };
    top.lk(&c, locked, LkCmd::Set, wl).await.expect("lock");

    // A call in flight when the server goes away fails too (not a hang): hold one with a
    // blocking lock request from another owner.
    let blocked = {
        let top = top.clone();
        let other = Flock {
            owner: LkOwner(2),
            ..wl
        };
        tokio::spawn(async move {
            let fd3 = Fd { id: FdId(3), ..f };
            top.open(&Ctx::root(), fd3).await.expect("open 3");
            top.lk(&Ctx::root(), fd3, LkCmd::SetWait, other).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;

    let t0 = Instant::now();
    drop(server);
    assert_eq!(blocked.await.expect("task"), Err(Errno::ENOTCONN));
    // Fops fail with ENOTCONN, at once, well within the ping timeout.
    let mut n = 0;
    loop {
        match top.stat(&c, Gfid::ROOT).await {
            Err(Errno::ENOTCONN) => break,
            Ok(_) => {
                n += 1;
                assert!(n < 200, "server still answering");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    let t1 = Instant::now();
    assert_eq!(top.readv(&c, f, 0, 10).await, Err(Errno::ENOTCONN));
    assert!(
        t1.elapsed() < Duration::from_millis(200),
        "down fop took {:?}",
        t1.elapsed()
    );

    // Same port, same data: the client reconnects by itself; the unlocked fd is re-opened
    // transparently, the one that held a lock is not (its lock is gone).
    let _server2 = common::server_on(&leaf, addr.port(), &[]).await;
    common::wait_up(&top).await;
    assert_eq!(
        &*top
            .readv(&c, f, 0, 10)
            .await
            .expect("read after reconnect")
            .data,
        b"before"
    );
    top.writev(&c, f, 6, Buf::from("+after"), 0)
        .await
        .expect("write after reconnect");
    assert_eq!(
        &*top.readv(&c, f, 0, 20).await.expect("read").data,
        b"before+after"
    );
    assert_eq!(top.readv(&c, locked, 0, 10).await, Err(Errno::EBADF));
    assert_eq!(common::json_field(&top, "connects"), serde_json::json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hung_server_is_declared_down_within_the_ping_timeout() {
    // A "brick" that welcomes the client and then never answers anything.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hung = tokio::spawn(async move {
        let mut socks = Vec::new();
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let (r, mut w) = sock.into_split();
            let mut reader = FrameReader::new(r, 1 << 16);
            let _hello = reader.next(Duration::from_secs(5)).await;
            let welcome = ServerMsg::Welcome(Welcome {
                volume: "memory".into(),
                server: "hung".into(),
                max_frame: 1 << 21,
                boot_id: 1,
            });
            let f = wire::encode(&welcome, Vec::new(), 1 << 16).expect("encode");
            wire::write_frames(&mut w, std::slice::from_ref(&f))
                .await
                .expect("welcome");
            socks.push((reader, w));
        }
    });
    let top = common::client(addr, &[("ping-timeout", "500ms")]);
    let t0 = Instant::now();
    let r = top.stat(&Ctx::root(), Gfid::ROOT).await;
    let took = t0.elapsed();
    assert_eq!(r, Err(Errno::ENOTCONN));
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert!(
        took >= Duration::from_millis(400),
        "failed before the ping timeout: {took:?}"
    );
    // The manager records the reason just after the calls have been failed.
    let mut last = String::new();
    for _ in 0..100 {
        last = common::json_field(&top, "last-error").to_string();
        if last.contains("ping-timeout") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(last.contains("ping-timeout"), "{last}");
    // While it stays down, fops fail at once.
    let t1 = Instant::now();
    let _ = top.stat(&Ctx::root(), Gfid::ROOT).await;
    assert!(t1.elapsed() < Duration::from_millis(600));
    hung.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_server_at_all_fails_fast() {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    let top = common::client(addr, &[]);
    let t0 = Instant::now();
    assert_eq!(
        top.stat(&Ctx::root(), Gfid::ROOT).await,
        Err(Errno::ENOTCONN)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    let last = common::json_field(&top, "last-error").to_string();
    assert!(last.contains("cannot connect"), "{last}");
    let _ = ClientMsg::Ping(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconfigure_changes_secret_for_new_connections() {
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[]);
    assert!(
        handshake(&target(addr, "memory", None), "t", Duration::from_secs(5))
            .await
            .is_ok()
    );
    server
        .reconfigure(options_for::<xlfs_protocol::Server>(&[("secret", "new")]))
        .expect("reconfigure");
    let r = refusal(&target(addr, "memory", None)).await;
    assert!(r.contains("requires the volume's secret"), "{r}");
    // And a client holding a secret refuses a brick that has none: it may be an impostor.
    server
        .reconfigure(options_for::<xlfs_protocol::Server>(&[]))
        .expect("reconfigure");
    let r = refusal(&target(addr, "memory", Some("new"))).await;
    assert!(r.contains("did not ask for the volume's secret"), "{r}");
}
