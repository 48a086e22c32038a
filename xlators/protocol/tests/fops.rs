//! Fops through protocol/client -> TCP -> protocol/server -> in-memory leaf.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::std_types::RString;
use xlator_api::{
    Buf, Ctx, EntrylkCmd, Errno, Fd, FdId, Flock, Gfid, Init, LkCmd, LkOwner, Loc, LockKind,
    SeekWhat, SetAttr, Subvol, Translator, Xattr, XattropOp,
};
use xlfs_testkit::build::try_build;
use xlfs_testkit::memfs::MemLeaf;

fn cx() -> Ctx {
    Ctx::root()
}

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// A client of a new in-memory brick (the server is returned to keep it alive) and a file
/// `name` created in its root, open read-write as fd 1.
async fn brick_with_file(
    server_opts: &[(&str, &str)],
    client_opts: &[(&str, &str)],
    name: &str,
) -> (Subvol, Subvol, Fd) {
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, server_opts);
    let top = common::client(addr, client_opts);
    common::wait_up(&top).await;
    let e = top
        .create(
            &cx(),
            Loc::new(Gfid::ROOT, name),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create");
    (server, top, fd(1, e.attr.gfid, libc::O_RDWR))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fop_family_round_trips() {
    let leaf = MemLeaf::new();
    let (_server, addr) = common::server(&leaf, &[]);
    let top = common::client(addr, &[]);
    common::wait_up(&top).await;
    let c = cx();

    // Entries.
    let d = top
        .mkdir(&c, Loc::new(Gfid::ROOT, "d"), 0o755, 0o022)
        .await
        .expect("mkdir");
    assert!(d.attr.is_dir());
    let dg = d.attr.gfid;
    let f = fd(1, Gfid::NULL, libc::O_RDWR);
    let e = top
        .create(&c, Loc::new(dg, "f"), f, 0o644, 0o022)
        .await
        .expect("create");
    let g = e.attr.gfid;
    let f = fd(1, g, libc::O_RDWR);
    assert_eq!(
        top.lookup(&c, Loc::new(dg, "f"))
            .await
            .expect("lookup")
            .attr
            .gfid,
        g
    );
    assert_eq!(
        top.lookup(&c, Loc::new(dg, "nope")).await,
        Err(Errno::ENOENT)
    );

    // Data.
    let n = top
        .writev(&c, f, 0, Buf::from("hello world"), 0)
        .await
        .expect("writev");
    assert_eq!(n.written, 11);
    assert_eq!(
        &*top.readv(&c, f, 6, 100).await.expect("readv").data,
        b"world"
    );
    assert_eq!(top.fstat(&c, f).await.expect("fstat").size, 11);
    top.flush(&c, f).await.expect("flush");
    top.fsync(&c, f, true).await.expect("fsync");
    let attr = SetAttr {
        size: abi_stable::std_types::ROption::RSome(5),
        ..SetAttr::default()
    };
    assert_eq!(top.setattr(&c, g, attr).await.expect("setattr").size, 5);
    assert_eq!(
        top.fsetattr(&c, f, SetAttr::default())
            .await
            .expect("fsetattr")
            .size,
        5
    );
    assert_eq!(top.stat(&c, g).await.expect("stat").size, 5);
    top.access(&c, g, libc::R_OK as u32).await.expect("access");
    top.fallocate(&c, f, 0, 0, 8192).await.expect("fallocate");
    top.zerofill(&c, f, 0, 10).await.expect("zerofill");
    top.discard(&c, f, 0, 4096).await.expect("discard");
    let _ = top.seek(&c, f, 0, SeekWhat::Data).await;
    // Anonymous fd (stateless I/O by GFID).
    let anon = Fd::anonymous(g, libc::O_RDWR);
    top.writev(&c, anon, 0, Buf::from("anon"), 0)
        .await
        .expect("anonymous writev");
    assert_eq!(
        &*top
            .readv(&c, anon, 0, 4)
            .await
            .expect("anonymous readv")
            .data,
        b"anon"
    );

    // Xattrs.
    let x = Xattr {
        name: "user.k".into(),
        value: Buf::from("v"),
    };
    top.setxattr(&c, g, x, 0).await.expect("setxattr");
    assert_eq!(
        &*top
            .getxattr(&c, g, "user.k".into())
            .await
            .expect("getxattr"),
        b"v"
    );
    assert!(
        top.listxattr(&c, g)
            .await
            .expect("listxattr")
            .iter()
            .any(|n| n == "user.k")
    );
    let x2 = Xattr {
        name: "user.k2".into(),
        value: Buf::from("w"),
    };
    top.fsetxattr(&c, f, x2, 0).await.expect("fsetxattr");
    assert_eq!(
        &*top
            .fgetxattr(&c, f, "user.k2".into())
            .await
            .expect("fgetxattr"),
        b"w"
    );
    top.fremovexattr(&c, f, "user.k2".into())
        .await
        .expect("fremovexattr");
    top.removexattr(&c, g, "user.k".into())
        .await
        .expect("removexattr");
    assert_eq!(
        top.getxattr(&c, g, "user.k".into()).await,
        Err(Errno::ENODATA)
    );
    let counter = Xattr {
        name: "trusted.afr.x".into(),
        value: Buf::from_vec(vec![0, 0, 0, 1]),
    };
    let xs: abi_stable::std_types::RVec<Xattr> = vec![counter].into();
    top.xattrop(&c, g, XattropOp::AddArray32, xs.clone())
        .await
        .expect("xattrop");
    let v = top
        .fxattrop(&c, f, XattropOp::AddArray32, xs)
        .await
        .expect("fxattrop");
    assert_eq!(&*v[0].value, &[0, 0, 0, 2]);

    // Locks.
    let owner = LkOwner(7);
    let wl = Flock {
        kind: LockKind::Write,
        start: 0,
        len: 10,
        pid: 1,
        owner,
    };
    top.lk(&c, f, LkCmd::Set, wl).await.expect("lk");
    let ul = Flock {
        kind: LockKind::Unlock,
        ..wl
    };
    top.lk(&c, f, LkCmd::Set, ul).await.expect("unlock");
    let dom: RString = "d".into();
    top.inodelk(&c, dom.clone(), g, LkCmd::Set, wl)
        .await
        .expect("inodelk");
    top.inodelk(&c, dom.clone(), g, LkCmd::Set, ul)
        .await
        .expect("inodelk unlock");
    top.entrylk(&c, dom.clone(), Loc::new(dg, "f"), EntrylkCmd::Lock)
        .await
        .expect("entrylk");
    top.entrylk(&c, dom, Loc::new(dg, "f"), EntrylkCmd::Unlock)
        .await
        .expect("entry unlock");

    // Links, rename, directories.
    top.symlink(&c, Loc::new(dg, "s"), "f".into())
        .await
        .expect("symlink");
    let s = top
        .lookup(&c, Loc::new(dg, "s"))
        .await
        .expect("lookup symlink")
        .attr
        .gfid;
    assert_eq!(top.readlink(&c, s).await.expect("readlink").as_str(), "f");
    top.link(&c, g, Loc::new(dg, "h")).await.expect("link");
    top.rename(&c, Loc::new(dg, "h"), Loc::new(dg, "h2"), 0)
        .await
        .expect("rename");
    top.mknod(&c, Loc::new(dg, "p"), libc::S_IFIFO | 0o644, 0, 0o022)
        .await
        .expect("mknod");
    let dfd = fd(2, dg, libc::O_RDONLY);
    top.opendir(&c, dfd).await.expect("opendir");
    let names: Vec<String> = top
        .readdirp(&c, dfd, 0, 65536)
        .await
        .expect("readdirp")
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    for n in ["f", "s", "h2", "p"] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    top.fsyncdir(&c, dfd, false).await.expect("fsyncdir");
    top.releasedir(&c, dfd).await.expect("releasedir");
    top.release(&c, f).await.expect("release");
    assert_eq!(
        top.fstat(&c, f).await,
        Err(Errno::EBADF),
        "released fd is unknown"
    );
    for n in ["f", "s", "h2", "p"] {
        top.unlink(&c, Loc::new(dg, n)).await.expect("unlink");
    }
    top.rmdir(&c, Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("rmdir");
    assert!(top.statfs(&c, Gfid::ROOT).await.expect("statfs").bsize > 0);
    assert_eq!(top.open(&c, fd(3, g, 0)).await, Err(Errno::ESTALE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn big_writes_and_reads_are_intact_and_oversize_is_einval() {
    let (_server, top, f) = brick_with_file(&[], &[], "big").await;
    let c = cx();
    let mut seed = 0x9e37_79b9_u32;
    let data: Vec<u8> = (0..(1 << 20))
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as u8
        })
        .collect();
    for i in 0..4u64 {
        let n = top
            .writev(&c, f, i << 20, Buf::from_vec(data.clone()), 0)
            .await
            .expect("writev");
        assert_eq!(n.written, 1 << 20);
    }
    for i in 0..4u64 {
        let r = top.readv(&c, f, i << 20, 1 << 20).await.expect("readv");
        assert!(r.data[..] == data[..], "MiB {i} differs");
    }
    let too_big = Buf::zeroed((1 << 20) + 1);
    assert_eq!(top.writev(&c, f, 0, too_big, 0).await, Err(Errno::EINVAL));
    assert_eq!(top.readv(&c, f, 0, (1 << 20) + 1).await, Err(Errno::EINVAL));
    // The connection survived the refused calls.
    assert_eq!(top.fstat(&c, f).await.expect("fstat").size, 4 << 20);
}

/// `access` sleeps `mask` milliseconds, then answers; everything else passes through.
struct Delay {
    children: Vec<Subvol>,
}

impl Translator for Delay {
    const TYPE: &'static str = "test/delay";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(Delay {
            children: init.children,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn access(&self, _cx: &Ctx, _gfid: Gfid, mask: u32) -> Result<(), Errno> {
        tokio::time::sleep(Duration::from_millis(u64::from(mask))).await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_complete_out_of_order() {
    let leaf = MemLeaf::new();
    let delay = try_build::<Delay>("memory", &[], vec![leaf]).expect("delay");
    let (_server, addr) = common::server(&delay, &[]);
    let top = common::client(addr, &[]);
    common::wait_up(&top).await;
    let done = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..64u32 {
        let (top, done) = (top.clone(), done.clone());
        // Issued first, answered last.
        let ms = (64 - i) * 8;
        tasks.push(tokio::spawn(async move {
            top.access(&Ctx::root(), Gfid::ROOT, ms)
                .await
                .expect("access");
            done.lock().expect("lock").push(i);
        }));
        tokio::task::yield_now().await;
    }
    for t in tasks {
        t.await.expect("task");
    }
    let elapsed = start.elapsed();
    let order = done.lock().expect("lock").clone();
    assert_eq!(order.len(), 64);
    // All 64 were in flight together: far less than the 16.6 s they take one by one.
    assert!(elapsed < Duration::from_millis(2000), "took {elapsed:?}");
    // Replies came back in completion order, not request order.
    assert!(order[0] > order[63], "completion order {order:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_clients_get_separate_fd_spaces() {
    let leaf = MemLeaf::new();
    let (_server, addr) = common::server(&leaf, &[]);
    let a = common::client(addr, &[]);
    let b = common::client(addr, &[]);
    common::wait_up(&a).await;
    common::wait_up(&b).await;
    let c = cx();
    let ea = a
        .create(
            &c,
            Loc::new(Gfid::ROOT, "a"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create a");
    let eb = b
        .create(
            &c,
            Loc::new(Gfid::ROOT, "b"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create b with the same fd id");
    let fa = fd(1, ea.attr.gfid, libc::O_RDWR);
    let fb = fd(1, eb.attr.gfid, libc::O_RDWR);
    a.writev(&c, fa, 0, Buf::from("AAAA"), 0)
        .await
        .expect("write a");
    b.writev(&c, fb, 0, Buf::from("BB"), 0)
        .await
        .expect("write b");
    assert_eq!(
        &*a.readv(&c, fa, 0, 10).await.expect("read a").data,
        b"AAAA"
    );
    assert_eq!(&*b.readv(&c, fb, 0, 10).await.expect("read b").data, b"BB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_suite_through_the_wire() {
    let leaf = MemLeaf::new();
    let (_server, addr) = common::server(&leaf, &[]);
    let top = common::client(addr, &[]);
    common::wait_up(&top).await;
    let report = xlfs_testkit::conformance::run(&top, xlfs_testkit::conformance::Caps::all()).await;
    println!("{report}");
    report.assert_all_passed();
}

/// `filter-o-direct` (on by default) drops O_DIRECT from the fds and per-write flags the brick
/// sees; off, the brick gets them as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_direct_is_filtered_before_the_brick_unless_turned_off() {
    use xlfs_testkit::MockChild;
    use xlfs_testkit::mock::FopCall;
    for (setting, brick_sees_direct) in [("on", false), ("off", true)] {
        let (spy, h) = MockChild::spy(MemLeaf::new());
        let (_server, addr) = common::server(&spy, &[("volume-name", "memory")]);
        let top = common::client(addr, &[("filter-o-direct", setting)]);
        common::wait_up(&top).await;
        let c = cx();
        let direct = libc::O_RDWR | libc::O_DIRECT;
        let e = top
            .create(
                &c,
                Loc::new(Gfid::ROOT, "f"),
                fd(1, Gfid::NULL, direct),
                0o644,
                0,
            )
            .await
            .expect("create");
        let f = fd(1, e.attr.gfid, direct);
        let w = top
            .writev(&c, f, 0, Buf::from("data"), libc::O_DIRECT)
            .await
            .expect("writev");
        assert_eq!(w.written, 4);
        let anon = Fd::anonymous(e.attr.gfid, libc::O_RDONLY | libc::O_DIRECT);
        let r = top.readv(&c, anon, 0, 4).await.expect("readv");
        assert_eq!(&*r.data, b"data");
        let mut seen = Vec::new();
        for call in h.calls() {
            match call {
                FopCall::Create { fd, .. } | FopCall::Readv { fd, .. } => seen.push(fd.flags),
                FopCall::Writev { fd, flags, .. } => {
                    seen.push(fd.flags);
                    seen.push(flags);
                }
                _ => {}
            }
        }
        assert_eq!(seen.len(), 4, "{setting}: {seen:?}");
        for flags in seen {
            assert_eq!(
                flags & libc::O_DIRECT != 0,
                brick_sees_direct,
                "filter-o-direct {setting}: flags {flags:#o}"
            );
        }
    }
}

/// A flush reaches the brick only for files this client has taken a POSIX lock on (where the
/// brick's features/locks must release the owner's locks); any other flush is answered by the
/// client, saving a round trip per close(2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_goes_to_the_brick_only_for_files_with_locks() {
    use xlfs_testkit::MockChild;
    let (spy, h) = MockChild::spy(MemLeaf::new());
    let (_server, addr) = common::server(&spy, &[("volume-name", "memory")]);
    let top = common::client(addr, &[]);
    common::wait_up(&top).await;
    let c = cx();
    let mut files = Vec::new();
    for (id, name) in [(1, "plain"), (2, "locked")] {
        let e = top
            .create(
                &c,
                Loc::new(Gfid::ROOT, name),
                fd(id, Gfid::NULL, libc::O_RDWR),
                0o644,
                0,
            )
            .await
            .expect("create");
        files.push(fd(id, e.attr.gfid, libc::O_RDWR));
    }
    let (plain, locked) = (files[0], files[1]);
    top.flush(&c, plain)
        .await
        .expect("flush of an unlocked file");
    assert_eq!(h.count(xlator_api::Fop::Flush), 0, "answered by the client");

    let lock = Flock {
        kind: LockKind::Read,
        start: 0,
        len: 0,
        pid: 1,
        owner: LkOwner(9),
    };
    // Whatever the leaf answers, the file now counts as locked.
    let _ = top.lk(&c, locked, LkCmd::Set, lock).await;
    top.flush(&c, locked).await.expect("flush of a locked file");
    // A second fd of the same file: locks are per file and owner, not per fd.
    let other = fd(3, locked.gfid, libc::O_RDONLY);
    top.open(&c, other).await.expect("open");
    top.flush(&c, other).await.expect("flush of another fd");
    top.flush(&c, plain).await.expect("flush");
    assert_eq!(h.count(xlator_api::Fop::Flush), 2, "{:?}", h.fops());
}

/// Host threads that poll their requests first (`with_reply_spin`, as the FUSE reader does;
/// `reply-spin` set, which has no effect since wire version 4) and runtime tasks share one
/// connection: every reply, small or a 1 MiB read, reaches its caller intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_spinning_for_replies_and_the_reader_share_the_socket() {
    let (_server, top, f) = brick_with_file(&[], &[("reply-spin", "2ms")], "spun").await;
    let c = cx();
    let data: Arc<Vec<u8>> = Arc::new((0..1u32 << 20).map(|i| (i * 7 % 251) as u8).collect());
    top.writev(&c, f, 0, Buf::from_vec(data.to_vec()), 0)
        .await
        .expect("writev");

    let rt = tokio::runtime::Handle::current();
    let mut threads = Vec::new();
    for t in 0..3 {
        let (top, rt, data) = (top.clone(), rt.clone(), data.clone());
        threads.push(std::thread::spawn(move || {
            let _rt = rt.enter();
            for i in 0..150 {
                let (tx, rx) = std::sync::mpsc::channel();
                let top = top.clone();
                let big = (i + t) % 8 == 0;
                xlfs_core::services::with_reply_spin(|| {
                    xlfs_core::services::poll_here_then_spawn(
                        async move {
                            let r = if big {
                                top.readv(&Ctx::root(), f, 0, 1 << 20)
                                    .await
                                    .map(|r| r.data.to_vec())
                            } else {
                                top.stat(&Ctx::root(), f.gfid)
                                    .await
                                    .map(|a| a.size.to_be_bytes().to_vec())
                            };
                            let _ = tx.send(r);
                        },
                        false,
                    )
                });
                let got = rx
                    .recv_timeout(Duration::from_secs(20))
                    .expect("answered")
                    .expect("call succeeded");
                if big {
                    assert!(got == *data, "thread {t} call {i}: read data differs");
                } else {
                    assert_eq!(got, (1u64 << 20).to_be_bytes().to_vec());
                }
            }
        }));
    }
    // Meanwhile calls from the runtime's tasks, which never spin.
    for _ in 0..300 {
        assert_eq!(top.stat(&c, f.gfid).await.expect("stat").size, 1 << 20);
    }
    tokio::task::spawn_blocking(move || {
        for t in threads {
            t.join().expect("spinning thread");
        }
    })
    .await
    .expect("join");
}

/// `request-spin`: the server polls for a lone client's next request; a client that then
/// goes quiet costs the poll and no more, and other clients are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_spin_serves_lone_and_busy_clients_alike() {
    let leaf = MemLeaf::new();
    let (_server, addr) = common::server(&leaf, &[("request-spin", "5ms")]);
    let quiet = common::client(addr, &[]);
    let busy = common::client(addr, &[]);
    common::wait_up(&quiet).await;
    common::wait_up(&busy).await;
    let c = cx();
    let start = Instant::now();
    for round in 0..20 {
        // One lone request, then silence on this connection while the other works.
        quiet.stat(&c, Gfid::ROOT).await.expect("quiet stat");
        let e = busy
            .mkdir(
                &c,
                Loc::new(Gfid::ROOT, format!("d{round}").as_str()),
                0o755,
                0,
            )
            .await
            .expect("mkdir");
        for _ in 0..10 {
            assert!(busy.stat(&c, e.attr.gfid).await.expect("stat").is_dir());
        }
    }
    // 240 calls; a poll that never ended would leave a worker stuck for good.
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
}

/// Small writes run on the connection's reader unless `inline-write-max` is 0; either way
/// the data lands intact and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_writes_land_the_same_inline_or_on_the_pool() {
    for max in ["64KiB", "0"] {
        let (_server, top, f) = brick_with_file(&[("inline-write-max", max)], &[], "w").await;
        let c = cx();
        let mut want = vec![0u8; 320 << 10];
        for (i, size) in [4096usize, 65_536, 65_537, 100, 131_072].iter().enumerate() {
            let off = (i as u64) * 40_000;
            let data = vec![i as u8 + 1; *size];
            want[off as usize..off as usize + size].copy_from_slice(&data);
            top.writev(&c, f, off, Buf::from_vec(data), 0)
                .await
                .expect("writev");
        }
        let len = 4 * 40_000 + 131_072;
        let got = top.readv(&c, f, 0, len as u32).await.expect("readv");
        assert!(
            got.data[..] == want[..len],
            "inline-write-max {max}: content differs"
        );
    }
}
