//! favorite-child-policy: a data or metadata split-brain made by two clients, each seeing a
//! different child down while it writes, healed on the next lookup from the copy the policy
//! picks; with `none` or a tie, EIO and nothing changed.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Errno, Fd, FdId, Gfid, Loc, SetAttr, Subvol, TimeSet, Timespec};
use xlfs_afr::Replicate;
use xlfs_testkit::MockCluster;
use xlfs_testkit::build::options_for;

/// The options of the first client (as `setup` gives them, plus `set`).
fn opts<'a>(set: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut o = vec![
        ("background-self-heal-count", "0"),
        ("eager-lock", "off"),
        ("quorum-type", "none"),
    ];
    o.extend_from_slice(set);
    o
}

async fn open(top: &Subvol, gfid: Gfid, id: u64) -> Fd {
    let f = Fd {
        id: FdId(id),
        gfid,
        flags: libc::O_RDWR,
    };
    top.open(&root(), f).await.expect("open");
    f
}

/// Two copies (or three, `n`), replica 2 or 3: client A writes `a` at 0 while the children
/// in `b_side` are down for it, then client B writes `b` at 0 while the others are down for
/// it. Every copy ends accused by another: a data split-brain. Returns the file's fd for A.
async fn data_split(
    c: &MockCluster,
    top_a: &Subvol,
    top_b: &Subvol,
    c2: &MockCluster,
    b_side: &[usize],
    a: &[u8],
    b: &[u8],
) -> Fd {
    let f = create(top_a, "f", 1).await;
    write(top_a, f, 0, b"base").await.expect("base write");
    for &i in b_side {
        c.down(i);
    }
    write(top_a, f, 0, a).await.expect("A writes");
    let a_side: Vec<usize> = (0..c.len()).filter(|i| !b_side.contains(i)).collect();
    for &i in &a_side {
        c2.down(i);
    }
    // Later times for B's copies (mtime and ctime), whatever the clock's resolution.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let fb = open(top_b, f.gfid, 2).await;
    write(top_b, fb, 0, b).await.expect("B writes");
    for i in 0..c.len() {
        c.up(i);
        c2.up(i);
    }
    // It is a split-brain: every copy accused.
    for j in 0..c.len() {
        let mut accused = false;
        for i in (0..c.len()).filter(|&i| i != j) {
            accused |= counters(c, i, f.gfid, j).await.0[0] > 0;
        }
        assert!(accused, "copy {j} accused");
    }
    f
}

async fn lookup_f(top: &Subvol) -> Result<(), Errno> {
    top.lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .map(drop)
}

async fn read_all(top: &Subvol, f: Fd) -> Result<Vec<u8>, Errno> {
    top.readv(&root(), f, 0, 1 << 20)
        .await
        .map(|r| r.data.as_slice().to_vec())
}

/// `data` as the file reads through `top`, on every leaf, with every counter zero.
async fn healed_to(c: &MockCluster, top: &Subvol, f: Fd, data: &[u8]) {
    assert_eq!(
        read_all(top, f).await.as_deref(),
        Ok(data),
        "read after heal"
    );
    for i in 0..c.len() {
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(data),
            "copy {i} after heal"
        );
    }
    assert!(all_zero(c, f.gfid).await, "counters zero after heal");
}

/// Nothing was resolved: reads are EIO, each copy keeps its own content.
async fn still_split(c: &MockCluster, top: &Subvol, f: Fd, copies: &[&[u8]]) {
    assert_eq!(
        lookup_f(top).await,
        Ok(()),
        "lookup of a data split-brain answers"
    );
    assert_eq!(read_all(top, f).await, Err(Errno::EIO));
    for (i, want) in copies.iter().enumerate() {
        assert_eq!(
            leaf_content(c.leaf(i), f.gfid).await.as_deref(),
            Some(*want),
            "copy {i} untouched"
        );
    }
    assert!(!all_zero(c, f.gfid).await, "counters untouched");
}

/// A's copy (child 0) is the larger and older; B's (child 1) the smaller and newer.
fn a_b() -> (Vec<u8>, Vec<u8>) {
    (vec![b'a'; 100], vec![b'b'; 50])
}

/// What A's write leaves on child 0, and B's on child 1 (both over "base").
fn copies(a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let over = |w: &[u8]| {
        let mut v = b"base".to_vec();
        if v.len() < w.len() {
            v.resize(w.len(), 0);
        }
        v[..w.len()].copy_from_slice(w);
        v
    };
    (over(a), over(b))
}

async fn two_clients(policy: &str) -> (MockCluster, Subvol, MockCluster, Subvol) {
    let set = [("favorite-child-policy", policy), ("quorum-type", "none")];
    let (c, top_a) = setup(2, &set);
    let (c2, top_b) = second_client(&c, &set);
    (c, top_a, c2, top_b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_policy_heals_a_data_split_brain_from_the_largest_copy() {
    let (c, top_a, c2, top_b) = two_clients("size").await;
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    lookup_f(&top_a).await.expect("lookup heals");
    let (ca, _) = copies(&a, &b);
    healed_to(&c, &top_a, f, &ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtime_policy_heals_from_the_newest_copy() {
    let (c, top_a, c2, top_b) = two_clients("mtime").await;
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    lookup_f(&top_a).await.expect("lookup heals");
    // B wrote last: its copy wins although it is the smaller.
    let (_, cb) = copies(&a, &b);
    healed_to(&c, &top_a, f, &cb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctime_policy_heals_from_the_newest_change_not_the_newest_mtime() {
    let (c, top_a, c2, top_b) = two_clients("ctime").await;
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    // Child 0's copy gets an old mtime (as `touch -d` would), which moves its ctime to now:
    // the newest mtime is child 1's, the newest ctime child 0's.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let old = SetAttr {
        mtime: TimeSet::At(Timespec { sec: 1000, nsec: 0 }),
        ..SetAttr::default()
    };
    c.leaf(0)
        .setattr(&root(), f.gfid, old)
        .await
        .expect("old mtime on child 0");
    lookup_f(&top_a).await.expect("lookup heals");
    let (ca, _) = copies(&a, &b);
    healed_to(&c, &top_a, f, &ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_policy_heals_from_the_two_agreeing_copies_of_three() {
    let set = [
        ("favorite-child-policy", "majority"),
        ("quorum-type", "none"),
    ];
    let (c, top_a) = setup(3, &set);
    let (c2, top_b) = second_client(&c, &set);
    let f = create(&top_a, "f", 1).await;
    write(&top_a, f, 0, b"base").await.expect("base");
    c.down(2);
    let a = vec![b'a'; 30];
    write(&top_a, f, 0, &a).await.expect("A writes to 0 and 1");
    // The same mtime on both (the bricks stamp a write at slightly different times).
    let same = SetAttr {
        mtime: TimeSet::At(Timespec { sec: 5000, nsec: 0 }),
        ..SetAttr::default()
    };
    top_a
        .setattr(&root(), f.gfid, same)
        .await
        .expect("touch -d");
    c2.down(0);
    c2.down(1);
    let fb = open(&top_b, f.gfid, 2).await;
    write(&top_b, fb, 0, &[b'b'; 80])
        .await
        .expect("B writes to 2");
    for i in 0..3 {
        c.up(i);
        c2.up(i);
    }
    assert_eq!(read_all(&top_b, fb).await, Err(Errno::EIO), "a split-brain");
    lookup_f(&top_a).await.expect("lookup heals");
    // Child 2's copy was the largest and the newest: only the majority rule picks 0 and 1.
    let (ca, _) = copies(&a, b"");
    healed_to(&c, &top_a, f, &ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_policy_none_a_split_brain_stays_eio_and_unchanged() {
    let (c, top_a, c2, top_b) = two_clients("none").await;
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    let (ca, cb) = copies(&a, &b);
    still_split(&c, &top_a, f, &[&ca, &cb]).await;
    // A heal on request (the heal command's hook) does not resolve it either.
    let r = top_a
        .getxattr(&root(), f.gfid, "replica.heal".into())
        .await
        .map(drop);
    assert_eq!(r, Err(Errno::EIO));
    still_split(&c, &top_a, f, &[&ca, &cb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_policy_with_a_tie_picks_nothing() {
    let (c, top_a, c2, top_b) = two_clients("size").await;
    let (a, b) = (vec![b'a'; 60], vec![b'b'; 60]);
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    let (ca, cb) = copies(&a, &b);
    still_split(&c, &top_a, f, &[&ca, &cb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfiguring_none_to_size_heals_on_the_next_lookup() {
    let (c, top_a, c2, top_b) = two_clients("none").await;
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    let (ca, cb) = copies(&a, &b);
    still_split(&c, &top_a, f, &[&ca, &cb]).await;
    top_a
        .reconfigure(options_for::<Replicate>(&opts(&[(
            "favorite-child-policy",
            "size",
        )])))
        .expect("reconfigure");
    lookup_f(&top_a).await.expect("lookup heals");
    healed_to(&c, &top_a, f, &ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_split_brain_is_healed_by_ctime_and_lookup_answers() {
    let (c, top_a, c2, top_b) = two_clients("ctime").await;
    let f = create(&top_a, "f", 1).await;
    let mode = |perm| SetAttr {
        perm: ROption::RSome(perm),
        ..SetAttr::default()
    };
    c.down(1);
    top_a
        .setattr(&root(), f.gfid, mode(0o600))
        .await
        .expect("A chmods");
    c2.down(0);
    std::thread::sleep(std::time::Duration::from_millis(5));
    top_b
        .setattr(&root(), f.gfid, mode(0o640))
        .await
        .expect("B chmods later");
    for i in 0..2 {
        c.up(i);
        c2.up(i);
    }
    // Without a policy this lookup is EIO (see the next test); with ctime it heals from B's.
    let e = top_a
        .lookup(&root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup heals and answers");
    assert_eq!(e.attr.perm, 0o640);
    for i in 0..2 {
        let a = c.leaf(i).stat(&root(), f.gfid).await.expect("stat");
        assert_eq!(a.perm, 0o640, "mode on copy {i}");
    }
    assert!(all_zero(&c, f.gfid).await, "counters zero");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_split_brain_without_policy_fails_lookup_with_eio() {
    let (c, top_a, c2, top_b) = two_clients("none").await;
    let f = create(&top_a, "f", 1).await;
    let mode = |perm| SetAttr {
        perm: ROption::RSome(perm),
        ..SetAttr::default()
    };
    c.down(1);
    top_a
        .setattr(&root(), f.gfid, mode(0o600))
        .await
        .expect("A chmods");
    c2.down(0);
    top_b
        .setattr(&root(), f.gfid, mode(0o640))
        .await
        .expect("B chmods");
    for i in 0..2 {
        c.up(i);
        c2.up(i);
    }
    assert_eq!(lookup_f(&top_a).await, Err(Errno::EIO));
    let perms = [0o600, 0o640];
    for (i, p) in perms.iter().enumerate() {
        let a = c.leaf(i).stat(&root(), f.gfid).await.expect("stat");
        assert_eq!(a.perm, *p, "mode on copy {i} untouched");
    }
    assert!(!all_zero(&c, f.gfid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heal_request_of_the_heal_command_resolves_by_policy_too() {
    let (c, top_a, c2, top_b) = two_clients("size").await;
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    let r = top_a
        .getxattr(&root(), f.gfid, "replica.heal".into())
        .await
        .map(|v| v.as_slice().to_vec());
    assert_eq!(r.as_deref(), Ok(&b"healed"[..]));
    let (ca, _) = copies(&a, &b);
    healed_to(&c, &top_a, f, &ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_heal_resolves_after_the_lookup_answers() {
    let set = [
        ("favorite-child-policy", "size"),
        ("quorum-type", "none"),
        ("background-self-heal-count", "8"),
    ];
    let (c, top_a) = setup(2, &set);
    let (c2, top_b) = second_client(&c, &set);
    let (a, b) = a_b();
    let f = data_split(&c, &top_a, &top_b, &c2, &[1], &a, &b).await;
    lookup_f(&top_a).await.expect("lookup answers at once");
    let (ca, _) = copies(&a, &b);
    let mut healed = false;
    for _ in 0..200 {
        if all_zero(&c, f.gfid).await {
            healed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(healed, "background heal done within 2 s");
    healed_to(&c, &top_a, f, &ca).await;
}

/// The copies of `name` in the root on each leaf: (GFID, content).
async fn copies_of(c: &MockCluster, name: &str) -> Vec<Option<(Gfid, Vec<u8>)>> {
    let mut out = Vec::new();
    for i in 0..c.len() {
        let e = c.leaf(i).lookup(&root(), Loc::new(Gfid::ROOT, name)).await;
        out.push(match e {
            Ok(e) => Some((
                e.attr.gfid,
                leaf_content(c.leaf(i), e.attr.gfid)
                    .await
                    .unwrap_or_default(),
            )),
            Err(_) => None,
        });
    }
    out
}

/// Child `i`'s own copy of `name` in the root, with a GFID of its own, `data`, and a counter
/// accusing child `accused` (writes the others missed).
async fn own_copy(c: &MockCluster, i: usize, name: &str, data: &[u8], accused: usize) -> Gfid {
    let cx = root()
        .to_builder()
        .ext(&xlator_api::GfidReq(Gfid::random()))
        .build();
    let g = c
        .leaf(i)
        .mknod(&cx, Loc::new(Gfid::ROOT, name), libc::S_IFREG | 0o644, 0, 0)
        .await
        .expect("a copy of its own")
        .attr
        .gfid;
    let fd = open(c.leaf(i), g, 70 + i as u64).await;
    write(c.leaf(i), fd, 0, data).await.expect("its data");
    let blame = xlator_api::Xattr {
        name: key(c, accused).into(),
        value: xlator_api::Buf::from_vec(
            xlfs_afr::changelog::Counters([1, 0, 0]).encode().to_vec(),
        ),
    };
    c.leaf(i)
        .setxattr(&root(), g, blame, 0)
        .await
        .expect("its copy accuses");
    g
}

/// The GFID `name` in the root answers with through `top`, after a second lookup (the first
/// may meet the two GFIDs and heal).
async fn resolved_gfid(top: &Subvol, name: &str) -> Result<Gfid, Errno> {
    let _ = top.lookup(&root(), Loc::new(Gfid::ROOT, name)).await;
    top.lookup(&root(), Loc::new(Gfid::ROOT, name))
        .await
        .map(|e| e.attr.gfid)
}

/// One name made by two clients, each seeing the other's child down (a partition): two
/// GFIDs, and the root accusing the other child on each side (an entry split-brain). With
/// `size` the larger copy is kept on both children and the other replaced, and the name
/// answers; with `none` the lookup fails with EIO and both copies stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_policy_resolves_a_gfid_split_brain_of_a_file() {
    for policy in ["none", "size"] {
        let (c, top_a, c2, top_b) = two_clients(policy).await;
        c.down(1);
        let fa = create(&top_a, "g", 1).await;
        write(&top_a, fa, 0, &[b'a'; 1500]).await.expect("A writes");
        c2.down(0);
        let fb = create(&top_b, "g", 2).await;
        write(&top_b, fb, 0, &[b'b'; 700]).await.expect("B writes");
        c.up(1);
        c2.up(0);
        assert_ne!(fa.gfid, fb.gfid, "one name, two GFIDs");
        let last = resolved_gfid(&top_a, "g").await;
        let got = copies_of(&c, "g").await;
        if policy == "none" {
            assert_eq!(last, Err(Errno::EIO), "{policy}");
            assert_eq!(got[0], Some((fa.gfid, vec![b'a'; 1500])));
            assert_eq!(got[1], Some((fb.gfid, vec![b'b'; 700])));
            continue;
        }
        assert_eq!(
            last,
            Ok(fa.gfid),
            "{policy}: the name answers with the larger copy"
        );
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, Some((fa.gfid, vec![b'a'; 1500])), "copy {i}");
        }
        assert!(all_zero(&c, fa.gfid).await, "counters zero after heal");
    }
}

/// With a source directory (only child 0's root accuses), a sink's copy of another GFID that
/// holds writes of its own (it accuses child 0) is not replaced silently; with `size` the
/// larger copy wins even when it is the sink's: the source's copy is the one replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_policy_keeps_a_larger_sink_copy_over_the_source_s() {
    let (c, top) = setup(2, &opts(&[("favorite-child-policy", "size")]));
    c.down(1);
    let f = create(&top, "h", 1).await;
    write(&top, f, 0, &[b'a'; 300])
        .await
        .expect("write on child 0");
    c.up(1);
    // Child 1's own copy of h: another GFID, 900 bytes, accusing child 0.
    let other = own_copy(&c, 1, "h", &[b'b'; 900], 0).await;
    let last = resolved_gfid(&top, "h").await;
    assert_eq!(last, Ok(other), "the larger (sink's) copy answers");
    for (i, g) in copies_of(&c, "h").await.iter().enumerate() {
        assert_eq!(*g, Some((other, vec![b'b'; 900])), "copy {i}");
    }
}

/// `majority` keeps the GFID more than half of the children hold, however large the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_policy_keeps_the_gfid_most_children_hold() {
    let (c, top) = setup(3, &opts(&[("favorite-child-policy", "majority")]));
    c.down(2);
    let f = create(&top, "m", 1).await;
    write(&top, f, 0, b"two of three").await.expect("write");
    c.up(2);
    own_copy(&c, 2, "m", &[b'z'; 5000], 0).await;
    let last = resolved_gfid(&top, "m").await;
    assert_eq!(last, Ok(f.gfid));
    for (i, g) in copies_of(&c, "m").await.iter().enumerate() {
        assert_eq!(*g, Some((f.gfid, b"two of three".to_vec())), "copy {i}");
    }
}
