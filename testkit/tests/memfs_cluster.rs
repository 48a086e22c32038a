//! `storage/memory` does what cluster translators need of a leaf, as storage/posix does:
//! requested GFIDs, xattrs in entry replies and at creation, several xattrs at once,
//! checksums of ranges, and `xattrop` that reads with a zero delta.

use abi_stable::std_types::{RString, RVec};
use xlator_api::{
    Buf, CreateXattrs, Ctx, Errno, Fd, FdId, Gfid, GfidReq, Loc, Xattr, XattrReq, XattropOp, Xattrs,
};
use xlfs_testkit::fixtures::gfid;
use xlfs_testkit::memfs::MemLeaf;

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

fn with_gfid(g: Gfid) -> Ctx {
    Ctx::root().to_builder().ext(&GfidReq(g)).build()
}

fn xa(name: &str, value: &[u8]) -> Xattr {
    Xattr {
        name: name.into(),
        value: Buf::copy_from_slice(value),
    }
}

fn xs(v: &[(&str, &[u8])]) -> Xattrs {
    v.iter().map(|(n, b)| xa(n, b)).collect()
}

type Pairs = Vec<(String, Vec<u8>)>;

fn pairs(x: &Xattrs) -> Pairs {
    x.iter()
        .map(|x| (x.name.to_string(), x.value.to_vec()))
        .collect()
}

fn root_loc(name: &str) -> Loc {
    Loc::new(Gfid::ROOT, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_fops_give_the_requested_gfid() {
    let top = MemLeaf::new();
    let rw = libc::O_RDWR | libc::O_CREAT;
    let e = top
        .create(
            &with_gfid(gfid(1)),
            root_loc("f"),
            fd(1, Gfid::NULL, rw),
            0o644,
            0,
        )
        .await
        .expect("create");
    assert_eq!(e.attr.gfid, gfid(1));
    let e = top
        .mkdir(&with_gfid(gfid(2)), root_loc("d"), 0o755, 0)
        .await
        .expect("mkdir");
    assert_eq!(e.attr.gfid, gfid(2));
    let e = top
        .mknod(
            &with_gfid(gfid(3)),
            root_loc("p"),
            libc::S_IFIFO | 0o644,
            0,
            0,
        )
        .await
        .expect("mknod");
    assert_eq!(e.attr.gfid, gfid(3));
    let e = top
        .symlink(&with_gfid(gfid(4)), root_loc("l"), "f".into())
        .await
        .expect("symlink");
    assert_eq!(e.attr.gfid, gfid(4));
    // The objects answer by those GFIDs.
    for (n, name) in [(1, "f"), (2, "d"), (3, "p"), (4, "l")] {
        let got = top
            .lookup(&Ctx::root(), root_loc(name))
            .await
            .expect("lookup");
        assert_eq!(got.attr.gfid, gfid(n), "{name}");
        assert_eq!(
            top.stat(&Ctx::root(), gfid(n)).await.map(|a| a.ino),
            Ok(got.attr.ino)
        );
    }
    // Without a request (or with a null one), a fresh GFID.
    let e = top
        .mkdir(&with_gfid(Gfid::NULL), root_loc("d2"), 0o755, 0)
        .await
        .expect("mkdir");
    assert!(!e.attr.gfid.is_null() && e.attr.gfid != gfid(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gfid_in_use_or_a_name_with_another_gfid_is_refused() {
    let top = MemLeaf::new();
    let rw = libc::O_RDWR | libc::O_CREAT;
    top.create(
        &with_gfid(gfid(1)),
        root_loc("f"),
        fd(1, Gfid::NULL, rw),
        0o644,
        0,
    )
    .await
    .expect("create");
    // The same name again with another GFID: someone else's file.
    assert_eq!(
        top.create(
            &with_gfid(gfid(9)),
            root_loc("f"),
            fd(2, Gfid::NULL, rw),
            0o644,
            0
        )
        .await
        .map(|e| e.attr.gfid),
        Err(Errno::EEXIST)
    );
    // With the same GFID (a replayed create) it opens the file, as without a request.
    assert_eq!(
        top.create(
            &with_gfid(gfid(1)),
            root_loc("f"),
            fd(3, Gfid::NULL, rw),
            0o644,
            0
        )
        .await
        .map(|e| e.attr.gfid),
        Ok(gfid(1))
    );
    assert_eq!(
        top.create(&Ctx::root(), root_loc("f"), fd(4, Gfid::NULL, rw), 0o644, 0)
            .await
            .map(|e| e.attr.gfid),
        Ok(gfid(1))
    );
    // A GFID in use elsewhere (or the root's) is refused for any new name, and nothing is
    // made.
    for (what, cx) in [
        ("file's", with_gfid(gfid(1))),
        ("root's", with_gfid(Gfid::ROOT)),
    ] {
        assert_eq!(
            top.mkdir(&cx, root_loc("d"), 0o755, 0)
                .await
                .map(|e| e.attr.gfid),
            Err(Errno::EEXIST),
            "{what}"
        );
        assert_eq!(
            top.create(&cx, root_loc("g"), fd(5, Gfid::NULL, rw), 0o644, 0)
                .await
                .map(|e| e.attr.gfid),
            Err(Errno::EEXIST),
            "{what}"
        );
        assert_eq!(
            top.symlink(&cx, root_loc("l"), "x".into())
                .await
                .map(|e| e.attr.gfid),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            top.mknod(&cx, root_loc("p"), libc::S_IFIFO | 0o644, 0, 0)
                .await
                .map(|e| e.attr.gfid),
            Err(Errno::EEXIST)
        );
    }
    for name in ["d", "g", "l", "p"] {
        assert_eq!(
            top.lookup(&Ctx::root(), root_loc(name))
                .await
                .map(|e| e.attr.gfid),
            Err(Errno::ENOENT),
            "{name} was made"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_xattrs_come_with_the_new_object_or_not_at_all() {
    let top = MemLeaf::new();
    let set = CreateXattrs(vec![
        ("trusted.afr.c-client-0".into(), vec![0; 12]),
        ("trusted.glusterfs.dht.linkto".into(), b"c-1\0".to_vec()),
    ]);
    // Even for a caller who could not set trusted.* itself: the cluster's bookkeeping.
    let cx = Ctx::builder(1000, 1000).ext(&set).build();
    let dir = Ctx::root().to_builder().ext(&set).build();
    let rw = libc::O_RDWR | libc::O_CREAT;
    top.setattr(
        &Ctx::root(),
        Gfid::ROOT,
        xlator_api::SetAttr {
            perm: abi_stable::std_types::ROption::RSome(0o777),
            ..Default::default()
        },
    )
    .await
    .expect("chmod");
    let made = [
        top.create(&cx, root_loc("f"), fd(1, Gfid::NULL, rw), 0o644, 0)
            .await
            .expect("create"),
        top.mkdir(&dir, root_loc("d"), 0o755, 0)
            .await
            .expect("mkdir"),
        top.mknod(&dir, root_loc("p"), libc::S_IFIFO | 0o644, 0, 0)
            .await
            .expect("mknod"),
        top.symlink(&dir, root_loc("l"), "f".into())
            .await
            .expect("symlink"),
    ];
    let names: RVec<RString> = set.0.iter().map(|(k, _)| k.as_str().into()).collect();
    for e in &made {
        let got = top
            .getxattrs(&Ctx::root(), e.attr.gfid, names.clone())
            .await
            .expect("getxattrs");
        assert_eq!(pairs(&got), set.0, "{:?}", e.attr.kind);
    }
    // A refused one (system.* cannot be set) makes nothing.
    let bad = Ctx::root()
        .to_builder()
        .ext(&CreateXattrs(vec![
            ("trusted.ok".into(), vec![1]),
            ("system.posix_acl_access".into(), vec![2]),
        ]))
        .build();
    assert_eq!(
        top.mkdir(&bad, root_loc("bad"), 0o755, 0)
            .await
            .map(|e| e.attr.gfid),
        Err(Errno::ENOTSUP)
    );
    assert_eq!(
        top.lookup(&Ctx::root(), root_loc("bad"))
            .await
            .map(|e| e.attr.gfid),
        Err(Errno::ENOENT)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_replies_and_readdirp_carry_the_xattrs_asked_for() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let req = XattrReq {
        names: vec!["user.exact".into()],
        prefixes: vec!["trusted.afr.".into()],
    };
    let ask = root.to_builder().ext(&req).build();
    let set = CreateXattrs(vec![
        ("trusted.afr.c-0".into(), vec![0, 0, 0, 1]),
        ("trusted.other".into(), vec![7]),
        ("user.exact".into(), b"v".to_vec()),
        ("user.exactly-not".into(), b"w".to_vec()),
    ]);
    let both = ask.to_builder().ext(&set).build();
    let want = vec![
        ("trusted.afr.c-0".to_owned(), vec![0, 0, 0, 1]),
        ("user.exact".to_owned(), b"v".to_vec()),
    ];
    let rw = libc::O_RDWR | libc::O_CREAT;
    let e = top
        .create(&both, root_loc("f"), fd(1, Gfid::NULL, rw), 0o644, 0)
        .await
        .expect("create");
    assert_eq!(pairs(&e.xattrs), want, "create");
    assert_eq!(
        e.xattr("user.exact").map(|b| b.to_vec()),
        Some(b"v".to_vec())
    );
    let d = top
        .mkdir(&both, root_loc("d"), 0o755, 0)
        .await
        .expect("mkdir");
    assert_eq!(pairs(&d.xattrs), want, "mkdir");
    let s = top
        .symlink(&ask, root_loc("l"), "f".into())
        .await
        .expect("symlink");
    assert!(s.xattrs.is_empty(), "symlink made without xattrs");
    let n = top
        .mknod(&both, root_loc("p"), libc::S_IFIFO | 0o600, 0, 0)
        .await
        .expect("mknod");
    assert_eq!(pairs(&n.xattrs), want, "mknod");
    let l = top.lookup(&ask, root_loc("f")).await.expect("lookup");
    assert_eq!(pairs(&l.xattrs), want, "lookup");
    let k = top
        .link(&ask, e.attr.gfid, root_loc("f2"))
        .await
        .expect("link");
    assert_eq!(pairs(&k.xattrs), want, "link");
    // An existing file opened by create reports its xattrs too.
    let again = top
        .create(&ask, root_loc("f"), fd(2, Gfid::NULL, rw), 0o644, 0)
        .await
        .expect("open existing");
    assert_eq!(pairs(&again.xattrs), want, "create of an existing file");
    // Without a request: none.
    let plain = top.lookup(&root, root_loc("f")).await.expect("lookup");
    assert!(plain.xattrs.is_empty());

    let listed = top
        .readdirp(&ask, Fd::anonymous(Gfid::ROOT, libc::O_RDONLY), 0, 1 << 20)
        .await
        .expect("readdirp");
    let mut by_name: Vec<(String, Pairs)> = listed
        .iter()
        .map(|d| (d.name.to_string(), pairs(&d.xattrs)))
        .collect();
    by_name.sort();
    assert_eq!(
        by_name,
        [
            ("d".to_owned(), want.clone()),
            ("f".to_owned(), want.clone()),
            ("f2".to_owned(), want.clone()),
            ("l".to_owned(), Vec::new()),
            ("p".to_owned(), want.clone()),
        ]
    );
    let unasked = top
        .readdirp(&root, Fd::anonymous(Gfid::ROOT, libc::O_RDONLY), 0, 1 << 20)
        .await
        .expect("readdirp");
    assert!(unasked.iter().all(|d| d.xattrs.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getxattrs_leaves_out_what_is_missing_and_setxattrs_is_all_or_none() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let g = top
        .mkdir(&root, root_loc("d"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid;
    top.setxattrs(&root, g, xs(&[("user.a", b"1"), ("trusted.b", b"2")]), 0)
        .await
        .expect("setxattrs");
    let names = |v: &[&str]| -> RVec<RString> { v.iter().map(|n| (*n).into()).collect() };
    let got = top
        .getxattrs(&root, g, names(&["trusted.b", "user.missing", "user.a"]))
        .await
        .expect("getxattrs");
    assert_eq!(
        pairs(&got),
        [
            ("trusted.b".to_owned(), b"2".to_vec()),
            ("user.a".to_owned(), b"1".to_vec())
        ]
    );
    // trusted.* is invisible to others: left out, not an error.
    let user = Ctx::new(1000, 1000);
    let got = top
        .getxattrs(&user, g, names(&["trusted.b", "user.a"]))
        .await
        .expect("getxattrs as a user");
    assert_eq!(pairs(&got), [("user.a".to_owned(), b"1".to_vec())]);
    assert_eq!(
        top.getxattrs(&root, gfid(99), names(&["user.a"]))
            .await
            .map(|x| x.len()),
        Err(Errno::ESTALE)
    );

    let before = top.stat(&root, g).await.expect("stat");
    // XATTR_CREATE with one existing name: nothing is set.
    assert_eq!(
        top.setxattrs(
            &root,
            g,
            xs(&[("user.new", b"n"), ("user.a", b"x")]),
            libc::XATTR_CREATE
        )
        .await,
        Err(Errno::EEXIST)
    );
    // XATTR_REPLACE with one missing name: nothing is set.
    assert_eq!(
        top.setxattrs(
            &root,
            g,
            xs(&[("user.a", b"x"), ("user.none", b"x")]),
            libc::XATTR_REPLACE
        )
        .await,
        Err(Errno::ENODATA)
    );
    // A name the caller may not set: nothing is set.
    assert_eq!(
        top.setxattrs(&user, g, xs(&[("trusted.c", b"x")]), 0).await,
        Err(Errno::EPERM)
    );
    assert_eq!(
        top.setxattrs(&root, g, xs(&[("user.new", b"n"), ("bogus", b"x")]), 0)
            .await,
        Err(Errno::ENOTSUP)
    );
    let got = top
        .getxattrs(
            &root,
            g,
            names(&["user.a", "user.new", "user.none", "trusted.c"]),
        )
        .await
        .expect("getxattrs");
    assert_eq!(pairs(&got), [("user.a".to_owned(), b"1".to_vec())]);
    assert_eq!(top.stat(&root, g).await.map(|a| a.ctime), Ok(before.ctime));
    // Duplicates under XATTR_CREATE: the second sees the first.
    assert_eq!(
        top.setxattrs(
            &root,
            g,
            xs(&[("user.dup", b"1"), ("user.dup", b"2")]),
            libc::XATTR_CREATE
        )
        .await,
        Err(Errno::EEXIST)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rchecksum_gives_adler32_and_sha256_of_the_range() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let rw = libc::O_RDWR | libc::O_CREAT;
    let e = top
        .create(&root, root_loc("f"), fd(1, Gfid::NULL, rw), 0o644, 0)
        .await
        .expect("create");
    let f = fd(1, e.attr.gfid, rw);
    top.writev(&root, f, 0, Buf::copy_from_slice(b"xxWikipedia"), 0)
        .await
        .expect("write");
    let c = top.rchecksum(&root, f, 2, 9).await.expect("rchecksum");
    assert_eq!(c.len, 9);
    assert_eq!(c.weak, 0x11E6_0398, "Adler-32 of \"Wikipedia\"");
    // SHA-256("Wikipedia") begins 0x8b3a: compare with a range that differs by one byte.
    let other = top.rchecksum(&root, f, 1, 9).await.expect("rchecksum");
    assert_ne!(other.strong, c.strong);
    assert_ne!(other.weak, c.weak);
    // Short at end of file; empty past it (Adler-32 of nothing is 1).
    let tail = top.rchecksum(&root, f, 8, 100).await.expect("tail");
    assert_eq!(tail.len, 3);
    let past = top.rchecksum(&root, f, 100, 10).await.expect("past");
    assert_eq!((past.len, past.weak), (0, 1));
    // Same bytes, same checksums, on another file.
    let e2 = top
        .create(&root, root_loc("g"), fd(2, Gfid::NULL, rw), 0o644, 0)
        .await
        .expect("create");
    let g = fd(2, e2.attr.gfid, rw);
    top.writev(&root, g, 0, Buf::copy_from_slice(b"Wikipedia"), 0)
        .await
        .expect("write");
    assert_eq!(top.rchecksum(&root, g, 0, 9).await, Ok(c));
    // Read rights as readv: not through a write-only fd.
    let wo = fd(3, e2.attr.gfid, libc::O_WRONLY);
    top.open(&root, wo).await.expect("open");
    assert_eq!(top.rchecksum(&root, wo, 0, 9).await, Err(Errno::EBADF));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattrop_with_a_zero_delta_reads_without_writing() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let g = top
        .mkdir(&root, root_loc("d"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid;
    let before = top.stat(&root, g).await.expect("stat");
    let zero = [0u8; 12];
    let got = top
        .xattrop(
            &root,
            g,
            XattropOp::AddArray32,
            xs(&[("trusted.afr.c-0", &zero)]),
        )
        .await
        .expect("xattrop");
    assert_eq!(pairs(&got), [("trusted.afr.c-0".to_owned(), zero.to_vec())]);
    assert_eq!(
        top.listxattr(&root, g).await.map(|v| v.len()),
        Ok(0),
        "a zero delta created the key"
    );
    assert_eq!(top.stat(&root, g).await.map(|a| a.ctime), Ok(before.ctime));

    let one = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2];
    top.xattrop(
        &root,
        g,
        XattropOp::AddArray32,
        xs(&[("trusted.afr.c-0", &one)]),
    )
    .await
    .expect("add");
    let after_add = top.stat(&root, g).await.expect("stat");
    // Reading the stored counters back with zero: the value, and still no write.
    let got = top
        .fxattrop(
            &root,
            Fd::anonymous(g, libc::O_RDONLY),
            XattropOp::AddArray32,
            xs(&[("trusted.afr.c-0", &zero), ("trusted.afr.c-1", &zero)]),
        )
        .await
        .expect("read");
    assert_eq!(
        pairs(&got),
        [
            ("trusted.afr.c-0".to_owned(), one.to_vec()),
            ("trusted.afr.c-1".to_owned(), zero.to_vec()),
        ]
    );
    assert_eq!(top.listxattr(&root, g).await.map(|v| v.len()), Ok(1));
    assert_eq!(
        top.stat(&root, g).await.map(|a| a.ctime),
        Ok(after_add.ctime)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattrop_over_several_keys_is_all_or_nothing() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let g = top
        .mkdir(&root, root_loc("d"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid;
    let one = 1u32.to_be_bytes();
    // The second key's delta is not a whole lane: neither key changes.
    assert_eq!(
        top.xattrop(
            &root,
            g,
            XattropOp::AddArray32,
            xs(&[("trusted.a", &one), ("trusted.b", &[1, 2, 3])])
        )
        .await
        .map(|x| x.len()),
        Err(Errno::EINVAL)
    );
    // The second key is not the caller's to change: neither changes.
    top.setxattr(&root, g, xa("user.c", &one), 0)
        .await
        .expect("set");
    top.setattr(
        &root,
        g,
        xlator_api::SetAttr {
            perm: abi_stable::std_types::ROption::RSome(0o777),
            ..Default::default()
        },
    )
    .await
    .expect("chmod");
    let user = Ctx::new(1000, 1000);
    assert_eq!(
        top.xattrop(
            &user,
            g,
            XattropOp::AddArray32,
            xs(&[("user.c", &one), ("trusted.a", &one)])
        )
        .await
        .map(|x| x.len()),
        Err(Errno::EPERM)
    );
    let names: RVec<RString> = ["trusted.a", "trusted.b", "user.c"]
        .iter()
        .map(|n| (*n).into())
        .collect();
    assert_eq!(
        pairs(&top.getxattrs(&root, g, names.clone()).await.expect("get")),
        [("user.c".to_owned(), one.to_vec())]
    );
    // A key named twice gets both deltas.
    let got = top
        .xattrop(
            &root,
            g,
            XattropOp::AddArray32,
            xs(&[("trusted.a", &one), ("trusted.a", &one)]),
        )
        .await
        .expect("twice");
    assert_eq!(got[1].value.to_vec(), 2u32.to_be_bytes());
    assert_eq!(
        top.getxattr(&root, g, "trusted.a".into())
            .await
            .map(|b| b.to_vec()),
        Ok(2u32.to_be_bytes().to_vec())
    );
}

#[tokio::test]
async fn the_bricks_own_xattr_names_are_refused_at_create_as_posix_does() {
    let top = MemLeaf::new();
    for name in ["trusted.gfid", "trusted.xlfs.stripe", "user.xlfs.x"] {
        let set = CreateXattrs(vec![(name.into(), vec![1])]);
        let cx = Ctx::root().to_builder().ext(&set).build();
        assert_eq!(
            top.mkdir(&cx, root_loc("d"), 0o755, 0).await.map(drop),
            Err(Errno::EPERM),
            "{name}"
        );
    }
    assert!(
        top.lookup(&Ctx::root(), root_loc("d")).await.is_err(),
        "nothing made"
    );
}
