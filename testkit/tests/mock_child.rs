//! Mock-child tests: a translator defined here sits over a `MockChild`; we assert exactly which
//! fops reached the child and that scripted replies and errors come back up.

use std::time::{Duration, Instant};

use abi_stable::std_types::RVec;
use xlator_api::{
    Buf, Ctx, Entry, Errno, Fd, FdId, Fop, Gfid, Iatt, Init, InitArgs, Loc, Options, ReadReply,
    Subvol, Translator, WriteReply,
};
use xlfs_testkit::mock::{FopCall, FopReply, MockChild, MockHandle};

/// A layer that refuses writes itself (EROFS) and passes everything else down.
struct ReadOnly {
    children: Vec<Subvol>,
}

impl Translator for ReadOnly {
    const TYPE: &'static str = "test/read-only";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(ReadOnly {
            children: init.children,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn writev(
        &self,
        _cx: &Ctx,
        _fd: Fd,
        _off: u64,
        _data: Buf,
        _flags: i32,
    ) -> Result<WriteReply, Errno> {
        Err(Errno::EROFS)
    }
}

/// `test/read-only` over a fresh mock.
fn stack() -> (Subvol, MockHandle) {
    let (child, handle) = MockChild::new();
    let args = InitArgs {
        name: "ro".into(),
        options: Options::new(),
        children: RVec::from(vec![child]),
        services: xlfs_core::services::host_services(),
    };
    let top = xlator_api::sdk::instantiate::<ReadOnly>(args).expect("init");
    (top, handle)
}

fn fd(gfid: Gfid) -> Fd {
    Fd {
        id: FdId(7),
        gfid,
        flags: libc::O_RDWR,
    }
}

fn entry(ino: u64) -> Entry {
    Entry::new(Iatt {
        gfid: Gfid::random(),
        ino,
        ..Iatt::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_fops_down_and_records_arguments() {
    let (top, handle) = stack();
    let cx = Ctx::root();
    let loc = Loc::new(Gfid::ROOT, "a");
    let _ = top.lookup(&cx, loc.clone()).await;
    let _ = top.readv(&cx, fd(Gfid::ROOT), 10, 20).await;
    handle.assert_calls(&[Fop::Lookup, Fop::Readv]);
    assert_eq!(
        handle.calls(),
        vec![
            FopCall::Lookup { loc },
            FopCall::Readv {
                fd: fd(Gfid::ROOT),
                offset: 10,
                size: 20
            },
        ]
    );
    assert_eq!(handle.take_calls().len(), 2);
    handle.assert_no_calls();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_fops_never_reach_the_child() {
    let (top, handle) = stack();
    let r = top
        .writev(&Ctx::root(), fd(Gfid::ROOT), 0, Buf::from("x"), 0)
        .await;
    assert_eq!(r, Err(Errno::EROFS));
    handle.assert_no_calls();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_replies_and_errors_come_back_up_in_order() {
    let (top, handle) = stack();
    let (e1, e2) = (entry(1), entry(2));
    handle
        .reply(FopReply::Lookup(Ok(e1.clone())))
        .reply(FopReply::Lookup(Ok(e2.clone())));
    handle.fail(Fop::Readv, Errno::EIO);
    let cx = Ctx::root();
    let loc = Loc::new(Gfid::ROOT, "x");
    assert_eq!(top.lookup(&cx, loc.clone()).await, Ok(e1));
    assert_eq!(top.lookup(&cx, loc.clone()).await, Ok(e2));
    assert_eq!(top.readv(&cx, fd(Gfid::ROOT), 0, 1).await, Err(Errno::EIO));
    assert_eq!(handle.pending_replies(), 0);
    // Script exhausted: back to the default.
    assert_eq!(top.lookup(&cx, loc).await, Err(Errno::ENOSYS));
    handle.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_error_is_configurable() {
    let (top, handle) = stack();
    handle.set_default_errno(Errno::ENOTCONN);
    assert_eq!(
        top.statfs(&Ctx::root(), Gfid::ROOT).await,
        Err(Errno::ENOTCONN)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_computes_replies_from_arguments() {
    let (top, handle) = stack();
    handle.on(Fop::Readv, |call| match call {
        FopCall::Readv { size, .. } => {
            FopReply::Readv(Ok(ReadReply::data(Buf::zeroed(*size as usize / 2))))
        }
        _ => FopReply::error(Fop::Readv, Errno::EINVAL),
    });
    let r = top
        .readv(&Ctx::root(), fd(Gfid::ROOT), 0, 100)
        .await
        .expect("readv");
    assert_eq!(r.data.len(), 50);
    // A queued reply takes precedence over the handler.
    handle.fail(Fop::Readv, Errno::EBADF);
    assert_eq!(
        top.readv(&Ctx::root(), fd(Gfid::ROOT), 0, 10).await,
        Err(Errno::EBADF)
    );
    handle.clear_handler(Fop::Readv);
    assert_eq!(
        top.readv(&Ctx::root(), fd(Gfid::ROOT), 0, 10).await,
        Err(Errno::ENOSYS)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_the_callers_context() {
    let (top, handle) = stack();
    let cx = Ctx::builder(1000, 100).groups(&[5]).pid(42).build();
    let _ = top.stat(&cx, Gfid::ROOT).await;
    let rec = handle.records();
    assert_eq!(rec.len(), 1);
    assert_eq!(
        (rec[0].ctx.uid(), rec[0].ctx.gid(), rec[0].ctx.pid()),
        (1000, 100, 42)
    );
    assert_eq!(rec[0].ctx.groups(), &[5]);
    assert_eq!(rec[0].call, FopCall::Stat { gfid: Gfid::ROOT });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_holds_replies_until_released() {
    let (top, handle) = stack();
    handle.hold(Fop::Readv);
    handle.on(Fop::Readv, |_| {
        FopReply::Readv(Ok(ReadReply::data(Buf::from("ok"))))
    });
    let mut tasks = Vec::new();
    for i in 0..3u64 {
        let top = top.clone();
        tasks.push(tokio::spawn(async move {
            top.readv(&Ctx::root(), fd(Gfid::ROOT), i, 2).await
        }));
    }
    handle.wait_for(Fop::Readv, 3).await;
    // Arrival is recorded before the gate; give the calls time to reach it.
    while handle.held(Fop::Readv) < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "a held call completed"
    );
    handle.release(Fop::Readv, 1);
    while handle.held(Fop::Readv) > 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(tasks.iter().filter(|t| t.is_finished()).count(), 1);
    handle.open_gate(Fop::Readv);
    for t in tasks {
        assert_eq!(
            t.await.expect("task").map(|b| b.data.to_vec()),
            Ok(b"ok".to_vec())
        );
    }
    assert_eq!(handle.held(Fop::Readv), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_slows_replies() {
    let (top, handle) = stack();
    handle.delay(Fop::Stat, Duration::from_millis(60));
    let start = Instant::now();
    assert_eq!(top.stat(&Ctx::root(), Gfid::ROOT).await, Err(Errno::ENOSYS));
    assert!(start.elapsed() >= Duration::from_millis(60));
    handle.delay(Fop::Stat, Duration::ZERO);
    let start = Instant::now();
    let _ = top.stat(&Ctx::root(), Gfid::ROOT).await;
    assert!(start.elapsed() < Duration::from_millis(60));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_fop_reply_is_eio_and_reported() {
    let (top, handle) = stack();
    handle.on(Fop::Stat, |_| FopReply::Statfs(Err(Errno::EIO)));
    assert_eq!(top.stat(&Ctx::root(), Gfid::ROOT).await, Err(Errno::EIO));
    let verify = std::panic::catch_unwind(|| handle.verify());
    assert!(verify.is_err(), "verify accepted a reply for the wrong fop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_reports_unconsumed_replies() {
    let (_top, handle) = stack();
    handle.fail(Fop::Open, Errno::EIO);
    assert!(std::panic::catch_unwind(|| handle.verify()).is_err());
    let assert = std::panic::catch_unwind(|| handle.assert_calls(&[Fop::Open]));
    assert!(
        assert.is_err(),
        "assert_calls accepted a call that never happened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_finds_the_instance_by_name() {
    let (child, handle) = MockChild::new();
    let again = MockHandle::attach(handle.name()).expect("registered");
    let _ = child.access(&Ctx::root(), Gfid::ROOT, 4).await;
    again.assert_calls(&[Fop::Access]);
    assert!(MockHandle::attach("no-such-mock").is_none());
}

#[test]
fn fop_call_and_reply_name_their_fop() {
    let call = FopCall::Flush { fd: fd(Gfid::ROOT) };
    assert_eq!(call.fop(), Fop::Flush);
    for f in Fop::ALL {
        let r = FopReply::error(*f, Errno::EIO);
        assert_eq!((r.fop(), r.errno()), (*f, Some(Errno::EIO)));
    }
    assert_eq!(FopReply::Flush(Ok(())).errno(), None);
}
