//! Creating, finding and removing names.

use xlator_api::{Errno, FileType, Gfid, Loc};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure, ensure_eq, expect_err, new_fd};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("namespace", create_then_lookup),
        case!("namespace", create_applies_umask),
        case!("namespace", stat_matches_lookup),
        case!("namespace", lookup_missing_is_enoent),
        case!("namespace", gfid_stable_and_unique),
        case!("namespace", root_is_a_directory),
        case!("namespace", mkdir_then_lookup, DirNlink),
        case!("namespace", mkdir_existing_is_eexist),
        case!("namespace", create_excl_existing_is_eexist),
        case!("namespace", rmdir_removes_empty_dir),
        case!("namespace", rmdir_nonempty_is_enotempty),
        case!("namespace", unlink_dir_is_eisdir),
        case!("namespace", rmdir_file_is_enotdir),
        case!("namespace", unlink_removes_name),
        case!("namespace", file_as_parent_is_enotdir),
        case!("namespace", name_too_long, NameMax),
    ]
}

async fn create_then_lookup(e: Env) -> CaseResult {
    let (made, fd) = e.create(e.dir, "f", 0o644).await?;
    e.close(fd).await?;
    ensure!(!made.gfid.is_null(), "create returned the null gfid");
    ensure_eq!(made.kind, FileType::Regular, "kind after create");
    ensure_eq!(made.size, 0, "size after create");
    ensure_eq!(made.perm, 0o644, "perm after create with umask 0");
    let found = e.lookup(e.dir, "f").await?;
    ensure_eq!(found.gfid, made.gfid, "lookup gfid");
    ensure_eq!(found.kind, FileType::Regular, "lookup kind");
    ensure_eq!(found.nlink, 1, "nlink");
    Ok(())
}

async fn create_applies_umask(e: Env) -> CaseResult {
    let fd = new_fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let r = e
        .top
        .create(&e.cx, Loc::new(e.dir, "f"), fd, 0o666, 0o022)
        .await;
    let a = r.or_fail("create")?.attr;
    e.close(xlator_api::Fd { gfid: a.gfid, ..fd }).await?;
    ensure_eq!(a.perm, 0o644, "perm of 0666 & ~022");
    let d = e
        .top
        .mkdir(&e.cx, Loc::new(e.dir, "d"), 0o777, 0o027)
        .await
        .or_fail("mkdir")?;
    ensure_eq!(d.attr.perm, 0o750, "perm of dir 0777 & ~027");
    Ok(())
}

async fn stat_matches_lookup(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"hello").await?;
    let l = e.lookup(e.dir, "f").await?;
    let s = e.stat(a.gfid).await?;
    ensure_eq!(s.gfid, l.gfid, "gfid");
    ensure_eq!(s.ino, l.ino, "ino");
    ensure_eq!(s.size, 5, "size from stat");
    ensure_eq!(l.size, 5, "size from lookup");
    ensure_eq!(s.mode(), l.mode(), "mode");
    ensure_eq!(
        (s.uid, s.gid, s.nlink),
        (l.uid, l.gid, l.nlink),
        "uid, gid, nlink"
    );
    Ok(())
}

async fn lookup_missing_is_enoent(e: Env) -> CaseResult {
    let r = e.top.lookup(&e.cx, Loc::new(e.dir, "missing")).await;
    expect_err(r, &[Errno::ENOENT], "lookup of a missing name")?;
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    let r = e.top.lookup(&e.cx, Loc::new(d.gfid, "missing")).await;
    expect_err(
        r,
        &[Errno::ENOENT],
        "lookup of a missing name in a subdirectory",
    )
}

async fn gfid_stable_and_unique(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "a", b"").await?;
    let b = e.file_with(e.dir, "b", b"").await?;
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    ensure!(
        a.gfid != b.gfid && a.gfid != d.gfid && b.gfid != d.gfid,
        "gfids repeat"
    );
    for _ in 0..3 {
        ensure_eq!(
            e.lookup(e.dir, "a").await?.gfid,
            a.gfid,
            "gfid of a on relookup"
        );
        ensure_eq!(
            e.lookup(e.dir, "d").await?.gfid,
            d.gfid,
            "gfid of d on relookup"
        );
    }
    ensure_eq!(e.stat(b.gfid).await?.gfid, b.gfid, "stat by gfid");
    Ok(())
}

async fn root_is_a_directory(e: Env) -> CaseResult {
    let root = e.stat(Gfid::ROOT).await?;
    ensure!(root.is_dir(), "root is {:?}", root.kind);
    ensure_eq!(root.gfid, Gfid::ROOT, "root gfid");
    let mine = e
        .lookup(Gfid::ROOT, &e.names_of_root_entry().await?)
        .await?;
    ensure_eq!(
        mine.gfid,
        e.dir,
        "the case directory found by name in the root"
    );
    Ok(())
}

impl Env {
    /// The name of this case's directory in the root (found by listing the root).
    async fn names_of_root_entry(&self) -> Result<String, String> {
        let (entries, _) = self.list(Gfid::ROOT, 64 * 1024).await?;
        entries
            .into_iter()
            .find(|d| d.attr.gfid == self.dir)
            .map(|d| d.name.into_string())
            .ok_or_else(|| "the case directory is not listed in the root".to_owned())
    }
}

async fn mkdir_then_lookup(e: Env) -> CaseResult {
    let before = e.stat(e.dir).await?.nlink;
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    ensure_eq!(d.kind, FileType::Directory, "kind");
    ensure_eq!(d.perm, 0o755, "perm");
    ensure_eq!(d.nlink, 2, "nlink of a new directory");
    ensure_eq!(e.lookup(e.dir, "d").await?.gfid, d.gfid, "lookup gfid");
    ensure_eq!(
        e.stat(e.dir).await?.nlink,
        before + 1,
        "parent nlink after mkdir"
    );
    Ok(())
}

async fn mkdir_existing_is_eexist(e: Env) -> CaseResult {
    e.mkdir(e.dir, "d", 0o755).await?;
    e.file_with(e.dir, "f", b"").await?;
    let r = e.top.mkdir(&e.cx, Loc::new(e.dir, "d"), 0o755, 0).await;
    expect_err(r, &[Errno::EEXIST], "mkdir over a directory")?;
    let r = e.top.mkdir(&e.cx, Loc::new(e.dir, "f"), 0o755, 0).await;
    expect_err(r, &[Errno::EEXIST], "mkdir over a file")
}

async fn create_excl_existing_is_eexist(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"keep").await?;
    let fd = new_fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL);
    let r = e
        .top
        .create(&e.cx, Loc::new(e.dir, "f"), fd, 0o644, 0)
        .await;
    expect_err(r, &[Errno::EEXIST], "O_EXCL create of an existing file")?;
    let s = e.stat(a.gfid).await?;
    ensure_eq!(
        s.size,
        4,
        "size of the existing file after a failed O_EXCL create"
    );
    Ok(())
}

async fn rmdir_removes_empty_dir(e: Env) -> CaseResult {
    let before = e.stat(e.dir).await?;
    e.mkdir(e.dir, "d", 0o755).await?;
    e.top
        .rmdir(&e.cx, Loc::new(e.dir, "d"))
        .await
        .or_fail("rmdir")?;
    e.absent(e.dir, "d").await?;
    ensure_eq!(
        e.stat(e.dir).await?.nlink,
        before.nlink,
        "parent nlink after mkdir + rmdir"
    );
    ensure!(
        e.names(e.dir).await?.is_empty(),
        "directory not empty after rmdir"
    );
    Ok(())
}

async fn rmdir_nonempty_is_enotempty(e: Env) -> CaseResult {
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    e.file_with(d.gfid, "f", b"").await?;
    let r = e.top.rmdir(&e.cx, Loc::new(e.dir, "d")).await;
    expect_err(
        r,
        &[Errno::ENOTEMPTY, Errno::EEXIST],
        "rmdir of a non-empty directory",
    )?;
    ensure_eq!(
        e.lookup(e.dir, "d").await?.gfid,
        d.gfid,
        "directory still there"
    );
    Ok(())
}

async fn unlink_dir_is_eisdir(e: Env) -> CaseResult {
    e.mkdir(e.dir, "d", 0o755).await?;
    let r = e.top.unlink(&e.cx, Loc::new(e.dir, "d")).await;
    expect_err(r, &[Errno::EISDIR, Errno::EPERM], "unlink of a directory")?;
    e.lookup(e.dir, "d").await.map(drop)
}

async fn rmdir_file_is_enotdir(e: Env) -> CaseResult {
    e.file_with(e.dir, "f", b"").await?;
    let r = e.top.rmdir(&e.cx, Loc::new(e.dir, "f")).await;
    expect_err(r, &[Errno::ENOTDIR], "rmdir of a file")?;
    e.lookup(e.dir, "f").await.map(drop)
}

async fn unlink_removes_name(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"data").await?;
    e.top
        .unlink(&e.cx, Loc::new(e.dir, "f"))
        .await
        .or_fail("unlink")?;
    e.absent(e.dir, "f").await?;
    let r = e.top.stat(&e.cx, a.gfid).await;
    expect_err(
        r,
        &[Errno::ENOENT, Errno::ESTALE],
        "stat of an unlinked file's gfid",
    )?;
    let r = e.top.unlink(&e.cx, Loc::new(e.dir, "f")).await;
    expect_err(r, &[Errno::ENOENT], "second unlink")
}

async fn file_as_parent_is_enotdir(e: Env) -> CaseResult {
    let f = e.file_with(e.dir, "f", b"").await?;
    let r = e.top.lookup(&e.cx, Loc::new(f.gfid, "x")).await;
    expect_err(r, &[Errno::ENOTDIR], "lookup under a file")?;
    let r = e.top.mkdir(&e.cx, Loc::new(f.gfid, "x"), 0o755, 0).await;
    expect_err(r, &[Errno::ENOTDIR], "mkdir under a file")
}

async fn name_too_long(e: Env) -> CaseResult {
    let long = "n".repeat(256);
    let fd = new_fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let r = e
        .top
        .create(&e.cx, Loc::new(e.dir, long.as_str()), fd, 0o644, 0)
        .await;
    expect_err(r, &[Errno::ENAMETOOLONG], "create with a 256-byte name")?;
    let r = e
        .top
        .mkdir(&e.cx, Loc::new(e.dir, long.as_str()), 0o755, 0)
        .await;
    expect_err(r, &[Errno::ENAMETOOLONG], "mkdir with a 256-byte name")?;
    let r = e.top.lookup(&e.cx, Loc::new(e.dir, long.as_str())).await;
    expect_err(
        r,
        &[Errno::ENAMETOOLONG, Errno::ENOENT],
        "lookup of a 256-byte name",
    )?;
    let ok = "n".repeat(255);
    e.file_with(e.dir, &ok, b"").await?;
    ensure_eq!(e.names(e.dir).await?, vec![ok], "a 255-byte name works");
    Ok(())
}
