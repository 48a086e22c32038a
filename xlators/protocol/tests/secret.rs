//! The volume's secret (issue 25 items 2 and 3): it never crosses the wire, the client
//! authenticates the brick (an impostor that does not hold the secret, or replays a recorded
//! challenge, is refused before the client proves anything), a wrong proof is refused, and
//! `root-squash auto` squashes exactly the TCP clients that did not prove the secret.

mod common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use xlator_api::{Ctx, Errno, Fd, FdId, Gfid, Loc};
use xlfs_protocol::client::{ConnectError, Target, handshake};
use xlfs_protocol::creds::{self, Role};
use xlfs_protocol::wire::{
    self, Challenge, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, Hello, MAGIC, PROTOCOL_VERSION,
    SCHEMA, ServerMsg, Welcome,
};
use xlfs_testkit::memfs::MemLeaf;

const T: Duration = Duration::from_secs(5);
const SECRET: &str = "correct horse battery staple";

fn target(addr: std::net::SocketAddr, secret: Option<&str>) -> Target {
    Target {
        host: addr.ip().to_string(),
        port: addr.port(),
        volume: "memory".into(),
        secret: secret.map(str::to_owned),
        max_frame: (1 << 20) + wire::HEADER_ROOM,
        unix_socket: None,
        tls: None,
    }
}

fn encoded(m: &ServerMsg) -> Vec<u8> {
    let f = wire::encode(m, Vec::new(), HANDSHAKE_MAX_FRAME).expect("encode");
    f.head.clone()
}

/// A fake brick on a TCP port: it reads the client's hello, answers with whatever `answer`
/// makes of the client's nonce, then returns every byte the client sent afterwards (until it
/// closes or a second passes).
async fn fake_brick(
    answer: impl FnOnce(&Hello) -> Vec<u8> + Send + 'static,
) -> (
    std::net::SocketAddr,
    tokio::task::JoinHandle<(Hello, Vec<u8>)>,
) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let (s, _) = l.accept().await.expect("accept");
        let (r, mut w) = s.into_split();
        let mut reader = FrameReader::new(r, HANDSHAKE_MAX_FRAME);
        let body = reader.next(T).await.expect("read").expect("hello");
        let hello = match wire::decode::<ClientMsg>(body).expect("decode").0 {
            ClientMsg::Hello(h) => h,
            other => panic!("{other:?}"),
        };
        w.write_all(&answer(&hello)).await.expect("answer");
        let (mut r, _, _) = reader.into_parts();
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(1), r.read_to_end(&mut rest)).await;
        (hello, rest)
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_never_crosses_the_wire_and_the_brick_proves_it_too() {
    // A brick that holds the secret: the client proves back, and nothing it sends contains
    // the secret (before, the hello carried it in clear).
    let (addr, brick) = fake_brick(|h| {
        let nonce = creds::nonce().to_vec();
        let proof = creds::proof(SECRET, Role::Server, &h.volume, &h.nonce, &nonce);
        let mut out = encoded(&ServerMsg::Challenge(Challenge { nonce, proof }));
        out.extend(encoded(&ServerMsg::Welcome(Welcome {
            volume: h.volume.clone(),
            server: "fake".into(),
            max_frame: 1 << 21,
            boot_id: 1,
        })));
        out
    })
    .await;
    let ok = handshake(&target(addr, Some(SECRET)), "t", T).await;
    assert!(ok.is_ok(), "{:?}", ok.err());
    drop(ok);
    let (hello, rest) = brick.await.expect("brick");
    assert_eq!(hello.nonce.len(), creds::NONCE_LEN);
    assert!(!rest.is_empty(), "the client sent its proof");
    let hello_bytes = format!("{hello:?}");
    for haystack in [&rest[..], hello_bytes.as_bytes()] {
        assert!(
            !haystack
                .windows(SECRET.len())
                .any(|w| w == SECRET.as_bytes()),
            "the secret is on the wire"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_brick_is_refused_before_the_client_proves_anything() {
    // It does not hold the secret: its proof is made with another.
    let (addr, brick) = fake_brick(|h| {
        let nonce = creds::nonce().to_vec();
        let proof = creds::proof("a guess", Role::Server, &h.volume, &h.nonce, &nonce);
        encoded(&ServerMsg::Challenge(Challenge { nonce, proof }))
    })
    .await;
    let e = handshake(&target(addr, Some(SECRET)), "t", T)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(&e, ConnectError::Unexpected { what, .. } if what.contains("could not prove")),
        "{e}"
    );
    let (_, rest) = brick.await.expect("brick");
    assert!(rest.is_empty(), "the client sent {} bytes", rest.len());

    // It replays a challenge recorded from the real brick (made for another nonce).
    let recorded_client_nonce = creds::nonce();
    let (addr, brick) = fake_brick(move |h| {
        let nonce = creds::nonce().to_vec();
        let proof = creds::proof(
            SECRET,
            Role::Server,
            &h.volume,
            &recorded_client_nonce,
            &nonce,
        );
        encoded(&ServerMsg::Challenge(Challenge { nonce, proof }))
    })
    .await;
    assert!(
        handshake(&target(addr, Some(SECRET)), "t", T)
            .await
            .is_err()
    );
    let (_, rest) = brick.await.expect("brick");
    assert!(rest.is_empty(), "a replayed challenge got a proof");

    // It skips the challenge and welcomes the client at once.
    let (addr, _brick) = fake_brick(|h| {
        encoded(&ServerMsg::Welcome(Welcome {
            volume: h.volume.clone(),
            server: "fake".into(),
            max_frame: 1 << 21,
            boot_id: 1,
        }))
    })
    .await;
    let e = handshake(&target(addr, Some(SECRET)), "t", T)
        .await
        .err()
        .expect("refused");
    assert!(
        e.to_string()
            .contains("did not ask for the volume's secret"),
        "{e}"
    );
}

/// A raw client: sends a hello, answers the challenge with `proof(server_nonce)`.
async fn raw_proof(
    addr: std::net::SocketAddr,
    proof: impl FnOnce(&[u8], &[u8]) -> Vec<u8>,
) -> ServerMsg {
    let (r, mut w) = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect")
        .into_split();
    let nonce = creds::nonce().to_vec();
    let hello = Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: "memory".into(),
        client: "raw".into(),
        nonce: nonce.clone(),
        max_frame: 1 << 21,
    };
    let f = wire::encode(&ClientMsg::Hello(hello), Vec::new(), HANDSHAKE_MAX_FRAME).expect("enc");
    w.write_all(&f.head).await.expect("hello");
    let mut reader = FrameReader::new(r, HANDSHAKE_MAX_FRAME);
    let body = reader.next(T).await.expect("read").expect("challenge");
    let ServerMsg::Challenge(c) = wire::decode::<ServerMsg>(body).expect("decode").0 else {
        panic!("no challenge");
    };
    let f = wire::encode(
        &ClientMsg::Prove(proof(&nonce, &c.nonce)),
        Vec::new(),
        HANDSHAKE_MAX_FRAME,
    )
    .expect("enc");
    w.write_all(&f.head).await.expect("proof");
    let body = reader.next(T).await.expect("read").expect("answer");
    wire::decode::<ServerMsg>(body).expect("decode").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brick_refuses_a_wrong_or_reflected_proof() {
    let leaf = MemLeaf::new();
    let (_s, addr) = common::server(&leaf, &[("secret", SECRET), ("volume-name", "memory")]);
    let good = raw_proof(addr, |c, s| {
        creds::proof(SECRET, Role::Client, "memory", c, s)
    })
    .await;
    assert!(matches!(good, ServerMsg::Welcome(_)), "{good:?}");
    for (what, msg) in [
        (
            "another secret",
            raw_proof(addr, |c, s| creds::proof("x", Role::Client, "memory", c, s)).await,
        ),
        (
            "the brick's own proof sent back",
            raw_proof(addr, |c, s| {
                creds::proof(SECRET, Role::Server, "memory", c, s)
            })
            .await,
        ),
    ] {
        match msg {
            ServerMsg::Refused(r) => assert!(r.contains("wrong secret"), "{what}: {r}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_client_is_told_both_versions() {
    let leaf = MemLeaf::new();
    let (_s, addr) = common::server(&leaf, &[]);
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    // A version-4 hello: variant 0, the magic, version 4, then fields this brick cannot read.
    let mut body = vec![0u8];
    body.extend_from_slice(&MAGIC);
    body.extend_from_slice(&[4, 9, 9, 9, 9, 9]);
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend(body);
    s.write_all(&frame).await.expect("write");
    let (r, _w) = s.into_split();
    let mut reader = FrameReader::new(r, HANDSHAKE_MAX_FRAME);
    let body = reader.next(T).await.expect("read").expect("answer");
    match wire::decode::<ServerMsg>(body).expect("decode").0 {
        ServerMsg::Refused(r) => assert!(
            r.contains("protocol version 4") && r.contains(&format!("speaks {PROTOCOL_VERSION}")),
            "{r}"
        ),
        other => panic!("{other:?}"),
    }
}

/// The owner of what `top` creates as root in `dir`.
async fn made_by(
    dir: Gfid,
    top: xlator_api::Subvol,
    name: &str,
    n: u64,
) -> Result<(u32, u32), Errno> {
    common::wait_up(&top).await;
    top.create(&Ctx::root(), Loc::new(dir, name), fd(n), 0o644, 0)
        .await
        .map(|e| (e.attr.uid, e.attr.gid))
}

fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { libc::geteuid() == 0 }
}

fn fd(n: u64) -> Fd {
    Fd {
        id: FdId(n),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR,
    }
}

/// `root-squash auto` (the default): a TCP client acting as root is squashed to anonuid unless
/// it proved the secret. Before, every TCP client was believed (root on the brick for anyone
/// who could reach the port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_squash_auto_believes_only_the_clients_holding_the_secret() {
    if !is_root() {
        if std::env::var_os("XLFS_E2E_REQUIRE").is_some() {
            panic!("needs root (files made as another user)");
        }
        println!("SKIPPED: needs root");
        return;
    }
    let (leaf, _d) = common::posix();
    let root = Ctx::root();
    let open = leaf
        .mkdir(&root, Loc::new(Gfid::ROOT, "open"), 0o777, 0)
        .await
        .expect("mkdir");
    let dir = open.attr.gfid;
    let file = std::env::temp_dir().join(format!("xlfs-secret-test-{}", std::process::id()));
    std::fs::write(&file, format!("{SECRET}\n")).expect("write");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let file_s = file.display().to_string();

    // A brick without a secret: its TCP clients are all untrusted.
    let (_plain, addr) =
        common::server(&leaf, &[("root-squash", "auto"), ("volume-name", "memory")]);
    let tcp = [("unix-socket-dir", "")];
    assert_eq!(
        made_by(dir, common::client(addr, &tcp), "no-secret", 1).await,
        Ok((65534, 65534))
    );
    // In a 0755 root-owned directory the squashed root may not create at all.
    let c = common::client(addr, &tcp);
    common::wait_up(&c).await;
    assert_eq!(
        c.create(&root, Loc::new(Gfid::ROOT, "x"), fd(2), 0o644, 0)
            .await
            .err(),
        Some(Errno::EACCES)
    );

    // A brick with a secret (from a file): its clients proved it and act as root.
    let (_sec, addr) = common::server(
        &leaf,
        &[
            ("root-squash", "auto"),
            ("secret-file", &file_s),
            ("volume-name", "memory"),
        ],
    );
    let with = [("unix-socket-dir", ""), ("secret-file", file_s.as_str())];
    assert_eq!(
        made_by(dir, common::client(addr, &with), "with-secret", 3).await,
        Ok((0, 0))
    );
    // `on` squashes them too.
    let (_on, addr) = common::server(
        &leaf,
        &[
            ("root-squash", "on"),
            ("secret-file", &file_s),
            ("volume-name", "memory"),
        ],
    );
    assert_eq!(
        made_by(dir, common::client(addr, &with), "squashed-anyway", 4).await,
        Ok((65534, 65534))
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn a_secret_file_others_may_read_is_refused_at_init() {
    let leaf = MemLeaf::new();
    let file = std::env::temp_dir().join(format!("xlfs-secret-open-{}", std::process::id()));
    std::fs::write(&file, "s\n").expect("write");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod");
    let f = file.display().to_string();
    let e = xlfs_testkit::build::try_build::<xlfs_protocol::Server>(
        "server",
        &[("secret-file", &f)],
        vec![leaf.clone()],
    )
    .expect_err("refused");
    assert!(e.contains("chmod 600"), "{e}");
    let e = xlfs_testkit::build::try_build::<xlfs_protocol::Server>(
        "server",
        &[("secret-file", &f), ("secret", "x")],
        vec![leaf],
    )
    .expect_err("refused");
    assert!(e.contains("not both"), "{e}");
    let _ = std::fs::remove_file(&file);
}
