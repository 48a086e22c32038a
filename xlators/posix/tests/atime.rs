//! Access times: an open for reading counts as an access under the brick file system's own
//! rule (a client's reads may all come from its page cache), and O_NOATIME from a client
//! (a `noatime` mount) leaves atime alone, for files and listings, whoever the caller is.

mod common;

use common::*;
use xlator_api::{Gfid, SetAttr, TimeSet, Timespec};
use xlator_api::{Iatt, Subvol};

const OLD: Timespec = Timespec {
    sec: 1_000_000,
    nsec: 0,
};

/// Sets the atime of `g` far in the past (older than its mtime: every rule updates it).
async fn age(top: &Subvol, g: Gfid) -> Iatt {
    let a = SetAttr {
        atime: TimeSet::At(OLD),
        ..SetAttr::default()
    };
    let r = top.setattr(&root(), g, a).await.expect("set atime");
    assert_eq!(r.atime, OLD);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_for_reading_marks_the_access_without_touching_ctime() {
    let (_d, top) = new_brick();
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"data").await.attr.gfid;
    let before = age(&top, g).await;
    // No read at all: the client may serve every byte from its own cache.
    let f = fd(g, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    let after = top.stat(&cx, g).await.expect("stat");
    assert!(after.atime > OLD, "the open counts as an access");
    assert_eq!(after.ctime, before.ctime, "an access leaves ctime alone");
    assert_eq!(after.mtime, before.mtime);
    top.release(&cx, f).await.expect("release");
    // Writing and truncating opens are no reads.
    age(&top, g).await;
    for flags in [libc::O_WRONLY, libc::O_RDWR | libc::O_TRUNC] {
        let f = fd(g, flags);
        top.open(&cx, f).await.expect("open for writing");
        top.release(&cx, f).await.expect("release");
    }
    assert_eq!(top.stat(&cx, g).await.expect("stat").atime, OLD);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_noatime_from_the_client_leaves_atime_alone_for_any_caller() {
    let (_d, top) = new_brick();
    let g = mkfile(&top, &root(), Gfid::ROOT, "f", b"data")
        .await
        .attr
        .gfid;
    age(&top, g).await;
    // uid 1000 does not own the file: its own open(O_NOATIME) would be EPERM, but the
    // client asks for it on behalf of a noatime mount, where the kernel already checked.
    let cx = user(1000);
    let f = fd(g, libc::O_RDONLY | libc::O_NOATIME);
    top.open(&cx, f)
        .await
        .expect("open O_NOATIME as a non-owner");
    let r = top.readv(&cx, f, 0, 4).await.expect("read");
    assert_eq!(&*r.data, b"data");
    top.release(&cx, f).await.expect("release");
    assert_eq!(top.stat(&cx, g).await.expect("stat").atime, OLD, "noatime");
    // A listing through a directory opened O_NOATIME (nodiratime) leaves it alone too;
    // one opened without it is an access.
    let d = mkdir(&top, &root(), Gfid::ROOT, "d").await.attr.gfid;
    mkfile(&top, &root(), d, "x", b"").await;
    for (flags, touched) in [(libc::O_NOATIME, false), (0, true)] {
        age(&top, d).await;
        let f = fd(d, libc::O_RDONLY | flags);
        top.opendir(&cx, f).await.expect("opendir");
        let names = top.readdirp(&cx, f, 0, 4096).await.expect("readdirp");
        assert!(names.iter().any(|e| e.name.as_str() == "x"));
        top.releasedir(&cx, f).await.expect("releasedir");
        let atime = top.stat(&cx, d).await.expect("stat dir").atime;
        assert_eq!(atime > OLD, touched, "listing with flags {flags:#x}");
    }
}
