//! Hard links, symbolic links and special files.

use xlator_api::{Errno, FileType, Loc};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure_eq, expect_err};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("links", hardlink_shares_gfid_and_data, Hardlinks),
        case!("links", unlink_one_hardlink_keeps_other, Hardlinks),
        case!("links", hardlink_to_dir_is_eperm, Hardlinks),
        case!("links", hardlink_over_existing_is_eexist, Hardlinks),
        case!("links", symlink_and_readlink, Symlinks),
        case!("links", readlink_of_file_is_einval, Symlinks),
        case!("links", mknod_fifo, Mknod),
    ]
}

async fn hardlink_shares_gfid_and_data(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "a", b"").await?;
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    let l = e
        .top
        .link(&e.cx, a.gfid, Loc::new(d.gfid, "b"))
        .await
        .or_fail("link")?;
    ensure_eq!(l.attr.gfid, a.gfid, "gfid in the link reply");
    ensure_eq!(l.attr.nlink, 2, "nlink in the link reply");
    let via_a = e.lookup(e.dir, "a").await?;
    let via_b = e.lookup(d.gfid, "b").await?;
    ensure_eq!(via_b.gfid, a.gfid, "gfid through the new name");
    ensure_eq!(
        (via_a.nlink, via_b.nlink),
        (2, 2),
        "nlink through both names"
    );
    let fd = e.open(via_b.gfid, libc::O_WRONLY).await?;
    e.write(fd, 0, b"shared").await?;
    e.close(fd).await?;
    let fd = e.open(via_a.gfid, libc::O_RDONLY).await?;
    ensure_eq!(
        e.read(fd, 0, 100).await?,
        b"shared".to_vec(),
        "data written through the other name"
    );
    e.close(fd).await
}

async fn unlink_one_hardlink_keeps_other(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "a", b"kept").await?;
    e.top
        .link(&e.cx, a.gfid, Loc::new(e.dir, "b"))
        .await
        .or_fail("link")?;
    e.top
        .unlink(&e.cx, Loc::new(e.dir, "a"))
        .await
        .or_fail("unlink a")?;
    e.absent(e.dir, "a").await?;
    let b = e.lookup(e.dir, "b").await?;
    ensure_eq!(b.gfid, a.gfid, "gfid of the remaining name");
    ensure_eq!(b.nlink, 1, "nlink after unlinking one name");
    ensure_eq!(b.size, 4, "size");
    Ok(())
}

async fn hardlink_to_dir_is_eperm(e: Env) -> CaseResult {
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    let r = e.top.link(&e.cx, d.gfid, Loc::new(e.dir, "l")).await;
    expect_err(r, &[Errno::EPERM], "link to a directory")?;
    e.absent(e.dir, "l").await
}

async fn hardlink_over_existing_is_eexist(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "a", b"").await?;
    let b = e.file_with(e.dir, "b", b"").await?;
    let r = e.top.link(&e.cx, a.gfid, Loc::new(e.dir, "b")).await;
    expect_err(r, &[Errno::EEXIST], "link onto an existing name")?;
    ensure_eq!(
        e.lookup(e.dir, "b").await?.gfid,
        b.gfid,
        "existing name untouched"
    );
    ensure_eq!(e.stat(a.gfid).await?.nlink, 1, "nlink after a failed link");
    Ok(())
}

async fn symlink_and_readlink(e: Env) -> CaseResult {
    let target = "../some/where/target";
    let s = e
        .top
        .symlink(&e.cx, Loc::new(e.dir, "s"), target.into())
        .await
        .or_fail("symlink")?;
    ensure_eq!(s.attr.kind, FileType::Symlink, "kind in the symlink reply");
    let l = e.lookup(e.dir, "s").await?;
    ensure_eq!(l.gfid, s.attr.gfid, "gfid");
    ensure_eq!(l.kind, FileType::Symlink, "kind from lookup");
    ensure_eq!(
        l.size,
        target.len() as u64,
        "symlink size is the target length"
    );
    let t = e.top.readlink(&e.cx, l.gfid).await.or_fail("readlink")?;
    ensure_eq!(t.as_str(), target, "readlink");
    let r = e.top.symlink(&e.cx, Loc::new(e.dir, "s"), "x".into()).await;
    expect_err(r, &[Errno::EEXIST], "symlink over an existing name")
}

async fn readlink_of_file_is_einval(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let r = e.top.readlink(&e.cx, a.gfid).await;
    expect_err(r, &[Errno::EINVAL], "readlink of a regular file")
}

async fn mknod_fifo(e: Env) -> CaseResult {
    let r = e
        .top
        .mknod(&e.cx, Loc::new(e.dir, "fifo"), libc::S_IFIFO | 0o640, 0, 0)
        .await;
    let n = r.or_fail("mknod fifo")?;
    ensure_eq!(n.attr.kind, FileType::Fifo, "kind in the reply");
    ensure_eq!(n.attr.perm, 0o640, "perm");
    let l = e.lookup(e.dir, "fifo").await?;
    ensure_eq!((l.gfid, l.kind), (n.attr.gfid, FileType::Fifo), "lookup");
    let r = e
        .top
        .mknod(&e.cx, Loc::new(e.dir, "fifo"), libc::S_IFIFO | 0o640, 0, 0)
        .await;
    expect_err(r, &[Errno::EEXIST], "mknod over an existing name")
}
