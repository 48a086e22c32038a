//! What cluster translators need of entry fops: xattrs in entry and readdirp replies
//! (`XattrReq`), xattrs set atomically at creation (`CreateXattrs`), and one identity per
//! requested GFID under concurrency (`GfidReq`).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::*;
use xlator_api::{
    Buf, CreateXattrs, Ctx, Entry, Errno, Fd, Gfid, GfidReq, Subvol, Xattr, XattrReq,
};

fn xa(name: &str, v: &[u8]) -> Xattr {
    Xattr {
        name: name.into(),
        value: Buf::copy_from_slice(v),
    }
}

fn asking(uid: u32, names: &[&str], prefixes: &[&str]) -> Ctx {
    Ctx::builder(uid, uid)
        .ext(&XattrReq {
            names: names.iter().map(|s| s.to_string()).collect(),
            prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
        })
        .build()
}

fn names_of(xs: &[Xattr]) -> Vec<String> {
    let mut v: Vec<String> = xs.iter().map(|x| x.name.to_string()).collect();
    v.sort();
    v
}

/// Every handle file under the brick's handle directory (the root's included).
fn handles(brick: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for b in std::fs::read_dir(brick.join(".xlfs/gfid")).expect("handle dir") {
        let b = b.expect("bucket").path();
        for h in std::fs::read_dir(&b).expect("bucket dir") {
            out.push(h.expect("handle").path());
        }
    }
    out.sort();
    out
}

fn staged(brick: &Path) -> usize {
    std::fs::read_dir(brick.join(".xlfs/tmp"))
        .expect("staging dir")
        .count()
}

fn handle_of(brick: &Path, g: Gfid) -> PathBuf {
    brick
        .join(".xlfs/gfid")
        .join(format!("{:02x}", g.0[0]))
        .join(g.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_with_xattr_req_returns_asked_names_and_prefixes_only() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    let g = e.attr.gfid;
    for (n, v) in [
        ("trusted.afr.c0", &b"\0\0\0\x01"[..]),
        ("trusted.afr.c1", b"\0\0\0\x02"),
        ("trusted.dht.linkto", b"b1"),
        ("user.unrelated", b"x"),
    ] {
        top.setxattr(&cx, g, xa(n, v), 0).await.expect("setxattr");
    }
    let l = loc(Gfid::ROOT, "f");
    // Nothing asked: nothing given.
    let plain = top.lookup(&cx, l.clone()).await.expect("lookup");
    assert!(plain.xattrs.is_empty());
    let e = top
        .lookup(
            &asking(
                0,
                &["trusted.dht.linkto", "user.missing"],
                &["trusted.afr."],
            ),
            l.clone(),
        )
        .await
        .expect("lookup");
    assert_eq!(
        names_of(&e.xattrs),
        ["trusted.afr.c0", "trusted.afr.c1", "trusted.dht.linkto"]
    );
    assert_eq!(
        e.xattr("trusted.afr.c1").map(Buf::as_slice),
        Some(&b"\0\0\0\x02"[..])
    );
    assert_eq!(e.attr.gfid, g);
    // The brick's own xattrs stay hidden from a prefix (the GFID reads back only by name).
    let e = top
        .lookup(&asking(0, &[], &["trusted.", "user."]), l.clone())
        .await
        .expect("lookup");
    assert!(
        !e.xattrs
            .iter()
            .any(|x| x.name.as_str() == "trusted.gfid" || x.name.contains(".xlfs.")),
        "{:?}",
        names_of(&e.xattrs)
    );
    assert!(e.xattr("user.unrelated").is_some());
    let e = top
        .lookup(&asking(0, &["trusted.gfid"], &[]), l.clone())
        .await
        .expect("lookup");
    assert_eq!(e.xattr("trusted.gfid").map(Buf::as_slice), Some(&g.0[..]));
    // Asked for by translators on a user's behalf, trusted.* comes too (replicate needs its
    // counters in a user's lookup); the brick's own names still do not.
    let e = top
        .lookup(&asking(1000, &[], &["trusted.", "user."]), l)
        .await
        .expect("lookup as a user");
    assert_eq!(
        names_of(&e.xattrs),
        [
            "trusted.afr.c0",
            "trusted.afr.c1",
            "trusted.dht.linkto",
            "user.unrelated"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readdirp_entries_carry_the_asked_xattrs() {
    let (_d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "d").await.attr.gfid;
    for i in 0..5 {
        let g = mkfile(&top, &cx, dir, &format!("f{i}"), b"")
            .await
            .attr
            .gfid;
        top.setxattr(&cx, g, xa("trusted.afr.c0", &[0, 0, 0, i]), 0)
            .await
            .expect("setxattr");
        top.setxattr(&cx, g, xa("user.other", b"no"), 0)
            .await
            .expect("setxattr");
    }
    let f = fd(dir, libc::O_RDONLY);
    top.opendir(&cx, f).await.expect("opendir");
    let plain = top.readdirp(&cx, f, 0, 65536).await.expect("readdirp");
    assert_eq!(plain.len(), 5);
    assert!(plain.iter().all(|e| e.xattrs.is_empty()));
    let got = top
        .readdirp(&asking(0, &[], &["trusted.afr."]), f, 0, 65536)
        .await
        .expect("readdirp");
    assert_eq!(got.len(), 5);
    for e in got.iter() {
        let i: u8 = e.name.as_str()[1..].parse().expect("name");
        assert_eq!(names_of(&e.xattrs), ["trusted.afr.c0"], "{}", e.name);
        assert_eq!(e.xattrs[0].value.as_slice(), &[0, 0, 0, i]);
    }
    top.releasedir(&cx, f).await.expect("releasedir");
}

/// Makes `name` in `parent` with the fop `kind`, under `cx`.
async fn make(
    top: &Subvol,
    cx: &Ctx,
    kind: &str,
    parent: Gfid,
    name: &str,
) -> Result<Entry, Errno> {
    let l = loc(parent, name);
    match kind {
        "create" => {
            let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL);
            let e = top.create(cx, l, f, 0o640, 0o022).await?;
            top.release(
                cx,
                Fd {
                    gfid: e.attr.gfid,
                    ..f
                },
            )
            .await
            .expect("release");
            Ok(e)
        }
        "mkdir" => top.mkdir(cx, l, 0o750, 0o022).await,
        "mknod" => top.mknod(cx, l, libc::S_IFIFO | 0o640, 0, 0o022).await,
        "symlink" => top.symlink(cx, l, "target".into()).await,
        k => panic!("unknown kind {k}"),
    }
}

const KINDS: [&str; 4] = ["create", "mkdir", "mknod", "symlink"];

fn creating(uid: u32, xs: &[(&str, &[u8])], gfid: Option<Gfid>) -> Ctx {
    let mut b = Ctx::builder(uid, uid)
        .ext(&CreateXattrs(
            xs.iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect(),
        ))
        .ext(&XattrReq {
            names: vec![],
            prefixes: vec!["trusted.".into()],
        });
    if let Some(g) = gfid {
        b = b.ext(&GfidReq(g));
    }
    b.build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_with_create_xattrs_have_them_and_reply_with_them() {
    let (d, top) = new_brick();
    let cx = root();
    let pub_dir = mkdir(&top, &cx, Gfid::ROOT, "pub").await.attr.gfid;
    let open = xlator_api::SetAttr {
        perm: xlator_api::abi_stable::std_types::ROption::RSome(0o2777),
        gid: xlator_api::abi_stable::std_types::ROption::RSome(4242),
        ..Default::default()
    };
    top.setattr(&cx, pub_dir, open).await.expect("chmod");
    let pending = [0u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    for kind in KINDS {
        // Made by a user in a setgid directory: owner, group and mode as without xattrs.
        let want = Gfid::random();
        let cx = creating(
            1000,
            &[
                ("trusted.afr.c0", &pending),
                ("trusted.dht.linkto", b"sub1"),
            ],
            Some(want),
        );
        let e = make(&top, &cx, kind, pub_dir, kind).await.expect(kind);
        assert_eq!(e.attr.gfid, want, "{kind}");
        assert_eq!(
            names_of(&e.xattrs),
            ["trusted.afr.c0", "trusted.dht.linkto"],
            "{kind}"
        );
        assert_eq!(e.attr.uid, 1000, "{kind}");
        assert_eq!(e.attr.gid, 4242, "{kind}: the setgid parent's group");
        assert!(e.postparent.is_some(), "{kind}");
        match kind {
            "create" | "mknod" => assert_eq!(e.attr.perm, 0o640, "{kind}"),
            "mkdir" => assert_eq!(e.attr.perm, 0o2750, "{kind}: setgid inherited"),
            _ => {}
        }
        let l = top
            .lookup(&asking(0, &["trusted.afr.c0"], &[]), loc(pub_dir, kind))
            .await
            .expect("lookup");
        assert_eq!(l.attr.gfid, want);
        assert_eq!(
            l.xattr("trusted.afr.c0").map(Buf::as_slice),
            Some(&pending[..])
        );
        assert!(handle_of(d.path(), want).symlink_metadata().is_ok());
    }
    assert_eq!(staged(d.path()), 0);
    // A user cannot make anything where it may not write, staged or not.
    let closed = mkdir(&top, &cx, Gfid::ROOT, "closed").await.attr.gfid;
    for kind in KINDS {
        let r = make(
            &top,
            &creating(1000, &[("trusted.x", b"1")], None),
            kind,
            closed,
            "n",
        )
        .await;
        assert_eq!(r.err(), Some(Errno::EACCES), "{kind}");
    }
    assert_eq!(staged(d.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_create_xattr_leaves_nothing_behind() {
    let (d, top) = new_brick();
    let cx = root();
    let before = handles(d.path());
    let huge = vec![7u8; 70 * 1024]; // beyond XATTR_SIZE_MAX: E2BIG
    for kind in KINDS {
        let bad = creating(0, &[("trusted.ok", b"1"), ("trusted.big", &huge)], None);
        let r = make(&top, &bad, kind, Gfid::ROOT, kind).await;
        assert!(r.is_err(), "{kind}: {r:?}");
        // A brick-internal name is refused before anything is made.
        let internal = creating(0, &[("user.xlfs.gfid", b"x")], None);
        let r = make(&top, &internal, kind, Gfid::ROOT, kind).await;
        assert_eq!(r.err(), Some(Errno::EPERM), "{kind}");
        assert_eq!(
            top.lookup(&cx, loc(Gfid::ROOT, kind)).await.err(),
            Some(Errno::ENOENT),
            "{kind}"
        );
    }
    assert_eq!(staged(d.path()), 0);
    assert_eq!(handles(d.path()), before);
    assert_eq!(names(&top, &cx, Gfid::ROOT).await, Vec::<String>::new());
    assert_eq!(top.dump().find_u64("staged-creates"), Some(0));
    assert_eq!(top.dump().find_u64("staged-creates-failed"), Some(4));
}

/// A create with a requested GFID (what cluster translators send) is staged even without
/// xattrs: its name never exists without that GFID, so a brick killed mid-create cannot
/// leave a name that its next lookup gives a random GFID (replicas then disagree on the
/// object's identity). Without a requested GFID the object is made in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_with_a_requested_gfid_are_staged_and_others_are_not() {
    let (d, top) = new_brick();
    for kind in KINDS {
        let plain = make(&top, &root(), kind, Gfid::ROOT, &format!("{kind}-plain"))
            .await
            .expect(kind);
        assert!(!plain.attr.gfid.is_null(), "{kind}");
    }
    assert_eq!(top.dump().find_u64("staged-creates"), Some(0));
    for (i, kind) in KINDS.into_iter().enumerate() {
        let want = Gfid::random();
        let cx = Ctx::builder(1000, 1000).ext(&GfidReq(want)).build();
        let e = make(&top, &cx, kind, Gfid::ROOT, kind).await;
        // Root's directory: a user may not write there, staged or not.
        assert_eq!(e.err(), Some(Errno::EACCES), "{kind}");
        let cx = Ctx::builder(0, 0).ext(&GfidReq(want)).build();
        let e = make(&top, &cx, kind, Gfid::ROOT, kind).await.expect(kind);
        assert_eq!(e.attr.gfid, want, "{kind}");
        assert_eq!(e.attr.uid, 0, "{kind}");
        assert!(handle_of(d.path(), want).symlink_metadata().is_ok());
        assert_eq!(
            top.dump().find_u64("staged-creates"),
            Some(i as u64 + 1),
            "{kind}"
        );
    }
    assert_eq!(staged(d.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_xattrs_keep_eexist_and_gfid_rules() {
    let (d, top) = new_brick();
    let cx = root();
    let taken = mkfile(&top, &cx, Gfid::ROOT, "taken", b"").await.attr.gfid;
    let before = handles(d.path());
    for kind in KINDS {
        // The name exists: EEXIST, the existing object untouched.
        let r = make(
            &top,
            &creating(0, &[("trusted.x", b"1")], None),
            kind,
            Gfid::ROOT,
            "taken",
        )
        .await;
        assert_eq!(r.err(), Some(Errno::EEXIST), "{kind}");
        // The requested GFID names another object: refused, nothing made.
        for cx in [
            creating(0, &[("trusted.x", b"1")], Some(taken)),
            Ctx::builder(0, 0).ext(&GfidReq(taken)).build(),
        ] {
            let r = make(&top, &cx, kind, Gfid::ROOT, "new").await;
            assert_eq!(r.err(), Some(Errno::EEXIST), "{kind}");
            assert_eq!(
                top.lookup(&root(), loc(Gfid::ROOT, "new")).await.err(),
                Some(Errno::ENOENT),
                "{kind}"
            );
        }
    }
    let e = top.getxattr(&cx, taken, "trusted.x".into()).await.err();
    assert_eq!(e, Some(Errno::ENODATA));
    assert_eq!(handles(d.path()), before);
    assert_eq!(staged(d.path()), 0);
    // Without O_EXCL an existing file opens (its xattrs as they were)...
    let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let e = top
        .create(
            &creating(0, &[("trusted.x", b"1")], None),
            loc(Gfid::ROOT, "taken"),
            f,
            0o644,
            0,
        )
        .await
        .expect("open existing");
    assert_eq!(e.attr.gfid, taken);
    assert!(e.xattr("trusted.x").is_none());
    top.release(&cx, Fd { gfid: taken, ..f })
        .await
        .expect("release");
    // ...unless a different GFID was requested for it.
    let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let other = Ctx::builder(0, 0).ext(&GfidReq(Gfid::random())).build();
    let r = top
        .create(&other, loc(Gfid::ROOT, "taken"), f, 0o644, 0)
        .await;
    assert_eq!(r.err(), Some(Errno::EEXIST));
    let same = Ctx::builder(0, 0).ext(&GfidReq(taken)).build();
    let e = top
        .create(&same, loc(Gfid::ROOT, "taken"), f, 0o644, 0)
        .await
        .expect("same gfid opens");
    assert_eq!(e.attr.gfid, taken);
    top.release(&cx, Fd { gfid: taken, ..f })
        .await
        .expect("release");
    // A read-only create with xattrs still gets a working fd, even of a mode-0 file.
    let f = fd(Gfid::NULL, libc::O_RDONLY | libc::O_CREAT | libc::O_EXCL);
    let e = top
        .create(
            &creating(1000, &[("trusted.x", b"1")], None),
            loc(Gfid::ROOT, "ro"),
            f,
            0,
            0,
        )
        .await;
    assert_eq!(e.err(), Some(Errno::EACCES), "a user cannot write the root");
    let e = top
        .create(
            &creating(0, &[("trusted.x", b"1")], None),
            loc(Gfid::ROOT, "ro"),
            f,
            0,
            0,
        )
        .await
        .expect("read-only create");
    let f = Fd {
        gfid: e.attr.gfid,
        ..f
    };
    let r = top.readv(&cx, f, 0, 10).await.expect("read");
    assert!(r.data.is_empty());
    assert!(
        top.writev(&cx, f, 0, b"no".as_slice().into(), 0)
            .await
            .is_err()
    );
    top.release(&cx, f).await.expect("release");
}

#[test]
fn a_brick_empties_its_staging_directory_at_start() {
    let d = tempfile::tempdir().expect("tempdir");
    drop(brick_at(d.path()));
    std::fs::write(d.path().join(".xlfs/tmp/left-by-a-crash"), b"").expect("file");
    std::fs::create_dir(d.path().join(".xlfs/tmp/dir-left")).expect("dir");
    let _top = brick_at(d.path());
    assert_eq!(staged(d.path()), 0);
}

/// Readers racing creates: whenever a lookup or a listing shows a name, the name already has
/// the xattrs it was created with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_reader_never_sees_a_name_without_its_create_xattrs() {
    const N: usize = 60;
    let (_d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "d").await.attr.gfid;
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2 {
        let (top, done) = (top.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let cx = asking(0, &["trusted.t"], &[]);
            let mut seen = 0usize;
            while !done.load(Ordering::Acquire) {
                if r == 0 {
                    for i in 0..N {
                        let k = KINDS[i % 4];
                        if let Ok(e) = top.lookup(&cx, loc(dir, &format!("{k}{i}"))).await {
                            assert!(e.xattr("trusted.t").is_some(), "{k}{i} without its xattr");
                            seen += 1;
                        }
                    }
                } else {
                    let f = fd(dir, libc::O_RDONLY);
                    top.opendir(&cx, f).await.expect("opendir");
                    for e in top
                        .readdirp(&cx, f, 0, 1 << 20)
                        .await
                        .expect("readdirp")
                        .iter()
                    {
                        assert!(
                            xlator_api::find_xattr(&e.xattrs, "trusted.t").is_some(),
                            "{} listed without its xattr",
                            e.name
                        );
                        seen += 1;
                    }
                    top.releasedir(&cx, f).await.expect("releasedir");
                }
                tokio::task::yield_now().await;
            }
            seen
        }));
    }
    let cx = creating(0, &[("trusted.t", b"1")], None);
    for i in 0..N {
        let k = KINDS[i % 4];
        make(&top, &cx, k, dir, &format!("{k}{i}"))
            .await
            .expect("make");
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.await.expect("reader");
    }
    assert_eq!(names(&top, &root(), dir).await.len(), N);
}

/// Two creates of one name with different requested GFIDs, on threads of the blocking pool
/// released together: one wins, the other gets EEXIST, and the loser's GFID leaves no handle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_gfid_req_creates_of_one_name_have_one_winner() {
    let (d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "d").await.attr.gfid;
    for round in 0..24 {
        let kind = KINDS[round % 4];
        let with_xattrs = round % 8 >= 4;
        let name = format!("n{round}");
        let gate = Arc::new(tokio::sync::Barrier::new(2));
        let gs = [Gfid::random(), Gfid::random()];
        let mut tasks = Vec::new();
        for g in gs {
            let (top, gate, name) = (top.clone(), gate.clone(), name.clone());
            let cx = if with_xattrs {
                creating(0, &[("trusted.t", b"1")], Some(g))
            } else {
                Ctx::builder(0, 0).ext(&GfidReq(g)).build()
            };
            tasks.push(tokio::spawn(async move {
                gate.wait().await;
                make(&top, &cx, kind, dir, &name).await.map(|e| e.attr.gfid)
            }));
        }
        let mut rs = Vec::new();
        for t in tasks {
            rs.push(t.await.expect("join"));
        }
        let won: Vec<Gfid> = rs.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(won.len(), 1, "{kind} xattrs={with_xattrs}: {rs:?}");
        assert!(
            rs.iter().any(|r| r.as_ref().err() == Some(&Errno::EEXIST)),
            "{rs:?}"
        );
        let winner = won[0];
        let loser = if gs[0] == winner { gs[1] } else { gs[0] };
        let e = top.lookup(&cx, loc(dir, &name)).await.expect("lookup");
        assert_eq!(e.attr.gfid, winner, "{kind}");
        assert!(handle_of(d.path(), winner).symlink_metadata().is_ok());
        assert!(
            handle_of(d.path(), loser).symlink_metadata().is_err(),
            "{kind} xattrs={with_xattrs}: the loser's handle leaked"
        );
        assert_eq!(top.stat(&cx, loser).await.err(), Some(Errno::ESTALE));
    }
    // One handle per object (and the root's): no second GFID for anything.
    assert_eq!(handles(d.path()).len(), 24 + 2);
    assert_eq!(staged(d.path()), 0);
}

/// Lookups racing creates with a requested GFID: a lookup that finds the new name before its
/// GFID xattr is set (were it made in place) must not give it a random GFID of its own (the object then
/// had two GFIDs, two handles, and the lookup answered the wrong one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_lookup_never_gives_a_new_object_another_gfid() {
    const N: usize = 300;
    let (d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "d").await.attr.gfid;
    let wanted: Arc<Vec<Gfid>> = Arc::new((0..N).map(|_| Gfid::random()).collect());
    // The name being made now, which the readers look up over and over.
    let current = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (top, done, wanted, current) =
            (top.clone(), done.clone(), wanted.clone(), current.clone());
        readers.push(tokio::spawn(async move {
            while !done.load(Ordering::Acquire) {
                let i = current.load(Ordering::Acquire);
                if let Ok(e) = top.lookup(&root(), loc(dir, &format!("n{i}"))).await {
                    assert_eq!(e.attr.gfid, wanted[i], "n{i} answered with another gfid");
                }
            }
        }));
    }
    for (i, want) in wanted.iter().enumerate() {
        current.store(i, Ordering::Release);
        let cx = Ctx::builder(0, 0).ext(&GfidReq(*want)).build();
        let e = make(&top, &cx, KINDS[i % 4], dir, &format!("n{i}"))
            .await
            .expect("make");
        assert_eq!(e.attr.gfid, *want);
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.await.expect("reader");
    }
    assert_eq!(handles(d.path()).len(), N + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_replies_with_the_asked_xattrs() {
    let (_d, top) = new_brick();
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await.attr.gfid;
    top.setxattr(&cx, g, xa("trusted.afr.c0", &[0; 4]), 0)
        .await
        .expect("setxattr");
    let e = top
        .link(&asking(0, &[], &["trusted.afr."]), g, loc(Gfid::ROOT, "g"))
        .await
        .expect("link");
    assert_eq!(names_of(&e.xattrs), ["trusted.afr.c0"]);
    assert_eq!(e.attr.nlink, 2);
}

/// A brick killed in a staged mkdir after the new directory's handle (a link to its
/// parent and name) was made and before the directory was renamed into place leaves a
/// dangling link (and a staged directory, removed at the next start). Replicate's heal then
/// makes that directory, with that GFID, on this brick: the dangling link must not refuse
/// it (EEXIST, forever: the heal never finished), while a live directory's GFID still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mkdir_cut_short_by_a_crash_does_not_block_its_gfid() {
    let d = tempfile::tempdir().expect("tempdir");
    let g = Gfid::random();
    let top = brick_at(d.path());
    let cx = Ctx::builder(0, 0).ext(&GfidReq(g)).build();
    make(&top, &cx, "mkdir", Gfid::ROOT, "d")
        .await
        .expect("mkdir");
    drop(top);
    // What the crash leaves: the link, and the directory still in the staging area.
    std::fs::rename(d.path().join("d"), d.path().join(".xlfs/tmp/staged")).expect("unstage");
    let top = brick_at(d.path());
    assert_eq!(staged(d.path()), 0);
    assert!(
        handle_of(d.path(), g).symlink_metadata().is_ok(),
        "link left"
    );
    assert_eq!(top.stat(&root(), g).await.err(), Some(Errno::ESTALE));
    let e = make(&top, &cx, "mkdir", Gfid::ROOT, "d")
        .await
        .expect("the heal's mkdir");
    assert_eq!(e.attr.gfid, g);
    assert!(top.stat(&root(), g).await.expect("by gfid").is_dir());
    // A GFID a directory really has is still refused, and the directory keeps it.
    let again = make(&top, &cx, "mkdir", Gfid::ROOT, "other").await;
    assert_eq!(again.err(), Some(Errno::EEXIST));
    assert!(top.stat(&root(), g).await.expect("by gfid").is_dir());
    let l = top
        .lookup(&root(), loc(Gfid::ROOT, "d"))
        .await
        .expect("lookup");
    assert_eq!(l.attr.gfid, g);
}

/// A brick killed between renaming a directory and moving its handle leaves the handle
/// naming the old place: GFID fops on the directory fail (ESTALE) until a lookup of its
/// new name points the handle there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_points_a_directory_handle_left_at_its_old_name_to_the_new_one() {
    let d = tempfile::tempdir().expect("tempdir");
    let top = brick_at(d.path());
    let g = mkdir(&top, &root(), Gfid::ROOT, "old").await.attr.gfid;
    drop(top);
    std::fs::rename(d.path().join("old"), d.path().join("new")).expect("rename by hand");
    let top = brick_at(d.path());
    assert_eq!(top.stat(&root(), g).await.err(), Some(Errno::ESTALE));
    let l = top
        .lookup(&root(), loc(Gfid::ROOT, "new"))
        .await
        .expect("lookup");
    assert_eq!(l.attr.gfid, g);
    assert!(
        top.stat(&root(), g)
            .await
            .expect("by gfid after the lookup")
            .is_dir()
    );
    let inside = mkdir(&top, &root(), g, "child").await;
    assert!(!inside.attr.gfid.is_null());
    assert!(d.path().join("new/child").is_dir());
}

/// A directory's link that names its place correctly under a parent whose own link is stale
/// (the parent renamed by a crash-interrupted rename) is not dangling: its GFID resolves
/// again once the parent's link is fixed, and a create asking for that GFID elsewhere is
/// refused (EEXIST) rather than making a second directory of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_under_a_parent_with_a_stale_link_keeps_its_gfid() {
    let d = tempfile::tempdir().expect("tempdir");
    let top = brick_at(d.path());
    let p = mkdir(&top, &root(), Gfid::ROOT, "p").await.attr.gfid;
    let c = mkdir(&top, &root(), p, "c").await.attr.gfid;
    drop(top);
    std::fs::rename(d.path().join("p"), d.path().join("p2")).expect("rename by hand");
    let top = brick_at(d.path());
    assert_eq!(top.stat(&root(), c).await.err(), Some(Errno::ESTALE));
    let cx = Ctx::builder(0, 0).ext(&GfidReq(c)).build();
    let again = make(&top, &cx, "mkdir", Gfid::ROOT, "elsewhere").await;
    assert_eq!(again.err(), Some(Errno::EEXIST));
    assert!(!d.path().join("elsewhere").exists());
    top.lookup(&root(), loc(Gfid::ROOT, "p2"))
        .await
        .expect("lookup");
    assert!(top.stat(&root(), c).await.expect("by gfid").is_dir());
}
