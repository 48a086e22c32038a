//! Permission semantics for non-root callers: the brick runs each fop under the caller's fs
//! uid/gid/groups, so the kernel's rules apply. Skipped when the tests do not run as root.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Errno, Fd, Gfid, SetAttr, TimeSet, Timespec, Xattr};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_ops_follow_directory_permissions() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let r = root();
    let (alice, bob) = (user(1000), user(2000));
    let pubd = mkdir(&top, &r, Gfid::ROOT, "pub").await.attr.gfid;
    top.setattr(&r, pubd, perm(0o1777)).await.expect("sticky");
    let privd = mkdir(&top, &r, Gfid::ROOT, "priv").await.attr.gfid;
    top.setattr(&r, privd, perm(0o700)).await.expect("private");
    assert_eq!(
        top.mkdir(&alice, loc(privd, "x"), 0o755, 0).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        top.lookup(&alice, loc(privd, "x")).await.err(),
        Some(Errno::EACCES)
    );
    let mine = top
        .mkdir(&alice, loc(pubd, "mine"), 0o755, 0o022)
        .await
        .expect("mkdir");
    assert_eq!((mine.attr.uid, mine.attr.gid), (1000, 1000));
    let f = mkfile(&top, &alice, pubd, "af", b"alice").await;
    assert_eq!((f.attr.uid, f.attr.gid), (1000, 1000));
    // Sticky directory: bob cannot remove or rename alice's file.
    assert_eq!(
        top.unlink(&bob, loc(pubd, "af")).await.err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        top.rename(&bob, loc(pubd, "af"), loc(pubd, "bf"), 0)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    top.rename(&alice, loc(pubd, "af"), loc(pubd, "af2"), 0)
        .await
        .expect("owner renames");
    // bob cannot create in alice's 0755 directory.
    let c = top
        .create(
            &bob,
            loc(mine.attr.gfid, "b"),
            fd(Gfid::NULL, libc::O_WRONLY),
            0o644,
            0,
        )
        .await;
    assert_eq!(c.err(), Some(Errno::EACCES));
    top.unlink(&alice, loc(pubd, "af2"))
        .await
        .expect("owner unlinks");
    // Root is still root afterwards (credentials were restored on the pool thread).
    mkfile(&top, &r, privd, "root-file", b"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_chmod_chown_utimes_and_xattr_rules() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let r = root();
    let (alice, bob) = (user(1000), user(2000));
    let pubd = mkdir(&top, &r, Gfid::ROOT, "pub").await.attr.gfid;
    top.setattr(&r, pubd, perm(0o777)).await.expect("chmod");
    let f = mkfile(&top, &alice, pubd, "secret", b"s").await.attr.gfid;
    top.setattr(&alice, f, perm(0o600))
        .await
        .expect("owner chmod");
    assert_eq!(
        top.open(&bob, fd(f, libc::O_RDONLY)).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        top.readv(&bob, Fd::anonymous(f, 0), 0, 1).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        top.access(&bob, f, libc::R_OK as u32).await.err(),
        Some(Errno::EACCES)
    );
    top.access(&alice, f, libc::R_OK as u32 | libc::W_OK as u32)
        .await
        .expect("owner access");
    assert_eq!(
        top.setattr(&bob, f, perm(0o666)).await.err(),
        Some(Errno::EPERM)
    );
    let chown = SetAttr {
        uid: ROption::RSome(2000),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&alice, f, chown).await.err(),
        Some(Errno::EPERM)
    );
    // chgrp to a supplementary group of the owner is allowed; to another group it is not.
    let alice50 = Ctx::builder(1000, 1000).groups(&[50]).build();
    let chgrp = SetAttr {
        gid: ROption::RSome(50),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&alice50, f, chgrp).await.expect("chgrp").gid,
        50
    );
    let chgrp = SetAttr {
        gid: ROption::RSome(51),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&alice50, f, chgrp).await.err(),
        Some(Errno::EPERM)
    );
    // Explicit times need ownership; "now" needs write access.
    top.setattr(&alice, f, perm(0o666)).await.expect("chmod");
    let at = SetAttr {
        mtime: TimeSet::At(Timespec { sec: 5, nsec: 0 }),
        ..SetAttr::default()
    };
    assert_eq!(top.setattr(&bob, f, at).await.err(), Some(Errno::EPERM));
    let now = SetAttr {
        mtime: TimeSet::Now,
        atime: TimeSet::Now,
        ..SetAttr::default()
    };
    top.setattr(&bob, f, now)
        .await
        .expect("touch with write access");
    // trusted.* is root's; user.* needs write access.
    let x = Xattr {
        name: "trusted.t".into(),
        value: Buf::from("v"),
    };
    assert_eq!(
        top.setxattr(&alice, f, x, 0).await.err(),
        Some(Errno::EPERM)
    );
    let x = Xattr {
        name: "user.u".into(),
        value: Buf::from("v"),
    };
    top.setxattr(&bob, f, x.clone(), 0)
        .await
        .expect("user xattr with write access");
    top.setattr(&alice, f, perm(0o644)).await.expect("chmod");
    assert_eq!(top.setxattr(&bob, f, x, 0).await.err(), Some(Errno::EACCES));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setgid_inheritance_and_suid_cleared_on_write() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let r = root();
    let (alice, bob) = (user(1000), user(2000));
    let shared = mkdir(&top, &r, Gfid::ROOT, "shared").await.attr.gfid;
    let a = SetAttr {
        gid: ROption::RSome(50),
        perm: ROption::RSome(0o2777),
        ..SetAttr::default()
    };
    top.setattr(&r, shared, a).await.expect("setgid dir");
    let e = mkfile(&top, &alice, shared, "f", b"").await;
    assert_eq!(e.attr.gid, 50, "inherits the directory's group");
    let d = top
        .mkdir(&alice, loc(shared, "sub"), 0o755, 0)
        .await
        .expect("mkdir");
    assert_eq!(d.attr.gid, 50);
    assert_ne!(d.attr.perm & 0o2000, 0, "subdirectories inherit setgid");
    top.setattr(&alice, e.attr.gfid, perm(0o4777))
        .await
        .expect("suid");
    let w = fd(e.attr.gfid, libc::O_WRONLY);
    top.open(&bob, w).await.expect("open");
    top.writev(&bob, w, 0, "x".into(), 0).await.expect("write");
    assert_eq!(
        top.stat(&r, e.attr.gfid).await.expect("stat").perm & 0o4000,
        0
    );
}
