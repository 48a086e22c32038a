//! readdirp against a model: random directories (files on every child, subdirectories on
//! every child, link files from renames and hard links) listed with random page sizes must
//! give each name exactly once; a listing while names come and go gives every name that
//! stayed exactly once and no name twice; children whose offsets are 63-bit values (ext4's
//! hashed `d_off`) list exactly through indirect cookies.

mod common;

use std::collections::{BTreeSet, HashMap};

use common::*;
use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{Ctx, DirEntry, Errno, Fd, Gfid, Init, Loc, Subvol, Translator};
use xlfs_testkit::MockCluster;
use xlfs_testkit::memfs::MemLeaf;

/// xorshift64*: a small seeded generator (a failing seed is printed and replays exactly).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Lists `dir` with a random page size per call; names in order, and each page's cookies.
async fn list_random(
    top: &Subvol,
    dir: Gfid,
    rng: &mut Rng,
    mut between: impl AsyncFnMut(&mut Rng),
) -> Vec<DirEntry> {
    let id = next_fd_id();
    let f = fd(id, dir, libc::O_RDONLY);
    top.opendir(&root(), f).await.expect("opendir");
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let size = 1 + rng.below(3000) as u32;
        let page = top.readdirp(&root(), f, off, size).await.expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
        out.extend(page);
        between(rng).await;
    }
    top.releasedir(&root(), f).await.expect("releasedir");
    out
}

/// A random directory through `top`: returns the names it must list (with GFIDs).
async fn populate(top: &Subvol, d: Gfid, rng: &mut Rng) -> HashMap<String, Gfid> {
    let mut model = HashMap::new();
    let files = rng.below(120);
    for k in 0..files {
        let name = format!("f{k}-{}", rng.below(1000));
        if model.contains_key(&name) {
            continue;
        }
        let g = create_with(top, d, &name, b"").await;
        model.insert(name, g);
    }
    for k in 0..rng.below(12) {
        let name = format!("dir{k}");
        model.insert(name.clone(), mkdir(top, d, &name).await);
    }
    // Renames (often across children: link files appear) and hard links.
    let names: Vec<String> = model
        .keys()
        .filter(|n| n.starts_with('f'))
        .cloned()
        .collect();
    for n in names.iter().take(rng.below(30) as usize) {
        let to = format!("renamed-{n}");
        top.rename(
            &root(),
            Loc::new(d, n.as_str()),
            Loc::new(d, to.as_str()),
            0,
        )
        .await
        .expect("rename");
        let g = model.remove(n).expect("in model");
        model.insert(to, g);
    }
    let targets: Vec<(String, Gfid)> = model
        .iter()
        .filter(|(n, _)| !n.starts_with("dir"))
        .map(|(n, g)| (n.clone(), *g))
        .collect();
    for (n, g) in targets.iter().take(rng.below(10) as usize) {
        let to = format!("hard-{n}");
        top.link(&root(), *g, Loc::new(d, to.as_str()))
            .await
            .expect("link");
        model.insert(to, *g);
    }
    model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_with_random_page_sizes_match_the_model() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let n = 1 + rng.below(6) as usize;
        let (_cluster, top) = setup(n, &[]);
        let d = mkdir(&top, Gfid::ROOT, "d").await;
        let model = populate(&top, d, &mut rng).await;
        for round in 0..3 {
            let got = list_random(&top, d, &mut rng, async |_| {}).await;
            let mut seen = HashMap::new();
            for e in &got {
                assert!(
                    seen.insert(e.name.to_string(), e.attr.gfid).is_none(),
                    "seed {seed} round {round}: {} listed twice",
                    e.name
                );
            }
            let want: BTreeSet<&String> = model.keys().collect();
            let have: BTreeSet<&String> = seen.keys().collect();
            assert_eq!(have, want, "seed {seed} ({n} children) round {round}");
            for (name, g) in &model {
                assert_eq!(seen[name], *g, "seed {seed}: {name}'s GFID");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_while_names_come_and_go_gives_every_lasting_name_once() {
    for seed in 1..=25u64 {
        let mut rng = Rng(seed.wrapping_mul(0xd134_2543_de82_ef95) | 1);
        let n = 2 + rng.below(4) as usize;
        let (_cluster, top) = setup(n, &[]);
        let d = mkdir(&top, Gfid::ROOT, "d").await;
        let lasting = populate(&top, d, &mut rng).await;
        let mut transient: Vec<String> = Vec::new();
        let mut k = 0u64;
        let top2 = top.clone();
        let got = list_random(&top, d, &mut rng, async |rng: &mut Rng| {
            for _ in 0..rng.below(4) {
                if !transient.is_empty() && rng.below(2) == 0 {
                    let i = rng.below(transient.len() as u64) as usize;
                    let name = transient.swap_remove(i);
                    top2.unlink(&Ctx::root(), Loc::new(d, name.as_str()))
                        .await
                        .expect("unlink");
                } else {
                    k += 1;
                    let name = format!("t{k}");
                    create_with(&top2, d, &name, b"").await;
                    transient.push(name);
                }
            }
        })
        .await;
        let mut seen = BTreeSet::new();
        for e in &got {
            assert!(
                seen.insert(e.name.to_string()),
                "seed {seed}: {} listed twice",
                e.name
            );
        }
        for name in lasting.keys() {
            assert!(seen.contains(name), "seed {seed}: lasting {name} missing");
        }
        for name in &seen {
            assert!(
                lasting.contains_key(name) || name.starts_with('t'),
                "seed {seed}: unknown {name}"
            );
        }
    }
}

/// A leaf whose listing cookies are 63-bit values, as ext4's hashed `d_off`.
struct BigOffsets {
    children: Vec<Subvol>,
}

const BIG: u64 = 1 << 62;

impl Translator for BigOffsets {
    const TYPE: &'static str = "test/big-offsets";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(BigOffsets {
            children: init.children,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        let inner = if offset == 0 {
            0
        } else if offset & BIG == 0 || offset & 0xff != 0x5a {
            return Err(Errno::EINVAL); // a cookie this leaf never gave
        } else {
            (offset & !BIG) >> 8
        };
        let mut v = self.children[0].readdirp(cx, fd, inner, size).await?;
        for e in v.iter_mut() {
            e.next_offset = BIG | (e.next_offset << 8) | 0x5a;
        }
        Ok(v)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_with_63_bit_offsets_list_exactly_through_indirect_cookies() {
    let leaves: Vec<Subvol> = (0..4)
        .map(|_| xlfs_testkit::build::build::<BigOffsets>(&[], vec![MemLeaf::new()]))
        .collect();
    let cluster = MockCluster::with_leaves(leaves);
    let top = fresh(&cluster, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let mut rng = Rng(77);
    let mut model = populate(&top, d, &mut rng).await;
    for k in 0..60 {
        let name = format!("extra{k}");
        model.insert(name.clone(), create_with(&top, d, &name, b"").await);
    }
    for seed in 0..5 {
        let mut rng = Rng(1000 + seed);
        let got = list_random(&top, d, &mut rng, async |_| {}).await;
        let names: Vec<String> = got.iter().map(|e| e.name.to_string()).collect();
        let set: BTreeSet<&String> = names.iter().collect();
        assert_eq!(set.len(), names.len(), "no duplicates");
        assert_eq!(set, model.keys().collect::<BTreeSet<_>>());
        assert!(
            got.iter().any(|e| e.next_offset >> 63 == 1),
            "indirect cookies were used"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_without_a_copy_of_the_directory_lists_nothing_instead_of_failing() {
    let (cluster, top) = setup(3, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = {
        let mut s = Vec::new();
        for i in 0..3 {
            s.push(leaf_slice(&cluster, i, d).await);
        }
        xlfs_dht::Layout::merge(&s).expect("layout")
    };
    let mut want = BTreeSet::new();
    for k in 0..30 {
        let name = format!("n{k}");
        if layout.hashed(&name) != 2 {
            create_with(&top, d, &name, b"").await;
            want.insert(name);
        }
    }
    cluster
        .leaf(2)
        .rmdir(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("leaf rmdir");
    // A second client opens the directory by GFID (no lookup that would make the copy).
    let other = fresh(&cluster, &[]);
    let mut rng = Rng(5);
    let got = list_random(&other, d, &mut rng, async |_| {}).await;
    let names: BTreeSet<String> = got.iter().map(|e| e.name.to_string()).collect();
    assert_eq!(names, want);
}

/// Readdirp calls each leaf got since the last call (the calls are forgotten).
fn readdirps_since(cluster: &MockCluster) -> Vec<usize> {
    calls_since(cluster, xlator_api::Fop::Readdirp)
}

/// A small directory over 4 children comes back whole from the first call, in two waves of
/// parallel requests: every child's first page at once, then every child's next (empty) page;
/// the call after it answers the end from what was read ahead. Before, each child's two pages
/// were read one after another (8 round trips in a row, 5 calls), and entries after the first
/// call's cost the kernel a lookup each on a mount that asks readdirplus only for a
/// listing's first call (`xlfs-mount --readdirplus-auto`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_directory_over_four_children_comes_whole_in_one_call_of_two_parallel_waves() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let mut want = BTreeSet::new();
    for c in 0..4 {
        let name = common::name_on(&layout, &format!("f{c}-"), c);
        create_with(&top, d, &name, b"").await;
        want.insert(name);
    }
    let f = fd(next_fd_id(), d, libc::O_RDONLY);
    top.opendir(&root(), f).await.expect("opendir");
    readdirps_since(&cluster);

    // The first page's requests are all in flight at once: child 0's page is held back and
    // the other children are asked anyway.
    for i in 0..4 {
        cluster.handle(i).hold(xlator_api::Fop::Readdirp);
    }
    let first = tokio::spawn({
        let top = top.clone();
        async move { top.readdirp(&root(), f, 0, 4096).await }
    });
    for i in 0..4 {
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            cluster.handle(i).wait_for(xlator_api::Fop::Readdirp, 1),
        )
        .await
        .unwrap_or_else(|_| panic!("child {i} not asked while child 0's page is held"));
    }
    for i in 0..4 {
        cluster.handle(i).open_gate(xlator_api::Fop::Readdirp);
    }
    let page = first.await.expect("join").expect("readdirp");
    assert_eq!(
        readdirps_since(&cluster),
        vec![2; 4],
        "two waves: every child's first page, then every child's next"
    );
    let got: BTreeSet<String> = page
        .iter()
        .map(|e| e.name.to_string())
        .filter(|n| n != "." && n != "..")
        .collect();
    assert_eq!(got, want, "the whole directory in the first call");
    let off = page.last().expect("entries").next_offset;
    let end = top.readdirp(&root(), f, off, 4096).await.expect("readdirp");
    assert!(end.is_empty());
    assert_eq!(
        readdirps_since(&cluster),
        vec![0; 4],
        "the end was read ahead"
    );
    top.releasedir(&root(), f).await.expect("releasedir");
}

/// A listing from the start again (a rewind) does not use the pages read ahead before: a name
/// removed since does not show, one made since does; and a held page is never used for another
/// caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_and_another_caller_are_not_answered_from_pages_read_ahead() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    // 40 names on child 0 (more than one small page), one on every other child.
    let mut want = BTreeSet::new();
    for k in 0..40 {
        let a = common::name_on(&layout, &format!("z{k}-"), 0);
        create_with(&top, d, &a, b"").await;
        want.insert(a);
    }
    for c in 1..4 {
        let a = common::name_on(&layout, "a", c);
        create_with(&top, d, &a, b"").await;
        want.insert(a);
    }
    let f = fd(next_fd_id(), d, libc::O_RDONLY);
    top.opendir(&root(), f).await.expect("opendir");
    let names = async |cx: &Ctx, size: u32| {
        let mut out = BTreeSet::new();
        let mut off = 0;
        loop {
            let page = top.readdirp(cx, f, off, size).await.expect("readdirp");
            let Some(last) = page.last() else { break };
            off = last.next_offset;
            out.extend(
                page.iter()
                    .map(|e| e.name.to_string())
                    .filter(|n| n != "." && n != ".."),
            );
        }
        out
    };
    // A first call that child 0's page fills: the other children's first pages are held.
    top.readdirp(&root(), f, 0, 2000).await.expect("readdirp");
    // Child 3's held page is stale now: its name goes, and a new one comes.
    let gone = common::name_on(&layout, "a", 3);
    top.unlink(&root(), Loc::new(d, gone.as_str()))
        .await
        .expect("unlink");
    want.remove(&gone);
    let b = common::name_on(&layout, "b", 3);
    create_with(&top, d, &b, b"").await;
    want.insert(b);
    assert_eq!(
        names(&root(), 2000).await,
        want,
        "a listing from the start is fresh"
    );

    // Pages read ahead for root; another user goes on with the listing: read again for them.
    let page = top.readdirp(&root(), f, 0, 2000).await.expect("readdirp");
    readdirps_since(&cluster);
    let user = Ctx::builder(1000, 1000).build();
    let mut off = page.last().expect("entries").next_offset;
    loop {
        let page = top.readdirp(&user, f, off, 2000).await.expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
    }
    let calls = readdirps_since(&cluster);
    assert!(
        calls[1..].iter().all(|n| *n >= 2),
        "children 1-3 read again for the user, not only ahead: {calls:?}"
    );
    top.releasedir(&root(), f).await.expect("releasedir");
}

/// A child lost in the middle of a listing whose next pages were read ahead: the listing goes
/// on without it (as GlusterFS's does: a child down is left out, its files cannot be reached
/// anyway; the pages read ahead from it are dropped with it), giving every name of the other
/// children once, never one twice, never hanging; once the child is back a new listing gives
/// every name once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_lost_mid_listing_is_left_out_and_the_next_listing_is_whole() {
    let (cluster, top) = setup(4, &[]);
    let d = mkdir(&top, Gfid::ROOT, "d").await;
    let layout = leaf_layout(&cluster, d).await;
    let mut want = BTreeSet::new();
    for c in 0..4 {
        for k in 0..30 {
            let a = common::name_on(&layout, &format!("c{c}-{k}-"), c);
            create_with(&top, d, &a, b"").await;
            want.insert(a);
        }
    }
    let list = async |f: Fd| -> (Vec<String>, Result<(), Errno>) {
        let mut out = Vec::new();
        let mut off = 0;
        loop {
            let page = match top.readdirp(&root(), f, off, 1500).await {
                Ok(p) => p,
                Err(e) => return (out, Err(e)),
            };
            let Some(last) = page.last() else {
                return (out, Ok(()));
            };
            off = last.next_offset;
            out.extend(
                page.iter()
                    .map(|e| e.name.to_string())
                    .filter(|n| n != "." && n != ".."),
            );
        }
    };
    let f = fd(next_fd_id(), d, libc::O_RDONLY);
    top.opendir(&root(), f).await.expect("opendir");
    // The first page comes from child 0; the next children's first pages are read ahead.
    let first = top.readdirp(&root(), f, 0, 1500).await.expect("readdirp");
    let mut got: Vec<String> = first
        .iter()
        .map(|e| e.name.to_string())
        .filter(|n| n != "." && n != "..")
        .collect();
    cluster.down(2);
    let mut off = first.last().expect("entries").next_offset;
    let end = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match top.readdirp(&root(), f, off, 1500).await {
                Ok(p) if p.is_empty() => return Ok(()),
                Ok(p) => {
                    off = p.last().expect("entries").next_offset;
                    got.extend(
                        p.iter()
                            .map(|e| e.name.to_string())
                            .filter(|n| n != "." && n != ".."),
                    );
                }
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the listing hung with a child lost");
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "a name twice");
    assert_eq!(end, Ok(()), "the listing goes on without the lost child");
    let reachable: BTreeSet<String> = want
        .iter()
        .filter(|n| !n.starts_with("c2-"))
        .cloned()
        .collect();
    assert_eq!(
        got.iter().cloned().collect::<BTreeSet<_>>(),
        reachable,
        "every name of the children up, none of the lost one's (its pages read ahead dropped)"
    );
    top.releasedir(&root(), f).await.expect("releasedir");
    cluster.up(2);
    let f = fd(next_fd_id(), d, libc::O_RDONLY);
    top.opendir(&root(), f).await.expect("opendir");
    let (names, end) = list(f).await;
    assert_eq!(end, Ok(()));
    assert_eq!(names.len(), want.len(), "a name twice or missing");
    assert_eq!(names.into_iter().collect::<BTreeSet<_>>(), want);
    top.releasedir(&root(), f).await.expect("releasedir");
}
