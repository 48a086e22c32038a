//! Helpers shared by the stripe tests.
#![allow(dead_code)]

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_stripe::{GEOMETRY_XATTR, Geometry, Stripe};
use xlfs_testkit::MockCluster;

pub fn root() -> Ctx {
    Ctx::root()
}

/// A cluster of `n` and stripe over it with units of `block` bytes.
pub fn setup(n: usize, block: u64) -> (MockCluster, Subvol) {
    let cluster = MockCluster::new(n);
    let top = cluster.build::<Stripe>(&[("block-size", &block.to_string())]);
    (cluster, top)
}

pub fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// Creates `name` in the root through `top`; returns its open fd.
pub async fn create(top: &Subvol, name: &str, id: u64) -> Fd {
    let e = top
        .create(
            &root(),
            Loc::new(Gfid::ROOT, name),
            fd(id, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create");
    fd(id, e.attr.gfid, libc::O_RDWR)
}

pub async fn write(top: &Subvol, fd: Fd, off: u64, data: &[u8]) -> Result<u64, Errno> {
    top.writev(&root(), fd, off, Buf::from_vec(data.to_vec()), 0)
        .await
        .map(|w| w.written)
}

pub async fn read(top: &Subvol, fd: Fd, off: u64, len: u32) -> Result<Vec<u8>, Errno> {
    top.readv(&root(), fd, off, len)
        .await
        .map(|r| r.data.as_slice().to_vec())
}

pub async fn size(top: &Subvol, gfid: Gfid) -> u64 {
    top.stat(&root(), gfid).await.expect("stat").size
}

/// Everything child `i`'s leaf holds of `gfid`.
pub async fn leaf_bytes(cluster: &MockCluster, i: usize, gfid: Gfid) -> Vec<u8> {
    let leaf = cluster.leaf(i);
    let size = leaf.stat(&root(), gfid).await.expect("leaf stat").size;
    let f = Fd::anonymous(gfid, libc::O_RDONLY);
    let mut out = Vec::new();
    while (out.len() as u64) < size {
        let r = leaf
            .readv(&root(), f, out.len() as u64, 1 << 20)
            .await
            .expect("leaf read");
        if r.data.is_empty() {
            break;
        }
        out.extend_from_slice(&r.data);
    }
    out
}

/// The geometry xattr child `i`'s leaf holds for `gfid`.
pub async fn leaf_geometry(cluster: &MockCluster, i: usize, gfid: Gfid) -> Option<Vec<u8>> {
    let names: RVec<RString> = vec![RString::from(GEOMETRY_XATTR)].into();
    let xs = cluster
        .leaf(i)
        .getxattrs(&root(), gfid, names)
        .await
        .expect("getxattrs");
    xs.first().map(|x| x.value.as_slice().to_vec())
}

/// Checks that each child's file is exactly its coalesced share of `model`: its bytes are
/// the model's bytes of its units, in order, and it holds nothing past the model's end
/// (a shorter child is a hole that reads as zeros).
pub async fn assert_shares(cluster: &MockCluster, geo: Geometry, gfid: Gfid, model: &[u8]) {
    for i in 0..cluster.len() {
        let got = leaf_bytes(cluster, i, gfid).await;
        let share = geo.child_start(i, model.len() as u64);
        assert!(
            got.len() as u64 <= share,
            "child {i} holds {} > share {share}",
            got.len()
        );
        for (c, b) in got.iter().enumerate() {
            let p = geo.logical_of(i, c as u64) as usize;
            assert_eq!(*b, model[p], "child {i} byte {c} (logical {p})");
        }
    }
}
