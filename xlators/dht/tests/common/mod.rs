//! Helpers shared by the distribute tests: a translator over a mock cluster of memory leaves,
//! and looks at what each leaf holds.
#![allow(dead_code)]

pub mod cli;

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Ctx, Entry, Errno, Fd, FdId, Gfid, Loc, Subvol, XattrReq};
use xlfs_dht::{Distribute, LAYOUT_XATTR, LINK_MODE, LINKTO_XATTR, Layout, Slice};
use xlfs_testkit::MockCluster;

pub fn root() -> Ctx {
    Ctx::root()
}

/// A cluster of `n` and distribute over it (min-free-disk off unless `set` says).
pub fn setup(n: usize, set: &[(&str, &str)]) -> (MockCluster, Subvol) {
    let cluster = MockCluster::new(n);
    let top = fresh(&cluster, set);
    (cluster, top)
}

/// [`setup`] with features/locks over each child's memory leaf (the brick's stack): the
/// children answer entrylk and inodelk.
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
    let top = fresh(&cluster, set);
    (cluster, top)
}

/// Another distribute instance over the same children: a second client, with empty caches.
pub fn fresh(cluster: &MockCluster, set: &[(&str, &str)]) -> Subvol {
    let mut opts: Vec<(&str, &str)> = vec![("min-free-disk", "0")];
    opts.extend_from_slice(set);
    cluster.build::<Distribute>(&opts)
}

pub fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

static NEXT_FD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1000);

pub fn next_fd_id() -> u64 {
    NEXT_FD.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Creates `name` in `parent` through `top` with `data`; returns its GFID.
pub async fn create_with(top: &Subvol, parent: Gfid, name: &str, data: &[u8]) -> Gfid {
    let id = next_fd_id();
    let e = top
        .create(
            &root(),
            Loc::new(parent, name),
            fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT),
            0o644,
            0,
        )
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    let f = fd(id, e.attr.gfid, libc::O_RDWR);
    if !data.is_empty() {
        let w = top
            .writev(&root(), f, 0, Buf::from_vec(data.to_vec()), 0)
            .await
            .expect("write");
        assert_eq!(w.written, data.len() as u64);
    }
    top.release(&root(), f).await.expect("release");
    e.attr.gfid
}

pub async fn mkdir(top: &Subvol, parent: Gfid, name: &str) -> Gfid {
    top.mkdir(&root(), Loc::new(parent, name), 0o755, 0)
        .await
        .unwrap_or_else(|e| panic!("mkdir {name}: {e}"))
        .attr
        .gfid
}

/// Every byte of `gfid` read through `top`.
pub async fn read_all(top: &Subvol, gfid: Gfid) -> Vec<u8> {
    let id = next_fd_id();
    let f = fd(id, gfid, libc::O_RDONLY);
    top.open(&root(), f).await.expect("open");
    let mut out = Vec::new();
    loop {
        let r = top
            .readv(&root(), f, out.len() as u64, 1 << 16)
            .await
            .expect("read");
        if r.data.is_empty() {
            break;
        }
        out.extend_from_slice(&r.data);
    }
    top.release(&root(), f).await.expect("release");
    out
}

/// What one leaf holds under a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    Nothing,
    /// A link file naming this child (by name).
    Link(String),
    Dir(Gfid),
    File(Gfid),
}

/// What leaf `i` holds at `parent/name`.
pub async fn held(cluster: &MockCluster, i: usize, parent: Gfid, name: &str) -> Held {
    let req = XattrReq {
        names: vec![LINKTO_XATTR.into(), LAYOUT_XATTR.into()],
        prefixes: vec![],
    };
    let cx = Ctx::builder(0, 0).ext(&req).build();
    match cluster.leaf(i).lookup(&cx, Loc::new(parent, name)).await {
        Err(Errno::ENOENT) => Held::Nothing,
        Err(e) => panic!("leaf {i} lookup {name}: {e}"),
        Ok(e) if e.attr.is_dir() => Held::Dir(e.attr.gfid),
        Ok(e) => match e.xattr(LINKTO_XATTR) {
            Some(v) => {
                assert_eq!(
                    e.attr.perm & 0o7777,
                    LINK_MODE,
                    "a link file's mode is the sticky bit only"
                );
                assert_eq!(e.attr.size, 0, "a link file is empty");
                Held::Link(String::from_utf8(v.as_slice().to_vec()).expect("utf8"))
            }
            None => Held::File(e.attr.gfid),
        },
    }
}

/// What every leaf holds at `parent/name`.
pub async fn everywhere(cluster: &MockCluster, parent: Gfid, name: &str) -> Vec<Held> {
    let mut v = Vec::new();
    for i in 0..cluster.len() {
        v.push(held(cluster, i, parent, name).await);
    }
    v
}

/// The slice leaf `i` holds for directory `dir`.
pub async fn leaf_slice(cluster: &MockCluster, i: usize, dir: Gfid) -> Option<Slice> {
    let names: RVec<RString> = vec![RString::from(LAYOUT_XATTR)].into();
    let xs = cluster.leaf(i).getxattrs(&root(), dir, names).await.ok()?;
    xs.first().and_then(|x| Slice::decode(x.value.as_slice()))
}

/// The merged layout the leaves hold for `dir` (panics if it is not complete).
pub async fn leaf_layout(cluster: &MockCluster, dir: Gfid) -> Layout {
    let mut s = Vec::new();
    for i in 0..cluster.len() {
        s.push(leaf_slice(cluster, i, dir).await);
    }
    Layout::merge(&s).unwrap_or_else(|e| panic!("layout of {dir} on the leaves: {e:?}"))
}

/// Writes `slice` (or removes the xattr for `None`) on leaf `i`'s copy of `dir`.
pub async fn set_leaf_slice(cluster: &MockCluster, i: usize, dir: Gfid, slice: Option<Slice>) {
    let leaf = cluster.leaf(i);
    match slice {
        Some(s) => leaf
            .setxattr(
                &root(),
                dir,
                xlator_api::Xattr {
                    name: LAYOUT_XATTR.into(),
                    value: s.encode().into(),
                },
                0,
            )
            .await
            .expect("set slice"),
        None => {
            let _ = leaf.removexattr(&root(), dir, LAYOUT_XATTR.into()).await;
        }
    }
}

/// Two names in `dir`'s layout whose hashed children differ (and those children).
pub fn names_on_different_children(
    layout: &Layout,
    prefix: &str,
) -> ((String, usize), (String, usize)) {
    let a = format!("{prefix}-a");
    let ha = layout.hashed(&a);
    for k in 0..10_000 {
        let b = format!("{prefix}-b{k}");
        let hb = layout.hashed(&b);
        if hb != ha {
            return ((a, ha), (b, hb));
        }
    }
    panic!("no second name off child {ha}");
}

/// A name in `dir`'s layout that hashes to child `want`.
pub fn name_on(layout: &Layout, prefix: &str, want: usize) -> String {
    (0..100_000)
        .map(|k| format!("{prefix}{k}"))
        .find(|n| layout.hashed(n) == want)
        .expect("a name hashing there")
}

pub async fn lookup(top: &Subvol, parent: Gfid, name: &str) -> Result<Entry, Errno> {
    top.lookup(&root(), Loc::new(parent, name)).await
}

/// The fops every leaf got since the last call, in order (the calls are forgotten).
pub fn fops_since(cluster: &MockCluster) -> Vec<Vec<xlator_api::Fop>> {
    (0..cluster.len())
        .map(|i| {
            cluster
                .handle(i)
                .take_calls()
                .iter()
                .map(|c| c.fop())
                .collect()
        })
        .collect()
}

/// How many calls of `fop` every leaf got since the last call (all calls are forgotten).
pub fn calls_since(cluster: &MockCluster, fop: xlator_api::Fop) -> Vec<usize> {
    fops_since(cluster)
        .iter()
        .map(|f| f.iter().filter(|x| **x == fop).count())
        .collect()
}

/// Lookups every leaf saw since the last call (and forgets the calls).
pub fn lookups_since(cluster: &MockCluster) -> Vec<usize> {
    calls_since(cluster, xlator_api::Fop::Lookup)
}
