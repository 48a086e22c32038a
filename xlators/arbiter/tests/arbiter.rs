//! features/arbiter over an in-memory leaf: writes keep sizes and times but store no bytes,
//! reads answer EIO, concurrent extending writes never shrink a file, and the size-only
//! data fops follow the brick's size rules.

use xlator_api::{Buf, Ctx, Errno, Fd, Gfid, Loc, SeekWhat, Subvol};
use xlfs_arbiter::Arbiter;
use xlfs_testkit::MemLeaf;
use xlfs_testkit::build::build;
use xlfs_testkit::fixtures::fd;

async fn file(top: &Subvol, name: &str, id: u64) -> Fd {
    let f = fd(id, Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let e = top
        .create(&Ctx::root(), Loc::new(Gfid::ROOT, name), f, 0o644, 0)
        .await
        .expect("create");
    Fd {
        gfid: e.attr.gfid,
        ..f
    }
}

/// What the leaf holds: every byte of the file, read below the arbiter.
async fn stored(leaf: &Subvol, f: Fd) -> Vec<u8> {
    let size = leaf.fstat(&Ctx::root(), f).await.expect("fstat").size;
    leaf.readv(&Ctx::root(), f, 0, size as u32)
        .await
        .expect("read below")
        .data
        .to_vec()
}

#[tokio::test]
async fn writes_keep_the_size_and_store_no_data() {
    let leaf = MemLeaf::new();
    let top = build::<Arbiter>(&[], vec![leaf.clone()]);
    let cx = Ctx::root();
    let f = file(&top, "f", 1).await;
    let before = top.fstat(&cx, f).await.expect("fstat");
    let w = top
        .writev(&cx, f, 4096, Buf::from_vec(vec![7; 1000]), 0)
        .await
        .expect("write");
    assert_eq!(w.written, 1000);
    let after = w.attr.into_option().expect("attributes");
    assert_eq!(after.size, 5096);
    assert!(after.mtime >= before.mtime);
    // A write inside the file changes no size.
    let w = top
        .writev(&cx, f, 10, Buf::from_vec(vec![9; 10]), 0)
        .await
        .expect("write");
    assert_eq!(w.attr.into_option().expect("attributes").size, 5096);
    assert!(
        stored(&leaf, f).await.iter().all(|b| *b == 0),
        "data reached the brick"
    );
    for r in [
        top.readv(&cx, f, 0, 10).await.map(|_| ()),
        top.seek(&cx, f, 0, SeekWhat::Data).await.map(|_| ()),
        top.rchecksum(&cx, f, 0, 10).await.map(|_| ()),
    ] {
        assert_eq!(r, Err(Errno::EIO));
    }
}

#[tokio::test]
async fn appends_grow_by_their_length() {
    let leaf = MemLeaf::new();
    let top = build::<Arbiter>(&[], vec![leaf]);
    let cx = Ctx::root();
    let f = file(&top, "a", 2).await;
    let f = Fd {
        flags: f.flags | libc::O_APPEND,
        ..f
    };
    for _ in 0..3 {
        top.writev(&cx, f, 0, Buf::from_vec(vec![1; 100]), 0)
            .await
            .expect("append");
    }
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_extending_writes_never_shrink_the_file() {
    // fstat held below: without the per-file lock, the writes would all read the old size
    // and the last size set would win.
    let (spy, handle) = xlfs_testkit::MockChild::spy(MemLeaf::new());

    let top = build::<Arbiter>(&[], vec![spy]);
    let cx = Ctx::root();
    let f = file(&top, "c", 3).await;
    handle.hold(xlator_api::Fop::Fstat);
    handle.delay(
        xlator_api::Fop::Fsetattr,
        std::time::Duration::from_millis(5),
    );
    let writes = (0..64u64).rev().map(|k| {
        let (top, cx) = (top.clone(), cx.clone());
        async move {
            top.writev(&cx, f, k * 4096, Buf::from_vec(vec![1; 4096]), 0)
                .await
                .expect("write")
        }
    });
    let handles: Vec<_> = writes.map(tokio::spawn).collect();
    // Every write that can read the size before another sets it does so now.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    handle.open_gate(xlator_api::Fop::Fstat);
    for h in handles {
        h.await.expect("join");
    }
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 64 * 4096);
}

#[tokio::test]
async fn size_only_fops_follow_the_size_rules() {
    let leaf = MemLeaf::new();
    let top = build::<Arbiter>(&[], vec![leaf.clone()]);
    let cx = Ctx::root();
    let f = file(&top, "z", 4).await;
    top.zerofill(&cx, f, 100, 50).await.expect("zerofill");
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 150);
    top.fallocate(&cx, f, libc::FALLOC_FL_KEEP_SIZE, 0, 1 << 20)
        .await
        .expect("fallocate keep size");
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 150);
    top.fallocate(&cx, f, 0, 0, 1000).await.expect("fallocate");
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 1000);
    top.discard(&cx, f, 0, 1000).await.expect("discard");
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 1000);
    // Truncation goes through.
    let cut = xlator_api::SetAttr {
        size: xlator_api::abi_stable::std_types::ROption::RSome(10),
        ..Default::default()
    };
    assert_eq!(top.fsetattr(&cx, f, cut).await.expect("truncate").size, 10);
    assert!(stored(&leaf, f).await.iter().all(|b| *b == 0));
}
