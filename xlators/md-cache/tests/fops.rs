//! performance/md-cache over a recording spy over an in-memory leaf: which fops it answers
//! itself, and that changes through it and upcalls (another client's changes) are never
//! answered from what it cached before.

use std::time::Duration;

use xlator_api::{Ctx, Errno, Fd, Fop, Gfid, Loc, SetAttr, Subvol, Upcall};
use xlfs_md_cache::MdCache;
use xlfs_testkit::build::build;
use xlfs_testkit::fixtures::{counter, fd};
use xlfs_testkit::memfs::MemLeaf;
use xlfs_testkit::mock::{MockChild, MockHandle};

fn cx() -> Ctx {
    Ctx::root()
}

fn stack(set: &[(&str, &str)]) -> (Subvol, MockHandle, Subvol) {
    let leaf = MemLeaf::new();
    let (spy, h) = MockChild::spy(leaf.clone());
    (build::<MdCache>(set, vec![spy]), h, leaf)
}

async fn make_file(sv: &Subvol, name: &str) -> (Gfid, Fd) {
    let f = fd(1, Gfid::random(), libc::O_RDWR);
    let e = sv
        .create(&cx(), Loc::new(Gfid::ROOT, name), f, 0o644, 0)
        .await
        .expect("create");
    (
        e.attr.gfid,
        Fd {
            gfid: e.attr.gfid,
            ..f
        },
    )
}

fn chmod(mode: u32) -> SetAttr {
    SetAttr {
        perm: Some(mode).into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_stats_are_answered_here_until_something_changes() {
    let (sv, h, _) = stack(&[]);
    let (g, f) = make_file(&sv, "f").await;
    sv.lookup(&cx(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    h.take_calls();
    for _ in 0..5 {
        assert_eq!(sv.stat(&cx(), g).await.expect("stat").perm, 0o644);
        sv.fstat(&cx(), f).await.expect("fstat");
    }
    h.assert_calls(&[]);
    assert_eq!(counter(&sv, "attr_hits"), 10);
    // A change through md-cache is seen at once.
    sv.setattr(&cx(), g, chmod(0o600)).await.expect("chmod");
    assert_eq!(sv.stat(&cx(), g).await.expect("stat").perm, 0o600);
    h.assert_calls(&[Fop::Setattr, Fop::Stat]);
    h.take_calls();
    let w = sv
        .writev(&cx(), f, 0, xlator_api::Buf::from_vec(vec![1; 10]), 0)
        .await;
    w.expect("write");
    assert_eq!(sv.fstat(&cx(), f).await.expect("fstat").size, 10);
    h.assert_calls(&[Fop::Writev, Fop::Fstat]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upcall_drops_the_inode_another_client_changed() {
    let (sv, h, leaf) = stack(&[("md-cache-timeout", "60s")]);
    let (g, _) = make_file(&sv, "f").await;
    sv.stat(&cx(), g).await.expect("stat");
    // "Another client" changes the file below md-cache, and the brick says so.
    leaf.setattr(&cx(), g, chmod(0o640))
        .await
        .expect("chmod below");
    assert_eq!(sv.stat(&cx(), g).await.expect("stat").perm, 0o644, "cached");
    h.take_calls();
    sv.upcall(0, &Upcall::inode(g, Upcall::ATTR));
    assert_eq!(sv.stat(&cx(), g).await.expect("stat").perm, 0o640);
    h.assert_calls(&[Fop::Stat]);
    assert_eq!(counter(&sv, "upcalls"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_names_are_answered_here_until_made_here_or_elsewhere() {
    let (sv, h, leaf) = stack(&[("negative-timeout", "60s")]);
    let at = |n: &str| Loc::new(Gfid::ROOT, n);
    for _ in 0..3 {
        assert_eq!(sv.lookup(&cx(), at("x")).await.err(), Some(Errno::ENOENT));
    }
    h.assert_calls(&[Fop::Lookup]);
    // Made through md-cache: found at once.
    make_file(&sv, "x").await;
    sv.lookup(&cx(), at("x")).await.expect("found after create");
    // Made by another client: found once the upcall arrives.
    assert!(sv.lookup(&cx(), at("y")).await.is_err());
    let f = fd(2, Gfid::random(), libc::O_RDWR);
    leaf.create(&cx(), at("y"), f, 0o644, 0)
        .await
        .expect("create below");
    assert_eq!(sv.lookup(&cx(), at("y")).await.err(), Some(Errno::ENOENT));
    sv.upcall(0, &Upcall::entry(Gfid::ROOT, "y"));
    sv.lookup(&cx(), at("y"))
        .await
        .expect("found after the upcall");
    // And the timeout bounds it when no upcall comes.
    let (sv, _, leaf) = stack(&[("negative-timeout", "200ms")]);
    assert!(sv.lookup(&cx(), at("z")).await.is_err());
    leaf.create(&cx(), at("z"), fd(3, Gfid::random(), 0), 0o644, 0)
        .await
        .expect("create below");
    tokio::time::sleep(Duration::from_millis(250)).await;
    sv.lookup(&cx(), at("z"))
        .await
        .expect("found after the timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlink_or_rename_drops_the_inode_of_the_name() {
    let (sv, _, _) = stack(&[("md-cache-timeout", "60s")]);
    let (g, _) = make_file(&sv, "f").await;
    sv.lookup(&cx(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    let (g2, _) = make_file(&sv, "g").await;
    sv.lookup(&cx(), Loc::new(Gfid::ROOT, "g"))
        .await
        .expect("lookup");
    assert_eq!(sv.stat(&cx(), g2).await.expect("stat").nlink, 1);
    sv.link(&cx(), g2, Loc::new(Gfid::ROOT, "g2"))
        .await
        .expect("link");
    assert_eq!(sv.stat(&cx(), g2).await.expect("stat").nlink, 2);
    sv.rename(
        &cx(),
        Loc::new(Gfid::ROOT, "f"),
        Loc::new(Gfid::ROOT, "g"),
        0,
    )
    .await
    .expect("rename over");
    assert_eq!(
        sv.stat(&cx(), g2).await.expect("stat").nlink,
        1,
        "one name left"
    );
    sv.unlink(&cx(), Loc::new(Gfid::ROOT, "g"))
        .await
        .expect("unlink");
    // Its last name is gone: not answered from the cache as if it were still there.
    match sv.stat(&cx(), g).await {
        Ok(a) => assert_eq!(a.nlink, 0),
        Err(e) => assert!(matches!(e, Errno::ENOENT | Errno::ESTALE), "{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_asks_the_child_again_close_to_open() {
    let (sv, h, leaf) = stack(&[("md-cache-timeout", "60s")]);
    let (g, f) = make_file(&sv, "f").await;
    sv.fstat(&cx(), f).await.expect("fstat");
    leaf.setattr(
        &cx(),
        g,
        SetAttr {
            size: Some(99).into(),
            ..Default::default()
        },
    )
    .await
    .expect("grow below");
    h.take_calls();
    let f2 = fd(7, g, libc::O_RDONLY);
    sv.open(&cx(), f2).await.expect("open");
    assert_eq!(sv.fstat(&cx(), f2).await.expect("fstat").size, 99);
    h.assert_calls(&[Fop::Open, Fop::Fstat]);
}
