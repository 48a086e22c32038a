//! Split-brain and self-heal against MockCluster, and a model-based random test.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Errno, Gfid, GfidReq, Loc, SetAttr, Xattr};
use xlfs_afr::changelog::{Counters, Lanes};
use xlfs_testkit::FopCall;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_blame_is_split_brain_and_reads_fail_with_eio() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"abc").await.expect("write");
    let blame = |j: usize| Xattr {
        name: key(&c, j).into(),
        value: Buf::from_vec(Counters([1, 0, 0]).encode().to_vec()),
    };
    c.leaf(0)
        .setxattr(&root(), f.gfid, blame(1), 0)
        .await
        .expect("set");
    c.leaf(1)
        .setxattr(&root(), f.gfid, blame(0), 0)
        .await
        .expect("set");
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup still answers");
    assert_eq!(
        top.readv(&root(), f, 0, 10).await.map(drop),
        Err(Errno::EIO)
    );
    // Never resolved silently: the counters are untouched.
    assert_eq!(counters(&c, 0, f.gfid, 1).await, Counters([1, 0, 0]));
    assert_eq!(counters(&c, 1, f.gfid, 0).await, Counters([1, 0, 0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_gfids_for_one_name_fail_lookup_with_eio() {
    let (c, top) = setup(2, &[]);
    for i in 0..2 {
        let cx = root().to_builder().ext(&GfidReq(Gfid::random())).build();
        c.leaf(i)
            .mkdir(&cx, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .expect("mkdir");
    }
    assert_eq!(
        top.lookup(&root(), Loc::new(Gfid::ROOT, "d"))
            .await
            .map(drop),
        Err(Errno::EIO)
    );
}

/// What a brick killed between making a name and setting its GFID left (before such creates
/// were atomic on the brick), once a lookup there gave it a GFID of its own: with the parent
/// accusing that child, the lookup heals the parent, which replaces the copy by the source's
/// (an empty directory, a file) and the name answers. A copy that holds something the source
/// lacks (it accuses another child, or is a directory with names in it) stays a split-brain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_copy_with_another_gfid_is_replaced_when_the_parent_has_a_source() {
    let (c, top) = setup(2, &[]);
    let make = |i: usize, name: &'static str, dir: bool| {
        let leaf = c.leaf(i).clone();
        async move {
            let cx = root().to_builder().ext(&GfidReq(Gfid::random())).build();
            let loc = Loc::new(Gfid::ROOT, name);
            let e = if dir {
                leaf.mkdir(&cx, loc, 0o755, 0).await
            } else {
                leaf.mknod(&cx, loc, libc::S_IFREG | 0o644, 0, 0).await
            };
            e.expect("make").attr.gfid
        }
    };
    // The good copies, made through replicate while child 1 was down.
    c.down(1);
    let d = top
        .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o750, 0)
        .await
        .expect("mkdir d")
        .attr
        .gfid;
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"fsynced").await.expect("write f");
    let kept_dir = top
        .mkdir(&root(), Loc::new(Gfid::ROOT, "full"), 0o755, 0)
        .await
        .expect("mkdir full")
        .attr
        .gfid;
    let kept_file = create(&top, "accusing", 2).await;
    c.up(1);
    // Child 1's own copies of those names, with GFIDs of their own.
    make(1, "d", true).await;
    make(1, "f", false).await;
    let full = make(1, "full", true).await;
    let cx = root().to_builder().ext(&GfidReq(Gfid::random())).build();
    c.leaf(1)
        .mkdir(&cx, Loc::new(full, "inside"), 0o755, 0)
        .await
        .expect("a name in child 1's full");
    let accusing = make(1, "accusing", false).await;
    let blame = Xattr {
        name: key(&c, 0).into(),
        value: Buf::from_vec(Counters([1, 0, 0]).encode().to_vec()),
    };
    c.leaf(1)
        .setxattr(&root(), accusing, blame, 0)
        .await
        .expect("child 1's copy accuses child 0");
    // The root accuses child 1 on child 0 (the creates it missed): child 0 is the source.
    assert_eq!(counters(&c, 0, Gfid::ROOT, 1).await.lane(Lanes::ENTRY), 4);
    let de = top
        .lookup(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("d answers once healed");
    assert_eq!(de.attr.gfid, d);
    let fe = top
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("f answers once healed");
    assert_eq!(fe.attr.gfid, f.gfid);
    assert_eq!(
        leaf_content(c.leaf(1), f.gfid).await.as_deref(),
        Some(&b"fsynced"[..])
    );
    for (name, want) in [("d", d), ("f", f.gfid)] {
        let e = c
            .leaf(1)
            .lookup(&root(), Loc::new(Gfid::ROOT, name))
            .await
            .expect("child 1");
        assert_eq!(e.attr.gfid, want, "{name} on child 1");
    }
    let d1 = c.leaf(1).stat(&root(), d).await.expect("d on child 1");
    assert_eq!(d1.perm, 0o750, "d's metadata healed too");
    for (name, theirs, ours) in [
        ("full", kept_dir, full),
        ("accusing", kept_file.gfid, accusing),
    ] {
        assert_eq!(
            top.lookup(&root(), Loc::new(Gfid::ROOT, name))
                .await
                .map(drop),
            Err(Errno::EIO),
            "{name} stays a split-brain"
        );
        let on = |i: usize| {
            let leaf = c.leaf(i).clone();
            async move {
                leaf.lookup(&root(), Loc::new(Gfid::ROOT, name))
                    .await
                    .expect("still there")
                    .attr
                    .gfid
            }
        };
        assert_eq!(
            (on(0).await, on(1).await),
            (theirs, ours),
            "{name} untouched"
        );
    }
    assert!(
        c.leaf(1)
            .lookup(&root(), Loc::new(full, "inside"))
            .await
            .is_ok()
    );
    // Reported by the lookups that met them; the replaced ones taken back.
    let listed = format!("{:?}", top.dump().get("split-brain"));
    for (name, still) in [
        ("d", false),
        ("f", false),
        ("full", true),
        ("accusing", true),
    ] {
        let entry = format!("\"{}/{name}\"", Gfid::ROOT);
        assert_eq!(listed.contains(&entry), still, "{name} in {listed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heal_after_a_child_returns_makes_contents_and_counters_equal() {
    let (c, top) = setup(2, &[("heal-chunk-size", "4KiB")]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"first").await.expect("write");
    c.down(1);
    let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    write(&top, f, 0, &big)
        .await
        .expect("write while 1 is down");
    let perm = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    top.setattr(&root(), f.gfid, perm).await.expect("chmod");
    let g = create(&top, "g", 2).await;
    write(&top, g, 0, b"new file").await.expect("write g");
    top.mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o700, 0)
        .await
        .expect("mkdir");
    c.up(1);
    // A lookup of the root heals its entries (g and d made on child 1 with their GFIDs,
    // then healed); a lookup of f heals its data and mode.
    top.lookup(&root(), Loc::new(Gfid::ROOT, ""))
        .await
        .expect("root");
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("f");
    assert_eq!(leaf_content(c.leaf(1), f.gfid).await, Some(big.clone()));
    assert_eq!(
        leaf_content(c.leaf(1), g.gfid).await.as_deref(),
        Some(&b"new file"[..])
    );
    let a1 = c.leaf(1).stat(&root(), f.gfid).await.expect("stat");
    assert_eq!(a1.perm, 0o600);
    let d1 = c
        .leaf(1)
        .lookup(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("d healed");
    let d0 = c
        .leaf(0)
        .lookup(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("d");
    assert_eq!((d1.attr.gfid, d1.attr.perm), (d0.attr.gfid, 0o700));
    for g in [Gfid::ROOT, f.gfid, g.gfid, d0.attr.gfid] {
        assert!(all_zero(&c, g).await, "counters of {g} settled");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_heal_compares_only_what_the_sink_had_and_leaves_its_holes_unwritten() {
    // 4 KiB chunks, 3 in flight: child 1 had chunk 0 and 1; while it was down chunk 0
    // changed and the file grew to 11 chunks, zeros but for its last.
    let (c, top) = setup(
        2,
        &[
            ("heal-chunk-size", "4KiB"),
            ("data-self-heal-window-size", "3"),
        ],
    );
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, &[7u8; 8192]).await.expect("write");
    c.down(1);
    write(&top, f, 0, &[8u8; 4096])
        .await
        .expect("rewrite chunk 0");
    write(&top, f, 10 * 4096, b"tail").await.expect("grow");
    c.up(1);
    let before = c.calls(1).len();
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup heals");
    let mut want = vec![8u8; 4096];
    want.extend_from_slice(&[7u8; 4096]);
    want.resize(10 * 4096, 0);
    want.extend_from_slice(b"tail");
    assert_eq!(leaf_content(c.leaf(1), f.gfid).await, Some(want));
    let heal = &c.calls(1)[before..];
    let compared: Vec<u64> = heal
        .iter()
        .filter_map(|call| match call {
            FopCall::Rchecksum { offset, .. } => Some(*offset),
            _ => None,
        })
        .collect();
    let mut written: Vec<u64> = heal
        .iter()
        .filter_map(|call| match call {
            FopCall::Writev { offset, .. } => Some(*offset),
            _ => None,
        })
        .collect();
    written.sort_unstable();
    let mut compared = compared;
    compared.sort_unstable();
    // Only the two chunks child 1 had are compared; of them only the changed one is
    // copied, and of the rest only the chunk with data: the zeros stay a hole.
    assert_eq!(compared, [0, 4096], "{:?}", c.log());
    assert_eq!(written, [0, 10 * 4096], "{:?}", c.log());
    assert!(all_zero(&c, f.gfid).await, "counters settled");
}

/// A small xorshift generator: the test is reproducible from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_writes_appends_creates_truncates_with_children_failing_match_a_model() {
    // Fixed seeds (reproducible), plus more when XLFS_AFR_SEEDS asks for a longer run.
    let extra: u64 = std::env::var("XLFS_AFR_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seeds = [0x9e37_79b9_7f4a_7c15u64, 42, 7777]
        .into_iter()
        .chain(1..=extra);
    for seed in seeds {
        // Over leaves that take locks themselves (separate lock, xattrop and unlock), and
        // over features/locks (locks taken and given with the changelog's xattrops).
        model_run(seed, false).await;
        model_run(seed, true).await;
    }
}

async fn model_run(seed: u64, on_locks: bool) {
    const FILES: usize = 4;
    let opts = [("eager-lock", "on"), ("post-op-delay", "20ms")];
    let (c, top) = if on_locks {
        setup_on_locks(3, &opts)
    } else {
        setup(3, &opts)
    };
    let mut rng = Rng(seed);
    // The model: each file's content (None: not created yet), and the open fd.
    let mut model: Vec<Option<Vec<u8>>> = vec![None; FILES];
    let mut fds = [None; FILES];
    for step in 0..150 {
        let up = (0..3).filter(|&i| !c.is_down(i)).count();
        let quorum = up >= 2;
        let k = rng.below(FILES as u64) as usize;
        let op = rng.below(10);
        match op {
            0 => {
                let i = rng.below(3) as usize;
                if c.is_down(i) { c.up(i) } else { c.down(i) }
            }
            1 | 2 if model[k].is_none() => {
                let r = top
                    .create(
                        &root(),
                        Loc::new(Gfid::ROOT, format!("f{k}")),
                        fd(100 + k as u64, Gfid::NULL),
                        0o644,
                        0,
                    )
                    .await;
                if quorum {
                    let e = r.unwrap_or_else(|e| panic!("seed {seed} step {step}: create: {e:?}"));
                    model[k] = Some(Vec::new());
                    fds[k] = Some(fd(100 + k as u64, e.attr.gfid));
                } else {
                    assert_eq!(r.map(drop), Err(Errno::EROFS), "seed {seed} step {step}");
                }
            }
            3 if model[k].is_some() => {
                let size = rng.below(3000);
                let f = fds[k].expect("open");
                let sa = SetAttr {
                    size: ROption::RSome(size),
                    ..SetAttr::default()
                };
                let r = top.setattr(&root(), f.gfid, sa).await;
                if up < 3 && matches!(r, Err(Errno::ENOTCONN | Errno::EIO)) {
                    // Every good copy is down: refused, nothing written anywhere.
                } else if quorum && r != Err(Errno::EROFS) {
                    r.unwrap_or_else(|e| panic!("seed {seed} step {step}: truncate: {e:?}"));
                    model[k].as_mut().expect("file").resize(size as usize, 0);
                } else {
                    assert_eq!(r.map(drop), Err(Errno::EROFS));
                }
            }
            9 if model[k].is_some() => {
                // An O_APPEND write: at the end of file as the good copies have it.
                let f = fds[k].expect("open");
                let len = 1 + rng.below(700) as usize;
                let byte = rng.below(256) as u8;
                let r = top
                    .writev(
                        &root(),
                        f,
                        0,
                        Buf::from_vec(vec![byte; len]),
                        libc::O_APPEND,
                    )
                    .await
                    .map(|w| w.written);
                if up < 3 && matches!(r, Err(Errno::ENOTCONN | Errno::EIO)) {
                } else if quorum && r != Err(Errno::EROFS) {
                    assert_eq!(r, Ok(len as u64), "seed {seed} step {step}: append");
                    let m = model[k].as_mut().expect("file");
                    m.resize(m.len() + len, byte);
                } else {
                    assert_eq!(r, Err(Errno::EROFS), "seed {seed} step {step}: append");
                }
            }
            _ if model[k].is_some() => {
                let f = fds[k].expect("open");
                let off = rng.below(4000);
                let len = 1 + rng.below(1500) as usize;
                let byte = rng.below(256) as u8;
                let r = write(&top, f, off, &vec![byte; len]).await;
                // EROFS is given before anything is written: also when enough children are
                // up but too few hold the file (made while the others were down, not healed).
                // ENOTCONN or EIO: every good copy is down, nothing written anywhere.
                if up < 3 && matches!(r, Err(Errno::ENOTCONN | Errno::EIO)) {
                } else if quorum && r != Err(Errno::EROFS) {
                    assert_eq!(r, Ok(len as u64), "seed {seed} step {step}");
                    let m = model[k].as_mut().expect("file");
                    let end = off as usize + len;
                    if m.len() < end {
                        m.resize(end, 0);
                    }
                    m[off as usize..end].fill(byte);
                } else {
                    assert_eq!(r, Err(Errno::EROFS), "seed {seed} step {step}");
                }
            }
            _ => {}
        }
        // Through replicate, every file reads as the model says (the children up now: the
        // step may have taken one down).
        let up = (0..3).filter(|&i| !c.is_down(i)).count();
        for (k, m) in model.iter().enumerate() {
            let (Some(m), Some(f)) = (m, fds[k]) else {
                continue;
            };
            if up == 0 {
                continue;
            }
            let r = top.readv(&root(), f, 0, 1 << 20).await;
            // With children down, every good copy may be among them: ENOTCONN, never stale
            // data.
            if up < 3 && r.as_ref().err() == Some(&Errno::ENOTCONN) {
                continue;
            }
            let got = r.unwrap_or_else(|e| panic!("seed {seed} step {step}: read f{k}: {e:?}"));
            assert_eq!(
                got.data.as_slice(),
                m.as_slice(),
                "seed {seed} step {step}: f{k}"
            );
        }
    }
    // Everyone back, holds ended, a crawl of lookups: every replica equals the model.
    for i in 0..3 {
        c.up(i);
    }
    for f in fds.iter().flatten() {
        // An fsync ends the file's hold first (a flush no longer does); its own answer may be
        // ENOTCONN where every child holding the fd went down meanwhile.
        let _ = top.fsync(&root(), *f, false).await;
    }
    // The directory's hold ends after its timer (a lookup leaves this client's own dirty
    // counts to it).
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    top.lookup(&root(), Loc::new(Gfid::ROOT, ""))
        .await
        .expect("root");
    for (k, m) in model.iter().enumerate() {
        if m.is_some() {
            top.lookup(&root(), Loc::new(Gfid::ROOT, format!("f{k}")))
                .await
                .expect("lookup");
        }
    }
    for (k, m) in model.iter().enumerate() {
        let (Some(m), Some(f)) = (m, fds[k]) else {
            continue;
        };
        for i in 0..3 {
            assert_eq!(
                leaf_content(c.leaf(i), f.gfid).await.as_deref(),
                Some(m.as_slice()),
                "seed {seed}: f{k} on child {i} after heal"
            );
        }
        assert!(all_zero(&c, f.gfid).await, "seed {seed}: counters of f{k}");
    }
    assert!(all_zero(&c, Gfid::ROOT).await, "seed {seed}: root counters");
}

/// A client killed inside a directory's transaction: every child dirty in the entry lane (the
/// pre-op), nobody accused (no post-op came), and a create that reached child 0 alone (the
/// new file carries its own born-held marks there). Every child is a source, yet they differ:
/// the heal merges them (as GlusterFS does when its dirty "witness" is set), making the name
/// on child 1 with its GFID and data, instead of settling the counters over the difference.
/// The same with a name only child 1 has: nothing is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_client_s_half_done_creates_are_merged_when_every_child_is_dirty() {
    let (c, top) = setup(2, &[]);
    let d = top
        .mkdir(&root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0)
        .await
        .expect("mkdir d")
        .attr
        .gfid;
    let mark = |j: usize, lanes: [u32; 3]| Xattr {
        name: key(&c, j).into(),
        value: Buf::from_vec(Counters(lanes).encode().to_vec()),
    };
    for i in 0..2 {
        c.leaf(i)
            .setxattr(&root(), d, mark(i, [0, 0, 1]), 0)
            .await
            .expect("dirty");
    }
    let mut made = Vec::new();
    for (i, name) in [(0, "half0"), (1, "half1")] {
        let g = Gfid::random();
        let cx = root().to_builder().ext(&GfidReq(g)).build();
        let f = fd(10 + i as u64, Gfid::NULL);
        c.leaf(i)
            .create(&cx, Loc::new(d, name), f, 0o644, 0)
            .await
            .expect("create on one child");
        let f = fd(10 + i as u64, g);
        c.leaf(i)
            .writev(&root(), f, 0, Buf::from_vec(name.as_bytes().to_vec()), 0)
            .await
            .expect("write");
        c.leaf(i)
            .setxattr(&root(), g, mark(i, [1, 1, 0]), 0)
            .await
            .expect("born-held marks");
        made.push((name, g));
    }
    let (_c2, other) = second_client(&c, &[]);
    other
        .lookup(&root(), Loc::new(Gfid::ROOT, "d"))
        .await
        .expect("lookup d");
    for &(name, g) in &made {
        for i in 0..2 {
            let e = c
                .leaf(i)
                .lookup(&root(), Loc::new(d, name))
                .await
                .unwrap_or_else(|e| panic!("{name} on child {i}: {e}"));
            assert_eq!(e.attr.gfid, g, "{name} on child {i}");
        }
        other
            .lookup(&root(), Loc::new(d, name))
            .await
            .expect("lookup the name");
        for i in 0..2 {
            assert_eq!(
                leaf_content(c.leaf(i), g).await.as_deref(),
                Some(name.as_bytes()),
                "{name}'s data on child {i}"
            );
        }
        assert!(all_zero(&c, g).await, "counters of {name} settled");
    }
    assert!(all_zero(&c, d).await, "counters of d settled");
}

/// A client killed inside a file's transaction: both children dirty in the data and metadata
/// lanes, nobody accused, and a write and a chmod that reached child 0 alone. Every child is a
/// source, yet the copies differ: the heal makes them equal (the largest copy is the source
/// for data, as GlusterFS picks) instead of settling the counters over the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_client_s_half_done_write_and_chmod_are_healed_when_every_child_is_dirty() {
    let (c, top) = setup(2, &[]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"before").await.expect("write");
    let g = f.gfid;
    let mark = |j: usize, lanes: [u32; 3]| Xattr {
        name: key(&c, j).into(),
        value: Buf::from_vec(Counters(lanes).encode().to_vec()),
    };
    for i in 0..2 {
        c.leaf(i)
            .setxattr(&root(), g, mark(i, [1, 1, 0]), 0)
            .await
            .expect("dirty");
    }
    let longer = b"before, and the write that reached child 0 only";
    c.leaf(0)
        .writev(&root(), f, 0, Buf::from_vec(longer.to_vec()), 0)
        .await
        .expect("write on child 0");
    let perm = SetAttr {
        perm: ROption::RSome(0o600),
        ..SetAttr::default()
    };
    c.leaf(0)
        .setattr(&root(), g, perm)
        .await
        .expect("chmod on child 0");
    let (_c2, other) = second_client(&c, &[]);
    other
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup f");
    for i in 0..2 {
        assert_eq!(
            leaf_content(c.leaf(i), g).await.as_deref(),
            Some(&longer[..]),
            "data on child {i}"
        );
    }
    let (a0, a1) = (
        c.leaf(0).stat(&root(), g).await.expect("stat 0"),
        c.leaf(1).stat(&root(), g).await.expect("stat 1"),
    );
    assert_eq!(a0.perm, a1.perm, "modes equal");
    assert!(all_zero(&c, g).await, "counters settled");
}
