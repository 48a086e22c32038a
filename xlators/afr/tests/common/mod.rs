//! Helpers shared by the replicate tests.
#![allow(dead_code)]

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Ctx, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_afr::Replicate;
use xlfs_afr::changelog::Counters;
use xlfs_testkit::MockCluster;

pub fn root() -> Ctx {
    Ctx::root()
}

/// A cluster of `n` and replicate over it; heals inline, eager lock off unless `set` says.
pub fn setup(n: usize, set: &[(&str, &str)]) -> (MockCluster, Subvol) {
    let cluster = MockCluster::new(n);
    let mut opts = vec![("background-self-heal-count", "0"), ("eager-lock", "off")];
    opts.extend_from_slice(set);
    let top = cluster.build::<Replicate>(&opts);
    (cluster, top)
}

/// [`setup`] with features/locks over each child's in-memory leaf (the brick's stack): the
/// children honour `LocksAround`, so transactions lock with their pre-op and unlock with
/// their post-op.
pub fn setup_on_locks(n: usize, set: &[(&str, &str)]) -> (MockCluster, Subvol) {
    let leaves = (0..n)
        .map(|i| {
            xlator_api::sdk::instantiate::<xlfs_locks::Locks>(xlator_api::InitArgs {
                name: format!("locks-{i}").into(),
                options: xlator_api::Options::new(),
                children: RVec::from(vec![xlfs_testkit::MemLeaf::new()]),
                services: xlfs_core::services::host_services(),
            })
            .expect("locks init")
        })
        .collect();
    let cluster = MockCluster::with_leaves(leaves);
    let mut opts = vec![("background-self-heal-count", "0"), ("eager-lock", "off")];
    opts.extend_from_slice(set);
    let top = cluster.build::<Replicate>(&opts);
    (cluster, top)
}

/// A second client of `c`'s children (another replicate over the same leaves, with the
/// same pending keys), options as [`setup`] gives them plus `set`.
pub fn second_client(c: &MockCluster, set: &[(&str, &str)]) -> (MockCluster, Subvol) {
    let leaves = (0..c.len()).map(|i| c.leaf(i).clone()).collect();
    let c2 = MockCluster::with_leaves(leaves);
    let keys: Vec<String> = (0..c.len()).map(|j| key(c, j)).collect();
    let keys = keys.join(",");
    let mut opts = vec![
        ("background-self-heal-count", "0"),
        ("eager-lock", "off"),
        ("pending-xattrs", keys.as_str()),
    ];
    opts.extend_from_slice(set);
    let top = c2.build::<Replicate>(&opts);
    (c2, top)
}

/// The pending key of child `j`.
pub fn key(cluster: &MockCluster, j: usize) -> String {
    format!("trusted.afr.{}", cluster.children()[j].name())
}

/// What child `i` stores about child `j` for `gfid`.
pub async fn counters(cluster: &MockCluster, i: usize, gfid: Gfid, j: usize) -> Counters {
    let names: RVec<RString> = vec![RString::from(key(cluster, j))].into();
    let xs = cluster
        .leaf(i)
        .getxattrs(&root(), gfid, names)
        .await
        .expect("getxattrs");
    Counters::decode(xs.first().map(|x| x.value.as_slice()))
}

/// Every counter on every child for `gfid` (children without the object count as zero).
pub async fn all_zero(cluster: &MockCluster, gfid: Gfid) -> bool {
    for i in 0..cluster.len() {
        if cluster.leaf(i).stat(&root(), gfid).await.is_err() {
            continue;
        }
        for j in 0..cluster.len() {
            if counters(cluster, i, gfid, j).await != Counters::default() {
                return false;
            }
        }
    }
    true
}

pub fn fd(id: u64, gfid: Gfid) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags: libc::O_RDWR,
    }
}

/// Creates `name` in the root through `top`; returns its open fd.
pub async fn create(top: &Subvol, name: &str, id: u64) -> Fd {
    let e = top
        .create(
            &root(),
            Loc::new(Gfid::ROOT, name),
            fd(id, Gfid::NULL),
            0o644,
            0,
        )
        .await
        .expect("create");
    fd(id, e.attr.gfid)
}

pub async fn write(top: &Subvol, fd: Fd, off: u64, data: &[u8]) -> Result<u64, xlator_api::Errno> {
    top.writev(&root(), fd, off, Buf::from_vec(data.to_vec()), 0)
        .await
        .map(|w| w.written)
}

/// The whole content of `gfid` on a leaf (through a fresh fd).
pub async fn leaf_content(leaf: &Subvol, gfid: Gfid) -> Option<Vec<u8>> {
    let f = Fd {
        id: FdId(900_000 + u64::from(gfid.0[15])),
        gfid,
        flags: libc::O_RDONLY,
    };
    leaf.open(&root(), f).await.ok()?;
    let r = leaf.readv(&root(), f, 0, 1 << 20).await.ok()?;
    let _ = leaf.release(&root(), f).await;
    Some(r.data.as_slice().to_vec())
}
