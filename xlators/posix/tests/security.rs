//! What a brick refuses whoever asks: callers it cannot switch to (credential switching fails
//! closed) and device nodes unless `allow-devices` is on. The caller tests need root (the
//! brick only switches credentials as root) and pass without it, saying so.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Ctx, Errno, FileType, Gfid, SetAttr};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn perm(p: u32) -> SetAttr {
    SetAttr {
        perm: ROption::RSome(p),
        ..SetAttr::default()
    }
}

/// (uid_t)-1 as a uid, a gid or a group: setfsuid/setfsgid leave the thread's ids as they
/// were (root) for it, so before the fix such a caller created root-owned files in root's
/// directories and read root's 0600 files. Now every fop of it is EPERM, and the threads it
/// ran on still serve other callers as themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_the_kernel_cannot_switch_to_is_refused_not_run_as_root() {
    if !is_root() {
        println!("SKIPPED: needs root (the brick switches credentials only as root)");
        return;
    }
    let (_d, top) = new_brick();
    let r = root();
    let priv_dir = mkdir(&top, &r, Gfid::ROOT, "root-only").await.attr.gfid;
    top.setattr(&r, priv_dir, perm(0o755)).await.expect("chmod");
    let secret = mkfile(&top, &r, Gfid::ROOT, "secret", b"root's")
        .await
        .attr
        .gfid;
    top.setattr(&r, secret, perm(0o600)).await.expect("chmod");
    let open_dir = mkdir(&top, &r, Gfid::ROOT, "open").await.attr.gfid;
    top.setattr(&r, open_dir, perm(0o777)).await.expect("chmod");
    let none = u32::MAX;
    let callers = [
        Ctx::new(none, none),
        Ctx::new(none, 1000),
        Ctx::new(1000, none),
        Ctx::new(0, none),
        Ctx::builder(1000, 1000).groups(&[100, none]).build(),
    ];
    for (i, cx) in callers.iter().enumerate() {
        let who = format!("uid {} gid {} groups {:?}", cx.uid(), cx.gid(), cx.groups());
        for round in 0..8 {
            let name = format!("made-{i}-{round}");
            let f = fd(Gfid::NULL, libc::O_RDWR);
            let made = top.create(cx, loc(priv_dir, &name), f, 0o644, 0o022).await;
            assert_eq!(made.err(), Some(Errno::EPERM), "create by {who}");
            let opened = top.open(cx, fd(secret, libc::O_RDONLY)).await;
            assert_eq!(
                opened.err(),
                Some(Errno::EPERM),
                "open of a 0600 file by {who}"
            );
            let looked = top.lookup(cx, loc(Gfid::ROOT, "secret")).await;
            assert_eq!(looked.err(), Some(Errno::EPERM), "lookup by {who}");
            // The pool threads went back to root: a user still runs as itself.
            let name = format!("user-{i}-{round}");
            let e = mkfile(&top, &user(1000), open_dir, &name, b"x").await;
            assert_eq!((e.attr.uid, e.attr.gid), (1000, 1000), "after {who}");
            let e = mkfile(&top, &r, open_dir, &format!("root-{i}-{round}"), b"").await;
            assert_eq!((e.attr.uid, e.attr.gid), (0, 0), "after {who}");
        }
    }
    let left = top.lookup(&r, loc(priv_dir, "made-0-0")).await;
    assert_eq!(left.err(), Some(Errno::ENOENT), "nothing was created");
}

/// mknod of a character or block device is EPERM (for root too) unless `allow-devices` is
/// on; FIFOs and sockets are always allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_nodes_need_allow_devices() {
    let (_d, top) = new_brick();
    let cx = root();
    let null = libc::makedev(1, 3);
    for (name, kind) in [("chr", libc::S_IFCHR), ("blk", libc::S_IFBLK)] {
        let r = top
            .mknod(&cx, loc(Gfid::ROOT, name), kind | 0o666, null, 0)
            .await;
        assert_eq!(r.err(), Some(Errno::EPERM), "{name} without allow-devices");
        let r = top.lookup(&cx, loc(Gfid::ROOT, name)).await;
        assert_eq!(r.err(), Some(Errno::ENOENT), "{name} was not made");
    }
    let fifo = top
        .mknod(&cx, loc(Gfid::ROOT, "fifo"), libc::S_IFIFO | 0o644, 0, 0)
        .await
        .expect("a fifo is always allowed");
    assert_eq!(fifo.attr.kind, FileType::Fifo);
    let sock = top
        .mknod(&cx, loc(Gfid::ROOT, "sock"), libc::S_IFSOCK | 0o644, 0, 0)
        .await
        .expect("a socket is always allowed");
    assert_eq!(sock.attr.kind, FileType::Socket);

    if !is_root() {
        println!("SKIPPED the allow-devices on half: making device nodes needs root");
        return;
    }
    let d = tempfile::tempdir().expect("tempdir");
    let top = try_brick(d.path(), &[("allow-devices", "on")]).expect("brick init");
    let chr = top
        .mknod(&cx, loc(Gfid::ROOT, "chr"), libc::S_IFCHR | 0o666, null, 0)
        .await
        .expect("chr with allow-devices");
    assert_eq!((chr.attr.kind, chr.attr.rdev), (FileType::CharDevice, null));
    let blk = top
        .mknod(&cx, loc(Gfid::ROOT, "blk"), libc::S_IFBLK | 0o600, null, 0)
        .await
        .expect("blk with allow-devices");
    assert_eq!(blk.attr.kind, FileType::BlockDevice);
}
