//! Listing directories with `readdirp`.

use std::collections::{BTreeSet, HashMap};

use xlator_api::{FileType, Loc};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure, ensure_eq, new_fd};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("dir", readdirp_lists_names_with_attrs),
        case!("dir", readdirp_pages_300_entries),
        case!("dir", readdirp_of_empty_dir),
        case!("dir", readdirp_cookies_survive_unlink),
    ]
}

async fn readdirp_lists_names_with_attrs(e: Env) -> CaseResult {
    let mut want = HashMap::new();
    for i in 0..10 {
        let name = format!("file{i}");
        let a = e.file_with(e.dir, &name, &vec![1u8; i * 10]).await?;
        want.insert(name, (a.gfid, FileType::Regular, (i * 10) as u64));
    }
    for i in 0..2 {
        let name = format!("dir{i}");
        let a = e.mkdir(e.dir, &name, 0o755).await?;
        want.insert(name, (a.gfid, FileType::Directory, a.size));
    }
    let (entries, _) = e.list(e.dir, 64 * 1024).await?;
    ensure_eq!(entries.len(), want.len(), "entry count");
    for d in &entries {
        let Some((gfid, kind, size)) = want.get(d.name.as_str()) else {
            return Err(format!("unexpected entry {:?}", d.name));
        };
        ensure_eq!(d.attr.gfid, *gfid, "gfid of {}", d.name);
        ensure_eq!(d.attr.kind, *kind, "kind of {}", d.name);
        if *kind == FileType::Regular {
            ensure_eq!(d.attr.size, *size, "size of {}", d.name);
        }
    }
    let names: BTreeSet<&str> = entries.iter().map(|d| d.name.as_str()).collect();
    ensure_eq!(names.len(), entries.len(), "duplicate names in the listing");
    Ok(())
}

async fn readdirp_pages_300_entries(e: Env) -> CaseResult {
    let mut want = BTreeSet::new();
    for i in 0..300 {
        let name = format!("entry-{i:04}");
        e.file_with(e.dir, &name, b"").await?;
        want.insert(name);
    }
    let (entries, pages) = e.list(e.dir, 1024).await?;
    let got: Vec<String> = entries.iter().map(|d| d.name.to_string()).collect();
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    ensure_eq!(got.len(), 300, "entries listed");
    ensure!(
        unique == want,
        "listing differs: {} unique names",
        unique.len()
    );
    ensure!(
        pages > 1,
        "a 1 KiB readdirp returned all 300 entries in one call"
    );
    Ok(())
}

async fn readdirp_of_empty_dir(e: Env) -> CaseResult {
    let d = e.mkdir(e.dir, "empty", 0o755).await?;
    let (entries, _) = e.list(d.gfid, 4096).await?;
    ensure!(
        entries.is_empty(),
        "empty directory lists {:?}",
        entries.iter().map(|d| &d.name).collect::<Vec<_>>()
    );
    Ok(())
}

async fn readdirp_cookies_survive_unlink(e: Env) -> CaseResult {
    for i in 0..40 {
        e.file_with(e.dir, &format!("f{i:02}"), b"").await?;
    }
    let fd = new_fd(e.dir, libc::O_RDONLY | libc::O_DIRECTORY);
    e.top.opendir(&e.cx, fd).await.or_fail("opendir")?;
    let first = e
        .top
        .readdirp(&e.cx, fd, 0, 1024)
        .await
        .or_fail("readdirp")?;
    let first: Vec<_> = first
        .into_iter()
        .filter(|d| d.name != "." && d.name != "..")
        .collect();
    ensure!(
        !first.is_empty() && first.len() < 40,
        "first page has {} entries",
        first.len()
    );
    let seen: BTreeSet<String> = first.iter().map(|d| d.name.to_string()).collect();
    let cookie = first.last().map(|d| d.next_offset).unwrap_or_default();
    // Remove every entry already returned; continuing from the cookie must still work.
    for name in &seen {
        e.top
            .unlink(&e.cx, Loc::new(e.dir, name.as_str()))
            .await
            .or_fail("unlink")?;
    }
    let mut rest = BTreeSet::new();
    let mut offset = cookie;
    loop {
        let batch = e
            .top
            .readdirp(&e.cx, fd, offset, 1024)
            .await
            .or_fail("readdirp after unlink")?;
        let Some(last) = batch.last() else { break };
        offset = last.next_offset;
        for d in batch.iter().filter(|d| d.name != "." && d.name != "..") {
            ensure!(
                !seen.contains(d.name.as_str()),
                "{} listed again after its cookie",
                d.name
            );
            ensure!(rest.insert(d.name.to_string()), "{} listed twice", d.name);
        }
        ensure!(rest.len() <= 40, "listing does not end");
    }
    e.top.releasedir(&e.cx, fd).await.or_fail("releasedir")?;
    ensure_eq!(
        seen.len() + rest.len(),
        40,
        "entries seen across the unlink"
    );
    Ok(())
}
