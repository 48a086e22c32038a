//! read-ahead for every fop of the table: a fop that may change data (`Fop::may_change_data`)
//! drops the prefetched pages of every fd of the file, whatever the child answers; every other
//! fop on another fd leaves them.

mod common;

use std::time::Duration;

use common::{PS, read_ahead};
use xlator_api::{Ctx, Errno, Fd, Fop, Subvol};
use xlfs_testkit::fixtures::counter;
use xlfs_testkit::mock::{MockChild, MockHandle};
use xlfs_testkit::on_file::call_on;
use xlfs_testkit::remote::{Remote, rd, rw};

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

/// read-ahead over a remote file of 1 MiB, with fd 1 reading sequentially: its own page and
/// 4 pages ahead are held.
async fn prefetched() -> (Subvol, MockHandle) {
    let (child, h) = MockChild::new();
    Remote::new(1 << 20).serve(&h);
    let sv = read_ahead(&[], child);
    for i in 0..2 {
        sv.readv(&Ctx::root(), rd(1), i * PS, PS as u32)
            .await
            .expect("readv");
    }
    until("prefetches", || counter(&sv, "pages") == 5).await;
    (sv, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fop_that_may_change_data_drops_the_pages_and_no_other_does() {
    // Another fd (its own flush/fsync/release concern only itself), with O_TRUNC: an open
    // then truncates.
    let fd = Fd {
        flags: libc::O_RDWR | libc::O_TRUNC,
        ..rw(2)
    };
    for &fop in Fop::ALL {
        let (sv, h) = prefetched().await;
        // The child refuses it: the file does not change, so only read-ahead's own
        // classification of the fop can drop the pages.
        h.fail_always(fop, Errno::EIO);
        let _ = call_on(fop, fd).send(&Ctx::root(), &sv).await;
        let pages = counter(&sv, "pages");
        // A create names its file only in its reply: refused, it changed no file it knows.
        if fop.may_change_data() && fop != Fop::Create {
            assert_eq!(pages, 0, "{fop} changes data but left the pages");
        } else {
            assert_eq!(pages, 5, "{fop} does not change data but dropped pages");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_fops_pass_through_untouched() {
    let (sv, h) = prefetched().await;
    h.take_calls();
    for fop in [
        Fop::Rchecksum,
        Fop::Getxattrs,
        Fop::Setxattrs,
        Fop::ForgetClient,
    ] {
        h.fail_always(fop, Errno::ENOTCONN);
        let call = call_on(fop, rd(1));
        let reply = call.clone().send(&Ctx::root(), &sv).await;
        assert_eq!(
            reply.errno(),
            Some(Errno::ENOTCONN),
            "{fop}: the child's answer"
        );
        assert_eq!(h.take_calls(), vec![call], "{fop} went down as it came");
    }
    assert_eq!(counter(&sv, "pages"), 5);
}
