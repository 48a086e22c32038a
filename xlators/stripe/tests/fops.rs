//! Stripe against a MockCluster: what reaches each child, sizes, holes, appends, a child
//! down, refused geometries, one GFID everywhere.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{
    Buf, CreateXattrs, Ctx, Errno, Fd, FileType, Fop, Gfid, GfidReq, Loc, SeekWhat, SetAttr, Xattr,
};
use xlfs_stripe::{GEOMETRY_XATTR, Geometry, Stripe, geometry};
use xlfs_testkit::{FopCall, MockCluster};

const B: u64 = 4096;

fn geo(n: u32) -> Geometry {
    Geometry::new(n, B).expect("geometry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_has_one_gfid_on_every_child_and_files_their_geometry() {
    let (cluster, top) = setup(3, B);
    let f = create(&top, "f", 1).await;
    let d = top
        .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    let l = top
        .symlink(&root(), Loc::new(d.attr.gfid, "l"), "f".into())
        .await
        .expect("symlink");
    for i in 0..3 {
        let leaf = cluster.leaf(i);
        let lf = leaf
            .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
            .await
            .expect("f");
        let ld = leaf
            .lookup(&root(), Loc::new(Gfid::ROOT, "d"))
            .await
            .expect("d");
        let ll = leaf
            .lookup(&root(), Loc::new(d.attr.gfid, "l"))
            .await
            .expect("l");
        assert_eq!(
            (lf.attr.gfid, ld.attr.gfid, ll.attr.gfid),
            (f.gfid, d.attr.gfid, l.attr.gfid)
        );
        assert_eq!(
            leaf_geometry(&cluster, i, f.gfid).await,
            Some(geometry::encode(geo(3), i))
        );
        assert_eq!(
            leaf_geometry(&cluster, i, d.attr.gfid).await,
            None,
            "directories have none"
        );
    }
    // Namespace changes reach every child.
    top.rename(
        &root(),
        Loc::new(Gfid::ROOT, "f"),
        Loc::new(d.attr.gfid, "g"),
        0,
    )
    .await
    .expect("rename");
    top.link(&root(), f.gfid, Loc::new(Gfid::ROOT, "h"))
        .await
        .expect("link");
    top.unlink(&root(), Loc::new(d.attr.gfid, "l"))
        .await
        .expect("unlink");
    for i in 0..3 {
        let leaf = cluster.leaf(i);
        assert!(
            leaf.lookup(&root(), Loc::new(d.attr.gfid, "g"))
                .await
                .is_ok()
        );
        assert_eq!(
            leaf.lookup(&root(), Loc::new(Gfid::ROOT, "h"))
                .await
                .map(|e| e.attr.gfid),
            Ok(f.gfid)
        );
        assert_eq!(
            leaf.lookup(&root(), Loc::new(d.attr.gfid, "l"))
                .await
                .map(drop),
            Err(Errno::ENOENT)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_is_reconciled_from_every_child_in_lookup_stat_fstat_and_readdirp() {
    let (_cluster, top) = setup(4, B);
    let f = create(&top, "f", 1).await;
    // One byte in unit 6 (child 2's second unit): only child 2 holds anything.
    write(&top, f, 6 * B + 10, b"x").await.expect("write");
    let want = 6 * B + 11;
    assert_eq!(size(&top, f.gfid).await, want);
    assert_eq!(top.fstat(&root(), f).await.map(|a| a.size), Ok(want));
    let e = top
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    assert_eq!(e.attr.size, want);
    assert!(
        e.xattr(GEOMETRY_XATTR).is_none(),
        "the geometry xattr stays inside stripe"
    );
    let dfd = fd(9, Gfid::ROOT, libc::O_RDONLY);
    top.opendir(&root(), dfd).await.expect("opendir");
    let list = top
        .readdirp(&root(), dfd, 0, 1 << 16)
        .await
        .expect("readdirp");
    let ent = list
        .iter()
        .find(|d| d.name.as_str() == "f")
        .expect("listed");
    assert_eq!(ent.attr.size, want);
    assert!(ent.xattrs.iter().all(|x| x.name.as_str() != GEOMETRY_XATTR));
    // Everything before the byte is a hole: zeros, then the byte, then end of file.
    let data = read(&top, f, 0, (want + 100) as u32).await.expect("read");
    assert_eq!(data.len() as u64, want);
    assert!(data[..data.len() - 1].iter().all(|b| *b == 0));
    assert_eq!(data.last(), Some(&b'x'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_gives_each_child_its_share_across_unit_boundaries() {
    let (cluster, top) = setup(3, B);
    let f = create(&top, "f", 1).await;
    let model: Vec<u8> = (0..10 * B).map(|i| (i % 251) as u8).collect();
    write(&top, f, 0, &model).await.expect("write");
    for to in [
        10 * B - 1,
        7 * B + 1,
        6 * B,
        3 * B - 1,
        B + 5,
        1,
        0,
        5 * B + 7,
    ] {
        let attr = SetAttr {
            size: ROption::RSome(to),
            ..SetAttr::default()
        };
        assert_eq!(top.fsetattr(&root(), f, attr).await.map(|a| a.size), Ok(to));
        for i in 0..3 {
            let s = cluster
                .leaf(i)
                .stat(&root(), f.gfid)
                .await
                .expect("stat")
                .size;
            assert_eq!(
                s,
                geo(3).child_start(i, to),
                "child {i} after truncate to {to}"
            );
        }
        assert_eq!(size(&top, f.gfid).await, to);
    }
    // The last truncate extended: zeros past the old end.
    let data = read(&top, f, 0, (6 * B) as u32).await.expect("read");
    assert_eq!(data, vec![0u8; (5 * B + 7) as usize]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_over_several_units_asks_every_child_at_once_once() {
    let (cluster, top) = setup(4, B);
    let f = create(&top, "f", 1).await;
    let data: Vec<u8> = (0..8 * B).map(|i| (i * 7 % 256) as u8).collect();
    write(&top, f, 0, &data).await.expect("write");
    for i in 0..4 {
        cluster.handle(i).take_calls();
        cluster.handle(i).hold(Fop::Readv);
    }
    let pending = tokio::spawn({
        let top = top.clone();
        async move { read(&top, f, B / 2, (6 * B) as u32).await }
    });
    // Every child has its read in flight before any answers: they run in parallel.
    for i in 0..4 {
        cluster.handle(i).wait_for(Fop::Readv, 1).await;
    }
    for i in 0..4 {
        cluster.handle(i).open_gate(Fop::Readv);
    }
    let got = pending.await.expect("join").expect("read");
    assert_eq!(got, data[(B / 2) as usize..(B / 2 + 6 * B) as usize]);
    // One contiguous child read each, even where a child has two units in the range.
    for i in 0..4 {
        assert_eq!(cluster.handle(i).count(Fop::Readv), 1, "child {i}");
    }
    let c0 = cluster.handle(0).calls_of(Fop::Readv);
    assert!(
        matches!(c0[0], FopCall::Readv { offset, size, .. } if offset == B / 2 && u64::from(size) == B + B / 2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_inside_one_unit_sends_the_callers_buffer_without_copying() {
    let (cluster, top) = setup(2, B);
    let f = create(&top, "f", 1).await;
    let buf = Buf::from_vec(vec![5u8; 100]);
    top.writev(&root(), f, B + 10, buf.clone(), 0)
        .await
        .expect("write");
    let calls = cluster.handle(1).calls_of(Fop::Writev);
    match &calls[..] {
        [FopCall::Writev { offset, data, .. }] => {
            assert_eq!(*offset, 10);
            assert!(data.shares_storage_with(&buf));
        }
        other => panic!("child 1 got {other:?}"),
    }
    assert_eq!(cluster.handle(0).count(Fop::Writev), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_append_from_two_contexts_never_overlaps() {
    let (cluster, top) = setup(3, B);
    let f = create(&top, "f", 1).await;
    let a = fd(2, f.gfid, libc::O_WRONLY | libc::O_APPEND);
    let b = fd(3, f.gfid, libc::O_WRONLY | libc::O_APPEND);
    top.open(&root(), a).await.expect("open a");
    top.open(&root(), b).await.expect("open b");
    // A holds the lock and waits in its size computation (child 1's fstat held)...
    cluster.handle(1).hold(Fop::Fstat);
    let ta = tokio::spawn({
        let top = top.clone();
        async move {
            top.writev(&Ctx::new(1, 1), a, 0, Buf::from_vec(vec![b'a'; 5000]), 0)
                .await
        }
    });
    cluster.handle(1).wait_for(Fop::Fstat, 1).await;
    // ...so B's append asks for the lock and waits there, before computing any end.
    let tb = tokio::spawn({
        let top = top.clone();
        async move {
            top.writev(&Ctx::new(2, 2), b, 0, Buf::from_vec(vec![b'b'; 3000]), 0)
                .await
        }
    });
    // Without the lock B would never send an inode lock: fail rather than hang.
    let asked = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        cluster.handle(0).wait_for(Fop::Inodelk, 2),
    );
    asked.await.expect("B's append asks for the lock");
    assert_eq!(
        cluster.handle(1).count(Fop::Fstat),
        1,
        "B computed an end under A's lock"
    );
    cluster.handle(1).open_gate(Fop::Fstat);
    assert_eq!(ta.await.expect("join").map(|w| w.written), Ok(5000));
    assert_eq!(tb.await.expect("join").map(|w| w.written), Ok(3000));
    let data = read(&top, f, 0, 10_000).await.expect("read");
    let mut want = vec![b'a'; 5000];
    want.extend_from_slice(&[b'b'; 3000]);
    assert_eq!(data, want);
    // Many more, all at once: every record lands whole, none overlaps another.
    let tasks: Vec<_> = (0..16u8)
        .map(|k| {
            let top = top.clone();
            let f = if k % 2 == 0 { a } else { b };
            tokio::spawn(async move {
                top.writev(
                    &Ctx::new(k.into(), 0),
                    f,
                    0,
                    Buf::from_vec(vec![b'A' + k; 1500]),
                    0,
                )
                .await
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("join").map(|w| w.written), Ok(1500));
    }
    let data = read(&top, f, 8000, 30_000).await.expect("read");
    assert_eq!(data.len(), 16 * 1500);
    let mut seen: Vec<u8> = data
        .chunks(1500)
        .map(|c| {
            assert!(
                c.iter().all(|x| *x == c[0]),
                "a record was split or overwritten"
            );
            c[0]
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..16u8).map(|k| b'A' + k).collect::<Vec<_>>());
    // Children write at the offsets stripe computed: none was asked to append.
    for i in 0..3 {
        for c in cluster.handle(i).calls_of(Fop::Writev) {
            assert!(
                matches!(c, FopCall::Writev { fd, flags, .. } if (fd.flags | flags) & libc::O_APPEND == 0)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_down_fails_its_units_and_sizes_never_zeros_or_short() {
    let (cluster, top) = setup(3, B);
    let f = create(&top, "f", 1).await;
    let data = vec![7u8; (6 * B) as usize];
    write(&top, f, 0, &data).await.expect("write");
    cluster.down(1);
    // Units of the children still up read fine; child 1's units and anything spanning
    // them fail, as do sizes and writes there.
    assert_eq!(read(&top, f, 0, B as u32).await, Ok(vec![7u8; B as usize]));
    assert_eq!(read(&top, f, B, 10).await, Err(Errno::ENOTCONN));
    assert_eq!(read(&top, f, 0, (3 * B) as u32).await, Err(Errno::ENOTCONN));
    assert_eq!(write(&top, f, 4 * B, b"zz").await, Err(Errno::ENOTCONN));
    assert_eq!(
        top.stat(&root(), f.gfid).await.map(drop),
        Err(Errno::ENOTCONN)
    );
    assert_eq!(top.fstat(&root(), f).await.map(drop), Err(Errno::ENOTCONN));
    assert_eq!(
        top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
            .await
            .map(drop),
        Err(Errno::ENOTCONN)
    );
    // A read past child 0's data that would need child 1's size to tell a hole from the
    // end fails too.
    assert_eq!(read(&top, f, 6 * B, 10).await, Err(Errno::ENOTCONN));
    // Namespace changes need every child.
    assert_eq!(
        top.mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .map(drop),
        Err(Errno::ENOTCONN)
    );
    // Directories are still answered by child 0.
    assert_eq!(
        top.stat(&root(), Gfid::ROOT).await.map(|a| a.kind),
        Ok(FileType::Directory)
    );
    cluster.up(1);
    assert_eq!(read(&top, f, 0, (6 * B) as u32).await, Ok(data));
    assert_eq!(size(&top, f.gfid).await, 6 * B);
}

/// Makes a file straight on the leaves with the geometry values `values` (None: none).
async fn plant(cluster: &MockCluster, name: &str, values: &[Option<Vec<u8>>]) -> Gfid {
    let gfid = Gfid::random();
    for (i, v) in values.iter().enumerate() {
        let mut b = Ctx::root().to_builder().ext(&GfidReq(gfid));
        if let Some(v) = v {
            b = b.ext(&CreateXattrs(vec![(GEOMETRY_XATTR.into(), v.clone())]));
        }
        let e = cluster
            .leaf(i)
            .mknod(
                &b.build(),
                Loc::new(Gfid::ROOT, name),
                libc::S_IFREG | 0o644,
                0,
                0,
            )
            .await
            .expect("plant");
        assert_eq!(e.attr.gfid, gfid);
    }
    gfid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_disagreeing_geometry_is_eio_never_a_guess() {
    let (cluster, top) = setup(2, B);
    let g2 = geo(2);
    let other = Geometry::new(2, 2 * B).expect("geometry");
    let three = Geometry::new(3, B).expect("geometry");
    let cases = [
        ("missing", vec![Some(geometry::encode(g2, 0)), None]),
        (
            "swapped",
            vec![Some(geometry::encode(g2, 1)), Some(geometry::encode(g2, 0))],
        ),
        (
            "block",
            vec![
                Some(geometry::encode(g2, 0)),
                Some(geometry::encode(other, 1)),
            ],
        ),
        (
            "count",
            vec![
                Some(geometry::encode(three, 0)),
                Some(geometry::encode(three, 1)),
            ],
        ),
        (
            "garbage",
            vec![Some(b"junk".to_vec()), Some(geometry::encode(g2, 1))],
        ),
    ];
    for (name, values) in &cases {
        let gfid = plant(&cluster, name, values).await;
        let loc = Loc::new(Gfid::ROOT, *name);
        assert_eq!(
            top.lookup(&root(), loc).await.map(drop),
            Err(Errno::EIO),
            "{name}"
        );
        assert_eq!(
            top.stat(&root(), gfid).await.map(drop),
            Err(Errno::EIO),
            "{name}"
        );
        let f = fd(40, gfid, libc::O_RDWR);
        assert_eq!(
            top.open(&root(), f).await.map(drop),
            Err(Errno::EIO),
            "{name}"
        );
        // The refused open left nothing open on the children.
        assert_eq!(
            top.readv(&root(), Fd::anonymous(gfid, libc::O_RDONLY), 0, 10)
                .await
                .map(drop),
            Err(Errno::EIO)
        );
    }
    // The same file with a good geometry on both copies is fine.
    let good = plant(
        &cluster,
        "good",
        &[Some(geometry::encode(g2, 0)), Some(geometry::encode(g2, 1))],
    )
    .await;
    assert_eq!(top.stat(&root(), good).await.map(|a| a.size), Ok(0));
    // A file made with another unit size keeps it (the option applies to new files only).
    let big = plant(
        &cluster,
        "big",
        &[
            Some(geometry::encode(other, 0)),
            Some(geometry::encode(other, 1)),
        ],
    )
    .await;
    let f = fd(41, big, libc::O_RDWR);
    top.open(&root(), f).await.expect("open");
    write(&top, f, 0, &vec![1u8; (3 * B) as usize])
        .await
        .expect("write");
    assert_eq!(
        cluster.leaf(1).stat(&root(), big).await.map(|a| a.size),
        Ok(B),
        "unit 1 starts at 2B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_geometry_xattr_is_hidden_and_cannot_be_changed_from_above() {
    let (_cluster, top) = setup(2, B);
    let f = create(&top, "f", 1).await;
    let names = top.listxattr(&root(), f.gfid).await.expect("listxattr");
    assert!(names.iter().all(|n| n.as_str() != GEOMETRY_XATTR));
    assert_eq!(
        top.getxattr(&root(), f.gfid, GEOMETRY_XATTR.into())
            .await
            .map(drop),
        Err(Errno::ENODATA)
    );
    let x = Xattr {
        name: GEOMETRY_XATTR.into(),
        value: Buf::from_vec(vec![1]),
    };
    assert_eq!(
        top.setxattr(&root(), f.gfid, x.clone(), 0).await,
        Err(Errno::EPERM)
    );
    assert_eq!(
        top.setxattrs(&root(), f.gfid, RVec::from(vec![x]), 0).await,
        Err(Errno::EPERM)
    );
    assert_eq!(
        top.removexattr(&root(), f.gfid, GEOMETRY_XATTR.into())
            .await,
        Err(Errno::EPERM)
    );
    let names: RVec<RString> = vec![RString::from(GEOMETRY_XATTR)].into();
    assert_eq!(
        top.getxattrs(&root(), f.gfid, names).await.map(|x| x.len()),
        Ok(0)
    );
    // Other xattrs go to every child and are read back.
    let y = Xattr {
        name: "user.k".into(),
        value: Buf::from_vec(b"v".to_vec()),
    };
    top.setxattr(&root(), f.gfid, y, 0).await.expect("setxattr");
    assert_eq!(
        top.getxattr(&root(), f.gfid, "user.k".into())
            .await
            .map(|b| b.as_slice().to_vec()),
        Ok(b"v".to_vec())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallocate_zerofill_discard_and_seek_map_through_the_units() {
    let (cluster, top) = setup(3, B);
    let f = create(&top, "f", 1).await;
    // Data in unit 1 and unit 5 only; the rest is holes.
    write(&top, f, B, &vec![1u8; B as usize])
        .await
        .expect("write");
    write(&top, f, 5 * B, &[2u8; 10]).await.expect("write");
    let end = 5 * B + 10;
    assert_eq!(top.seek(&root(), f, 0, SeekWhat::Data).await, Ok(B));
    assert_eq!(top.seek(&root(), f, B + 1, SeekWhat::Hole).await, Ok(2 * B));
    assert_eq!(top.seek(&root(), f, 2 * B, SeekWhat::Data).await, Ok(5 * B));
    assert_eq!(top.seek(&root(), f, 5 * B, SeekWhat::Hole).await, Ok(end));
    assert_eq!(
        top.seek(&root(), f, end, SeekWhat::Data).await,
        Err(Errno::ENXIO)
    );
    // zerofill across units 1..3, then the data reads as zeros.
    top.zerofill(&root(), f, B + 100, 2 * B)
        .await
        .expect("zerofill");
    let d = read(&top, f, B, (B + 200) as u32).await.expect("read");
    assert!(d[..100].iter().all(|b| *b == 1) && d[100..].iter().all(|b| *b == 0));
    // A hole punched in unit 5 keeps the size.
    top.discard(&root(), f, 5 * B, 4).await.expect("discard");
    assert_eq!(
        read(&top, f, 5 * B, 10).await,
        Ok(vec![0, 0, 0, 0, 2, 2, 2, 2, 2, 2])
    );
    assert_eq!(size(&top, f.gfid).await, end);
    // fallocate past the end extends the file; each child its part of the range.
    top.fallocate(&root(), f, 0, 7 * B, 3 * B)
        .await
        .expect("fallocate");
    assert_eq!(size(&top, f.gfid).await, 10 * B);
    for i in 0..3 {
        let calls = cluster.handle(i).calls_of(Fop::Fallocate);
        let (c, l) = geo(3).child_range(i, 7 * B, 3 * B);
        assert!(
            matches!(calls[..], [FopCall::Fallocate { offset, len, .. }] if offset == c && len == l),
            "child {i}: {calls:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rchecksum_is_the_checksum_of_the_logical_bytes() {
    let (_cluster, top) = setup(3, B);
    let f = create(&top, "f", 1).await;
    let data: Vec<u8> = (0..5 * B).map(|i| (i % 13) as u8).collect();
    write(&top, f, 0, &data).await.expect("write");
    let leaf = xlfs_testkit::MemLeaf::new();
    let e = leaf
        .create(
            &root(),
            Loc::new(Gfid::ROOT, "x"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create");
    let lf = fd(1, e.attr.gfid, libc::O_RDWR);
    leaf.writev(&root(), lf, 0, Buf::from_vec(data), 0)
        .await
        .expect("write");
    let (off, len) = (B / 3, (3 * B) as u32);
    assert_eq!(
        top.rchecksum(&root(), f, off, len).await,
        leaf.rchecksum(&root(), lf, off, len).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_file_is_removed_from_every_child_when_one_refuses_it() {
    let (cluster, top) = setup(3, B);
    cluster.handle(2).fail(Fop::Create, Errno::ENOSPC);
    let r = top
        .create(
            &root(),
            Loc::new(Gfid::ROOT, "f"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await;
    assert_eq!(r.map(drop), Err(Errno::ENOSPC));
    for i in 0..3 {
        let l = cluster
            .leaf(i)
            .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
            .await;
        assert_eq!(l.map(drop), Err(Errno::ENOENT), "child {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dump_reports_the_geometry_and_the_children_up() {
    let cluster = MockCluster::new(2);
    let top = cluster.build::<Stripe>(&[]);
    let d = top.dump();
    assert_eq!(d.find_u64("children-up"), Some(2));
    assert_eq!(d.find_u64("block-size"), Some(128 << 10));
    assert_eq!(d.find_u64("stripe-count"), Some(2));
    cluster.down(0);
    assert_eq!(top.dump().find_u64("children-up"), Some(1));
}

/// A page of child 0's listing whose files were all removed before their other copies were
/// looked up is not answered empty (which ends a listing): the listing reads on and still
/// reaches the entries after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reads_past_a_page_whose_files_all_went() {
    let (cluster, top) = setup(2, B);
    for name in ["f1", "f2", "f3"] {
        create(&top, name, 1).await;
    }
    top.mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir");
    // The files are gone on child 1 by the time their copies there are looked up.
    cluster.handle(1).fail_always(Fop::Lookup, Errno::ENOENT);
    let dfd = fd(9, Gfid::ROOT, libc::O_RDONLY);
    top.opendir(&root(), dfd).await.expect("opendir");
    let mut names = Vec::new();
    let mut off = 0;
    loop {
        // One entry per page of child 0.
        let page = top.readdirp(&root(), dfd, off, 1).await.expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
        names.extend(page.iter().map(|d| d.name.to_string()));
    }
    assert_eq!(names, ["d"]);
}
