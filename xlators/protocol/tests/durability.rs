//! A brick whose machine restarted may have lost writes it acknowledged but never synced
//! (issue 25 item 6). Before, the client re-opened its fds on the new brick and a later fsync
//! returned 0: the application was told its data was safe. Now the brick's boot id travels in
//! the welcome, and an fd with writes acknowledged under another boot id fails its next
//! fsync or flush with EIO, once.

mod common;

use std::time::Duration;

use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_testkit::memfs::MemLeaf;

fn fd(n: u64, gfid: Gfid) -> Fd {
    Fd {
        id: FdId(n),
        gfid,
        flags: libc::O_RDWR,
    }
}

/// A file `name` with fds 1..=4 open on it through `top`: 1 and 2 written and not synced,
/// 3 written and synced, 4 only read.
async fn four_fds(top: &Subvol, name: &str) -> Gfid {
    let c = Ctx::root();
    let e = top
        .create(&c, Loc::new(Gfid::ROOT, name), fd(1, Gfid::NULL), 0o644, 0)
        .await
        .expect("create");
    let g = e.attr.gfid;
    for n in 2..=4 {
        top.open(&c, fd(n, g)).await.expect("open");
    }
    for n in 1..=3 {
        top.writev(&c, fd(n, g), 0, Buf::from("data"), 0)
            .await
            .expect("write");
    }
    top.fsync(&c, fd(3, g), false).await.expect("fsync 3");
    top.readv(&c, fd(4, g), 0, 4).await.expect("read 4");
    g
}

async fn restart(leaf: &Subvol, server: Subvol, port: u16, mode: &str, top: &Subvol) -> Subvol {
    drop(server);
    // The client notices the drop, then reconnects to the new brick.
    for _ in 0..200 {
        if top.stat(&Ctx::root(), Gfid::ROOT).await == Err(Errno::ENOTCONN) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = common::server_on(leaf, port, &[("boot-id", mode)]).await;
    common::wait_up(top).await;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unsynced_writes_of_a_rebooted_brick_fail_the_next_fsync_and_flush_once() {
    // `boot-id process`: this in-memory leaf stands for a brick that loses what it did not
    // sync when it restarts (as a brick machine's crash does).
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[("boot-id", "process")]);
    let top = common::client(addr, &[("ping-timeout", "2s")]);
    common::wait_up(&top).await;
    let g = four_fds(&top, "f").await;
    let _server = restart(&leaf, server, addr.port(), "process", &top).await;
    let c = Ctx::root();
    assert_eq!(
        top.fsync(&c, fd(1, g), false).await,
        Err(Errno::EIO),
        "fd 1"
    );
    assert_eq!(
        top.fsync(&c, fd(1, g), false).await,
        Ok(()),
        "reported once"
    );
    assert_eq!(
        top.flush(&c, fd(2, g)).await,
        Err(Errno::EIO),
        "fd 2 (flush)"
    );
    assert_eq!(top.flush(&c, fd(2, g)).await, Ok(()), "reported once");
    assert_eq!(
        top.fsync(&c, fd(3, g), false).await,
        Ok(()),
        "fd 3 had synced"
    );
    assert_eq!(
        top.fsync(&c, fd(4, g), false).await,
        Ok(()),
        "fd 4 never wrote"
    );
    // New writes after the restart are the new brick's: a sync after them is clean.
    top.writev(&c, fd(1, g), 0, Buf::from("again"), 0)
        .await
        .expect("write");
    assert_eq!(top.fsync(&c, fd(1, g), false).await, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_brick_process_restart_on_the_same_machine_loses_nothing() {
    // `boot-id host` (the default): the kernel's boot id. A restarted brick process finds
    // acknowledged writes in the page cache, so nothing is reported.
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[]);
    let top = common::client(addr, &[("ping-timeout", "2s")]);
    common::wait_up(&top).await;
    let g = four_fds(&top, "g").await;
    let _server = restart(&leaf, server, addr.port(), "host", &top).await;
    let c = Ctx::root();
    assert_eq!(top.fsync(&c, fd(1, g), false).await, Ok(()));
    assert_eq!(top.flush(&c, fd(2, g)).await, Ok(()));
}

/// Writes through anonymous fds (xlfs-nfsd's UNSTABLE writes) are remembered by file: after a
/// brick reboot the next anonymous fsync of a file written and not synced fails with EIO once;
/// a file synced before, or not written, syncs clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unsynced_writes_through_anonymous_fds_are_reported_per_file_after_a_reboot() {
    let leaf = MemLeaf::new();
    let (server, addr) = common::server(&leaf, &[("boot-id", "process")]);
    let top = common::client(addr, &[("ping-timeout", "2s")]);
    common::wait_up(&top).await;
    let c = Ctx::root();
    let mut files = Vec::new();
    for (n, name) in ["written", "synced", "read"].into_iter().enumerate() {
        let e = top
            .create(
                &c,
                Loc::new(Gfid::ROOT, name),
                fd(10 + n as u64, Gfid::NULL),
                0o644,
                0,
            )
            .await
            .expect("create");
        top.release(&c, fd(10 + n as u64, e.attr.gfid))
            .await
            .expect("release");
        files.push(e.attr.gfid);
    }
    let anon = |g: Gfid| Fd::anonymous(g, libc::O_WRONLY);
    for g in &files[..2] {
        top.writev(&c, anon(*g), 0, Buf::from("unstable"), 0)
            .await
            .expect("write");
    }
    top.fsync(&c, anon(files[1]), false).await.expect("commit");
    top.readv(&c, anon(files[2]), 0, 4).await.expect("read");
    let _server = restart(&leaf, server, addr.port(), "process", &top).await;
    assert_eq!(top.fsync(&c, anon(files[0]), false).await, Err(Errno::EIO));
    assert_eq!(top.fsync(&c, anon(files[0]), false).await, Ok(()), "once");
    assert_eq!(top.fsync(&c, anon(files[1]), false).await, Ok(()), "synced");
    assert_eq!(
        top.fsync(&c, anon(files[2]), false).await,
        Ok(()),
        "not written"
    );
}
