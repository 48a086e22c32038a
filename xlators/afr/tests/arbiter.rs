//! Replica 3 arbiter 1 (`arbiter-count 1`) over MockCluster, the third child features/arbiter
//! over an in-memory leaf: reads never reach the arbiter, a write that would leave it the only
//! good copy of the data is refused, a write it alone took accuses nobody, and a data heal
//! of the arbiter sets its size only.

mod common;

use common::*;
use xlator_api::{Errno, Fop, Gfid, Loc, Subvol};
use xlfs_arbiter::Arbiter;
use xlfs_testkit::{MemLeaf, MockCluster};

/// The cluster, replicate over it, and the arbiter's own leaf (below features/arbiter).
fn arbitered(set: &[(&str, &str)]) -> (MockCluster, Subvol, Subvol) {
    let inner = MemLeaf::new();
    let arbiter = xlfs_testkit::build::build::<Arbiter>(&[], vec![inner.clone()]);
    let cluster = MockCluster::with_leaves(vec![MemLeaf::new(), MemLeaf::new(), arbiter]);
    let mut opts = vec![
        ("background-self-heal-count", "0"),
        ("eager-lock", "off"),
        ("arbiter-count", "1"),
    ];
    opts.extend_from_slice(set);
    let top = cluster.build::<xlfs_afr::Replicate>(&opts);
    (cluster, top, inner)
}

async fn read(top: &Subvol, f: xlator_api::Fd, len: u32) -> Result<Vec<u8>, Errno> {
    top.readv(&root(), f, 0, len)
        .await
        .map(|r| r.data.as_slice().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_never_reach_the_arbiter_and_it_stores_no_data() {
    let (c, top, inner) = arbitered(&[]);
    let mut files = Vec::new();
    for k in 0..24u64 {
        let f = create(&top, &format!("f{k}"), 10 + k).await;
        let data = format!("file {k} ").repeat(100).into_bytes();
        write(&top, f, 0, &data).await.expect("write");
        files.push((f, data));
    }
    c.handle(2).take_calls();
    for (k, (f, data)) in files.iter().enumerate() {
        assert_eq!(&read(&top, *f, 1 << 16).await.expect("read"), data);
        let st = top.fstat(&root(), *f).await.expect("fstat");
        assert_eq!(st.size, data.len() as u64);
        let e = top
            .lookup(&root(), Loc::new(Gfid::ROOT, format!("f{k}").as_str()))
            .await
            .expect("lookup");
        assert_eq!(e.attr.size, data.len() as u64);
        // The arbiter has the file at its size, with nothing in it.
        let held = leaf_content(&inner, f.gfid).await.expect("on the arbiter");
        assert_eq!(held.len(), data.len());
        assert!(held.iter().all(|b| *b == 0), "data stored on the arbiter");
    }
    let to_arbiter = c.handle(2).fops();
    assert!(
        !to_arbiter
            .iter()
            .any(|f| matches!(f, Fop::Readv | Fop::Fstat | Fop::Seek | Fop::Rchecksum)),
        "read from the arbiter: {to_arbiter:?}"
    );
    for (f, _) in &files {
        assert!(all_zero(&c, f.gfid).await);
    }
    // Listings come from the data children (the arbiter's entries carry no blocks), with
    // each file's size.
    c.handle(2).take_calls();
    for k in 0..8u64 {
        let d = top
            .mkdir(
                &root(),
                Loc::new(Gfid::ROOT, format!("d{k}").as_str()),
                0o755,
                0,
            )
            .await
            .expect("mkdir");
        let g = d.attr.gfid;
        let f = top
            .create(&root(), Loc::new(g, "x"), fd(100 + k, Gfid::NULL), 0o644, 0)
            .await
            .expect("create");
        write(&top, fd(100 + k, f.attr.gfid), 0, b"12345")
            .await
            .expect("write");
        let dfd = xlator_api::Fd {
            id: xlator_api::FdId(200 + k),
            gfid: g,
            flags: libc::O_RDONLY | libc::O_DIRECTORY,
        };
        top.opendir(&root(), dfd).await.expect("opendir");
        let list = top.readdirp(&root(), dfd, 0, 4096).await.expect("readdirp");
        let x = list
            .iter()
            .find(|e| e.name.as_str() == "x")
            .expect("listed");
        assert_eq!(x.attr.size, 5);
        top.releasedir(&root(), dfd).await.expect("releasedir");
    }
    let listed_there = c.handle(2).count(Fop::Readdirp);
    assert_eq!(listed_there, 0, "directories listed from the arbiter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_would_leave_the_arbiter_the_only_good_copy_fails() {
    let (c, top, _) = arbitered(&[]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"one").await.expect("write");
    // B misses a write: A and the arbiter accuse it.
    c.down(1);
    write(&top, f, 0, b"two")
        .await
        .expect("write on A and the arbiter");
    // A goes, B returns: quorum (B and the arbiter) but no good data copy among them.
    c.up(1);
    c.down(0);
    assert_eq!(write(&top, f, 0, b"XXX").await, Err(Errno::ENOTCONN));
    assert!(read(&top, f, 3).await.is_err(), "read from a stale copy");
    // B still holds the old data; nothing was written over it.
    assert_eq!(leaf_content(c.leaf(1), f.gfid).await.expect("on B"), b"one");
    // A returns: the good copy is read, and B is healed from it.
    c.up(0);
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    assert_eq!(read(&top, f, 3).await.expect("read"), b"two");
    assert_eq!(leaf_content(c.leaf(1), f.gfid).await.expect("on B"), b"two");
    assert!(all_zero(&c, f.gfid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_arbiter_alone_took_changes_nothing_and_accuses_nobody() {
    for eager in ["off", "on"] {
        let (c, top, _) = arbitered(&[("eager-lock", eager)]);
        let f = create(&top, "f", 1).await;
        write(&top, f, 0, b"kept").await.expect("write");
        c.handle(0).fail(Fop::Writev, Errno::ENOSPC);
        c.handle(1).fail(Fop::Writev, Errno::ENOSPC);
        assert_eq!(
            write(&top, f, 0, b"lost").await,
            Err(Errno::ENOSPC),
            "eager-lock {eager}"
        );
        top.fsync(&root(), f, false).await.expect("fsync");
        assert!(all_zero(&c, f.gfid).await, "eager-lock {eager}: accused");
        assert_eq!(read(&top, f, 4).await.expect("read"), b"kept");
        // The next write goes everywhere again.
        write(&top, f, 0, b"next").await.expect("write");
        top.fsync(&root(), f, false).await.expect("fsync");
        assert_eq!(read(&top, f, 4).await.expect("read"), b"next");
        assert!(all_zero(&c, f.gfid).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arbiters_data_heal_sets_its_size_only() {
    let (c, top, inner) = arbitered(&[("heal-chunk-size", "4KiB")]);
    let f = create(&top, "f", 1).await;
    c.down(2);
    let data = vec![7u8; 64 << 10];
    write(&top, f, 0, &data).await.expect("write");
    c.up(2);
    c.handle(2).take_calls();
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup heals");
    assert!(all_zero(&c, f.gfid).await);
    let held = leaf_content(&inner, f.gfid).await.expect("on the arbiter");
    assert_eq!(held.len(), data.len());
    let fops = c.handle(2).fops();
    assert!(
        !fops
            .iter()
            .any(|f| matches!(f, Fop::Writev | Fop::Readv | Fop::Rchecksum)),
        "the heal copied data to the arbiter: {fops:?}"
    );
    assert_eq!(read(&top, f, 1 << 17).await.expect("read"), data);
}
