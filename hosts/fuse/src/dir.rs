//! Directory listings: `readdir` and `readdirplus` on top of the `readdirp` fop.
//!
//! Offsets the kernel sees: 1 after ".", 2 after "..", and `cookie + 2` after an entry whose
//! `readdirp` cookie is `cookie` (translators never hand out 0: it means "from the start").
//! So a kernel offset `o` resumes the translator at `o - 2` (0 for o <= 2).

use std::time::Duration;

use fuser::{Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};
use xlator_api::{Ctx, DirEntry, Errno};

use crate::attr::{dot_attr, file_attr, file_type};
use crate::fds::FdUse;
use crate::fs::Shared;

/// Kernel offset after ".".
const AFTER_DOT: u64 = 1;
/// Kernel offset after ".."; also the shift between translator cookies and kernel offsets.
const AFTER_DOTDOT: u64 = 2;
/// What one `readdirp` asks for: the kernel's readdir buffer is one page.
const BATCH_BYTES: u32 = 4096;
/// Batches made only of "." and ".." are skipped; bound the retries.
const MAX_EMPTY_BATCHES: usize = 4;

/// Whether a listing at kernel offset `offset` starts the translator's listing over (cookie
/// 0): only then may a directory fd move to a newer graph. A listing in progress stays on
/// the graph whose cookies the kernel holds: another graph's translators may read them
/// differently (cluster/distribute encodes its child index in the cookie's top bits, so a
/// cookie of a one-brick graph, or of a distribute with fewer children, can name another
/// child there, and its indirect cookies are a table of the old instance: EINVAL).
pub fn from_start(offset: u64) -> bool {
    offset <= AFTER_DOTDOT
}

fn is_dot(name: &str) -> bool {
    name == "." || name == ".."
}

/// Kernel offset of the position after `e`, `None` if it cannot be represented.
fn kernel_offset(e: &DirEntry) -> Option<u64> {
    e.next_offset.checked_add(AFTER_DOTDOT)
}

/// Pulls batches from `readdirp` starting at kernel offset `offset` and feeds every real entry
/// (with its kernel offset) to `push` until it returns `false` (buffer full) or the listing
/// ends.
async fn for_each_entry(
    cx: &Ctx,
    u: &FdUse,
    offset: u64,
    mut push: impl FnMut(u64, &DirEntry) -> bool,
) -> Result<(), Errno> {
    // The graph the directory fd is open on (see migrate.rs), where it may not be opened
    // yet: the kernel gets a handle before any listing, and answers some from its cache.
    // A directory another client removed since the kernel opened it lists as a removed
    // directory does on a local file system: ENOENT (no path is walked again for an fd, so
    // ESTALE would only reach the caller).
    let dead = |e| match e {
        Errno::ESTALE => Errno::ENOENT,
        e => e,
    };
    u.ensure_open().await.map_err(dead)?;
    let (graph, fd) = (u.graph(), u.fd());
    let mut cookie = offset.saturating_sub(AFTER_DOTDOT);
    let mut empty = 0;
    loop {
        let batch = (graph.top().readdirp(cx, fd, cookie, BATCH_BYTES).await).map_err(dead)?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        let next = last.next_offset;
        let mut pushed = 0;
        for e in batch.iter().filter(|e| !is_dot(&e.name)) {
            let Some(off) = kernel_offset(e) else {
                tracing::error!(
                    cookie = e.next_offset,
                    "readdirp cookie out of range; listing cut short"
                );
                return Ok(());
            };
            if !push(off, e) {
                return Ok(());
            }
            pushed += 1;
        }
        if next == cookie {
            // A translator that does not advance would loop forever.
            tracing::error!(cookie, "readdirp returned a cookie that does not advance");
            return Ok(());
        }
        cookie = next;
        if pushed == 0 {
            empty += 1;
            if empty >= MAX_EMPTY_BATCHES {
                return Ok(());
            }
        } else {
            // The kernel asks again for the rest; one batch per request keeps latency low.
            return Ok(());
        }
    }
}

/// Plain readdir: names, kinds and inode numbers.
pub async fn readdir(
    s: &Shared,
    cx: Ctx,
    dir: INodeNo,
    u: &FdUse,
    offset: u64,
    mut reply: ReplyDirectory,
) {
    use fuser::FileType::Directory;
    if offset < AFTER_DOT && reply.add(dir, AFTER_DOT, Directory, ".") {
        return reply.ok();
    }
    if offset < AFTER_DOTDOT && reply.add(dir, AFTER_DOTDOT, Directory, "..") {
        return reply.ok();
    }
    s.inodes
        .note_listed(dir, u.graph().id(), from_start(offset));
    let r = for_each_entry(&cx, u, offset, |off, e| {
        let node = s.inodes.peek_id(&e.attr.gfid);
        !reply.add(node, off, file_type(e.attr.kind), e.name.as_str())
    })
    .await;
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(crate::attr::errno(e)),
    }
}

/// Readdirplus: every entry with its attributes; each one returned (but "." and "..") gives
/// the kernel a lookup reference.
pub async fn readdirplus(
    s: &Shared,
    cx: Ctx,
    dir: INodeNo,
    u: &FdUse,
    offset: u64,
    mut reply: ReplyDirectoryPlus,
) {
    let ttl: Duration = s.opts.entry_timeout.min(s.opts.attr_timeout);
    let generation = Generation(0);
    // The kernel does not link "." and "..": their attributes only give d_ino and d_type.
    if offset < AFTER_DOT
        && reply.add(
            dir,
            AFTER_DOT,
            ".",
            &Duration::ZERO,
            &dot_attr(dir),
            generation,
        )
    {
        return reply.ok();
    }
    if offset < AFTER_DOTDOT
        && reply.add(
            dir,
            AFTER_DOTDOT,
            "..",
            &Duration::ZERO,
            &dot_attr(dir),
            generation,
        )
    {
        return reply.ok();
    }
    let stamp = s.inodes.stamp();
    s.inodes
        .note_listed(dir, u.graph().id(), from_start(offset));
    let r = for_each_entry(&cx, u, offset, |off, e| {
        if e.attr.gfid.is_null() {
            tracing::warn!(name = %e.name, "readdirp entry without a GFID skipped");
            return true;
        }
        let node = s.inodes.remember(e.attr.gfid);
        if !e.attr.is_dir() {
            // Recorded before the reply: the kernel caches the name once it has it.
            s.inodes
                .note_name(node, dir, std::ffi::OsStr::new(e.name.as_str()));
        }
        let full = reply.add(
            node,
            off,
            e.name.as_str(),
            &ttl,
            &file_attr(node, &e.attr),
            generation,
        );
        if full {
            // Not sent: give the reference back.
            s.inodes.forget(node, 1);
        } else {
            s.inodes.note_attr(node, &e.attr, stamp);
        }
        !full
    })
    .await;
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(crate::attr::errno(e)),
    }
}
