//! `storage/memory` behaviour beyond the conformance suite: space limits, open-unlinked
//! lifetime, renameat2 flags, locks, xattr namespaces, set-id bits.

use std::time::Duration;

use abi_stable::std_types::ROption;
use xlator_api::{
    Buf, Ctx, EntrylkCmd, Errno, Fd, FdId, Flock, Gfid, LkCmd, LkOwner, Loc, LockKind, SetAttr,
    Subvol, Xattr,
};
use xlfs_testkit::memfs::MemLeaf;

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

async fn create(top: &Subvol, cx: &Ctx, parent: Gfid, name: &str, id: u64) -> Fd {
    let f = fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let e = top
        .create(cx, Loc::new(parent, name), f, 0o644, 0)
        .await
        .expect("create");
    Fd {
        gfid: e.attr.gfid,
        ..f
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_fail_with_enospc_at_capacity() {
    let top = MemLeaf::with_capacity(16384);
    let cx = Ctx::root();
    let f = create(&top, &cx, Gfid::ROOT, "f", 1).await;
    let w = top.writev(&cx, f, 0, Buf::zeroed(16384), 0).await;
    assert_eq!(w.map(|w| w.written), Ok(16384));
    assert_eq!(w.map(|w| w.attr.map(|a| a.size)), Ok(ROption::RSome(16384)));
    assert_eq!(
        top.writev(&cx, f, 16384, Buf::from("x"), 0).await,
        Err(Errno::ENOSPC)
    );
    assert_eq!(top.statfs(&cx, Gfid::ROOT).await.expect("statfs").bfree, 0);
    let shrink = SetAttr {
        size: ROption::RSome(0),
        ..SetAttr::default()
    };
    top.fsetattr(&cx, f, shrink).await.expect("truncate");
    assert_eq!(top.statfs(&cx, Gfid::ROOT).await.expect("statfs").bfree, 4);
    let w = top.writev(&cx, f, 0, Buf::from("x"), 0).await;
    assert_eq!(w.map(|w| w.written), Ok(1));
    assert_eq!(w.map(|w| w.attr.map(|a| a.size)), Ok(ROption::RSome(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlinked_open_file_lives_until_release() {
    let top = MemLeaf::new();
    let cx = Ctx::root();
    let f = create(&top, &cx, Gfid::ROOT, "f", 1).await;
    let w = top
        .writev(&cx, f, 0, Buf::from("data"), 0)
        .await
        .expect("write");
    assert_eq!(w.attr.map(|a| a.size), ROption::RSome(4), "post-write size");
    top.unlink(&cx, Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("unlink");
    let r = top.readv(&cx, f, 0, 10).await;
    assert_eq!(r.clone().map(|b| b.data.to_vec()), Ok(b"data".to_vec()));
    assert_eq!(
        r.map(|b| b.attr.map(|a| a.size)),
        Ok(ROption::RSome(4)),
        "post-read size"
    );
    top.release(&cx, f).await.expect("release");
    assert_eq!(top.stat(&cx, f.gfid).await, Err(Errno::ESTALE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_noreplace_and_exchange() {
    let top = MemLeaf::new();
    let cx = Ctx::root();
    let a = create(&top, &cx, Gfid::ROOT, "a", 1).await.gfid;
    let d = top
        .mkdir(&cx, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid;
    let (la, ld) = (Loc::new(Gfid::ROOT, "a"), Loc::new(Gfid::ROOT, "d"));
    assert_eq!(
        top.rename(&cx, la.clone(), ld.clone(), 1).await,
        Err(Errno::EEXIST)
    );
    top.rename(&cx, la.clone(), ld.clone(), 2)
        .await
        .expect("exchange");
    assert_eq!(top.lookup(&cx, la.clone()).await.expect("a").attr.gfid, d);
    assert_eq!(top.lookup(&cx, ld).await.expect("d").attr.gfid, a);
    let missing = Loc::new(Gfid::ROOT, "missing");
    assert_eq!(top.rename(&cx, la, missing, 2).await, Err(Errno::ENOENT));
    assert_eq!(top.stat(&cx, Gfid::ROOT).await.expect("root").nlink, 3);
}

fn lock(kind: LockKind, owner: u64) -> Flock {
    Flock {
        kind,
        start: 0,
        len: 0,
        pid: 1,
        owner: LkOwner(owner),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_lock_waits_for_unlock() {
    let top = MemLeaf::new();
    let cx = Ctx::root();
    let f = create(&top, &cx, Gfid::ROOT, "f", 1).await;
    top.lk(&cx, f, LkCmd::SetWait, lock(LockKind::Write, 1))
        .await
        .expect("first lock");
    let waiter = {
        let top = top.clone();
        tokio::spawn(async move {
            top.lk(&Ctx::root(), f, LkCmd::SetWait, lock(LockKind::Read, 2))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!waiter.is_finished(), "a conflicting SETLKW was granted");
    top.lk(&cx, f, LkCmd::Set, lock(LockKind::Unlock, 1))
        .await
        .expect("unlock");
    let granted = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .expect("task");
    assert_eq!(granted.map(|l| l.kind), Ok(LockKind::Read));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_and_inode_locks_exclude_other_owners() {
    let top = MemLeaf::new();
    let a = Ctx::root().to_builder().lk_owner(LkOwner(1)).build();
    let b = Ctx::root().to_builder().lk_owner(LkOwner(2)).build();
    let name = |n: &str| Loc::new(Gfid::ROOT, n);
    top.entrylk(&a, "dht".into(), name("x"), EntrylkCmd::Lock)
        .await
        .expect("lock x");
    let nb = EntrylkCmd::LockNonBlocking;
    assert_eq!(
        top.entrylk(&b, "dht".into(), name("x"), nb).await,
        Err(Errno::EAGAIN)
    );
    assert_eq!(
        top.entrylk(&b, "dht".into(), name(""), nb).await,
        Err(Errno::EAGAIN)
    );
    top.entrylk(&b, "dht".into(), name("y"), nb)
        .await
        .expect("other name");
    top.entrylk(&b, "afr".into(), name("x"), nb)
        .await
        .expect("other domain");
    assert_eq!(
        top.entrylk(&b, "dht".into(), name("x"), EntrylkCmd::Unlock)
            .await,
        Err(Errno::EINVAL)
    );
    top.entrylk(&a, "dht".into(), name("x"), EntrylkCmd::Unlock)
        .await
        .expect("unlock");
    top.entrylk(&b, "dht".into(), name("x"), nb)
        .await
        .expect("free after unlock");

    let cx = Ctx::root();
    top.inodelk(
        &cx,
        "d1".into(),
        Gfid::ROOT,
        LkCmd::Set,
        lock(LockKind::Write, 1),
    )
    .await
    .expect("inodelk");
    let r = top
        .inodelk(
            &cx,
            "d1".into(),
            Gfid::ROOT,
            LkCmd::Set,
            lock(LockKind::Write, 2),
        )
        .await;
    assert_eq!(r, Err(Errno::EAGAIN));
    top.inodelk(
        &cx,
        "d2".into(),
        Gfid::ROOT,
        LkCmd::Set,
        lock(LockKind::Write, 2),
    )
    .await
    .expect("other domain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_xattrs_are_root_only() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let user = Ctx::new(1000, 1000);
    let f = create(&top, &root, Gfid::ROOT, "f", 1).await;
    let mode = SetAttr {
        perm: ROption::RSome(0o666),
        ..SetAttr::default()
    };
    top.setattr(&root, f.gfid, mode).await.expect("chmod");
    let x = |n: &str| Xattr {
        name: n.into(),
        value: Buf::from("v"),
    };
    top.setxattr(&root, f.gfid, x("trusted.afr"), 0)
        .await
        .expect("root sets trusted");
    top.setxattr(&user, f.gfid, x("user.mine"), 0)
        .await
        .expect("user sets user.*");
    assert_eq!(
        top.getxattr(&user, f.gfid, "trusted.afr".into()).await,
        Err(Errno::ENODATA)
    );
    assert_eq!(
        top.setxattr(&user, f.gfid, x("trusted.afr"), 0).await,
        Err(Errno::EPERM)
    );
    assert_eq!(
        top.setxattr(&root, f.gfid, x("system.posix_acl_access"), 0)
            .await,
        Err(Errno::ENOTSUP)
    );
    assert_eq!(
        top.setxattr(&root, f.gfid, x("bogus"), 0).await,
        Err(Errno::ENOTSUP)
    );
    let names = |v: abi_stable::std_types::RVec<abi_stable::std_types::RString>| {
        v.into_iter().map(|s| s.into_string()).collect::<Vec<_>>()
    };
    assert_eq!(
        names(top.listxattr(&user, f.gfid).await.expect("list")),
        vec!["user.mine"]
    );
    assert_eq!(
        names(top.listxattr(&root, f.gfid).await.expect("list")),
        vec!["trusted.afr", "user.mine"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonroot_write_clears_set_id_bits() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let f = create(&top, &root, Gfid::ROOT, "f", 1).await;
    let set = SetAttr {
        uid: ROption::RSome(1000),
        perm: ROption::RSome(0o6775),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&root, f.gfid, set).await.expect("setattr").perm,
        0o6775
    );
    let user = Ctx::new(1000, 1000);
    let ufd = fd(2, f.gfid, libc::O_WRONLY);
    top.open(&user, ufd).await.expect("open");
    top.writev(&user, ufd, 0, Buf::from("x"), 0)
        .await
        .expect("write");
    assert_eq!(top.stat(&root, f.gfid).await.expect("stat").perm, 0o775);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setgid_directory_passes_its_group_down() {
    let top = MemLeaf::new();
    let root = Ctx::root();
    let d = top
        .mkdir(&root, Loc::new(Gfid::ROOT, "shared"), 0o2777, 0)
        .await
        .expect("mkdir")
        .attr;
    let set = SetAttr {
        gid: ROption::RSome(50),
        ..SetAttr::default()
    };
    top.setattr(&root, d.gfid, set).await.expect("chgrp");
    let user = Ctx::new(1000, 1000);
    let f = create(&top, &user, d.gfid, "f", 1).await;
    assert_eq!(top.stat(&root, f.gfid).await.expect("stat").gid, 50);
    let sub = top
        .mkdir(&user, Loc::new(d.gfid, "sub"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr;
    assert_eq!((sub.gid, sub.perm & libc::S_ISGID), (50, libc::S_ISGID));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nameless_and_dot_lookups() {
    let top = MemLeaf::new();
    let cx = Ctx::root();
    let root = top
        .lookup(&cx, Loc::new(Gfid::ROOT, ""))
        .await
        .expect("nameless root")
        .attr;
    assert_eq!(
        (root.gfid, root.is_dir(), root.perm),
        (Gfid::ROOT, true, 0o755)
    );
    let d = top
        .mkdir(&cx, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr;
    assert_eq!(
        top.lookup(&cx, Loc::new(d.gfid, ".."))
            .await
            .expect("..")
            .attr
            .gfid,
        Gfid::ROOT
    );
    assert_eq!(
        top.lookup(&cx, Loc::new(d.gfid, "."))
            .await
            .expect(".")
            .attr
            .gfid,
        d.gfid
    );
    assert_eq!(
        top.lookup(&cx, Loc::new(Gfid::ROOT, ".."))
            .await
            .expect("root ..")
            .attr
            .gfid,
        Gfid::ROOT
    );
    assert_eq!(
        top.rmdir(&cx, Loc::new(d.gfid, ".")).await,
        Err(Errno::EINVAL)
    );
    assert_eq!(
        top.lookup(&cx, Loc::new(Gfid::random(), "x"))
            .await
            .map(|e| e.attr),
        Err(Errno::ESTALE)
    );
}
