//! A translator that calls several protocol/clients at once (replicate, distribute) must
//! have every call on the wire before it waits for any reply, also on a host thread that
//! polls the request first (the FUSE reader, `with_reply_spin`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use xlator_api::{Ctx, Errno, Gfid, Iatt, Statfs};
use xlfs_protocol::Client;
use xlfs_protocol::wire::{
    self, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, OutFrame, ReplyBody, Request, ServerMsg,
    Welcome,
};
use xlfs_testkit::build::try_build;

async fn write(w: &mut tokio::net::tcp::OwnedWriteHalf, f: &OutFrame) {
    let mut v = f.head.clone();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    w.write_all(&v).await.expect("write");
}

/// A fake brick: answers `stat` at once; a `statfs` is recorded (`arrived`) and answered
/// only once every fake brick of the test has received its own (`all`), or after 5 s.
async fn fake_brick(
    arrived: tokio::sync::mpsc::UnboundedSender<Instant>,
    all: Arc<tokio::sync::Barrier>,
) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let (s, _) = l.accept().await.expect("accept");
        let _ = s.set_nodelay(true);
        let (r, w) = s.into_split();
        let w = Arc::new(tokio::sync::Mutex::new(w));
        let mut r = FrameReader::new(r, 1 << 21);
        while let Ok(Some(body)) = r.next(Duration::from_secs(30)).await {
            let msg = wire::decode::<ClientMsg>(body).expect("decode").0;
            let reply = match msg {
                ClientMsg::Hello(h) => wire::encode(
                    &ServerMsg::Welcome(Welcome {
                        volume: h.volume,
                        server: "fake".into(),
                        max_frame: 1 << 21,
                        boot_id: 1,
                    }),
                    Vec::new(),
                    HANDSHAKE_MAX_FRAME,
                ),
                ClientMsg::Ping(n) => wire::encode(&ServerMsg::Pong(n), Vec::new(), 1 << 21),
                ClientMsg::Call(c) => match c.req {
                    Request::Statfs { .. } => {
                        let _ = arrived.send(Instant::now());
                        let (w, all) = (w.clone(), all.clone());
                        tokio::spawn(async move {
                            let _ = tokio::time::timeout(Duration::from_secs(5), all.wait()).await;
                            let f = wire::encode_reply(
                                c.id,
                                Ok(ReplyBody::Statfs(Statfs::default())),
                                1 << 21,
                            )
                            .expect("encode");
                            write(&mut *w.lock().await, &f).await;
                        });
                        continue;
                    }
                    _ => wire::encode_reply(c.id, Ok(ReplyBody::Stat(Iatt::default())), 1 << 21),
                },
                other => panic!("unexpected {other:?}"),
            }
            .expect("encode");
            write(&mut *w.lock().await, &reply).await;
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_puts_every_call_on_the_wire_before_any_reply() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let all = Arc::new(tokio::sync::Barrier::new(3));
    let mut clients = Vec::new();
    for _ in 0..3 {
        let addr = fake_brick(tx.clone(), all.clone()).await.to_string();
        // The longest reply spin there is: a caller that spun for each reply in turn would
        // delay the next call by this much.
        let c = try_build::<Client>(
            "client",
            &[
                ("remote-host", addr.as_str()),
                ("remote-subvolume", "fake"),
                ("unix-socket-dir", ""),
                ("reply-spin", "10ms"),
            ],
            Vec::new(),
        )
        .expect("client");
        for _ in 0..500 {
            match c.stat(&Ctx::root(), Gfid::ROOT).await {
                Err(Errno::ENOTCONN) => tokio::time::sleep(Duration::from_millis(10)).await,
                r => {
                    r.expect("stat");
                    break;
                }
            }
        }
        clients.push(c);
    }
    // The calls start on a host thread, as the FUSE reader starts a request.
    let rt = tokio::runtime::Handle::current();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let host = std::thread::spawn(move || {
        let _rt = rt.enter();
        xlfs_core::services::with_reply_spin(|| {
            xlfs_core::services::poll_here_then_spawn(
                async move {
                    let calls = clients.iter().map(|c| c.statfs(&Ctx::root(), Gfid::ROOT));
                    let r = futures::future::join_all(calls).await;
                    let _ = done_tx.send(r);
                },
                false,
            )
        });
    });
    let mut at = Vec::new();
    for _ in 0..3 {
        let t = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("every brick got its call")
            .expect("arrival");
        at.push(t);
    }
    let spread = at[2].duration_since(at[0]);
    assert!(
        spread < Duration::from_millis(10),
        "the calls reached their bricks {spread:?} apart: sent one after another's reply wait"
    );
    let results = tokio::task::spawn_blocking(move || {
        host.join().expect("host thread");
        done_rx.recv_timeout(Duration::from_secs(10))
    })
    .await
    .expect("join")
    .expect("answered");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}
