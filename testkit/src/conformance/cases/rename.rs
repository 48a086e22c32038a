//! `rename` of files and directories.

use xlator_api::{Errno, Loc};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure, ensure_eq, expect_err};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("rename", rename_file_in_same_dir),
        case!("rename", rename_file_across_dirs),
        case!("rename", rename_over_existing_file),
        case!("rename", rename_dir_keeps_children),
        case!("rename", rename_dir_over_empty_dir),
        case!("rename", rename_dir_over_nonempty_dir_fails),
        case!("rename", rename_type_mismatch),
        case!("rename", rename_dir_into_own_subtree_is_einval),
        case!("rename", rename_missing_is_enoent),
        case!("rename", rename_to_same_name_is_noop),
    ]
}

impl Env {
    async fn rename(
        &self,
        old: (xlator_api::Gfid, &str),
        new: (xlator_api::Gfid, &str),
    ) -> Result<(), Errno> {
        self.top
            .rename(&self.cx, Loc::new(old.0, old.1), Loc::new(new.0, new.1), 0)
            .await
    }
}

async fn rename_file_in_same_dir(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "old", b"content").await?;
    e.rename((e.dir, "old"), (e.dir, "new"))
        .await
        .or_fail("rename")?;
    e.absent(e.dir, "old").await?;
    ensure_eq!(
        e.lookup(e.dir, "new").await?.gfid,
        a.gfid,
        "gfid under the new name"
    );
    ensure_eq!(
        e.names(e.dir).await?,
        vec!["new".to_owned()],
        "listing after rename"
    );
    Ok(())
}

async fn rename_file_across_dirs(e: Env) -> CaseResult {
    let d1 = e.mkdir(e.dir, "d1", 0o755).await?;
    let d2 = e.mkdir(e.dir, "d2", 0o755).await?;
    let a = e.file_with(d1.gfid, "f", b"x").await?;
    e.rename((d1.gfid, "f"), (d2.gfid, "g"))
        .await
        .or_fail("rename across directories")?;
    e.absent(d1.gfid, "f").await?;
    ensure_eq!(
        e.lookup(d2.gfid, "g").await?.gfid,
        a.gfid,
        "gfid in the new directory"
    );
    ensure_eq!(e.stat(a.gfid).await?.size, 1, "size after the move");
    Ok(())
}

async fn rename_over_existing_file(e: Env) -> CaseResult {
    let src = e.file_with(e.dir, "src", b"source").await?;
    let dst = e.file_with(e.dir, "dst", b"target!!").await?;
    e.rename((e.dir, "src"), (e.dir, "dst"))
        .await
        .or_fail("rename over a file")?;
    e.absent(e.dir, "src").await?;
    let now = e.lookup(e.dir, "dst").await?;
    ensure_eq!(now.gfid, src.gfid, "dst now names the source");
    ensure_eq!(now.size, 6, "size of dst");
    ensure!(
        now.gfid != dst.gfid,
        "the replaced file is still reachable by name"
    );
    ensure_eq!(
        e.names(e.dir).await?,
        vec!["dst".to_owned()],
        "listing after replacing rename"
    );
    Ok(())
}

async fn rename_dir_keeps_children(e: Env) -> CaseResult {
    let a = e.mkdir(e.dir, "a", 0o755).await?;
    let sub = e.mkdir(a.gfid, "sub", 0o755).await?;
    let f = e.file_with(sub.gfid, "f", b"deep").await?;
    let b = e.mkdir(e.dir, "b", 0o755).await?;
    e.rename((e.dir, "a"), (b.gfid, "moved"))
        .await
        .or_fail("rename of a directory")?;
    e.absent(e.dir, "a").await?;
    ensure_eq!(
        e.lookup(b.gfid, "moved").await?.gfid,
        a.gfid,
        "moved dir gfid"
    );
    ensure_eq!(
        e.lookup(a.gfid, "sub").await?.gfid,
        sub.gfid,
        "child of the moved dir"
    );
    ensure_eq!(
        e.lookup(sub.gfid, "f").await?.gfid,
        f.gfid,
        "grandchild of the moved dir"
    );
    let up = e.lookup(a.gfid, "..").await;
    if let Ok(parent) = up {
        ensure_eq!(parent.gfid, b.gfid, "\"..\" of the moved dir");
    }
    Ok(())
}

async fn rename_dir_over_empty_dir(e: Env) -> CaseResult {
    let src = e.mkdir(e.dir, "src", 0o755).await?;
    e.file_with(src.gfid, "inside", b"").await?;
    e.mkdir(e.dir, "dst", 0o755).await?;
    e.rename((e.dir, "src"), (e.dir, "dst"))
        .await
        .or_fail("rename dir over an empty dir")?;
    e.absent(e.dir, "src").await?;
    let now = e.lookup(e.dir, "dst").await?;
    ensure_eq!(now.gfid, src.gfid, "dst names the source dir");
    ensure_eq!(
        e.names(now.gfid).await?,
        vec!["inside".to_owned()],
        "contents moved along"
    );
    Ok(())
}

async fn rename_dir_over_nonempty_dir_fails(e: Env) -> CaseResult {
    let src = e.mkdir(e.dir, "src", 0o755).await?;
    let dst = e.mkdir(e.dir, "dst", 0o755).await?;
    e.file_with(dst.gfid, "busy", b"").await?;
    let r = e.rename((e.dir, "src"), (e.dir, "dst")).await;
    expect_err(
        r,
        &[Errno::ENOTEMPTY, Errno::EEXIST],
        "rename over a non-empty dir",
    )?;
    ensure_eq!(
        e.lookup(e.dir, "src").await?.gfid,
        src.gfid,
        "source still there"
    );
    ensure_eq!(
        e.lookup(e.dir, "dst").await?.gfid,
        dst.gfid,
        "target still there"
    );
    Ok(())
}

async fn rename_type_mismatch(e: Env) -> CaseResult {
    e.mkdir(e.dir, "d", 0o755).await?;
    e.file_with(e.dir, "f", b"").await?;
    let r = e.rename((e.dir, "d"), (e.dir, "f")).await;
    expect_err(r, &[Errno::ENOTDIR], "rename of a dir over a file")?;
    let r = e.rename((e.dir, "f"), (e.dir, "d")).await;
    expect_err(r, &[Errno::EISDIR], "rename of a file over a dir")?;
    ensure_eq!(
        e.names(e.dir).await?,
        vec!["d".to_owned(), "f".to_owned()],
        "both names left alone"
    );
    Ok(())
}

async fn rename_dir_into_own_subtree_is_einval(e: Env) -> CaseResult {
    let a = e.mkdir(e.dir, "a", 0o755).await?;
    let b = e.mkdir(a.gfid, "b", 0o755).await?;
    let r = e.rename((e.dir, "a"), (b.gfid, "a")).await;
    expect_err(
        r,
        &[Errno::EINVAL],
        "rename of a dir into its own subdirectory",
    )?;
    let r = e.rename((e.dir, "a"), (a.gfid, "self")).await;
    expect_err(r, &[Errno::EINVAL], "rename of a dir into itself")?;
    ensure_eq!(
        e.lookup(e.dir, "a").await?.gfid,
        a.gfid,
        "dir still in place"
    );
    Ok(())
}

async fn rename_missing_is_enoent(e: Env) -> CaseResult {
    let r = e.rename((e.dir, "missing"), (e.dir, "other")).await;
    expect_err(r, &[Errno::ENOENT], "rename of a missing name")?;
    e.absent(e.dir, "other").await
}

async fn rename_to_same_name_is_noop(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"same").await?;
    e.rename((e.dir, "f"), (e.dir, "f"))
        .await
        .or_fail("rename onto itself")?;
    ensure_eq!(
        e.lookup(e.dir, "f").await?.gfid,
        a.gfid,
        "gfid after a self-rename"
    );
    ensure_eq!(e.stat(a.gfid).await?.size, 4, "size after a self-rename");
    Ok(())
}
