//! Listings through replicate (readdirp): each entry's attributes are the good copy's, never
//! those of a copy that missed writes, also right after the child that missed them returns.

mod common;

use common::*;
use xlator_api::{DirEntry, Fd, FdId, Gfid, Subvol};
use xlfs_testkit::MockCluster;

async fn list(top: &Subvol, id: u64) -> Vec<DirEntry> {
    let d = Fd {
        id: FdId(id),
        gfid: Gfid::ROOT,
        flags: libc::O_RDONLY | libc::O_DIRECTORY,
    };
    top.opendir(&root(), d).await.expect("opendir");
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let batch = top.readdirp(&root(), d, off, 4096).await.expect("readdirp");
        let Some(last) = batch.last() else { break };
        off = last.next_offset;
        out.extend(
            batch
                .into_iter()
                .filter(|e| e.name.as_str() != "." && e.name.as_str() != ".."),
        );
    }
    top.releasedir(&root(), d).await.expect("releasedir");
    out
}

/// Child 0 misses a 1,000-byte write of `f` (4 bytes before) while down, and comes back
/// without a heal.
async fn write_missed_by_child_0(c: &MockCluster, top: &Subvol, f: Fd) {
    c.down(0);
    write(top, f, 0, &[7u8; 1000])
        .await
        .expect("write with child 0 down");
    c.up(0);
    let stale = c.leaf(0).stat(&root(), f.gfid).await.expect("stat child 0");
    assert_eq!(stale.size, 4, "child 0 missed the write");
}

/// The size a listing through `top` (directory fd `id`) shows for `name`.
async fn listed_size(top: &Subvol, id: u64, name: &str) -> u64 {
    list(top, id)
        .await
        .iter()
        .find(|e| e.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} listed"))
        .attr
        .size
}

/// Child 0 (the one listings read from: read-policy first-up) misses a write while down and
/// comes back before any heal: the listing shows the size the write left, not child 0's.
#[tokio::test]
async fn a_listing_shows_the_good_copys_attributes_after_a_child_returns() {
    let (c, top) = setup(2, &[("read-policy", "first-up"), ("quorum-type", "none")]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"base").await.expect("base write");
    write_missed_by_child_0(&c, &top, f).await;
    assert_eq!(
        listed_size(&top, 50, "f").await,
        1000,
        "the listing shows the stale copy's size"
    );
}

/// Another client over the same bricks, which knew nothing of the file before: the counters
/// the good copy keeps say child 0's copy is stale, so its listing does not show it either.
#[tokio::test]
async fn a_listing_by_another_client_shows_the_good_copys_attributes() {
    let (c, top) = setup(2, &[("quorum-type", "none")]);
    let f = create(&top, "f", 1).await;
    write(&top, f, 0, b"base").await.expect("base write");
    write_missed_by_child_0(&c, &top, f).await;
    let (_c2, top2) = second_client(&c, &[("read-policy", "first-up"), ("quorum-type", "none")]);
    assert_eq!(
        listed_size(&top2, 60, "f").await,
        1000,
        "the listing shows the stale copy's size"
    );
    // Known now: a second listing does not need to ask again, and still answers right.
    assert_eq!(listed_size(&top2, 61, "f").await, 1000);
}

/// Files this client made are known good on every child: listing them asks nothing more of
/// the children than the listing itself (one readdirp child, no per-entry getxattrs).
#[tokio::test]
async fn a_listing_of_files_this_client_made_sends_no_per_entry_requests() {
    let (c, top) = setup(2, &[("read-policy", "first-up"), ("quorum-type", "none")]);
    for k in 0..20 {
        create(&top, &format!("f{k}"), 100 + k).await;
    }
    let calls = |c: &MockCluster| (0..c.len()).map(|i| c.calls(i).len()).sum::<usize>();
    let before = calls(&c);
    let listed = list(&top, 70).await;
    assert_eq!(listed.len(), 20);
    let during = calls(&c) - before;
    assert!(
        during <= 8,
        "{during} calls to the children for one listing of 20 made files:\n{}",
        c.log().join("\n")
    );
}

/// Files this client wrote and whose holds still wait for their post-op (`tar x` then
/// `rm -rf` at once) carry the holds' pre-op counters on every child: the listing takes the
/// hold's word for them instead of looking each one up on every child. A file whose hold
/// saw a write fail on the child listed from is still looked up, and shows the good
/// copy's size.
#[tokio::test]
async fn a_listing_of_files_under_this_clients_idle_holds_sends_no_per_entry_requests() {
    let (c, top) = setup_on_locks(
        2,
        &[
            ("eager-lock", "on"),
            ("post-op-delay", "60s"),
            ("read-policy", "first-up"),
            ("quorum-type", "none"),
        ],
    );
    let mut files = Vec::new();
    for k in 0..20 {
        let f = create(&top, &format!("f{k}"), 100 + k).await;
        write(&top, f, 0, b"data").await.expect("write");
        top.release(&root(), f).await.expect("release");
        files.push(f);
    }
    for f in &files {
        assert!(
            !all_zero(&c, f.gfid).await,
            "a hold's pre-op counters are on the children while it waits"
        );
    }
    let calls = |c: &MockCluster| (0..c.len()).map(|i| c.calls(i).len()).sum::<usize>();
    let before = calls(&c);
    let listed = list(&top, 70).await;
    assert_eq!(listed.len(), 20);
    assert!(listed.iter().all(|e| e.attr.size == 4));
    let during = calls(&c) - before;
    assert!(
        during <= 8,
        "{during} calls to the children for one listing of 20 held files:\n{}",
        c.log().join("\n")
    );

    // Child 0, listed from, misses a write of a held file: its counters are no longer the
    // word of a hold in which child 0 took every write.
    let g = files[3];
    let g = fd(500, g.gfid);
    top.open(&root(), g).await.expect("open");
    write_missed_by_child_0(&c, &top, g).await;
    assert_eq!(
        listed_size(&top, 71, "f3").await,
        1000,
        "the listing shows the stale copy's size"
    );
}

/// A page whose entries all had to be looked up and were all gone by then (another client
/// removed them after the listing was read) is not answered empty, which would end the
/// caller's listing: the listing reads on and reaches the names after them.
#[tokio::test]
async fn a_listing_reads_past_a_page_whose_entries_all_went() {
    let (c, top) = setup(2, &[("quorum-type", "none")]);
    for name in ["f1", "f2", "f3"] {
        let f = create(&top, name, 1).await;
        write(&top, f, 0, b"base").await.expect("base write");
        write_missed_by_child_0(&c, &top, f).await;
    }
    create(&top, "g", 1).await;
    let (c2, top2) = second_client(&c, &[("read-policy", "first-up"), ("quorum-type", "none")]);
    let d = Fd {
        id: FdId(60),
        gfid: Gfid::ROOT,
        flags: libc::O_RDONLY | libc::O_DIRECTORY,
    };
    top2.opendir(&root(), d).await.expect("opendir");
    // The lookups of the three stale entries find them gone on both children.
    for i in 0..2 {
        for _ in 0..3 {
            c2.handle(i)
                .fail(xlator_api::Fop::Lookup, xlator_api::Errno::ENOENT);
        }
    }
    let mut names = Vec::new();
    let mut off = 0;
    loop {
        // Pages of about three entries: the first holds f1..f3 only.
        let page = top2.readdirp(&root(), d, off, 3).await.expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
        names.extend(
            page.iter()
                .map(|e| e.name.to_string())
                .filter(|n| n != "." && n != ".."),
        );
    }
    assert_eq!(names, ["g"]);
}
