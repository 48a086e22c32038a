//! Volfile fetch (`xlfs-mount HOST:/VOLUME`): a protocol/server hands out its
//! `client-volfile` after the same checks as a client connection, re-reading the file at each
//! request; unknown volumes, wrong secrets and refused addresses get messages for the user.

mod common;
use common::fetching::{at, refusal};

use std::time::Duration;

use xlfs_protocol::Credentials;
use xlfs_protocol::fetch::{FetchError, VolfileServer, fetch_volfile};
use xlfs_protocol::wire::{self, ClientMsg, FrameReader, MAGIC, PROTOCOL_VERSION, ServerMsg};
use xlfs_testkit::memfs::MemLeaf;

const T: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_client_volfile_after_the_client_checks() {
    // No tempfile dev-dependency here: a per-process name under the temp dir.
    let path = std::env::temp_dir().join(format!("xlfs-volfile-test-{}.vol", std::process::id()));
    std::fs::write(&path, "// v1\n( volumes: [] )\n").expect("write");
    let p = path.display().to_string();
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(
        &leaf,
        &[
            ("secret", "s3"),
            ("client-volfile", &p),
            ("client-volfile-name", "gv0"),
        ],
    );

    let text = fetch_volfile(&at(addr, "gv0"), &Credentials::secret(Some("s3")), T)
        .await
        .expect("fetch");
    assert_eq!(text, "// v1\n( volumes: [] )\n");
    // Re-read at every request: a regenerated volfile is served at once.
    std::fs::write(&path, "// v2\n").expect("rewrite");
    let text = fetch_volfile(&at(addr, "gv0"), &Credentials::secret(Some("s3")), T)
        .await
        .expect("fetch again");
    assert_eq!(text, "// v2\n");

    let r = refusal(&at(addr, "nope"), Some("s3")).await;
    assert!(
        r.contains("volume \"nope\" is not served by this brick; it serves: \"gv0\""),
        "{r}"
    );
    let r = refusal(&at(addr, "gv0"), Some("guess")).await;
    assert!(
        r.contains("could not prove it holds the secret") && r.contains("--secret-file"),
        "{r}"
    );
    let r = refusal(&at(addr, "gv0"), None).await;
    assert!(r.contains("requires the volume's secret"), "{r}");
    // The brick's own name is for protocol/client, not a volfile.
    let r = refusal(&at(addr, "memory"), Some("s3")).await;
    assert!(r.contains("not served by this brick"), "{r}");

    // The error names where it asked and what it asked for.
    let e = fetch_volfile(&at(addr, "nope"), &Credentials::secret(Some("s3")), T)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains(&addr.to_string()) && e.contains("\"nope\""),
        "{e}"
    );

    // A missing file is the brick's problem, said as such.
    std::fs::remove_file(&path).expect("rm");
    let r = refusal(&at(addr, "gv0"), Some("s3")).await;
    assert!(r.contains("cannot read its client volfile"), "{r}");

    let dump = common::json_field(&server, "volfiles-served");
    assert_eq!(dump, serde_json::json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_without_a_volfile_or_from_a_refused_address() {
    let leaf = MemLeaf::new();
    let (_s, addr) = common::server(&leaf, &[]);
    let r = refusal(&at(addr, "gv0"), None).await;
    assert!(
        r.contains("serves no client volfile") && r.contains("--client-volfile"),
        "{r}"
    );
    let (_s2, addr2) = common::server(
        &leaf,
        &[
            ("auth-allow", "10.0.0.0/8"),
            ("client-volfile", "/nonexistent"),
            ("client-volfile-name", "gv0"),
        ],
    );
    let r = refusal(&at(addr2, "gv0"), None).await;
    assert!(r.contains("address 127.0.0.1 is not allowed"), "{r}");

    // Nothing listening: a connect error, quickly.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let s = VolfileServer {
        host: "127.0.0.1".into(),
        port,
        volume: "gv0".into(),
    };
    assert!(matches!(
        fetch_volfile(&s, &Credentials::default(), T).await,
        Err(FetchError::Connect { .. })
    ));
}

#[test]
fn a_name_without_a_file_is_refused_at_init() {
    let leaf = MemLeaf::new();
    let e = xlfs_testkit::build::try_build::<xlfs_protocol::Server>(
        "server",
        &[("client-volfile-name", "gv0")],
        vec![leaf.clone()],
    )
    .expect_err("refused");
    assert!(e.contains("client-volfile"), "{e}");
    let e = xlfs_testkit::build::try_build::<xlfs_protocol::Server>(
        "server",
        &[("client-volfile", "/x.vol")],
        vec![leaf],
    )
    .expect_err("refused");
    assert!(e.contains("client-volfile-name"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volfile_request_mid_connection_drops_it() {
    // After a hello, a volfile request is bad input: the connection closes.
    let leaf = MemLeaf::new();
    let (_s, addr) = common::server(&leaf, &[]);
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let hello = wire::Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: wire::SCHEMA,
        volume: "memory".into(),
        client: "t".into(),
        nonce: vec![0; 32],
        max_frame: 1 << 20,
    };
    let req = wire::VolfileRequest {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: wire::SCHEMA,
        volume: "memory".into(),
        client: "t".into(),
        nonce: vec![0; 32],
    };
    let frames = [
        wire::encode(&ClientMsg::Hello(hello), Vec::new(), 1 << 16).expect("hello"),
        wire::encode(&ClientMsg::GetVolfile(req), Vec::new(), 1 << 16).expect("req"),
    ];
    wire::write_frames(&mut s, &frames).await.expect("write");
    let mut r = FrameReader::new(&mut s, 1 << 20);
    let first = r.next(T).await.expect("read").expect("welcome");
    assert!(matches!(
        wire::decode::<ServerMsg>(first).expect("decode").0,
        ServerMsg::Welcome(_)
    ));
    let end = tokio::time::timeout(T, r.next(T))
        .await
        .expect("closed in time");
    assert!(matches!(end, Ok(None) | Err(_)), "connection kept open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_answers_when_the_volfile_changes_or_after_its_hold() {
    use xlfs_protocol::fetch::{volfile_version, watch_volfile};
    let path = std::env::temp_dir().join(format!("xlfs-watch-test-{}.vol", std::process::id()));
    std::fs::write(&path, "// v1\n").expect("write");
    let p = path.display().to_string();
    let leaf = MemLeaf::new();
    let (_server, addr) = common::server(
        &leaf,
        &[("client-volfile", &p), ("client-volfile-name", "gv0")],
    );
    let s = at(addr, "gv0");
    // A client with another text gets the current one at once.
    let t0 = std::time::Instant::now();
    let text = watch_volfile(&s, &Credentials::default(), 0, Duration::from_secs(20), T)
        .await
        .expect("watch");
    assert_eq!(text, "// v1\n");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // The same text: held until the hold passes, then the same text.
    let known = volfile_version(&text);
    let t0 = std::time::Instant::now();
    let same = watch_volfile(
        &s,
        &Credentials::default(),
        known,
        Duration::from_millis(700),
        T,
    )
    .await
    .expect("held watch");
    assert_eq!(same, "// v1\n");
    assert!(
        t0.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    // Held, and answered as soon as the file changes.
    let path2 = path.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        std::fs::write(&path2, "// v2\n").expect("rewrite");
    });
    let t0 = std::time::Instant::now();
    let changed = watch_volfile(
        &s,
        &Credentials::default(),
        known,
        Duration::from_secs(20),
        T,
    )
    .await
    .expect("watch");
    assert_eq!(changed, "// v2\n");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    writer.await.expect("writer");
    // A watch for a volume the brick does not serve is refused at once.
    match watch_volfile(
        &at(addr, "nope"),
        &Credentials::default(),
        known,
        Duration::from_secs(20),
        T,
    )
    .await
    {
        Err(FetchError::Refused { reason, .. }) => {
            assert!(reason.contains("not served"), "{reason}")
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let _ = std::fs::remove_file(&path);
}
