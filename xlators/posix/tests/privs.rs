//! Setuid/setgid clearing, setgid directories, POSIX ACLs and world-writable files of other
//! users, as the kernel's own file systems behave (xfstests generic/355, 683-685, 375, 444,
//! 697, 099, 319). The brick runs each fop as the caller, so these show that every path
//! (plain, O_DIRECT, anonymous fds, staged creates) keeps the caller's credentials to the
//! syscall that decides. Skipped when the tests do not run as root.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Errno, Fd, Gfid, SetAttr, Subvol, Xattr};

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

async fn mode(top: &Subvol, g: Gfid) -> u32 {
    top.stat(&root(), g).await.expect("stat").perm & 0o7777
}

/// A file of alice (1000:1000) in a 0777 directory, with mode `m`.
async fn alices_file(top: &Subvol, name: &str, m: u32) -> Gfid {
    let d = match top.lookup(&root(), loc(Gfid::ROOT, "pub")).await {
        Ok(e) => e.attr.gfid,
        Err(_) => {
            let d = mkdir(top, &root(), Gfid::ROOT, "pub").await.attr.gfid;
            top.setattr(&root(), d, perm(0o777)).await.expect("chmod");
            d
        }
    };
    let g = mkfile(top, &user(1000), d, name, b"0123456789")
        .await
        .attr
        .gfid;
    top.setattr(&user(1000), g, perm(m)).await.expect("chmod");
    assert_eq!(mode(top, g).await, m);
    g
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_clear_setuid_and_setgid_as_the_kernel_does() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let bob = user(2000);
    let bob_in_group = Ctx::builder(2000, 2000).groups(&[1000]).build();
    // (mode, writer, through O_DIRECT, mode after)
    let cases: [(u32, &Ctx, bool, u32); 8] = [
        // setuid always goes for a writer without CAP_FSETID; setgid with group execute.
        (0o6777, &bob, false, 0o0777),
        (0o6777, &bob, true, 0o0777),
        // setgid without group execute: cleared for a writer outside the file's group...
        (0o2766, &bob, false, 0o0766),
        // ...kept for one in it.
        (0o2766, &bob_in_group, false, 0o2766),
        (0o6777, &bob_in_group, false, 0o0777),
        // the owner too has no CAP_FSETID
        (0o4755, &user(1000), false, 0o0755),
        // root keeps them (CAP_FSETID)
        (0o6777, &root(), false, 0o6777),
        (0o6777, &root(), true, 0o6777),
    ];
    for (i, (m, who, direct, after)) in cases.into_iter().enumerate() {
        let g = alices_file(&top, &format!("w{i}"), m).await;
        let flags = libc::O_WRONLY | if direct { libc::O_DIRECT } else { 0 };
        let f = fd(g, flags);
        top.open(who, f).await.expect("open");
        top.writev(who, f, 0, "x".into(), 0).await.expect("write");
        top.release(who, f).await.expect("release");
        assert_eq!(
            mode(&top, g).await,
            after,
            "case {i}: {m:o} by {}",
            who.uid()
        );
    }
    // An anonymous fd writes as the caller as well.
    let g = alices_file(&top, "anon", 0o6777).await;
    top.writev(&bob, Fd::anonymous(g, 0), 0, "x".into(), 0)
        .await
        .expect("write");
    assert_eq!(mode(&top, g).await, 0o0777);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_fallocate_punch_and_zero_clear_them_too() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let bob = user(2000);
    let g = alices_file(&top, "t", 0o6777).await;
    let t = SetAttr {
        size: ROption::RSome(1),
        ..SetAttr::default()
    };
    top.setattr(&bob, g, t).await.expect("truncate");
    assert_eq!(mode(&top, g).await, 0o0777, "truncate");
    let g = alices_file(&top, "ft", 0o6777).await;
    let f = fd(g, libc::O_RDWR);
    top.open(&bob, f).await.expect("open");
    top.fsetattr(&bob, f, t).await.expect("ftruncate");
    assert_eq!(mode(&top, g).await, 0o0777, "ftruncate");
    top.release(&bob, f).await.expect("release");
    let g = alices_file(&top, "otrunc", 0o6777).await;
    let f = fd(g, libc::O_WRONLY | libc::O_TRUNC);
    top.open(&bob, f).await.expect("open O_TRUNC");
    assert_eq!(mode(&top, g).await, 0o0777, "open with O_TRUNC");
    top.release(&bob, f).await.expect("release");
    // generic/683, 684, 685: fallocate, punch hole, zero range.
    for (i, op) in ["fallocate", "punch", "zero"].into_iter().enumerate() {
        let g = alices_file(&top, op, 0o6777).await;
        let f = fd(g, libc::O_RDWR);
        top.open(&bob, f).await.expect("open");
        match i {
            0 => top.fallocate(&bob, f, 0, 0, 8192).await,
            1 => top.discard(&bob, f, 0, 4096).await,
            _ => top.zerofill(&bob, f, 0, 4096).await,
        }
        .expect(op);
        top.release(&bob, f).await.expect("release");
        assert_eq!(mode(&top, g).await, 0o0777, "{op}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chown_clears_setuid_and_group_executable_setgid() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let to = |uid, gid| SetAttr {
        uid: ROption::RSome(uid),
        gid: ROption::RSome(gid),
        ..SetAttr::default()
    };
    // Even root's chown clears setuid (and setgid with group execute) of a regular file.
    let g = alices_file(&top, "c1", 0o6755).await;
    top.setattr(&root(), g, to(2000, 2000))
        .await
        .expect("chown");
    assert_eq!(mode(&top, g).await, 0o0755);
    // Setgid without group execute stays for root (CAP_FSETID).
    let g = alices_file(&top, "c2", 0o6745).await;
    top.setattr(&root(), g, to(2000, 2000))
        .await
        .expect("chown");
    assert_eq!(mode(&top, g).await, 0o2745);
    // A chown with a mode in the same request keeps the mode asked for.
    let g = alices_file(&top, "c3", 0o755).await;
    let a = SetAttr {
        perm: ROption::RSome(0o4755),
        ..to(2000, 2000)
    };
    top.setattr(&root(), g, a).await.expect("chown + chmod");
    assert_eq!(mode(&top, g).await, 0o4755);
    // Directories keep theirs.
    let d = mkdir(&top, &root(), Gfid::ROOT, "sgid").await.attr.gfid;
    top.setattr(&root(), d, perm(0o2755)).await.expect("chmod");
    top.setattr(&root(), d, to(2000, 2000))
        .await
        .expect("chown");
    assert_eq!(mode(&top, d).await, 0o2755);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_world_writable_file_in_a_sticky_directory_opens_for_writing() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let nobody = user(65534);
    let tmp = mkdir(&top, &root(), Gfid::ROOT, "tmp").await.attr.gfid;
    top.setattr(&root(), tmp, perm(0o1777))
        .await
        .expect("chmod");
    for (name, m) in [("plain", 0o777), ("suid", 0o4777)] {
        let g = mkfile(&top, &root(), tmp, name, b"").await.attr.gfid;
        top.setattr(&root(), g, perm(m)).await.expect("chmod");
        let f = fd(g, libc::O_WRONLY);
        top.open(&nobody, f).await.expect("open O_WRONLY");
        top.writev(&nobody, f, 0, "x".into(), 0)
            .await
            .expect("write");
        top.release(&nobody, f).await.expect("release");
        assert_eq!(mode(&top, g).await, 0o777, "{name}");
        // The same through create without O_EXCL (a shell's `>`), which finds the file.
        let f = fd(Gfid::NULL, libc::O_WRONLY | libc::O_TRUNC);
        top.create(&nobody, loc(tmp, name), f, 0o666, 0o022)
            .await
            .expect("create of an existing file");
        top.release(&nobody, f).await.expect("release");
    }
}

/// A POSIX ACL xattr value (`system.posix_acl_*`, version 2): `(tag, perm, id)` entries,
/// which must come sorted by tag, then id.
fn acl(entries: &[(u16, u16, u32)]) -> Buf {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, p, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&p.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    Buf::from_vec(v)
}

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NO_ID: u32 = u32::MAX;

fn xattr(name: &str, value: Buf) -> Xattr {
    Xattr {
        name: name.into(),
        value,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_acls_are_stored_and_honoured() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let (alice, bob) = (user(1000), user(2000));
    let g = alices_file(&top, "secret", 0o600).await;
    assert_eq!(
        top.open(&bob, fd(g, libc::O_RDONLY)).await.err(),
        Some(Errno::EACCES)
    );
    // alice grants bob read: u::rw-, u:2000:r--, g::---, m::r--, o::---
    let a = acl(&[
        (USER_OBJ, 6, NO_ID),
        (USER, 4, 2000),
        (GROUP_OBJ, 0, NO_ID),
        (MASK, 4, NO_ID),
        (OTHER, 0, NO_ID),
    ]);
    top.setxattr(&alice, g, xattr("system.posix_acl_access", a.clone()), 0)
        .await
        .expect("setfacl by the owner");
    // The mask shows as the group bits.
    assert_eq!(mode(&top, g).await, 0o640);
    let got = top
        .getxattr(&bob, g, "system.posix_acl_access".into())
        .await
        .expect("getfacl");
    assert_eq!(got.as_slice(), a.as_slice());
    let f = fd(g, libc::O_RDONLY);
    top.open(&bob, f).await.expect("bob reads through the ACL");
    top.release(&bob, f).await.expect("release");
    top.access(&bob, g, libc::R_OK as u32)
        .await
        .expect("access");
    assert_eq!(
        top.open(&bob, fd(g, libc::O_WRONLY)).await.err(),
        Some(Errno::EACCES),
        "read only"
    );
    assert_eq!(
        top.open(&user(3000), fd(g, libc::O_RDONLY)).await.err(),
        Some(Errno::EACCES),
        "only bob"
    );
    // Only the owner sets ACLs.
    let r = top
        .setxattr(&bob, g, xattr("system.posix_acl_access", a), 0)
        .await;
    assert_eq!(r.err(), Some(Errno::EPERM));
}

fn default_acl_rwx() -> Buf {
    acl(&[
        (USER_OBJ, 7, NO_ID),
        (GROUP_OBJ, 7, NO_ID),
        (OTHER, 7, NO_ID),
    ])
}

/// Creates in a directory with a default ACL: the ACL replaces the umask, and a setgid
/// directory still passes on its group (files, subdirectories) and setgid (subdirectories),
/// through the plain path and through the staged one (`CreateXattrs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_acls_replace_the_umask_and_setgid_directories_still_pass_their_group() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let alice = user(1000);
    let d = mkdir(&top, &root(), Gfid::ROOT, "shared").await.attr.gfid;
    let a = SetAttr {
        gid: ROption::RSome(50),
        perm: ROption::RSome(0o2777),
        ..SetAttr::default()
    };
    top.setattr(&root(), d, a).await.expect("setgid dir");
    top.setxattr(
        &root(),
        d,
        xattr("system.posix_acl_default", default_acl_rwx()),
        0,
    )
    .await
    .expect("default acl");
    let staged = alice
        .to_builder()
        .ext(&xlator_api::CreateXattrs(vec![(
            "trusted.x".into(),
            b"1".to_vec(),
        )]))
        .build();
    for (how, cx) in [("plain", &alice), ("staged", &staged)] {
        let f = fd(Gfid::NULL, libc::O_RDWR);
        let e = top
            .create(cx, loc(d, &format!("f-{how}")), f, 0o666, 0o022)
            .await
            .expect("create");
        top.release(cx, f).await.expect("release");
        assert_eq!(
            (e.attr.gid, e.attr.perm & 0o7777),
            (50, 0o666),
            "{how} file"
        );
        let e = top
            .mkdir(cx, loc(d, &format!("d-{how}")), 0o777, 0o022)
            .await
            .expect("mkdir");
        assert_eq!(
            (e.attr.gid, e.attr.perm & 0o7777),
            (50, 0o2777),
            "{how} directory"
        );
        // The subdirectory inherits the default ACL itself.
        let got = top
            .getxattr(cx, e.attr.gfid, "system.posix_acl_default".into())
            .await
            .expect("inherited default acl");
        assert_eq!(got.as_slice(), default_acl_rwx().as_slice(), "{how}");
        let e = top
            .mknod(
                cx,
                loc(d, &format!("p-{how}")),
                libc::S_IFIFO | 0o666,
                0,
                0o022,
            )
            .await
            .expect("mknod");
        assert_eq!(
            (e.attr.gid, e.attr.perm & 0o7777),
            (50, 0o666),
            "{how} fifo"
        );
    }
    // Without a default ACL the umask applies as before.
    let e = top
        .mkdir(&alice, loc(Gfid::ROOT, "plain"), 0o777, 0o027)
        .await;
    assert_eq!(
        e.err(),
        Some(Errno::EACCES),
        "the root is not alice's to write"
    );
    let plain = mkdir(&top, &root(), Gfid::ROOT, "open").await.attr.gfid;
    top.setattr(&root(), plain, perm(0o777))
        .await
        .expect("chmod");
    let e = top
        .mkdir(&alice, loc(plain, "sub"), 0o777, 0o027)
        .await
        .expect("mkdir");
    assert_eq!(e.attr.perm & 0o7777, 0o750);
}

/// A setgid directory gives a new file its group; a file made with setgid and group execute
/// by a caller outside that group loses the setgid bit (generic/375, 697).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setgid_is_stripped_from_new_files_of_callers_outside_the_group() {
    if !is_root() {
        return;
    }
    let (_d, top) = new_brick();
    let alice = user(1000);
    let d = mkdir(&top, &root(), Gfid::ROOT, "shared").await.attr.gfid;
    let a = SetAttr {
        gid: ROption::RSome(50),
        perm: ROption::RSome(0o2777),
        ..SetAttr::default()
    };
    top.setattr(&root(), d, a).await.expect("setgid dir");
    let staged = alice
        .to_builder()
        .ext(&xlator_api::CreateXattrs(vec![(
            "trusted.x".into(),
            b"1".to_vec(),
        )]))
        .build();
    for (how, cx) in [("plain", &alice), ("staged", &staged)] {
        let f = fd(Gfid::NULL, libc::O_RDWR);
        let e = top
            .create(cx, loc(d, &format!("f-{how}")), f, 0o2755, 0)
            .await
            .expect("create");
        top.release(cx, f).await.expect("release");
        assert_eq!(
            (e.attr.gid, e.attr.perm & 0o7777),
            (50, 0o755),
            "{how} file"
        );
        let e = top
            .mknod(
                cx,
                loc(d, &format!("n-{how}")),
                libc::S_IFIFO | 0o4755,
                0,
                0,
            )
            .await
            .expect("mknod");
        // setuid is the caller's to give its own node; only setgid depends on the group.
        assert_eq!(
            (e.attr.gid, e.attr.perm & 0o7777),
            (50, 0o4755),
            "{how} node"
        );
    }
}
