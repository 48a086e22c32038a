//! Server-side bounds (issue 25 item 5): sizes checked before anything is allocated (a
//! `readv` or `rchecksum` over `max-read` refused, a `readdirp` clamped), connection bounds,
//! fds per client, the send deadline, and a brick whose disk hangs going down (its clients
//! get EIO in seconds, stuck requests included).

mod common;

use common::raw::Raw;
use xlator_api::{Ctx, Errno, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_protocol::wire::{ReplyBody, Request, WireCtx};

/// `name` in the root of `leaf` with `len` bytes of a pattern; its GFID.
async fn file(leaf: &Subvol, name: &str, len: usize) -> Gfid {
    let root = Ctx::root();
    let f = Fd {
        id: FdId(1_000_000),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR,
    };
    let e = leaf
        .create(&root, Loc::new(Gfid::ROOT, name), f, 0o644, 0)
        .await
        .expect("create");
    let f = Fd {
        gfid: e.attr.gfid,
        ..f
    };
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    leaf.writev(&root, f, 0, data.into(), 0)
        .await
        .expect("write");
    leaf.release(&root, f).await.expect("release");
    e.attr.gfid
}

/// A posix brick served as volume "brick" with `o`.
fn brick(o: &[(&str, &str)]) -> (Subvol, Subvol, std::net::SocketAddr, tempfile::TempDir) {
    let (leaf, dir) = common::posix();
    let (server, addr) = common::server(&leaf, o);
    (leaf, server, addr, dir)
}

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// A 4 GiB `readv` is refused with EINVAL before anything is allocated (before: the brick
/// reserved 4 GiB for it, then the reply did not fit a frame and came back EOVERFLOW). It is
/// not clamped: a short read means end of file. Reads up to `max-read` are served, and the
/// connection stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readv_over_max_read_is_refused() {
    let (leaf, _server, addr, _d) = brick(&[]);
    let gfid = file(&leaf, "big", 3 << 20).await;
    let mut raw = Raw::connect(addr, "brick").await;
    let f = fd(1, gfid, libc::O_RDONLY);
    raw.call(WireCtx::default(), Request::Open { fd: f })
        .await
        .expect("open");
    for size in [u32::MAX, (1 << 20) + 1] {
        let r = raw
            .call(
                WireCtx::default(),
                Request::Readv {
                    fd: f,
                    offset: 0,
                    size,
                },
            )
            .await;
        assert_eq!(r.err(), Some(Errno::EINVAL), "readv of {size}");
    }
    // At the cap (1 MiB): served, with the right bytes.
    let offset = 1u64 << 20;
    let r = raw
        .call(
            WireCtx::default(),
            Request::Readv {
                fd: f,
                offset,
                size: 1 << 20,
            },
        )
        .await;
    let Ok(ReplyBody::Readv(reply)) = r else {
        panic!("readv at the cap: {r:?}");
    };
    let want: Vec<u8> = (offset as usize..offset as usize + (1 << 20))
        .map(|i| (i % 251) as u8)
        .collect();
    assert!(reply.data.as_slice() == want.as_slice(), "right bytes");
}

/// `max-read` is an option: a smaller one refuses reads over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_read_is_configurable() {
    let (leaf, _server, addr, _d) = brick(&[("max-read", "64KiB")]);
    let gfid = file(&leaf, "f", 200 << 10).await;
    let mut raw = Raw::connect(addr, "brick").await;
    let f = fd(1, gfid, libc::O_RDONLY);
    raw.call(WireCtx::default(), Request::Open { fd: f })
        .await
        .expect("open");
    let read = |size| Request::Readv {
        fd: f,
        offset: 0,
        size,
    };
    let r = raw.call(WireCtx::default(), read(1 << 20)).await;
    assert_eq!(r.err(), Some(Errno::EINVAL));
    let r = raw.call(WireCtx::default(), read(64 << 10)).await;
    assert!(
        matches!(r, Ok(ReplyBody::Readv(ref x)) if x.data.len() == 64 << 10),
        "{r:?}"
    );
}

/// An `rchecksum` over more than `max-read` is refused with EINVAL (a checksum of a shorter
/// range would let a diff heal skip bytes nobody compared); the connection stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rchecksum_over_max_read_is_refused() {
    let (leaf, _server, addr, _d) = brick(&[]);
    let gfid = file(&leaf, "f", 4096).await;
    let mut raw = Raw::connect(addr, "brick").await;
    let f = fd(1, gfid, libc::O_RDONLY);
    raw.call(WireCtx::default(), Request::Open { fd: f })
        .await
        .expect("open");
    let r = raw
        .call(
            WireCtx::default(),
            Request::Rchecksum {
                fd: f,
                offset: 0,
                len: u32::MAX,
            },
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EINVAL));
    let r = raw
        .call(
            WireCtx::default(),
            Request::Rchecksum {
                fd: f,
                offset: 0,
                len: 1 << 20,
            },
        )
        .await;
    assert!(
        matches!(r, Ok(ReplyBody::Rchecksum(ref c)) if c.len == 4096),
        "{r:?}"
    );
}

/// A `readdirp` asking for 4 GiB is answered with at most about `max-read` worth of
/// entries; continuing from the last cookie lists every name once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_readdirp_is_clamped_to_max_read() {
    let (leaf, _server, addr, _d) = brick(&[("max-read", "16KiB")]);
    let root = Ctx::root();
    let e = leaf
        .mkdir(&root, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    let dir = e.attr.gfid;
    let n = 400;
    for i in 0..n {
        leaf.mknod(
            &root,
            Loc::new(dir, format!("entry-with-a-longish-name-{i:04}")),
            libc::S_IFREG | 0o644,
            0,
            0,
        )
        .await
        .expect("mknod");
    }
    let mut raw = Raw::connect(addr, "brick").await;
    let f = fd(1, dir, libc::O_RDONLY | libc::O_DIRECTORY);
    raw.call(WireCtx::default(), Request::Opendir { fd: f })
        .await
        .expect("opendir");
    let mut names = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let r = raw
            .call(
                WireCtx::default(),
                Request::Readdirp {
                    fd: f,
                    offset,
                    size: u32::MAX,
                },
            )
            .await;
        let Ok(ReplyBody::Readdirp(page)) = r else {
            panic!("readdirp: {r:?}");
        };
        let Some(last) = page.last() else { break };
        offset = last.next_offset;
        pages += 1;
        names.extend(page.iter().map(|e| e.name.to_string()));
    }
    names.retain(|n| n != "." && n != "..");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "every name listed once");
    // 400 entries of well over 100 bytes each do not fit 16 KiB: several pages.
    assert!(pages >= 3, "{pages} pages: not clamped");
}

/// Connects and expects the server to refuse at once: a `Refused` frame, then the end of
/// the stream, well before any timeout of the server's (handshake-timeout is a minute in
/// these tests). Returns the message.
async fn refused_at_once(addr: std::net::SocketAddr) -> String {
    use std::time::Duration;
    use xlfs_protocol::wire::{self, FrameReader, ServerMsg};
    let s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut r = FrameReader::new(s, 1 << 16);
    let body = tokio::time::timeout(Duration::from_secs(20), r.next(Duration::from_secs(20)))
        .await
        .expect("refused within seconds, not after handshake-timeout")
        .expect("read")
        .expect("a Refused frame");
    let ServerMsg::Refused(why) = wire::decode::<ServerMsg>(body).expect("decode").0 else {
        panic!("not refused")
    };
    let end = tokio::time::timeout(Duration::from_secs(20), r.next(Duration::from_secs(20)))
        .await
        .expect("closed");
    assert!(matches!(end, Ok(None) | Err(_)), "closed after refusing");
    why
}

/// Retries `f` (a connection that should be admitted again once the server has seen another
/// one end) for up to 20 s.
async fn eventually_admitted(addr: std::net::SocketAddr) -> Raw {
    for _ in 0..200 {
        if let Some(r) = Raw::try_connect(addr, "brick").await {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("never admitted again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_max_connections_are_closed_at_once() {
    let (_leaf, server, addr, _d) =
        brick(&[("max-connections", "3"), ("handshake-timeout", "60s")]);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(Raw::connect(addr, "brick").await);
    }
    let why = refused_at_once(addr).await;
    assert!(why.contains("max-connections (3)"), "{why}");
    let why = refused_at_once(addr).await;
    assert!(why.contains("max-connections (3)"), "{why}");
    assert_eq!(
        common::json_field(&server, "over-limit"),
        serde_json::json!(2)
    );
    // The admitted ones keep being served.
    for r in &mut held {
        r.call(WireCtx::default(), Request::Stat { gfid: Gfid::ROOT })
            .await
            .expect("stat");
    }
    // A place given back is taken again.
    held.pop();
    let mut r = eventually_admitted(addr).await;
    r.call(WireCtx::default(), Request::Stat { gfid: Gfid::ROOT })
        .await
        .expect("stat");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_max_connections_per_address_are_closed_at_once() {
    let (_leaf, _server, addr, _d) = brick(&[
        ("max-connections-per-address", "2"),
        ("handshake-timeout", "60s"),
    ]);
    let mut held = vec![
        Raw::connect(addr, "brick").await,
        Raw::connect(addr, "brick").await,
    ];
    let why = refused_at_once(addr).await;
    assert!(
        why.contains("address 127.0.0.1 has max-connections-per-address (2)"),
        "{why}"
    );
    held.pop();
    eventually_admitted(addr).await;
}

/// Silent connections (no hello) are bounded by `max-pending-handshakes`: the next one is
/// closed at once instead of holding its buffer for the handshake-timeout; completed
/// handshakes do not count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_bounded_by_max_pending_handshakes() {
    let (_leaf, server, addr, _d) = brick(&[
        ("max-pending-handshakes", "2"),
        ("handshake-timeout", "60s"),
    ]);
    // Handshaken connections are not pending.
    let _a = Raw::connect(addr, "brick").await;
    let _b = Raw::connect(addr, "brick").await;
    let _c = Raw::connect(addr, "brick").await;
    let silent1 = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let silent2 = tokio::net::TcpStream::connect(addr).await.expect("connect");
    // Until the server has accepted both, a third may still get in: wait for the count.
    for _ in 0..200 {
        if common::json_field(&server, "pending-handshakes") == serde_json::json!(2) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let why = refused_at_once(addr).await;
    assert!(why.contains("max-pending-handshakes (2)"), "{why}");
    drop((silent1, silent2));
    eventually_admitted(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opens_beyond_max_fds_per_client_answer_emfile() {
    let (_leaf, _server, addr, _d) = brick(&[("max-fds-per-client", "3")]);
    let mut raw = Raw::connect(addr, "brick").await;
    let dir = |id| fd(id, Gfid::ROOT, libc::O_RDONLY | libc::O_DIRECTORY);
    for id in 1..=3 {
        raw.call(WireCtx::default(), Request::Opendir { fd: dir(id) })
            .await
            .expect("opendir");
    }
    let r = raw
        .call(WireCtx::default(), Request::Opendir { fd: dir(4) })
        .await;
    assert_eq!(r.err(), Some(Errno::EMFILE));
    let f = fd(5, Gfid::NULL, libc::O_RDWR);
    let r = raw
        .call(
            WireCtx::default(),
            Request::Create {
                loc: Loc::new(Gfid::ROOT, "f"),
                fd: f,
                mode: 0o644,
                umask: 0,
            },
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EMFILE), "create counts too");
    // Another client has its own table.
    let mut other = Raw::connect(addr, "brick").await;
    other
        .call(WireCtx::default(), Request::Opendir { fd: dir(1) })
        .await
        .expect("another client's opendir");
    // A released fd makes room.
    raw.call(WireCtx::default(), Request::Releasedir { fd: dir(2) })
        .await
        .expect("releasedir");
    raw.call(WireCtx::default(), Request::Opendir { fd: dir(4) })
        .await
        .expect("opendir after a release");
}

/// A client that stops reading its replies but keeps pinging (so the reader never sees it
/// silent) used to keep its connection, fds and locks forever: the server's sends blocked on
/// the full socket. Now the send that cannot finish within `send-timeout` closes the
/// connection and its fds are released like at any disconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_after_send_timeout() {
    use std::time::{Duration, Instant};
    let (leaf, server, addr, _d) = brick(&[
        ("send-timeout", "2s"),
        // Far longer than the test: the idle timeout is not what drops it.
        ("client-idle-timeout", "600s"),
    ]);
    let gfid = file(&leaf, "big", 1 << 20).await;
    let mut raw = Raw::connect(addr, "brick").await;
    let f = fd(1, gfid, libc::O_RDONLY);
    raw.call(WireCtx::default(), Request::Open { fd: f })
        .await
        .expect("open");
    assert_eq!(
        common::json_field(&server, "open-fds"),
        serde_json::json!(1)
    );
    // 64 MiB of replies: more than the socket buffers of both ends hold.
    for _ in 0..64 {
        raw.send_only(
            WireCtx::default(),
            Request::Readv {
                fd: f,
                offset: 0,
                size: 1 << 20,
            },
        )
        .await;
    }
    let t0 = Instant::now();
    let mut n = 0;
    loop {
        // Keep pinging, never read.
        let pinged = tokio::time::timeout(Duration::from_secs(1), raw.ping_only(n)).await;
        n += 1;
        if common::json_field(&server, "open-fds") == serde_json::json!(0) {
            break;
        }
        if matches!(pinged, Ok(Err(_))) {
            // The server closed the socket; its cleanup follows.
            tokio::time::sleep(Duration::from_millis(100)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "a client that stopped reading still holds its fd after {:?}",
            t0.elapsed()
        );
    }
    assert_eq!(
        common::json_field(&server, "connections"),
        serde_json::json!(0)
    );
}

/// A client that sends reads and does not take their replies holds at most
/// `max-reply-bytes-per-connection` of the brick's memory (plus what the sockets' buffers
/// took): the server stops reading its requests at the budget. Before, every request in
/// flight (up to 256) ran and kept its 1 MiB reply waiting to be sent. Once the client reads
/// again, every reply comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_take_its_replies_holds_at_most_the_reply_budget() {
    use std::time::Duration;
    use xlator_api::Fop;
    let (leaf, _d) = common::posix();
    let gfid = file(&leaf, "big", 1 << 20).await;
    let (spy, h) = xlfs_testkit::MockChild::spy(leaf.clone());
    let (_server, addr) = common::server(
        &spy,
        &[
            ("volume-name", "brick"),
            ("max-reply-bytes-per-connection", "4MiB"),
            ("send-timeout", "600s"),
            ("client-idle-timeout", "600s"),
        ],
    );
    let mut raw = Raw::connect(addr, "brick").await;
    let f = fd(1, gfid, libc::O_RDONLY);
    raw.call(WireCtx::default(), Request::Open { fd: f })
        .await
        .expect("open");
    for _ in 0..64 {
        raw.send_only(
            WireCtx::default(),
            Request::Readv {
                fd: f,
                offset: 0,
                size: 1 << 20,
            },
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ran = h.count(Fop::Readv);
    // 4 MiB of budget, and the few MiB the two sockets' buffers take on loopback.
    assert!(
        ran <= 32,
        "{ran} of 64 reads of 1 MiB ran for a client that reads no reply"
    );
    for _ in 0..64 {
        match raw.reply().await {
            (_, Ok(ReplyBody::Readv(r))) => assert_eq!(r.data.len(), 1 << 20),
            (id, other) => panic!("call {id}: {other:?}"),
        }
    }
    assert_eq!(h.count(Fop::Readv), 64);
}

/// A brick whose disk hangs (a health-check probe that does not finish within
/// `health-check-timeout`: a test hook makes it slow) marks itself down: a client through
/// the wire gets EIO within seconds for every fop, cached reads included, instead of waiting
/// for its frame-timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_disk_takes_the_brick_down_and_clients_get_eio_in_seconds() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_str().expect("utf-8").to_owned();
    let hang = Arc::new(AtomicBool::new(false));
    let h = hang.clone();
    xlfs_posix::set_probe_hook(
        dir.path(),
        Some(Arc::new(move || {
            if h.load(Ordering::Relaxed) {
                // A disk that hangs: the probe does not finish within the timeout.
                std::thread::sleep(Duration::from_secs(5));
            }
            Ok(())
        })),
    );
    let leaf = xlfs_testkit::build::try_build::<xlfs_posix::Posix>(
        "brick",
        &[
            ("directory", path.as_str()),
            ("health-check-interval", "200ms"),
            ("health-check-timeout", "1s"),
        ],
        Vec::new(),
    )
    .expect("posix init");
    let gfid = file(&leaf, "f", 4096).await;
    let (_server, addr) = common::server(&leaf, &[("volume-name", "memory")]);
    let top = common::client(addr, &[]);
    common::wait_up(&top).await;
    let cx = Ctx::root();
    let f = fd(77, gfid, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    top.readv(&cx, f, 0, 4096)
        .await
        .expect("a healthy brick reads");
    // Several probes pass: a healthy disk stays up.
    tokio::time::sleep(Duration::from_millis(800)).await;
    top.stat(&cx, Gfid::ROOT).await.expect("still up");

    hang.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    loop {
        match top.stat(&cx, Gfid::ROOT).await {
            Err(Errno::EIO) => break,
            Ok(_) => {}
            Err(e) => panic!("stat: {e}"),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the hung brick still serves after {:?}",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every fop, at once: a read of cached data too.
    let t1 = Instant::now();
    assert_eq!(top.readv(&cx, f, 0, 4096).await.err(), Some(Errno::EIO));
    assert_eq!(
        top.lookup(&cx, Loc::new(Gfid::ROOT, "f")).await.err(),
        Some(Errno::EIO)
    );
    assert!(t1.elapsed() < Duration::from_secs(5), "{:?}", t1.elapsed());
    let health = common::json_field(&leaf, "health");
    assert!(
        health
            .as_str()
            .is_some_and(|h| h.starts_with("down: ") && h.contains("did not finish")),
        "{health}"
    );
    xlfs_posix::set_probe_hook(dir.path(), None);
}

/// A leaf whose disk "hangs": `readlink` never answers; `statfs` answers EIO once
/// [`HUNG_DOWN`] is set (as storage/posix does once its health check marked it down).
struct HungLeaf;

static HUNG_DOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl xlator_api::Translator for HungLeaf {
    const TYPE: &'static str = "test/hung";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    type Options = ();

    fn init(_init: xlator_api::Init<()>) -> Result<Self, String> {
        Ok(HungLeaf)
    }

    fn children(&self) -> &[Subvol] {
        &[]
    }

    async fn stat(&self, _cx: &Ctx, _gfid: Gfid) -> Result<xlator_api::Iatt, Errno> {
        Ok(xlator_api::Iatt::default())
    }

    async fn readlink(
        &self,
        _cx: &Ctx,
        _gfid: Gfid,
    ) -> Result<xlator_api::abi_stable::std_types::RString, Errno> {
        std::future::pending().await
    }

    async fn statfs(&self, _cx: &Ctx, _gfid: Gfid) -> Result<xlator_api::Statfs, Errno> {
        if HUNG_DOWN.load(std::sync::atomic::Ordering::Relaxed) {
            Err(Errno::EIO)
        } else {
            Ok(xlator_api::Statfs::default())
        }
    }
}

/// A request stuck on the brick's disk when the brick goes down cannot be answered by the
/// brick (its thread is in the kernel): the server answers it EIO once the brick says it is
/// down, instead of leaving the client to its frame-timeout (30 minutes). A request stuck on
/// a brick that is not down keeps waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_stuck_on_a_brick_that_went_down_get_eio() {
    use std::time::{Duration, Instant};
    let leaf = xlfs_testkit::build::try_build::<HungLeaf>("memory", &[], Vec::new()).expect("leaf");
    let (_server, addr) = common::server(&leaf, &[]);
    let top = common::client(addr, &[]);
    common::wait_up(&top).await;
    let cx = Ctx::root();
    let stuck = {
        let (top, cx) = (top.clone(), cx.clone());
        tokio::spawn(async move { top.readlink(&cx, Gfid::ROOT).await })
    };
    // Stuck past the server's threshold, on a brick that is not down: still waiting.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(
        !stuck.is_finished(),
        "a slow request on a healthy brick got an answer"
    );
    HUNG_DOWN.store(true, std::sync::atomic::Ordering::Relaxed);
    let t0 = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(60), stuck)
        .await
        .expect("the stuck request is answered within seconds")
        .expect("join");
    assert_eq!(r.err(), Some(Errno::EIO));
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    // The connection is still up and serving.
    top.stat(&cx, Gfid::ROOT).await.expect("stat");
}

/// The idle timeout holds while the reader waits for a free request slot: a client whose
/// requests all hang and that then sends nothing is disconnected after
/// `client-idle-timeout` (before, the reader waited for the slot with no timeout at all, and
/// the connection, with its fds and locks, stayed forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_timeout_holds_while_the_reader_waits_for_a_request_slot() {
    use std::time::{Duration, Instant};
    let leaf = xlfs_testkit::build::try_build::<HungLeaf>("memory", &[], Vec::new()).expect("leaf");
    let (server, addr) = common::server(
        &leaf,
        &[
            ("client-idle-timeout", "5s"),
            ("max-inflight-per-connection", "1"),
        ],
    );
    let mut raw = Raw::connect(addr, "memory").await;
    // The server counts the connection a moment after the handshake answered: wait for it,
    // or the loop below may see none before it was ever counted.
    let t = Instant::now();
    while common::json_field(&server, "connections") == serde_json::json!(0) {
        assert!(t.elapsed() < Duration::from_secs(10), "never counted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The first takes the only slot and hangs; the reader then waits for the slot to read
    // past the second.
    for _ in 0..2 {
        raw.send_only(WireCtx::default(), Request::Readlink { gfid: Gfid::ROOT })
            .await;
    }
    let t0 = Instant::now();
    while common::json_field(&server, "connections") != serde_json::json!(0) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "still connected after {:?}",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(t0.elapsed() >= Duration::from_secs(4), "{:?}", t0.elapsed());
}
