//! `xlator_api::reopen_fd`: a cluster translator's way to open an fd again on a child that came
//! back after a disconnect. It must reuse the fd id and flags, minus the flags that would change
//! the file or fail on an existing one.

use xlator_api::{Ctx, Fd, FdId, Fop, Gfid, reopen_fd};
use xlfs_testkit::mock::{FopCall, MockChild};

#[tokio::test]
async fn reopen_reuses_the_fd_without_create_exclusive_or_truncate() {
    let (child, h) = MockChild::new();
    h.fail(Fop::Open, xlator_api::Errno::ENOENT);
    let gfid = Gfid::random();
    let fd = Fd {
        id: FdId(42),
        gfid,
        flags: libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_APPEND,
    };
    // The child's answer comes back as is.
    assert_eq!(
        reopen_fd(&child, &Ctx::root(), fd, false).await,
        Err(xlator_api::Errno::ENOENT)
    );
    let _ = reopen_fd(
        &child,
        &Ctx::root(),
        Fd {
            flags: libc::O_RDONLY,
            ..fd
        },
        true,
    )
    .await;
    let calls = h.calls();
    let [FopCall::Open { fd: again }, FopCall::Opendir { fd: dir }] = calls.as_slice() else {
        panic!("expected an open then an opendir, got {calls:?}")
    };
    assert_eq!((again.id, again.gfid), (FdId(42), gfid));
    assert_eq!(again.flags, libc::O_RDWR | libc::O_APPEND);
    assert_eq!((dir.id, dir.flags), (FdId(42), libc::O_RDONLY));
}
