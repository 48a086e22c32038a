//! Write transactions against MockCluster: every step, its failures, quorum, eager locking.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Errno, Event, EventKind, Fop, Gfid, Loc, SetAttr};
use xlfs_afr::changelog::Counters;

const D1: Counters = Counters([1, 0, 0]);
/// Dirty in the data and the metadata lane (an eager hold's pre-op).
const DM1: Counters = Counters([1, 1, 0]);
const ZERO: Counters = Counters([0, 0, 0]);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_locks_marks_writes_clears_and_unlocks_on_every_child() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    c.handle(0).take_calls();
    c.handle(1).take_calls();
    assert_eq!(write(&top, f, 0, b"hello").await, Ok(5));
    for i in 0..2 {
        c.handle(i).assert_calls(&[
            Fop::Inodelk,
            Fop::Xattrop,
            Fop::Writev,
            Fop::Xattrop,
            Fop::Inodelk,
        ]);
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(&b"hello"[..])
        );
    }
    assert!(all_zero(&c, f.gfid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_mkdir_give_one_gfid_on_every_child() {
    let (c, top) = setup(3, &[]);
    let f = create(&top, "f", 1).await;
    let d = top
        .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    for i in 0..3 {
        let lf = c
            .leaf(i)
            .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
            .await
            .expect("on leaf");
        let ld = c
            .leaf(i)
            .lookup(&root(), Loc::new(Gfid::ROOT, "d"))
            .await
            .expect("on leaf");
        assert_eq!((lf.attr.gfid, ld.attr.gfid), (f.gfid, d.attr.gfid));
    }
    // The create's fd is valid on every child: a write reaches all three.
    assert_eq!(write(&top, f, 0, b"x").await, Ok(1));
    for i in 0..3 {
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(&b"x"[..])
        );
    }
    assert!(all_zero(&c, Gfid::ROOT).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_down_before_the_write_is_blamed_and_reads_avoid_it() {
    let (c, top) = setup(3, &[("read-policy", "first-up")]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"old").await.expect("write");
    c.down(0);
    assert_eq!(write(&top, f, 0, b"new").await, Ok(3));
    for i in [1, 2] {
        assert_eq!(
            counters(&c, i, f.gfid, 0).await,
            D1,
            "child {i} blames child 0"
        );
        assert_eq!(counters(&c, i, f.gfid, i).await, ZERO);
    }
    assert_eq!(
        leaf_content(c.leaf(0), f.gfid).await.as_deref(),
        Some(&b"old"[..])
    );
    c.up(0);
    c.handle(0).take_calls();
    // first-up would pick child 0; it is blamed, so the read goes elsewhere.
    let r = top.readv(&root(), f, 0, 10).await.expect("read");
    assert_eq!(r.data.as_slice(), b"new");
    assert_eq!(c.handle(0).count(Fop::Readv), 0, "{:?}", c.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_failing_the_op_stays_blamed_by_the_others() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    c.handle(1).fail(Fop::Writev, Errno::EIO);
    assert_eq!(
        write(&top, f, 0, b"abc").await,
        Ok(3),
        "quorum none for replica 2"
    );
    assert_eq!(counters(&c, 0, f.gfid, 1).await, D1);
    assert_eq!(counters(&c, 0, f.gfid, 0).await, ZERO);
    // The failed child's post-op took its dirty count back; the others accuse it.
    assert_eq!(counters(&c, 1, f.gfid, 0).await, ZERO);
    assert_eq!(counters(&c, 1, f.gfid, 1).await, ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_failing_the_pre_op_gets_no_write_and_is_blamed() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    c.handle(1).take_calls();
    c.handle(1).fail(Fop::Xattrop, Errno::EIO);
    assert_eq!(write(&top, f, 0, b"abc").await, Ok(3));
    assert_eq!(c.handle(1).count(Fop::Writev), 0, "{:?}", c.log());
    assert_eq!(counters(&c, 0, f.gfid, 1).await, D1);
    assert_eq!(counters(&c, 0, f.gfid, 0).await, ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_going_down_during_the_write_fails_its_post_op_and_stays_blamed() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    c.handle(1).hold(Fop::Writev);
    let pending = tokio::spawn({
        let top = top.clone();
        async move { write(&top, f, 0, b"abc").await }
    });
    c.handle(1).wait_for(Fop::Writev, 1).await;
    c.down(1);
    c.handle(1).open_gate(Fop::Writev);
    assert_eq!(pending.await.expect("join"), Ok(3));
    assert_eq!(counters(&c, 0, f.gfid, 1).await, D1);
    assert_eq!(counters(&c, 0, f.gfid, 0).await, ZERO);
    // Child 1 kept its pre-op (its post-op never arrived): it is dirty, and accuses nobody.
    assert_eq!(counters(&c, 1, f.gfid, 0).await, ZERO);
    assert_eq!(counters(&c, 1, f.gfid, 1).await, D1);
    c.up(1);
    let r = top.readv(&root(), f, 0, 10).await.expect("read");
    assert_eq!(r.data.as_slice(), b"abc");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_3_writes_need_two_children() {
    let (c, top) = setup(3, &[]);
    let f = create(&top, "f", 1).await;
    c.down(2);
    assert_eq!(write(&top, f, 0, b"a").await, Ok(1));
    c.down(1);
    c.handle(0).take_calls();
    assert_eq!(write(&top, f, 0, b"b").await, Err(Errno::EROFS));
    assert_eq!(
        top.mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .map(drop),
        Err(Errno::EROFS)
    );
    c.handle(0).assert_no_calls();
    assert_eq!(
        leaf_content(c.leaf(0), f.gfid).await.as_deref(),
        Some(&b"a"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_2_auto_quorum_is_the_half_with_the_first_child() {
    let (c, top) = setup(2, &[("quorum-type", "auto")]);
    let f = create(&top, "f", 1).await;
    c.down(1);
    assert_eq!(write(&top, f, 0, b"a").await, Ok(1));
    c.up(1);
    c.down(0);
    assert_eq!(write(&top, f, 0, b"b").await, Err(Errno::EROFS));
    let (c2, top2) = setup(2, &[("quorum-type", "fixed"), ("quorum-count", "2")]);
    let g = create(&top2, "g", 1).await;
    c2.down(1);
    assert_eq!(write(&top2, g, 0, b"a").await, Err(Errno::EROFS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_lock_keeps_lock_and_pre_op_across_writes_and_the_flush_until_fsync() {
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    let f = create(&top, "f", 1).await;
    c.handle(0).take_calls();
    for k in 0..3u64 {
        assert_eq!(write(&top, f, k, b"z").await, Ok(1));
    }
    // The hold takes the data and the metadata domain, and pre-ops both lanes at once.
    c.handle(0).assert_calls(&[
        Fop::Inodelk,
        Fop::Inodelk,
        Fop::Xattrop,
        Fop::Writev,
        Fop::Writev,
        Fop::Writev,
    ]);
    // While held, each child is dirty (the pre-op) and accuses nobody.
    assert_eq!(counters(&c, 0, f.gfid, 0).await, DM1);
    assert_eq!(counters(&c, 0, f.gfid, 1).await, ZERO);
    // A flush waits for no post-op: the hold outlives it.
    top.flush(&root(), f).await.expect("flush");
    c.handle(0).assert_calls(&[
        Fop::Inodelk,
        Fop::Inodelk,
        Fop::Xattrop,
        Fop::Writev,
        Fop::Writev,
        Fop::Writev,
        Fop::Flush,
    ]);
    assert_eq!(counters(&c, 0, f.gfid, 0).await, DM1);
    // An fsync ends it first.
    top.fsync(&root(), f, false).await.expect("fsync");
    c.handle(0).assert_calls(&[
        Fop::Inodelk,
        Fop::Inodelk,
        Fop::Xattrop,
        Fop::Writev,
        Fop::Writev,
        Fop::Writev,
        Fop::Flush,
        Fop::Xattrop,
        Fop::Inodelk,
        Fop::Inodelk,
        Fop::Fsync,
    ]);
    assert!(all_zero(&c, f.gfid).await);
}

/// `tar x` changes each file's times, owner and mode through paths while the file is still
/// open (futimens, fchown, fchmod arrive without an fd): they go through the open file's
/// hold, one round trip each, and the hold ends at the flush with every counter zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_changes_of_an_open_file_go_through_its_eager_hold() {
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    let f = create(&top, "f", 1).await;
    c.handle(0).take_calls();
    assert_eq!(write(&top, f, 0, b"z").await, Ok(1));
    let chmod = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    let chown = SetAttr {
        uid: ROption::RSome(7),
        ..SetAttr::default()
    };
    top.setattr(&root(), f.gfid, chmod).await.expect("chmod");
    top.setattr(&root(), f.gfid, chown).await.expect("chown");
    c.handle(0).assert_calls(&[
        Fop::Inodelk,
        Fop::Inodelk,
        Fop::Xattrop,
        Fop::Writev,
        Fop::Setattr,
        Fop::Setattr,
    ]);
    // Both copies changed; nobody accuses anybody while the hold lasts.
    for i in 0..2 {
        let a = c.leaf(i).stat(&root(), f.gfid).await.expect("stat");
        assert_eq!((a.mode() & 0o7777, a.uid), (0o600, 7));
    }
    // The hold outlives the close: `tar x` sets the times by path after closing the file,
    // and that goes through it too, one round trip.
    top.flush(&root(), f).await.expect("flush");
    top.release(&root(), f).await.expect("release");
    assert_eq!(counters(&c, 0, f.gfid, 0).await, DM1);
    c.handle(0).take_calls();
    top.setattr(&root(), f.gfid, chmod).await.expect("chmod");
    c.handle(0).assert_calls(&[Fop::Setattr]);
    // The host going away (GraphSwitch) ends it: post-op and unlock of both domains.
    top.notify(Event {
        kind: EventKind::GraphSwitch,
        child: 0,
    });
    // (The root's hold, from the create, ends too: its unlock is an entrylk.)
    c.handle(0).wait_for(Fop::Inodelk, 2).await;
    c.handle(0).wait_for(Fop::Entrylk, 1).await;
    c.handle(1).wait_for(Fop::Inodelk, 4).await;
    c.handle(1).wait_for(Fop::Entrylk, 2).await;
    // ... and the statedump says nothing is owed any more (as hosts wait for at exit).
    while top.dump().get(xlator_api::PENDING_AT_EXIT) != Some(&xlator_api::DumpValue::U64(0)) {
        tokio::task::yield_now().await;
    }
    assert!(all_zero(&c, f.gfid).await);
    // A file nobody here has open or holds: a plain metadata transaction.
    c.handle(0).take_calls();
    top.setattr(&root(), f.gfid, chmod).await.expect("chmod");
    c.handle(0).assert_calls(&[
        Fop::Inodelk,
        Fop::Xattrop,
        Fop::Setattr,
        Fop::Xattrop,
        Fop::Inodelk,
    ]);
}

/// `tar x` sets each directory's owner, mode and times by path once its files are in: the
/// first takes a hold of the directory's metadata (one lock, one pre-op), the next go
/// straight to the children, and the hold ends after `post-op-delay` with every counter
/// zero. A metadata transaction of this client on the directory (a setxattr) ends it first
/// instead of waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_changes_of_a_directory_go_through_a_hold_of_its_metadata() {
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "300ms")]);
    let d = top
        .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o700, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid;
    c.handle(0).take_calls();
    let changes = [
        SetAttr {
            uid: ROption::RSome(7),
            ..SetAttr::default()
        },
        SetAttr {
            perm: ROption::RSome(0o755),
            ..SetAttr::default()
        },
        SetAttr {
            mtime: xlator_api::TimeSet::At(xlator_api::Timespec { sec: 1, nsec: 0 }),
            ..SetAttr::default()
        },
    ];
    for a in changes {
        top.setattr(&root(), d, a).await.expect("setattr");
    }
    // One lock and one pre-op for three changes.
    c.handle(0).assert_calls(&[
        Fop::Inodelk,
        Fop::Xattrop,
        Fop::Setattr,
        Fop::Setattr,
        Fop::Setattr,
    ]);
    c.handle(0).take_calls();
    for i in 0..2 {
        let a = c.leaf(i).stat(&root(), d).await.expect("stat");
        assert_eq!((a.perm, a.uid, a.mtime.sec), (0o755, 7, 1), "child {i}");
    }
    // The timer's post-op and unlock.
    c.handle(0).wait_for(Fop::Inodelk, 1).await;
    c.handle(1).wait_for(Fop::Inodelk, 2).await;
    assert!(all_zero(&c, d).await);
    // A new hold, then a setxattr: the hold ends (post-op, unlock) before its transaction.
    top.setattr(&root(), d, changes[1]).await.expect("chmod");
    c.handle(0).take_calls();
    let x = xlator_api::Xattr {
        name: "user.k".into(),
        value: xlator_api::Buf::copy_from_slice(b"v"),
    };
    let started = std::time::Instant::now();
    top.setxattr(&root(), d, x, 0).await.expect("setxattr");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(250),
        "the setxattr waited for the hold's timer"
    );
    let calls = c.handle(0).fops();
    assert_eq!(
        calls.first(),
        Some(&Fop::Xattrop),
        "post-op first: {calls:?}"
    );
    assert!(calls.contains(&Fop::Setxattr), "{calls:?}");
    assert!(all_zero(&c, d).await);
}

/// A change of one copy's metadata under a hold that fails there leaves it accused when the
/// hold ends, so heal makes it equal to the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attribute_change_under_a_hold_accuses_that_copy() {
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    let f = create(&top, "f", 1).await;
    assert_eq!(write(&top, f, 0, b"z").await, Ok(1));
    c.handle(1).fail(Fop::Setattr, Errno::EIO);
    let chmod = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    top.setattr(&root(), f.gfid, chmod).await.expect("chmod");
    // The failure ended the hold at once: child 0 accuses child 1, child 1 is clean.
    assert_eq!(counters(&c, 0, f.gfid, 0).await, ZERO);
    assert_ne!(counters(&c, 0, f.gfid, 1).await, ZERO);
    assert_eq!(counters(&c, 1, f.gfid, 1).await, ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_lock_ends_after_the_post_op_delay() {
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "50ms")]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"z").await.expect("write");
    // The timer's post-op and unlock (of both domains) arrive without any further fop.
    c.handle(0).wait_for(Fop::Inodelk, 4).await;
    c.handle(1).wait_for(Fop::Inodelk, 4).await;
    assert!(all_zero(&c, f.gfid).await);
}

/// A hold lasts `post-op-delay` after its last write, not after it was taken: a file written
/// more often than that keeps one hold (one lock of each domain for all its writes), which
/// ends once the writes stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_keep_an_eager_hold_until_they_stop() {
    use std::time::Duration;
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "400ms")]);
    let f = create(&top, "f", 1).await;
    let before = c.handle(0).count(Fop::Inodelk);
    // 1.2 s of writes, 3 delays, none 400 ms after the last.
    for k in 0..24 {
        write(&top, f, k, b"z").await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        c.handle(0).count(Fop::Inodelk) - before,
        2,
        "one hold (data and metadata locks) for all the writes"
    );
    assert_eq!(counters(&c, 0, f.gfid, 0).await, DM1, "still held");
    // The writes stopped: the post-op and the unlocks come without any further fop.
    c.handle(0).wait_for(Fop::Inodelk, before + 4).await;
    c.handle(1).wait_for(Fop::Inodelk, before + 4).await;
    assert!(all_zero(&c, f.gfid).await);
}

/// A file written every 20 ms for 2.5 s with a 100 ms `post-op-delay`: the bound of 10 delays
/// after a hold was taken ends holds while writes keep coming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eager_hold_ends_ten_delays_after_it_was_taken_however_often_written() {
    use std::time::Duration;
    let (c, top) = setup(2, &[("eager-lock", "on"), ("post-op-delay", "100ms")]);
    let f = create(&top, "f", 1).await;
    let before = c.handle(0).count(Fop::Inodelk);
    for k in 0..125 {
        write(&top, f, k, b"y").await.expect("write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let holds = (c.handle(0).count(Fop::Inodelk) - before).div_ceil(4);
    assert!(
        (2..20).contains(&holds),
        "{holds} holds for 125 writes over 2.5 s"
    );
}

/// The attributes a create answers with are those of the child a later stat reads (each
/// child stamps times with its own clock): a file's times must not seem to change between a
/// create and a stat with nothing done in between. (A write's or setattr's answer predates
/// its post-op, whose xattrop moves ctime on every copy anyway.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_answers_with_the_attributes_reads_will_show() {
    let (_c, top) = setup(2, &[]);
    for n in 0..16 {
        let name = format!("f{n}");
        let e = top
            .create(
                &root(),
                Loc::new(Gfid::ROOT, name.as_str()),
                fd(100 + n, Gfid::NULL),
                0o644,
                0,
            )
            .await
            .expect("create");
        let st = top.stat(&root(), e.attr.gfid).await.expect("stat");
        assert_eq!(
            (e.attr.ctime, e.attr.mtime, e.attr.atime),
            (st.ctime, st.mtime, st.atime),
            "{name}: create vs stat"
        );
    }
}

/// Over bricks whose features/locks honours `LocksAround`, a transaction is three requests
/// per child: lock + pre-op, the fop, post-op + unlock. Nothing stays locked or dirty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_go_with_the_changelog_where_the_bricks_take_them() {
    let (c, top) = setup_on_locks(2, &[]);
    let f = create(&top, "f", 1).await;
    c.handle(0).take_calls();
    c.handle(1).take_calls();
    let g = create(&top, "g", 2).await;
    c.handle(0)
        .assert_calls(&[Fop::Xattrop, Fop::Create, Fop::Xattrop]);
    let chmod = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    top.setattr(&root(), f.gfid, chmod).await.expect("chmod");
    c.handle(1).assert_calls(&[
        Fop::Xattrop,
        Fop::Create,
        Fop::Xattrop,
        Fop::Xattrop,
        Fop::Setattr,
        Fop::Xattrop,
    ]);
    assert!(all_zero(&c, f.gfid).await && all_zero(&c, g.gfid).await);
    assert!(all_zero(&c, Gfid::ROOT).await);
    // Every lock was given back: another owner takes them at once.
    for i in 0..2 {
        let free = c
            .leaf(i)
            .inodelk(
                &other_owner(),
                "cluster/replicate".into(),
                f.gfid,
                xlator_api::LkCmd::Set,
                whole_write(),
            )
            .await;
        assert_eq!(free, Ok(()), "child {i}");
    }
}

/// A lock another owner holds on one brick: the combined request fails there (EAGAIN, the
/// xattrop not done), what the other brick took is given back, and the transaction waits
/// its turn the step-by-step way; it completes once the lock is free, counters all zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_brick_makes_the_transaction_wait_and_leaves_nothing_behind() {
    let (c, top) = setup_on_locks(2, &[]);
    let f = create(&top, "f", 1).await;
    let meta = "cluster/replicate:metadata".to_string();
    c.leaf(1)
        .inodelk(
            &other_owner(),
            meta.as_str().into(),
            f.gfid,
            xlator_api::LkCmd::Set,
            whole_write(),
        )
        .await
        .expect("the other owner's lock");
    let chmod = SetAttr {
        perm: ROption::RSome(0o640),
        ..SetAttr::default()
    };
    let t = top.clone();
    let gfid = f.gfid;
    let waiting = tokio::spawn(async move { t.setattr(&root(), gfid, chmod).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "went ahead under another owner's lock"
    );
    // Child 0's combined pre-op was undone: it is clean while the transaction waits.
    assert!(all_zero(&c, f.gfid).await);
    let mut unlock = whole_write();
    unlock.kind = xlator_api::LockKind::Unlock;
    c.leaf(1)
        .inodelk(
            &other_owner(),
            meta.as_str().into(),
            f.gfid,
            xlator_api::LkCmd::Set,
            unlock,
        )
        .await
        .expect("unlock");
    waiting.await.expect("join").expect("chmod");
    for i in 0..2 {
        let a = c.leaf(i).stat(&root(), f.gfid).await.expect("stat");
        assert_eq!(a.mode() & 0o7777, 0o640);
    }
    assert!(all_zero(&c, f.gfid).await);
}

fn other_owner() -> xlator_api::Ctx {
    xlator_api::Ctx::builder(0, 0)
        .lk_owner(xlator_api::LkOwner(0x5eed))
        .ext(&xlator_api::ClientId(99))
        .build()
}

fn whole_write() -> xlator_api::Flock {
    xlator_api::Flock {
        kind: xlator_api::LockKind::Write,
        start: 0,
        len: 0,
        pid: 0,
        owner: xlator_api::LkOwner(0x5eed),
    }
}

const E1: Counters = Counters([0, 0, 1]);

/// Namespace fops of one client in one directory go through the directory's eager hold
/// (`entry-eager-lock`): the first takes the whole directory's entrylk with the pre-op of its
/// entry lane (one request per child, features/locks' `LocksAround`), the next ones are one
/// request per child each. A rename ends the hold first (post-op and unlock in one request),
/// then runs as a transaction of its own; at the end nothing is marked and another owner
/// takes the directory's lock at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_fops_in_one_directory_go_through_its_eager_hold() {
    let (c, top) = setup_on_locks(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    create(&top, "a", 1).await;
    create(&top, "b", 2).await;
    top.unlink(&root(), Loc::new(Gfid::ROOT, "b"))
        .await
        .expect("unlink");
    // Each file is made with its own hold, which costs no request of its own (the getxattrs
    // ask, once each, whether the brick honours `LocksAround` on xattrops and on creates).
    c.handle(0).assert_calls(&[
        Fop::Getxattr,
        Fop::Xattrop,
        Fop::Getxattr,
        Fop::Create,
        Fop::Create,
        Fop::Unlink,
    ]);
    // While held, each child is dirty in the entry lane and accuses nobody.
    assert_eq!(counters(&c, 0, Gfid::ROOT, 0).await, E1);
    assert_eq!(counters(&c, 1, Gfid::ROOT, 1).await, E1);
    assert_eq!(counters(&c, 0, Gfid::ROOT, 1).await, ZERO);
    c.handle(0).take_calls();
    top.rename(
        &root(),
        Loc::new(Gfid::ROOT, "a"),
        Loc::new(Gfid::ROOT, "c"),
        0,
    )
    .await
    .expect("rename");
    c.handle(0)
        .assert_calls(&[Fop::Xattrop, Fop::Xattrop, Fop::Rename, Fop::Xattrop]);
    assert!(all_zero(&c, Gfid::ROOT).await);
    for i in 0..2 {
        c.leaf(i)
            .entrylk(
                &other_owner(),
                "cluster/replicate".into(),
                Loc::new(Gfid::ROOT, ""),
                xlator_api::EntrylkCmd::LockNonBlocking,
            )
            .await
            .expect("the directory is free");
    }
}

/// A second client's namespace fop in a directory the first holds eagerly waits for the
/// hold to end (here its timer; on a brick, the lock-contention upcall ends it at once), then
/// goes: both names on both children, nothing marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_create_waits_for_a_directory_hold_then_goes() {
    let set = [("eager-lock", "on"), ("post-op-delay", "200ms")];
    let (c, top_a) = setup_on_locks(2, &set);
    let (_c2, top_b) = second_client(&c, &set);
    create(&top_a, "a", 1).await;
    let started = std::time::Instant::now();
    create(&top_b, "b", 2).await;
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(100),
        "b's create went while a held the directory ({:?})",
        started.elapsed()
    );
    for i in 0..2 {
        for name in ["a", "b"] {
            c.leaf(i)
                .lookup(&root(), Loc::new(Gfid::ROOT, name))
                .await
                .unwrap_or_else(|e| panic!("{name} on child {i}: {e}"));
        }
    }
    // b's own hold ends after its timer too.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(all_zero(&c, Gfid::ROOT).await);
}

/// Whether another owner can take `gfid`'s lock in `domain` on child `i` now (given back at
/// once when it can).
async fn lock_free(c: &xlfs_testkit::MockCluster, i: usize, domain: &str, gfid: Gfid) -> bool {
    let leaf = c.leaf(i);
    let lk = |kind| {
        leaf.inodelk(
            &other_owner(),
            domain.into(),
            gfid,
            xlator_api::LkCmd::Set,
            xlator_api::Flock {
                kind,
                ..whole_write()
            },
        )
    };
    let free = lk(xlator_api::LockKind::Write).await.is_ok();
    if free {
        lk(xlator_api::LockKind::Unlock).await.expect("unlock");
    }
    free
}

/// A file made through replicate with eager locking comes with its own hold: the create
/// carries the file's locks and its pre-op (features/locks takes a create's `LocksAround`,
/// the pre-op rides as `CreateXattrs`), so its first write and attribute change cost one
/// request per child each, with no lock or pre-op before them. An fsync ends the hold: the
/// counters go back to zero and another owner may lock the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_is_made_with_its_hold_so_its_first_write_costs_one_request() {
    let (c, top) = setup_on_locks(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    let f = create(&top, "f", 1).await;
    for i in 0..2 {
        assert_eq!(counters(&c, i, f.gfid, i).await, DM1, "child {i} is dirty");
        assert!(!lock_free(&c, i, "cluster/replicate", f.gfid).await);
        assert!(!lock_free(&c, i, "cluster/replicate:metadata", f.gfid).await);
        c.handle(i).take_calls();
    }
    assert_eq!(write(&top, f, 0, b"data").await, Ok(4));
    let chmod = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    top.fsetattr(&root(), f, chmod).await.expect("fchmod");
    for i in 0..2 {
        c.handle(i).assert_calls(&[Fop::Writev, Fop::Fsetattr]);
    }
    top.fsync(&root(), f, false).await.expect("fsync");
    assert!(all_zero(&c, f.gfid).await);
    for i in 0..2 {
        assert!(
            lock_free(&c, i, "cluster/replicate", f.gfid).await,
            "child {i}"
        );
        assert!(lock_free(&c, i, "cluster/replicate:metadata", f.gfid).await);
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(&b"data"[..])
        );
    }
}

/// A create that made its file on some children only (here one failed it) takes back the
/// hold it brought where it made it: no counter stays up and nothing stays locked there;
/// the missing copy is the directory's entry heal's (its hold accuses that child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_that_fails_on_a_child_takes_back_the_hold_it_brought() {
    let (c, top) = setup_on_locks(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    create(&top, "warm", 1).await;
    c.handle(1).fail(Fop::Create, Errno::EIO);
    let f = create(&top, "f", 2).await;
    assert_eq!(counters(&c, 0, f.gfid, 0).await, ZERO);
    assert_eq!(counters(&c, 0, f.gfid, 1).await, ZERO);
    assert!(lock_free(&c, 0, "cluster/replicate", f.gfid).await);
    assert!(lock_free(&c, 0, "cluster/replicate:metadata", f.gfid).await);
    // Its writes take a hold of their own, which accuses the child without the file.
    assert_eq!(write(&top, f, 0, b"x").await, Ok(1));
    top.fsync(&root(), f, false).await.expect("fsync");
    assert_eq!(counters(&c, 0, f.gfid, 1).await, Counters([1, 1, 0]));
}

/// A create of a name that exists with another GFID fails (EEXIST, as on a brick) and keeps
/// none of the locks it brought for the GFID it asked for; the existing file stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_of_a_name_that_exists_keeps_no_lock() {
    let (c, top) = setup_on_locks(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    let first = create(&top, "f", 1).await;
    top.fsync(&root(), first, false).await.expect("fsync");
    let asked = Gfid::random();
    let cx = xlator_api::Ctx::root()
        .to_builder()
        .ext(&xlator_api::GfidReq(asked))
        .build();
    let r = top
        .create(&cx, Loc::new(Gfid::ROOT, "f"), fd(2, Gfid::NULL), 0o644, 0)
        .await;
    assert_eq!(r.map(|e| e.attr.gfid), Err(Errno::EEXIST));
    for i in 0..2 {
        assert!(
            lock_free(&c, i, "cluster/replicate", asked).await,
            "child {i}"
        );
        assert!(lock_free(&c, i, "cluster/replicate", first.gfid).await);
        assert_eq!(counters(&c, i, first.gfid, i).await, ZERO);
    }
}

/// A lookup of a file this client holds eagerly leaves the hold's own dirty counts alone (no
/// heal: it would wait for the hold, end it and find nothing to do); once the hold ended, a
/// dirty count left by nobody's hold is healed on lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_does_not_heal_the_dirty_counts_of_this_clients_own_hold() {
    let (c, top) = setup_on_locks(2, &[("eager-lock", "on"), ("post-op-delay", "60s")]);
    let f = create(&top, "f", 1).await;
    assert_eq!(write(&top, f, 0, b"data").await, Ok(4));
    for i in 0..2 {
        c.handle(i).take_calls();
    }
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    for i in 0..2 {
        c.handle(i).assert_calls(&[Fop::Lookup]);
        assert_eq!(
            counters(&c, i, f.gfid, i).await,
            DM1,
            "child {i}: still held"
        );
    }
    top.fsync(&root(), f, false)
        .await
        .expect("fsync ends the hold");
    // A client that died in the middle of a write left child 0 dirty.
    let dirty = xlator_api::abi_stable::std_types::RVec::from(vec![xlator_api::Xattr {
        name: key(&c, 0).as_str().into(),
        value: xlator_api::Buf::from_vec(
            xlfs_afr::changelog::delta(xlfs_afr::changelog::Lanes::DATA, 1).to_vec(),
        ),
    }]);
    c.leaf(0)
        .xattrop(&root(), f.gfid, xlator_api::XattropOp::AddArray32, dirty)
        .await
        .expect("mark");
    c.handle(0).take_calls();
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    assert!(
        c.handle(0)
            .take_calls()
            .iter()
            .any(|call| call.fop() == Fop::Inodelk || call.fop() == Fop::Xattrop),
        "the heal ran"
    );
    assert!(all_zero(&c, f.gfid).await);
}

/// Another client's write to a file this client just made (with its hold) waits for that
/// hold to end (here its timer; on a brick, the lock-contention upcall ends it at once), then
/// goes: both copies hold it and nothing stays marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_write_to_a_file_made_with_its_hold_waits_then_goes() {
    let set = [("eager-lock", "on"), ("post-op-delay", "200ms")];
    let (c, top_a) = setup_on_locks(2, &set);
    let (_c2, top_b) = second_client(&c, &set);
    let f = create(&top_a, "f", 1).await;
    let started = std::time::Instant::now();
    // (Its lookup sees a's dirty counts: its heal waits for the hold too.)
    let g = top_b
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("b finds f");
    assert_eq!(g.attr.gfid, f.gfid);
    let fb = fd(2, f.gfid);
    top_b.open(&root(), fb).await.expect("b opens f");
    assert_eq!(write(&top_b, fb, 0, b"from b").await, Ok(6));
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(100),
        "b's lookup and write went while a held the file ({:?})",
        started.elapsed()
    );
    top_b.fsync(&root(), fb, false).await.expect("fsync");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    for i in 0..2 {
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(&b"from b"[..])
        );
    }
    assert!(all_zero(&c, f.gfid).await);
    assert!(all_zero(&c, Gfid::ROOT).await);
}

/// Another client's lookup of a file this client is writing (dirty counts alone, its hold
/// taken) does not wait for the hold nor end it: the heal it would start only tries the
/// locks, finds them held and leaves the file to its writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_lookup_leaves_a_writers_hold_alone() {
    let set = [("eager-lock", "on"), ("post-op-delay", "60s")];
    let (c, top_a) = setup_on_locks(2, &set);
    let (_c2, top_b) = second_client(&c, &set);
    let f = create(&top_a, "f", 1).await;
    assert_eq!(write(&top_a, f, 0, b"data").await, Ok(4));
    let started = std::time::Instant::now();
    let e = top_b
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("b finds f");
    assert_eq!(e.attr.gfid, f.gfid);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "b's lookup waited for a's hold ({:?})",
        started.elapsed()
    );
    for i in 0..2 {
        assert_eq!(
            counters(&c, i, f.gfid, i).await,
            DM1,
            "child {i}: a still holds f"
        );
        assert!(!lock_free(&c, i, "cluster/replicate", f.gfid).await);
    }
    assert_eq!(write(&top_a, f, 4, b"more").await, Ok(4));
    top_a.fsync(&root(), f, false).await.expect("fsync");
    assert!(all_zero(&c, f.gfid).await);
}

fn owner_ctx(owner: u64) -> xlator_api::Ctx {
    xlator_api::Ctx::builder(0, 0)
        .lk_owner(xlator_api::LkOwner(owner))
        .ext(&xlator_api::ClientId(owner))
        .build()
}

/// An entrylk asked from above (distribute's directory locks) that finds one child busy and
/// waits holds no child's lock past the busy one while it waits: it gives back what the
/// first, non-blocking pass got and locks the children in index order. Two clients locking
/// every child at once and waiting could each hold a half the other waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_lock_from_above_holds_nothing_past_the_busy_child() {
    use xlator_api::EntrylkCmd::{Lock, LockNonBlocking, Unlock};
    let (c, top) = setup_on_locks(2, &[]);
    let name = Loc::new(Gfid::ROOT, "d");
    let dom = || xlator_api::abi_stable::std_types::RString::from("dht.dir");
    let raw = |i: usize, owner: u64, cmd| {
        let leaf = c.leaf(i).clone();
        let name = name.clone();
        async move { leaf.entrylk(&owner_ctx(owner), dom(), name, cmd).await }
    };
    raw(0, 7, LockNonBlocking).await.expect("x holds child 0");
    let waiting = {
        let top = top.clone();
        let name = name.clone();
        tokio::spawn(async move { top.entrylk(&owner_ctx(8), dom(), name, Lock).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "granted while child 0 is held");
    raw(1, 9, LockNonBlocking)
        .await
        .expect("child 1 is free while the lock from above waits for child 0");
    raw(1, 9, Unlock).await.expect("unlock");
    raw(0, 7, Unlock).await.expect("unlock");
    waiting
        .await
        .expect("join")
        .expect("granted once child 0 is free");
    for i in 0..2 {
        assert_eq!(
            raw(i, 9, LockNonBlocking).await,
            Err(Errno::EAGAIN),
            "child {i} held from above"
        );
    }
    top.entrylk(&owner_ctx(8), dom(), name.clone(), Unlock)
        .await
        .expect("unlock from above");
    // Not waiting: busy is EAGAIN, and nothing stays held.
    raw(1, 7, LockNonBlocking).await.expect("x holds child 1");
    assert_eq!(
        top.entrylk(&owner_ctx(8), dom(), name.clone(), LockNonBlocking)
            .await,
        Err(Errno::EAGAIN)
    );
    raw(0, 9, LockNonBlocking)
        .await
        .expect("child 0 given back after the busy answer");
}

/// A directory is born with every child's counter present and zero (so its xattrs take
/// their final room on the brick at once: its block count does not change at its first
/// metadata transaction), next to whatever xattrs the parent asked for.
#[tokio::test]
async fn a_directory_is_made_with_every_counter_at_zero() {
    let (c, top) = setup(3, &[]);
    let asked = xlator_api::CreateXattrs(vec![("trusted.test.x".into(), b"v".to_vec())]);
    let cx = root().to_builder().ext(&asked).build();
    let e = top
        .mkdir(&cx, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    for i in 0..3 {
        let mut names: Vec<String> = (0..3).map(|j| key(&c, j)).collect();
        names.push("trusted.test.x".into());
        let want: xlator_api::abi_stable::std_types::RVec<_> =
            names.iter().map(|n| n.as_str().into()).collect();
        let xs = c
            .leaf(i)
            .getxattrs(&root(), e.attr.gfid, want)
            .await
            .expect("getxattrs");
        for n in &names {
            let v = xs
                .iter()
                .find(|x| x.name.as_str() == n)
                .unwrap_or_else(|| panic!("child {i} lacks {n}"));
            if n.starts_with("trusted.afr.") {
                assert_eq!(v.value.as_slice(), &[0u8; 12], "child {i}: {n}");
            }
        }
    }
    assert!(all_zero(&c, e.attr.gfid).await);
}

/// A lookup racing another client's rename of a directory over another, done on child 0
/// and not yet on child 1 (the name shows two GFIDs), waits for the rename's entry lock and
/// answers the renamed directory: not EIO, no split-brain reported. Before, it answered EIO
/// at once (the heal it queued, in the background on a mount, came too late for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_racing_a_rename_over_a_directory_waits_for_it() {
    let (c, top) = setup_on_locks(2, &[]);
    let a = mkdir_at_root(&top, "a").await;
    let b = mkdir_at_root(&top, "b").await;
    c.handle(1).hold(Fop::Rename);
    let mv = tokio::spawn({
        let top = top.clone();
        async move {
            top.rename(
                &root(),
                Loc::new(Gfid::ROOT, "a"),
                Loc::new(Gfid::ROOT, "b"),
                0,
            )
            .await
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.handle(1).held(Fop::Rename) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no rename reached child 1"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    // Child 0 renamed already: `b` is `a` there, still the old `b` on child 1.
    let on = |i: usize| {
        let leaf = c.leaf(i).clone();
        async move {
            leaf.lookup(&root(), Loc::new(Gfid::ROOT, "b"))
                .await
                .map(|e| e.attr.gfid)
        }
    };
    assert_eq!((on(0).await, on(1).await), (Ok(a), Ok(b)));
    let (_c2, other) = second_client(&c, &[("background-self-heal-count", "8")]);
    let look = tokio::spawn({
        let other = other.clone();
        async move { other.lookup(&root(), Loc::new(Gfid::ROOT, "b")).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(
        !look.is_finished(),
        "the lookup waits for the rename: {:?}",
        {
            if look.is_finished() {
                Some(look.await.map(|r| r.map(|e| e.attr.gfid)))
            } else {
                None
            }
        }
    );
    c.handle(1).open_gate(Fop::Rename);
    mv.await.expect("rename task").expect("rename");
    let e = look.await.expect("lookup task").expect("lookup");
    assert_eq!(e.attr.gfid, a, "the renamed directory");
}

/// Two clients moving two directories into each other at once (`mv x y/` beside
/// `mv y x/`), the first slow on child 1: the second waits for the move lock, so both
/// children take the first and refuse the second as a loop (EINVAL), and both hold `y/x`.
/// Before, the second went to both children at once: child 0 refused it (the first had
/// moved `x` there), child 1 took it before the first, which it then refused: `y/x` on one
/// child, `x/y` on the other, each accusing the other, and both callers told it worked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_moved_into_each_other_at_once_end_alike_on_both_children() {
    let (c, top) = setup_on_locks(2, &[]);
    let (_c2, other) = second_client(&c, &[]);
    let (x, y) = (
        mkdir_at_root(&top, "x").await,
        mkdir_at_root(&top, "y").await,
    );
    let mv = |top: xlator_api::Subvol, name: &'static str, into: Gfid| {
        tokio::spawn(async move {
            top.rename(&root(), Loc::new(Gfid::ROOT, name), Loc::new(into, name), 0)
                .await
        })
    };
    let parent_of = |i: usize, name: &'static str| {
        let leaf = c.leaf(i).clone();
        async move {
            for (dir, g) in [("root", Gfid::ROOT), ("x", x), ("y", y)] {
                if leaf.lookup(&root(), Loc::new(g, name)).await.is_ok() {
                    return dir;
                }
            }
            "nowhere"
        }
    };
    c.handle(1)
        .delay(Fop::Rename, std::time::Duration::from_millis(300));
    let mv_x = mv(top.clone(), "x", y);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while parent_of(0, "x").await != "y" {
        assert!(
            std::time::Instant::now() < deadline,
            "the first move never reached child 0"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    c.handle(1).delay(Fop::Rename, std::time::Duration::ZERO);
    let mv_y = mv(other.clone(), "y", x);
    let (rx, ry) = (mv_x.await.expect("task"), mv_y.await.expect("task"));
    assert_eq!((rx, ry), (Ok(()), Err(Errno::EINVAL)));
    for i in 0..2 {
        assert_eq!(
            (parent_of(i, "x").await, parent_of(i, "y").await),
            ("y", "root"),
            "child {i}"
        );
    }
}

/// Makes directory `name` in the root through `top`; its GFID.
async fn mkdir_at_root(top: &xlator_api::Subvol, name: &str) -> Gfid {
    top.mkdir(&root(), Loc::new(Gfid::ROOT, name), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid
}
