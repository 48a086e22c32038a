//! The migration barrier: a whole-file write inodelk in domain `xlfs.dht.migrate` holds other
//! clients' modifying fops on that file (they wait, then go) and is granted only once the
//! modifying fops on it already in flight are done; EBUSY while the file has POSIX locks.
//! Waiting is observed by polling the fop futures (and the spy below seeing nothing arrive),
//! never by sleeping; a gate on the spy holds a write "in flight".

mod common;

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

use common::{client, fd, fl, stack};
use xlator_api::abi_stable::std_types::ROption::RSome;
use xlator_api::{
    Buf, Ctx, DumpValue, Errno, Fd, FdId, Fop, Gfid, LkCmd, Loc, LockKind, SetAttr, Subvol,
    TimeSet, Timespec, Xattr,
};
use xlfs_testkit::MockHandle;

const DOMAIN: &str = "xlfs.dht.migrate";

/// The mover (client 1), a writer (client 2), another writer (client 3).
fn mover() -> Ctx {
    client(1, 77)
}
fn writer() -> Ctx {
    client(2, 5)
}

fn whole() -> xlator_api::Flock {
    fl(LockKind::Write, 0, 0, 77)
}

/// Creates `name` in the root and opens it read-write as fd `id`; its GFID and fd.
async fn file(top: &Subvol, name: &str, id: u64) -> (Gfid, Fd) {
    let e = top
        .create(
            &client(9, 0),
            Loc::new(Gfid::ROOT, name),
            fd(id, Gfid::NULL),
            0o644,
            0,
        )
        .await
        .expect("create");
    (e.attr.gfid, fd(id, e.attr.gfid))
}

/// A second fd (`id`) of client `cx` on `g`.
async fn open(top: &Subvol, cx: &Ctx, id: u64, g: Gfid) -> Fd {
    let f = fd(id, g);
    top.open(cx, f).await.expect("open");
    f
}

async fn barrier(top: &Subvol, g: Gfid, cmd: LkCmd) -> Result<(), Errno> {
    top.inodelk(&mover(), DOMAIN.into(), g, cmd, whole()).await
}

async fn unbarrier(top: &Subvol, g: Gfid) {
    top.inodelk(
        &mover(),
        DOMAIN.into(),
        g,
        LkCmd::Set,
        fl(LockKind::Unlock, 0, 0, 77),
    )
    .await
    .expect("unlock");
}

/// Polls `f` a few times, letting other tasks run in between: whether it is still pending.
async fn stalls<F: Future>(mut f: Pin<&mut F>) -> bool {
    for _ in 0..20 {
        if futures::poll!(f.as_mut()).is_ready() {
            return false;
        }
        tokio::task::yield_now().await;
    }
    true
}

/// Awaits `f`, failing the test after 5 s rather than hanging.
async fn done<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(5), f)
        .await
        .expect("did not finish")
}

fn count(h: &MockHandle, fop: Fop) -> usize {
    h.count(fop)
}

#[tokio::test]
async fn a_write_of_another_client_waits_for_the_barrier_and_goes_after_the_unlock() {
    let (top, h) = stack();
    let (g, _) = file(&top, "g", 1).await;
    let (other, _) = file(&top, "other", 2).await;
    let wg = open(&top, &writer(), 3, g).await;
    let wo = open(&top, &writer(), 4, other).await;
    barrier(&top, g, LkCmd::Set).await.expect("barrier");

    let mut w = pin!(top.writev(&writer(), wg, 0, Buf::from("late"), 0));
    assert!(stalls(w.as_mut()).await, "the write on G waits");
    assert_eq!(count(&h, Fop::Writev), 0, "and never reached the child");
    let r = done(top.writev(&writer(), wo, 0, Buf::from("x"), 0)).await;
    assert!(r.is_ok(), "a write on another file goes: {r:?}");
    let r = done(top.readv(&writer(), wg, 0, 10)).await;
    assert!(r.is_ok(), "a read of G goes: {r:?}");
    let r = done(top.stat(&writer(), g)).await;
    assert!(r.is_ok(), "a stat of G goes");

    unbarrier(&top, g).await;
    let r = done(w).await.expect("the held write");
    assert_eq!(r.written, 4);
    let back = done(top.readv(&writer(), wg, 0, 10)).await.expect("read");
    assert_eq!(&back.data[..], b"late");
}

#[tokio::test]
async fn the_grant_waits_for_a_write_in_flight_on_the_file() {
    let (top, h) = stack();
    let (g, _) = file(&top, "g", 1).await;
    let wg = open(&top, &writer(), 3, g).await;
    h.hold(Fop::Writev);
    let mut w = pin!(top.writev(&writer(), wg, 0, Buf::from("inflight"), 0));
    assert!(stalls(w.as_mut()).await);
    assert_eq!(h.held(Fop::Writev), 1, "the write is at the child");

    // Even the non-blocking request (no lock conflicts) waits for the drain.
    let mut b = pin!(barrier(&top, g, LkCmd::Set));
    assert!(stalls(b.as_mut()).await, "no grant while the write runs");
    h.open_gate(Fop::Writev);
    let mut b_done = false;
    // The write finishes first; the grant comes after it.
    let written = loop {
        if let Poll::Ready(r) = futures::poll!(w.as_mut()) {
            break r.expect("write");
        }
        if let Poll::Ready(r) = futures::poll!(b.as_mut()) {
            r.expect("barrier");
            b_done = true;
        }
        tokio::task::yield_now().await;
    };
    assert!(!b_done, "granted before the write in flight finished");
    assert_eq!(written.written, 8);
    done(b).await.expect("granted after the write");
    // And now a new write waits.
    let mut w2 = pin!(top.writev(&writer(), wg, 0, Buf::from("x"), 0));
    assert!(stalls(w2.as_mut()).await);
    unbarrier(&top, g).await;
    done(w2).await.expect("after the unlock");
}

#[tokio::test]
async fn posix_locks_make_the_barrier_busy_until_released() {
    let (top, _h) = stack();
    let (g, _) = file(&top, "g", 1).await;
    let app = client(3, 9);
    let af = open(&top, &app, 5, g).await;
    top.lk(&app, af, LkCmd::Set, fl(LockKind::Read, 10, 5, 9))
        .await
        .expect("application lock");
    assert_eq!(barrier(&top, g, LkCmd::Set).await, Err(Errno::EBUSY));
    assert_eq!(barrier(&top, g, LkCmd::SetWait).await, Err(Errno::EBUSY));
    // Nothing was left behind by the refusals: writes go.
    let wg = open(&top, &writer(), 3, g).await;
    done(top.writev(&writer(), wg, 0, Buf::from("x"), 0))
        .await
        .expect("write");
    top.lk(&app, af, LkCmd::Set, fl(LockKind::Unlock, 10, 5, 9))
        .await
        .expect("unlock");
    barrier(&top, g, LkCmd::Set).await.expect("fine now");
    // An ordinary inodelk of the domain (a part of the file) is no barrier.
    let part = top
        .inodelk(
            &client(4, 1),
            DOMAIN.into(),
            Gfid::random(),
            LkCmd::Set,
            fl(LockKind::Write, 0, 10, 1),
        )
        .await;
    assert!(part.is_ok());
}

#[tokio::test]
async fn the_holders_own_writes_pass_and_forgetting_it_lets_the_waiters_go() {
    let (top, _h) = stack();
    let (g, _) = file(&top, "g", 1).await;
    let wg = open(&top, &writer(), 3, g).await;
    let mine = open(&top, &mover(), 6, g).await;
    barrier(&top, g, LkCmd::SetWait).await.expect("barrier");
    // The holder's client, with another lock owner too.
    done(top.writev(&mover(), mine, 0, Buf::from("own"), 0))
        .await
        .expect("own write");
    done(top.writev(&client(1, 3), mine, 3, Buf::from("!"), 0))
        .await
        .expect("own client, other owner");

    let mut w = pin!(top.writev(&writer(), wg, 0, Buf::from("B"), 0));
    assert!(stalls(w.as_mut()).await);
    let d = top.dump();
    assert_eq!(d.find_u64("barriers_count"), Some(1));
    assert_eq!(d.find_u64("barrier_waiting_fops"), Some(1));
    let Some(DumpValue::List(bs)) = d.find("barriers") else {
        panic!("no barrier list in {d:?}");
    };
    let DumpValue::Section(b) = &bs[0] else {
        panic!("entry");
    };
    assert_eq!(b.get("gfid"), Some(&DumpValue::Str(g.to_string().into())));
    assert_eq!(b.get("state"), Some(&DumpValue::Str("held".into())));
    assert_eq!(b.find_u64("client"), Some(1));

    top.forget_client(&Ctx::builder(0, 0).build(), xlator_api::ClientId(1))
        .await
        .expect("forget");
    done(w).await.expect("released by the forget");
    assert_eq!(top.dump().find_u64("barriers_count"), Some(0));
    // Another mover can take it now.
    top.inodelk(&client(5, 1), DOMAIN.into(), g, LkCmd::Set, whole())
        .await
        .expect("barrier of another client");
}

#[tokio::test]
async fn size_changes_xattrs_and_times_are_held_too() {
    let (top, _h) = stack();
    let (g, _) = file(&top, "g", 1).await;
    let wg = open(&top, &writer(), 3, g).await;
    barrier(&top, g, LkCmd::Set).await.expect("barrier");

    let trunc = SetAttr {
        size: RSome(0),
        ..SetAttr::default()
    };
    let times = SetAttr {
        mtime: TimeSet::At(Timespec { sec: 1, nsec: 0 }),
        atime: TimeSet::Now,
        ..SetAttr::default()
    };
    let x = Xattr {
        name: "user.k".into(),
        value: Buf::from("v"),
    };
    let cx = writer();
    let mut a = pin!(top.fsetattr(&cx, wg, trunc));
    let mut b = pin!(top.setxattr(&cx, g, x, 0));
    let mut c = pin!(top.setattr(&cx, g, times));
    let trunc_open = Fd {
        id: FdId(8),
        gfid: g,
        flags: libc::O_RDWR | libc::O_TRUNC,
    };
    let mut d = pin!(top.open(&cx, trunc_open));
    let cfd = fd(9, Gfid::NULL);
    let mut e = pin!(top.create(
        &cx,
        Loc::new(Gfid::ROOT, "g"),
        Fd {
            flags: libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
            ..cfd
        },
        0o644,
        0
    ));
    assert!(stalls(a.as_mut()).await, "fsetattr with a size");
    assert!(stalls(b.as_mut()).await, "setxattr");
    assert!(stalls(c.as_mut()).await, "setattr of times");
    assert!(stalls(d.as_mut()).await, "open with O_TRUNC");
    assert!(stalls(e.as_mut()).await, "create with O_TRUNC of G's name");
    assert_eq!(top.dump().find_u64("barrier_waiting_fops"), Some(5));
    // A create of a new name, and an open without O_TRUNC, go.
    done(top.create(
        &cx,
        Loc::new(Gfid::ROOT, "new"),
        fd(10, Gfid::NULL),
        0o644,
        0,
    ))
    .await
    .expect("create of another name");
    done(top.open(&cx, fd(11, g))).await.expect("plain open");

    unbarrier(&top, g).await;
    done(a).await.expect("fsetattr");
    done(b).await.expect("setxattr");
    done(c).await.expect("setattr");
    done(d).await.expect("open");
    done(e).await.expect("create");
}

#[tokio::test]
async fn a_barrier_given_up_while_draining_is_given_back() {
    let (top, h) = stack();
    let (g, _) = file(&top, "g", 1).await;
    let wg = open(&top, &writer(), 3, g).await;
    h.hold(Fop::Writev);
    let mut w = pin!(top.writev(&writer(), wg, 0, Buf::from("x"), 0));
    assert!(stalls(w.as_mut()).await);
    {
        let mut b = pin!(barrier(&top, g, LkCmd::SetWait));
        assert!(stalls(b.as_mut()).await);
        assert_eq!(top.dump().find_u64("barriers_count"), Some(1));
    } // dropped: the mover gave up
    assert_eq!(top.dump().find_u64("barriers_count"), Some(0));
    h.open_gate(Fop::Writev);
    done(w).await.expect("write");
    // The lock went too: another client takes the barrier at once.
    done(top.inodelk(&client(5, 1), DOMAIN.into(), g, LkCmd::Set, whole()))
        .await
        .expect("free");
}
