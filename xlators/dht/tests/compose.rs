//! Distribute over other cluster translators, in process, as volgen composes them:
//! distribute 2 x replica 2 and distribute 2 x stripe 2 over memory leaves. The conformance
//! suite passes, and a rename across children leaves a link file that the layer below keeps
//! (its xattr and mode survive replicate's and stripe's create paths).

mod common;

use common::*;
use xlator_api::{Ctx, Errno, Gfid, Loc, Subvol, XattrReq};
use xlfs_dht::{Distribute, LINKTO_XATTR, Layout, Slice};
use xlfs_testkit::MockCluster;
use xlfs_testkit::conformance::{self, Caps};
use xlfs_testkit::memfs::MemLeaf;

fn replica_sets(sets: usize, per: usize) -> Vec<Subvol> {
    (0..sets)
        .map(|_| {
            let leaves: Vec<Subvol> = (0..per).map(|_| MemLeaf::new()).collect();
            let c = MockCluster::with_leaves(leaves);
            let top = c.build::<xlfs_afr::Replicate>(&[]);
            std::mem::forget(c); // keeps the children's event links for the test's life
            top
        })
        .collect()
}

fn stripes(sets: usize, per: usize) -> Vec<Subvol> {
    (0..sets)
        .map(|_| {
            let c = MockCluster::new(per);
            let top = c.build::<xlfs_stripe::Stripe>(&[("block-size", "4KiB")]);
            std::mem::forget(c);
            top
        })
        .collect()
}

/// Cases the layer below fails on its own (the same suite over it alone): not distribute's.
/// cluster/replicate answers EINVAL instead of EACCES to a non-owner's O_RDONLY|O_TRUNC open.
const BELOW_FAILS: &[&str] = &["perms::nonroot_open_respects_mode"];

async fn run(children: Vec<Subvol>, below_fails: &[&str]) {
    let cluster = MockCluster::with_leaves(children);
    let top = cluster.build::<Distribute>(&[("min-free-disk", "0")]);
    let report = conformance::run(&top, Caps::all()).await;
    println!("{report}");
    let unexpected: Vec<String> = report
        .failures()
        .filter(|(name, _)| !below_fails.contains(name))
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    assert!(report.passed() >= 75, "{report}");
    link_file_survives(&cluster, &top).await;
}

async fn link_file_survives(cluster: &MockCluster, top: &Subvol) {
    let d = mkdir(top, Gfid::ROOT, "compose").await;
    let mut s = Vec::new();
    for i in 0..cluster.len() {
        let names = vec![xlfs_dht::LAYOUT_XATTR.into()].into();
        let xs = cluster.children()[i]
            .getxattrs(&root(), d, names)
            .await
            .expect("getxattrs");
        s.push(xs.first().and_then(|x| Slice::decode(x.value.as_slice())));
    }
    let layout = Layout::merge(&s).expect("layout below");
    let ((a, _), (b, hb)) = names_on_different_children(&layout, "m");
    let g = create_with(top, d, &a, b"across").await;
    top.rename(&root(), Loc::new(d, a.as_str()), Loc::new(d, b.as_str()), 0)
        .await
        .expect("rename");
    let req = XattrReq {
        names: vec![LINKTO_XATTR.into()],
        prefixes: vec![],
    };
    let cx = Ctx::builder(0, 0).ext(&req).build();
    let e = cluster.children()[hb]
        .lookup(&cx, Loc::new(d, b.as_str()))
        .await
        .expect("link file below");
    assert_eq!(e.attr.perm & 0o7777, libc::S_ISVTX);
    assert!(e.xattr(LINKTO_XATTR).is_some(), "{:?}", e.xattrs);
    let other = fresh(cluster, &[]);
    assert_eq!(
        lookup(&other, d, &b)
            .await
            .expect("through the link")
            .attr
            .gfid,
        g
    );
    assert_eq!(read_all(&other, g).await, b"across");
    assert_eq!(lookup(&other, d, &a).await.map(drop), Err(Errno::ENOENT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn distribute_2_x_replica_2() {
    run(replica_sets(2, 2), BELOW_FAILS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn distribute_2_x_stripe_2() {
    run(stripes(2, 2), &[]).await;
}
