//! An object with many small xattrs (xfstests generic/020, MAX_ATTRS = 1000 for FUSE): set,
//! list (a listing far past the first buffer: the brick grows it on ERANGE up to the
//! kernel's 64 KiB limit), get one by one, get all at once (`getxattrs`), and in a lookup
//! reply by prefix (`XattrReq`). How many fit is the brick file system's limit (ext4 with
//! 4 KiB blocks: about a hundred such names on one inode); past it the file system's ENOSPC
//! (or E2BIG) comes back as it is, and what was set stays readable.

mod common;

use std::path::Path;

use common::*;
use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Errno, Gfid, Subvol, Xattr, XattrReq};

const WANTED: usize = 1000;

fn name(i: usize) -> String {
    format!("user.attribute_{i}")
}

fn value(i: usize) -> Vec<u8> {
    format!("value_{i}").into_bytes()
}

/// Sets up to [`WANTED`] xattrs on a new file of the brick at `dir` and checks every way of
/// reading them. Returns how many the file system took.
async fn fill_and_read(dir: &Path) -> usize {
    let top: Subvol = brick_at(dir);
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await.attr.gfid;
    let mut set = 0;
    for i in 0..WANTED {
        let x = Xattr {
            name: name(i).into(),
            value: Buf::from_vec(value(i)),
        };
        match top.setxattr(&cx, g, x, libc::XATTR_CREATE).await {
            Ok(()) => set += 1,
            Err(e) => {
                assert!(
                    matches!(e, Errno::ENOSPC | Errno::E2BIG),
                    "the file system's own limit, not {e:?}"
                );
                break;
            }
        }
    }
    let mut listed: Vec<String> = top
        .listxattr(&cx, g)
        .await
        .expect("listxattr")
        .into_iter()
        .map(|n| n.into())
        .filter(|n: &String| n.starts_with("user.attribute_"))
        .collect();
    listed.sort();
    let mut want: Vec<String> = (0..set).map(name).collect();
    want.sort();
    assert_eq!(listed, want);
    for i in 0..set {
        let v = top
            .getxattr(&cx, g, name(i).into())
            .await
            .expect("getxattr");
        assert_eq!(v.as_slice(), value(i).as_slice());
    }
    let names: RVec<RString> = (0..set).map(|i| RString::from(name(i))).collect();
    let all = top.getxattrs(&cx, g, names).await.expect("getxattrs");
    assert_eq!(all.len(), set);
    let ask = cx
        .to_builder()
        .ext(&XattrReq {
            names: vec![],
            prefixes: vec!["user.attribute_".into()],
        })
        .build();
    let e = top
        .lookup(&ask, loc(Gfid::ROOT, "f"))
        .await
        .expect("lookup");
    assert_eq!(e.xattrs.len(), set);
    for x in e.xattrs.iter() {
        let i: usize = x.name["user.attribute_".len()..].parse().expect("a number");
        assert_eq!(x.value.as_slice(), value(i).as_slice());
    }
    set
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_many_xattrs_as_the_file_system_holds_set_list_and_read_back() {
    let d = tempfile::tempdir().expect("tempdir");
    let n = fill_and_read(d.path()).await;
    assert!(n > 0);
}

/// tmpfs holds all of them (user xattrs on tmpfs: Linux 6.6); skipped without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_xattrs_on_a_brick_that_holds_them() {
    let Ok(d) = tempfile::tempdir_in("/dev/shm") else {
        return;
    };
    let probe = d.path().join("probe");
    std::fs::write(&probe, b"").expect("probe");
    let ok = xattr_probe(&probe);
    std::fs::remove_file(&probe).expect("remove probe");
    if !ok {
        return;
    }
    assert_eq!(fill_and_read(d.path()).await, WANTED);
}

/// Whether `p`'s file system takes [`WANTED`] user xattrs and the brick's trusted ones.
fn xattr_probe(p: &Path) -> bool {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    let set = |n: &str, v: &[u8]| {
        let Ok(n) = CString::new(n) else { return false };
        // SAFETY: NUL-terminated strings and a buffer of `v.len()` readable bytes.
        unsafe { libc::setxattr(path.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) == 0 }
    };
    set("trusted.probe", b"1") && (0..WANTED).all(|i| set(&name(i), &value(i)))
}
