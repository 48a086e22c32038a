//! Data heal: the sink's content made equal to the source's, in chunks, under the file's
//! data-domain lock.

use futures::TryStreamExt;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Ctx, Errno, Fd, Gfid, SetAttr, Subvol, TimeSet};

use crate::changelog::Lanes;
use crate::eager;
use crate::shared::Shared;
use crate::transaction::Plan;

pub(crate) async fn heal(
    sh: &Shared,
    gfid: Gfid,
    fav: &mut super::favorite::Favorite,
    locks: super::Locks,
) -> Result<(), Errno> {
    // This client's own eager hold would make the heal wait for its timer.
    eager::release_now(sh, gfid).await;
    let plan = Plan::inode(sh, gfid, Lanes::DATA);
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
    let Some((mut src, mut sinks, sources)) = held.resolve(sh, gfid, Lanes::DATA, fav).await?
    else {
        return Ok(());
    };
    let cfg = sh.cfg();
    let cx = Ctx::root();
    let mut healed = sources.clone();
    // Sources that may differ (a dead client's write or truncate that reached some of them):
    // the largest copy, then the newest, is the source (as GlusterFS picks), the others are
    // compared with it chunk by chunk and made equal.
    let mut diff = cfg.diff_heal;
    if held.sources_may_differ(Lanes::DATA, &sources) {
        src = largest(sh, &cx, gfid, &sources).await.unwrap_or(src);
        for s in (0..sources.len()).filter(|&s| sources[s] && s != src) {
            healed[s] = false;
            sinks.push(s);
        }
        diff = true;
    }
    let source = &sh.children[src];
    let sfd = Fd {
        id: sh.services.new_fd_id(),
        gfid,
        flags: libc::O_RDONLY,
    };
    source.open(&cx, sfd).await?;
    let attr = source.fstat(&cx, sfd).await;
    if let Ok(attr) = attr {
        for s in sinks {
            let sink = &sh.children[s];
            let dfd = Fd {
                id: sh.services.new_fd_id(),
                gfid,
                flags: libc::O_RDWR,
            };
            let r = match sink.open(&cx, dfd).await {
                Ok(_) if sh.arbiter == Some(s) => {
                    // No data is stored there: the size is all it takes.
                    let resize = SetAttr {
                        size: ROption::RSome(attr.size),
                        ..SetAttr::default()
                    };
                    let r = sink.fsetattr(&cx, dfd, resize).await.map(drop);
                    let _ = sink.release(&cx, dfd).await;
                    r
                }
                Ok(_) => {
                    let how = Copy {
                        size: attr.size,
                        chunk: cfg.heal_chunk,
                        window: cfg.heal_window,
                        diff,
                    };
                    let r = copy_file(source, sfd, sink, dfd, &cx, how).await;
                    let _ = sink.release(&cx, dfd).await;
                    r
                }
                Err(e) => Err(e),
            };
            let times = SetAttr {
                atime: TimeSet::At(attr.atime),
                mtime: TimeSet::At(attr.mtime),
                ..SetAttr::default()
            };
            match r {
                Ok(()) => {
                    let _ = sink.setattr(&cx, gfid, times).await;
                    healed[s] = true;
                }
                Err(e) => sh.log(
                    xlator_api::LogLevel::Warn,
                    &format!("data heal of {gfid} on child {s}: {e}"),
                ),
            }
        }
    }
    let _ = source.release(&cx, sfd).await;
    held.settle(sh, gfid, Lanes::DATA, &healed).await;
    attr.map(drop)
}

/// Of the `sources` (the arbiter aside: it holds no data), the one with the largest copy of
/// `gfid`, then the newest modification time; `None` when none answers.
async fn largest(sh: &Shared, cx: &Ctx, gfid: Gfid, sources: &[bool]) -> Option<usize> {
    let mut best: Option<(u64, i64, u32, usize)> = None;
    for i in (0..sources.len()).filter(|&i| sources[i] && Some(i) != sh.arbiter) {
        if let Ok(a) = sh.children[i].stat(cx, gfid).await {
            // Ties go to the first child.
            let key = (a.size, a.mtime.sec, a.mtime.nsec, usize::MAX - i);
            if best.is_none_or(|b| key > (b.0, b.1, b.2, usize::MAX - b.3)) {
                best = Some((a.size, a.mtime.sec, a.mtime.nsec, i));
            }
        }
    }
    best.map(|b| b.3)
}

/// How one file's chunks are copied from the source to a sink.
#[derive(Clone, Copy)]
struct Copy {
    size: u64,
    chunk: u64,
    /// Chunks in flight at once.
    window: usize,
    diff: bool,
}

async fn copy_file(
    source: &Subvol,
    sfd: Fd,
    sink: &Subvol,
    dfd: Fd,
    cx: &Ctx,
    how: Copy,
) -> Result<(), Errno> {
    // The sink's copy ends at `old`: past it, once resized, the sink holds zeros (a hole),
    // so a chunk there is never compared, and not written when the source's is zeros too.
    let old = sink.fstat(cx, dfd).await?.size;
    let resize = SetAttr {
        size: ROption::RSome(how.size),
        ..SetAttr::default()
    };
    sink.fsetattr(cx, dfd, resize).await?;
    let chunk = how.chunk.clamp(1, u64::from(u32::MAX));
    let offsets = (0..how.size.div_ceil(chunk)).map(|k| k * chunk);
    futures::stream::iter(offsets.map(Ok))
        .try_for_each_concurrent(how.window.max(1), |off| {
            let end = (off + chunk).min(how.size);
            copy_chunk(source, sfd, sink, dfd, cx, off..end, old, how.diff)
        })
        .await
}

/// Copies `range` (at most one chunk) of the file, after comparing checksums when `diff`
/// and the sink had data there.
#[allow(clippy::too_many_arguments)]
async fn copy_chunk(
    source: &Subvol,
    sfd: Fd,
    sink: &Subvol,
    dfd: Fd,
    cx: &Ctx,
    range: std::ops::Range<u64>,
    old: u64,
    diff: bool,
) -> Result<(), Errno> {
    let len = u32::try_from(range.end - range.start).unwrap_or(u32::MAX);
    if diff && range.start < old {
        let (a, b) = futures::join!(
            source.rchecksum(cx, sfd, range.start, len),
            sink.rchecksum(cx, dfd, range.start, len)
        );
        if let (Ok(a), Ok(b)) = (a, b)
            && a == b
        {
            return Ok(());
        }
    }
    let mut off = range.start;
    while off < range.end {
        let want = u32::try_from(range.end - off).unwrap_or(u32::MAX);
        let data = source.readv(cx, sfd, off, want).await?.data;
        if data.is_empty() {
            break;
        }
        let n = data.len() as u64;
        if off < old || data.iter().any(|b| *b != 0) {
            sink.writev(cx, dfd, off, data, 0).await?;
        }
        off += n;
    }
    Ok(())
}
