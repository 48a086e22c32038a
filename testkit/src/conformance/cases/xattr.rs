//! Extended attributes.

use abi_stable::std_types::RString;
use xlator_api::{Buf, Errno, Gfid, Xattr, XattropOp};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure, ensure_eq, expect_err};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("xattr", set_get_list_remove, Xattrs),
        case!("xattr", missing_is_enodata, Xattrs),
        case!("xattr", create_and_replace_flags, Xattrs),
        case!("xattr", through_fd, Xattrs),
        case!("xattr", on_directory, Xattrs),
        case!("xattr", xattrop_adds_counters, Xattrop),
    ]
}

fn x(name: &str, value: &[u8]) -> Xattr {
    Xattr {
        name: name.into(),
        value: Buf::copy_from_slice(value),
    }
}

impl Env {
    async fn user_names(&self, gfid: Gfid) -> Result<Vec<String>, String> {
        let all = self
            .top
            .listxattr(&self.cx, gfid)
            .await
            .or_fail("listxattr")?;
        let mut v: Vec<String> = all
            .into_iter()
            .map(RString::into_string)
            .filter(|n| n.starts_with("user."))
            .collect();
        v.sort();
        Ok(v)
    }
}

async fn set_get_list_remove(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    e.top
        .setxattr(&e.cx, a.gfid, x("user.one", b"1"), 0)
        .await
        .or_fail("setxattr one")?;
    e.top
        .setxattr(&e.cx, a.gfid, x("user.two", &[0, 1, 2, 255]), 0)
        .await
        .or_fail("setxattr two")?;
    let v = e
        .top
        .getxattr(&e.cx, a.gfid, "user.two".into())
        .await
        .or_fail("getxattr")?;
    ensure_eq!(v.to_vec(), vec![0, 1, 2, 255], "binary value");
    ensure_eq!(
        e.user_names(a.gfid).await?,
        vec!["user.one".to_owned(), "user.two".to_owned()],
        "listxattr"
    );
    e.top
        .setxattr(&e.cx, a.gfid, x("user.one", b"changed"), 0)
        .await
        .or_fail("overwrite")?;
    let v = e
        .top
        .getxattr(&e.cx, a.gfid, "user.one".into())
        .await
        .or_fail("getxattr")?;
    ensure_eq!(v.to_vec(), b"changed".to_vec(), "overwritten value");
    e.top
        .removexattr(&e.cx, a.gfid, "user.one".into())
        .await
        .or_fail("removexattr")?;
    ensure_eq!(
        e.user_names(a.gfid).await?,
        vec!["user.two".to_owned()],
        "listxattr after remove"
    );
    Ok(())
}

async fn missing_is_enodata(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let r = e.top.getxattr(&e.cx, a.gfid, "user.missing".into()).await;
    expect_err(r, &[Errno::ENODATA], "getxattr of a missing name")?;
    let r = e
        .top
        .removexattr(&e.cx, a.gfid, "user.missing".into())
        .await;
    expect_err(r, &[Errno::ENODATA], "removexattr of a missing name")
}

async fn create_and_replace_flags(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let r = e
        .top
        .setxattr(&e.cx, a.gfid, x("user.k", b"v"), libc::XATTR_REPLACE)
        .await;
    expect_err(r, &[Errno::ENODATA], "XATTR_REPLACE of a missing name")?;
    e.top
        .setxattr(&e.cx, a.gfid, x("user.k", b"v1"), libc::XATTR_CREATE)
        .await
        .or_fail("XATTR_CREATE")?;
    let r = e
        .top
        .setxattr(&e.cx, a.gfid, x("user.k", b"v2"), libc::XATTR_CREATE)
        .await;
    expect_err(r, &[Errno::EEXIST], "XATTR_CREATE of an existing name")?;
    e.top
        .setxattr(&e.cx, a.gfid, x("user.k", b"v3"), libc::XATTR_REPLACE)
        .await
        .or_fail("XATTR_REPLACE")?;
    let v = e
        .top
        .getxattr(&e.cx, a.gfid, "user.k".into())
        .await
        .or_fail("getxattr")?;
    ensure_eq!(v.to_vec(), b"v3".to_vec(), "value after XATTR_REPLACE");
    Ok(())
}

async fn through_fd(e: Env) -> CaseResult {
    let (a, fd) = e.create(e.dir, "f", 0o644).await?;
    e.top
        .fsetxattr(&e.cx, fd, x("user.fd", b"via fd"), 0)
        .await
        .or_fail("fsetxattr")?;
    let v = e
        .top
        .getxattr(&e.cx, a.gfid, "user.fd".into())
        .await
        .or_fail("getxattr")?;
    ensure_eq!(v.to_vec(), b"via fd".to_vec(), "value set through the fd");
    let v = e
        .top
        .fgetxattr(&e.cx, fd, "user.fd".into())
        .await
        .or_fail("fgetxattr")?;
    ensure_eq!(v.to_vec(), b"via fd".to_vec(), "value read through the fd");
    e.top
        .fremovexattr(&e.cx, fd, "user.fd".into())
        .await
        .or_fail("fremovexattr")?;
    let r = e.top.fgetxattr(&e.cx, fd, "user.fd".into()).await;
    expect_err(r, &[Errno::ENODATA], "fgetxattr after fremovexattr")?;
    e.close(fd).await
}

async fn on_directory(e: Env) -> CaseResult {
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    e.top
        .setxattr(&e.cx, d.gfid, x("user.dir", b"yes"), 0)
        .await
        .or_fail("setxattr on a dir")?;
    let v = e
        .top
        .getxattr(&e.cx, d.gfid, "user.dir".into())
        .await
        .or_fail("getxattr on a dir")?;
    ensure_eq!(v.to_vec(), b"yes".to_vec(), "directory xattr");
    let f = e.file_with(d.gfid, "f", b"").await?;
    ensure!(
        e.user_names(f.gfid).await?.is_empty(),
        "a new file inherited user xattrs"
    );
    Ok(())
}

async fn xattrop_adds_counters(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let lanes = |v: &[u32]| v.iter().flat_map(|n| n.to_be_bytes()).collect::<Vec<u8>>();
    let op = |v: &[u32]| vec![x("trusted.test.pending", &lanes(v))].into();
    let r = e
        .top
        .xattrop(&e.cx, a.gfid, XattropOp::AddArray32, op(&[1, 2, 3]))
        .await
        .or_fail("xattrop")?;
    ensure_eq!(
        r.first().map(|x| x.value.to_vec()),
        Some(lanes(&[1, 2, 3])),
        "first xattrop result"
    );
    let r = e
        .top
        .xattrop(&e.cx, a.gfid, XattropOp::AddArray32, op(&[1, u32::MAX, 0]))
        .await
        .or_fail("xattrop")?;
    ensure_eq!(
        r.first().map(|x| x.value.to_vec()),
        Some(lanes(&[2, 1, 3])),
        "second xattrop (wrapping)"
    );
    let v = e
        .top
        .getxattr(&e.cx, a.gfid, "trusted.test.pending".into())
        .await
        .or_fail("getxattr")?;
    ensure_eq!(v.to_vec(), lanes(&[2, 1, 3]), "stored counters");
    let big = vec![x("trusted.test.big", &7u64.to_be_bytes())].into();
    let r = e
        .top
        .xattrop(&e.cx, a.gfid, XattropOp::AddArray64, big)
        .await
        .or_fail("xattrop 64")?;
    ensure_eq!(
        r.first().map(|x| x.value.to_vec()),
        Some(7u64.to_be_bytes().to_vec()),
        "64-bit lane"
    );
    Ok(())
}
