//! Open files and directories: opened on every child, closed on every child that holds them;
//! a directory is listed from child 0, its files' sizes completed from the others.

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{Ctx, DirEntry, Entry, Errno, Fd, FileType, Loc, Opened};

use crate::namespace::first_of;
use crate::shared::{Shared, all_ok, child_fd, with_geometry_req};

impl Shared {
    /// Opens `fd` on every child; the file's geometry is checked (from the lookup that
    /// found it, else read from every child) before the open is answered.
    pub async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let cfd = child_fd(fd);
        let replies = self.fan(|i| self.children[i].open(cx, cfd)).await;
        let opened: Vec<bool> = replies.iter().map(Result::is_ok).collect();
        let checked = match all_ok(replies) {
            Ok(_) => self.geometry_of(cx, fd.gfid).await,
            Err(e) => Err(e),
        };
        match checked {
            Ok(geo) => {
                self.opened(fd, Some(geo), false, opened);
                Ok(Opened::plain())
            }
            Err(e) => {
                self.release_on(cx, cfd, &opened, false).await;
                Err(e)
            }
        }
    }

    /// Opens a directory on every child that is up (listing needs child 0; the others hold
    /// it for fsyncdir).
    pub async fn opendir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let replies = self.fan(|i| self.children[i].opendir(cx, fd)).await;
        let held: Vec<bool> = replies.iter().map(Result::is_ok).collect();
        if let Err(e) = &replies[0] {
            self.release_on(cx, fd, &held, true).await;
            return Err(*e);
        }
        self.opened(fd, None, true, held);
        Ok(())
    }

    async fn release_on(&self, cx: &Ctx, fd: Fd, on: &[bool], dir: bool) {
        let _ = self
            .fan(|i| async move {
                match (on[i], dir) {
                    (false, _) => Ok(()),
                    (true, false) => self.children[i].release(cx, fd).await,
                    (true, true) => self.children[i].releasedir(cx, fd).await,
                }
            })
            .await;
    }

    /// Ends `fd` on every child that holds it.
    pub async fn release(&self, cx: &Ctx, fd: Fd, dir: bool) -> Result<(), Errno> {
        let held = self.closed(fd);
        self.release_on(cx, child_fd(fd), &held, dir).await;
        Ok(())
    }

    /// flush, fsync, fsyncdir: on every child that holds `fd` (a lost one is opened again).
    pub async fn on_holders<F, Fut>(&self, cx: &Ctx, fd: Fd, op: F) -> Result<(), Errno>
    where
        F: Fn(usize, Fd) -> Fut,
        Fut: Future<Output = Result<(), Errno>>,
    {
        let cfd = child_fd(fd);
        let held = self.holders(fd);
        let replies = self
            .fan(|i| {
                let go = held[i];
                let op = &op;
                async move {
                    if !go && !self.up.is_up(i) {
                        return Ok(());
                    }
                    self.ensure(i, cx, fd).await?;
                    op(i, cfd).await
                }
            })
            .await;
        first_of(replies)
    }

    /// Lists from child 0 with the entries' geometry xattrs; each regular file's other
    /// copies are looked up (all at once) to complete its size and check its geometry.
    pub async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        self.ensure(0, cx, fd).await?;
        let gcx = &with_geometry_req(cx);
        // A page whose files were all removed before their lookups is followed by the next.
        xlator_api::sdk::listing_page(offset, |offset| async move {
            let list = self.children[0].readdirp(gcx, fd, offset, size).await?;
            let next = list.last().map(|d| d.next_offset);
            Ok((next, self.complete_page(cx, gcx, fd, list).await?))
        })
        .await
    }

    /// Child 0's listing `list` with each regular file's attributes merged from every
    /// child; the files removed meanwhile left out.
    async fn complete_page(
        &self,
        cx: &Ctx,
        gcx: &Ctx,
        fd: Fd,
        list: RVec<DirEntry>,
    ) -> Result<RVec<DirEntry>, Errno> {
        let fixed = futures::future::join_all(list.into_iter().map(|d| async move {
            if d.attr.kind != FileType::Regular {
                return Ok(Some(d));
            }
            let loc = Loc::new(fd.gfid, d.name.clone());
            let first = Entry {
                attr: d.attr,
                postparent: Default::default(),
                xattrs: d.xattrs.clone(),
            };
            let first = &first;
            let replies = self
                .fan(|i| {
                    let loc = loc.clone();
                    async move {
                        match i {
                            0 => Ok(first.clone()),
                            _ => self.children[i].lookup(gcx, loc).await,
                        }
                    }
                })
                .await;
            let what = format!("readdirp {}/{}", fd.gfid, d.name);
            match self.merge_entries(cx, what, replies) {
                Ok((e, _)) => Ok(Some(DirEntry {
                    attr: e.attr,
                    xattrs: e.xattrs,
                    ..d
                })),
                // Removed since child 0 listed it: not an entry any more.
                Err(Errno::ENOENT | Errno::ESTALE) => Ok(None),
                Err(e) => Err(e),
            }
        }))
        .await;
        let fixed: Vec<Option<DirEntry>> = fixed.into_iter().collect::<Result<_, Errno>>()?;
        Ok(fixed.into_iter().flatten().collect())
    }
}
