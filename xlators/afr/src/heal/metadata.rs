//! Metadata heal: mode, owner, times and xattrs from a source to the sinks.

use std::collections::BTreeSet;

use xlator_api::abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{Ctx, Errno, FileType, Gfid, Iatt, SetAttr, Subvol, TimeSet};

use crate::changelog::{Lanes, PREFIX};
use crate::shared::Shared;
use crate::transaction::Plan;

pub(crate) async fn heal(
    sh: &Shared,
    gfid: Gfid,
    fav: &mut super::favorite::Favorite,
    locks: super::Locks,
) -> Result<(), Errno> {
    // This client's own eager hold (both domains) would make the heal wait for its timer.
    crate::eager::release_now(sh, gfid).await;
    let plan = Plan::inode(sh, gfid, Lanes::META);
    let Some(held) = super::begin(sh, plan, gfid, locks).await? else {
        return Ok(());
    };
    let r = copy(sh, &held, gfid, fav).await;
    held.end(sh).await;
    r
}

async fn copy(
    sh: &Shared,
    held: &super::Held,
    gfid: Gfid,
    fav: &mut super::favorite::Favorite,
) -> Result<(), Errno> {
    let Some((src, mut sinks, sources)) = held.resolve(sh, gfid, Lanes::META, fav).await? else {
        return Ok(());
    };
    let mut healed = sources.clone();
    // Sources that may differ (a dead client's chmod or setxattr that reached some of them):
    // the others are made equal to the first.
    if held.sources_may_differ(Lanes::META, &sources) {
        for s in (0..sources.len()).filter(|&s| sources[s] && s != src) {
            healed[s] = false;
            sinks.push(s);
        }
    }
    let cx = Ctx::root();
    let attr = sh.children[src].stat(&cx, gfid).await?;
    let xattrs = user_xattrs(&sh.children[src], &cx, gfid).await?;
    for s in sinks {
        let sink = &sh.children[s];
        if let Err(e) = copy_to(sink, &cx, gfid, &attr, &xattrs).await {
            sh.log(
                xlator_api::LogLevel::Warn,
                &format!("metadata heal of {gfid} on child {s}: {e}"),
            );
            continue;
        }
        healed[s] = true;
    }
    held.settle(sh, gfid, Lanes::META, &healed).await;
    Ok(())
}

/// The xattrs heal copies: all but replicate's counters.
async fn user_xattrs(child: &Subvol, cx: &Ctx, gfid: Gfid) -> Result<xlator_api::Xattrs, Errno> {
    let names: RVec<RString> = child
        .listxattr(cx, gfid)
        .await?
        .into_iter()
        .filter(|n| !n.starts_with(PREFIX))
        .collect();
    if names.is_empty() {
        return Ok(RVec::new());
    }
    child.getxattrs(cx, gfid, names).await
}

async fn copy_to(
    sink: &Subvol,
    cx: &Ctx,
    gfid: Gfid,
    attr: &Iatt,
    xattrs: &xlator_api::Xattrs,
) -> Result<(), Errno> {
    sink.setattr(cx, gfid, owner_and_times(attr)).await?;
    if !xattrs.is_empty() {
        sink.setxattrs(cx, gfid, xattrs.clone(), 0).await?;
    }
    let keep: BTreeSet<&str> = xattrs.iter().map(|x| x.name.as_str()).collect();
    for name in sink.listxattr(cx, gfid).await? {
        if !name.starts_with(PREFIX) && !keep.contains(name.as_str()) {
            sink.removexattr(cx, gfid, name).await?;
        }
    }
    Ok(())
}

/// Mode (not for symlinks), owner and times of `attr`.
pub(crate) fn owner_and_times(attr: &Iatt) -> SetAttr {
    SetAttr {
        perm: if attr.kind == FileType::Symlink {
            ROption::RNone
        } else {
            ROption::RSome(attr.perm)
        },
        uid: ROption::RSome(attr.uid),
        gid: ROption::RSome(attr.gid),
        size: ROption::RNone,
        atime: TimeSet::At(attr.atime),
        mtime: TimeSet::At(attr.mtime),
    }
}
