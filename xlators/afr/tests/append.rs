//! O_APPEND writes through replicate: one offset for every replica, resolved under the lock.

mod common;

use std::time::Duration;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Errno, Fd, FdId, Fop, Gfid, Loc, SetAttr, Subvol};

async fn append(top: &Subvol, fd: Fd, data: &[u8]) -> Result<u64, Errno> {
    // The offset is the kernel's guess; an append ignores it.
    top.writev(&root(), fd, 0, Buf::from_vec(data.to_vec()), libc::O_APPEND)
        .await
        .map(|w| w.written)
}

/// Every record `<...>` in `content`, in order.
fn records(content: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(content)
        .split_inclusive('>')
        .map(str::to_owned)
        .collect()
}

/// Two clients, each with several appends in flight at once, and the second replica of the
/// first client answering writes in another order than they were sent (a slower link for
/// the first, a fast one for the next): every replica must hold the same records in the same
/// order, each once. Sent to the bricks as O_APPEND, the first client's appends landed in one
/// order on child 0 and in another on child 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_of_two_clients_leave_every_replica_identical() {
    for eager in ["on", "off"] {
        let set = [("eager-lock", eager), ("post-op-delay", "20ms")];
        let (c, top_a) = setup(2, &set);
        let (c2, top_b) = second_client(&c, &set);
        let fa = create(&top_a, "log", 1).await;
        let fb = Fd {
            id: FdId(2),
            gfid: fa.gfid,
            flags: libc::O_WRONLY,
        };
        top_b.open(&root(), fb).await.expect("open on b");
        let mut expected = 0;
        for round in 0..3u64 {
            let mut tasks = Vec::new();
            for k in 0..3u64 {
                // Later appends of client a reach its child 1 sooner than earlier ones.
                c.handle(1)
                    .delay(Fop::Writev, Duration::from_millis(5 + (3 - k) * 15));
                for (name, top, fd) in [("a", &top_a, fa), ("b", &top_b, fb)] {
                    let top = top.clone();
                    let rec = format!("<{name}{round}{k}>");
                    expected += 1;
                    tasks.push(tokio::spawn(async move {
                        (append(&top, fd, rec.as_bytes()).await, rec.len() as u64)
                    }));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            for t in tasks {
                let (r, len) = t.await.expect("join");
                assert_eq!(r, Ok(len), "eager-lock {eager}");
            }
        }
        c.handle(1).delay(Fop::Writev, Duration::ZERO);
        top_a.fsync(&root(), fa, false).await.expect("fsync a");
        top_b.fsync(&root(), fb, false).await.expect("fsync b");
        let c0 = leaf_content(c.leaf(0), fa.gfid).await.expect("child 0");
        let c1 = leaf_content(c.leaf(1), fa.gfid).await.expect("child 1");
        assert_eq!(
            String::from_utf8_lossy(&c0),
            String::from_utf8_lossy(&c1),
            "eager-lock {eager}: the replicas differ"
        );
        let mut got = records(&c0);
        assert_eq!(got.len(), expected, "eager-lock {eager}: {got:?}");
        got.sort();
        got.dedup();
        assert_eq!(got.len(), expected, "eager-lock {eager}: a record twice");
        assert!(all_zero(&c, fa.gfid).await, "eager-lock {eager}: counters");
        // Nothing reached a brick as O_APPEND.
        for cl in [&c, &c2] {
            for i in 0..2 {
                for call in cl.handle(i).calls_of(Fop::Writev) {
                    assert!(
                        !call.summary().contains("flags=1024"),
                        "an O_APPEND write reached a child: {}",
                        call.summary()
                    );
                }
            }
        }
    }
}

/// A replica that is shorter than the good copy (it missed a write while down and is not
/// healed yet) gets the append at the good copy's end of file, not at its own: the same
/// offset everywhere, so after the heal nothing of either write is lost or moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_goes_where_the_good_copy_ends_on_every_replica() {
    let set = [("self-heal", "off")];
    let (c, top) = setup(2, &set);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"0123").await.expect("write");
    c.down(1);
    write(&top, f, 4, b"4567")
        .await
        .expect("write while 1 is down");
    c.up(1);
    // Another client, knowing nothing of the files yet, appends.
    let (_c2, top2) = second_client(&c, &[("self-heal", "off"), ("eager-lock", "off")]);
    let f2 = Fd {
        id: FdId(5),
        gfid: f.gfid,
        flags: libc::O_RDWR | libc::O_APPEND,
    };
    top2.open(&root(), f2).await.expect("open");
    // No per-write flag: the fd's O_APPEND (as hosts other than FUSE send it) is enough.
    let r = top2
        .writev(&root(), f2, 0, Buf::from_vec(b"AB".to_vec()), 0)
        .await
        .map(|w| w.written);
    assert_eq!(r, Ok(2));
    assert_eq!(
        leaf_content(c.leaf(0), f.gfid).await.as_deref(),
        Some(&b"01234567AB"[..])
    );
    let stale = leaf_content(c.leaf(1), f.gfid).await.expect("child 1");
    assert_eq!(
        stale.get(8..),
        Some(&b"AB"[..]),
        "child 1 got the append at offset {:?}",
        String::from_utf8_lossy(&stale)
    );
    // A reader sees the good copy; a heal makes child 1 equal.
    let r = top2.readv(&root(), f2, 0, 100).await.expect("read");
    assert_eq!(r.data.as_slice(), b"01234567AB");
    top2.getxattr(&root(), f.gfid, xlfs_afr::HEAL_XATTR.into())
        .await
        .expect("heal");
    assert_eq!(
        leaf_content(c.leaf(1), f.gfid).await.as_deref(),
        Some(&b"01234567AB"[..])
    );
    assert!(all_zero(&c, f.gfid).await);
}

/// Appends after a truncate, and on a file another client just grew: each goes to the end of
/// file as it is under the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_sees_the_other_clients_changes() {
    let set = [("eager-lock", "on"), ("post-op-delay", "60s")];
    let (c, top_a) = setup(2, &set);
    let (_c2, top_b) = second_client(&c, &set);
    let fa = create(&top_a, "f", 1).await;
    let fb = Fd {
        id: FdId(2),
        gfid: fa.gfid,
        flags: libc::O_RDWR,
    };
    top_b.open(&root(), fb).await.expect("open");
    assert_eq!(append(&top_a, fa, b"aaa").await, Ok(3));
    // b waits for a's eager hold (ended by a's fsync) and appends after it.
    let pending = tokio::spawn({
        let top_b = top_b.clone();
        async move { append(&top_b, fb, b"bb").await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    top_a.fsync(&root(), fa, false).await.expect("fsync");
    assert_eq!(pending.await.expect("join"), Ok(2));
    top_b.fsync(&root(), fb, false).await.expect("fsync");
    let cut = SetAttr {
        size: ROption::RSome(1),
        ..SetAttr::default()
    };
    top_b
        .setattr(&root(), fa.gfid, cut)
        .await
        .expect("truncate");
    assert_eq!(append(&top_a, fa, b"c").await, Ok(1));
    top_a.fsync(&root(), fa, false).await.expect("fsync");
    for i in 0..2 {
        assert_eq!(
            leaf_content(c.leaf(i), fa.gfid).await.as_deref(),
            Some(&b"ac"[..]),
            "child {i}"
        );
    }
    let _ = top_a
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    assert!(all_zero(&c, fa.gfid).await);
}
