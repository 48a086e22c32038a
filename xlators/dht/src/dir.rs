//! Directory fds and listings.
//!
//! A directory is opened on every child up (child 0 is required: it lists the
//! subdirectories). `readdirp` reads the children one after another, each from where the
//! cookie says, a page at a time with the caller's size, so a large directory is never read
//! whole. From each child's page it drops link files and, from every child but 0, directories
//! (every child has them; child 0's copy lists each once). A page left empty by the filter
//! does not end the listing: the same child is read on from the last entry dropped. Cookies
//! carry the child and its own offset ([`crate::cookie`]), so a listing resumes after the
//! last entry returned, on the child it came from: no entry twice, none skipped, whatever
//! the page sizes. While one child's page is read, the next children's are read ahead
//! ([`crate::ahead`]).

use futures::future::join_all;
use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Ctx, DirEntry, Errno, Fd, Gfid};

use crate::ahead::{Asker, Page, WINDOW};
use crate::dirrename::{Renaming, asking_for_marks};
use crate::shared::{Home, Shared, dirent_is_linkfile, first_error, strip_own, with_own_req};

/// Reads from the children one call may wait for when it already has entries to return.
const MAX_WAVES: usize = 2;

/// Bytes one entry costs against a `readdirp` size (FUSE's direntplus: 152 + the padded
/// name), as storage/posix counts them.
fn entry_cost(name_len: usize) -> usize {
    152 + name_len.div_ceil(8) * 8
}

impl Shared {
    pub async fn opendir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        if let Home::File(c) = self.home(cx, fd.gfid).await? {
            return self.children[c].opendir(cx, fd).await; // ENOTDIR from the child
        }
        if !self.up.is_up(0) {
            return Err(Errno::ENOTCONN);
        }
        let replies = self
            .fan(|i| async move {
                if self.up.is_up(i) {
                    self.children[i].opendir(cx, fd).await.map(|()| true)
                } else {
                    Ok(false)
                }
            })
            .await;
        if let Some(Err(e)) = replies.first() {
            let e = *e;
            for (i, r) in replies.iter().enumerate() {
                if matches!(r, Ok(true)) {
                    let _ = self.children[i].releasedir(cx, fd).await;
                }
            }
            return Err(e);
        }
        let held: Vec<bool> = replies.iter().map(|r| matches!(r, Ok(true))).collect();
        self.remember_home(fd.gfid, Home::Dir);
        self.opened(fd, true, held);
        Ok(())
    }

    /// A listing's next entries. A subdirectory whose copy on child 0 carries a rename mark
    /// (a rename of it left unfinished, [`crate::dirrename`]) has its rename finished, and is
    /// listed under its new name when that is in this directory, else left out (a listing
    /// fills the kernel's cache with the entries' attributes, so the lookup that would finish
    /// it may never come). The listing may then show the new name twice, if child 0's
    /// listing reaches it too: what a rename during a listing may do anyway.
    pub async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        // A page whose entries all moved to other directories is followed by the next.
        xlator_api::sdk::listing_page(offset, |offset| async move {
            let (mut out, marked) = self.readdirp_marked(cx, fd, offset, size).await?;
            if marked.is_empty() {
                return Ok((None, out));
            }
            let mut moved_out = Vec::new();
            for (name, gfid, r) in marked {
                if !self.finish_renaming(gfid, &r).await {
                    continue;
                }
                if r.new.parent == fd.gfid {
                    // Renamed within this directory: listed under its new name here (child
                    // 0's listing may already be past where the new name went).
                    if let Some(e) = out.iter_mut().find(|e| e.name == name) {
                        e.name = r.new.name.clone();
                    }
                } else {
                    moved_out.push(name);
                }
            }
            let next = out.last().map(|e| e.next_offset);
            out.retain(|e| !moved_out.contains(&e.name));
            Ok((next, out))
        })
        .await
    }

    /// [`Self::readdirp`] without the finishing: the entries, and the marked subdirectories
    /// among them (name, GFID, the rename).
    async fn readdirp_marked(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<(RVec<DirEntry>, Vec<(RString, Gfid, Renaming)>), Errno> {
        let (mut child, mut off) = crate::shared::lock(&self.cookies).decode(offset)?;
        let (rcx, caller) = with_own_req(cx);
        // Child 0's pages (where subdirectories are listed from) carry the rename marks too.
        let rcx0 = asking_for_marks(&rcx);
        let rcx_of = |child: usize| if child == 0 { &rcx0 } else { &rcx };
        let mut marked = Vec::new();
        let asker = Asker::of(cx);
        let ahead = !fd.is_anonymous() && self.n() > 1;
        if ahead && child == 0 && off == 0 {
            // A listing from the start (or a rewind): nothing read before is used.
            crate::shared::lock(&self.ahead).drop_fd(fd.id);
        }
        // With pages read ahead, one reply takes entries from as many pages as fit in `size`
        // (counted as FUSE's direntplus does), reading from the children at most `MAX_WAVES`
        // times: a small directory comes back whole in one call (one round trip of the
        // mount's fewer; with `xlfs-mount --readdirplus-auto` the kernel asks readdirplus
        // only for a listing's first call, and entries left for later calls cost it a
        // lookup each). Without them, one page per call.
        let budget = (size as usize).max(entry_cost(255));
        let mut out = RVec::new();
        let mut used = 0;
        let mut waves = 0;
        loop {
            if child >= self.n() {
                return Ok((out, marked));
            }
            // A child down is left out (its files cannot be reached anyway); one back since
            // the opendir gets the fd opened again by `ensure`.
            if !self.up.is_up(child) {
                if child == 0 {
                    return Err(Errno::ENOTCONN);
                }
                child += 1;
                off = 0;
                continue;
            }
            match self.ensure(child, cx, fd).await {
                Ok(()) => {}
                // This child has no copy of the directory (a lookup will make it): nothing
                // of it to list.
                Err(Errno::ESTALE | Errno::ENOENT) if child != 0 => {
                    child += 1;
                    off = 0;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let held = if ahead {
                crate::shared::lock(&self.ahead).take(fd.id, child, off, size, &asker)
            } else {
                None
            };
            let page = match held {
                Some(p) => p.entries,
                None if !out.is_empty() && (!ahead || waves >= MAX_WAVES) => {
                    return Ok((out, marked));
                }
                None if ahead => {
                    waves += 1;
                    let (page, ()) = futures::future::join(
                        self.children[child].readdirp(rcx_of(child), fd, off, size),
                        self.read_ahead(child, &rcx, fd, size, &asker),
                    )
                    .await;
                    page?
                }
                None => {
                    self.children[child]
                        .readdirp(rcx_of(child), fd, off, size)
                        .await?
                }
            };
            let Some(last) = page.last().map(|e| e.next_offset) else {
                child += 1;
                off = 0;
                continue;
            };
            {
                let mut cookies = crate::shared::lock(&self.cookies);
                for mut e in page {
                    if dirent_is_linkfile(&e) || (child != 0 && e.attr.is_dir()) {
                        continue;
                    }
                    let cost = entry_cost(e.name.len());
                    if used + cost > budget && !out.is_empty() {
                        // Full: the next call resumes after the last entry returned.
                        return Ok((out, marked));
                    }
                    used += cost;
                    e.next_offset = cookies.encode(child, e.next_offset);
                    if e.attr.is_dir()
                        && let Some(r) = Renaming::marked_in(&e.xattrs)
                    {
                        marked.push((e.name.clone(), e.attr.gfid, r));
                    }
                    strip_own(&mut e.xattrs, caller.as_ref());
                    let h = if e.attr.is_dir() {
                        if e.name != "." && e.name != ".." {
                            self.remember_dir_name(e.attr.gfid, fd.gfid, &e.name);
                        }
                        Home::Dir
                    } else {
                        Home::File(child)
                    };
                    self.remember_home(e.attr.gfid, h);
                    out.push(e);
                }
            }
            if !out.is_empty() && !ahead {
                return Ok((out, marked));
            }
            off = last;
        }
    }

    /// Reads ahead the pages the listing of `fd` will want next from the [`WINDOW`] children
    /// after `child` ([`crate::ahead`]), all at once, and holds them.
    async fn read_ahead(&self, child: usize, rcx: &Ctx, fd: Fd, size: u32, asker: &Asker) {
        let wanted: Vec<(usize, u64)> = {
            let held = crate::shared::lock(&self.ahead);
            (child + 1..self.n().min(child + 1 + WINDOW))
                .filter(|j| self.up.is_up(*j))
                .filter_map(|j| held.wanted(fd.id, j).map(|from| (j, from)))
                .collect()
        };
        let pages = join_all(wanted.into_iter().map(|(j, from)| async move {
            self.ensure(j, rcx, fd).await.ok()?;
            let entries = self.children[j].readdirp(rcx, fd, from, size).await.ok()?;
            Some((j, from, entries))
        }))
        .await;
        let mut held = crate::shared::lock(&self.ahead);
        for (j, from, entries) in pages.into_iter().flatten() {
            let page = Page {
                from,
                size,
                asker: asker.clone(),
                entries,
            };
            held.put(fd.id, self.n(), j, page);
        }
    }

    /// `op` on every child holding directory fd `fd` (every child for an unknown one).
    pub async fn on_dir_holders<F, Fut>(&self, fd: Fd, op: F) -> Result<(), Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<(), Errno>>,
    {
        let held = self
            .fd_state(fd)
            .map_or_else(|| vec![true; self.n()], |s| s.held);
        let r = self
            .fan(|i| {
                let on = held.get(i).copied().unwrap_or(false);
                let f = on.then(|| op(i));
                async move {
                    match f {
                        Some(f) => f.await,
                        None => Ok(()),
                    }
                }
            })
            .await;
        if r.iter().all(Result::is_ok) {
            Ok(())
        } else {
            Err(first_error(r.into_iter().filter_map(Result::err)))
        }
    }

    pub async fn releasedir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        crate::shared::lock(&self.ahead).drop_fd(fd.id);
        let held = self
            .closed(fd)
            .map_or_else(|| vec![true; self.n()], |s| s.held);
        let held = &held;
        let r = self
            .fan(|i| async move {
                if held.get(i).copied().unwrap_or(false) {
                    self.children[i].releasedir(cx, fd).await
                } else {
                    Ok(())
                }
            })
            .await;
        if r.iter().all(Result::is_ok) {
            Ok(())
        } else {
            Err(first_error(r.into_iter().filter_map(Result::err)))
        }
    }
}
