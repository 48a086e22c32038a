//! features/locks over a recording spy on the in-memory leaf: lock fops are answered here and
//! never sent down; flush/release are passed down after dropping locks.

mod common;

use std::time::Duration;

use common::{cx, fd, fl, stack};
use xlator_api::{Ctx, EntrylkCmd, Errno, Fd, Fop, Gfid, LkCmd, LkOwner, Loc, LockKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_get_conflicts_and_unlock() {
    let (top, h) = stack();
    let g = Gfid::random();
    let (a, b) = (fd(1, g), fd(2, g));
    top.lk(&cx(1), a, LkCmd::Set, fl(LockKind::Write, 0, 100, 1))
        .await
        .expect("lock");
    let r = top
        .lk(&cx(2), b, LkCmd::Set, fl(LockKind::Read, 50, 10, 2))
        .await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    let got = top
        .lk(&cx(2), b, LkCmd::Get, fl(LockKind::Read, 50, 10, 2))
        .await
        .expect("getlk");
    assert_eq!(
        (got.kind, got.start, got.len, got.owner),
        (LockKind::Write, 0, 100, LkOwner(1))
    );
    let free = top
        .lk(&cx(2), b, LkCmd::Get, fl(LockKind::Write, 100, 0, 2))
        .await
        .expect("getlk");
    assert_eq!(free.kind, LockKind::Unlock);
    // Shared locks coexist; unlock a piece and the other owner gets in there.
    top.lk(&cx(2), b, LkCmd::Set, fl(LockKind::Read, 200, 10, 2))
        .await
        .expect("read");
    top.lk(&cx(1), a, LkCmd::Set, fl(LockKind::Read, 205, 10, 1))
        .await
        .expect("read shared");
    top.lk(&cx(1), a, LkCmd::Set, fl(LockKind::Unlock, 40, 20, 1))
        .await
        .expect("unlock middle");
    top.lk(&cx(2), b, LkCmd::Set, fl(LockKind::Write, 45, 5, 2))
        .await
        .expect("now free");
    assert_eq!(
        top.lk(&cx(2), b, LkCmd::Set, fl(LockKind::Write, 39, 2, 2))
            .await
            .err(),
        Some(Errno::EAGAIN)
    );
    // Lock kind must match the fd's open mode.
    let ro = Fd {
        flags: libc::O_RDONLY,
        ..fd(3, g)
    };
    assert_eq!(
        top.lk(&cx(3), ro, LkCmd::Set, fl(LockKind::Write, 0, 1, 3))
            .await
            .err(),
        Some(Errno::EBADF)
    );
    let r = top
        .lk(&cx(3), ro, LkCmd::Set, fl(LockKind::Read, u64::MAX, 2, 3))
        .await;
    assert_eq!(r.err(), Some(Errno::EINVAL));
    assert_eq!(h.count(Fop::Lk), 0, "lk is never sent down");
}

/// A lock whose fd mode the sender checked (a FUSE host: the kernel checks fcntl locks, and a
/// flock needs no mode) is taken through any fd, and excludes as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_mode_was_checked_goes_through_a_read_only_fd() {
    let (top, _h) = stack();
    let g = Gfid::random();
    let ro = Fd {
        flags: libc::O_RDONLY,
        ..fd(1, g)
    };
    let checked = |c: u64| cx(c).to_builder().ext(&xlator_api::LkModeChecked).build();
    assert_eq!(
        top.lk(&cx(1), ro, LkCmd::Set, fl(LockKind::Write, 0, 0, 1))
            .await
            .err(),
        Some(Errno::EBADF),
        "unchecked: POSIX's rule"
    );
    top.lk(&checked(1), ro, LkCmd::Set, fl(LockKind::Write, 0, 0, 1))
        .await
        .expect("an exclusive flock through a read-only fd");
    let wo = Fd {
        flags: libc::O_WRONLY,
        ..fd(2, g)
    };
    assert_eq!(
        top.lk(&checked(2), wo, LkCmd::Set, fl(LockKind::Read, 0, 0, 2))
            .await
            .err(),
        Some(Errno::EAGAIN),
        "a shared one through a write-only fd is refused only because of the holder"
    );
    let _ = top.release(&cx(1), ro).await;
    top.lk(&checked(2), wo, LkCmd::Set, fl(LockKind::Read, 0, 0, 2))
        .await
        .expect("granted once the holder's fd is released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setlkw_waits_and_is_woken_on_flush() {
    let (top, h) = stack();
    let g = Gfid::random();
    top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Write, 0, 0, 1))
        .await
        .expect("lock");
    let t2 = top.clone();
    let waiter = tokio::spawn(async move {
        t2.lk(
            &cx(2),
            fd(2, g),
            LkCmd::SetWait,
            fl(LockKind::Write, 10, 10, 2),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "must wait while the lock is held");
    // close(2) by owner 1 through another fd of the file releases its locks.
    let _ = top.flush(&cx(1), fd(9, g)).await; // the leaf does not know this gfid
    let r = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .expect("join");
    assert_eq!(r.expect("granted").kind, LockKind::Unlock);
    assert_eq!(
        top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Read, 15, 1, 1))
            .await
            .err(),
        Some(Errno::EAGAIN)
    );
    assert_eq!(h.count(Fop::Flush), 1, "flush passed down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_drops_fd_locks_and_cancels_its_waiters() {
    let (top, h) = stack();
    let g = Gfid::random();
    top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Write, 0, 10, 1))
        .await
        .expect("lock");
    let t2 = top.clone();
    let waiter = tokio::spawn(async move {
        t2.lk(
            &cx(2),
            fd(2, g),
            LkCmd::SetWait,
            fl(LockKind::Write, 0, 10, 2),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    let _ = top.release(&cx(2), fd(2, g)).await;
    let r = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("done")
        .expect("join");
    assert_eq!(r.err(), Some(Errno::EBADF));
    let _ = top.release(&cx(1), fd(1, g)).await;
    top.lk(&cx(3), fd(3, g), LkCmd::Set, fl(LockKind::Write, 0, 10, 3))
        .await
        .expect("free after release");
    assert_eq!(h.count(Fop::Release), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_is_detected() {
    let (top, _h) = stack();
    let g = Gfid::random();
    top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Write, 0, 10, 1))
        .await
        .expect("a");
    top.lk(&cx(2), fd(2, g), LkCmd::Set, fl(LockKind::Write, 20, 10, 2))
        .await
        .expect("b");
    let t2 = top.clone();
    let waiter = tokio::spawn(async move {
        t2.lk(
            &cx(2),
            fd(2, g),
            LkCmd::SetWait,
            fl(LockKind::Write, 0, 10, 2),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    let r = top
        .lk(
            &cx(1),
            fd(1, g),
            LkCmd::SetWait,
            fl(LockKind::Write, 20, 10, 1),
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EDEADLK));
    top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Unlock, 0, 0, 1))
        .await
        .expect("unlock");
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .expect("join")
        .expect("granted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_waiter_is_withdrawn() {
    let (top, _h) = stack();
    let g = Gfid::random();
    top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Write, 0, 10, 1))
        .await
        .expect("a");
    let w = top.lk(
        &cx(2),
        fd(2, g),
        LkCmd::SetWait,
        fl(LockKind::Write, 0, 10, 2),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(30), w)
            .await
            .is_err(),
        "gave up waiting"
    );
    top.lk(&cx(1), fd(1, g), LkCmd::Set, fl(LockKind::Unlock, 0, 0, 1))
        .await
        .expect("unlock");
    // The abandoned request did not take the lock.
    top.lk(&cx(3), fd(3, g), LkCmd::Set, fl(LockKind::Write, 0, 10, 3))
        .await
        .expect("free");
    assert_eq!(top.dump().find_u64("waiting"), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inodelk_domains_are_separate() {
    let (top, h) = stack();
    let g = Gfid::random();
    let l = |o| fl(LockKind::Write, 0, 0, o);
    top.inodelk(&cx(1), "afr".into(), g, LkCmd::Set, l(1))
        .await
        .expect("afr lock");
    top.inodelk(&cx(2), "dht".into(), g, LkCmd::Set, l(2))
        .await
        .expect("other domain");
    assert_eq!(
        top.inodelk(&cx(2), "afr".into(), g, LkCmd::Set, l(2))
            .await
            .err(),
        Some(Errno::EAGAIN)
    );
    assert_eq!(
        top.inodelk(&cx(2), "afr".into(), g, LkCmd::Get, l(2))
            .await
            .err(),
        Some(Errno::EAGAIN)
    );
    // inodelk locks survive flush/release of any fd (no fd attached).
    let _ = top.flush(&cx(1), fd(1, g)).await;
    let t2 = top.clone();
    let waiter = tokio::spawn(async move {
        t2.inodelk(&cx(2), "afr".into(), g, LkCmd::SetWait, l(2))
            .await
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!waiter.is_finished());
    top.inodelk(
        &cx(1),
        "afr".into(),
        g,
        LkCmd::Set,
        fl(LockKind::Unlock, 0, 0, 1),
    )
    .await
    .expect("unlock");
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .expect("join")
        .expect("granted");
    assert_eq!(h.count(Fop::Inodelk), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entrylk_names_and_whole_directory() {
    let (top, h) = stack();
    let dir = Gfid::random();
    let l = |n: &str| Loc::new(dir, n);
    top.entrylk(&cx(1), "dht".into(), l("a"), EntrylkCmd::Lock)
        .await
        .expect("lock a");
    top.entrylk(&cx(2), "dht".into(), l("b"), EntrylkCmd::LockNonBlocking)
        .await
        .expect("lock b");
    let r = top
        .entrylk(&cx(2), "dht".into(), l("a"), EntrylkCmd::LockNonBlocking)
        .await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    top.entrylk(&cx(2), "afr".into(), l("a"), EntrylkCmd::LockNonBlocking)
        .await
        .expect("other domain");
    let r = top
        .entrylk(&cx(3), "dht".into(), l(""), EntrylkCmd::LockNonBlocking)
        .await;
    assert_eq!(
        r.err(),
        Some(Errno::EAGAIN),
        "whole dir conflicts with names"
    );
    let t2 = top.clone();
    let waiter = tokio::spawn(async move {
        t2.entrylk(&cx(3), "dht".into(), Loc::new(dir, ""), EntrylkCmd::Lock)
            .await
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    top.entrylk(&cx(1), "dht".into(), l("a"), EntrylkCmd::Unlock)
        .await
        .expect("unlock a");
    assert!(!waiter.is_finished(), "b still held");
    top.entrylk(&cx(2), "dht".into(), l("b"), EntrylkCmd::Unlock)
        .await
        .expect("unlock b");
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .expect("join")
        .expect("granted");
    assert_eq!(
        top.entrylk(&cx(1), "dht".into(), l("zz"), EntrylkCmd::Unlock)
            .await
            .err(),
        Some(Errno::EINVAL)
    );
    assert_eq!(h.count(Fop::Entrylk), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_fops_pass_through() {
    let (top, h) = stack();
    let e = top
        .mkdir(&Ctx::root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    assert!(e.attr.is_dir());
    top.stat(&Ctx::root(), e.attr.gfid).await.expect("stat");
    assert_eq!(h.fops(), vec![Fop::Mkdir, Fop::Stat]);
}

/// An xattrop's `LocksAround`: `take` is held for the caller after it (all or nothing, the
/// xattrop not done when one is busy), `give` released after it, and an xattrop that fails
/// keeps none of `take`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xattrop_takes_and_gives_the_locks_it_carries() {
    use xlator_api::abi_stable::std_types::RVec;
    use xlator_api::{AroundLock, Buf, LOCKS_AROUND_XATTR, LocksAround, Xattr, XattropOp};
    let (top, h) = stack();
    let root = Gfid::ROOT;
    let answer = top
        .getxattr(&cx(1), root, LOCKS_AROUND_XATTR.into())
        .await
        .expect("the brick says it honours LocksAround");
    assert_eq!(answer.as_slice(), b"1");
    let inode = AroundLock::Inode {
        domain: "afr".into(),
        gfid: root,
    };
    let entry = AroundLock::Entry {
        domain: "afr".into(),
        parent: root,
        name: "f".into(),
    };
    let with = |owner: u64, take: Vec<AroundLock>, give: Vec<AroundLock>| {
        Ctx::builder(0, 0)
            .lk_owner(LkOwner(owner))
            .ext(&LocksAround { take, give })
            .build()
    };
    let bump = || {
        RVec::from(vec![Xattr {
            name: "trusted.afr.x".into(),
            value: Buf::from_vec(vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
        }])
    };
    let l = |o| fl(LockKind::Write, 0, 0, o);
    top.xattrop(
        &with(1, vec![inode.clone(), entry.clone()], vec![]),
        root,
        XattropOp::AddArray32,
        bump(),
    )
    .await
    .expect("take + xattrop");
    // Both are held by owner 1 now.
    let busy = top
        .inodelk(&cx(2), "afr".into(), root, LkCmd::Set, l(2))
        .await;
    assert_eq!(busy.err(), Some(Errno::EAGAIN));
    let busy = top
        .entrylk(
            &cx(2),
            "afr".into(),
            Loc::new(root, "f"),
            EntrylkCmd::LockNonBlocking,
        )
        .await;
    assert_eq!(busy.err(), Some(Errno::EAGAIN));
    // Another owner's take fails whole: its free entry lock on "g" is not kept, and its
    // xattrop never reached the leaf.
    h.take_calls();
    let other = AroundLock::Entry {
        domain: "afr".into(),
        parent: root,
        name: "g".into(),
    };
    let r = top
        .xattrop(
            &with(2, vec![other.clone(), inode.clone()], vec![]),
            root,
            XattropOp::AddArray32,
            bump(),
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    assert!(!h.take_calls().iter().any(|c| c.fop() == Fop::Xattrop));
    top.entrylk(
        &cx(3),
        "afr".into(),
        Loc::new(root, "g"),
        EntrylkCmd::LockNonBlocking,
    )
    .await
    .expect("g was given back");
    // Owner 1's post-op gives both back.
    top.xattrop(
        &with(1, vec![], vec![inode.clone(), entry.clone()]),
        root,
        XattropOp::AddArray32,
        bump(),
    )
    .await
    .expect("xattrop + give");
    top.inodelk(&cx(2), "afr".into(), root, LkCmd::Set, l(2))
        .await
        .expect("inode lock free");
    top.inodelk(
        &cx(2),
        "afr".into(),
        root,
        LkCmd::Set,
        fl(LockKind::Unlock, 0, 0, 2),
    )
    .await
    .expect("unlock");
    // An xattrop that fails (no such object) keeps nothing it took.
    let r = top
        .xattrop(
            &with(4, vec![inode.clone()], vec![]),
            Gfid::random(),
            XattropOp::AddArray32,
            bump(),
        )
        .await;
    assert!(r.is_err());
    top.xattrop(
        &with(
            5,
            vec![AroundLock::Inode {
                domain: "afr".into(),
                gfid: root,
            }],
            vec![],
        ),
        root,
        XattropOp::AddArray32,
        bump(),
    )
    .await
    .expect("owner 4 kept nothing");
}

/// A create's `LocksAround`: its `take` locks are held for the caller once the file is made
/// (replicate's hold comes with the new file), given back when the create fails; the brick
/// says it does so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_keeps_the_locks_it_carries_only_when_it_makes_the_file() {
    use xlator_api::{AroundLock, GfidReq, LOCKS_AROUND_CREATE_XATTR, LocksAround};
    let (top, _h) = stack();
    let answer = top
        .getxattr(&cx(1), Gfid::ROOT, LOCKS_AROUND_CREATE_XATTR.into())
        .await
        .expect("the brick says it takes a create's locks");
    assert_eq!(answer.as_slice(), b"1");
    let g = Gfid::random();
    let with = |owner: u64| {
        Ctx::builder(0, 0)
            .lk_owner(LkOwner(owner))
            .ext(&GfidReq(g))
            .ext(&LocksAround {
                take: vec![AroundLock::Inode {
                    domain: "afr".into(),
                    gfid: g,
                }],
                give: vec![],
            })
            .build()
    };
    let l = |o| fl(LockKind::Write, 0, 0, o);
    let e = top
        .create(
            &with(1),
            Loc::new(Gfid::ROOT, "f"),
            fd(1, Gfid::NULL),
            0o644,
            0,
        )
        .await
        .expect("create");
    assert_eq!(e.attr.gfid, g);
    let busy = top.inodelk(&cx(2), "afr".into(), g, LkCmd::Set, l(2)).await;
    assert_eq!(
        busy.err(),
        Some(Errno::EAGAIN),
        "owner 1 holds the new file"
    );
    top.inodelk(
        &cx(1),
        "afr".into(),
        g,
        LkCmd::Set,
        fl(LockKind::Unlock, 0, 0, 1),
    )
    .await
    .expect("owner 1 gives it back");
    // The same name again (O_EXCL): EEXIST, and the lock it brought is not kept.
    let excl = Fd {
        flags: libc::O_RDWR | libc::O_EXCL,
        ..fd(2, Gfid::NULL)
    };
    let r = top
        .create(&with(3), Loc::new(Gfid::ROOT, "f"), excl, 0o644, 0)
        .await;
    assert_eq!(r.err(), Some(Errno::EEXIST));
    top.inodelk(&cx(2), "afr".into(), g, LkCmd::Set, l(2))
        .await
        .expect("free after the failed create");
}
