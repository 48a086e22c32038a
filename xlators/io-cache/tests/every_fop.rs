//! io-cache for every fop of the table: a fop that may change data (`Fop::may_change_data`)
//! drops the file's cached pages, whatever the child answers; every other fop leaves them.

mod common;

use common::{PS, io_cache};
use xlator_api::{Ctx, Errno, Fd, Fop, Gfid, Loc, Subvol};
use xlfs_testkit::fixtures::reads;
use xlfs_testkit::mock::{MockChild, MockHandle};
use xlfs_testkit::on_file::call_on;
use xlfs_testkit::remote::{Remote, rd, rw};

/// io-cache over a remote file of 3 pages, page 0 cached through fd 1.
async fn cached() -> (Subvol, MockHandle) {
    let (child, h) = MockChild::new();
    Remote::new(3 * PS).serve(&h);
    let sv = io_cache(&[], child);
    sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    for _ in 0..2 {
        sv.readv(&Ctx::root(), rd(1), 0, 100).await.expect("readv");
    }
    assert_eq!(reads(&h), vec![(0, PS as u32)], "page 0 is cached");
    h.take_calls();
    (sv, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fop_that_may_change_data_drops_the_pages_and_no_other_does() {
    // O_TRUNC on the fd: an open then truncates.
    let fd = Fd {
        flags: libc::O_RDWR | libc::O_TRUNC,
        ..rw(2)
    };
    for &fop in Fop::ALL {
        let (sv, h) = cached().await;
        // The child refuses it: the file does not change, so only io-cache's own
        // classification of the fop can drop the pages. (A readv is io-cache's own.)
        if fop != Fop::Readv {
            h.fail_always(fop, Errno::EIO);
        }
        let _ = call_on(fop, fd).send(&Ctx::root(), &sv).await;
        h.take_calls();
        sv.readv(&Ctx::root(), rd(1), 0, 100).await.expect("readv");
        let refetched = !reads(&h).is_empty();
        // A create names its file only in its reply: refused, it changed no file it knows.
        let drops = fop.may_change_data() && fop != Fop::Create;
        assert_eq!(
            refetched,
            drops,
            "{fop}: pages {} (may change data: {})",
            if refetched { "dropped" } else { "kept" },
            fop.may_change_data()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_fops_pass_through_untouched() {
    let (sv, h) = cached().await;
    for fop in [
        Fop::Rchecksum,
        Fop::Getxattrs,
        Fop::Setxattrs,
        Fop::ForgetClient,
    ] {
        h.fail_always(fop, Errno::ENOTCONN);
        let call = call_on(fop, rw(2));
        let reply = call.clone().send(&Ctx::root(), &sv).await;
        assert_eq!(
            reply.errno(),
            Some(Errno::ENOTCONN),
            "{fop}: the child's answer"
        );
        assert_eq!(h.take_calls(), vec![call], "{fop} went down as it came");
    }
}
