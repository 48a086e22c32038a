//! Lock requests over the wire, with features/locks on the brick: waiting requests never
//! stop the server from reading a connection (pings included), a wait the client abandons is
//! withdrawn on the brick, and a client that goes away is forgotten by the graph below.

mod common;

use std::time::{Duration, Instant};

use abi_stable::std_types::RString;
use common::probe::{self, Probe};
use xlator_api::{Ctx, Errno, Flock, Gfid, LkCmd, LkOwner, LockKind, Subvol};
use xlfs_locks::Locks;
use xlfs_testkit::build::try_build;
use xlfs_testkit::memfs::MemLeaf;

/// protocol/server over features/locks (`locks`) over memory; clients attach to `locks`.
fn brick(probe_name: Option<&str>) -> (Subvol, std::net::SocketAddr) {
    let leaf = MemLeaf::new();
    let leaf = match probe_name {
        Some(n) => try_build::<Probe>(n, &[], vec![leaf]).expect("probe"),
        None => leaf,
    };
    let locks = try_build::<Locks>("locks", &[], vec![leaf]).expect("locks");
    common::server(&locks, &[("unix-socket-dir", "")])
}

async fn client(addr: std::net::SocketAddr, extra: &[(&str, &str)]) -> Subvol {
    let mut o = vec![("remote-subvolume", "locks"), ("unix-socket-dir", "")];
    o.extend_from_slice(extra);
    let c = common::client(addr, &o);
    common::wait_up(&c).await;
    c
}

fn write_lock(owner: u64) -> Flock {
    Flock {
        kind: LockKind::Write,
        start: 0,
        len: 0,
        pid: 1,
        owner: LkOwner(owner),
    }
}

fn unlock(owner: u64) -> Flock {
    Flock {
        kind: LockKind::Unlock,
        ..write_lock(owner)
    }
}

fn owner_cx(owner: u64) -> Ctx {
    Ctx::builder(0, 0).lk_owner(LkOwner(owner)).build()
}

fn dom() -> RString {
    RString::from("test-domain")
}

/// More waiting lock requests than `max-inflight-per-connection` (256): the server keeps
/// reading the connection, so pings are answered and the client never declares the brick
/// down; other calls on the same connection are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_waiting_locks_do_not_stop_pings() {
    let (_server, addr) = brick(None);
    let holder = client(addr, &[]).await;
    let waiter = client(addr, &[("ping-timeout", "300ms")]).await;
    let g = Gfid::ROOT;
    holder
        .inodelk(&owner_cx(1), dom(), g, LkCmd::Set, write_lock(1))
        .await
        .expect("holder locks");
    let mut waits = Vec::new();
    for o in 0..300u64 {
        let w = waiter.clone();
        waits.push(tokio::spawn(async move {
            w.inodelk(
                &owner_cx(100 + o),
                dom(),
                g,
                LkCmd::SetWait,
                write_lock(100 + o),
            )
            .await
        }));
    }
    // Three ping timeouts with every one of them waiting.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(900) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waiter
            .stat(&Ctx::root(), g)
            .await
            .expect("the waiting client's connection still serves");
    }
    assert_eq!(
        common::json_field(&waiter, "disconnects"),
        serde_json::json!(0),
        "{}",
        waiter.dump().to_text(0)
    );
    assert!(waits.iter().all(|w| !w.is_finished()), "all still waiting");
    holder
        .inodelk(&owner_cx(1), dom(), g, LkCmd::Set, unlock(1))
        .await
        .expect("unlock");
    // The first waiter is granted now.
    drop(waits);
}

/// A waiting lock request the client abandons (its caller stops waiting) is withdrawn on
/// the brick: once the holder unlocks, a third client gets the lock at once, non-blocking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_wait_is_cancelled_on_the_brick() {
    let (_server, addr) = brick(None);
    let holder = client(addr, &[]).await;
    let quitter = client(addr, &[]).await;
    let third = client(addr, &[]).await;
    let g = Gfid::ROOT;
    holder
        .inodelk(&owner_cx(1), dom(), g, LkCmd::Set, write_lock(1))
        .await
        .expect("holder locks");
    let wait = quitter.inodelk(&owner_cx(2), dom(), g, LkCmd::SetWait, write_lock(2));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), wait)
            .await
            .is_err(),
        "the lock is held: the request waits"
    );
    // A round trip on the same connection: the cancel (sent before it) has been handled.
    quitter.stat(&Ctx::root(), g).await.expect("stat");
    holder
        .inodelk(&owner_cx(1), dom(), g, LkCmd::Set, unlock(1))
        .await
        .expect("unlock");
    third
        .inodelk(&owner_cx(3), dom(), g, LkCmd::Set, write_lock(3))
        .await
        .expect("nobody holds the lock: the abandoned wait was not granted");
}

/// A call timeout (frame-timeout) abandons a wait the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_wait_is_cancelled_on_the_brick() {
    let (_server, addr) = brick(None);
    let holder = client(addr, &[]).await;
    let quitter = client(addr, &[("frame-timeout", "200ms")]).await;
    let third = client(addr, &[]).await;
    let g = Gfid::ROOT;
    holder
        .inodelk(&owner_cx(1), dom(), g, LkCmd::Set, write_lock(1))
        .await
        .expect("holder locks");
    assert_eq!(
        quitter
            .inodelk(&owner_cx(2), dom(), g, LkCmd::SetWait, write_lock(2))
            .await,
        Err(Errno::ETIMEDOUT)
    );
    quitter.stat(&Ctx::root(), g).await.expect("stat");
    holder
        .inodelk(&owner_cx(1), dom(), g, LkCmd::Set, unlock(1))
        .await
        .expect("unlock");
    third
        .inodelk(&owner_cx(3), dom(), g, LkCmd::Set, write_lock(3))
        .await
        .expect("the timed-out wait was not granted");
}

/// When a client's connection ends, the server sends `forget_client` with that client's id
/// down its graph (features/locks drops the client's locks and waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_is_forgotten_below_the_server() {
    let (_server, addr) = brick(Some("probe-forget"));
    let log = probe::log("probe-forget");
    let gone = client(addr, &[]).await;
    let stays = client(addr, &[]).await;
    gone.stat(&Ctx::root(), Gfid::ROOT).await.expect("stat");
    let id = log
        .stats
        .lock()
        .expect("stats")
        .last()
        .and_then(|(id, _)| *id)
        .expect("the stat came with a client id");
    // The lock the departing client held is released for the others.
    gone.inodelk(&owner_cx(1), dom(), Gfid::ROOT, LkCmd::Set, write_lock(1))
        .await
        .expect("lock");
    drop(gone);
    let start = Instant::now();
    while !log.forgotten.lock().expect("forgotten").contains(&id) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "forget_client({id:?}) never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(log.forgotten.lock().expect("forgotten").len(), 1);
    stays
        .inodelk(&owner_cx(2), dom(), Gfid::ROOT, LkCmd::Set, write_lock(2))
        .await
        .expect("the gone client's lock was dropped");
}
