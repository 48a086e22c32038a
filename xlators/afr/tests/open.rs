//! Read-only opens: the fd is opened on the file's read child alone, and on another child only
//! when something needs it there (a failover read, a lock).

mod common;

use common::*;
use xlator_api::{Errno, Fd, FdId, Flock, Fop, Gfid, LkCmd, LkOwner, Loc, LockKind, Subvol};
use xlfs_testkit::MockCluster;

/// A replica 2 volume with "f" = "hello" on both children, looked up (its copies known) and
/// no call of either child recorded yet. Returns f's GFID.
async fn written() -> (MockCluster, Subvol, Gfid) {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"hello").await.expect("write");
    top.release(&root(), f).await.expect("release");
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    for i in 0..2 {
        c.handle(i).take_calls();
    }
    (c, top, f.gfid)
}

fn read_only(id: u64, gfid: Gfid) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags: libc::O_RDONLY,
    }
}

/// Which child got an `Open`: exactly one must have.
fn the_opener(c: &MockCluster) -> usize {
    let opened: Vec<usize> = (0..2)
        .filter(|&i| c.handle(i).count(Fop::Open) == 1)
        .collect();
    assert_eq!(opened.len(), 1, "opened on children {opened:?}");
    opened[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_open_goes_to_the_read_child_and_elsewhere_on_failover() {
    let (c, top, g) = written().await;
    let fd = read_only(2, g);
    top.open(&root(), fd).await.expect("open");
    let r = the_opener(&c);
    let o = 1 - r;
    let data = top.readv(&root(), fd, 0, 10).await.expect("read");
    assert_eq!(data.data.as_slice(), b"hello");
    assert_eq!(c.handle(r).count(Fop::Readv), 1);
    c.handle(o).assert_no_calls();

    // The read child loses the fd: the read fails over, opening the fd on the other child.
    c.handle(r).fail(Fop::Readv, Errno::ENOTCONN);
    let data = top.readv(&root(), fd, 0, 10).await.expect("read");
    assert_eq!(data.data.as_slice(), b"hello");
    c.handle(o).assert_calls(&[Fop::Open, Fop::Readv]);

    // Both hold it now: the close reaches both.
    top.flush(&root(), fd).await.expect("flush");
    top.release(&root(), fd).await.expect("release");
    for i in 0..2 {
        assert_eq!(c.handle(i).count(Fop::Flush), 1, "child {i}");
        assert_eq!(c.handle(i).count(Fop::Release), 1, "child {i}");
    }
}

/// A lock through a read-only fd is replicated like any other: the child that did not open
/// the fd opens it first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_through_a_read_only_fd_reach_every_child() {
    let (c, top, g) = written().await;
    let fd = read_only(3, g);
    top.open(&root(), fd).await.expect("open");
    let r = the_opener(&c);
    let lock = Flock {
        kind: LockKind::Read,
        start: 0,
        len: 0,
        pid: 7,
        owner: LkOwner(0x77),
    };
    top.lk(&root(), fd, LkCmd::Set, lock).await.expect("lk");
    assert_eq!(c.handle(r).count(Fop::Lk), 1);
    c.handle(1 - r).assert_calls(&[Fop::Open, Fop::Lk]);
    top.flush(&root(), fd).await.expect("flush");
    for i in 0..2 {
        assert_eq!(c.handle(i).count(Fop::Flush), 1, "child {i}");
    }
}

/// Read-write opens, and read-only ones with O_TRUNC, still open on every child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opens_that_may_write_go_to_every_child() {
    let (c, top, g) = written().await;
    for (id, flags) in [(4, libc::O_RDWR), (5, libc::O_WRONLY)] {
        let fd = Fd {
            id: FdId(id),
            gfid: g,
            flags,
        };
        top.open(&root(), fd).await.expect("open");
        top.release(&root(), fd).await.expect("release");
    }
    for i in 0..2 {
        assert_eq!(c.handle(i).count(Fop::Open), 2, "child {i}");
    }
}
