//! performance/read-ahead over a mock child: which reads reach the child, and what comes back.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{PS, read_ahead};
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Errno, Fd, Fop, ReadReply, SetAttr, Subvol};
use xlfs_read_ahead::ReadAhead;
use xlfs_testkit::build::options_for;
use xlfs_testkit::fixtures::{counter, fd, gfid, reads};
use xlfs_testkit::mock::{FopCall, FopReply, MockChild, MockHandle};
use xlfs_testkit::remote::{Remote, byte, rd, rw};

fn expect(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(byte).collect()
}

async fn read(sv: &Subvol, f: Fd, offset: u64, size: u32) -> Vec<u8> {
    sv.readv(&Ctx::root(), f, offset, size)
        .await
        .unwrap_or_else(|e| panic!("readv {offset}+{size}: {e}"))
        .data
        .to_vec()
}

/// Waits (up to 2 s) until `cond` holds: prefetches complete in background tasks.
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..400 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

fn setup(len: u64, set: &[(&str, &str)]) -> (Subvol, MockHandle, Remote) {
    let (child, h) = MockChild::new();
    let remote = Remote::new(len);
    remote.serve(&h);
    (read_ahead(set, child), h, remote)
}

fn sorted(mut v: Vec<(u64, u32)>) -> Vec<(u64, u32)> {
    v.sort_unstable();
    v
}

const P: u32 = PS as u32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sequential_reads_prefetch_page_count_pages() {
    let (sv, h, _) = setup(1 << 20, &[]);
    assert_eq!(read(&sv, rd(1), 0, P).await, expect(0, PS));
    assert_eq!(reads(&h), vec![(0, P)], "the first read goes down as it is");
    assert_eq!(read(&sv, rd(1), PS, P).await, expect(PS, PS));
    h.wait_for(Fop::Readv, 6).await;
    let want: Vec<(u64, u32)> = (1..6).map(|p| (p * PS, P)).collect();
    assert_eq!(
        sorted(reads(&h)[1..].to_vec()),
        want,
        "own page + 4 pages ahead"
    );
    assert_eq!(counter(&sv, "prefetched"), 4);
    until("prefetches", || counter(&sv, "pages") == 5).await;
    // The next reads are answered from the pages; each page consumed prefetches one more.
    for p in 2..6 {
        assert_eq!(read(&sv, rd(1), p * PS, P).await, expect(p * PS, PS));
    }
    h.wait_for(Fop::Readv, 10).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.count(Fop::Readv), 10, "{:?}", reads(&h));
    assert_eq!(
        sorted(reads(&h)[6..].to_vec()),
        (6..10).map(|p| (p * PS, P)).collect::<Vec<_>>()
    );
    assert!(counter(&sv, "hits") >= 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reads_prefetch_nothing() {
    let (sv, h, _) = setup(1 << 20, &[]);
    let offsets = [0u64, 50_000, 8000, 30_000, 30_001, 700_000];
    for o in offsets {
        assert_eq!(read(&sv, rd(1), o, 1000).await, expect(o, 1000));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let want: Vec<(u64, u32)> = offsets.iter().map(|o| (*o, 1000)).collect();
    assert_eq!(
        reads(&h),
        want,
        "every read passed down unchanged, nothing more"
    );
    assert_eq!(counter(&sv, "prefetched"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_sequential_reads_are_served_within_pages() {
    let (sv, h, _) = setup(1 << 20, &[("page-count", "2")]);
    let mut off = 0;
    for _ in 0..40 {
        assert_eq!(read(&sv, rd(1), off, 1000).await, expect(off, 1000));
        off += 1000;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    // 40 KB read: the first read direct, then page reads only, never more than 2 ahead.
    let r = reads(&h);
    assert_eq!(r[0], (0, 1000));
    assert!(r[1..].iter().all(|(o, s)| o % PS == 0 && *s == P), "{r:?}");
    assert!(r.len() <= 1 + 40_000 / PS as usize + 3, "{r:?}");
    assert!(counter(&sv, "pages") <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_sequential_read_drops_the_fds_pages() {
    let (sv, h, _) = setup(1 << 20, &[]);
    read(&sv, rd(1), 0, P).await;
    read(&sv, rd(1), PS, P).await;
    until("prefetches", || counter(&sv, "pages") == 5).await;
    assert_eq!(read(&sv, rd(1), 500_000, 10).await, expect(500_000, 10));
    assert_eq!(counter(&sv, "pages"), 0);
    let n = h.count(Fop::Readv);
    // Back to where the pages were: read again from the child.
    read(&sv, rd(1), 2 * PS, 10).await;
    assert_eq!(h.count(Fop::Readv), n + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_any_fd_drops_every_fds_pages_of_the_file() {
    let (sv, h, _) = setup(1 << 20, &[]);
    let other = fd(9, gfid(2), libc::O_RDONLY);
    for f in [rd(1), rd(2), other] {
        read(&sv, f, 0, P).await;
        read(&sv, f, PS, P).await;
    }
    until("prefetches", || counter(&sv, "pages") == 15).await;
    sv.writev(&Ctx::root(), rw(3), 2 * PS + 5, Buf::from("NEW"), 0)
        .await
        .expect("writev");
    assert_eq!(
        counter(&sv, "pages"),
        5,
        "only the other file's pages are left"
    );
    let mut want = expect(2 * PS, PS);
    want[5..8].copy_from_slice(b"NEW");
    assert_eq!(read(&sv, rd(1), 2 * PS, P).await, want);
    assert_eq!(read(&sv, rd(2), 2 * PS, P).await, want);
    // A truncate drops pages too, and the next read sees the new size.
    read(&sv, rd(1), 3 * PS, P).await;
    until("prefetches", || counter(&sv, "pages") > 5).await;
    let size = SetAttr {
        size: ROption::RSome(3 * PS + 10),
        ..SetAttr::default()
    };
    sv.fsetattr(&Ctx::root(), rw(3), size)
        .await
        .expect("truncate");
    assert_eq!(
        read(&sv, rd(1), 4 * PS, P).await.len(),
        0,
        "past the new end of file"
    );
    let _ = h;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefetch_racing_with_a_write_is_not_kept() {
    let (sv, h, _) = setup(1 << 20, &[]);
    read(&sv, rd(1), 0, P).await;
    h.hold(Fop::Readv);
    let reader = {
        let sv = sv.clone();
        tokio::spawn(async move { sv.readv(&Ctx::root(), rd(1), PS, P).await })
    };
    h.wait_for(Fop::Readv, 6).await;
    // Prefetches are waiting at the child; a write completes meanwhile.
    sv.writev(&Ctx::root(), rw(2), 3 * PS, Buf::from("W"), 0)
        .await
        .expect("writev");
    h.open_gate(Fop::Readv);
    reader.await.expect("task").expect("readv");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        counter(&sv, "pages"),
        0,
        "fills that overlapped the write were kept"
    );
    let mut want = expect(3 * PS, 4);
    want[0] = b'W';
    assert_eq!(read(&sv, rd(1), 2 * PS, P).await, expect(2 * PS, PS));
    assert_eq!(read(&sv, rd(1), 3 * PS, 4).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_read_during_a_write_in_flight_are_dropped_when_it_completes() {
    let (sv, h, _) = setup(1 << 20, &[]);
    read(&sv, rd(1), 0, P).await;
    h.hold(Fop::Writev);
    let writer = {
        let sv = sv.clone();
        tokio::spawn(async move {
            sv.writev(&Ctx::root(), rw(2), 3 * PS, Buf::from("W"), 0)
                .await
        })
    };
    h.wait_for(Fop::Writev, 1).await;
    // Sequential read while the write waits at the child: pages 1..6 come back old.
    read(&sv, rd(1), PS, P).await;
    until("prefetches", || counter(&sv, "pages") == 5).await;
    h.open_gate(Fop::Writev);
    writer.await.expect("task").expect("writev");
    assert_eq!(counter(&sv, "pages"), 0);
    let mut want = expect(3 * PS, 4);
    want[0] = b'W';
    assert_eq!(read(&sv, rd(1), 3 * PS, 4).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_child_read_is_not_kept_and_returns_the_errno() {
    let (sv, h, remote) = setup(1 << 20, &[]);
    // Page reads of page 0 fail once, page reads of page 2 fail once.
    let failed0 = Arc::new(AtomicBool::new(false));
    let failed2 = Arc::new(AtomicBool::new(false));
    let r = remote.clone();
    let (f0, f2) = (failed0.clone(), failed2.clone());
    h.on(Fop::Readv, move |c| match c {
        FopCall::Readv { offset, size, .. } => {
            let once = match offset {
                0 if *size == P => Some(&f0),
                o if *o == 2 * PS => Some(&f2),
                _ => None,
            };
            if once.is_some_and(|f| !f.swap(true, Ordering::SeqCst)) {
                FopReply::Readv(Err(Errno::EIO))
            } else {
                FopReply::Readv(Ok(ReadReply::data(Buf::from_vec(
                    r.read(*offset, u64::from(*size)),
                ))))
            }
        }
        _ => unreachable!(),
    });
    read(&sv, rd(1), 0, 1000).await;
    // The read's own page (0) fails: its errno is the answer.
    assert_eq!(
        sv.readv(&Ctx::root(), rd(1), 1000, 1000).await,
        Err(Errno::EIO)
    );
    until("prefetches", || counter(&sv, "pages") == 2).await;
    // Page 2's prefetch failed too and is not kept; reading on fetches it again.
    let mut off = 2000;
    while off < 4 * PS {
        assert_eq!(read(&sv, rd(1), off, 1000).await, expect(off, 1000));
        off += 1000;
    }
    assert!(failed0.load(Ordering::SeqCst) && failed2.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_of_file_is_read_correctly_and_never_trusted_stale() {
    let (sv, h, remote) = setup(10_000, &[]);
    let mut got = Vec::new();
    let mut off = 0;
    loop {
        let b = read(&sv, rd(1), off, 3000).await;
        if b.is_empty() {
            break;
        }
        off += b.len() as u64;
        got.extend(b);
    }
    assert_eq!(got, expect(0, 10_000));
    // Another client appends; a reader waiting at end of file sees the new data.
    remote.write(10_000, b"more");
    assert_eq!(read(&sv, rd(1), 10_000, 3000).await, b"more".to_vec());
    assert!(read(&sv, rd(1), 10_004, 3000).await.is_empty());
    let _ = h;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_fsync_and_release_clean_up() {
    let (sv, h, _) = setup(1 << 20, &[]);
    h.on(Fop::Flush, |_| FopReply::Flush(Ok(())))
        .on(Fop::Fsync, |_| FopReply::Fsync(Ok(())))
        .on(Fop::Release, |_| FopReply::Release(Ok(())));
    let prefetch = || async {
        read(&sv, rd(1), 0, P).await;
        read(&sv, rd(1), PS, P).await;
        until("prefetches", || counter(&sv, "pages") == 5).await;
    };
    prefetch().await;
    sv.flush(&Ctx::root(), rd(1)).await.expect("flush");
    assert_eq!(counter(&sv, "pages"), 0);
    prefetch().await;
    sv.fsync(&Ctx::root(), rd(1), false).await.expect("fsync");
    assert_eq!(counter(&sv, "pages"), 0);
    prefetch().await;
    sv.release(&Ctx::root(), rd(1)).await.expect("release");
    assert_eq!((counter(&sv, "pages"), counter(&sv, "fds")), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_direct_and_write_only_fds_pass_through() {
    let (sv, h, _) = setup(1 << 20, &[]);
    let anon = Fd::anonymous(gfid(1), libc::O_RDONLY);
    let direct = fd(5, gfid(1), libc::O_RDONLY | libc::O_DIRECT);
    for f in [anon, direct] {
        for i in 0..4 {
            read(&sv, f, i * 100, 100).await;
        }
    }
    read(&sv, fd(6, gfid(1), libc::O_WRONLY), 0, 100).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.count(Fop::Readv), 9);
    assert_eq!(counter(&sv, "fds"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_larger_than_the_window_and_reconfigured_page_count() {
    let (sv, h, _) = setup(1 << 20, &[]);
    for i in 0..3 {
        read(&sv, rd(1), i * 32 * PS, 32 * P).await;
    }
    assert_eq!(
        h.count(Fop::Readv),
        3,
        "larger than 4 pages: straight through"
    );
    h.take_calls();
    sv.reconfigure(options_for::<ReadAhead>(&[
        ("page-size", "4KiB"),
        ("page-count", "1"),
    ]))
    .expect("reconfigure");
    read(&sv, rd(2), 0, 100).await;
    read(&sv, rd(2), 100, 100).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(reads(&h), vec![(0, 100), (0, P)], "a window of one page");
}
