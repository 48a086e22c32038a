//! What replicate answers when its children refuse a fop: the children's own error, as a
//! single brick gives it, and nothing made unreadable by a fop that changed nothing.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Ctx, Errno, Fd, FdId, Fop, Gfid, Loc, SetAttr, Subvol};

/// Every name `top` lists in `dir` (a fresh directory fd, read to the end).
async fn names(top: &Subvol, dir: Gfid, id: u64) -> Result<Vec<String>, Errno> {
    let fd = Fd {
        id: FdId(id),
        gfid: dir,
        flags: libc::O_RDONLY | libc::O_DIRECTORY,
    };
    top.opendir(&root(), fd).await?;
    let mut out = Vec::new();
    let mut offset = 0;
    let r = loop {
        match top.readdirp(&root(), fd, offset, 64 << 10).await {
            Ok(batch) if batch.is_empty() => break Ok(()),
            Ok(batch) => {
                for e in batch {
                    offset = e.next_offset;
                    if e.name.as_str() != "." && e.name.as_str() != ".." {
                        out.push(e.name.to_string());
                    }
                }
            }
            Err(e) => break Err(e),
        }
    };
    let _ = top.releasedir(&root(), fd).await;
    r.map(|()| {
        out.sort();
        out
    })
}

async fn mkdir(top: &Subvol, parent: Gfid, name: &str) -> Gfid {
    top.mkdir(&root(), Loc::new(parent, name), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid
}

/// The dbench + `rm -rf` failure on replica 2, as fops: an rmdir every child refuses with
/// ENOTEMPTY (dbench's cleanup, `rm -rf` itself) used to mark every child unreadable for the
/// parent's entries, so the next listing of the parent failed with ENOTCONN and `rm -rf` went
/// on to an rmdir of a directory it could not empty: ENOTEMPTY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmdir_every_child_refuses_leaves_the_parent_listable_and_removable() {
    let (c, top) = setup(2, &[]);
    let a = mkdir(&top, Gfid::ROOT, "a").await;
    let b = mkdir(&top, a, "b").await;
    top.create(&root(), Loc::new(b, "f"), fd(1, Gfid::NULL), 0o644, 0)
        .await
        .expect("create");
    top.release(&root(), fd(1, Gfid::NULL)).await.ok();
    // A listing learns what the copies of `a` are (as the kernel's lookups and readdirs do).
    assert_eq!(names(&top, a, 10).await, Ok(vec!["b".to_string()]));
    assert_eq!(
        top.rmdir(&root(), Loc::new(a, "b")).await.map(drop),
        Err(Errno::ENOTEMPTY)
    );
    assert_eq!(
        names(&top, a, 11).await,
        Ok(vec!["b".to_string()]),
        "listing after a refused rmdir: {:?}",
        c.log()
    );
    // The same for names: an unlink of a missing name (ENOENT everywhere) changes nothing.
    assert_eq!(
        top.unlink(&root(), Loc::new(b, "nope")).await.map(drop),
        Err(Errno::ENOENT)
    );
    assert_eq!(names(&top, b, 12).await, Ok(vec!["f".to_string()]));
    // `rm -rf a` now works: empty b, remove b, remove a.
    top.unlink(&root(), Loc::new(b, "f"))
        .await
        .expect("unlink f");
    top.rmdir(&root(), Loc::new(a, "b")).await.expect("rmdir b");
    top.rmdir(&root(), Loc::new(Gfid::ROOT, "a"))
        .await
        .expect("rmdir a");
    for g in [Gfid::ROOT] {
        assert!(all_zero(&c, g).await, "counters of {g} settled");
    }
}

/// A metadata or data change every child refuses (EPERM, EFBIG...) leaves the file readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_every_child_refuses_leaves_the_file_readable() {
    for eager in ["off", "on"] {
        let (c, top) = setup(2, &[("eager-lock", eager), ("post-op-delay", "60s")]);
        let f = create(&top, "f", 1).await;
        write(&top, f, 0, b"data").await.expect("write");
        top.stat(&root(), f.gfid).await.expect("stat");
        let chmod = SetAttr {
            perm: ROption::RSome(0o600),
            ..SetAttr::default()
        };
        let user = Ctx::new(1000, 1000);
        assert_eq!(
            top.setattr(&user, f.gfid, chmod).await.map(drop),
            Err(Errno::EPERM),
            "a non-owner's chmod"
        );
        // Past the largest size every child allows (1 PiB for the in-memory brick).
        assert_eq!(
            write(&top, f, 1 << 51, b"x").await,
            Err(Errno::EFBIG),
            "eager-lock {eager}"
        );
        let r = top.readv(&root(), f, 0, 10).await.map(|r| r.data.to_vec());
        assert_eq!(r, Ok(b"data".to_vec()), "eager-lock {eager}: {:?}", c.log());
        top.fsync(&root(), f, false).await.expect("fsync");
        assert!(all_zero(&c, f.gfid).await, "eager-lock {eager}: no blame");
    }
}

/// mkdir (and the other namespace fops) under a regular file: every child answers ENOTDIR
/// (their entry lock on the "parent" fails so), and that is the answer, not the quorum's
/// EROFS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_fops_under_a_regular_file_answer_enotdir() {
    for n in [2, 3] {
        let (c, top) = setup(n, &[]);
        let f = create(&top, "f", 1).await;
        let under = Loc::new(f.gfid, "x");
        assert_eq!(
            top.mkdir(&root(), under.clone(), 0o755, 0).await.map(drop),
            Err(Errno::ENOTDIR),
            "replica {n}: mkdir"
        );
        assert_eq!(
            top.create(&root(), under.clone(), fd(2, Gfid::NULL), 0o644, 0)
                .await
                .map(drop),
            Err(Errno::ENOTDIR),
            "replica {n}: create"
        );
        assert_eq!(
            top.symlink(&root(), under.clone(), "t".into())
                .await
                .map(drop),
            Err(Errno::ENOTDIR),
            "replica {n}: symlink"
        );
        assert_eq!(
            top.unlink(&root(), under.clone()).await.map(drop),
            Err(Errno::ENOTDIR),
            "replica {n}: unlink"
        );
        assert!(all_zero(&c, f.gfid).await);
        // A quorum really lost is still EROFS.
        c.down(1);
        if n == 3 {
            c.down(2);
        } else {
            c.down(0);
        }
        let r = top
            .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await;
        assert!(
            matches!(r, Err(Errno::EROFS | Errno::ENOTCONN)),
            "replica {n}: {r:?}"
        );
    }
}

/// A fop on an object that is gone from every child answers what they say (ESTALE/ENOENT),
/// not EROFS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_an_object_gone_everywhere_answers_the_childrens_error() {
    let (_c, top) = setup(2, &[]);
    let gone = Gfid::random();
    let chmod = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    let r = top.setattr(&root(), gone, chmod).await.map(drop);
    assert!(matches!(r, Err(Errno::ESTALE | Errno::ENOENT)), "{r:?}");
}

/// open(O_RDONLY|O_TRUNC) by a user who may read but not write: EACCES, as on one brick
/// (open(2) with O_TRUNC needs write permission), with nothing truncated and no fd left
/// open on the children. It was EINVAL: replicate opened without O_TRUNC, then truncated
/// through the read-only fd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_owners_read_only_open_with_o_trunc_is_eacces() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"keep").await.expect("write");
    let user = Ctx::new(1000, 1000);
    let ro_trunc = Fd {
        id: FdId(7),
        gfid: f.gfid,
        flags: libc::O_RDONLY | libc::O_TRUNC,
    };
    assert_eq!(
        top.open(&user, ro_trunc).await.map(drop),
        Err(Errno::EACCES),
        "{:?}",
        c.log()
    );
    for i in 0..2 {
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(&b"keep"[..])
        );
        // The refused open's fd is given back (the only release the children saw).
        assert_eq!(
            c.handle(i).count(Fop::Release),
            c.handle(i).count(Fop::Open),
            "child {i}: {:?}",
            c.log()
        );
    }
    // The same open without O_TRUNC is allowed (the file is 0644), and the owner's
    // O_RDONLY|O_TRUNC truncates everywhere.
    let ro = Fd {
        flags: libc::O_RDONLY,
        id: FdId(8),
        ..ro_trunc
    };
    top.open(&user, ro).await.expect("read-only open");
    top.release(&user, ro).await.expect("release");
    let own = Fd {
        id: FdId(9),
        ..ro_trunc
    };
    top.open(&root(), own).await.expect("owner's O_TRUNC");
    for i in 0..2 {
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(&b""[..])
        );
    }
    assert!(all_zero(&c, f.gfid).await);
}

/// Without a quorum of children up, a lookup and a listing are refused (ENOTCONN) as reads
/// are: the ones up may have missed a name made, removed or replaced on the others, and a
/// mount would cache what they say. With `quorum-type none` they answer from the children up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_without_quorum_is_refused_as_reads_are() {
    for quorum in ["auto", "none"] {
        let (c, top) = setup(3, &[("quorum-type", quorum)]);
        let e = top
            .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .expect("mkdir");
        c.down(1);
        let found = top.lookup(&root(), Loc::new(Gfid::ROOT, "d")).await;
        assert_eq!(
            found.map(|f| f.attr.gfid),
            Ok(e.attr.gfid),
            "{quorum}: two of three up"
        );
        c.down(2);
        let found = top.lookup(&root(), Loc::new(Gfid::ROOT, "d")).await;
        let stat = top.stat(&root(), e.attr.gfid).await;
        let listed = names(&top, Gfid::ROOT, 7).await;
        if quorum == "auto" {
            assert_eq!(found.map(drop), Err(Errno::ENOTCONN), "lookup");
            assert_eq!(stat.map(drop), Err(Errno::ENOTCONN), "stat");
            assert_eq!(listed, Err(Errno::ENOTCONN), "listing");
        } else {
            assert_eq!(found.map(|f| f.attr.gfid), Ok(e.attr.gfid), "none: lookup");
            assert!(stat.is_ok(), "none: stat");
            assert_eq!(listed, Ok(vec!["d".to_string()]), "none: listing");
        }
        c.up(1);
        let found = top.lookup(&root(), Loc::new(Gfid::ROOT, "d")).await;
        assert_eq!(
            found.map(|f| f.attr.gfid),
            Ok(e.attr.gfid),
            "{quorum}: quorum back"
        );
    }
}
