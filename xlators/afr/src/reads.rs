//! Reads (GlusterFS afr-read-txn.c, afr-common.c lookup): `lookup` asks every up child, with
//! the pending counters in the same call, and learns which children are good copies; other
//! reads go to one readable child chosen by [`crate::read::order`] and fail over to the next
//! on a transport-like error. A lane in split-brain answers EIO; a name whose GFID differs
//! between children answers EIO; both are logged and listed in the dump, never resolved here
//! (a lookup only triggers the heal, which resolves data and metadata split-brain when
//! `favorite-child-policy` picks a source: [`crate::heal::favorite`]).

use std::future::Future;
use std::sync::atomic::Ordering;

use futures::future::join_all;
use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Ctx, CtxBuilder, Entry, Errno, FileType, Gfid, Loc, XattrReq};

use crate::changelog::{Lanes, PREFIX};
use crate::heal;
use crate::heal::Locks;
use crate::heal::favorite::Policy;
use crate::read;
use crate::shared::{Handle, InodeCtx, Shared, fails_over, first_error};

/// What `gfid`'s copies are: cached from the last lookup of this generation, else asked of
/// every up child (`getxattrs` of the counters).
pub(crate) async fn state(sh: &Shared, gfid: Gfid) -> Result<InodeCtx, Errno> {
    let kind = sh.cached_kind(gfid).unwrap_or(FileType::Regular);
    state_as(sh, gfid, kind).await
}

/// [`state`] of an object known to be of `kind` (a listing's entry).
pub(crate) async fn state_as(sh: &Shared, gfid: Gfid, kind: FileType) -> Result<InodeCtx, Errno> {
    if let Some(c) = sh.cached(gfid) {
        return Ok(c);
    }
    let up = &sh.up_set();
    let names: RVec<RString> = sh.keys.iter().map(|k| RString::from(k.as_str())).collect();
    let cx = Ctx::root();
    let answers = join_all((0..sh.n()).map(|i| {
        let (cx, names) = (cx.clone(), names.clone());
        async move {
            if up[i] {
                Some(sh.children[i].getxattrs(&cx, gfid, names).await)
            } else {
                None
            }
        }
    }))
    .await;
    if !answers.iter().flatten().any(Result::is_ok) {
        // The object may live only on a child that is down.
        if up.iter().any(|u| !u) {
            return Err(Errno::ENOTCONN);
        }
        return Err(first_error(
            answers.into_iter().flatten().filter_map(Result::err),
        ));
    }
    let xs: Vec<Option<&[xlator_api::Xattr]>> = answers
        .iter()
        .map(|a| {
            a.as_ref()
                .and_then(|r| r.as_ref().ok())
                .map(|v| v.as_slice())
        })
        .collect();
    Ok(sh.learn(gfid, kind, &xs).0)
}

/// A read of `lanes` of `gfid`: `op(i)` on the best readable child, then the next ones.
pub(crate) async fn read<R, F, Fut>(
    sh: &Shared,
    gfid: Gfid,
    lanes: Lanes,
    op: F,
) -> Result<R, Errno>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<R, Errno>>,
{
    // With fewer children up than a quorum, the ones up cannot know what they missed: a write
    // they did not see went to a quorum, and such a quorum need not include any of them. With
    // a quorum up, every acknowledged write reached one of them, which accuses whoever missed
    // it (quorum-reads; with quorum-type none, reads go on and may be stale).
    if !sh.cfg().quorum.met(&sh.up_set()) {
        return Err(Errno::ENOTCONN);
    }
    let st = state(sh, gfid).await?;
    if st.split(lanes) {
        sh.split_brain(&gfid.to_string(), "read");
        return Err(Errno::EIO);
    }
    let order = read_order(sh, &st, gfid, lanes);
    let mut last = Errno::ENOTCONN;
    for i in order {
        sh.outstanding[i].fetch_add(1, Ordering::Relaxed);
        let r = op(i).await;
        sh.outstanding[i].fetch_sub(1, Ordering::Relaxed);
        match r {
            Err(e) if fails_over(e) => last = e,
            r => return r,
        }
    }
    Err(last)
}

/// The children a read of `lanes` of `gfid` (whose copies are `st`) tries, best first: the
/// readable ones up, by `read-policy`.
fn read_order(sh: &Shared, st: &InodeCtx, gfid: Gfid, lanes: Lanes) -> Vec<usize> {
    let up = sh.up_set();
    let readable: Vec<bool> = st
        .readable(lanes)
        .iter()
        .zip(&up)
        .map(|(r, u)| *r && *u)
        .collect();
    let outstanding: Vec<u64> = sh
        .outstanding
        .iter()
        .map(|o| o.load(Ordering::Relaxed))
        .collect();
    read::order(&readable, sh.cfg().read_policy, gfid, &outstanding)
}

/// The child reads of `lanes` of `gfid` would try first, from what the last lookup learnt
/// (no round trip); `None` when nothing is cached, nothing is readable or the lanes are in
/// split-brain.
pub(crate) fn first_read_child(sh: &Shared, gfid: Gfid, lanes: Lanes) -> Option<usize> {
    let st = sh.cached(gfid)?;
    if st.split(lanes) {
        return None;
    }
    read_order(sh, &st, gfid, lanes).first().copied()
}

/// The lanes that matter for an object of `kind`.
pub(crate) fn lanes_of(kind: FileType) -> Lanes {
    match kind {
        FileType::Regular => Lanes::DATA | Lanes::META,
        FileType::Directory => Lanes::META | Lanes::ENTRY,
        _ => Lanes::META,
    }
}

/// `lookup` of `loc` on every up child, healing what the counters say needs it (when
/// self-heal is on).
pub(crate) async fn lookup(sh: &Handle, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
    // Gated by quorum as reads are (see `read`): without one, the children up may not have
    // seen a name made, removed or replaced on the others, and a mount would cache that.
    if !sh.cfg().quorum.met(&sh.up_set()) {
        return Err(Errno::ENOTCONN);
    }
    let asked = cx.ext::<XattrReq>();
    let mut req = asked.clone().unwrap_or_default();
    req.prefixes.push(PREFIX.to_owned());
    let lcx = CtxBuilder::ext(cx.to_builder(), &req).build();
    // A file in split-brain answers EIO, but with a favorite-child-policy its heal may
    // resolve it: the heals are triggered whatever the first answer was.
    let (mut entry, mut heals, mut two_gfids) = lookup_once(sh, &lcx, &loc, true).await;
    if two_gfids {
        // Usually not a split-brain: an entry transaction on the name (a rename over it, an
        // unlink and a create), another client's or this one's, reached some children and
        // not yet the others. Each holds the name's entrylk (or its directory's): once it is
        // free, the answers agree, unless the copies really differ.
        wait_for_name(sh, &loc).await;
        (entry, heals, two_gfids) = lookup_once(sh, &lcx, &loc, true).await;
    }
    let mut healed_inline = false;
    for (gfid, kind, path, locks) in heals {
        healed_inline |= heal::trigger(sh, gfid, kind, path, locks).await;
    }
    let entry = if healed_inline {
        lookup_once(sh, &lcx, &loc, false).await.0?
    } else {
        if two_gfids {
            // Reported now; the parent's entry heal replaces a stale copy when the parent
            // has a source (see heal::entry), and takes the report back.
            sh.split_brain(&name_path(&loc), "gfid");
        }
        entry?
    };
    Ok(strip(entry, asked.as_ref()))
}

/// `dir/name` as the split-brain report names it.
fn name_path(loc: &Loc) -> String {
    format!("{}/{}", loc.parent, loc.name)
}

/// Waits until no entry transaction holds `loc`'s name (nor its directory) on the children
/// up: takes its entrylk, waiting, then gives it back. This instance's own hold of the
/// directory ends first (it would keep the lock until `post-op-delay`).
async fn wait_for_name(sh: &Handle, loc: &Loc) {
    crate::eager::release_now(sh, loc.parent).await;
    let plan = crate::transaction::Plan::entry(sh, &[loc]);
    let owner = sh.new_owner();
    let (locked, _, _) = crate::transaction::lock(sh, &plan, owner, &sh.up_set()).await;
    crate::transaction::unlock(sh, &plan, owner, &locked).await;
}

async fn lookup_once(
    sh: &Handle,
    cx: &Ctx,
    loc: &Loc,
    may_heal: bool,
) -> (
    Result<Entry, Errno>,
    Vec<(Gfid, FileType, Option<String>, Locks)>,
    bool,
) {
    let up = &sh.up_set();
    let answers = join_all((0..sh.n()).map(|i| {
        let (cx, loc) = (cx.clone(), loc.clone());
        async move {
            if up[i] {
                Some(sh.children[i].lookup(&cx, loc).await)
            } else {
                None
            }
        }
    }))
    .await;
    let found: Vec<(usize, &Entry)> = answers
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            Some(Ok(e)) => Some((i, e)),
            _ => None,
        })
        .collect();
    let Some(&(_, first)) = found.first() else {
        let e = first_error(
            answers
                .iter()
                .flatten()
                .filter_map(|r| r.as_ref().err().copied()),
        );
        return (Err(e), Vec::new(), false);
    };
    let gfid = first.attr.gfid;
    let path = || name_path(loc);
    let what = || format!("{} ({gfid})", path());
    if found.iter().any(|(_, e)| e.attr.gfid != gfid) {
        // The caller asks again once the name's entry lock is free, and reports it if so.
        let heal = if may_heal && sh.cfg().self_heal && !loc.name.is_empty() {
            vec![(loc.parent, FileType::Directory, None, Locks::Wait)]
        } else {
            Vec::new()
        };
        return (Err(Errno::EIO), heal, true);
    }
    let kind = first.attr.kind;
    let xs: Vec<Option<&[xlator_api::Xattr]>> = answers
        .iter()
        .map(|a| match a {
            Some(Ok(e)) => Some(e.xattrs.as_slice()),
            _ => None,
        })
        .collect();
    let (st, m) = sh.learn(gfid, kind, &xs);
    let lanes = lanes_of(kind);
    // The parent's entries first (a name missing on some child), then the object.
    let mut heal = Vec::new();
    if may_heal && sh.cfg().self_heal {
        let missing_somewhere = answers
            .iter()
            .any(|a| matches!(a, Some(Err(Errno::ENOENT))));
        // Dirty counts alone (a post-op that never came: its child went away in the middle
        // of a transaction) are healed too, or they would stay for ever (below: when the
        // object's locks are free).
        if missing_somewhere && !loc.name.is_empty() {
            // The name is missing on some child: the parent's entries need healing.
            heal.push((loc.parent, FileType::Directory, None, Locks::Wait));
        }
        // A directory whose children accuse each other about its entries is merged (see
        // heal::entry), never left so.
        let entry_split = lanes.has(Lanes::ENTRY)
            && matches!(
                m.direction(Lanes::ENTRY),
                crate::changelog::Direction::SplitBrain
            );
        // A data or metadata split-brain is healed when favorite-child-policy may pick a
        // source (heal::favorite); with none, the heal would only report it again.
        let resolvable = sh.cfg().favorite != Policy::None
            && (st.split(Lanes::META) || (kind == FileType::Regular && st.split(Lanes::DATA)));
        // Dirty counts alone are writes in flight as often as leftovers: their heal only
        // goes if it can lock at once ([`Locks::IfFree`]), so another client's eager hold is
        // not ended for a heal with nothing to do, and not at all for this client's own hold
        // (cleared when it ends). Leftovers of a dead client stay for the next lookups and
        // the daemon.
        let accused = lanes.each().any(|(l, _)| m.direction(l).needs_heal());
        let dirty = lanes.each().any(|(l, _)| m.dirty(l)) && !sh.eager.holds_any(gfid);
        if entry_split || resolvable || accused {
            heal.push((gfid, kind, Some(path()), Locks::Wait));
        } else if dirty {
            heal.push((gfid, kind, Some(path()), Locks::IfFree));
        }
    }
    if st.split(Lanes::META) {
        sh.split_brain(&what(), "metadata");
        return (Err(Errno::EIO), heal, false);
    }
    if st.split(Lanes::DATA) && kind == FileType::Regular {
        sh.split_brain(&what(), "data");
    }
    // Attributes from the child reads would use (size and mode from a good copy).
    let readable = st.readable(Lanes(lanes.0 & !Lanes::ENTRY.0));
    let outstanding = vec![0u64; sh.n()];
    let order = read::order(&readable, sh.cfg().read_policy, gfid, &outstanding);
    let pick = order
        .iter()
        .find_map(|&i| found.iter().find(|(k, _)| *k == i))
        .map_or(first, |(_, e)| *e);
    (Ok(pick.clone()), heal, false)
}

/// Removes replicate's own xattrs from a reply unless the caller asked for them.
fn strip(mut e: Entry, asked: Option<&XattrReq>) -> Entry {
    e.xattrs
        .retain(|x| !x.name.starts_with(PREFIX) || asked.is_some_and(|a| a.wants(&x.name)));
    e
}
