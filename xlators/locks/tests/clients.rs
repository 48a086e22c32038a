//! Locks are keyed by (client, owner): clients naming the same lock owner conflict,
//! `forget_client` drops a gone client's locks and waiting requests and grants what waited
//! behind them, and a waiting request whose future is dropped is withdrawn for good.
//! Waiting is observed by polling the fop future once (no sleeps).

mod common;

use std::pin::pin;

use common::{client, cx, fd, fl, stack};
use futures::poll;
use xlator_api::{ClientId, DumpValue, EntrylkCmd, Errno, Fop, Gfid, LkCmd, Loc, LockKind};

fn w(start: u64, len: u64) -> xlator_api::Flock {
    fl(LockKind::Write, start, len, 0)
}

#[tokio::test]
async fn lk_clients_with_the_same_owner_and_fd_id_conflict() {
    let (top, _h) = stack();
    let g = Gfid::random();
    // Both clients use lock owner 0 and fd id 1: numbers of their own connections.
    let (c1, c2) = (client(1, 0), client(2, 0));
    top.lk(&c1, fd(1, g), LkCmd::Set, w(0, 100))
        .await
        .expect("client 1");
    let r = top.lk(&c2, fd(1, g), LkCmd::Set, w(50, 1)).await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    let got = top
        .lk(&c2, fd(1, g), LkCmd::Get, w(50, 1))
        .await
        .expect("getlk");
    assert_eq!((got.kind, got.start, got.len), (LockKind::Write, 0, 100));
    let r = top.lk(&cx(0), fd(1, g), LkCmd::Set, w(0, 1)).await;
    assert_eq!(
        r.err(),
        Some(Errno::EAGAIN),
        "a local owner 0 is another one"
    );
    // Client 2 closing its fd 1 (flush with owner 0, release) leaves client 1's lock alone.
    let _ = top.flush(&c2, fd(1, g)).await;
    let _ = top.release(&c2, fd(1, g)).await;
    let r = top.lk(&c2, fd(2, g), LkCmd::Set, w(0, 1)).await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    // The same (client, owner) re-locks freely: a read lock replaces part of its write lock.
    top.lk(&c1, fd(1, g), LkCmd::Set, fl(LockKind::Read, 0, 10, 0))
        .await
        .expect("same owner replaces");
    top.lk(&c2, fd(2, g), LkCmd::Set, fl(LockKind::Read, 0, 10, 0))
        .await
        .expect("readers share");
    // Client 1's own release of fd 1 does free it.
    let _ = top.release(&c1, fd(1, g)).await;
    top.lk(&c2, fd(2, g), LkCmd::Set, w(10, 90))
        .await
        .expect("free after client 1's release");
}

#[tokio::test]
async fn inodelk_clients_with_the_same_owner_conflict() {
    let (top, _h) = stack();
    let g = Gfid::random();
    let (c1, c2) = (client(1, 0), client(2, 0));
    top.inodelk(&c1, "afr".into(), g, LkCmd::Set, w(0, 0))
        .await
        .expect("client 1");
    let r = top.inodelk(&c2, "afr".into(), g, LkCmd::Set, w(0, 0)).await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    let r = top.inodelk(&c2, "afr".into(), g, LkCmd::Get, w(0, 1)).await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    top.inodelk(&c1, "afr".into(), g, LkCmd::Set, w(10, 10))
        .await
        .expect("same client and owner does not conflict with itself");
    top.inodelk(&c1, "afr".into(), g, LkCmd::Get, w(0, 1))
        .await
        .expect("nor on a test");
}

#[tokio::test]
async fn entrylk_clients_with_the_same_owner_conflict() {
    let (top, _h) = stack();
    let dir = Gfid::random();
    let a = || Loc::new(dir, "a");
    let (c1, c2) = (client(1, 0), client(2, 0));
    top.entrylk(&c1, "dht".into(), a(), EntrylkCmd::LockNonBlocking)
        .await
        .expect("client 1");
    let r = top
        .entrylk(&c2, "dht".into(), a(), EntrylkCmd::LockNonBlocking)
        .await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
    let r = top
        .entrylk(&c2, "dht".into(), a(), EntrylkCmd::Unlock)
        .await;
    assert_eq!(r.err(), Some(Errno::EINVAL), "client 2 holds nothing");
    // Same (client, owner): counted, unlocked as many times.
    top.entrylk(&c1, "dht".into(), a(), EntrylkCmd::LockNonBlocking)
        .await
        .expect("again");
    top.entrylk(&c1, "dht".into(), a(), EntrylkCmd::Unlock)
        .await
        .expect("once");
    let r = top
        .entrylk(&c2, "dht".into(), a(), EntrylkCmd::LockNonBlocking)
        .await;
    assert_eq!(r.err(), Some(Errno::EAGAIN), "still held once");
    top.entrylk(&c1, "dht".into(), a(), EntrylkCmd::Unlock)
        .await
        .expect("twice");
    top.entrylk(&c2, "dht".into(), a(), EntrylkCmd::LockNonBlocking)
        .await
        .expect("free");
}

#[tokio::test]
async fn forget_client_grants_a_dead_clients_locks_to_waiters() {
    let (top, h) = stack();
    let (g, dir) = (Gfid::random(), Gfid::random());
    let (dead, live) = (client(1, 7), client(2, 7));
    top.inodelk(
        &dead,
        "afr".into(),
        g,
        LkCmd::Set,
        fl(LockKind::Write, 0, 0, 7),
    )
    .await
    .expect("inodelk");
    top.entrylk(&dead, "afr".into(), Loc::new(dir, "x"), EntrylkCmd::Lock)
        .await
        .expect("entrylk");
    let mut ino = pin!(top.inodelk(
        &live,
        "afr".into(),
        g,
        LkCmd::SetWait,
        fl(LockKind::Write, 5, 1, 7)
    ));
    let mut ent = pin!(top.entrylk(&live, "afr".into(), Loc::new(dir, ""), EntrylkCmd::Lock));
    assert!(poll!(ino.as_mut()).is_pending());
    assert!(poll!(ent.as_mut()).is_pending());
    assert_eq!(top.dump().find_u64("waiting"), Some(2));

    top.forget_client(&cx(0), ClientId(1))
        .await
        .expect("forget_client");
    assert!(matches!(
        poll!(ino.as_mut()),
        std::task::Poll::Ready(Ok(()))
    ));
    assert!(matches!(
        poll!(ent.as_mut()),
        std::task::Poll::Ready(Ok(()))
    ));
    let d = top.dump();
    assert_eq!(
        (d.find_u64("held"), d.find_u64("waiting")),
        (Some(2), Some(0))
    );
    assert_eq!(h.count(Fop::ForgetClient), 1, "passed down after");
    // Now the live client holds them: the dead one's id cannot take them back.
    let r = top
        .inodelk(
            &dead,
            "afr".into(),
            g,
            LkCmd::Set,
            fl(LockKind::Write, 5, 1, 7),
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
}

#[tokio::test]
async fn forget_client_keeps_other_clients_locks() {
    let (top, _h) = stack();
    let (g, dir) = (Gfid::random(), Gfid::random());
    let (c1, c2, c3) = (client(1, 0), client(2, 0), client(3, 0));
    top.lk(&c1, fd(1, g), LkCmd::Set, w(0, 10))
        .await
        .expect("lk 1");
    top.lk(&c2, fd(1, g), LkCmd::Set, w(20, 10))
        .await
        .expect("lk 2");
    top.inodelk(&c1, "afr".into(), g, LkCmd::Set, w(0, 10))
        .await
        .expect("inodelk 1");
    top.inodelk(&c2, "afr".into(), g, LkCmd::Set, w(20, 10))
        .await
        .expect("inodelk 2");
    top.entrylk(&c1, "afr".into(), Loc::new(dir, "a"), EntrylkCmd::Lock)
        .await
        .expect("entrylk 1");
    top.entrylk(&c2, "afr".into(), Loc::new(dir, "b"), EntrylkCmd::Lock)
        .await
        .expect("entrylk 2");

    top.forget_client(&cx(0), ClientId(2))
        .await
        .expect("forget 2");

    let eagain = Some(Errno::EAGAIN);
    assert_eq!(
        top.lk(&c3, fd(1, g), LkCmd::Set, w(0, 1)).await.err(),
        eagain
    );
    let r = top.inodelk(&c3, "afr".into(), g, LkCmd::Set, w(0, 1)).await;
    assert_eq!(r.err(), eagain);
    let r = top
        .entrylk(
            &c3,
            "afr".into(),
            Loc::new(dir, "a"),
            EntrylkCmd::LockNonBlocking,
        )
        .await;
    assert_eq!(r.err(), eagain);
    // Client 2's are gone.
    top.lk(&c3, fd(1, g), LkCmd::Set, w(20, 1))
        .await
        .expect("lk");
    top.inodelk(&c3, "afr".into(), g, LkCmd::Set, w(20, 1))
        .await
        .expect("inodelk");
    top.entrylk(
        &c3,
        "afr".into(),
        Loc::new(dir, "b"),
        EntrylkCmd::LockNonBlocking,
    )
    .await
    .expect("entrylk");
}

#[tokio::test]
async fn forget_client_fails_its_waiting_requests() {
    let (top, _h) = stack();
    let g = Gfid::random();
    top.inodelk(&client(1, 0), "afr".into(), g, LkCmd::Set, w(0, 0))
        .await
        .expect("holder");
    let mut waiter = pin!(top.inodelk(&client(2, 0), "afr".into(), g, LkCmd::SetWait, w(0, 0)));
    assert!(poll!(waiter.as_mut()).is_pending());
    top.forget_client(&cx(0), ClientId(2))
        .await
        .expect("forget");
    assert!(matches!(
        poll!(waiter.as_mut()),
        std::task::Poll::Ready(Err(Errno::ENOTCONN))
    ));
    // Its request is not granted later either.
    top.forget_client(&cx(0), ClientId(1))
        .await
        .expect("forget");
    let d = top.dump();
    assert_eq!(
        (d.find_u64("held"), d.find_u64("waiting")),
        (Some(0), Some(0))
    );
}

#[tokio::test]
async fn a_dropped_waiting_request_is_never_granted() {
    let (top, _h) = stack();
    let (g, dir) = (Gfid::random(), Gfid::random());
    let (c1, c2, c3) = (client(1, 0), client(2, 0), client(3, 0));
    top.inodelk(&c1, "afr".into(), g, LkCmd::Set, w(0, 0))
        .await
        .expect("inodelk");
    top.entrylk(&c1, "afr".into(), Loc::new(dir, "x"), EntrylkCmd::Lock)
        .await
        .expect("entrylk");
    {
        let mut ino = pin!(top.inodelk(&c2, "afr".into(), g, LkCmd::SetWait, w(0, 0)));
        let mut ent = pin!(top.entrylk(&c2, "afr".into(), Loc::new(dir, "x"), EntrylkCmd::Lock));
        assert!(poll!(ino.as_mut()).is_pending());
        assert!(poll!(ent.as_mut()).is_pending());
        assert_eq!(top.dump().find_u64("waiting"), Some(2));
    } // the server dropped both (client abandoned them)
    assert_eq!(top.dump().find_u64("waiting"), Some(0), "no leaked waiter");
    top.inodelk(
        &c1,
        "afr".into(),
        g,
        LkCmd::Set,
        fl(LockKind::Unlock, 0, 0, 0),
    )
    .await
    .expect("unlock");
    top.entrylk(&c1, "afr".into(), Loc::new(dir, "x"), EntrylkCmd::Unlock)
        .await
        .expect("unlock");
    assert_eq!(top.dump().find_u64("held"), Some(0), "nobody got them");
    top.inodelk(&c3, "afr".into(), g, LkCmd::Set, w(0, 0))
        .await
        .expect("free");
    top.entrylk(
        &c3,
        "afr".into(),
        Loc::new(dir, "x"),
        EntrylkCmd::LockNonBlocking,
    )
    .await
    .expect("free");
}

#[tokio::test]
async fn a_grant_racing_with_the_drop_is_given_back() {
    let (top, _h) = stack();
    let g = Gfid::random();
    let (c1, c2) = (client(1, 0), client(2, 0));
    top.lk(&c1, fd(1, g), LkCmd::Set, w(0, 10))
        .await
        .expect("holder");
    {
        let mut waiter = pin!(top.lk(&c2, fd(1, g), LkCmd::SetWait, w(0, 10)));
        assert!(poll!(waiter.as_mut()).is_pending());
        // Granted and sent to the waiter, which is dropped before it looks.
        top.lk(&c1, fd(1, g), LkCmd::Set, fl(LockKind::Unlock, 0, 0, 0))
            .await
            .expect("unlock");
        assert_eq!(top.dump().find_u64("held"), Some(1), "granted meanwhile");
    }
    let d = top.dump();
    assert_eq!(
        (d.find_u64("held"), d.find_u64("waiting")),
        (Some(0), Some(0))
    );
    top.lk(&c1, fd(1, g), LkCmd::Set, w(0, 10))
        .await
        .expect("free");
}

#[tokio::test]
async fn a_failed_then_dropped_request_keeps_the_owners_other_locks() {
    let (top, _h) = stack();
    let g = Gfid::random();
    let (c1, c2, c3) = (client(1, 0), client(2, 0), client(3, 0));
    let r = |s, l| fl(LockKind::Read, s, l, 0);
    top.lk(&c1, fd(1, g), LkCmd::Set, r(0, 10))
        .await
        .expect("c1 read");
    top.lk(&c2, fd(5, g), LkCmd::Set, r(0, 10))
        .await
        .expect("c2 read");
    {
        // Client 2 asks to upgrade through another fd and waits for client 1's read lock;
        // then it closes that fd (EBADF to the waiter) and the request is dropped unread.
        let mut waiter = pin!(top.lk(&c2, fd(2, g), LkCmd::SetWait, w(0, 10)));
        assert!(poll!(waiter.as_mut()).is_pending());
        let _ = top.release(&c2, fd(2, g)).await;
    }
    top.lk(&c1, fd(1, g), LkCmd::Set, fl(LockKind::Unlock, 0, 0, 0))
        .await
        .expect("unlock");
    // Nothing was granted, so nothing is given back: client 2's read lock through fd 5 stays.
    let r = top.lk(&c3, fd(1, g), LkCmd::Set, w(0, 10)).await;
    assert_eq!(r.err(), Some(Errno::EAGAIN));
}

#[tokio::test]
async fn dump_lists_locks_with_their_client_and_is_bounded() {
    let (top, _h) = stack();
    let (g, dir) = (Gfid::random(), Gfid::random());
    // Non-adjacent ranges do not merge: 120 held locks (inodelk's owner is the Flock's).
    let l = |i: u64| fl(LockKind::Write, 2 * i, 1, 9);
    for i in 0..120 {
        top.inodelk(&client(4, 0), "afr".into(), g, LkCmd::Set, l(i))
            .await
            .expect("inodelk");
    }
    top.entrylk(&cx(3), "dht".into(), Loc::new(dir, "n"), EntrylkCmd::Lock)
        .await
        .expect("entrylk");
    let d = top.dump();
    assert_eq!(d.find_u64("held"), Some(121));
    assert_eq!(d.find_u64("locks_more"), Some(21));
    let Some(DumpValue::List(locks)) = d.get("locks") else {
        panic!("no lock list: {d:?}")
    };
    assert_eq!(locks.len(), 100);
    let sections: Vec<_> = locks
        .iter()
        .filter_map(|v| match v {
            DumpValue::Section(s) => Some(s),
            _ => None,
        })
        .collect();
    let ino = sections
        .iter()
        .find(|s| s.get("space") == Some(&DumpValue::Str("inodelk".into())))
        .expect("an inodelk entry");
    assert_eq!(ino.find_u64("client"), Some(4));
    assert_eq!(ino.find_u64("owner"), Some(9));
    assert_eq!(ino.get("kind"), Some(&DumpValue::Str("write".into())));
    assert_eq!(ino.get("gfid"), Some(&DumpValue::Str(g.to_string().into())));
    assert_eq!(ino.find_u64("len"), Some(1));
    assert_eq!(ino.get("state"), Some(&DumpValue::Str("held".into())));
    assert!(d.to_json().starts_with('{'));
}
