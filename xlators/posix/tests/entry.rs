//! Entry fops: lookup, mkdir, create, mknod, symlink, link, unlink, rmdir, rename, readdirp.

mod common;

use common::*;
use xlator_api::{Errno, FileType, Gfid, Subvol};
use xlfs_posix::Layout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_lookup_and_stable_ino() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "a", b"hello").await;
    assert!(!e.attr.gfid.is_null());
    assert_eq!(e.attr.kind, FileType::Regular);
    assert_eq!(e.attr.perm, 0o644);
    assert_eq!(e.attr.nlink, 1);
    let l = top.lookup(&cx, loc(Gfid::ROOT, "a")).await.expect("lookup");
    assert_eq!(l.attr.gfid, e.attr.gfid);
    assert_eq!(l.attr.size, 5);
    assert_eq!(l.attr.ino, xlfs_posix::ino_of(e.attr.gfid));
    let s = top.stat(&cx, e.attr.gfid).await.expect("stat");
    assert_eq!(s.ino, l.attr.ino);
    let r = top.stat(&cx, Gfid::ROOT).await.expect("stat root");
    assert!(r.is_dir() && r.ino == 1 && r.gfid == Gfid::ROOT);
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, "nope")).await.err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        top.stat(&cx, Gfid::random()).await.err(),
        Some(Errno::ESTALE)
    );
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, "a/b")).await.err(),
        Some(Errno::EINVAL)
    );
    assert_eq!(
        top.lookup(&cx, loc(e.attr.gfid, "x")).await.err(),
        Some(Errno::ENOTDIR)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_excl_and_existing() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"data").await;
    let excl = fd(Gfid::NULL, libc::O_RDWR | libc::O_EXCL);
    let r = top.create(&cx, loc(Gfid::ROOT, "f"), excl, 0o600, 0).await;
    assert_eq!(r.err(), Some(Errno::EEXIST));
    // Without O_EXCL the existing file is opened (and truncated with O_TRUNC).
    let t = fd(Gfid::NULL, libc::O_RDWR | libc::O_TRUNC);
    let e2 = top
        .create(&cx, loc(Gfid::ROOT, "f"), t, 0o600, 0)
        .await
        .expect("create existing");
    assert_eq!(e2.attr.gfid, e.attr.gfid);
    assert_eq!(e2.attr.size, 0);
    top.release(&cx, t).await.expect("release");
    // mode and umask
    let m = fd(Gfid::NULL, libc::O_WRONLY);
    let e3 = top
        .create(&cx, loc(Gfid::ROOT, "m"), m, 0o777, 0o027)
        .await
        .expect("create");
    assert_eq!(e3.attr.perm, 0o750);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mkdir_rmdir_and_nested_resolution() {
    let (_d, top) = new_brick();
    let cx = root();
    let a = mkdir(&top, &cx, Gfid::ROOT, "a").await;
    assert!(a.attr.is_dir());
    let d = top
        .mkdir(&cx, loc(Gfid::ROOT, "u"), 0o777, 0o022)
        .await
        .expect("mkdir");
    assert_eq!(d.attr.perm, 0o755);
    assert_eq!(
        top.mkdir(&cx, loc(Gfid::ROOT, "a"), 0o755, 0).await.err(),
        Some(Errno::EEXIST)
    );
    let mut parent = a.attr.gfid;
    for i in 0..60 {
        parent = mkdir(&top, &cx, parent, &format!("d{i}")).await.attr.gfid;
    }
    // 60 levels deep: beyond the kernel's 40 nested symlinks, resolved in user space.
    let f = mkfile(&top, &cx, parent, "leaf", b"x").await;
    assert_eq!(top.stat(&cx, f.attr.gfid).await.expect("stat").size, 1);
    assert!(top.stat(&cx, parent).await.expect("stat dir").is_dir());
    mkfile(&top, &cx, a.attr.gfid, "f", b"").await;
    assert_eq!(
        top.rmdir(&cx, loc(Gfid::ROOT, "a")).await.err(),
        Some(Errno::ENOTEMPTY)
    );
    assert_eq!(
        top.rmdir(&cx, loc(a.attr.gfid, "f")).await.err(),
        Some(Errno::ENOTDIR)
    );
    top.rmdir(&cx, loc(Gfid::ROOT, "u")).await.expect("rmdir");
    assert_eq!(top.stat(&cx, d.attr.gfid).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.unlink(&cx, loc(Gfid::ROOT, "a")).await.err(),
        Some(Errno::EISDIR)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_readlink_mknod() {
    // Device nodes need `allow-devices` (tests/security.rs checks they are refused without).
    let d = tempfile::tempdir().expect("tempdir");
    let top = try_brick(d.path(), &[("allow-devices", "on")]).expect("brick init");
    let cx = root();
    let s = top
        .symlink(&cx, loc(Gfid::ROOT, "s"), "../target".into())
        .await
        .expect("symlink");
    assert_eq!(s.attr.kind, FileType::Symlink);
    assert_eq!(
        top.readlink(&cx, s.attr.gfid)
            .await
            .expect("readlink")
            .as_str(),
        "../target"
    );
    assert_eq!(
        top.stat(&cx, s.attr.gfid).await.expect("stat").kind,
        FileType::Symlink
    );
    let f = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    assert_eq!(
        top.readlink(&cx, f.attr.gfid).await.err(),
        Some(Errno::EINVAL)
    );
    let fifo = top
        .mknod(&cx, loc(Gfid::ROOT, "p"), libc::S_IFIFO | 0o640, 0, 0)
        .await
        .expect("fifo");
    assert_eq!(fifo.attr.kind, FileType::Fifo);
    assert_eq!(fifo.attr.perm, 0o640);
    let sock = top
        .mknod(&cx, loc(Gfid::ROOT, "sock"), libc::S_IFSOCK | 0o600, 0, 0)
        .await
        .expect("sock");
    assert_eq!(sock.attr.kind, FileType::Socket);
    let dev = libc::makedev(1, 3);
    let chr = top
        .mknod(&cx, loc(Gfid::ROOT, "null"), libc::S_IFCHR | 0o666, dev, 0)
        .await
        .expect("chr");
    assert_eq!((chr.attr.kind, chr.attr.rdev), (FileType::CharDevice, dev));
    // Opening a device on the brick is refused: clients open special files locally.
    let o = top.open(&cx, fd(chr.attr.gfid, libc::O_RDONLY)).await;
    assert_eq!(o.err(), Some(Errno::ENXIO));
    let r = top
        .mknod(&cx, loc(Gfid::ROOT, "d"), libc::S_IFDIR | 0o755, 0, 0)
        .await;
    assert_eq!(r.err(), Some(Errno::EINVAL));
    // Special files and symlinks keep their gfid through lookup.
    let l = top.lookup(&cx, loc(Gfid::ROOT, "p")).await.expect("lookup");
    assert_eq!(l.attr.gfid, fifo.attr.gfid);
    let l = top.lookup(&cx, loc(Gfid::ROOT, "s")).await.expect("lookup");
    assert_eq!(l.attr.gfid, s.attr.gfid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_links_share_gfid_and_handle_lives_until_last_link() {
    let (d, top) = new_brick();
    let cx = root();
    let f = mkfile(&top, &cx, Gfid::ROOT, "f", b"abc").await;
    let sub = mkdir(&top, &cx, Gfid::ROOT, "sub").await;
    let l = top
        .link(&cx, f.attr.gfid, loc(sub.attr.gfid, "g"))
        .await
        .expect("link");
    assert_eq!(l.attr.gfid, f.attr.gfid);
    assert_eq!(l.attr.nlink, 2);
    let lk = top
        .lookup(&cx, loc(sub.attr.gfid, "g"))
        .await
        .expect("lookup");
    assert_eq!(lk.attr.gfid, f.attr.gfid);
    assert_eq!(
        top.link(&cx, f.attr.gfid, loc(Gfid::ROOT, "sub"))
            .await
            .err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        top.link(&cx, sub.attr.gfid, loc(Gfid::ROOT, "dl"))
            .await
            .err(),
        Some(Errno::EPERM)
    );
    top.unlink(&cx, loc(Gfid::ROOT, "f")).await.expect("unlink");
    assert_eq!(
        top.stat(&cx, f.attr.gfid).await.expect("still there").nlink,
        1
    );
    top.unlink(&cx, loc(sub.attr.gfid, "g"))
        .await
        .expect("unlink");
    assert_eq!(top.stat(&cx, f.attr.gfid).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.unlink(&cx, loc(Gfid::ROOT, "f")).await.err(),
        Some(Errno::ENOENT)
    );
    // The handle goes after the reply; a clean stop waits for it.
    drop(top);
    assert!(!handle_path(d.path(), f.attr.gfid).exists());
}

/// Where a new brick keeps `g`'s handle.
fn handle_path(brick: &std::path::Path, g: Gfid) -> std::path::PathBuf {
    layout_handle(brick, Layout::Flat, g)
}

fn layout_handle(brick: &std::path::Path, l: Layout, g: Gfid) -> std::path::PathBuf {
    brick
        .join(xlfs_posix::META_DIR)
        .join(l.dir_name())
        .join(l.rel(g))
}

/// A brick whose handle directory uses the nested layout of older versions.
fn nested_brick() -> (tempfile::TempDir, Subvol) {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(d.path().join(".xlfs/handles")).expect("old handle dir");
    let top = brick_at(d.path());
    (d, top)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlinked_handles_are_reaped_and_orphans_removed_after_an_unclean_stop() {
    for layout in [Layout::Flat, Layout::Nested] {
        reaped_and_orphans_removed(layout).await;
    }
}

async fn reaped_and_orphans_removed(layout: Layout) {
    let d = tempfile::tempdir().expect("tempdir");
    if layout == Layout::Nested {
        std::fs::create_dir_all(d.path().join(".xlfs/handles")).expect("old handle dir");
    }
    let handle_path = |_: &std::path::Path, g: Gfid| layout_handle(d.path(), layout, g);
    let marker = d.path().join(".xlfs/clean-stop");
    let cx = root();
    let top = brick_at(d.path());
    let a = mkfile(&top, &cx, Gfid::ROOT, "a", b"1").await;
    let b = mkfile(&top, &cx, Gfid::ROOT, "b", b"2").await;
    let c = mkfile(&top, &cx, Gfid::ROOT, "c", b"3").await;
    top.unlink(&cx, loc(Gfid::ROOT, "a")).await.expect("unlink");
    // Gone for GFID lookups at once, handle reaped or not.
    assert_eq!(top.stat(&cx, a.attr.gfid).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.link(&cx, a.attr.gfid, loc(Gfid::ROOT, "again"))
            .await
            .err(),
        Some(Errno::ESTALE)
    );
    drop(top);
    assert!(!handle_path(d.path(), a.attr.gfid).exists());
    assert!(marker.exists(), "a clean stop leaves its marker");

    // A crash between the two unlinks: the name is gone, the handle left, no marker.
    std::fs::remove_file(d.path().join("b")).expect("remove name");
    std::fs::remove_file(&marker).expect("remove marker");
    assert!(handle_path(d.path(), b.attr.gfid).exists());
    let top = brick_at(d.path());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while handle_path(d.path(), b.attr.gfid).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "orphaned handle not removed by the startup scan"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // An object that still has a name keeps its handle.
    assert!(handle_path(d.path(), c.attr.gfid).exists());
    assert_eq!(top.stat(&cx, c.attr.gfid).await.expect("stat c").size, 1);
    assert!(!marker.exists(), "a running brick has no marker");
    drop(top);
    assert!(marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_files_and_dirs() {
    let (_d, top) = new_brick();
    let cx = root();
    let a = mkdir(&top, &cx, Gfid::ROOT, "a").await;
    let b = mkdir(&top, &cx, Gfid::ROOT, "b").await;
    let f = mkfile(&top, &cx, a.attr.gfid, "f", b"one").await;
    let g = mkfile(&top, &cx, b.attr.gfid, "g", b"two").await;
    // Over an existing file, across directories: the target's handle goes away.
    top.rename(&cx, loc(a.attr.gfid, "f"), loc(b.attr.gfid, "g"), 0)
        .await
        .expect("rename");
    assert_eq!(
        top.lookup(&cx, loc(b.attr.gfid, "g"))
            .await
            .expect("lookup")
            .attr
            .gfid,
        f.attr.gfid
    );
    assert_eq!(top.stat(&cx, g.attr.gfid).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.lookup(&cx, loc(a.attr.gfid, "f")).await.err(),
        Some(Errno::ENOENT)
    );
    // A directory moved into another: children stay reachable by gfid.
    let inner = mkdir(&top, &cx, a.attr.gfid, "inner").await;
    let leaf = mkfile(&top, &cx, inner.attr.gfid, "leaf", b"L").await;
    top.rename(&cx, loc(Gfid::ROOT, "a"), loc(b.attr.gfid, "a2"), 0)
        .await
        .expect("rename dir");
    assert_eq!(top.stat(&cx, leaf.attr.gfid).await.expect("stat").size, 1);
    let n = top
        .lookup(&cx, loc(inner.attr.gfid, "leaf"))
        .await
        .expect("lookup via moved dir");
    assert_eq!(n.attr.gfid, leaf.attr.gfid);
    // Over an empty directory; over a non-empty one fails.
    let e = mkdir(&top, &cx, Gfid::ROOT, "empty").await;
    top.rename(&cx, loc(b.attr.gfid, "a2"), loc(Gfid::ROOT, "empty"), 0)
        .await
        .expect("over empty dir");
    assert_eq!(top.stat(&cx, e.attr.gfid).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, "empty"))
            .await
            .expect("lookup")
            .attr
            .gfid,
        a.attr.gfid
    );
    let r = top
        .rename(&cx, loc(Gfid::ROOT, "b"), loc(Gfid::ROOT, "empty"), 0)
        .await;
    assert!(matches!(
        r.err(),
        Some(Errno::ENOTEMPTY) | Some(Errno::EEXIST)
    ));
    // Dir over file and file over dir.
    mkfile(&top, &cx, Gfid::ROOT, "file", b"").await;
    assert_eq!(
        top.rename(&cx, loc(Gfid::ROOT, "b"), loc(Gfid::ROOT, "file"), 0)
            .await
            .err(),
        Some(Errno::ENOTDIR)
    );
    assert_eq!(
        top.rename(&cx, loc(Gfid::ROOT, "file"), loc(Gfid::ROOT, "b"), 0)
            .await
            .err(),
        Some(Errno::EISDIR)
    );
    // RENAME_NOREPLACE and RENAME_EXCHANGE of two directories.
    let r = top
        .rename(
            &cx,
            loc(Gfid::ROOT, "file"),
            loc(Gfid::ROOT, "b"),
            libc::RENAME_NOREPLACE,
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EEXIST));
    let x = mkdir(&top, &cx, Gfid::ROOT, "x").await;
    top.rename(
        &cx,
        loc(Gfid::ROOT, "x"),
        loc(Gfid::ROOT, "b"),
        libc::RENAME_EXCHANGE,
    )
    .await
    .expect("exchange");
    let xi = mkfile(&top, &cx, x.attr.gfid, "in-x", b"").await;
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, "b"))
            .await
            .expect("b")
            .attr
            .gfid,
        x.attr.gfid
    );
    assert_eq!(
        top.stat(&cx, xi.attr.gfid).await.expect("stat").kind,
        FileType::Regular
    );
    assert_eq!(names(&top, &cx, b.attr.gfid).await, vec!["g"]);
    // Renaming a hard link over another link of the same file is a no-op.
    top.link(&cx, f.attr.gfid, loc(Gfid::ROOT, "h"))
        .await
        .expect("link");
    top.rename(&cx, loc(Gfid::ROOT, "h"), loc(b.attr.gfid, "g"), 0)
        .await
        .expect("same inode");
    assert_eq!(top.stat(&cx, f.attr.gfid).await.expect("stat").nlink, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_dir_is_hidden_and_protected() {
    let (_d, top) = new_brick();
    let cx = root();
    mkfile(&top, &cx, Gfid::ROOT, "visible", b"").await;
    assert_eq!(names(&top, &cx, Gfid::ROOT).await, vec!["visible"]);
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, ".xlfs")).await.err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        top.mkdir(&cx, loc(Gfid::ROOT, ".xlfs"), 0o755, 0)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        top.rmdir(&cx, loc(Gfid::ROOT, ".xlfs")).await.err(),
        Some(Errno::EPERM)
    );
    let r = top
        .rename(&cx, loc(Gfid::ROOT, "visible"), loc(Gfid::ROOT, ".xlfs"), 0)
        .await;
    assert_eq!(r.err(), Some(Errno::EPERM));
    // `..` at the root is the root; `.` anywhere is the directory itself.
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, ".."))
            .await
            .expect("..")
            .attr
            .gfid,
        Gfid::ROOT
    );
    let a = mkdir(&top, &cx, Gfid::ROOT, "a").await;
    assert_eq!(
        top.lookup(&cx, loc(a.attr.gfid, ".."))
            .await
            .expect("..")
            .attr
            .gfid,
        Gfid::ROOT
    );
    assert_eq!(
        top.lookup(&cx, loc(a.attr.gfid, "."))
            .await
            .expect(".")
            .attr
            .gfid,
        a.attr.gfid
    );
}

/// A listing resumed in a directory removed since it was opened (another client emptied and
/// removed it) fails with ENOENT, as the kernel's own listing of a removed directory does:
/// ext4 turned the cookie's seek into EINVAL, which `rm -rf` reported as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_resumed_in_a_removed_directory_is_enoent() {
    let (_d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "d").await;
    for i in 0..100 {
        mkfile(&top, &cx, dir.attr.gfid, &format!("file-{i:03}"), b"").await;
    }
    let f = fd(dir.attr.gfid, libc::O_RDONLY);
    top.opendir(&cx, f).await.expect("opendir");
    let first = top.readdirp(&cx, f, 0, 1000).await.expect("first page");
    let cookie = first.last().expect("a page").next_offset;
    for i in 0..100 {
        let name = format!("file-{i:03}");
        top.unlink(&cx, loc(dir.attr.gfid, &name))
            .await
            .expect("unlink");
    }
    top.rmdir(&cx, loc(Gfid::ROOT, "d")).await.expect("rmdir");
    assert_eq!(
        top.readdirp(&cx, f, cookie, 1000).await.map(|b| b.len()),
        Err(Errno::ENOENT)
    );
    top.releasedir(&cx, f).await.expect("releasedir");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readdirp_pages_with_stable_cookies() {
    let (_d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "d").await;
    let mut want = Vec::new();
    for i in 0..300 {
        let n = format!("file-{i:03}");
        mkfile(&top, &cx, dir.attr.gfid, &n, b"").await;
        want.push(n);
    }
    want.sort();
    // Small pages: many calls, each resuming after the last cookie.
    let f = fd(dir.attr.gfid, libc::O_RDONLY);
    top.opendir(&cx, f).await.expect("opendir");
    let (mut got, mut off, mut calls) = (Vec::new(), 0, 0);
    loop {
        let batch = top.readdirp(&cx, f, off, 1000).await.expect("readdirp");
        if batch.is_empty() {
            break;
        }
        calls += 1;
        for e in batch.iter() {
            assert!(!e.attr.gfid.is_null());
            assert_eq!(e.attr.kind, FileType::Regular);
            got.push(e.name.to_string());
            off = e.next_offset;
        }
    }
    assert!(calls > 10, "pages were not small: {calls}");
    got.sort();
    assert_eq!(got, want);
    // Re-reading from a saved cookie gives the same continuation.
    let first = top.readdirp(&cx, f, 0, 2000).await.expect("first");
    let cookie = first[2].next_offset;
    let a = top.readdirp(&cx, f, cookie, 2000).await.expect("a");
    let b = top.readdirp(&cx, f, cookie, 2000).await.expect("b");
    assert_eq!(a[0].name, b[0].name);
    assert_eq!(a[0].name, first[3].name);
    top.releasedir(&cx, f).await.expect("releasedir");
    // Anonymous directory fd.
    let anon = xlator_api::Fd::anonymous(dir.attr.gfid, libc::O_RDONLY);
    assert!(
        !top.readdirp(&cx, anon, 0, 4096)
            .await
            .expect("anon readdirp")
            .is_empty()
    );
    let file = top
        .lookup(&cx, loc(dir.attr.gfid, "file-000"))
        .await
        .expect("lookup")
        .attr
        .gfid;
    assert_eq!(
        top.opendir(&cx, fd(file, libc::O_RDONLY)).await.err(),
        Some(Errno::ENOTDIR)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gfids_survive_restart_and_preexisting_data_gets_gfids() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("old")).expect("mkdir");
    std::fs::write(dir.path().join("old/data"), b"legacy").expect("write");
    let cx = root();
    let (f, d, legacy) = {
        let top = brick_at(dir.path());
        let d = mkdir(&top, &cx, Gfid::ROOT, "dir").await;
        let f = mkfile(&top, &cx, d.attr.gfid, "file", b"abc").await;
        let old = top
            .lookup(&cx, loc(Gfid::ROOT, "old"))
            .await
            .expect("old dir");
        let legacy = top
            .lookup(&cx, loc(old.attr.gfid, "data"))
            .await
            .expect("legacy");
        (f.attr.gfid, d.attr.gfid, legacy.attr.gfid)
    };
    let top = brick_at(dir.path());
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, "dir"))
            .await
            .expect("dir")
            .attr
            .gfid,
        d
    );
    assert_eq!(
        top.lookup(&cx, loc(d, "file"))
            .await
            .expect("file")
            .attr
            .gfid,
        f
    );
    assert_eq!(top.stat(&cx, f).await.expect("stat by gfid").size, 3);
    assert_eq!(top.stat(&cx, legacy).await.expect("legacy by gfid").size, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requested_gfid_is_used() {
    let (_d, top) = new_brick();
    let want = Gfid::random();
    let cx = xlator_api::Ctx::builder(0, 0)
        .ext(&xlfs_posix::GfidReq(want))
        .build();
    let e = top
        .mkdir(&cx, loc(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    assert_eq!(e.attr.gfid, want);
    // The same gfid cannot name a second object; the half-made entry is rolled back.
    let r = top.mkdir(&cx, loc(Gfid::ROOT, "e"), 0o755, 0).await;
    assert_eq!(r.err(), Some(Errno::EEXIST));
    assert_eq!(
        top.lookup(&root(), loc(Gfid::ROOT, "e")).await.err(),
        Some(Errno::ENOENT)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_refuses_bad_directories() {
    let e = try_brick(std::path::Path::new("/nonexistent/brick"), &[]).expect_err("refused");
    assert!(e.contains("not usable"), "{e}");
    let f = tempfile::NamedTempFile::new().expect("file");
    let e = try_brick(f.path(), &[]).expect_err("refused");
    assert!(e.contains("not a directory"), "{e}");
    if std::path::Path::new("/dev/shm").is_dir() {
        // Whatever /dev/shm supports, the answer is a clean Ok or a clear message.
        let d = tempfile::tempdir_in("/dev/shm").expect("shm dir");
        if let Err(e) = try_brick(d.path(), &[]) {
            assert!(
                e.contains("extended attributes") || e.contains("gfid"),
                "{e}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_recreates_a_missing_handle() {
    let (d, top) = new_brick();
    let cx = root();
    let dir = mkdir(&top, &cx, Gfid::ROOT, "dir").await.attr.gfid;
    let f = mkfile(&top, &cx, dir, "f", b"x").await.attr.gfid;
    let handle = |g: Gfid| handle_path(d.path(), g);
    std::fs::remove_file(handle(f)).expect("remove file handle");
    assert_eq!(top.stat(&cx, f).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.lookup(&cx, loc(dir, "f"))
            .await
            .expect("lookup")
            .attr
            .gfid,
        f
    );
    assert_eq!(top.stat(&cx, f).await.expect("healed").size, 1);
    // A fresh brick instance has no cached directory fds: the dir handle must heal too.
    std::fs::remove_file(handle(dir)).expect("remove dir handle");
    let top = brick_at(d.path());
    assert_eq!(top.stat(&cx, dir).await.err(), Some(Errno::ESTALE));
    assert_eq!(
        top.lookup(&cx, loc(Gfid::ROOT, "dir"))
            .await
            .expect("lookup")
            .attr
            .gfid,
        dir
    );
    assert!(top.stat(&cx, dir).await.expect("healed").is_dir());
}

/// Every entry fop that changes a directory returns the directory's attributes after it
/// (`postparent`), the same a stat right after would give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_fops_return_the_parents_attributes_after_them() {
    let (_d, top) = new_brick();
    let cx = root();
    let d = mkdir(&top, &cx, Gfid::ROOT, "d").await;
    let dg = d.attr.gfid;
    let check = |what: &str, post: Option<xlator_api::Iatt>, now: xlator_api::Iatt| {
        let post = post.unwrap_or_else(|| panic!("{what}: no postparent"));
        assert_eq!(post.gfid, dg, "{what}");
        assert_eq!(
            (post.nlink, post.size, post.mtime, post.ctime),
            (now.nlink, now.size, now.mtime, now.ctime),
            "{what}"
        );
    };
    let stat = || async { top.stat(&cx, dg).await.expect("stat dir") };

    let f = top
        .create(&cx, loc(dg, "f"), fd(Gfid::NULL, libc::O_RDWR), 0o644, 0)
        .await
        .expect("create");
    check("create", f.postparent.into_option(), stat().await);
    top.release(&cx, fd(f.attr.gfid, libc::O_RDWR))
        .await
        .expect("release");
    let sub = top
        .mkdir(&cx, loc(dg, "sub"), 0o755, 0)
        .await
        .expect("mkdir");
    check("mkdir", sub.postparent.into_option(), stat().await);
    assert_eq!(sub.postparent.into_option().map(|p| p.nlink), Some(3));
    let l = top
        .link(&cx, f.attr.gfid, loc(dg, "l"))
        .await
        .expect("link");
    check("link", l.postparent.into_option(), stat().await);
    let s = top
        .symlink(&cx, loc(dg, "s"), "f".into())
        .await
        .expect("symlink");
    check("symlink", s.postparent.into_option(), stat().await);
    let n = top
        .mknod(&cx, loc(dg, "p"), libc::S_IFIFO | 0o644, 0, 0)
        .await
        .expect("mknod");
    check("mknod", n.postparent.into_option(), stat().await);
    let r = top.unlink(&cx, loc(dg, "l")).await.expect("unlink");
    check("unlink", r.postparent.into_option(), stat().await);
    let r = top.rmdir(&cx, loc(dg, "sub")).await.expect("rmdir");
    check("rmdir", r.postparent.into_option(), stat().await);
    assert_eq!(r.postparent.into_option().map(|p| p.nlink), Some(2));
    // A lookup changes nothing and carries none.
    let e = top.lookup(&cx, loc(dg, "f")).await.expect("lookup");
    assert!(e.postparent.is_none());
}

/// The brick remembers which handle buckets exist; one removed by hand is made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_bucket_removed_by_hand_is_made_again() {
    for layout in [Layout::Flat, Layout::Nested] {
        let (d, top) = match layout {
            Layout::Flat => new_brick(),
            Layout::Nested => nested_brick(),
        };
        bucket_removed_by_hand(d.path(), &top, layout).await;
    }
}

async fn bucket_removed_by_hand(d: &std::path::Path, top: &Subvol, layout: Layout) {
    let with_gfid = |b: u8| {
        let mut g = Gfid::random();
        g.0[0] = 0xab;
        g.0[1] = 0xcd;
        g.0[2] = b;
        g
    };
    let (g1, g2, g3) = (with_gfid(1), with_gfid(2), with_gfid(3));
    for (g, name) in [(g1, "f1"), (g2, "f2")] {
        let cx = xlator_api::Ctx::builder(0, 0)
            .ext(&xlfs_posix::GfidReq(g))
            .build();
        let f = fd(Gfid::NULL, libc::O_RDWR);
        let e = top
            .create(&cx, loc(Gfid::ROOT, name), f, 0o644, 0)
            .await
            .expect("create");
        assert_eq!(e.attr.gfid, g);
        top.release(&cx, fd(g, libc::O_RDWR))
            .await
            .expect("release");
        if name == "f1" {
            let h = layout_handle(d, layout, g);
            assert!(h.exists(), "{layout:?}: {h:?}");
            std::fs::remove_dir_all(h.parent().expect("bucket")).expect("rm bucket");
        }
    }
    let cx = xlator_api::Ctx::builder(0, 0)
        .ext(&xlfs_posix::GfidReq(g3))
        .build();
    top.mkdir(&cx, loc(Gfid::ROOT, "d3"), 0o755, 0)
        .await
        .expect("mkdir in the remade bucket");
    for g in [g2, g3] {
        top.stat(&root(), g).await.expect("stat by gfid");
    }
    // f1's handle went with the bucket: a lookup by name heals it.
    top.lookup(&root(), loc(Gfid::ROOT, "f1"))
        .await
        .expect("lookup");
    top.stat(&root(), g1).await.expect("healed handle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_background_unlink_the_handle_goes_before_the_reply() {
    let d = tempfile::tempdir().expect("tempdir");
    let top = try_brick(d.path(), &[("background-unlink", "off")]).expect("brick init");
    let cx = root();
    let f = mkfile(&top, &cx, Gfid::ROOT, "f", b"x").await;
    assert!(handle_path(d.path(), f.attr.gfid).exists());
    top.unlink(&cx, loc(Gfid::ROOT, "f")).await.expect("unlink");
    assert!(!handle_path(d.path(), f.attr.gfid).exists());
    assert_eq!(top.stat(&cx, f.attr.gfid).await.err(), Some(Errno::ESTALE));
}

/// A brick made by a version with the nested handle layout keeps using it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brick_with_the_nested_layout_keeps_it() {
    let (d, top) = nested_brick();
    let cx = root();
    let a = mkdir(&top, &cx, Gfid::ROOT, "a").await.attr.gfid;
    let b = mkdir(&top, &cx, a, "b").await.attr.gfid;
    let f = mkfile(&top, &cx, b, "f", b"data").await.attr.gfid;
    for g in [Gfid::ROOT, a, b, f] {
        let h = layout_handle(d.path(), Layout::Nested, g);
        assert!(h.symlink_metadata().is_ok(), "{h:?}");
    }
    top.rename(&cx, loc(Gfid::ROOT, "a"), loc(Gfid::ROOT, "a2"), 0)
        .await
        .expect("rename");
    drop(top);
    // After a restart no directory fd is cached: GFIDs resolve through the nested links.
    let top = brick_at(d.path());
    assert_eq!(top.stat(&cx, b).await.expect("stat b").gfid, b);
    assert_eq!(top.stat(&cx, f).await.expect("stat f").size, 4);
    assert!(
        !d.path()
            .join(".xlfs")
            .join(Layout::Flat.dir_name())
            .exists()
    );
}

#[test]
fn a_brick_with_both_handle_layouts_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    for l in [Layout::Nested, Layout::Flat] {
        std::fs::create_dir_all(d.path().join(".xlfs").join(l.dir_name())).expect("mkdir");
    }
    let Err(e) = try_brick(d.path(), &[]) else {
        panic!("a brick with both layouts started");
    };
    assert!(e.contains("both"), "{e}");
}

/// With `unlinked-grace`, a file whose last name was replaced by a rename stays readable by
/// GFID for a while (a client that resolved the name a moment before the rename opens the
/// file it found), `link` refuses it at once, and after the grace it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_renamed_over_stays_readable_by_gfid_for_the_grace_then_goes() {
    let d = tempfile::tempdir().expect("tempdir");
    let top = try_brick(d.path(), &[("unlinked-grace", "400ms")]).expect("brick init");
    let cx = root();
    let old = mkfile(&top, &cx, Gfid::ROOT, "name", b"old contents")
        .await
        .attr
        .gfid;
    let new = mkfile(&top, &cx, Gfid::ROOT, "tmp", b"new").await.attr.gfid;
    top.rename(&cx, loc(Gfid::ROOT, "tmp"), loc(Gfid::ROOT, "name"), 0)
        .await
        .expect("rename over");
    let a = top
        .stat(&cx, old)
        .await
        .expect("stat of the replaced file in its grace");
    assert_eq!((a.size, a.nlink), (12, 0));
    let f = fd(old, libc::O_RDONLY);
    top.open(&cx, f)
        .await
        .expect("open of the replaced file in its grace");
    let r = top.readv(&cx, f, 0, 64).await.expect("read");
    assert_eq!(&r.data[..], b"old contents");
    assert_eq!(
        top.link(&cx, old, loc(Gfid::ROOT, "again")).await.err(),
        Some(Errno::ESTALE),
        "a nameless file is never given a name again"
    );
    let found = top
        .lookup(&cx, loc(Gfid::ROOT, "name"))
        .await
        .expect("lookup");
    assert_eq!(found.attr.gfid, new);
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    assert_eq!(top.stat(&cx, old).await.err(), Some(Errno::ESTALE));
    assert!(
        !handle_path(d.path(), old).exists(),
        "the handle went after the grace"
    );
    // The fd opened in the grace still reads, as on any file system.
    let r = top
        .readv(&cx, f, 0, 3)
        .await
        .expect("read through the open fd");
    assert_eq!(&r.data[..], b"old");
    top.release(&cx, f).await.expect("release");
}

/// `UnlinkExact` (rebalance removing the old copy of a moved file): refused with ESTALE when
/// the name names another GFID; otherwise the object is unreachable by GFID at once despite
/// `unlinked-grace`, while an fd open on it still reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_unlink_checks_the_gfid_and_skips_the_grace() {
    let d = tempfile::tempdir().expect("tempdir");
    let top = try_brick(d.path(), &[("unlinked-grace", "60s")]).expect("brick");
    let cx = root();
    let f = mkfile(&top, &cx, Gfid::ROOT, "f", b"moved").await;
    let g = mkfile(&top, &cx, Gfid::ROOT, "g", b"other").await;
    let exact = |x: Gfid| {
        xlator_api::Ctx::builder(0, 0)
            .ext(&xlator_api::UnlinkExact(x))
            .build()
    };
    assert_eq!(
        top.unlink(&exact(g.attr.gfid), loc(Gfid::ROOT, "f"))
            .await
            .err(),
        Some(Errno::ESTALE)
    );
    let o = fd(f.attr.gfid, libc::O_RDONLY);
    top.open(&cx, o).await.expect("open");
    top.unlink(&exact(f.attr.gfid), loc(Gfid::ROOT, "f"))
        .await
        .expect("exact unlink");
    assert_eq!(top.stat(&cx, f.attr.gfid).await.err(), Some(Errno::ESTALE));
    let r = top
        .readv(&cx, o, 0, 16)
        .await
        .expect("read through the open fd");
    assert_eq!(r.data.as_slice(), b"moved");
    top.release(&cx, o).await.expect("release");
    // The GFID is free at once: a new object may take it (rebalance copying a file back).
    let again = xlator_api::Ctx::builder(0, 0)
        .ext(&xlator_api::GfidReq(f.attr.gfid))
        .build();
    let n = top
        .create(
            &again,
            loc(Gfid::ROOT, "f2"),
            fd(Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create with the freed GFID");
    assert_eq!(n.attr.gfid, f.attr.gfid);
    // An ordinary unlink keeps the grace.
    top.unlink(&cx, loc(Gfid::ROOT, "g")).await.expect("unlink");
    assert!(top.stat(&cx, g.attr.gfid).await.is_ok());
}

/// `UnlinkUnlessMarked` (distribute's one-call unlink on a hashed child): a regular file with
/// exactly the given mode and xattr stays (EEXIST); anything else goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlink_unless_marked_leaves_the_marked_file() {
    let (_d, top) = new_brick();
    let cx = root();
    let made = xlator_api::CreateXattrs(vec![("trusted.mark".into(), b"x".to_vec())]);
    let mcx = xlator_api::Ctx::builder(0, 0).ext(&made).build();
    top.mknod(&mcx, loc(Gfid::ROOT, "m"), libc::S_IFREG | 0o1000, 0, 0)
        .await
        .expect("marked file");
    top.mknod(
        &cx,
        loc(Gfid::ROOT, "same-mode"),
        libc::S_IFREG | 0o1000,
        0,
        0,
    )
    .await
    .expect("same mode, no xattr");
    mkfile(&top, &cx, Gfid::ROOT, "plain", b"data").await;
    let ucx = xlator_api::Ctx::builder(0, 0)
        .ext(&xlator_api::UnlinkUnlessMarked {
            perm: 0o1000,
            xattr: "trusted.mark".into(),
        })
        .build();
    assert_eq!(
        top.unlink(&ucx, loc(Gfid::ROOT, "m")).await.err(),
        Some(Errno::EEXIST)
    );
    assert!(top.lookup(&cx, loc(Gfid::ROOT, "m")).await.is_ok());
    top.unlink(&ucx, loc(Gfid::ROOT, "same-mode"))
        .await
        .expect("no xattr: removed");
    top.unlink(&ucx, loc(Gfid::ROOT, "plain"))
        .await
        .expect("plain file: removed");
    assert_eq!(names(&top, &cx, Gfid::ROOT).await, vec!["m".to_string()]);
}
