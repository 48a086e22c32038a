//! Entry heal of a directory: the sinks' names made equal to the source's, each new object
//! with the source's GFID (a hard link when the sink has that GFID already).
//!
//! A sink's name with another GFID than the source's is replaced by the source's object (as
//! GlusterFS's entry heal with a source recreates it), when the sink's copy holds nothing
//! the source lacks: it accuses no child (nothing was written to it that another missed)
//! and, for a directory, it is empty. Such a copy is what a brick left when it was killed
//! between making a name and setting its GFID, before creates with a requested GFID became
//! atomic on the brick. Any other mismatch stays a GFID split-brain, reported, left alone.
//!
//! When every child is accused by another (each missed a create or unlink while it was down:
//! an entry "split-brain" of the directory itself), there is no source; like GlusterFS, the
//! heal then does a conservative merge: every name found on any child is made on the children
//! that lack it, and nothing is removed (a name one child lost to an unlink comes back, never
//! a file disappears). A name with different GFIDs on two children stays a split-brain,
//! reported and left alone.
//!
//! Unless `favorite-child-policy` is set and every copy of such a name is a regular file: the
//! policy then picks one copy ([`favorite::choose`](super::favorite::choose) over the copies'
//! attributes; `majority`: the GFID more than half of the children hold), and every other copy
//! is replaced by it, in both cases above (GlusterFS resolves GFID split-brain by the same
//! policy). The losing copies' data is gone: that is what the policy says.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{
    Buf, Ctx, DirEntry, Errno, Fd, FileType, Gfid, GfidReq, Loc, LogLevel, Subvol, UnlinkExact,
    Xattr, XattrReq, XattropOp,
};

use crate::changelog::{self, Lanes};
use crate::reads::lanes_of;
use crate::shared::{Handle, Shared};
use crate::transaction::Plan;

pub(crate) async fn heal(sh: &Handle, dir: Gfid, locks: super::Locks) -> Result<(), Errno> {
    // This client's own hold of the directory would make the heal wait for its timer.
    crate::eager::release_now(sh, dir).await;
    let plan = Plan::dir(sh, dir);
    let Some(held) = super::begin(sh, plan, dir, locks).await? else {
        return Ok(());
    };
    let r = names(sh, &held, dir).await;
    held.end(sh).await;
    // The objects made on sinks are blamed on the source: heal them now, outside the
    // directory's lock.
    for (gfid, kind) in r.as_ref().map(Vec::as_slice).unwrap_or_default() {
        if let Err(e) = super::object(sh, *gfid, *kind).await {
            sh.log(LogLevel::Warn, &format!("heal of new {gfid}: {e}"));
        }
    }
    r.map(drop)
}

/// Makes the names equal; returns the objects it made.
async fn names(sh: &Shared, held: &super::Held, dir: Gfid) -> Result<Vec<(Gfid, FileType)>, Errno> {
    if matches!(
        held.matrix.direction(Lanes::ENTRY),
        crate::changelog::Direction::SplitBrain
    ) {
        return merge(sh, held, dir).await;
    }
    let Some((src, sinks, sources)) = held.direction(sh, dir, Lanes::ENTRY)? else {
        return Ok(Vec::new());
    };
    let cx = Ctx::root();
    let mut made = Vec::new();
    let mut healed = sources.clone();
    // Sources that may differ (a dead client's create or unlink that reached some of them):
    // merged before they are called equal.
    if held.sources_may_differ(Lanes::ENTRY, &sources) {
        let (m, ok) = union(sh, held, dir, &sources).await;
        made.extend(m);
        healed = ok;
    }
    let source = &sh.children[src];
    let mut want = list(sh, source, &cx, dir).await?;
    for s in sinks {
        let sink = &sh.children[s];
        let to = To {
            sh,
            source,
            sink,
            s,
            cx: &cx,
            dir,
        };
        let have = match list(sh, sink, &cx, dir).await {
            Ok(h) => h,
            Err(e) => {
                sh.log(
                    LogLevel::Warn,
                    &format!("entry heal of {dir}: listing child {s}: {e}"),
                );
                continue;
            }
        };
        let mut ok = true;
        let mut picked = Vec::new();
        for (name, e) in &want {
            match have.get(name) {
                Some(h) if h.attr.gfid == e.attr.gfid => {}
                Some(h) => match replace(&to, name, e, h).await {
                    Ok(true) => made.push((e.attr.gfid, e.attr.kind)),
                    Ok(false) => match by_policy(sh, held, dir, name).await {
                        Some((winner, m)) => {
                            made.extend(m);
                            picked.push((name.clone(), winner));
                        }
                        None => {
                            sh.split_brain(&format!("{dir}/{name}"), "gfid");
                            ok = false;
                        }
                    },
                    Err(err) => {
                        sh.log(
                            LogLevel::Warn,
                            &format!("entry heal: replacing {dir}/{name} on child {s}: {err}"),
                        );
                        ok = false;
                    }
                },
                None => match make(&to, name, e).await {
                    Ok(()) => made.push((e.attr.gfid, e.attr.kind)),
                    Err(err) => {
                        sh.log(
                            LogLevel::Warn,
                            &format!("entry heal: making {dir}/{name} on child {s}: {err}"),
                        );
                        ok = false;
                    }
                },
            }
        }
        // The source's copy of a name may have lost to a sink's: later sinks compare with
        // the winner.
        for (name, winner) in picked {
            want.insert(name, winner);
        }
        for (name, h) in &have {
            if !want.contains_key(name)
                && let Err(err) =
                    purge(sh, sink, &cx, dir, name.clone(), h.attr.kind, h.attr.gfid).await
            {
                sh.log(
                    LogLevel::Warn,
                    &format!("entry heal: removing {dir}/{name} on child {s}: {err}"),
                );
                ok = false;
            }
        }
        healed[s] = ok;
    }
    held.settle(sh, dir, Lanes::ENTRY, &healed).await;
    made.sort_by_key(|(g, _)| *g);
    made.dedup_by_key(|(g, _)| *g);
    Ok(made)
}

/// Conservative merge (no source, see the module doc): every locked child gets every name any
/// of them has; nothing is removed.
async fn merge(sh: &Shared, held: &super::Held, dir: Gfid) -> Result<Vec<(Gfid, FileType)>, Errno> {
    let (mut made, healed) = union(sh, held, dir, &held.locked).await;
    held.settle(sh, dir, Lanes::ENTRY, &healed).await;
    made.sort_by_key(|(g, _)| *g);
    made.dedup_by_key(|(g, _)| *g);
    Ok(made)
}

/// Makes every name any child of `among` (locked ones) has on the others of `among` that lack
/// it; removes nothing. Returns the objects made and, per child, whether it holds the union
/// now (false outside `among`, for a child that could not be listed or made a name, and for
/// all when some name has two GFIDs: left alone, reported as a split-brain).
async fn union(
    sh: &Shared,
    held: &super::Held,
    dir: Gfid,
    among: &[bool],
) -> (Vec<(Gfid, FileType)>, Vec<bool>) {
    let cx = Ctx::root();
    let n = sh.n();
    let mut lists: Vec<Option<BTreeMap<String, DirEntry>>> = Vec::with_capacity(n);
    for (i, &wanted) in among.iter().enumerate().take(n) {
        lists.push(if held.locked[i] && wanted {
            match list(sh, &sh.children[i], &cx, dir).await {
                Ok(l) => Some(l),
                Err(e) => {
                    sh.log(
                        LogLevel::Warn,
                        &format!("entry merge of {dir}: listing child {i}: {e}"),
                    );
                    None
                }
            }
        } else {
            None
        });
    }
    // Every name, with the first child that has it; names with two GFIDs are left alone.
    let mut union: BTreeMap<&str, (usize, &DirEntry)> = BTreeMap::new();
    let mut conflicts = std::collections::BTreeSet::new();
    for (i, l) in lists.iter().enumerate() {
        for (name, e) in l.iter().flatten() {
            match union.get(name.as_str()) {
                None => {
                    union.insert(name, (i, e));
                }
                Some((_, first)) if first.attr.gfid != e.attr.gfid => {
                    if conflicts.insert(name.clone()) {
                        sh.split_brain(&format!("{dir}/{name}"), "gfid");
                    }
                }
                Some(_) => {}
            }
        }
    }
    let mut made = Vec::new();
    let mut resolved = Vec::new();
    for name in &conflicts {
        if let Some((_, m)) = by_policy(sh, held, dir, name).await {
            made.extend(m);
            resolved.push(name.clone());
        }
    }
    for name in &resolved {
        conflicts.remove(name);
        // Every locked child holds the winner now: nothing more to make for it.
        union.remove(name.as_str());
    }
    let mut healed = vec![false; n];
    for (s, have) in lists.iter().enumerate() {
        let Some(have) = have else { continue };
        let mut ok = conflicts.is_empty();
        for (name, (src, e)) in &union {
            if have.contains_key(*name) || conflicts.contains(*name) {
                continue;
            }
            let to = To {
                sh,
                source: &sh.children[*src],
                sink: &sh.children[s],
                s,
                cx: &cx,
                dir,
            };
            match make(&to, name, e).await {
                Ok(()) => made.push((e.attr.gfid, e.attr.kind)),
                Err(err) => {
                    sh.log(
                        LogLevel::Warn,
                        &format!("entry merge: making {dir}/{name} on child {s}: {err}"),
                    );
                    ok = false;
                }
            }
        }
        healed[s] = ok;
    }
    (made, healed)
}

/// A GFID split-brain of `dir/name` resolved by `favorite-child-policy` (see the module doc):
/// the copies on the locked children are looked up again, the policy picks one when all are
/// regular files, and every other locked child's copy (or lack of one) is replaced by it.
/// Returns the winner's entry and the objects made, or `None` (no policy, no pick, not all
/// regular files, or a replacement failed: the name stays a split-brain).
async fn by_policy(
    sh: &Shared,
    held: &super::Held,
    dir: Gfid,
    name: &str,
) -> Option<(DirEntry, Vec<(Gfid, FileType)>)> {
    let policy = sh.cfg().favorite;
    if policy == super::favorite::Policy::None {
        return None;
    }
    let cx = Ctx::root();
    let loc = Loc::new(dir, name);
    let mut copies: Vec<Option<xlator_api::Iatt>> = Vec::with_capacity(sh.n());
    for i in 0..sh.n() {
        copies.push(if held.locked[i] {
            match sh.children[i].lookup(&cx, loc.clone()).await {
                Ok(e) => Some(e.attr),
                Err(Errno::ENOENT) => None,
                Err(_) => return None,
            }
        } else {
            None
        });
    }
    if copies.iter().flatten().any(|a| a.kind != FileType::Regular) {
        return None;
    }
    let winner = if policy == super::favorite::Policy::Majority {
        copies.iter().flatten().find_map(|a| {
            let holders = copies.iter().flatten().filter(|b| b.gfid == a.gfid).count();
            (holders * 2 > sh.n()).then_some(a.gfid)
        })?
    } else {
        let unknown = vec![false; sh.n()];
        let picked = super::favorite::choose(policy, &copies, &unknown)?;
        let w = picked.iter().position(|p| *p)?;
        copies[w]?.gfid
    };
    let w = copies
        .iter()
        .position(|c| c.is_some_and(|a| a.gfid == winner))?;
    let wa = copies[w]?;
    let entry = DirEntry {
        name: RString::from(name),
        next_offset: 0,
        attr: wa,
        xattrs: RVec::new(),
    };
    sh.log(
        LogLevel::Warn,
        &format!(
            "GFID split-brain on {dir}/{name} resolved by favorite-child-policy={}: keeping \
             child {w}'s copy ({winner}, {} bytes), replacing the others",
            policy.name(),
            wa.size
        ),
    );
    let mut made = Vec::new();
    for (i, c) in copies.iter().enumerate() {
        if i == w || !held.locked[i] || c.is_some_and(|a| a.gfid == winner) {
            continue;
        }
        let to = To {
            sh,
            source: &sh.children[w],
            sink: &sh.children[i],
            s: i,
            cx: &cx,
            dir,
        };
        if let Some(a) = c {
            let exact = cx.to_builder().ext(&UnlinkExact(a.gfid)).build();
            if let Err(e) = sh.children[i].unlink(&exact, loc.clone()).await {
                sh.log(
                    LogLevel::Warn,
                    &format!("GFID split-brain on {dir}/{name}: removing child {i}'s copy: {e}"),
                );
                return None;
            }
        }
        if let Err(e) = make(&to, name, &entry).await {
            sh.log(
                LogLevel::Warn,
                &format!("GFID split-brain on {dir}/{name}: making child {i}'s copy: {e}"),
            );
            return None;
        }
        made.push((winner, FileType::Regular));
    }
    crate::shared::lock(&sh.split_brains).remove(&format!("{dir}/{name}"));
    Some((entry, made))
}

/// Every entry of `dir` on `child`, by name (`.` and `..` left out).
async fn list(
    sh: &Shared,
    child: &Subvol,
    cx: &Ctx,
    dir: Gfid,
) -> Result<BTreeMap<String, DirEntry>, Errno> {
    let fd = Fd {
        id: sh.services.new_fd_id(),
        gfid: dir,
        flags: libc::O_RDONLY | libc::O_DIRECTORY,
    };
    child.opendir(cx, fd).await?;
    let mut out = BTreeMap::new();
    let mut offset = 0;
    let r = loop {
        match child.readdirp(cx, fd, offset, 64 << 10).await {
            Ok(batch) if batch.is_empty() => break Ok(()),
            Ok(batch) => {
                for e in batch {
                    offset = e.next_offset;
                    if e.name.as_str() != "." && e.name.as_str() != ".." {
                        out.insert(e.name.to_string(), e);
                    }
                }
            }
            Err(e) => break Err(e),
        }
    };
    let _ = child.releasedir(cx, fd).await;
    r.map(|()| out)
}

/// Where an entry heal copies names: from `source` to `sink` (child `s`), in `dir`.
#[derive(Clone, Copy)]
struct To<'a> {
    sh: &'a Shared,
    source: &'a Subvol,
    sink: &'a Subvol,
    s: usize,
    cx: &'a Ctx,
    dir: Gfid,
}

/// Replaces the sink's `name` (`h`, another GFID than the source's `e`) by a copy of the
/// source's object, if the sink's copy holds nothing the source lacks (see the module doc);
/// false (nothing done) otherwise.
async fn replace(to: &To<'_>, name: &str, e: &DirEntry, h: &DirEntry) -> Result<bool, Errno> {
    let To {
        sh,
        sink,
        s,
        cx,
        dir,
        ..
    } = *to;
    let ask = XattrReq {
        names: Vec::new(),
        prefixes: vec![changelog::PREFIX.to_owned()],
    };
    let lcx = cx.to_builder().ext(&ask).build();
    let now = sink.lookup(&lcx, Loc::new(dir, name)).await?;
    if now.attr.gfid != h.attr.gfid {
        return Ok(false);
    }
    let accuses = now.xattrs.iter().any(|x| {
        x.name.as_str().starts_with(changelog::PREFIX) && x.value.as_slice().iter().any(|b| *b != 0)
    });
    if accuses {
        return Ok(false);
    }
    if h.attr.kind == FileType::Directory && !list(sh, sink, cx, h.attr.gfid).await?.is_empty() {
        return Ok(false);
    }
    sh.log(
        LogLevel::Warn,
        &format!(
            "entry heal: {dir}/{name} on child {s} is {} ({:?}, accusing no child{}), the \
             source's is {}: replacing it by the source's",
            h.attr.gfid,
            h.attr.kind,
            if h.attr.kind == FileType::Directory {
                ", empty"
            } else {
                ""
            },
            e.attr.gfid
        ),
    );
    // Only this copy: an unlink that finds the name naming another object by now fails, and
    // so does an rmdir that finds the directory no longer empty (the name is under the
    // directory's entry lock, but not what is in it).
    let loc = Loc::new(dir, name);
    let removed = if h.attr.kind == FileType::Directory {
        sink.rmdir(cx, loc).await
    } else {
        let exact = cx.to_builder().ext(&UnlinkExact(h.attr.gfid)).build();
        sink.unlink(&exact, loc).await
    };
    match removed {
        Ok(_) => {}
        Err(Errno::ENOTEMPTY | Errno::EEXIST | Errno::ESTALE) => return Ok(false),
        Err(e) => return Err(e),
    }
    make(to, name, e).await?;
    // A lookup that met the two GFIDs reported a split-brain: it is none now.
    crate::shared::lock(&sh.split_brains).remove(&format!("{dir}/{name}"));
    Ok(true)
}

/// Makes `name` on `sink` like `e` on `source`, marks the new copy dirty, then blames `sink`
/// for it on the source so the object's own heal fills it in (and a crash before that still
/// leaves it accused).
async fn make(to: &To<'_>, name: &str, e: &DirEntry) -> Result<(), Errno> {
    let To {
        sh,
        source,
        sink,
        s,
        cx,
        dir,
    } = *to;
    let a = &e.attr;
    let loc = Loc::new(dir, name);
    let gcx = cx.to_builder().ext(&GfidReq(a.gfid)).build();
    let r = match a.kind {
        FileType::Directory => sink.mkdir(&gcx, loc.clone(), a.perm, 0).await.map(drop),
        FileType::Regular => sink
            .mknod(&gcx, loc.clone(), libc::S_IFREG | a.perm, 0, 0)
            .await
            .map(drop),
        FileType::Symlink => {
            let target = source.readlink(cx, a.gfid).await?;
            sink.symlink(&gcx, loc.clone(), target).await.map(drop)
        }
        _ => sink
            .mknod(&gcx, loc.clone(), a.mode(), a.rdev, 0)
            .await
            .map(drop),
    };
    match r {
        // The sink has the object under another name already: a hard link.
        Err(Errno::EEXIST)
            if a.kind != FileType::Directory && sink.stat(cx, a.gfid).await.is_ok() =>
        {
            sink.link(cx, a.gfid, loc).await?;
        }
        r => r?,
    }
    let lanes = lanes_of(a.kind) | Lanes::META;
    // The new copy says it is dirty itself: a listing read from the sink (once the
    // directory's entry heal is done) shows this entry with a non-zero counter, so replicate
    // looks it up instead of passing on the sink's attributes and xattrs, which the object's
    // own heal has not filled in yet (a size of 0, no stripe geometry).
    let dirty: RVec<Xattr> = vec![Xattr {
        name: RString::from(sh.keys[s].as_str()),
        value: Buf::from_vec(changelog::delta(lanes, 1).to_vec()),
    }]
    .into();
    sink.xattrop(cx, a.gfid, XattropOp::AddArray32, dirty)
        .await?;
    let blame: RVec<Xattr> = vec![Xattr {
        name: RString::from(sh.keys[s].as_str()),
        value: Buf::from_vec(changelog::delta(lanes, 1).to_vec()),
    }]
    .into();
    source
        .xattrop(cx, a.gfid, XattropOp::AddArray32, blame)
        .await
        .map(drop)
}

/// Removes `name` (a whole subtree for a directory) from `child`.
fn purge<'a>(
    sh: &'a Shared,
    child: &'a Subvol,
    cx: &'a Ctx,
    dir: Gfid,
    name: String,
    kind: FileType,
    gfid: Gfid,
) -> BoxFuture<'a, Result<(), Errno>> {
    Box::pin(async move {
        let loc = Loc::new(dir, name.as_str());
        if kind != FileType::Directory {
            return child.unlink(cx, loc).await.map(drop);
        }
        match child.rmdir(cx, loc.clone()).await {
            Err(Errno::ENOTEMPTY) => {}
            r => return r.map(drop),
        }
        for (n, e) in list(sh, child, cx, gfid).await? {
            purge(sh, child, cx, gfid, n, e.attr.kind, e.attr.gfid).await?;
        }
        child.rmdir(cx, loc).await.map(drop)
    })
}
