//! The heal index (`.xlfs/indices/xattrop/<gfid>`): an object gets an entry before one of its
//! `trusted.afr.*` counters becomes non-zero and loses it once all are zero again; entries a
//! crash left behind (counters zero, or the object gone) are dropped after the next xattrop or
//! by the scan at start. An entry left all-zero goes once it settled (`index::SETTLE`).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use xlator_api::{Buf, Errno, Gfid, Subvol, Xattr, XattropOp, Xattrs};

const C0: &str = "trusted.afr.vol-client-0";
const C1: &str = "trusted.afr.vol-client-1";

fn ops(list: &[(&str, [i32; 3])]) -> Xattrs {
    list.iter()
        .map(|(n, lanes)| {
            let mut v = Vec::with_capacity(12);
            for l in lanes {
                v.extend_from_slice(&l.to_be_bytes());
            }
            Xattr {
                name: (*n).into(),
                value: Buf::from_vec(v),
            }
        })
        .collect()
}

async fn add(top: &Subvol, g: Gfid, list: &[(&str, [i32; 3])]) -> Result<Xattrs, Errno> {
    top.xattrop(&root(), g, XattropOp::AddArray32, ops(list))
        .await
}

fn indexed(dir: &Path) -> Vec<Gfid> {
    xlfs_posix::index_entries(dir).expect("read the index")
}

/// The index once the settle pass had its chance: entries left all-zero go [`SETTLE`] after
/// their last xattrop (polled, at most 10 s, until it is `want`).
///
/// [`SETTLE`]: xlfs_posix::INDEX_SETTLE
fn settled(dir: &Path, want: &[Gfid]) -> Vec<Gfid> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = indexed(dir);
        if now == want || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn entry_file(dir: &Path, g: Gfid) -> std::path::PathBuf {
    xlfs_posix::index_path(dir).join(g.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonzero_counter_adds_the_entry_and_all_zero_removes_it() {
    let (d, top) = new_brick();
    let g = mkfile(&top, &root(), Gfid::ROOT, "f", b"x").await.attr.gfid;
    assert!(indexed(d.path()).is_empty(), "a new file is not indexed");

    // Pre-op: dirty +1 under the own key, the other key read only.
    add(&top, g, &[(C0, [1, 0, 0]), (C1, [0, 0, 0])])
        .await
        .expect("pre-op");
    assert_eq!(indexed(d.path()), [g]);
    assert!(
        std::fs::metadata(entry_file(d.path(), g))
            .expect("entry")
            .is_file()
    );

    // Post-op where child 1 failed: own key back to zero, child 1 blamed: stays indexed.
    add(&top, g, &[(C0, [-1, 0, 0]), (C1, [1, 0, 0])])
        .await
        .expect("post-op");
    assert_eq!(indexed(d.path()), [g], "child 1 is still blamed");

    // A heal clears the blame on child 1 alone: every pending key is zero, the entry goes
    // once it settled (not at once: a busy object keeps its entry between transactions).
    add(&top, g, &[(C1, [-1, 0, 0])]).await.expect("heal");
    assert_eq!(indexed(d.path()), [g], "kept until it settles");
    assert!(settled(d.path(), &[]).is_empty());

    // A key outside the op (C0 left non-zero) keeps the entry when the op's keys are zero.
    add(&top, g, &[(C0, [0, 1, 0])]).await.expect("meta +1");
    add(&top, g, &[(C1, [0, 0, 1])]).await.expect("entry +1");
    add(&top, g, &[(C1, [0, 0, -1])]).await.expect("entry -1");
    std::thread::sleep(xlfs_posix::INDEX_SETTLE + Duration::from_millis(700));
    assert_eq!(
        indexed(d.path()),
        [g],
        "C0's metadata lane is still non-zero"
    );
    add(&top, g, &[(C0, [0, -1, 0])]).await.expect("meta -1");
    assert!(settled(d.path(), &[]).is_empty());

    // Other xattrs and read-only ops never index.
    add(&top, g, &[(C0, [0, 0, 0])]).await.expect("read");
    top.xattrop(
        &root(),
        g,
        XattropOp::AddArray32,
        ops(&[("trusted.other", [5, 0, 0])]),
    )
    .await
    .expect("other counter");
    assert!(indexed(d.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_and_fxattrop_are_indexed_too() {
    let (d, top) = new_brick();
    let dir = mkdir(&top, &root(), Gfid::ROOT, "d").await.attr.gfid;
    add(&top, dir, &[(C1, [0, 0, 1])])
        .await
        .expect("entry lane");
    let f = mkfile(&top, &root(), dir, "f", b"").await.attr.gfid;
    let o = fd(f, libc::O_RDWR);
    top.open(&root(), o).await.expect("open");
    top.fxattrop(&root(), o, XattropOp::AddArray32, ops(&[(C0, [1, 0, 0])]))
        .await
        .expect("fxattrop");
    let mut want = vec![dir, f];
    want.sort_unstable_by_key(|g| g.0);
    assert_eq!(indexed(d.path()), want);
    top.fxattrop(&root(), o, XattropOp::AddArray32, ops(&[(C0, [-1, 0, 0])]))
        .await
        .expect("fxattrop back");
    assert_eq!(settled(d.path(), &[dir]), [dir]);
    top.release(&root(), o).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_is_not_made_non_zero_without_its_entry() {
    let (d, top) = new_brick();
    let g = mkfile(&top, &root(), Gfid::ROOT, "f", b"").await.attr.gfid;
    let idx = xlfs_posix::index_path(d.path());
    // The index directory removed by hand (base file and all) is made again by the next
    // entry.
    std::fs::remove_dir_all(&idx).expect("rm -r index");
    add(&top, g, &[(C0, [1, 0, 0])]).await.expect("pre-op");
    assert_eq!(indexed(d.path()), [g]);
    add(&top, g, &[(C0, [-1, 0, 0])]).await.expect("post-op");
    assert!(settled(d.path(), &[]).is_empty());
    // Something else in its place: the entry cannot be made, so the xattrop is refused and
    // the counter stays unwritten.
    std::fs::remove_dir_all(&idx).expect("rm -r index");
    std::fs::write(&idx, b"not a directory").expect("a file in its place");
    let e = add(&top, g, &[(C0, [1, 0, 0])]).await.expect_err("refused");
    assert_eq!(e, Errno::ENOENT);
    // Zero deltas (reads) still work without an index.
    let v = add(&top, g, &[(C0, [0, 0, 0])]).await.expect("read");
    assert_eq!(v[0].value.as_slice(), [0u8; 12], "nothing was written");
    // Once the directory can be made again, the counters work.
    std::fs::remove_file(&idx).expect("rm the file");
    add(&top, g, &[(C0, [1, 0, 0])]).await.expect("pre-op");
    assert_eq!(indexed(d.path()), [g]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_left_entry_with_zero_counters_goes_at_the_next_xattrop() {
    let (d, top) = new_brick();
    let g = mkfile(&top, &root(), Gfid::ROOT, "f", b"").await.attr.gfid;
    // As after a crash between the xattr back at zero and the entry's removal.
    add(&top, g, &[(C0, [1, 0, 0])]).await.expect("+1");
    assert_eq!(indexed(d.path()), [g]);
    // Put the counter back to zero behind the brick's back, keeping the entry.
    let p = d.path().join("f");
    set_raw(&p, C0, &[0u8; 12]);
    assert_eq!(indexed(d.path()), [g]);
    // The next transaction on the object (pre-op, post-op) leaves no entry.
    add(&top, g, &[(C0, [1, 0, 0])]).await.expect("pre-op");
    add(&top, g, &[(C0, [-1, 0, 0])]).await.expect("post-op");
    assert!(settled(d.path(), &[]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scan_at_start_drops_zero_and_vanished_entries_and_keeps_pending_ones() {
    let (d, top) = new_brick();
    let pending = mkfile(&top, &root(), Gfid::ROOT, "p", b"").await.attr.gfid;
    let zero = mkfile(&top, &root(), Gfid::ROOT, "z", b"").await.attr.gfid;
    let dir = mkdir(&top, &root(), Gfid::ROOT, "d").await.attr.gfid;
    add(&top, pending, &[(C1, [1, 0, 0])])
        .await
        .expect("pending");
    add(&top, dir, &[(C1, [0, 0, 1])])
        .await
        .expect("dir pending");
    drop(top);
    // Stopped brick: an entry whose counters are zero (a crash), one with no counters at all,
    // and one of a GFID that no longer resolves (its object was removed).
    let gone = Gfid::random();
    for g in [zero, gone] {
        std::fs::write(entry_file(d.path(), g), b"").expect("fake entry");
    }
    set_raw(&d.path().join("z"), C0, &[0u8; 12]);
    std::fs::remove_dir(d.path().join("d")).expect("rmdir behind the brick");
    let mut want = vec![pending, zero, gone, dir];
    want.sort_unstable_by_key(|g| g.0);
    assert_eq!(indexed(d.path()), want);

    let _top = brick_at(d.path());
    let deadline = Instant::now() + Duration::from_secs(10);
    while indexed(d.path()).len() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        indexed(d.path()),
        [pending],
        "only the object still blamed stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlinked_file_leaves_no_entry_once_its_handle_is_reaped() {
    let (d, top) = new_brick();
    let g = mkfile(&top, &root(), Gfid::ROOT, "f", b"").await.attr.gfid;
    add(&top, g, &[(C1, [1, 0, 0])]).await.expect("pending");
    assert_eq!(indexed(d.path()), [g]);
    top.unlink(&root(), loc(Gfid::ROOT, "f"))
        .await
        .expect("unlink");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !indexed(d.path()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        indexed(d.path()).is_empty(),
        "the reaper dropped the entry with the handle"
    );
}

/// Sets an xattr on a brick path directly (as a crash or another tool would leave it).
fn set_raw(p: &Path, name: &str, v: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    let cn = std::ffi::CString::new(name).expect("name");
    // SAFETY: NUL-terminated strings and a buffer of `v.len()` readable bytes.
    let r = unsafe { libc::setxattr(cp.as_ptr(), cn.as_ptr(), v.as_ptr().cast(), v.len(), 0) };
    assert_eq!(r, 0, "setxattr {name} on {p:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locate_finds_paths_kinds_and_counters_from_the_brick_files() {
    let d = tempfile::tempdir().expect("tempdir");
    let top = try_brick(d.path(), &[("unlinked-grace", "60s")]).expect("brick");
    let a = mkdir(&top, &root(), Gfid::ROOT, "a").await.attr.gfid;
    let b = mkdir(&top, &root(), a, "b").await.attr.gfid;
    let f = mkfile(&top, &root(), b, "f", b"data").await.attr.gfid;
    let s = top
        .symlink(&root(), loc(a, "link"), "f".into())
        .await
        .expect("symlink")
        .attr
        .gfid;
    let n = mkfile(&top, &root(), a, "gone-name", b"").await.attr.gfid;
    add(&top, f, &[(C1, [1, 0, 0])]).await.expect("f pending");
    add(&top, b, &[(C1, [0, 0, 2])]).await.expect("b pending");
    add(&top, s, &[(C0, [0, 1, 0])])
        .await
        .expect("symlink pending");
    add(&top, n, &[(C0, [1, 0, 0])]).await.expect("n pending");
    top.unlink(&root(), loc(a, "gone-name"))
        .await
        .expect("unlink");
    let gone = Gfid::random();
    let got = xlfs_posix::locate(d.path(), &[Gfid::ROOT, b, f, s, n, gone]);
    let by = |g: Gfid| got.iter().find(|l| l.gfid == g).expect("located");
    assert_eq!(by(Gfid::ROOT).path.as_deref(), Some("/"));
    assert_eq!(by(b).what, xlfs_posix::Found::Directory);
    assert_eq!(by(b).path.as_deref(), Some("/a/b"));
    assert_eq!(
        by(b).counters.get(C1).map(Vec::as_slice),
        Some(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2][..])
    );
    assert_eq!(by(f).what, xlfs_posix::Found::Other);
    assert_eq!(by(f).path.as_deref(), Some("/a/b/f"));
    assert_eq!(
        by(f).counters.get(C1).map(Vec::as_slice),
        Some(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0][..])
    );
    assert_eq!(
        by(s).what,
        xlfs_posix::Found::Other,
        "a symlink is an object"
    );
    assert_eq!(by(s).path.as_deref(), Some("/a/link"));
    assert_eq!(by(n).what, xlfs_posix::Found::Nameless);
    assert_eq!(by(n).path, None);
    assert_eq!(by(gone).what, xlfs_posix::Found::Gone);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_are_links_of_one_base_file_not_inodes_of_their_own() {
    use std::os::unix::fs::MetadataExt;
    let (d, top) = new_brick();
    let f = mkfile(&top, &root(), Gfid::ROOT, "f", b"").await.attr.gfid;
    let g = mkfile(&top, &root(), Gfid::ROOT, "g", b"").await.attr.gfid;
    add(&top, f, &[(C0, [1, 0, 0])]).await.expect("pre-op f");
    add(&top, g, &[(C0, [0, 1, 0])]).await.expect("pre-op g");
    let mut want = vec![f, g];
    want.sort_unstable_by_key(|g| g.0);
    assert_eq!(indexed(d.path()), want);
    let idx = xlfs_posix::index_path(d.path());
    let ino = |g: Gfid| {
        std::fs::metadata(idx.join(g.to_string()))
            .expect("entry")
            .ino()
    };
    let base = std::fs::metadata(idx.join("base-0")).expect("base file");
    assert_eq!(ino(f), base.ino());
    assert_eq!(ino(g), base.ino());
    assert_eq!(base.nlink(), 3, "the base and two entries");
}

/// A file created with a non-zero pending counter among its `CreateXattrs` (replicate's
/// pre-op riding with the create) is indexed from the moment it exists; the post-op that
/// zeroes the counter lets the entry settle away as usual. A create with all-zero counters is
/// not indexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_created_with_a_pending_counter_is_indexed_from_birth() {
    let (d, top) = new_brick();
    let marks = |v: u8| {
        xlator_api::CreateXattrs(vec![(C0.into(), vec![0, 0, 0, v, 0, 0, 0, v, 0, 0, 0, 0])])
    };
    let create = |name: &'static str, v: u8| {
        let cx = root().to_builder().ext(&marks(v)).build();
        let top = top.clone();
        async move {
            top.create(
                &cx,
                loc(Gfid::ROOT, name),
                fd(Gfid::NULL, libc::O_RDWR),
                0o644,
                0,
            )
            .await
            .expect("create")
            .attr
            .gfid
        }
    };
    let g = create("f", 1).await;
    assert_eq!(indexed(d.path()), [g]);
    create("clean", 0).await;
    assert_eq!(indexed(d.path()), [g], "all-zero counters are not indexed");
    add(&top, g, &[(C0, [-1, -1, 0])]).await.expect("post-op");
    assert_eq!(settled(d.path(), &[]), Vec::<Gfid>::new());
}

/// A directory removed while a counter of it is non-zero (replicate's hold of its names ended
/// after the rmdir: its post-op found nothing to clear) takes its index entry with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_drops_the_directorys_entry() {
    let (d, top) = new_brick();
    let dir = mkdir(&top, &root(), Gfid::ROOT, "d").await.attr.gfid;
    add(&top, dir, &[(C0, [0, 0, 1])]).await.expect("pre-op");
    assert_eq!(indexed(d.path()), [dir]);
    top.rmdir(&root(), loc(Gfid::ROOT, "d"))
        .await
        .expect("rmdir");
    assert!(indexed(d.path()).is_empty());
    // The post-op that comes after finds no directory and leaves no entry.
    let late = add(&top, dir, &[(C0, [0, 0, -1])]).await;
    assert!(late.is_err(), "{late:?}");
    assert!(indexed(d.path()).is_empty());
}
