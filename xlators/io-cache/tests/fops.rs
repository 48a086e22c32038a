//! performance/io-cache over a mock child: what reaches the child, when, and what comes back.

mod common;

use std::time::Duration;

use common::{PS, io_cache};
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Errno, Fop, Gfid, Loc, ReadReply, SetAttr, Subvol};
use xlfs_io_cache::IoCache;
use xlfs_testkit::build::options_for;
use xlfs_testkit::fixtures::{counter, fd, gfid, reads};
use xlfs_testkit::mock::{FopReply, MockChild, MockHandle};
use xlfs_testkit::remote::{Remote, byte, rd, rw};

fn expect(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(byte).collect()
}

async fn read(sv: &Subvol, f: xlator_api::Fd, offset: u64, size: u32) -> Vec<u8> {
    sv.readv(&Ctx::root(), f, offset, size)
        .await
        .unwrap_or_else(|e| panic!("readv {offset}+{size}: {e}"))
        .data
        .to_vec()
}

/// io-cache over a mock serving a remote file of `len` bytes; the file is looked up first.
async fn setup(len: u64, set: &[(&str, &str)]) -> (Subvol, MockHandle, Remote) {
    let (child, h) = MockChild::new();
    let remote = Remote::new(len);
    remote.serve(&h);
    let sv = io_cache(set, child);
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    h.take_calls();
    (sv, h, remote)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_read_of_a_page_does_not_reach_the_child() {
    let (sv, h, _) = setup(100_000, &[]).await;
    assert_eq!(read(&sv, rd(1), 100, 50).await, expect(100, 50));
    assert_eq!(reads(&h), vec![(0, PS as u32)], "one page-aligned fill");
    assert_eq!(read(&sv, rd(1), 0, 4096).await, expect(0, 4096));
    assert_eq!(
        read(&sv, rd(2), 4000, 96).await,
        expect(4000, 96),
        "another fd, same inode"
    );
    h.assert_calls(&[Fop::Readv]);
    // A read across pages fetches only the missing page and returns contiguous data.
    assert_eq!(read(&sv, rd(1), 4000, 5000).await, expect(4000, 5000));
    assert_eq!(reads(&h), vec![(0, 4096), (4096, 4096), (8192, 4096)]);
    assert_eq!((counter(&sv, "hits"), counter(&sv, "misses")), (3, 3));
    assert_eq!(counter(&sv, "cache_used"), 3 * PS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_read_without_lookup_revalidates_with_fstat() {
    let (child, h) = MockChild::new();
    Remote::new(10_000).serve(&h);
    let sv = io_cache(&[], child);
    assert_eq!(read(&sv, rd(1), 0, 10).await, expect(0, 10));
    h.assert_calls(&[Fop::Fstat, Fop::Readv]);
    assert_eq!(read(&sv, rd(1), 10, 10).await, expect(10, 10));
    h.assert_calls(&[Fop::Fstat, Fop::Readv]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revalidation_after_the_timeout_issues_fstat_and_drops_changed_files() {
    let (sv, h, remote) = setup(10_000, &[("cache-timeout", "300ms")]).await;
    read(&sv, rd(1), 0, 10).await;
    read(&sv, rd(1), 0, 10).await;
    h.assert_calls(&[Fop::Readv]);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(read(&sv, rd(1), 0, 10).await, expect(0, 10));
    h.assert_calls(&[Fop::Readv, Fop::Fstat]);
    // Another client changes the file: within the timeout the cache still answers.
    remote.write(0, b"NEW");
    assert_eq!(read(&sv, rd(1), 0, 3).await, expect(0, 3));
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(read(&sv, rd(1), 0, 3).await, b"NEW".to_vec());
    h.assert_calls(&[Fop::Readv, Fop::Fstat, Fop::Fstat, Fop::Readv]);
    assert_eq!(counter(&sv, "stale"), 1);
    assert_eq!(counter(&sv, "revalidations"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_mtime_or_size_in_stat_and_lookup_replies_drops_pages() {
    let (sv, h, remote) = setup(10_000, &[]).await;
    read(&sv, rd(1), 0, 10).await;
    sv.stat(&Ctx::root(), gfid(1)).await.expect("stat");
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(reads(&h).len(), 1, "unchanged attributes keep the page");
    remote.write(5000, b"x");
    sv.stat(&Ctx::root(), gfid(1)).await.expect("stat");
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(
        reads(&h).len(),
        2,
        "a new mtime in a stat reply drops the pages"
    );
    remote.write(9999, b"yy");
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(
        reads(&h).len(),
        3,
        "a new size in a lookup reply drops the pages"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_writes_invalidate_touched_pages_before_and_after() {
    let (sv, h, _) = setup(3 * PS, &[]).await;
    for p in 0..3 {
        read(&sv, rd(1), p * PS, 10).await;
    }
    let n = sv
        .writev(&Ctx::root(), rw(2), PS + 10, Buf::from("abc"), 0)
        .await
        .expect("writev");
    assert_eq!(n.written, 3);
    assert_eq!(read(&sv, rd(1), PS + 8, 6).await, {
        let mut v = expect(PS + 8, 6);
        v[2..5].copy_from_slice(b"abc");
        v
    });
    read(&sv, rd(1), 0, 10).await;
    read(&sv, rd(1), 2 * PS, 10).await;
    assert_eq!(
        reads(&h),
        vec![(0, 4096), (4096, 4096), (8192, 4096), (4096, 4096)],
        "only the written page is fetched again"
    );
    // O_APPEND lands wherever end of file is: the whole file goes.
    sv.writev(&Ctx::root(), rw(2), 0, Buf::from("z"), libc::O_APPEND)
        .await
        .expect("append");
    assert_eq!(counter(&sv, "pages"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_eof_drop_the_short_last_page() {
    let (sv, h, _) = setup(100, &[]).await;
    assert_eq!(read(&sv, rd(1), 0, 4096).await, expect(0, 100));
    // Extending far away leaves page 0 untouched but its end-of-file is gone.
    sv.writev(&Ctx::root(), rw(2), 3 * PS, Buf::from("t"), 0)
        .await
        .expect("writev");
    let all = read(&sv, rd(1), 0, 4096).await;
    assert_eq!(
        all.len(),
        4096,
        "the hole after the old EOF reads as zeroes, not EOF"
    );
    assert_eq!(reads(&h).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_and_o_trunc_drop_the_file() {
    let (sv, h, _) = setup(2 * PS, &[]).await;
    read(&sv, rd(1), 0, 10).await;
    let size = SetAttr {
        size: ROption::RSome(10),
        ..SetAttr::default()
    };
    let a = sv
        .setattr(&Ctx::root(), gfid(1), size)
        .await
        .expect("truncate");
    assert_eq!(a.size, 10);
    assert_eq!(read(&sv, rd(1), 0, 100).await, expect(0, 10));
    sv.fsetattr(
        &Ctx::root(),
        rw(3),
        SetAttr {
            size: ROption::RSome(5),
            ..SetAttr::default()
        },
    )
    .await
    .expect("ftruncate");
    assert_eq!(read(&sv, rd(1), 0, 100).await, expect(0, 5));
    h.on(Fop::Open, |_| {
        FopReply::Open(Ok(xlator_api::Opened::plain()))
    });
    sv.open(&Ctx::root(), fd(4, gfid(1), libc::O_RDWR | libc::O_TRUNC))
        .await
        .expect("open");
    assert_eq!(counter(&sv, "pages"), 0);
    assert_eq!(reads(&h).len(), 3);
}

/// An open answered with a backing file (FUSE passthrough) may be read and written around
/// the cache: the file's pages go, and the next read through the cache asks the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_with_a_backing_file_drops_the_files_pages() {
    let (sv, h, _) = setup(10_000, &[]).await;
    assert_eq!(read(&sv, rd(1), 0, 100).await, expect(0, 100));
    assert_eq!(read(&sv, rd(1), 0, 100).await, expect(0, 100));
    assert_eq!(reads(&h).len(), 1, "the second read was a hit");
    // Without a backing file the pages stay.
    h.on(Fop::Open, |_| {
        FopReply::Open(Ok(xlator_api::Opened::plain()))
    });
    sv.open(&Ctx::root(), fd(5, gfid(1), libc::O_RDONLY))
        .await
        .expect("open");
    assert!(counter(&sv, "pages") > 0);
    h.on(Fop::Open, |_| {
        let f = std::fs::File::open("/proc/self/exe").expect("a file");
        FopReply::Open(Ok(xlator_api::Opened {
            backing: xlator_api::BackingFile::new(f.into()).ok().into(),
        }))
    });
    let o = sv
        .open(&Ctx::root(), fd(6, gfid(1), libc::O_RDONLY))
        .await
        .expect("open");
    assert!(o.backing.is_some(), "passed up");
    assert_eq!(counter(&sv, "pages"), 0);
    assert_eq!(read(&sv, rd(1), 0, 100).await, expect(0, 100));
    assert_eq!(reads(&h).len(), 2, "read from the child again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_misses_of_one_page_make_one_child_read() {
    let (sv, h, _) = setup(10_000, &[]).await;
    h.hold(Fop::Readv);
    let mut tasks = Vec::new();
    for i in 0..4u64 {
        let sv = sv.clone();
        tasks.push(tokio::spawn(async move {
            sv.readv(&Ctx::root(), rd(i + 1), i * 100, 100).await
        }));
    }
    h.wait_for(Fop::Readv, 1).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        h.count(Fop::Readv),
        1,
        "the other reads wait for the same fill"
    );
    h.open_gate(Fop::Readv);
    for (i, t) in tasks.into_iter().enumerate() {
        let b = t.await.expect("task").expect("readv");
        assert_eq!(b.data.to_vec(), expect(i as u64 * 100, 100));
    }
    assert_eq!(counter(&sv, "joins"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_racing_with_a_write_does_not_cache_stale_data() {
    let (sv, h, remote) = setup(10_000, &[]).await;
    // The child answers the read with the content before the write...
    h.reply(FopReply::Readv(Ok(ReadReply::data(Buf::from_vec(
        remote.read(0, PS),
    )))));
    h.hold(Fop::Readv);
    let reader = {
        let sv = sv.clone();
        tokio::spawn(async move { sv.readv(&Ctx::root(), rd(1), 0, 4).await })
    };
    h.wait_for(Fop::Readv, 1).await;
    // ...while a write through another fd completes.
    sv.writev(&Ctx::root(), rw(2), 0, Buf::from("WXYZ"), 0)
        .await
        .expect("writev");
    h.open_gate(Fop::Readv);
    let old = reader.await.expect("task").expect("readv");
    assert_eq!(
        old.data.to_vec(),
        expect(0, 4),
        "a read concurrent with the write may see either"
    );
    assert_eq!(
        read(&sv, rd(1), 0, 4).await,
        b"WXYZ".to_vec(),
        "stale page cached"
    );
    assert_eq!(h.count(Fop::Readv), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_during_a_write_in_flight_is_dropped_when_the_write_completes() {
    let (sv, h, _) = setup(10_000, &[]).await;
    h.hold(Fop::Writev);
    let writer = {
        let sv = sv.clone();
        tokio::spawn(async move {
            sv.writev(&Ctx::root(), rw(2), 0, Buf::from("WXYZ"), 0)
                .await
        })
    };
    h.wait_for(Fop::Writev, 1).await;
    // The child has not applied the write: this read gets (and may cache) the old bytes.
    assert_eq!(read(&sv, rd(1), 0, 4).await, expect(0, 4));
    h.open_gate(Fop::Writev);
    writer.await.expect("task").expect("writev");
    assert_eq!(
        read(&sv, rd(1), 0, 4).await,
        b"WXYZ".to_vec(),
        "stale page survived the write"
    );
    assert_eq!(h.count(Fop::Readv), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_child_read_is_not_cached_and_returns_the_errno() {
    let (sv, h, _) = setup(10_000, &[]).await;
    h.fail(Fop::Readv, Errno::EIO);
    assert_eq!(sv.readv(&Ctx::root(), rd(1), 0, 10).await, Err(Errno::EIO));
    assert_eq!(
        read(&sv, rd(1), 0, 10).await,
        expect(0, 10),
        "retried, then cached"
    );
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(h.count(Fop::Readv), 2);
    // A failed fstat during revalidation: the read goes to the child, which decides.
    let (child, h) = MockChild::new();
    h.fail(Fop::Fstat, Errno::ESTALE)
        .fail(Fop::Readv, Errno::ESTALE);
    let sv = io_cache(&[], child);
    assert_eq!(
        sv.readv(&Ctx::root(), rd(1), 0, 10).await,
        Err(Errno::ESTALE)
    );
    h.assert_calls(&[Fop::Fstat, Fop::Readv]);
    h.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_reads_at_eof_are_cached_as_eof_not_as_data() {
    let (sv, h, _) = setup(5000, &[]).await;
    assert_eq!(read(&sv, rd(1), 4000, 4096).await, expect(4000, 1000));
    assert_eq!(read(&sv, rd(1), 5000, 100).await, Vec::<u8>::new());
    assert_eq!(read(&sv, rd(1), 4500, 4096).await, expect(4500, 500));
    assert_eq!(reads(&h), vec![(0, 4096), (4096, 4096)]);
    // Past the last page: the child says EOF every time (empty pages are not cached).
    assert!(read(&sv, rd(1), 20_000, 10).await.is_empty());
    assert!(read(&sv, rd(1), 20_000, 10).await.is_empty());
    assert_eq!(reads(&h).len(), 4);
}

/// A readv reply carrying the file's attributes, as a leaf gives them.
fn read_with_attr(remote: &Remote, offset: u64, size: u64) -> FopReply {
    FopReply::Readv(Ok(ReadReply {
        data: Buf::from_vec(remote.read(offset, size)),
        attr: ROption::RSome(remote.iatt()),
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_mtime_in_readv_replies_drops_pages() {
    let (sv, h, remote) = setup(3 * PS, &[]).await;
    read(&sv, rd(1), 0, 10).await;
    // A fill whose reply carries unchanged attributes keeps the pages.
    h.reply(read_with_attr(&remote, PS, PS));
    read(&sv, rd(1), PS, 10).await;
    read(&sv, rd(1), 0, 10).await;
    read(&sv, rd(1), PS, 10).await;
    assert_eq!(
        reads(&h),
        vec![(0, PS as u32), (PS, PS as u32)],
        "unchanged attributes keep the pages"
    );
    // Another client changes page 0; the reply of a fill of page 2 shows the new mtime.
    remote.write(0, b"NEW");
    h.reply(read_with_attr(&remote, 2 * PS, PS));
    read(&sv, rd(1), 2 * PS, 10).await;
    assert_eq!(
        read(&sv, rd(1), 0, 3).await,
        b"NEW".to_vec(),
        "a new mtime in a fill's reply drops the pages"
    );
    assert_eq!(counter(&sv, "stale"), 1);
    // Page 1 cached again; another change, seen in the reply of a read that bypasses the cache.
    read(&sv, rd(1), PS, 10).await;
    read(&sv, rd(1), PS, 10).await;
    let n = reads(&h).len();
    remote.write(PS, b"MORE");
    let direct = fd(5, gfid(1), libc::O_RDONLY | libc::O_DIRECT);
    h.reply(read_with_attr(&remote, 0, 10));
    read(&sv, direct, 0, 10).await;
    assert_eq!(counter(&sv, "bypassed"), 1);
    assert_eq!(
        read(&sv, rd(1), PS, 4).await,
        b"MORE".to_vec(),
        "a new mtime in a bypassing read's reply drops the pages"
    );
    assert_eq!(reads(&h).len(), n + 2);
    assert_eq!(counter(&sv, "stale"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fds_that_must_not_use_the_cache_pass_through() {
    let (sv, h, _) = setup(10_000, &[]).await;
    let anon = xlator_api::Fd::anonymous(gfid(1), libc::O_RDONLY);
    let direct = fd(5, gfid(1), libc::O_RDONLY | libc::O_DIRECT);
    let wronly = fd(6, gfid(1), libc::O_WRONLY);
    for f in [anon, anon, direct, direct, wronly] {
        read(&sv, f, 0, 10).await;
    }
    assert_eq!(reads(&h), vec![(0, 10); 5], "requests passed unchanged");
    assert_eq!(counter(&sv, "pages"), 0);
    assert_eq!(counter(&sv, "bypassed"), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_outside_the_size_bounds_are_not_cached() {
    for set in [[("max-file-size", "4KiB")], [("min-file-size", "1MiB")]] {
        let (sv, h, _) = setup(10_000, &set).await;
        read(&sv, rd(1), 0, 10).await;
        read(&sv, rd(1), 0, 10).await;
        assert_eq!(reads(&h), vec![(0, 10), (0, 10)], "{set:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_zero_files_are_never_cached() {
    let (sv, h, _) = setup(10_000, &[("priority", "*.tmp:0,*:1")]).await;
    // setup looked up "f": priority 1, cached.
    read(&sv, rd(1), 0, 10).await;
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(h.count(Fop::Readv), 1);
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "f.tmp"))
        .await
        .expect("lookup");
    read(&sv, rd(1), 0, 10).await;
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(h.count(Fop::Readv), 3, "seen as *.tmp now: not cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_stays_within_its_size_and_shrinks_on_reconfigure() {
    let (sv, h, _) = setup(100_000, &[("cache-size", "16KiB")]).await;
    for p in 0..8 {
        read(&sv, rd(1), p * PS, 1).await;
    }
    assert_eq!(counter(&sv, "cache_used"), 4 * PS);
    assert_eq!(counter(&sv, "evictions"), 4);
    // The most recent four pages are the ones left.
    read(&sv, rd(1), 7 * PS, 1).await;
    read(&sv, rd(1), 0, 1).await;
    assert_eq!(h.count(Fop::Readv), 9);
    sv.reconfigure(options_for::<IoCache>(&[
        ("page-size", "4KiB"),
        ("cache-size", "4KiB"),
    ]))
    .expect("reconfigure");
    assert_eq!(counter(&sv, "cache_used"), PS);
    assert_eq!(counter(&sv, "cache_size"), PS);
    let bad = options_for::<IoCache>(&[("priority", "nonsense")]);
    assert!(
        sv.reconfigure(bad)
            .expect_err("must fail")
            .contains("priority")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlink_and_rename_over_drop_cached_files() {
    let (sv, h, _) = setup(10_000, &[]).await;
    read(&sv, rd(1), 0, 10).await;
    assert_eq!(counter(&sv, "pages"), 1);
    h.on(Fop::Rename, |_| FopReply::Rename(Ok(())));
    h.on(Fop::Unlink, |_| FopReply::Unlink(Ok(Default::default())));
    sv.rename(
        &Ctx::root(),
        Loc::new(Gfid::ROOT, "g"),
        Loc::new(Gfid::ROOT, "h"),
        0,
    )
    .await
    .expect("rename of another file");
    assert_eq!(counter(&sv, "pages"), 1);
    sv.rename(
        &Ctx::root(),
        Loc::new(Gfid::ROOT, "f"),
        Loc::new(Gfid::ROOT, "f2"),
        0,
    )
    .await
    .expect("rename");
    assert_eq!(counter(&sv, "pages"), 1, "a renamed file keeps its pages");
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "f2"))
        .await
        .expect("lookup");
    sv.unlink(&Ctx::root(), Loc::new(Gfid::ROOT, "f2"))
        .await
        .expect("unlink");
    assert_eq!((counter(&sv, "pages"), counter(&sv, "files")), (0, 0));
    // Release drops nothing: the cache is per inode.
    read(&sv, rd(1), 0, 10).await;
    h.on(Fop::Release, |_| FopReply::Release(Ok(())));
    sv.release(&Ctx::root(), rd(1)).await.expect("release");
    assert_eq!(counter(&sv, "pages"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_fops_pass_through_unchanged() {
    let (child, h) = MockChild::new();
    let sv = io_cache(&[], child);
    h.fail(Fop::Mkdir, Errno::EEXIST);
    let r = sv
        .mkdir(&Ctx::root(), Loc::new(Gfid::ROOT, "d"), 0o755, 0o022)
        .await;
    assert_eq!(r.map(|_| ()), Err(Errno::EEXIST));
    assert_eq!(
        sv.statfs(&Ctx::root(), Gfid::ROOT).await.map(|_| ()),
        Err(Errno::ENOSYS)
    );
    h.assert_calls(&[Fop::Mkdir, Fop::Statfs]);
}
