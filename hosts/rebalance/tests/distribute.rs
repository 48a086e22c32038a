//! The runner against the real cluster/distribute over in-memory leaves: a volume of two
//! children filled with files in several directories gets a third child (a new distribute
//! over the same leaves plus an empty one, as add-brick's graph switch does), then a
//! rebalance must complete with every file readable with its bytes, on the child its name
//! hashes to in its directory's new layout, and no link file left anywhere; a second run
//! finds nothing to move. In remove-brick mode, with a child decommissioned, every file
//! leaves it.

use std::collections::BTreeMap;
use std::sync::Arc;

use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Gfid, Loc, Subvol, XattrReq};
use xlfs_dht::{Distribute, LAYOUT_XATTR, LINKTO_XATTR, Layout, Slice};
use xlfs_rebalance::status::{self, Mode, State};
use xlfs_rebalance::{Config, Stop, Target, run};
use xlfs_testkit::{MemLeaf, MockCluster};

static NEXT_FD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(5000);

fn fd(gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(NEXT_FD.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        gfid,
        flags,
    }
}

async fn create(top: &Subvol, parent: Gfid, name: &str, data: &[u8]) -> Gfid {
    let cx = Ctx::root();
    let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let e = top
        .create(&cx, Loc::new(parent, name), f, 0o644, 0)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    let f = Fd {
        gfid: e.attr.gfid,
        ..f
    };
    if !data.is_empty() {
        top.writev(&cx, f, 0, Buf::from_vec(data.to_vec()), 0)
            .await
            .expect("write");
    }
    top.release(&cx, f).await.expect("release");
    e.attr.gfid
}

async fn read_all(top: &Subvol, gfid: Gfid) -> Vec<u8> {
    let cx = Ctx::root();
    let f = fd(gfid, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    let mut out = Vec::new();
    loop {
        let r = top
            .readv(&cx, f, out.len() as u64, 1 << 16)
            .await
            .expect("read");
        if r.data.is_empty() {
            break;
        }
        out.extend_from_slice(&r.data);
    }
    top.release(&cx, f).await.expect("release");
    out
}

/// What leaf `leaf` holds at `parent/name`: None, Some(true) a link file, Some(false) data.
async fn held(leaf: &Subvol, parent: Gfid, name: &str) -> Option<bool> {
    let req = XattrReq {
        names: vec![LINKTO_XATTR.into()],
        prefixes: vec![],
    };
    let cx = Ctx::builder(0, 0).ext(&req).build();
    match leaf.lookup(&cx, Loc::new(parent, name)).await {
        Err(Errno::ENOENT) => None,
        Err(e) => panic!("lookup {name}: {e}"),
        Ok(e) => Some(e.xattr(LINKTO_XATTR).is_some()),
    }
}

async fn layout(leaves: &[Subvol], dir: Gfid) -> Layout {
    let mut slices = Vec::new();
    for l in leaves {
        let v = l
            .getxattr(&Ctx::root(), dir, LAYOUT_XATTR.into())
            .await
            .ok();
        slices.push(v.and_then(|b| Slice::decode(b.as_slice())));
    }
    Layout::merge(&slices).unwrap_or_else(|e| panic!("layout of {dir}: {e:?}"))
}

/// Every name of `dir` on `leaf`, with whether it is a link file.
async fn names(leaf: &Subvol, dir: Gfid) -> Vec<(String, bool)> {
    let cx = Ctx::root();
    let f = fd(dir, libc::O_RDONLY | libc::O_DIRECTORY);
    leaf.opendir(&cx, f).await.expect("opendir");
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let page = leaf.readdirp(&cx, f, off, 1 << 16).await.expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
        for e in page
            .iter()
            .filter(|e| e.name.as_str() != "." && e.name.as_str() != "..")
        {
            out.push((
                e.name.to_string(),
                held(leaf, dir, &e.name).await == Some(true),
            ));
        }
    }
    leaf.releasedir(&cx, f).await.expect("releasedir");
    out
}

/// add-brick over `leaves` (a distribute over all of them, the last one new and empty) and a
/// rebalance run to completion with nothing failed, skipped or vanished: the new graph, its
/// target, the run's config (its status file in the returned directory) and the run's end.
async fn add_brick_and_rebalance(
    leaves: &[Subvol],
) -> (
    Subvol,
    Arc<dyn Target>,
    Config,
    tempfile::TempDir,
    status::Status,
) {
    let all = MockCluster::with_leaves(leaves.to_vec());
    let new = all.build::<Distribute>(&[("min-free-disk", "0")]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = Config {
        parallel: 4,
        ..Config::new(tmp.path().join("rebalance.json"))
    };
    let target: Arc<dyn Target> = Arc::new(new.clone());
    let (start, _) = status::begin(None, Mode::Rebalance, false, None, 1, status::now_s());
    let end = run(target.clone(), start, &cfg, Stop::new())
        .await
        .expect("run");
    assert_eq!(end.state, State::Completed, "{end:?}");
    assert_eq!(
        (end.failures, end.files_skipped, end.files_vanished),
        (0, 0, 0),
        "{end:?}"
    );
    (new, target, cfg, tmp, end)
}

/// Another rebalance run after a completed one: the files its start counted as scanned
/// already, and its end.
async fn rebalance_again(target: Arc<dyn Target>, cfg: &Config) -> (u64, status::Status) {
    let (start, _) = status::begin(
        status::load(&cfg.status_path).expect("load"),
        Mode::Rebalance,
        false,
        None,
        1,
        status::now_s(),
    );
    let scanned = start.files_scanned;
    (
        scanned,
        run(target, start, cfg, Stop::new()).await.expect("run"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_brick_then_rebalance_puts_every_file_on_its_hashed_child() {
    let leaves: Vec<Subvol> = (0..3).map(|_| MemLeaf::new()).collect();
    let two = MockCluster::with_leaves(leaves[..2].to_vec());
    let old = two.build::<Distribute>(&[("min-free-disk", "0")]);
    let cx = Ctx::root();
    // 5 directories (one nested) of 20 files each, and 10 in the root.
    let mut dirs = vec![(Gfid::ROOT, "/".to_owned())];
    for d in 0..5 {
        let parent = if d == 4 { dirs[1].0 } else { Gfid::ROOT };
        let g = old
            .mkdir(&cx, Loc::new(parent, format!("d{d}")), 0o755, 0)
            .await
            .expect("mkdir")
            .attr
            .gfid;
        dirs.push((g, format!("d{d}")));
    }
    let mut files: BTreeMap<(Gfid, String), (Gfid, Vec<u8>)> = BTreeMap::new();
    for (i, (dir, _)) in dirs.iter().enumerate() {
        let n = if i == 0 { 10 } else { 20 };
        for k in 0..n {
            let name = format!("file-{i}-{k}");
            let data: Vec<u8> = (0..(k * 97 + i)).map(|b| (b * 7 + k) as u8).collect();
            let g = create(&old, *dir, &name, &data).await;
            files.insert((*dir, name), (g, data));
        }
    }
    drop(old);

    // add-brick: a distribute over the two children and a new empty one.
    let (new, target, cfg, _tmp, end) = add_brick_and_rebalance(&leaves).await;
    assert_eq!(end.files_scanned, files.len() as u64);
    assert_eq!(end.dirs_done, dirs.len() as u64);
    // About a third of the names hash to the new child.
    assert!(end.files_moved > 10, "{end:?}");

    let mut moved_bytes = 0;
    let mut on_new = 0;
    for ((dir, name), (gfid, data)) in &files {
        let l = layout(&leaves, *dir).await;
        let want = l.hashed(name);
        for (i, leaf) in leaves.iter().enumerate() {
            let h = held(leaf, *dir, name).await;
            if i == want {
                assert_eq!(h, Some(false), "{name} not on its hashed child {i}");
            } else {
                assert_eq!(h, None, "{name} also on child {i} (hashed: {want})");
            }
        }
        if want == 2 {
            on_new += 1;
            moved_bytes += data.len() as u64;
        }
        let e = new
            .lookup(&cx, Loc::new(*dir, name.as_str()))
            .await
            .expect("lookup");
        assert_eq!(e.attr.gfid, *gfid, "{name} kept its GFID");
        assert_eq!(&read_all(&new, *gfid).await, data, "{name} kept its bytes");
    }
    assert!(on_new > 0);
    // Files moved between the old children too when the layout's ranges shifted.
    assert!(end.files_moved >= on_new, "{end:?}");
    assert!(end.bytes_moved >= moved_bytes, "{end:?}");
    for (i, leaf) in leaves.iter().enumerate() {
        for (dir, path) in &dirs {
            for (name, link) in names(leaf, *dir).await {
                assert!(!link, "link file {path}/{name} left on child {i}");
            }
        }
    }

    // Again: everything is in place.
    let (scanned, end) = rebalance_again(target, &cfg).await;
    assert_eq!(scanned, 0, "a completed run starts afresh");
    assert_eq!(
        (end.state, end.files_moved, end.failures),
        (State::Completed, 0, 0)
    );
    assert_eq!(end.files_scanned, files.len() as u64);
}

/// Symlinks, fifos and sockets move too (before they were skipped as `not-a-file`, which left
/// their directories' layouts untrusted): each ends on its hashed child with its GFID, target,
/// owner and mode, nothing left behind (no temporary name, no link file), and a second run
/// finds nothing to move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_brick_then_rebalance_moves_symlinks_fifos_and_sockets_too() {
    let leaves: Vec<Subvol> = (0..3).map(|_| MemLeaf::new()).collect();
    let two = MockCluster::with_leaves(leaves[..2].to_vec());
    let old = two.build::<Distribute>(&[("min-free-disk", "0")]);
    let cx = Ctx::root();
    // name -> (GFID, kind, symlink target)
    let mut made: BTreeMap<String, (Gfid, xlator_api::FileType, String)> = BTreeMap::new();
    for k in 0..30 {
        let (name, target) = (format!("link-{k}"), format!("../target/{k}"));
        let e = old
            .symlink(
                &cx,
                Loc::new(Gfid::ROOT, name.as_str()),
                target.as_str().into(),
            )
            .await
            .expect("symlink");
        made.insert(name, (e.attr.gfid, xlator_api::FileType::Symlink, target));
    }
    for (k, ty) in (0..16).zip([libc::S_IFIFO, libc::S_IFSOCK].into_iter().cycle()) {
        let name = format!("special-{k}");
        let e = old
            .mknod(&cx, Loc::new(Gfid::ROOT, name.as_str()), ty | 0o640, 0, 0)
            .await
            .expect("mknod");
        let owner = xlator_api::SetAttr {
            uid: xlator_api::abi_stable::std_types::ROption::RSome(1000 + k),
            gid: xlator_api::abi_stable::std_types::ROption::RSome(100),
            ..xlator_api::SetAttr::default()
        };
        old.setattr(&cx, e.attr.gfid, owner).await.expect("chown");
        made.insert(name, (e.attr.gfid, e.attr.kind, String::new()));
    }
    drop(old);

    let (new, target, cfg, _tmp, end) = add_brick_and_rebalance(&leaves).await;
    assert!(end.files_moved > 5, "{end:?}");
    let l = layout(&leaves, Gfid::ROOT).await;
    for (name, (gfid, kind, link_target)) in &made {
        let want = l.hashed(name);
        for (i, leaf) in leaves.iter().enumerate() {
            let h = held(leaf, Gfid::ROOT, name).await;
            if i == want {
                assert_eq!(h, Some(false), "{name} not on its hashed child {i}");
            } else {
                assert_eq!(h, None, "{name} also on child {i} (hashed: {want})");
            }
        }
        let e = new
            .lookup(&cx, Loc::new(Gfid::ROOT, name.as_str()))
            .await
            .expect("lookup");
        assert_eq!((e.attr.gfid, e.attr.kind), (*gfid, *kind), "{name}");
        if *kind == xlator_api::FileType::Symlink {
            let t = new.readlink(&cx, *gfid).await.expect("readlink");
            assert_eq!(t.as_str(), link_target, "{name}");
        } else {
            assert_eq!(e.attr.perm & 0o7777, 0o640, "{name}");
            assert!(
                e.attr.uid >= 1000 && e.attr.gid == 100,
                "{name}: {:?}",
                e.attr
            );
        }
    }
    for (i, leaf) in leaves.iter().enumerate() {
        for (name, link) in names(leaf, Gfid::ROOT).await {
            assert!(!link, "link file {name} left on child {i}");
            assert!(
                !name.starts_with(".xlfs-dht-move."),
                "{name} left on child {i}"
            );
        }
    }
    let (_, end) = rebalance_again(target, &cfg).await;
    assert_eq!(
        (end.state, end.files_moved, end.failures, end.files_skipped),
        (State::Completed, 0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_brick_mode_empties_the_decommissioned_child() {
    let leaves: Vec<Subvol> = (0..3).map(|_| MemLeaf::new()).collect();
    let all = MockCluster::with_leaves(leaves.clone());
    let before = all.build::<Distribute>(&[("min-free-disk", "0")]);
    let cx = Ctx::root();
    let d = before
        .mkdir(&cx, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid;
    let mut files = Vec::new();
    for (dir, n) in [(Gfid::ROOT, 30), (d, 60)] {
        for k in 0..n {
            let name = format!("r{k}");
            let data = vec![k as u8; k * 13 + 1];
            files.push((
                dir,
                name.clone(),
                create(&before, dir, &name, &data).await,
                data,
            ));
        }
    }
    drop(before);
    let mut on_leaving = 0;
    for (dir, name, _, _) in &files {
        if held(&leaves[1], *dir, name).await.is_some() {
            on_leaving += 1;
        }
    }
    assert!(on_leaving > 5, "the child to remove holds files");

    // remove-brick start: child 1 decommissioned.
    let again = MockCluster::with_leaves(leaves.clone());
    let leaving = again.children()[1].name().to_string();
    let top = again.build::<Distribute>(&[("min-free-disk", "0"), ("decommissioned", &leaving)]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = Config::new(tmp.path().join("rb.json"));
    let (start, _) = status::begin(None, Mode::RemoveBrick, false, None, 1, status::now_s());
    let end = run(Arc::new(top.clone()), start, &cfg, Stop::new())
        .await
        .expect("run");
    assert_eq!(end.state, State::Completed, "{end:?}");
    assert_eq!(
        (end.mode, end.failures, end.files_skipped),
        (Mode::RemoveBrick, 0, 0)
    );
    assert!(end.files_moved >= on_leaving, "{end:?}");
    for (dir, name, gfid, data) in &files {
        assert_eq!(
            held(&leaves[1], *dir, name).await,
            None,
            "{name} still on the leaving child"
        );
        assert_eq!(&read_all(&top, *gfid).await, data, "{name}");
    }
    // Only the directory copies stay (remove-brick commit drops the brick).
    assert_eq!(
        names(&leaves[1], Gfid::ROOT).await,
        vec![("d".to_owned(), false)]
    );
    assert!(
        names(&leaves[1], d).await.is_empty(),
        "names left on the leaving child"
    );
}

async fn mkdir(top: &Subvol, name: &str) -> Gfid {
    top.mkdir(&Ctx::root(), Loc::new(Gfid::ROOT, name), 0o755, 0)
        .await
        .expect("mkdir")
        .attr
        .gfid
}

/// A file with hard links: its GFID, its bytes, every one of its names.
type Linked = (Gfid, Vec<u8>, Vec<(Gfid, String)>);

/// Files with hard links: `n` files in `a`, each linked into `b` and the even ones also a
/// second time in `a`. (GFID, data, every name) per file.
async fn linked_files(top: &Subvol, a: Gfid, b: Gfid, n: usize) -> Vec<Linked> {
    let cx = Ctx::root();
    let mut out = Vec::new();
    for k in 0..n {
        let data = vec![k as u8 + 1; k * 211 + 7];
        let g = create(top, a, &format!("h{k}"), &data).await;
        let mut all = vec![(a, format!("h{k}")), (b, format!("l{k}"))];
        if k % 2 == 0 {
            all.push((a, format!("h{k}.again")));
        }
        for (dir, name) in &all[1..] {
            top.link(&cx, g, Loc::new(*dir, name.as_str()))
                .await
                .unwrap_or_else(|e| panic!("link {name}: {e}"));
        }
        out.push((g, data, all));
    }
    out
}

/// Every name of every file answers its GFID and as many links as it has names, and reads
/// its bytes; a write through one name is read through the others (one file, not copies).
async fn check_linked(top: &Subvol, files: &[Linked]) {
    let cx = Ctx::root();
    for (g, data, all) in files {
        for (dir, name) in all {
            let e = top
                .lookup(&cx, Loc::new(*dir, name.as_str()))
                .await
                .unwrap_or_else(|e| panic!("lookup {name}: {e}"));
            assert_eq!(
                (e.attr.gfid, e.attr.nlink as usize),
                (*g, all.len()),
                "{name}"
            );
            assert_eq!(&read_all(top, e.attr.gfid).await, data, "{name}");
        }
        let f = fd(*g, libc::O_RDWR);
        top.open(&cx, f).await.expect("open");
        top.writev(&cx, f, 0, Buf::from_vec(b"shared".to_vec()), 0)
            .await
            .expect("write");
        top.release(&cx, f).await.expect("release");
        let last = all.last().expect("names");
        let e = top
            .lookup(&cx, Loc::new(last.0, last.1.as_str()))
            .await
            .expect("lookup");
        assert_eq!(&read_all(top, e.attr.gfid).await[..6], b"shared");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_brick_moves_files_with_hard_links_with_all_their_names() {
    let leaves: Vec<Subvol> = (0..3).map(|_| MemLeaf::new()).collect();
    let before =
        MockCluster::with_leaves(leaves.clone()).build::<Distribute>(&[("min-free-disk", "0")]);
    let dirs = [mkdir(&before, "a").await, mkdir(&before, "b").await];
    let files = linked_files(&before, dirs[0], dirs[1], 24).await;
    drop(before);
    let mut on_leaving = 0;
    for (_, _, all) in &files {
        if held(&leaves[1], all[0].0, &all[0].1).await == Some(false) {
            on_leaving += 1;
        }
    }
    assert!(
        on_leaving >= 3,
        "the child to remove holds files with links"
    );

    let again = MockCluster::with_leaves(leaves.clone());
    let leaving = again.children()[1].name().to_string();
    let top = again.build::<Distribute>(&[("min-free-disk", "0"), ("decommissioned", &leaving)]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = Config::new(tmp.path().join("rb.json"));
    let (start, _) = status::begin(None, Mode::RemoveBrick, false, None, 1, status::now_s());
    let end = run(Arc::new(top.clone()), start, &cfg, Stop::new())
        .await
        .expect("run");
    assert_eq!(end.state, State::Completed, "{end:?}");
    assert_eq!((end.failures, end.files_skipped), (0, 0), "{end:?}");
    assert!(end.files_moved >= on_leaving, "{end:?}");
    for d in &dirs {
        assert!(
            names(&leaves[1], *d).await.is_empty(),
            "names left on the leaving child: {:?}",
            names(&leaves[1], *d).await
        );
    }
    check_linked(&top, &files).await;
    // Every name is where its layout says, as the file or as a link file to it.
    for (_, _, all) in &files {
        for (dir, name) in all {
            let h = layout(&leaves, *dir).await.hashed(name);
            assert!(held(&leaves[h], *dir, name).await.is_some(), "{name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_brick_rebalance_places_every_name_of_files_with_hard_links() {
    let leaves: Vec<Subvol> = (0..3).map(|_| MemLeaf::new()).collect();
    let before = MockCluster::with_leaves(leaves[..2].to_vec())
        .build::<Distribute>(&[("min-free-disk", "0")]);
    let dirs = [mkdir(&before, "a").await, mkdir(&before, "b").await];
    let files = linked_files(&before, dirs[0], dirs[1], 24).await;
    drop(before);
    // Completes with nothing skipped (so every directory's layout is committed).
    let (top, _, _, _tmp, _) = add_brick_and_rebalance(&leaves).await;
    for d in &dirs {
        assert!(layout(&leaves, *d).await.trusted, "layout of {d} committed");
    }
    check_linked(&top, &files).await;
    let mut pointed = 0;
    for (g, _, all) in &files {
        for (dir, name) in all {
            let h = layout(&leaves, *dir).await.hashed(name);
            let at = held(&leaves[h], *dir, name).await;
            assert!(at.is_some(), "{name} not on its hashed child {h}");
            if at == Some(true) {
                pointed += 1;
            }
            // The data did not move: it is where it was, on one of the first two children.
            let copies =
                futures::future::join_all(leaves.iter().map(|l| l.stat(&Ctx::root(), *g))).await;
            assert!(copies[2].is_err() || h == 2 || at == Some(false), "{name}");
        }
    }
    assert!(
        pointed > 0,
        "some names hashed away from their file's child"
    );
}
