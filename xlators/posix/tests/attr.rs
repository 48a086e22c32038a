//! setattr, access, statfs, xattrs and xattrop.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::{ROption, RVec};
use xlator_api::{Buf, Errno, Gfid, SetAttr, TimeSet, Timespec, Xattr, XattropOp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setattr_mode_owner_size_times() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"0123456789").await;
    let g = e.attr.gfid;
    let a = SetAttr {
        perm: ROption::RSome(0o4710),
        ..SetAttr::default()
    };
    assert_eq!(top.setattr(&cx, g, a).await.expect("chmod").perm, 0o4710);
    let a = SetAttr {
        uid: ROption::RSome(123),
        gid: ROption::RSome(456),
        ..SetAttr::default()
    };
    let r = top.setattr(&cx, g, a).await.expect("chown");
    assert_eq!((r.uid, r.gid), (123, 456));
    let a = SetAttr {
        size: ROption::RSome(3),
        ..SetAttr::default()
    };
    assert_eq!(top.setattr(&cx, g, a).await.expect("truncate").size, 3);
    let t = Timespec {
        sec: 1_000_000_000,
        nsec: 123_456_789,
    };
    let a = SetAttr {
        mtime: TimeSet::At(t),
        ..SetAttr::default()
    };
    let r = top.setattr(&cx, g, a).await.expect("utimes");
    assert_eq!(r.mtime, t);
    let before = r.atime;
    let a = SetAttr {
        atime: TimeSet::Now,
        mtime: TimeSet::Omit,
        ..SetAttr::default()
    };
    let r = top.setattr(&cx, g, a).await.expect("atime now");
    assert_eq!(r.mtime, t, "UTIME_OMIT kept mtime");
    assert!(r.atime > before);
    // Symlink times (lutimes) and a directory's mode.
    let s = top
        .symlink(&cx, loc(Gfid::ROOT, "s"), "f".into())
        .await
        .expect("symlink");
    let a = SetAttr {
        mtime: TimeSet::At(t),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&cx, s.attr.gfid, a)
            .await
            .expect("lutimes")
            .mtime,
        t
    );
    assert_eq!(top.stat(&cx, g).await.expect("target untouched").size, 3);
    let d = mkdir(&top, &cx, Gfid::ROOT, "d").await;
    let a = SetAttr {
        perm: ROption::RSome(0o1777),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&cx, d.attr.gfid, a)
            .await
            .expect("chmod dir")
            .perm,
        0o1777
    );
    let a = SetAttr {
        size: ROption::RSome(0),
        ..SetAttr::default()
    };
    assert_eq!(
        top.setattr(&cx, d.attr.gfid, a).await.err(),
        Some(Errno::EISDIR)
    );
    // fsetattr through an open fd.
    let f = fd(g, libc::O_RDWR);
    top.open(&cx, f).await.expect("open");
    let a = SetAttr {
        size: ROption::RSome(100),
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    let r = top.fsetattr(&cx, f, a).await.expect("fsetattr");
    assert_eq!((r.size, r.perm), (100, 0o600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statfs_and_access() {
    let (_d, top) = new_brick();
    let cx = root();
    let s = top.statfs(&cx, Gfid::ROOT).await.expect("statfs");
    assert!(s.blocks > 0 && s.bsize > 0 && s.namemax >= 255);
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    top.access(&cx, e.attr.gfid, libc::R_OK as u32 | libc::W_OK as u32)
        .await
        .expect("root rw");
    assert_eq!(
        top.access(&cx, e.attr.gfid, libc::X_OK as u32).await.err(),
        Some(Errno::EACCES)
    );
    top.access(&cx, e.attr.gfid, 0).await.expect("F_OK");
}

fn xa(name: &str, v: &[u8]) -> Xattr {
    Xattr {
        name: name.into(),
        value: Buf::copy_from_slice(v),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattrs_set_get_list_remove_and_internal_names() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    let g = e.attr.gfid;
    top.setxattr(&cx, g, xa("user.a", b"1"), 0)
        .await
        .expect("set");
    top.setxattr(&cx, g, xa("trusted.afr.c0", b"\0\0\0\0"), 0)
        .await
        .expect("set trusted");
    assert_eq!(
        top.getxattr(&cx, g, "user.a".into())
            .await
            .expect("get")
            .as_slice(),
        b"1"
    );
    assert_eq!(
        top.setxattr(&cx, g, xa("user.a", b"2"), libc::XATTR_CREATE)
            .await
            .err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        top.setxattr(&cx, g, xa("user.b", b"2"), libc::XATTR_REPLACE)
            .await
            .err(),
        Some(Errno::ENODATA)
    );
    let mut l: Vec<String> = top
        .listxattr(&cx, g)
        .await
        .expect("list")
        .iter()
        .map(|s| s.to_string())
        .collect();
    l.sort();
    assert_eq!(l, vec!["trusted.afr.c0", "user.a"]);
    // The gfid reads back but is not listed and cannot be changed.
    assert_eq!(
        top.getxattr(&cx, g, "trusted.gfid".into())
            .await
            .expect("gfid")
            .as_slice(),
        &g.0
    );
    assert_eq!(
        top.setxattr(&cx, g, xa("trusted.gfid", &[0; 16]), 0)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        top.removexattr(&cx, g, "trusted.gfid".into()).await.err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        top.setxattr(&cx, g, xa("user.xlfs.x", b""), 0).await.err(),
        Some(Errno::EPERM)
    );
    assert_eq!(top.stat(&cx, g).await.expect("still resolvable").gfid, g);
    top.removexattr(&cx, g, "user.a".into())
        .await
        .expect("remove");
    assert_eq!(
        top.getxattr(&cx, g, "user.a".into()).await.err(),
        Some(Errno::ENODATA)
    );
    assert_eq!(
        top.removexattr(&cx, g, "user.a".into()).await.err(),
        Some(Errno::ENODATA)
    );
    // f* variants.
    let f = fd(g, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    top.fsetxattr(&cx, f, xa("user.f", b"via fd"), 0)
        .await
        .expect("fset");
    assert_eq!(
        top.fgetxattr(&cx, f, "user.f".into())
            .await
            .expect("fget")
            .as_slice(),
        b"via fd"
    );
    top.fremovexattr(&cx, f, "user.f".into())
        .await
        .expect("fremove");
    assert_eq!(
        top.fgetxattr(&cx, f, "user.f".into()).await.err(),
        Some(Errno::ENODATA)
    );
    // Directories and the root carry xattrs too (layouts live there).
    top.setxattr(&cx, Gfid::ROOT, xa("trusted.dht", b"layout"), 0)
        .await
        .expect("root xattr");
    let l = top.listxattr(&cx, Gfid::ROOT).await.expect("list root");
    assert!(l.iter().all(|n| n.as_str() != "trusted.gfid"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattrop_adds_lanes_atomically() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    let g = e.attr.gfid;
    let one: Vec<u8> = [1u32.to_be_bytes(), 2u32.to_be_bytes()].concat();
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (top, cx, one) = (top.clone(), cx.clone(), one.clone());
        tasks.push(tokio::spawn(async move {
            let xs: RVec<Xattr> = vec![xa("trusted.afr.c0", &one)].into();
            top.xattrop(&cx, g, XattropOp::AddArray32, xs)
                .await
                .expect("xattrop");
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    let v = top
        .getxattr(&cx, g, "trusted.afr.c0".into())
        .await
        .expect("get");
    assert_eq!(
        v.as_slice(),
        &[40u32.to_be_bytes(), 80u32.to_be_bytes()].concat()[..]
    );
    // Decrement with two's complement lanes; the reply carries the new value.
    let minus: Vec<u8> = [(-40i32).to_be_bytes(), (-80i32).to_be_bytes()].concat();
    let f = fd(g, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    let r = top
        .fxattrop(
            &cx,
            f,
            XattropOp::AddArray32,
            vec![xa("trusted.afr.c0", &minus)].into(),
        )
        .await
        .expect("fxattrop");
    assert_eq!(r[0].value.as_slice(), &[0u8; 8]);
    let r = top
        .xattrop(
            &cx,
            g,
            XattropOp::AddArray64,
            vec![xa("trusted.x64", &7u64.to_be_bytes())].into(),
        )
        .await
        .expect("64");
    assert_eq!(r[0].value.as_slice(), &7u64.to_be_bytes());
    let bad = top
        .xattrop(
            &cx,
            g,
            XattropOp::AddArray32,
            vec![xa("trusted.y", &[1, 2, 3])].into(),
        )
        .await;
    assert_eq!(bad.err(), Some(Errno::EINVAL));
    let bad = top
        .xattrop(
            &cx,
            g,
            XattropOp::AddArray32,
            vec![xa("trusted.gfid", &[0; 16])].into(),
        )
        .await;
    assert_eq!(bad.err(), Some(Errno::EPERM));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_not_ours() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    let lock = xlator_api::Flock {
        kind: xlator_api::LockKind::Write,
        start: 0,
        len: 0,
        pid: 1,
        owner: xlator_api::LkOwner(1),
    };
    let r = top
        .lk(&cx, fd(e.attr.gfid, 0), xlator_api::LkCmd::Set, lock)
        .await;
    assert_eq!(r.err(), Some(Errno::ENOSYS));
    let r = top
        .inodelk(&cx, "d".into(), e.attr.gfid, xlator_api::LkCmd::Set, lock)
        .await;
    assert_eq!(r.err(), Some(Errno::ENOSYS));
    let r = top
        .entrylk(
            &cx,
            "d".into(),
            loc(Gfid::ROOT, "f"),
            xlator_api::EntrylkCmd::Lock,
        )
        .await;
    assert_eq!(r.err(), Some(Errno::ENOSYS));
}
