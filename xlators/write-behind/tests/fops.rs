//! write-behind over a mock child: what goes down, when, in what order, and how errors come
//! back.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use xlator_api::abi_stable::std_types::ROption::{RNone, RSome};
use xlator_api::{Buf, Entry, Errno, Fd, Fop, Gfid, Loc, ReadReply, Subvol, WriteReply};
use xlfs_testkit::build::options_for;
use xlfs_testkit::mock::{FopCall, FopReply, MockHandle};
use xlfs_testkit::on_file::call_on;
use xlfs_write_behind::handling::{Handling, handling};

/// Holds a partial aggregate far longer than any test step, for tests that check what is
/// held until a barrier.
const HOLD: (&str, &str) = ("aggregate-wait", "1s");

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_is_acknowledged_before_the_child_answers() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    let n = soon("cached write", wb.writev(&cx(), rw(), 0, bytes(100, 1), 0)).await;
    assert_eq!(n, Ok(WriteReply::written(100)));
    // Trickling: nothing was in flight, so it went down at once.
    soon("writev reaching the child", h.wait_for(Fop::Writev, 1)).await;
    assert_eq!(h.held(Fop::Writev), 1);
    h.open_gate(Fop::Writev);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readv_reaches_the_child_only_after_the_cached_writev_completed() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(4096, 1), 0)
        .await
        .expect("cached");
    soon("writev", h.wait_for(Fop::Writev, 1)).await;
    let read = tokio::spawn({
        let wb = wb.clone();
        async move { wb.readv(&cx(), rw(), 0, 4096).await }
    });
    settle().await;
    assert_eq!(h.count(Fop::Readv), 0, "readv overtook a cached write");
    h.release(Fop::Writev, 1);
    let r = soon("readv", read).await.expect("task");
    assert_eq!(r.map(|b| b.data.len()), Ok(4));
    h.assert_calls(&[Fop::Writev, Fop::Readv]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readv_drops_the_childs_attributes_while_a_cached_write_is_unfinished() {
    let (wb, h) = wb_mock(&[]);
    h.on(Fop::Readv, |c| match c {
        FopCall::Readv { fd, .. } => FopReply::Readv(Ok(ReadReply {
            data: Buf::zeroed(4),
            attr: RSome(attr(fd.gfid, 42)),
        })),
        _ => FopReply::Readv(Err(Errno::EINVAL)),
    });
    // Nothing pending: the child's attributes pass through.
    let r = soon("readv", wb.readv(&cx(), rw(), 0, 4096))
        .await
        .expect("readv");
    assert_eq!(r.attr, RSome(attr(FILE, 42)));
    // A cached write, acknowledged but not finished at the child: a disjoint read goes down
    // at once, and the child's size would miss the write.
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(100, 1), 0)
        .await
        .expect("cached");
    soon("writev", h.wait_for(Fop::Writev, 1)).await;
    let r = soon("disjoint readv", wb.readv(&cx(), rw(), 1 << 20, 4096))
        .await
        .expect("readv");
    assert_eq!(
        h.count(Fop::Readv),
        2,
        "the disjoint read reached the child"
    );
    assert_eq!(r.data.len(), 4);
    assert_eq!(
        r.attr, RNone,
        "attributes passed up past an unfinished write"
    );
    // Once the write is done, attributes pass through again.
    h.open_gate(Fop::Writev);
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    let r = soon("readv", wb.readv(&cx(), rw(), 0, 4096))
        .await
        .expect("readv");
    assert_eq!(r.attr, RSome(attr(FILE, 42)));
}

/// A cached write of 10 bytes at 0 on [`FILE`], held at the child.
async fn held_cached_write() -> (Subvol, MockHandle) {
    let (wb, h) = wb_mock(&[("flush-behind", "off")]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("writev", h.wait_for(Fop::Writev, 1)).await;
    (wb, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fop_of_the_table_is_ordered_as_its_handling_says() {
    // O_TRUNC (and O_CREAT) on the fd: open and create then truncate.
    let fd = Fd {
        flags: libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
        ..rw()
    };
    for &fop in Fop::ALL {
        let handling = handling(fop);
        if handling == Handling::Write {
            continue; // the writev tests above and below
        }
        let (wb, h) = held_cached_write().await;
        let task = tokio::spawn({
            let wb = wb.clone();
            async move { call_on(fop, fd).send(&cx(), &wb).await }
        });
        if handling.waits() {
            settle().await;
            assert_eq!(
                h.count(fop),
                0,
                "{fop} ({handling:?}) reached the child before the cached write finished"
            );
            h.release(Fop::Writev, 1);
            soon(fop.name(), task).await.expect("task");
            assert_eq!(h.fops()[..2], [Fop::Writev, fop], "{fop}");
        } else {
            // Reaching the child while the write's gate is still closed: it did not wait.
            soon(fop.name(), h.wait_for(fop, 1)).await;
            h.open_gate(Fop::Writev);
            soon(fop.name(), task).await.expect("task");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_and_create_wait_only_when_they_truncate() {
    for fop in [Fop::Open, Fop::Create] {
        let (wb, h) = held_cached_write().await;
        let plain = Fd {
            flags: libc::O_RDWR | libc::O_CREAT,
            ..rw()
        };
        // Answered while the write's gate is still closed: it did not wait.
        soon(fop.name(), call_on(fop, plain).send(&cx(), &wb)).await;
        h.open_gate(Fop::Writev);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rchecksum_waits_for_the_cached_write_it_overlaps_only() {
    let (wb, h) = held_cached_write().await;
    // Disjoint from the write at 0..10: sent at once.
    soon(
        "disjoint rchecksum",
        wb.rchecksum(&cx(), rw(), 1 << 20, 4096),
    )
    .await
    .ok();
    assert_eq!(h.count(Fop::Rchecksum), 1);
    let task = tokio::spawn({
        let wb = wb.clone();
        async move { wb.rchecksum(&cx(), rw(), 0, 4096).await }
    });
    settle().await;
    assert_eq!(
        h.count(Fop::Rchecksum),
        1,
        "rchecksum overtook a cached write"
    );
    h.release(Fop::Writev, 1);
    soon("rchecksum", task).await.expect("task").ok();
    assert_eq!(h.fops(), [Fop::Writev, Fop::Rchecksum, Fop::Rchecksum]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fops_on_other_files_do_not_wait() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    let other = fd_on(OTHER, 2, libc::O_RDWR);
    soon("read of another file", wb.readv(&cx(), other, 0, 10))
        .await
        .expect("read");
    soon("fstat of another file", wb.fstat(&cx(), other))
        .await
        .expect("fstat");
    soon("fsync of another file", wb.fsync(&cx(), other, false))
        .await
        .expect("fsync");
    // A write to another file goes down in parallel with the held one.
    wb.writev(&cx(), other, 0, bytes(10, 2), 0)
        .await
        .expect("cached");
    soon("second writev", h.wait_for(Fop::Writev, 2)).await;
    assert_eq!(h.held(Fop::Writev), 2);
    h.open_gate(Fop::Writev);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_later_write_waits_for_an_earlier_read() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Readv);
    let read = tokio::spawn({
        let wb = wb.clone();
        async move { wb.readv(&cx(), rw(), 0, 100).await }
    });
    soon("readv", h.wait_for(Fop::Readv, 1)).await;
    // Acknowledged, but not sent while the read that came first is unanswered.
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    settle().await;
    assert_eq!(
        h.count(Fop::Writev),
        0,
        "a later write overtook an earlier read"
    );
    h.release(Fop::Readv, 1);
    soon("readv", read).await.expect("task").expect("read");
    soon("writev", h.wait_for(Fop::Writev, 1)).await;
    h.assert_calls(&[Fop::Readv, Fop::Writev]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_writes_in_flight_never_reorder() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(4096, 1), 0)
        .await
        .expect("first");
    soon("first writev", h.wait_for(Fop::Writev, 1)).await;
    // Overlaps the one in flight: acknowledged, held back.
    wb.writev(&cx(), rw(), 2048, bytes(4096, 2), 0)
        .await
        .expect("second");
    // Disjoint from both (and not contiguous): goes down in parallel.
    wb.writev(&cx(), rw(), 65536, bytes(10, 3), 0)
        .await
        .expect("third");
    wb.fsync(&cx(), fd_on(OTHER, 5, libc::O_RDWR), false)
        .await
        .expect("unrelated fsync");
    let fsync = tokio::spawn({
        let wb = wb.clone();
        async move { wb.fsync(&cx(), rw(), false).await }
    });
    soon("disjoint writev", h.wait_for(Fop::Writev, 2)).await;
    settle().await;
    assert_eq!(writes(&h), vec![(0, 4096), (65536, 10)]);
    h.release(Fop::Writev, 2);
    soon("overlapping writev", h.wait_for(Fop::Writev, 3)).await;
    assert_eq!(writes(&h)[2], (2048, 4096));
    h.open_gate(Fop::Writev);
    soon("fsync", fsync).await.expect("task").expect("fsync");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_contiguous_4k_writes_become_one_128k_writev() {
    let (wb, h) = wb_mock(&[("trickling-writes", "off"), HOLD]);
    let mut expected = Vec::new();
    for i in 0..32u8 {
        let data = bytes(4096, i);
        expected.extend_from_slice(&data);
        let n = wb.writev(&cx(), rw(), u64::from(i) * 4096, data, 0).await;
        assert_eq!(n, Ok(WriteReply::written(4096)));
    }
    soon("aggregate", h.wait_for(Fop::Writev, 1)).await;
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    h.assert_calls(&[Fop::Writev, Fop::Fsync]);
    match &h.calls_of(Fop::Writev)[0] {
        FopCall::Writev { offset, data, .. } => {
            assert_eq!(*offset, 0);
            assert_eq!(data.as_slice(), &expected[..]);
        }
        other => panic!("not a writev: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_trickling_writes_aggregate_while_one_is_in_flight() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    for i in 0..32u64 {
        wb.writev(&cx(), rw(), i * 4096, bytes(4096, 1), 0)
            .await
            .expect("cached");
    }
    soon("first", h.wait_for(Fop::Writev, 1)).await;
    h.open_gate(Fop::Writev);
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    assert_eq!(writes(&h), vec![(0, 4096), (4096, 31 * 4096)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_trickling_a_lone_write_waits_for_a_barrier() {
    let (wb, h) = wb_mock(&[("trickling-writes", "off"), HOLD]);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    settle().await;
    h.assert_no_calls();
    wb.fstat(&cx(), rw()).await.expect("fstat");
    h.assert_calls(&[Fop::Writev, Fop::Fstat]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_trickling_a_lone_write_goes_down_after_aggregate_wait() {
    let (wb, h) = wb_mock(&[("trickling-writes", "off"), ("aggregate-wait", "20ms")]);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("sent by the timer", h.wait_for(Fop::Writev, 1)).await;
    h.assert_calls(&[Fop::Writev]);
    // And the next held write starts a timer of its own.
    wb.writev(&cx(), rw(), 10, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("sent by the timer", h.wait_for(Fop::Writev, 2)).await;
    assert_eq!(writes(&h), vec![(0, 10), (10, 10)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn release_sends_pending_writes_first() {
    let (wb, h) = wb_mock(&[("trickling-writes", "off"), HOLD]);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    wb.release(&cx(), rw()).await.expect("release");
    h.assert_calls(&[Fop::Writev, Fop::Release]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_window_makes_the_writer_wait() {
    let (wb, h) = wb_mock(&[("window-size", "64KiB")]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(60 << 10, 1), 0)
        .await
        .expect("fits");
    assert!(
        stays_pending(wb.writev(&cx(), rw(), 1 << 20, bytes(8 << 10, 2), 0)).await,
        "a write beyond the window was acknowledged"
    );
    let waiting = tokio::spawn({
        let wb = wb.clone();
        async move { wb.writev(&cx(), rw(), 1 << 20, bytes(8 << 10, 2), 0).await }
    });
    settle().await;
    assert!(!waiting.is_finished());
    h.release(Fop::Writev, 1);
    assert_eq!(
        soon("admitted", waiting).await.expect("task"),
        Ok(WriteReply::written(8 << 10))
    );
    h.open_gate(Fop::Writev);
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    assert_eq!(writes(&h), vec![(0, 60 << 10), (1 << 20, 8 << 10)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_admitted_from_the_queue_wakes_the_next_one() {
    // Regression: B and C wait for window space, C polled before B once space is back. B is
    // admitted and (no trickling) held to grow; unless its admission wakes C, C never asks
    // for the window to drain and waits forever.
    let (wb, h) = wb_mock(&[("trickling-writes", "off"), HOLD, ("window-size", "4KiB")]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(3000, 1), 0)
        .await
        .expect("A fits");
    let mut b = std::pin::pin!(wb.writev(&cx(), rw(), 10_000, bytes(3000, 2), 0));
    let mut c = std::pin::pin!(wb.writev(&cx(), rw(), 20_000, bytes(3000, 3), 0));
    assert!(futures::poll!(b.as_mut()).is_pending(), "B waits for space");
    assert!(futures::poll!(c.as_mut()).is_pending(), "C waits behind B");
    soon("A drained", h.wait_for(Fop::Writev, 1)).await;
    h.open_gate(Fop::Writev);
    settle().await;
    assert!(futures::poll!(c.as_mut()).is_pending(), "C: still B's turn");
    assert_eq!(
        futures::poll!(b.as_mut()),
        std::task::Poll::Ready(Ok(WriteReply::written(3000)))
    );
    assert_eq!(soon("C", c).await, Ok(WriteReply::written(3000)));
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    assert_eq!(writes(&h), vec![(0, 3000), (10_000, 3000), (20_000, 3000)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_smaller_window_applies_on_reconfigure() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(100 << 10, 1), 0)
        .await
        .expect("fits 1 MiB");
    wb.reconfigure(options_for::<xlfs_write_behind::WriteBehind>(&[(
        "window-size",
        "64KiB",
    )]))
    .expect("reconfigure");
    assert!(stays_pending(wb.writev(&cx(), rw(), 1 << 20, bytes(10, 2), 0)).await);
    h.open_gate(Fop::Writev);
    soon("admitted", wb.writev(&cx(), rw(), 1 << 20, bytes(10, 2), 0))
        .await
        .expect("write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_background_write_is_reported_once_on_fsync() {
    let (wb, h) = wb_mock(&[]);
    h.fail(Fop::Writev, Errno::ENOSPC);
    assert_eq!(
        wb.writev(&cx(), rw(), 0, bytes(10, 1), 0).await,
        Ok(WriteReply::written(10))
    );
    assert_eq!(wb.fsync(&cx(), rw(), false).await, Err(Errno::ENOSPC));
    assert_eq!(wb.fsync(&cx(), rw(), false).await, Ok(()), "reported once");
    h.assert_calls(&[Fop::Writev, Fop::Fsync, Fop::Fsync]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_background_write_is_reported_on_flush() {
    for flush_behind in ["on", "off"] {
        let (wb, h) = wb_mock(&[("flush-behind", flush_behind)]);
        h.hold(Fop::Writev);
        h.fail(Fop::Writev, Errno::EIO);
        wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
            .await
            .expect("cached");
        soon("writev", h.wait_for(Fop::Writev, 1)).await;
        h.open_gate(Fop::Writev);
        if flush_behind == "on" {
            // The write may still be in flight when flush arrives: then flush returns at
            // once and the failure surfaces on the next flush.
            settle().await;
        }
        assert_eq!(
            wb.flush(&cx(), rw()).await,
            Err(Errno::EIO),
            "flush-behind {flush_behind}"
        );
        assert_eq!(wb.flush(&cx(), rw()).await, Ok(()));
        h.assert_calls(&[Fop::Writev, Fop::Flush, Fop::Flush]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failure_after_flush_behind_surfaces_on_the_next_flush() {
    let (wb, h) = wb_mock(&[("flush-behind", "on")]);
    h.hold(Fop::Writev);
    h.fail(Fop::Writev, Errno::EDQUOT);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("writev", h.wait_for(Fop::Writev, 1)).await;
    // flush-behind: answered at once, the flush goes down after the write.
    assert_eq!(soon("flush", wb.flush(&cx(), rw())).await, Ok(()));
    assert_eq!(h.count(Fop::Flush), 0);
    h.open_gate(Fop::Writev);
    soon("deferred flush", h.wait_for(Fop::Flush, 1)).await;
    assert_eq!(wb.flush(&cx(), rw()).await, Err(Errno::EDQUOT));
    // This flush may itself be deferred behind the first one; it still goes down.
    soon("second flush", h.wait_for(Fop::Flush, 2)).await;
    h.assert_calls(&[Fop::Writev, Fop::Flush, Fop::Flush]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flush_without_flush_behind_waits_for_the_writes() {
    let (wb, h) = wb_mock(&[("flush-behind", "off")]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    assert!(stays_pending(wb.flush(&cx(), rw())).await);
    h.open_gate(Fop::Writev);
    soon("flush", wb.flush(&cx(), rw())).await.expect("flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_write_fails_later_writes_until_reported() {
    let (wb, h) = wb_mock(&[]);
    h.fail(Fop::Writev, Errno::ENOSPC);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("failure recorded", async {
        while wb.writev(&cx(), rw(), 100, bytes(1, 1), 0).await.is_ok() {
            settle().await;
        }
    })
    .await;
    // Any fd of the file sees it, including an anonymous one, and sync writes too.
    let anon = xlator_api::Fd::anonymous(FILE, libc::O_RDWR);
    assert_eq!(
        wb.writev(&cx(), anon, 0, bytes(1, 1), 0).await,
        Err(Errno::ENOSPC)
    );
    let sync = fd_on(FILE, 3, libc::O_RDWR | libc::O_SYNC);
    assert_eq!(
        wb.writev(&cx(), sync, 0, bytes(1, 1), 0).await,
        Err(Errno::ENOSPC)
    );
    assert_eq!(wb.fsync(&cx(), rw(), true).await, Err(Errno::ENOSPC));
    assert_eq!(
        wb.writev(&cx(), rw(), 0, bytes(1, 1), 0).await,
        Ok(WriteReply::written(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn o_sync_writes_go_through_after_earlier_cached_writes() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("cached writev", h.wait_for(Fop::Writev, 1)).await;
    for (fd_flags, write_flags) in [(libc::O_SYNC, 0), (0, libc::O_DSYNC)] {
        let fd = fd_on(FILE, 2, libc::O_RDWR | fd_flags);
        // Disjoint from the cached write, yet it waits for it.
        let sync = tokio::spawn({
            let wb = wb.clone();
            async move {
                wb.writev(&cx(), fd, 1 << 20, bytes(10, 2), write_flags)
                    .await
            }
        });
        settle().await;
        assert_eq!(
            h.count(Fop::Writev),
            1,
            "the O_SYNC write overtook a cached one"
        );
        h.release(Fop::Writev, 1);
        soon("sync writev", h.wait_for(Fop::Writev, 2)).await;
        settle().await;
        assert!(
            !sync.is_finished(),
            "an O_SYNC write was acknowledged before the child"
        );
        h.release(Fop::Writev, 1);
        assert_eq!(
            soon("sync write", sync).await.expect("task"),
            Ok(WriteReply::written(10))
        );
        h.take_calls();
        // Re-arm: one cached write in flight for the next round.
        wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
            .await
            .expect("cached");
        soon("cached writev", h.wait_for(Fop::Writev, 1)).await;
    }
    h.open_gate(Fop::Writev);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn o_sync_writes_return_the_childs_error() {
    let (wb, h) = wb_mock(&[]);
    h.fail(Fop::Writev, Errno::EROFS);
    let fd = fd_on(FILE, 2, libc::O_RDWR | libc::O_SYNC);
    assert_eq!(
        wb.writev(&cx(), fd, 0, bytes(10, 1), 0).await,
        Err(Errno::EROFS)
    );
    // Not a background failure: nothing left to report.
    assert_eq!(wb.fsync(&cx(), fd, false).await, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn o_direct_bypasses_only_with_strict_o_direct() {
    let direct = fd_on(FILE, 2, libc::O_RDWR | libc::O_DIRECT);
    let (wb, h) = wb_mock(&[("strict-o-direct", "on")]);
    h.fail(Fop::Writev, Errno::EIO);
    assert_eq!(
        wb.writev(&cx(), direct, 0, bytes(10, 1), 0).await,
        Err(Errno::EIO)
    );
    let (wb, h) = wb_mock(&[]);
    h.fail(Fop::Writev, Errno::EIO);
    assert_eq!(
        wb.writev(&cx(), direct, 0, bytes(10, 1), 0).await,
        Ok(WriteReply::written(10)),
        "cached"
    );
    assert_eq!(wb.fsync(&cx(), direct, false).await, Err(Errno::EIO));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_on_a_read_only_fd_get_the_childs_refusal() {
    let (wb, h) = wb_mock(&[]);
    h.fail(Fop::Writev, Errno::EBADF);
    let ro = fd_on(FILE, 2, libc::O_RDONLY);
    assert_eq!(
        wb.writev(&cx(), ro, 0, bytes(10, 1), 0).await,
        Err(Errno::EBADF)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_writes_are_completed() {
    let (wb, h) = wb_mock(&[]);
    h.reply(FopReply::Writev(Ok(WriteReply::written(3))));
    wb.writev(&cx(), rw(), 100, Buf::from("0123456789"), 0)
        .await
        .expect("cached");
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    let calls = h.calls_of(Fop::Writev);
    assert_eq!(calls.len(), 2);
    match &calls[1] {
        FopCall::Writev { offset, data, .. } => {
            assert_eq!((*offset, data.as_slice()), (103, &b"3456789"[..]));
        }
        other => panic!("{other:?}"),
    }
    // A child that writes nothing at all fails the write.
    h.reply(FopReply::Writev(Ok(WriteReply::written(0))));
    wb.writev(&cx(), rw(), 0, bytes(5, 1), 0)
        .await
        .expect("cached");
    assert_eq!(wb.fsync(&cx(), rw(), false).await, Err(Errno::EIO));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn anonymous_fds_share_the_files_queue() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    let anon = xlator_api::Fd::anonymous(FILE, libc::O_RDWR);
    wb.writev(&cx(), anon, 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    soon("writev", h.wait_for(Fop::Writev, 1)).await;
    let read = tokio::spawn({
        let wb = wb.clone();
        async move { wb.readv(&cx(), rw(), 0, 10).await }
    });
    settle().await;
    assert_eq!(h.count(Fop::Readv), 0);
    h.open_gate(Fop::Writev);
    soon("read", read).await.expect("task").expect("read");
    match &h.calls_of(Fop::Writev)[0] {
        FopCall::Writev { fd, .. } => assert!(fd.is_anonymous()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn append_writes_are_serialised() {
    let (wb, h) = wb_mock(&[]);
    h.hold(Fop::Writev);
    let fd = fd_on(FILE, 2, libc::O_WRONLY | libc::O_APPEND);
    wb.writev(&cx(), fd, 0, bytes(10, 1), 0)
        .await
        .expect("first");
    wb.writev(&cx(), fd, 10, bytes(10, 2), 0)
        .await
        .expect("second: not merged");
    wb.writev(&cx(), rw(), 1 << 30, bytes(10, 3), 0)
        .await
        .expect("far away, still after");
    soon("first", h.wait_for(Fop::Writev, 1)).await;
    settle().await;
    assert_eq!(h.count(Fop::Writev), 1);
    h.release(Fop::Writev, 1);
    soon("second", h.wait_for(Fop::Writev, 2)).await;
    settle().await;
    assert_eq!(h.count(Fop::Writev), 2);
    h.open_gate(Fop::Writev);
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    assert_eq!(writes(&h), vec![(0, 10), (10, 10), (1 << 30, 10)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_waiter_does_not_block_the_file() {
    let (wb, h) = wb_mock(&[("window-size", "64KiB")]);
    h.hold(Fop::Writev);
    wb.writev(&cx(), rw(), 0, bytes(64 << 10, 1), 0)
        .await
        .expect("fills the window");
    // A read and a writer waiting for space give up.
    assert!(stays_pending(wb.readv(&cx(), rw(), 0, 10)).await);
    assert!(stays_pending(wb.writev(&cx(), rw(), 1 << 20, bytes(10, 1), 0)).await);
    h.open_gate(Fop::Writev);
    soon(
        "write after cancellations",
        wb.writev(&cx(), rw(), 1 << 21, bytes(10, 1), 0),
    )
    .await
    .expect("write");
    soon("read after cancellations", wb.readv(&cx(), rw(), 0, 10))
        .await
        .expect("read");
    assert_eq!(h.count(Fop::Readv), 1, "the cancelled read never went down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lookup_replies_carry_fresh_attributes_of_files_being_written() {
    let (wb, h) = wb_mock(&[("trickling-writes", "off"), HOLD]);
    h.on(Fop::Lookup, |_| {
        FopReply::Lookup(Ok(Entry::new(attr(FILE, 0))))
    });
    assert_eq!(
        wb.lookup(&cx(), Loc::new(Gfid::ROOT, "f"))
            .await
            .expect("lookup")
            .attr
            .size,
        0
    );
    wb.writev(&cx(), rw(), 0, bytes(10, 1), 0)
        .await
        .expect("cached");
    let e = wb
        .lookup(&cx(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    assert_eq!(
        e.attr.size, 42,
        "the attributes were refreshed with a stat after the write"
    );
    h.assert_calls(&[Fop::Lookup, Fop::Lookup, Fop::Writev, Fop::Stat]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_writers_to_one_file_all_land() {
    let (wb, h) = wb_mock(&[("window-size", "64KiB"), ("aggregate-size", "16KiB")]);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    h.delay(Fop::Writev, std::time::Duration::from_millis(1));
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let wb = wb.clone();
        let (in_flight, max) = (in_flight.clone(), max.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..64u64 {
                in_flight.fetch_add(1, Ordering::SeqCst);
                let n = wb
                    .writev(&cx(), rw(), (t * 64 + i) * 1024, bytes(1024, 1), 0)
                    .await;
                max.fetch_max(in_flight.fetch_sub(1, Ordering::SeqCst), Ordering::SeqCst);
                assert_eq!(n, Ok(WriteReply::written(1024)));
            }
        }));
    }
    for t in tasks {
        soon("writer", t).await.expect("writer");
    }
    wb.fsync(&cx(), rw(), false).await.expect("fsync");
    let mut covered: Vec<(u64, usize)> = writes(&h);
    covered.sort();
    let total: usize = covered.iter().map(|(_, n)| n).sum();
    assert_eq!(
        total,
        512 * 1024,
        "every acknowledged byte reached the child exactly once"
    );
    assert!(
        covered.iter().all(|(_, n)| *n <= 16 << 10),
        "aggregate-size respected"
    );
}
