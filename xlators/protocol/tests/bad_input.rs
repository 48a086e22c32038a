//! Hostile or broken input: the server drops that connection (one log line), never panics,
//! and keeps serving everyone else.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use xlator_api::{Ctx, Gfid, Subvol};
use xlfs_protocol::wire::{
    self, Call, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, Hello, MAGIC, PROTOCOL_VERSION,
    Request, SCHEMA, ServerMsg, WireCtx,
};
use xlfs_testkit::memfs::MemLeaf;

fn hello() -> Hello {
    Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: "memory".into(),
        client: "raw-test".into(),
        nonce: vec![0; 32],
        max_frame: 1 << 21,
    }
}

fn frame_bytes(msg: &ClientMsg) -> Vec<u8> {
    let f = wire::encode(msg, Vec::new(), HANDSHAKE_MAX_FRAME).expect("encode");
    let mut v = f.head.clone();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    v
}

/// A raw socket; handshaken when `hs`.
async fn raw(addr: SocketAddr, hs: bool) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    if hs {
        s.write_all(&frame_bytes(&ClientMsg::Hello(hello())))
            .await
            .expect("hello");
        let mut r = FrameReader::new(&mut s, 1 << 16);
        let body = r
            .next(Duration::from_secs(5))
            .await
            .expect("read")
            .expect("welcome");
        assert!(matches!(
            wire::decode::<ServerMsg>(body).expect("decode").0,
            ServerMsg::Welcome(_)
        ));
    }
    s
}

/// The server closes `s` (EOF or reset) within a few seconds.
async fn assert_dropped(mut s: TcpStream, what: &str) {
    let mut buf = vec![0u8; 1 << 16];
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(r.is_ok(), "{what}: connection not dropped");
}

async fn assert_serving(top: &Subvol) {
    top.stat(&Ctx::root(), Gfid::ROOT)
        .await
        .expect("the good client still works");
}

/// A call whose fop id is past the end of the fop table (same encoding as `ClientMsg::Call`:
/// postcard writes enum variant indexes as varints, like a `u32`).
#[derive(Serialize)]
enum FakeMsg {
    #[allow(dead_code)]
    Hello(()),
    #[allow(dead_code)]
    Ping(u64),
    Call(FakeCall),
}

#[derive(Serialize)]
struct FakeCall {
    id: u64,
    ctx: WireCtx,
    payload: Vec<u32>,
    fop: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_drops_only_that_connection() {
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(
        &leaf,
        &[
            ("frame-receive-timeout", "300ms"),
            ("handshake-timeout", "1s"),
        ],
    );
    let good = common::client(addr, &[]);
    common::wait_up(&good).await;
    let mut dropped = 0;

    // A port probe (connect, then close without a byte) is not bad input: not counted.
    drop(raw(addr, false).await);

    // Not xlfs at all (an HTTP request: its first bytes read as a ~1.1 GB length).
    let mut s = raw(addr, false).await;
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    assert_dropped(s, "http").await;
    dropped += 1;

    // A huge length prefix before and after the handshake.
    for hs in [false, true] {
        let mut s = raw(addr, hs).await;
        s.write_all(&0xffff_fff0u32.to_be_bytes())
            .await
            .expect("write");
        assert_dropped(s, "0xfffffff0").await;
        dropped += 1;
    }

    // A truncated frame, then end of stream.
    let mut s = raw(addr, true).await;
    s.write_all(&100u32.to_be_bytes()).await.expect("write");
    s.write_all(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        .await
        .expect("write");
    s.shutdown().await.expect("shutdown");
    assert_dropped(s, "truncated").await;
    dropped += 1;

    // A stalled sender (half a frame, then nothing).
    let mut s = raw(addr, true).await;
    s.write_all(&[0, 0]).await.expect("write");
    assert_dropped(s, "stalled").await;
    dropped += 1;

    // A client that never says hello.
    let s = raw(addr, false).await;
    assert_dropped(s, "silent").await;
    dropped += 1;

    // Garbage frames of valid length.
    let mut s = raw(addr, true).await;
    let garbage: Vec<u8> = (0..200u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    s.write_all(&(garbage.len() as u32).to_be_bytes())
        .await
        .expect("write");
    s.write_all(&garbage).await.expect("write");
    assert_dropped(s, "garbage").await;
    dropped += 1;

    // An unknown fop id.
    let mut s = raw(addr, true).await;
    let body = postcard::to_allocvec(&FakeMsg::Call(FakeCall {
        id: 1,
        ctx: WireCtx::default(),
        payload: Vec::new(),
        fop: 200,
    }))
    .expect("encode");
    s.write_all(&(body.len() as u32).to_be_bytes())
        .await
        .expect("write");
    s.write_all(&body).await.expect("write");
    assert_dropped(s, "unknown fop").await;
    dropped += 1;

    // Payload lengths that do not match the bytes after the header.
    let mut s = raw(addr, true).await;
    let call = ClientMsg::Call(Call {
        id: 1,
        ctx: WireCtx::default(),
        payload: vec![10],
        req: Request::Stat { gfid: Gfid::ROOT },
    });
    s.write_all(&frame_bytes(&call)).await.expect("write");
    assert_dropped(s, "payload mismatch").await;
    dropped += 1;

    // A second hello.
    let mut s = raw(addr, true).await;
    s.write_all(&frame_bytes(&ClientMsg::Hello(hello())))
        .await
        .expect("write");
    assert_dropped(s, "second hello").await;
    dropped += 1;

    assert_serving(&good).await;
    // A well-behaved raw client is served too.
    let mut s = raw(addr, true).await;
    s.write_all(&frame_bytes(&ClientMsg::Ping(5)))
        .await
        .expect("ping");
    let mut r = FrameReader::new(&mut s, 1 << 16);
    let body = r
        .next(Duration::from_secs(5))
        .await
        .expect("read")
        .expect("pong");
    assert!(matches!(
        wire::decode::<ServerMsg>(body).expect("decode").0,
        ServerMsg::Pong(5)
    ));
    assert_eq!(
        common::json_field(&server, "dropped"),
        serde_json::json!(dropped)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_client_is_dropped_and_its_fds_released() {
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[("client-idle-timeout", "5s")]);
    let mut s = raw(addr, true).await;
    let fd = xlator_api::Fd {
        id: xlator_api::FdId(1),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR,
    };
    let req = Request::Create {
        loc: xlator_api::Loc::new(Gfid::ROOT, "f"),
        fd,
        mode: 0o644,
        umask: 0,
    };
    let f = wire::encode_call(1, WireCtx::default(), req, 1 << 20).expect("encode");
    wire::write_frames(&mut s, std::slice::from_ref(&f))
        .await
        .expect("send");
    let mut r = FrameReader::new(&mut s, 1 << 20);
    let body = r
        .next(Duration::from_secs(5))
        .await
        .expect("read")
        .expect("reply");
    let ServerMsg::Reply(reply) = wire::decode::<ServerMsg>(body).expect("decode").0 else {
        panic!("not a reply")
    };
    assert!(reply.result.is_ok(), "{:?}", reply.result);
    assert_eq!(
        common::json_field(&server, "open-fds"),
        serde_json::json!(1)
    );
    let t0 = std::time::Instant::now();
    drop(r);
    assert_dropped(s, "idle").await;
    assert!(
        t0.elapsed() >= Duration::from_secs(4),
        "dropped after {:?}",
        t0.elapsed()
    );
    for _ in 0..100 {
        if common::json_field(&server, "open-fds") == serde_json::json!(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fd of the silent client not released");
}
