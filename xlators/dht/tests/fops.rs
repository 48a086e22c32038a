//! Mock-cluster tests of cluster/distribute: placement, directories, lookup fallback and
//! link files, renames and hard links across children, layout repair, min-free-disk, statfs.

mod common;

use common::*;
use xlator_api::{Ctx, Errno, Fop, Gfid, Loc, Subvol};
use xlfs_dht::{LAYOUT_XATTR, Layout, Slice};
use xlfs_testkit::MockCluster;
use xlfs_testkit::memfs::MemLeaf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_land_on_the_child_their_name_hashes_to_and_nowhere_else() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    assert!(layout.trusted, "a new directory's layout is trusted");
    let mut per_child = [0; 4];
    for k in 0..120 {
        let name = format!("file{k}");
        let g = create_with(&top, d, &name, name.as_bytes()).await;
        let h = layout.hashed(&name);
        per_child[h] += 1;
        let seen = everywhere(&cluster, d, &name).await;
        for (i, s) in seen.iter().enumerate() {
            let want = if i == h { Held::File(g) } else { Held::Nothing };
            assert_eq!(*s, want, "{name} on child {i}: {seen:?}");
        }
        assert_eq!(read_all(&top, g).await, name.as_bytes());
    }
    assert!(per_child.iter().all(|&c| c > 10), "spread: {per_child:?}");
    // Symlinks and devices too.
    let e = top
        .symlink(&root(), Loc::new(d, "sl"), "target".into())
        .await
        .expect("symlink");
    assert_eq!(
        everywhere(&cluster, d, "sl").await[layout.hashed("sl")],
        Held::File(e.attr.gfid)
    );
    let e = top
        .mknod(&root(), Loc::new(d, "fifo"), libc::S_IFIFO | 0o644, 0, 0)
        .await
        .expect("mknod");
    assert_eq!(
        everywhere(&cluster, d, "fifo").await[layout.hashed("fifo")],
        Held::File(e.attr.gfid)
    );
    assert_eq!(
        top.readlink(
            &root(),
            top.lookup(&root(), Loc::new(d, "sl"))
                .await
                .expect("lookup")
                .attr
                .gfid
        )
        .await
        .expect("readlink")
        .as_str(),
        "target"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mkdir_makes_every_copy_with_one_gfid_and_its_slice() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let sub = mkdir(&top, d, "sub").await;
    for g in [d, sub] {
        let name = if g == d { "d" } else { "sub" };
        let parent = if g == d { Gfid::ROOT } else { d };
        assert_eq!(
            everywhere(&cluster, parent, name).await,
            vec![Held::Dir(g); 3]
        );
        let l = leaf_layout(&cluster, g).await;
        assert_eq!(l, Layout::generate(g, 3, true));
    }
    // EEXIST from child 0 before anything is made elsewhere.
    assert_eq!(
        top.mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .map(drop),
        Err(Errno::EEXIST)
    );
    // A directory's attributes take the latest times of its copies.
    let before = top.stat(&root(), d).await.expect("stat");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let layout = leaf_layout(&cluster, d).await;
    let on2 = name_on(&layout, "x", 2);
    create_with(&top, d, &on2, b"").await;
    let after = top.stat(&root(), d).await.expect("stat");
    assert!(
        after.mtime > before.mtime,
        "a create on child 2 moves the directory's mtime"
    );
    // setattr of a directory reaches every copy.
    let set = xlator_api::SetAttr {
        perm: xlator_api::abi_stable::std_types::ROption::RSome(0o700),
        ..Default::default()
    };
    top.setattr(&root(), d, set).await.expect("setattr");
    for i in 0..3 {
        assert_eq!(
            cluster.leaf(i).stat(&root(), d).await.expect("stat").perm & 0o777,
            0o700,
            "child {i}"
        );
    }
    // Listing the root shows d once.
    let names = list_names(&top, Gfid::ROOT, 4096).await;
    assert_eq!(names, vec!["d".to_string()]);
    // Own xattrs are hidden and refused.
    let xs = top.listxattr(&root(), d).await.expect("listxattr");
    assert!(xs.iter().all(|n| !n.starts_with("trusted.dht.")), "{xs:?}");
    assert_eq!(
        top.getxattr(&root(), d, LAYOUT_XATTR.into())
            .await
            .map(drop),
        Err(Errno::ENODATA)
    );
    let x = xlator_api::Xattr {
        name: LAYOUT_XATTR.into(),
        value: vec![0u8; 20].into(),
    };
    assert_eq!(top.setxattr(&root(), d, x, 0).await, Err(Errno::EPERM));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_lookup_in_a_trusted_directory_is_one_call() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    lookups_since(&cluster);
    assert_eq!(
        lookup(&top, d, "nothing").await.map(drop),
        Err(Errno::ENOENT)
    );
    assert_eq!(lookups_since(&cluster).iter().sum::<usize>(), 1);
    // A file on its hashed child: one call as well.
    create_with(&top, d, "f", b"x").await;
    lookups_since(&cluster);
    lookup(&top, d, "f").await.expect("lookup");
    assert_eq!(lookups_since(&cluster).iter().sum::<usize>(), 1);
}

/// Makes `d`'s layout untrusted on every leaf (as after a repair of a non-empty directory).
async fn distrust(cluster: &MockCluster, d: Gfid) {
    for i in 0..cluster.len() {
        let mut s = leaf_slice(cluster, i, d).await.expect("slice");
        s.flags = 0;
        set_leaf_slice(cluster, i, d, Some(s)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_off_its_hashed_child_is_found_once_then_through_a_link_file() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let name = "stray";
    let h = layout.hashed(name);
    let c = (h + 1) % 4;
    // A file placed by some other layout, straight on child c's brick.
    let g = {
        let id = next_fd_id();
        let e = cluster
            .leaf(c)
            .create(
                &root(),
                Loc::new(d, name),
                fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT),
                0o644,
                0,
            )
            .await
            .expect("leaf create");
        cluster
            .leaf(c)
            .release(&root(), fd(id, e.attr.gfid, 0))
            .await
            .expect("release");
        e.attr.gfid
    };
    // Trusted layout: the hashed child's answer is final.
    assert_eq!(lookup(&top, d, name).await.map(drop), Err(Errno::ENOENT));
    distrust(&cluster, d).await;
    let client = fresh(&cluster, &[]);
    lookups_since(&cluster);
    assert_eq!(
        lookup(&client, d, name)
            .await
            .expect("found everywhere")
            .attr
            .gfid,
        g
    );
    let calls = lookups_since(&cluster);
    assert_eq!(
        calls.iter().sum::<usize>(),
        4,
        "hashed, then the three others once: {calls:?}"
    );
    let link = held(&cluster, h, d, name).await;
    assert_eq!(link, Held::Link(cluster.children()[c].name().to_string()));
    // Next lookup (any client): the hashed child, then straight to the target.
    let client2 = fresh(&cluster, &[]);
    lookups_since(&cluster);
    assert_eq!(
        lookup(&client2, d, name)
            .await
            .expect("through the link")
            .attr
            .gfid,
        g
    );
    let calls = lookups_since(&cluster);
    assert_eq!(
        (calls[h], calls[c], calls.iter().sum::<usize>()),
        (1, 1, 2),
        "{calls:?}"
    );
    // The link file is not listed; the file is, once.
    assert_eq!(list_names(&client2, d, 4096).await, vec![name.to_string()]);
    // Untrusted negative lookups ask everyone once.
    lookups_since(&cluster);
    assert_eq!(
        lookup(&client2, d, "none").await.map(drop),
        Err(Errno::ENOENT)
    );
    assert_eq!(lookups_since(&cluster).iter().sum::<usize>(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_link_file_is_no_file_and_a_create_replaces_it() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "s");
    let g = create_with(&top, d, &a, b"data").await;
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    assert!(matches!(held(&cluster, hb, d, &b).await, Held::Link(_)));
    // The data vanishes behind the link file's back (a brick repaired by hand).
    cluster
        .leaf(ha)
        .unlink(&root(), Loc::new(d, b.as_str()))
        .await
        .expect("leaf unlink");
    assert_eq!(lookup(&top, d, &b).await.map(drop), Err(Errno::ENOENT));
    // An exclusive create of the name removes the stale link file and makes the file.
    let id = next_fd_id();
    let e = top
        .create(
            &root(),
            Loc::new(d, b.as_str()),
            fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL),
            0o644,
            0,
        )
        .await
        .expect("create over a stale link file");
    assert_ne!(e.attr.gfid, g);
    assert_eq!(held(&cluster, hb, d, &b).await, Held::File(e.attr.gfid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_of_an_existing_name_elsewhere_opens_it_or_is_eexist() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, _), (b, _)) = names_on_different_children(&layout, "c");
    let g = create_with(&top, d, &a, b"hello").await;
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    let id = next_fd_id();
    let excl = top
        .create(
            &root(),
            Loc::new(d, b.as_str()),
            fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL),
            0o644,
            0,
        )
        .await;
    assert_eq!(excl.map(drop), Err(Errno::EEXIST));
    let e = top
        .create(
            &root(),
            Loc::new(d, b.as_str()),
            fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT),
            0o644,
            0,
        )
        .await
        .expect("create opens the existing file");
    assert_eq!(e.attr.gfid, g);
    let r = top
        .readv(&root(), fd(id, g, libc::O_RDWR), 0, 100)
        .await
        .expect("read");
    assert_eq!(r.data.as_slice(), b"hello");
    top.release(&root(), fd(id, g, 0)).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_across_children_leaves_the_data_and_points_the_new_name_at_it() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "r");
    let g = create_with(&top, d, &a, b"payload").await;
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    let names: Vec<String> = cluster
        .children()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let mut want = vec![Held::Nothing; 4];
    want[ha] = Held::File(g);
    want[hb] = Held::Link(names[ha].clone());
    assert_eq!(everywhere(&cluster, d, &b).await, want);
    assert_eq!(everywhere(&cluster, d, &a).await, vec![Held::Nothing; 4]);
    let other = fresh(&cluster, &[]);
    assert_eq!(lookup(&other, d, &a).await.map(drop), Err(Errno::ENOENT));
    let e = lookup(&other, d, &b).await.expect("new name");
    assert_eq!(e.attr.gfid, g);
    assert_eq!(read_all(&other, g).await, b"payload");
    // Renamed again to a name hashing to the data's child: the link file goes.
    let back = name_on(&layout, "back", ha);
    top.rename(
        &root(),
        Loc::new(d, b.as_str()),
        Loc::new(d, back.as_str()),
        0,
    )
    .await
    .expect("rename back");
    assert_eq!(everywhere(&cluster, d, &b).await, vec![Held::Nothing; 4]);
    let mut want = vec![Held::Nothing; 4];
    want[ha] = Held::File(g);
    assert_eq!(everywhere(&cluster, d, &back).await, want);
    assert_eq!(list_names(&other, d, 4096).await, vec![back.clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_over_a_file_on_the_new_names_hashed_child_replaces_it_with_a_link_file() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "o");
    let ga = create_with(&top, d, &a, b"new").await;
    let gb = create_with(&top, d, &b, b"old").await;
    assert_eq!(held(&cluster, hb, d, &b).await, Held::File(gb));
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    assert!(matches!(held(&cluster, hb, d, &b).await, Held::Link(_)));
    assert_eq!(held(&cluster, ha, d, &b).await, Held::File(ga));
    let other = fresh(&cluster, &[]);
    assert_eq!(lookup(&other, d, &b).await.expect("b").attr.gfid, ga);
    assert_eq!(read_all(&other, ga).await, b"new");
    assert_eq!(
        cluster.leaf(hb).stat(&root(), gb).await.map(drop),
        Err(Errno::ESTALE),
        "the replaced file is gone"
    );
    let listed = list_names(&other, d, 4096).await;
    assert_eq!(
        listed,
        vec![b.clone()],
        "no temporary name left: {listed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_over_a_file_on_a_third_child_removes_the_replaced_file() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    // old name on child 0, replaced file's data on child 1 (renamed there from a name hashing
    // to 1) under a name hashing to 2.
    let a = name_on(&layout, "a", 0);
    let b1 = name_on(&layout, "b", 1);
    let b = name_on(&layout, "t", 2);
    let ga = create_with(&top, d, &a, b"A").await;
    let gb = create_with(&top, d, &b1, b"B").await;
    top.rename(
        &root(),
        Loc::new(d, b1.as_str()),
        Loc::new(d, b.as_str()),
        0,
    )
    .await
    .expect("rename b");
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename a over b");
    let names: Vec<String> = cluster
        .children()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    assert_eq!(
        everywhere(&cluster, d, &b).await,
        vec![Held::File(ga), Held::Nothing, Held::Link(names[0].clone())]
    );
    assert_eq!(
        cluster.leaf(1).stat(&root(), gb).await.map(drop),
        Err(Errno::ESTALE)
    );
    assert_eq!(read_all(&fresh(&cluster, &[]), ga).await, b"A");
}

/// Another client sees the old name until the rename on the data's child, then the new one:
/// never neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_across_children_is_atomic_to_another_client() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "x");
    let ga = create_with(&top, d, &a, b"A").await;
    let gb = create_with(&top, d, &b, b"B").await;
    let other = fresh(&cluster, &[]);
    cluster.handle(ha).hold(Fop::Rename);
    let renaming = tokio::spawn({
        let top = top.clone();
        let (a, b) = (a.clone(), b.clone());
        async move {
            top.rename(
                &Ctx::root(),
                Loc::new(d, a.as_str()),
                Loc::new(d, b.as_str()),
                0,
            )
            .await
        }
    });
    cluster.handle(ha).wait_for(Fop::Rename, 1).await;
    // Before the commit point: both names as they were.
    assert_eq!(lookup(&other, d, &a).await.expect("a before").attr.gfid, ga);
    assert_eq!(lookup(&other, d, &b).await.expect("b before").attr.gfid, gb);
    cluster.handle(ha).open_gate(Fop::Rename);
    renaming.await.expect("join").expect("rename");
    assert_eq!(lookup(&other, d, &a).await.map(drop), Err(Errno::ENOENT));
    assert_eq!(lookup(&other, d, &b).await.expect("b after").attr.gfid, ga);
    assert!(matches!(held(&cluster, hb, d, &b).await, Held::Link(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_links_across_children_and_unlink_of_each_name() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "l");
    let g = create_with(&top, d, &a, b"shared").await;
    let e = top
        .link(&root(), g, Loc::new(d, b.as_str()))
        .await
        .expect("link");
    assert_eq!(e.attr.nlink, 2);
    assert_eq!(held(&cluster, ha, d, &b).await, Held::File(g));
    assert!(matches!(held(&cluster, hb, d, &b).await, Held::Link(_)));
    let other = fresh(&cluster, &[]);
    assert_eq!(lookup(&other, d, &b).await.expect("b").attr.gfid, g);
    let mut names = list_names(&other, d, 4096).await;
    names.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(names, want);
    top.unlink(&root(), Loc::new(d, a.as_str()))
        .await
        .expect("unlink a");
    assert_eq!(read_all(&other, g).await, b"shared");
    top.unlink(&root(), Loc::new(d, b.as_str()))
        .await
        .expect("unlink b");
    assert_eq!(
        everywhere(&cluster, d, &b).await,
        vec![Held::Nothing; 3],
        "the link file went with the name"
    );
    assert_eq!(lookup(&other, d, &b).await.map(drop), Err(Errno::ENOENT));
    // A link onto an existing name on its hashed child fails and leaves nothing behind.
    let g2 = create_with(&top, d, &a, b"again").await;
    let c = name_on(&layout, "occupied", hb);
    create_with(&top, d, &c, b"").await;
    let wrong = name_on(&layout, "z", ha);
    let _ = wrong;
    assert_eq!(
        top.link(&root(), g2, Loc::new(d, c.as_str()))
            .await
            .map(drop),
        Err(Errno::EEXIST)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_directory_copy_is_made_on_lookup_with_its_slice() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    cluster
        .leaf(2)
        .rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("leaf rmdir");
    let other = fresh(&cluster, &[]);
    let e = lookup(&other, Gfid::ROOT, "d").await.expect("lookup");
    assert_eq!(e.attr.gfid, d);
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Dir(d); 3]
    );
    let healed = leaf_layout(&cluster, d).await;
    assert_eq!(healed, layout, "same ranges, still trusted");
    // A copy missing on child 0 (the one listings use) is made too.
    cluster
        .leaf(0)
        .rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("leaf rmdir");
    let other = fresh(&cluster, &[]);
    lookup(&other, Gfid::ROOT, "d").await.expect("lookup");
    assert_eq!(held(&cluster, 0, Gfid::ROOT, "d").await, Held::Dir(d));
    // Copies with different GFIDs are refused, not guessed.
    cluster
        .leaf(1)
        .rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("leaf rmdir");
    cluster
        .leaf(1)
        .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("leaf mkdir");
    let other = fresh(&cluster, &[]);
    assert_eq!(
        lookup(&other, Gfid::ROOT, "d").await.map(drop),
        Err(Errno::EIO)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_holey_and_overlapping_layouts_are_repaired_on_lookup() {
    let (cluster, top) = setup(4, &[]);
    let full = mkdir(&top, Gfid::ROOT, "full").await;
    let empty = mkdir(&top, Gfid::ROOT, "empty").await;
    for k in 0..20 {
        create_with(&top, full, &format!("f{k}"), b"x").await;
    }
    let good = leaf_layout(&cluster, full).await;
    for (dir, name) in [(full, "full"), (empty, "empty")] {
        // Child 1 lost its slice; child 2's overlaps child 3's; child 0's has a hole after it.
        set_leaf_slice(&cluster, 1, dir, None).await;
        let s3 = leaf_slice(&cluster, 3, dir).await.expect("slice");
        set_leaf_slice(
            &cluster,
            2,
            dir,
            Some(Slice {
                start: s3.start,
                stop: s3.stop,
                ..s3
            }),
        )
        .await;
        let mut s0 = leaf_slice(&cluster, 0, dir).await.expect("slice");
        s0.stop = s0.start.saturating_add(5);
        set_leaf_slice(&cluster, 0, dir, Some(s0)).await;
        let mut s = Vec::new();
        for i in 0..4 {
            s.push(leaf_slice(&cluster, i, dir).await);
        }
        assert!(Layout::merge(&s).is_err());
        let other = fresh(&cluster, &[]);
        lookup(&other, Gfid::ROOT, name).await.expect("lookup");
        let repaired = leaf_layout(&cluster, dir).await;
        assert_eq!(
            repaired.trusted,
            dir == empty,
            "{name}: trusted only when empty everywhere"
        );
        // Equal ranges, each to the child whose old range overlaps it most.
        let want = Layout::generate_keeping(dir, 4, &[], &s, repaired.trusted);
        assert_eq!(repaired, want);
    }
    // Every file of the repaired (untrusted) directory is still found.
    let other = fresh(&cluster, &[]);
    for k in 0..20 {
        lookup(&other, full, &format!("f{k}"))
            .await
            .expect("file after repair");
    }
    let _ = good;
    // A layout read without a lookup of the directory (the root's) is repaired the same way.
    for i in 0..4 {
        set_leaf_slice(&cluster, i, Gfid::ROOT, None).await;
    }
    let other = fresh(&cluster, &[]);
    assert_eq!(
        lookup(&other, Gfid::ROOT, "nothing").await.map(drop),
        Err(Errno::ENOENT)
    );
    let root_layout = leaf_layout(&cluster, Gfid::ROOT).await;
    assert!(
        !root_layout.trusted,
        "the root holds directories: not trusted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_root_gets_a_trusted_layout_on_first_use() {
    let (cluster, top) = setup(2, &[]);
    create_with(&top, Gfid::ROOT, "first", b"1").await;
    let l = leaf_layout(&cluster, Gfid::ROOT).await;
    assert!(l.trusted, "empty on every child when repaired");
    lookups_since(&cluster);
    assert_eq!(
        lookup(&top, Gfid::ROOT, "second").await.map(drop),
        Err(Errno::ENOENT)
    );
    assert_eq!(lookups_since(&cluster).iter().sum::<usize>(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layouts_are_not_rewritten_while_a_child_is_down() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    set_leaf_slice(&cluster, 0, d, None).await;
    cluster.down(2);
    let other = fresh(&cluster, &[]);
    cluster.down(2);
    let _ = lookup(&other, Gfid::ROOT, "d").await;
    assert_eq!(
        leaf_slice(&cluster, 0, d).await,
        None,
        "no repair with a child down"
    );
    cluster.up(2);
    lookup(&other, Gfid::ROOT, "d").await.expect("lookup");
    assert!(
        leaf_slice(&cluster, 0, d).await.is_some(),
        "repaired once every child is up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_removes_every_copy_or_none() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let on0 = name_on(&layout, "f", 0);
    create_with(&top, d, &on0, b"").await;
    assert_eq!(
        top.rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
            .await
            .map(drop),
        Err(Errno::ENOTEMPTY)
    );
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Dir(d); 3]
    );
    assert_eq!(
        leaf_layout(&cluster, d).await,
        layout,
        "copies made again with their slices"
    );
    top.unlink(&root(), Loc::new(d, on0.as_str()))
        .await
        .expect("unlink");
    top.rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("rmdir");
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Nothing; 3]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_of_a_directory_reaches_every_copy() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let f = create_with(&top, d, "inner", b"i").await;
    top.rename(
        &root(),
        Loc::new(Gfid::ROOT, "d"),
        Loc::new(Gfid::ROOT, "e"),
        0,
    )
    .await
    .expect("rename");
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "e").await,
        vec![Held::Dir(d); 3]
    );
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Nothing; 3]
    );
    let other = fresh(&cluster, &[]);
    let e = lookup(&other, Gfid::ROOT, "e").await.expect("e");
    assert_eq!(
        lookup(&other, e.attr.gfid, "inner")
            .await
            .expect("inner")
            .attr
            .gfid,
        f
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_free_disk_sends_a_create_elsewhere_with_a_link_file() {
    let small = MemLeaf::with_capacity(1 << 20);
    let cluster = MockCluster::with_leaves(vec![small, MemLeaf::new(), MemLeaf::new()]);
    let top = cluster
        .build::<xlfs_dht::Distribute>(&[("min-free-disk", "20%"), ("statfs-interval", "0")]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let filler = name_on(&layout, "fill", 0);
    create_with(&top, d, &filler, &vec![7u8; 900 << 10]).await;
    let name = name_on(&layout, "next", 0);
    let g = create_with(&top, d, &name, b"diverted").await;
    let seen = everywhere(&cluster, d, &name).await;
    assert!(matches!(seen[0], Held::Link(_)), "{seen:?}");
    let at = seen
        .iter()
        .position(|s| *s == Held::File(g))
        .expect("data somewhere");
    assert_ne!(at, 0);
    let other = fresh(&cluster, &[]);
    assert_eq!(lookup(&other, d, &name).await.expect("found").attr.gfid, g);
    assert_eq!(read_all(&other, g).await, b"diverted");
    // A directory's statfs is the children's sum.
    let s = top.statfs(&root(), Gfid::ROOT).await.expect("statfs");
    let mut want = 0u64;
    for i in 0..3 {
        let c = cluster
            .leaf(i)
            .statfs(&root(), Gfid::ROOT)
            .await
            .expect("statfs");
        want += c.blocks * c.frsize;
    }
    assert_eq!(s.blocks * s.frsize, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_on_a_child_that_is_down_are_enotconn_and_the_rest_serve() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let a = name_on(&layout, "a", 1);
    let b = name_on(&layout, "b", 2);
    create_with(&top, d, &a, b"a").await;
    let gb = create_with(&top, d, &b, b"b").await;
    cluster.down(1);
    assert_eq!(lookup(&top, d, &a).await.map(drop), Err(Errno::ENOTCONN));
    assert_eq!(lookup(&top, d, &b).await.expect("b").attr.gfid, gb);
    assert_eq!(list_names(&top, d, 4096).await, vec![b.clone()]);
    assert_eq!(
        top.mkdir(&root(), Loc::new(d, "new"), 0o755, 0)
            .await
            .map(drop),
        Err(Errno::ENOTCONN)
    );
}

/// Every name listed in `dir` through `top`, with pages of about `size` bytes.
pub async fn list_names(top: &xlator_api::Subvol, dir: Gfid, size: u32) -> Vec<String> {
    let id = next_fd_id();
    let f = fd(id, dir, libc::O_RDONLY);
    top.opendir(&root(), f).await.expect("opendir");
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let page = top.readdirp(&root(), f, off, size).await.expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
        out.extend(page.iter().map(|e| e.name.to_string()));
    }
    top.releasedir(&root(), f).await.expect("releasedir");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_file_is_opened_again_on_its_child_after_a_reconnect() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let name = name_on(&layout, "o", 2);
    let g = create_with(&top, d, &name, b"before").await;
    let id = next_fd_id();
    let f = fd(id, g, libc::O_RDWR);
    top.open(&root(), f).await.expect("open");
    cluster.down(2);
    assert_eq!(
        top.readv(&root(), f, 0, 10).await.map(drop),
        Err(Errno::ENOTCONN)
    );
    cluster.up(2);
    for i in 0..3 {
        cluster.handle(i).take_calls();
    }
    let r = top
        .readv(&root(), f, 0, 10)
        .await
        .expect("read after reconnect");
    assert_eq!(r.data.as_slice(), b"before");
    let fops: Vec<Fop> = cluster
        .handle(2)
        .take_calls()
        .iter()
        .map(|c| c.fop())
        .collect();
    assert_eq!(fops, vec![Fop::Open, Fop::Readv], "opened again, then read");
    let others: Vec<String> = (0..2)
        .flat_map(|i| cluster.handle(i).take_calls())
        .map(|c| c.summary())
        .collect();
    assert!(others.is_empty(), "{others:?}");
    top.release(&root(), f).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_removes_stale_link_files_but_not_live_ones() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "k");
    create_with(&top, d, a.as_str(), b"x").await;
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    // A live link file: the directory is not empty.
    assert_eq!(
        top.rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
            .await
            .map(drop),
        Err(Errno::ENOTEMPTY)
    );
    assert!(matches!(held(&cluster, hb, d, &b).await, Held::Link(_)));
    // The data goes behind the link file's back (a crash between two steps): rmdir works.
    cluster
        .leaf(ha)
        .unlink(&root(), Loc::new(d, b.as_str()))
        .await
        .expect("leaf unlink");
    top.rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .unwrap_or_else(|e| {
            panic!("rmdir with only a stale link file (data child {ha}, link file on {hb}): {e}")
        });
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Nothing; 3]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverted_create_of_a_name_on_the_full_hashed_child_opens_it_and_leaves_nothing_behind() {
    let cluster = MockCluster::with_leaves(vec![MemLeaf::with_capacity(1 << 20), MemLeaf::new()]);
    let top = cluster
        .build::<xlfs_dht::Distribute>(&[("min-free-disk", "20%"), ("statfs-interval", "0")]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let name = name_on(&layout, "early", 0);
    let g = create_with(&top, d, &name, b"made before child 0 filled").await;
    let filler = name_on(&layout, "fill", 0);
    create_with(&top, d, &filler, &vec![1u8; 900 << 10]).await;
    // A create (no O_EXCL) of the existing name: tried on child 1, refused by the link file
    // step (the name is on child 0), undone, and the existing file opened.
    let id = next_fd_id();
    cluster.handle(1).take_calls();
    let e = top
        .create(
            &root(),
            Loc::new(d, name.as_str()),
            fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT),
            0o644,
            0,
        )
        .await
        .expect("create opens the existing file");
    assert_eq!(e.attr.gfid, g);
    assert_eq!(
        everywhere(&cluster, d, &name).await,
        vec![Held::File(g), Held::Nothing]
    );
    let on1: Vec<Fop> = cluster
        .handle(1)
        .take_calls()
        .iter()
        .map(|c| c.fop())
        .collect();
    let creates = on1.iter().filter(|f| **f == Fop::Create).count();
    let releases = on1.iter().filter(|f| **f == Fop::Release).count();
    assert_eq!(
        (creates, releases),
        (1, 1),
        "the fd opened on child 1 is closed again: {on1:?}"
    );
    top.release(&root(), fd(id, g, 0)).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lookup_unhashed_off_the_hashed_childs_miss_is_final() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let name = name_on(&layout, "s", 0);
    let id = next_fd_id();
    let e = cluster
        .leaf(1)
        .create(
            &root(),
            Loc::new(d, name.as_str()),
            fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT),
            0o644,
            0,
        )
        .await
        .expect("leaf create");
    cluster
        .leaf(1)
        .release(&root(), fd(id, e.attr.gfid, 0))
        .await
        .expect("release");
    distrust(&cluster, d).await;
    let off = fresh(&cluster, &[("lookup-unhashed", "off")]);
    lookups_since(&cluster);
    assert_eq!(lookup(&off, d, &name).await.map(drop), Err(Errno::ENOENT));
    assert_eq!(lookups_since(&cluster), vec![1, 0, 0]);
    let on = fresh(&cluster, &[]);
    assert_eq!(
        lookup(&on, d, &name)
            .await
            .expect("found everywhere")
            .attr
            .gfid,
        e.attr.gfid
    );
}

/// An unlink of a file on its hashed child is one call there (no lookup first); a name whose
/// hashed child holds only a link file is refused there and takes the lookup path, which
/// removes the data and the link file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlink_of_a_placed_file_is_one_call_and_a_link_file_is_never_taken_for_the_file() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "u").await;
    let g = create_with(&top, d, "placed", b"x").await;
    let layout = leaf_layout(&cluster, d).await;
    let h = layout.hashed("placed");
    for i in 0..3 {
        cluster.handle(i).take_calls();
    }
    top.unlink(&root(), Loc::new(d, "placed"))
        .await
        .expect("unlink");
    let fops: Vec<Vec<Fop>> = (0..3)
        .map(|i| {
            cluster
                .handle(i)
                .take_calls()
                .iter()
                .map(|c| c.fop())
                .collect()
        })
        .collect();
    for (i, f) in fops.iter().enumerate() {
        let want = if i == h { vec![Fop::Unlink] } else { vec![] };
        assert_eq!(f, &want, "child {i} (hashed {h})");
    }
    assert!(
        everywhere(&cluster, d, "placed")
            .await
            .iter()
            .all(|x| *x == Held::Nothing)
    );
    let _ = g;

    // A rename across children leaves the data on its child and a link file on the new
    // name's hashed child; the unlink of the new name must remove both.
    let ((a, ha), (b, hb)) = names_on_different_children(&layout, "r");
    assert_ne!(ha, hb);
    create_with(&top, d, &a, b"moved").await;
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    assert!(matches!(held(&cluster, hb, d, &b).await, Held::Link(_)));
    top.unlink(&root(), Loc::new(d, b.as_str()))
        .await
        .expect("unlink");
    assert!(
        everywhere(&cluster, d, &b)
            .await
            .iter()
            .all(|x| *x == Held::Nothing),
        "{:?}",
        everywhere(&cluster, d, &b).await
    );
}

/// rmdir asks nothing before removing: inside the name's directory lock on child 0 (an
/// entrylk before and after), the other children's rmdirs go out with child 0's lookup, then
/// child 0's rmdir. A file of that name (on whichever child) is ENOTDIR and
/// nothing is removed; no name anywhere is ENOENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_is_two_round_trips_and_names_come_from_the_children() {
    let (cluster, top) = setup(3, &[]);
    mkdir(&top, Gfid::ROOT, "d").await;
    fops_since(&cluster);
    // Child 0's lookup held: the others' rmdirs are sent anyway.
    cluster.handle(0).hold(Fop::Lookup);
    let rm = tokio::spawn({
        let top = top.clone();
        async move { top.rmdir(&root(), Loc::new(Gfid::ROOT, "d")).await }
    });
    for i in [1, 2] {
        within_10s(
            cluster.handle(i).wait_for(Fop::Rmdir, 1),
            "rmdir sent with the lookup",
        )
        .await;
    }
    cluster.handle(0).open_gate(Fop::Lookup);
    rm.await.expect("join").expect("rmdir");
    assert_eq!(
        fops_since(&cluster),
        vec![
            vec![Fop::Entrylk, Fop::Lookup, Fop::Rmdir, Fop::Entrylk],
            vec![Fop::Rmdir],
            vec![Fop::Rmdir]
        ]
    );
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Nothing; 3]
    );

    for c in 0..3 {
        let layout = leaf_layout(&cluster, Gfid::ROOT).await;
        let name = name_on(&layout, "file", c);
        let g = create_with(&top, Gfid::ROOT, &name, b"x").await;
        assert_eq!(
            top.rmdir(&root(), Loc::new(Gfid::ROOT, name.as_str()))
                .await
                .map(drop),
            Err(Errno::ENOTDIR),
            "a file on child {c}"
        );
        assert_eq!(read_all(&top, g).await, b"x");
    }
    assert_eq!(
        top.rmdir(&root(), Loc::new(Gfid::ROOT, "none"))
            .await
            .map(drop),
        Err(Errno::ENOENT)
    );
}

/// A directory with no copy on child 0 (damaged) is still removed from the children that
/// have it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_of_a_directory_missing_on_child_0_removes_the_other_copies() {
    let (cluster, top) = setup(3, &[]);
    mkdir(&top, Gfid::ROOT, "d").await;
    cluster
        .leaf(0)
        .rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("leaf rmdir");
    top.rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("rmdir");
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Nothing; 3]
    );
}

/// A name seen as a directory is looked up on every child at once (one round trip, not the
/// hashed child's and then the others'); once another client made it a file, the lookup
/// finds the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_seen_as_a_directory_is_looked_up_everywhere_at_once() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    lookup(&top, Gfid::ROOT, "d").await.expect("lookup");
    lookups_since(&cluster);
    for i in 0..3 {
        cluster.handle(i).hold(Fop::Lookup);
    }
    let l = tokio::spawn({
        let top = top.clone();
        async move { lookup(&top, Gfid::ROOT, "d").await }
    });
    for i in 0..3 {
        within_10s(
            cluster.handle(i).wait_for(Fop::Lookup, 1),
            "every lookup at once",
        )
        .await;
    }
    for i in 0..3 {
        cluster.handle(i).open_gate(Fop::Lookup);
    }
    assert_eq!(l.await.expect("join").expect("lookup").attr.gfid, d);
    assert_eq!(lookups_since(&cluster), vec![1; 3]);

    let other = fresh(&cluster, &[]);
    other
        .rename(
            &root(),
            Loc::new(Gfid::ROOT, "d"),
            Loc::new(Gfid::ROOT, "e"),
            0,
        )
        .await
        .expect("rename");
    let f = create_with(&other, Gfid::ROOT, "d", b"now a file").await;
    let e = lookup(&top, Gfid::ROOT, "d").await.expect("lookup");
    assert_eq!((e.attr.gfid, e.attr.is_dir()), (f, false));
    assert_eq!(
        lookup(&top, Gfid::ROOT, "e")
            .await
            .expect("lookup")
            .attr
            .gfid,
        d
    );
}

async fn within_10s(f: impl Future<Output = ()>, what: &str) {
    tokio::time::timeout(std::time::Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("not within 10 s: {what}"));
}

/// Directory locks ([`xlfs_dht::DIR_LOCK_DOMAIN`], on child 0). While another client holds a
/// directory's name (its rmdir in progress: child 1's copy gone, child 0's not yet), a lookup
/// answers without making child 1's copy again (it would outlive the rmdir); once the name is
/// free a lookup makes it. A mkdir of a held name waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_copy_is_not_made_again_while_another_client_removes_it() {
    use xlator_api::EntrylkCmd::{LockNonBlocking, Unlock};
    let (cluster, top) = setup_on_locks(2, &[]);
    let p = mkdir(&top, Gfid::ROOT, "p").await;
    // A name hashed to child 0: its lookup reaches the copy left there.
    let dn = name_on(&leaf_layout(&cluster, p).await, "d", 0);
    let d = mkdir(&top, p, &dn).await;
    let other = xlator_api::Ctx::builder(0, 0)
        .lk_owner(xlator_api::LkOwner(0xd1))
        .ext(&xlator_api::ClientId(0xd1))
        .build();
    let lock = |n: &str, cmd| {
        let leaf = cluster.leaf(0).clone();
        let other = other.clone();
        let loc = Loc::new(p, n.to_string());
        async move {
            leaf.entrylk(&other, xlfs_dht::DIR_LOCK_DOMAIN.into(), loc, cmd)
                .await
        }
    };
    lock(&dn, LockNonBlocking).await.expect("the rmdir's lock");
    cluster
        .leaf(1)
        .rmdir(&root(), Loc::new(p, dn.as_str()))
        .await
        .expect("child 1's copy removed");
    let e = lookup(&fresh(&cluster, &[]), p, &dn)
        .await
        .expect("child 0's copy answers");
    assert_eq!(e.attr.gfid, d);
    assert_eq!(held(&cluster, 1, p, &dn).await, Held::Nothing);
    lock(&dn, Unlock).await.expect("unlock");
    lookup(&fresh(&cluster, &[]), p, &dn).await.expect("lookup");
    assert_eq!(held(&cluster, 1, p, &dn).await, Held::Dir(d));

    lock("e", LockNonBlocking).await.expect("lock e");
    let mk = tokio::spawn({
        let top = top.clone();
        async move { top.mkdir(&root(), Loc::new(p, "e"), 0o755, 0).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!mk.is_finished(), "mkdir went while the name was held");
    assert_eq!(held(&cluster, 0, p, "e").await, Held::Nothing);
    lock("e", Unlock).await.expect("unlock");
    let e = mk.await.expect("join").expect("mkdir once free");
    for i in 0..2 {
        assert_eq!(held(&cluster, i, p, "e").await, Held::Dir(e.attr.gfid));
    }
}

/// A mkdir cut short (its client killed while one child's mkdir is still in flight) never
/// leaves a directory that a listing shows and a lookup says is absent: whichever child it
/// stops at, a new client's lookup either finds the directory and makes the missing copies,
/// or child 0 (whose copy listings show) has none either. Before, the mkdir went to child 0
/// first: cut short at the name's hashed child, it left copies everywhere else, and the
/// hashed child's ENOENT (final under a trusted layout) hid them from lookup for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mkdir_cut_short_at_any_child_leaves_nothing_a_lookup_cannot_find() {
    let (cluster, top) = setup(4, &[]);
    // A killed client's directory lock goes with its connection on a real brick; a mock
    // keeps it, so child 0 takes none here (the locks have their own tests).
    cluster.handle(0).fail_always(Fop::Entrylk, Errno::ENOSYS);
    let p = mkdir(&top, Gfid::ROOT, "p").await;
    let layout = leaf_layout(&cluster, p).await;
    for stuck in 0..4 {
        for hashed in [0, 2] {
            let name = name_on(&layout, &format!("s{stuck}h"), hashed);
            cluster.handle(stuck).hold(Fop::Mkdir);
            let mk = tokio::spawn({
                let top = top.clone();
                let loc = Loc::new(p, name.as_str());
                async move { top.mkdir(&root(), loc, 0o755, 0).await }
            });
            die_while_held(&cluster, stuck, Fop::Mkdir, mk).await;
            let listed = held(&cluster, 0, p, &name).await != Held::Nothing;
            match lookup(&fresh(&cluster, &[]), p, &name).await {
                Ok(e) => {
                    assert!(e.attr.is_dir(), "{name}");
                    for i in 0..4 {
                        assert_eq!(
                            held(&cluster, i, p, &name).await,
                            Held::Dir(e.attr.gfid),
                            "{name} (stuck at {stuck}, hashed to {hashed}): child {i}"
                        );
                    }
                }
                Err(Errno::ENOENT) => assert!(
                    !listed,
                    "{name} (stuck at {stuck}, hashed to {hashed}): listed by child 0, \
                     absent to lookup"
                ),
                Err(e) => panic!("{name}: lookup {e:?}"),
            }
        }
    }
}

/// A directory rename cut short at any child (its client dies while the rename is held
/// there), plain or over an empty directory, with the new name hashed to child 0 or not:
/// another client's lookups of the old and the new name leave the directory at the new name
/// on every child, with its files, and no mark. Before, the rename went to child 0 first
/// and nothing finished it: the copies still at the old name on the other children (and the
/// files under them) were out of a lookup's reach whenever the new name hashed there, and a
/// rename over a directory left two directories of one name (lookup: EIO).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_rename_cut_short_at_any_child_is_finished_by_the_next_lookup() {
    let (cluster, top) = setup(4, &[]);
    // As in the mkdir case: a dead client's directory lock would stay on a mock child.
    cluster.handle(0).fail_always(Fop::Entrylk, Errno::ENOSYS);
    let p = mkdir(&top, Gfid::ROOT, "p").await;
    let layout = leaf_layout(&cluster, p).await;
    for stuck in 0..4 {
        for hashed in [0, 2] {
            for over in [false, true] {
                let case = format!("stuck at {stuck}, new name hashed to {hashed}, over {over}");
                let old = format!("o{stuck}-{hashed}-{over}");
                let new = name_on(&layout, &format!("n{stuck}-{over}-"), hashed);
                let d = mkdir(&top, p, &old).await;
                let mut files = Vec::new();
                for k in 0..8 {
                    let name = format!("f{k}");
                    files.push((
                        name.clone(),
                        create_with(&top, d, &name, name.as_bytes()).await,
                    ));
                }
                if over {
                    mkdir(&top, p, &new).await;
                }
                cluster.handle(stuck).hold(Fop::Rename);
                let mv = tokio::spawn({
                    let top = top.clone();
                    let (o, n) = (Loc::new(p, old.as_str()), Loc::new(p, new.as_str()));
                    async move { top.rename(&root(), o, n, 0).await }
                });
                die_while_held(&cluster, stuck, Fop::Rename, mv).await;

                let other = fresh(&cluster, &[]);
                let _ = lookup(&other, p, &old).await;
                let e = lookup(&other, p, &new)
                    .await
                    .unwrap_or_else(|e| panic!("{case}: lookup of the new name: {e}"));
                assert_eq!(e.attr.gfid, d, "{case}");
                assert_eq!(
                    everywhere(&cluster, p, &new).await,
                    vec![Held::Dir(d); 4],
                    "{case}"
                );
                assert_eq!(
                    everywhere(&cluster, p, &old).await,
                    vec![Held::Nothing; 4],
                    "{case}"
                );
                assert_eq!(
                    lookup(&other, p, &old).await.err(),
                    Some(Errno::ENOENT),
                    "{case}"
                );
                for (name, g) in &files {
                    let f = lookup(&other, d, name)
                        .await
                        .unwrap_or_else(|e| panic!("{case}: {name}: {e}"));
                    assert_eq!(f.attr.gfid, *g, "{case}: {name}");
                    assert_eq!(read_all(&other, *g).await, name.as_bytes(), "{case}");
                }
                assert_no_marks(&cluster, d, 4, &case).await;
            }
        }
    }
}

/// A directory's rename over an empty directory, refused by a child because a file was made
/// in the target's copy there after the rename checked it was empty (creates take no lock of
/// their directory: another client's), is undone: ENOTEMPTY, and every child holds both
/// directories under their names with their GFIDs, the target's new file and no mark. Before,
/// the name kept the renamed directory on the children that had renamed and the replaced one
/// on the others (two GFIDs under one name: found with two mounts renaming directories over
/// each other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_rename_over_one_that_fills_meanwhile_is_undone() {
    let (cluster, top) = setup(3, &[]);
    let p = mkdir(&top, Gfid::ROOT, "p").await;
    let layout = leaf_layout(&cluster, p).await;
    for late in 0..3 {
        for hashed in 0..3 {
            let case = format!("file made on child {late}, new name hashed to {hashed}");
            let old = format!("o{late}{hashed}");
            let new = name_on(&layout, &format!("n{late}{hashed}-"), hashed);
            let d = mkdir(&top, p, &old).await;
            let kept = create_with(&top, d, "kept", b"kept").await;
            let t = mkdir(&top, p, &new).await;
            cluster.handle(late).hold(Fop::Rename);
            let mv = tokio::spawn({
                let top = top.clone();
                let (o, n) = (Loc::new(p, old.as_str()), Loc::new(p, new.as_str()));
                async move { top.rename(&root(), o, n, 0).await }
            });
            wait_held(&cluster, late, Fop::Rename).await;
            // Another client's create in the target, on child `late` only.
            let id = next_fd_id();
            let e = cluster
                .leaf(late)
                .create(
                    &root(),
                    Loc::new(t, "late"),
                    fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT),
                    0o644,
                    0,
                )
                .await
                .expect("leaf create");
            let _ = cluster
                .leaf(late)
                .release(&root(), fd(id, e.attr.gfid, 0))
                .await;
            cluster.handle(late).open_gate(Fop::Rename);
            let r = mv.await.expect("rename task");
            assert_eq!(r, Err(Errno::ENOTEMPTY), "{case}");
            assert_eq!(
                everywhere(&cluster, p, &old).await,
                vec![Held::Dir(d); 3],
                "{case}"
            );
            assert_eq!(
                everywhere(&cluster, p, &new).await,
                vec![Held::Dir(t); 3],
                "{case}"
            );
            let other = fresh(&cluster, &[]);
            assert_eq!(
                lookup(&other, p, &new).await.map(|e| e.attr.gfid),
                Ok(t),
                "{case}"
            );
            assert_eq!(
                lookup(&other, d, "kept").await.map(|e| e.attr.gfid),
                Ok(kept),
                "{case}"
            );
            assert_eq!(read_all(&other, kept).await, b"kept", "{case}");
            assert_no_marks(&cluster, d, 3, &case).await;
        }
    }
}

/// Two clients moving two directories into each other at once (`mv x y/` beside
/// `mv y x/`), each first renamed on a different child: the second waits for the volume's
/// move lock, so every child takes the first and refuses the second as a loop: one answers
/// success, the other EINVAL, and every child holds the same tree. Before, each went ahead
/// on its first child and failed as a loop on the others: the children ended with `y/x` on
/// some and `x/y` on others, and both callers got success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_moved_into_each_other_at_once_end_alike_on_every_child() {
    let (cluster, top) = setup(3, &[]);
    let other = fresh(&cluster, &[]);
    // A pair whose renames go first to different children.
    let mut pair = None;
    for k in 0..20 {
        let (x, y) = (format!("x{k}"), format!("y{k}"));
        let gx = mkdir(&top, Gfid::ROOT, &x).await;
        let gy = mkdir(&top, Gfid::ROOT, &y).await;
        let first_x = leaf_layout(&cluster, gy).await.hashed(&x);
        let first_y = leaf_layout(&cluster, gx).await.hashed(&y);
        if first_x != first_y {
            pair = Some((x, y, gx, gy, first_x, first_y));
            break;
        }
    }
    let (x, y, gx, gy, first_x, first_y) = pair.expect("a pair hashed apart");
    for i in 0..3 {
        cluster.handle(i).hold(Fop::Rename);
    }
    let mv = |top: Subvol, from: String, into: Gfid| {
        tokio::spawn(async move {
            top.rename(
                &root(),
                Loc::new(Gfid::ROOT, from.as_str()),
                Loc::new(into, from.as_str()),
                0,
            )
            .await
        })
    };
    let mv_x = mv(top.clone(), x.clone(), gy);
    wait_held(&cluster, first_x, Fop::Rename).await;
    let mv_y = mv(other.clone(), y.clone(), gx);
    // Long enough for the second to reach its first child, had it not waited.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        cluster.handle(first_y).held(Fop::Rename),
        0,
        "the second waits for the first"
    );
    for i in 0..3 {
        cluster.handle(i).open_gate(Fop::Rename);
    }
    let (rx, ry) = (mv_x.await.expect("task"), mv_y.await.expect("task"));
    assert_eq!((rx, ry), (Ok(()), Err(Errno::EINVAL)));
    assert_eq!(everywhere(&cluster, gy, &x).await, vec![Held::Dir(gx); 3]);
    assert_eq!(everywhere(&cluster, gx, &y).await, vec![Held::Nothing; 3]);
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, &y).await,
        vec![Held::Dir(gy); 3]
    );
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, &x).await,
        vec![Held::Nothing; 3]
    );
}

/// A directory rename that fails on the first child changes nothing and leaves no mark; one
/// that ends normally leaves no mark either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_rename_leaves_no_mark_whether_it_fails_or_not() {
    use xlfs_dht::dirrename::RENAMING_XATTR;
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, Gfid::ROOT).await;
    let marks = |i: usize| {
        let leaf = cluster.leaf(i);
        async move {
            let names = vec![RENAMING_XATTR.into()].into();
            leaf.getxattrs(&root(), d, names)
                .await
                .map_or(0, |xs| xs.len())
        }
    };
    let to = name_on(&layout, "to", 1);
    cluster.handle(1).fail(Fop::Rename, Errno::EIO);
    let r = top
        .rename(
            &root(),
            Loc::new(Gfid::ROOT, "d"),
            Loc::new(Gfid::ROOT, to.as_str()),
            0,
        )
        .await;
    assert_eq!(r, Err(Errno::EIO));
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Dir(d); 3]
    );
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, &to).await,
        vec![Held::Nothing; 3]
    );
    for i in 0..3 {
        assert_eq!(marks(i).await, 0, "child {i}");
    }
    top.rename(
        &root(),
        Loc::new(Gfid::ROOT, "d"),
        Loc::new(Gfid::ROOT, to.as_str()),
        0,
    )
    .await
    .expect("rename");
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, &to).await,
        vec![Held::Dir(d); 3]
    );
    for i in 0..3 {
        assert_eq!(marks(i).await, 0, "child {i}");
    }
}

/// Waits (at most 5 s) until a call of `fop` is held at child `stuck`, lets the calls sent
/// beside it answer, then kills the client's `task` (its held call with it) and opens the
/// gate: what a client dying in the middle of `fop` leaves.
async fn die_while_held<T>(
    cluster: &MockCluster,
    stuck: usize,
    fop: Fop,
    task: tokio::task::JoinHandle<T>,
) {
    wait_held(cluster, stuck, fop).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    task.abort();
    let _ = task.await;
    cluster.handle(stuck).open_gate(fop);
}

/// A layout repair holds the directory's layout lock (an inodelk on child 0) and reads the
/// slices again under it: a client that finds an anomalous layout while another client is
/// repairing it waits, then uses the layout the other wrote instead of writing the one it
/// computed from what it read before (which could differ, and differ in trust, from the
/// layout the other client already placed files by).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_repair_waits_for_another_clients_and_keeps_its_layout() {
    use xlator_api::{Flock, LkCmd, LockKind};
    let (cluster, top) = setup_on_locks(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let good = leaf_layout(&cluster, d).await;
    set_leaf_slice(&cluster, 1, d, None).await;
    // Another client's repair in progress: it holds the lock.
    let owner = xlator_api::LkOwner(0x1a7);
    let other = xlator_api::Ctx::builder(0, 0)
        .lk_owner(owner)
        .ext(&xlator_api::ClientId(0x1a7))
        .build();
    let lock = |kind| {
        let leaf = cluster.leaf(0).clone();
        let other = other.clone();
        async move {
            let whole = Flock {
                kind,
                start: 0,
                len: 0,
                pid: 0,
                owner,
            };
            leaf.inodelk(
                &other,
                xlfs_dht::LAYOUT_LOCK_DOMAIN.into(),
                d,
                LkCmd::Set,
                whole,
            )
            .await
        }
    };
    lock(LockKind::Write)
        .await
        .expect("the other repair's lock");
    let client = fresh(&cluster, &[]);
    let looking = tokio::spawn({
        let client = client.clone();
        async move { lookup(&client, Gfid::ROOT, "d").await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !looking.is_finished(),
        "the lookup repaired while the lock was held"
    );
    assert_eq!(
        leaf_slice(&cluster, 1, d).await,
        None,
        "nothing written meanwhile"
    );
    // The other client writes its layout: every child's range moved one child on, which is
    // not what this client would compute (it keeps the ranges children 0 and 2 still had).
    let theirs: Vec<Option<Slice>> = (0..3).map(|i| good.slice_of((i + 1) % 3)).collect();
    for (i, s) in theirs.iter().enumerate() {
        set_leaf_slice(&cluster, i, d, *s).await;
    }
    let theirs = Layout::merge(&theirs).expect("a complete layout");
    lock(LockKind::Unlock).await.expect("unlock");
    looking.await.expect("join").expect("lookup");
    assert_eq!(leaf_layout(&cluster, d).await, theirs, "their layout kept");
    // And this client places names by it.
    for want in 0..3 {
        let name = name_on(&theirs, "f", want);
        create_with(&client, d, &name, b"x").await;
        assert!(
            matches!(held(&cluster, want, d, &name).await, Held::File(_)),
            "{name} on child {want}"
        );
    }
}

/// Options of a distribute whose child 0 (1 MiB) is filled past `min-free-disk`.
const DIVERTING: [(&str, &str); 2] = [("min-free-disk", "20%"), ("statfs-interval", "0")];

/// Distribute over a small child 0 and a large child 1, directory `d` with child 0 full
/// (creates of names hashed there are diverted to child 1), `d`'s layout distrusted when
/// `untrusted`, and a create of `name` (hashed to child 0) writing `data`, spawned and
/// held at its link file step on child 0 (its data made on child 1). Returns the cluster,
/// the creating client, `d`, the name and the create's task (its GFID once let through).
async fn a_diverted_create_held_at_its_link_file(
    prefix: &str,
    data: &'static [u8],
    untrusted: bool,
) -> (
    MockCluster,
    xlator_api::Subvol,
    Gfid,
    String,
    tokio::task::JoinHandle<Gfid>,
) {
    let cluster = MockCluster::with_leaves(vec![MemLeaf::with_capacity(1 << 20), MemLeaf::new()]);
    let top = cluster.build::<xlfs_dht::Distribute>(&DIVERTING);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let filler = name_on(&layout, "fill", 0);
    create_with(&top, d, &filler, &vec![7u8; 900 << 10]).await;
    if untrusted {
        distrust(&cluster, d).await;
    }
    let name = name_on(&layout, prefix, 0);
    cluster.handle(0).hold(Fop::Mknod);
    let creating = tokio::spawn({
        let top = top.clone();
        let name = name.clone();
        async move { create_with(&top, d, &name, data).await }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cluster.handle(0).held(Fop::Mknod) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the create never reached its link file"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    (cluster, top, d, name, creating)
}

/// A create diverted by `min-free-disk` makes its data on another child, then the link file
/// on the hashed child. In a directory whose layout is not trusted, another client's lookup
/// in between finds the data (it asks every child) and makes that link file itself. The
/// create must then keep its file (which the other client may already have open), not
/// take the link file for a rival create's, remove its data and make the file again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverted_create_keeps_its_file_when_another_clients_lookup_linked_it() {
    let (cluster, _top, d, name, creating) =
        a_diverted_create_held_at_its_link_file("raced", b"mine", true).await;
    let Held::File(g) = held(&cluster, 1, d, &name).await else {
        panic!("the data is made first, on child 1");
    };
    // The other client's lookup: it finds the file on child 1 and links it on child 0
    // (made here on the leaf, past the held gate).
    let x = xlator_api::CreateXattrs(vec![(
        xlfs_dht::LINKTO_XATTR.to_string(),
        cluster.children()[1].name().as_bytes().to_vec(),
    )]);
    cluster
        .leaf(0)
        .mknod(
            &Ctx::builder(0, 0).ext(&x).build(),
            Loc::new(d, name.as_str()),
            libc::S_IFREG | xlfs_dht::LINK_MODE,
            0,
            0,
        )
        .await
        .expect("the other client's link file");
    let other = fresh(&cluster, &[]);
    assert_eq!(lookup(&other, d, &name).await.expect("found").attr.gfid, g);
    cluster.handle(0).open_gate(Fop::Mknod);
    let made = creating.await.expect("join");
    assert_eq!(
        made, g,
        "the create returned another file than the one it made"
    );
    assert!(matches!(held(&cluster, 0, d, &name).await, Held::Link(_)));
    assert_eq!(held(&cluster, 1, d, &name).await, Held::File(g));
    assert_eq!(read_all(&other, g).await, b"mine");
}

/// Two clients create one name at once without O_EXCL, both diverted by `min-free-disk` to
/// the same child: the second finds the name taken there but nowhere by lookup while the
/// first is between its two steps (data made, link file not yet). It waits a little and
/// opens the first one's file, as open(O_CREAT) must, instead of failing with ENOENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_racing_a_diverted_create_of_its_name_opens_that_file() {
    let (cluster, top, d, name, first) =
        a_diverted_create_held_at_its_link_file("both", b"first", false).await;
    let second = tokio::spawn({
        let other = cluster.build::<xlfs_dht::Distribute>(&DIVERTING);
        let name = name.clone();
        async move { create_with(&other, d, &name, b"").await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    cluster.handle(0).open_gate(Fop::Mknod);
    let g = first.await.expect("join");
    assert_eq!(
        second.await.expect("join"),
        g,
        "the second create opened the first's file"
    );
    assert_eq!(held(&cluster, 1, d, &name).await, Held::File(g));
    assert_eq!(read_all(&top, g).await, b"first");
}

/// A directory's lookup whose answers span another client's rmdir and mkdir of the name
/// (one child answered with the old directory, another with the new one) asks again and
/// finds the new directory. Before, it answered EIO, as for copies that really differ: the
/// two-mount test of mkdir, rmdir and stat racing on one name saw it under load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_racing_a_directorys_rmdir_and_mkdir_finds_the_new_one() {
    use std::time::Duration;
    use xlator_api::GfidReq;
    let (cluster, top) = setup(2, &[]);
    let old = mkdir(&top, Gfid::ROOT, "d").await;
    let other = fresh(&cluster, &[]);
    cluster.handle(0).hold(Fop::Lookup);
    let looking = tokio::spawn({
        let other = other.clone();
        async move { lookup(&other, Gfid::ROOT, "d").await }
    });
    let t0 = std::time::Instant::now();
    while cluster.handle(0).held(Fop::Lookup) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the lookup never reached child 0"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Child 1 answers the old directory; then the name is removed and made again (on the
    // bricks themselves, as the other client's rmdir and mkdir leave them) before child 0
    // answers.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let new = Gfid::random();
    let made = Ctx::builder(0, 0).ext(&GfidReq(new)).build();
    for i in 0..2 {
        let leaf = cluster.leaf(i);
        leaf.rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
            .await
            .expect("rmdir");
        leaf.mkdir(&made, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .expect("mkdir");
    }
    cluster.handle(0).open_gate(Fop::Lookup);
    let e = looking.await.expect("lookup task").expect("lookup");
    assert_ne!(old, new);
    assert_eq!(e.attr.gfid, new, "the lookup found the old directory");
    assert_eq!(
        everywhere(&cluster, Gfid::ROOT, "d").await,
        vec![Held::Dir(new); 2]
    );
}

/// Waits (at most 5 s) until a call of `fop` is held at child `i`'s gate.
async fn wait_held(cluster: &MockCluster, i: usize, fop: Fop) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while cluster.handle(i).held(fop) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no {fop:?} reached child {i}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// Fails unless none of the first `n` children has a rename mark on directory `d`.
async fn assert_no_marks(cluster: &MockCluster, d: Gfid, n: usize, case: &str) {
    use xlfs_dht::dirrename::RENAMING_XATTR;
    for i in 0..n {
        let names = vec![RENAMING_XATTR.into()].into();
        let marks = cluster.leaf(i).getxattrs(&root(), d, names).await;
        assert!(
            marks.as_ref().map_or(true, |xs| xs.is_empty()),
            "{case}: child {i} still has the mark: {marks:?}"
        );
    }
}
