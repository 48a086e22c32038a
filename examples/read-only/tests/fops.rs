//! features/read-only over a mock child, for the whole fop table: which fops are refused and
//! which reach the child, decided by the table's attributes alone.

use xlator_api::{Ctx, Errno, Fop, Gfid, Subvol};
use xlfs_read_only::ReadOnly;
use xlfs_testkit::build::{build, options_for};
use xlfs_testkit::every_fop::call_every_fop;
use xlfs_testkit::fixtures::fd;
use xlfs_testkit::mock::{MockChild, MockHandle};

// open(2) flags (Linux values; the example has no libc dependency).
const O_RDONLY: i32 = 0;
const O_WRONLY: i32 = 1;
const O_RDWR: i32 = 2;
const O_TRUNC: i32 = 0o1000;

fn read_only(set: &[(&str, &str)]) -> (Subvol, MockHandle) {
    let (child, h) = MockChild::new();
    // Unscripted fops answer ENOTCONN: a reply that can only have come from the child.
    h.set_default_errno(Errno::ENOTCONN);
    (build::<ReadOnly>(set, vec![child]), h)
}

#[tokio::test]
async fn every_modifying_fop_is_refused_and_every_other_reaches_the_child() {
    let (ro, h) = read_only(&[]);
    // The sample open is read-write, so it modifies too.
    let replies = call_every_fop(&ro, &Ctx::root()).await;
    assert_eq!(replies.len(), Fop::COUNT);
    for (fop, r) in &replies {
        let want = if fop.modifies() {
            Errno::EROFS
        } else {
            Errno::ENOTCONN
        };
        assert_eq!(*r, Err(want), "{fop}");
    }
    let passed: Vec<Fop> = Fop::ALL.iter().copied().filter(|f| !f.modifies()).collect();
    assert_eq!(h.fops(), passed, "exactly the non-modifying fops, in order");
}

#[tokio::test]
async fn the_new_fops_are_classified_by_the_table() {
    let (ro, h) = read_only(&[]);
    let cx = Ctx::root();
    assert_eq!(
        ro.setxattrs(&cx, Gfid::ROOT, Default::default(), 0).await,
        Err(Errno::EROFS)
    );
    assert_eq!(
        ro.getxattrs(&cx, Gfid::ROOT, Default::default())
            .await
            .map(drop),
        Err(Errno::ENOTCONN)
    );
    let f = fd(1, Gfid::ROOT, O_RDONLY);
    assert_eq!(
        ro.rchecksum(&cx, f, 0, 4096).await.map(drop),
        Err(Errno::ENOTCONN)
    );
    assert_eq!(
        ro.forget_client(&cx, Default::default()).await,
        Err(Errno::ENOTCONN)
    );
    h.assert_calls(&[Fop::Getxattrs, Fop::Rchecksum, Fop::ForgetClient]);
}

#[tokio::test]
async fn open_is_refused_only_for_writing_or_truncating() {
    let (ro, h) = read_only(&[]);
    let cx = Ctx::root();
    let open = |flags| ro.open(&cx, fd(1, Gfid::ROOT, flags));
    assert_eq!(open(O_RDONLY).await.map(drop), Err(Errno::ENOTCONN));
    assert_eq!(open(O_WRONLY).await.map(drop), Err(Errno::EROFS));
    assert_eq!(open(O_RDWR).await.map(drop), Err(Errno::EROFS));
    assert_eq!(open(O_RDONLY | O_TRUNC).await.map(drop), Err(Errno::EROFS));
    h.assert_calls(&[Fop::Open]);
}

#[tokio::test]
async fn switched_off_every_fop_reaches_the_child() {
    let (ro, h) = read_only(&[]);
    ro.reconfigure(options_for::<ReadOnly>(&[("read-only", "off")]))
        .expect("reconfigure");
    for (fop, r) in call_every_fop(&ro, &Ctx::root()).await {
        assert_eq!(r, Err(Errno::ENOTCONN), "{fop}");
    }
    assert_eq!(h.fops(), Fop::ALL.to_vec());
}
