//! Request extensions across the wire (protocol version 4), against a real storage/posix
//! brick behind protocol/server over TCP: what a client sets (`GfidReq`, `XattrReq`, its own
//! keys) reaches the brick, what only the server may set (`srv/`) or what never leaves a
//! process (`local/`) does not, host-only fops are refused, and fds are the server's own.

mod common;

use abi_stable::std_types::RString;
use common::probe::{self, Probe};
use common::raw::Raw;
use xlator_api::{
    BackingWanted, Buf, ClientId, Ctx, CtxExtension, Errno, Fd, FdId, Gfid, GfidReq, Loc,
    PipePayloadOk, Subvol, Xattr, XattrReq,
};
use xlfs_protocol::wire::{MAX_WIRE_EXTENSIONS, Request, WireCtx};
use xlfs_testkit::build::try_build;

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// A plugin's own extension: crosses the wire.
struct Tag(u32);
impl CtxExtension for Tag {
    const KEY: &'static str = "test/tag";
    fn encode(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }
    fn decode(b: &[u8]) -> Option<Self> {
        Some(Tag(u32::from_le_bytes(b.try_into().ok()?)))
    }
}

/// protocol/server over a probe named `probe_name` over posix; clients attach to the probe.
struct Brick {
    _server: Subvol,
    _dir: tempfile::TempDir,
    addr: std::net::SocketAddr,
    probe: String,
}

impl Brick {
    fn new(probe_name: &str) -> Brick {
        let (leaf, dir) = common::posix();
        let probe = try_build::<Probe>(probe_name, &[], vec![leaf]).expect("probe");
        let (server, addr) = common::server(&probe, &[("unix-socket-dir", "")]);
        Brick {
            _server: server,
            _dir: dir,
            addr,
            probe: probe_name.to_owned(),
        }
    }

    async fn client(&self) -> Subvol {
        let c = common::client(
            self.addr,
            &[
                ("remote-subvolume", self.probe.as_str()),
                ("unix-socket-dir", ""),
            ],
        );
        common::wait_up(&c).await;
        c
    }
}

fn with_gfid(g: Gfid) -> Ctx {
    Ctx::builder(0, 0).ext(&GfidReq(g)).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gfid_req_gives_the_new_object_that_gfid_on_the_remote_brick() {
    let brick = Brick::new("probe-gfid");
    let top = brick.client().await;
    let other = brick.client().await;
    let cases: [(&str, Gfid); 4] = [
        ("file", Gfid::random()),
        ("dir", Gfid::random()),
        ("fifo", Gfid::random()),
        ("link", Gfid::random()),
    ];
    let loc = |n: &str| Loc::new(Gfid::ROOT, n);
    let (f, d, n, s) = (&cases[0], &cases[1], &cases[2], &cases[3]);
    let e = top
        .create(
            &with_gfid(f.1),
            loc(f.0),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create");
    assert_eq!(e.attr.gfid, f.1, "create");
    let e = top
        .mkdir(&with_gfid(d.1), loc(d.0), 0o755, 0)
        .await
        .expect("mkdir");
    assert_eq!(e.attr.gfid, d.1, "mkdir");
    let e = top
        .mknod(&with_gfid(n.1), loc(n.0), libc::S_IFIFO | 0o644, 0, 0)
        .await
        .expect("mknod");
    assert_eq!(e.attr.gfid, n.1, "mknod");
    let e = top
        .symlink(&with_gfid(s.1), loc(s.0), RString::from("file"))
        .await
        .expect("symlink");
    assert_eq!(e.attr.gfid, s.1, "symlink");
    // The brick keeps them: another client finds the same GFIDs.
    for (name, g) in &cases {
        let e = other.lookup(&Ctx::root(), loc(name)).await.expect("lookup");
        assert_eq!(e.attr.gfid, *g, "{name} on the brick");
    }
}

/// Two clients create the same name at once, each asking for its own GFID: one wins, the
/// other gets EEXIST, and the name has the winner's GFID (never two objects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_with_different_gfids_give_one_winner() {
    let brick = Brick::new("probe-race");
    let (a, b) = (brick.client().await, brick.client().await);
    for round in 0..20u64 {
        let (ga, gb) = (Gfid::random(), Gfid::random());
        let name = format!("f{round}");
        let loc = Loc::new(Gfid::ROOT, name.as_str());
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
        let (ra, rb) = if round % 2 == 0 {
            tokio::join!(
                a.create(
                    &with_gfid(ga),
                    loc.clone(),
                    fd(10 + round, Gfid::NULL, flags),
                    0o644,
                    0
                ),
                b.create(
                    &with_gfid(gb),
                    loc.clone(),
                    fd(10 + round, Gfid::NULL, flags),
                    0o644,
                    0
                ),
            )
        } else {
            let dir = Loc::new(Gfid::ROOT, format!("d{round}").as_str());
            let (x, y) = tokio::join!(
                a.mkdir(&with_gfid(ga), dir.clone(), 0o755, 0),
                b.mkdir(&with_gfid(gb), dir.clone(), 0o755, 0),
            );
            let found = a.lookup(&Ctx::root(), dir).await.expect("lookup").attr.gfid;
            check_one_winner(&x, &y, ga, gb, found);
            continue;
        };
        let found = b.lookup(&Ctx::root(), loc).await.expect("lookup").attr.gfid;
        check_one_winner(&ra, &rb, ga, gb, found);
    }
}

fn check_one_winner(
    ra: &Result<xlator_api::Entry, Errno>,
    rb: &Result<xlator_api::Entry, Errno>,
    ga: Gfid,
    gb: Gfid,
    found: Gfid,
) {
    match (ra, rb) {
        (Ok(e), Err(Errno::EEXIST)) => {
            assert_eq!(e.attr.gfid, ga);
            assert_eq!(found, ga);
        }
        (Err(Errno::EEXIST), Ok(e)) => {
            assert_eq!(e.attr.gfid, gb);
            assert_eq!(found, gb);
        }
        other => panic!("want one winner and one EEXIST, got {other:?}"),
    }
}

/// `XattrReq` reaches the brick, and the xattrs it asks for come back in lookup replies
/// (`Entry::xattrs`) and readdirp entries (`DirEntry::xattrs`) across the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattr_req_reaches_the_brick_and_xattrs_come_back() {
    let brick = Brick::new("probe-xattr");
    let top = brick.client().await;
    let c = Ctx::root();
    let e = top
        .create(
            &c,
            Loc::new(Gfid::ROOT, "x"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create");
    let value = Buf::from_vec(vec![1, 2, 3, 0, 255]);
    top.setxattr(
        &c,
        e.attr.gfid,
        Xattr {
            name: "user.xlfs-test".into(),
            value: value.clone(),
        },
        0,
    )
    .await
    .expect("setxattr");
    let want = XattrReq {
        names: vec!["user.xlfs-test".into()],
        prefixes: Vec::new(),
    };
    let asking = Ctx::builder(0, 0).ext(&want).build();
    let got = top
        .lookup(&asking, Loc::new(Gfid::ROOT, "x"))
        .await
        .expect("lookup");
    assert_eq!(
        got.xattr("user.xlfs-test"),
        Some(&value),
        "{:?}",
        got.xattrs
    );
    let plain = top
        .lookup(&c, Loc::new(Gfid::ROOT, "x"))
        .await
        .expect("lookup");
    assert!(plain.xattrs.is_empty(), "not asked: {:?}", plain.xattrs);

    let dir = fd(2, Gfid::ROOT, libc::O_RDONLY);
    top.opendir(&c, dir).await.expect("opendir");
    let entries = top
        .readdirp(&asking, dir, 0, 1 << 16)
        .await
        .expect("readdirp");
    let x = entries
        .iter()
        .find(|d| d.name.as_str() == "x")
        .expect("x listed");
    assert_eq!(
        xlator_api::find_xattr(&x.xattrs, "user.xlfs-test"),
        Some(&value)
    );
}

/// Through protocol/client: server-set and local extensions a caller's context holds never
/// leave the client; the caller's own keys do; the brick sees the server's `ClientId`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_wire_extensions_leave_the_client() {
    let brick = Brick::new("probe-scope");
    let top = brick.client().await;
    let cx = Ctx::builder(0, 0)
        .ext(&ClientId(999))
        .ext(&PipePayloadOk)
        .ext(&BackingWanted)
        .ext(&Tag(7))
        .build();
    top.stat(&cx, Gfid::ROOT).await.expect("stat");
    let log = probe::log("probe-scope");
    let stats = log.stats.lock().expect("stats");
    let (id, keys) = stats.last().expect("a stat reached the probe");
    assert!(id.is_some() && *id != Some(ClientId(999)), "{id:?}");
    assert!(keys.iter().any(|k| k == "test/tag"), "{keys:?}");
    assert!(
        !keys
            .iter()
            .any(|k| k == PipePayloadOk::KEY || k == BackingWanted::KEY)
    );
    assert_eq!(keys.iter().filter(|k| *k == ClientId::KEY).count(), 1);
}

/// A client that forges server-set or local keys on the wire: the server drops them and sets
/// its own `ClientId`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_server_set_keys_do_not_reach_the_brick() {
    let brick = Brick::new("probe-forged");
    let mut raw = Raw::connect(brick.addr, "probe-forged").await;
    let forged = WireCtx {
        ext: vec![
            (ClientId::KEY.into(), Buf::from_vec(ClientId(999).encode())),
            (PipePayloadOk::KEY.into(), Buf::new()),
            (BackingWanted::KEY.into(), Buf::new()),
            (Tag::KEY.into(), Buf::from_vec(Tag(3).encode())),
        ],
        ..WireCtx::default()
    };
    raw.call(forged, Request::Stat { gfid: Gfid::ROOT })
        .await
        .expect("stat");
    let log = probe::log("probe-forged");
    let stats = log.stats.lock().expect("stats");
    let (id, keys) = stats.last().expect("a stat reached the probe");
    assert!(
        id.is_some() && *id != Some(ClientId(999)),
        "forged id: {id:?}"
    );
    assert_eq!(keys.iter().filter(|k| *k == ClientId::KEY).count(), 1);
    assert!(
        !keys
            .iter()
            .any(|k| k == PipePayloadOk::KEY || k == BackingWanted::KEY)
    );
    assert!(keys.iter().any(|k| k == Tag::KEY), "{keys:?}");
}

/// Too many extensions: refused with E2BIG on both sides, the connection stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_over_the_limits_are_refused_cleanly() {
    let brick = Brick::new("probe-limits");
    let top = brick.client().await;
    let many = (0..=MAX_WIRE_EXTENSIONS).fold(Ctx::builder(0, 0), |b, i| {
        b.ext_raw(&format!("test/k{i}"), Buf::from("v"))
    });
    assert_eq!(top.stat(&many.build(), Gfid::ROOT).await, Err(Errno::E2BIG));
    let big = Ctx::builder(0, 0)
        .ext_raw("test/big", Buf::from_vec(vec![0; 64 << 10]))
        .build();
    assert_eq!(top.stat(&big, Gfid::ROOT).await, Err(Errno::E2BIG));
    top.stat(&Ctx::root(), Gfid::ROOT).await.expect("still up");

    let mut raw = Raw::connect(brick.addr, "probe-limits").await;
    let over = WireCtx {
        ext: (0..=MAX_WIRE_EXTENSIONS)
            .map(|i| (format!("test/k{i}"), Buf::from("v")))
            .collect(),
        ..WireCtx::default()
    };
    assert_eq!(
        raw.call(over, Request::Stat { gfid: Gfid::ROOT })
            .await
            .err(),
        Some(Errno::E2BIG)
    );
    raw.call(WireCtx::default(), Request::Stat { gfid: Gfid::ROOT })
        .await
        .expect("the connection still serves");
}

/// `forget_client` is host-only: protocol/client answers it without sending it, and a
/// server refuses it from the wire (a client must not make the brick drop another client's
/// locks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_only_fops_never_cross_the_wire() {
    let brick = Brick::new("probe-host-only");
    let top = brick.client().await;
    let log = probe::log("probe-host-only");
    top.forget_client(&Ctx::root(), ClientId(1))
        .await
        .expect("answered by the client");
    let mut raw = Raw::connect(brick.addr, "probe-host-only").await;
    assert_eq!(
        raw.call(
            WireCtx::default(),
            Request::ForgetClient {
                client: ClientId(1)
            }
        )
        .await
        .err(),
        Some(Errno::EPERM)
    );
    assert!(
        log.forgotten.lock().expect("forgotten").is_empty(),
        "forget_client reached the brick from a client"
    );
}

/// The server takes an fd's GFID and flags from its own table: fd 5 named with another
/// file's GFID (or other flags) still means the file fd 5 was opened on, as opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fds_are_the_servers_own_whatever_the_request_says() {
    let brick = Brick::new("probe-fds");
    let top = brick.client().await;
    let c = Ctx::root();
    let mk = |n: &str, id: u64, flags: i32| {
        let top = top.clone();
        let n = n.to_owned();
        async move {
            top.create(
                &Ctx::root(),
                Loc::new(Gfid::ROOT, n.as_str()),
                fd(id, Gfid::NULL, flags),
                0o644,
                0,
            )
            .await
            .expect("create")
            .attr
            .gfid
        }
    };
    let a = mk("a", 5, libc::O_RDONLY).await;
    let b = mk("b", 6, libc::O_RDWR).await;
    // fd 5 is "a", read-only; the request claims "b", read-write.
    let lie = fd(5, b, libc::O_RDWR);
    assert_eq!(top.fstat(&c, lie).await.expect("fstat").gfid, a);
    let seen = *probe::log("probe-fds")
        .fstat_fds
        .lock()
        .expect("fds")
        .last()
        .expect("fstat reached the probe");
    assert_eq!((seen.gfid, seen.flags), (a, libc::O_RDONLY), "{seen:?}");
    assert_eq!(
        top.writev(&c, lie, 0, Buf::from("x"), 0).await.err(),
        Some(Errno::EBADF),
        "a write through a read-only fd"
    );
    assert_eq!(top.stat(&c, b).await.expect("stat b").size, 0);
    // Anonymous fds name only a GFID and keep working.
    let anon = Fd::anonymous(b, libc::O_RDWR);
    top.writev(&c, anon, 0, Buf::from("yz"), 0)
        .await
        .expect("anonymous write");
    assert_eq!(top.stat(&c, b).await.expect("stat b").size, 2);
}
