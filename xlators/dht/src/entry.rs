//! Namespace changes: what goes to the hashed child, what to every child, and the orders that
//! keep every name visible to other clients while a change spans children.
//!
//! - `create`, `mknod`, `symlink`: the hashed child (exclusively: an existing name is found
//!   through [`Shared::resolve`], wherever it lives). When `min-free-disk` diverts the file to
//!   another child, the data is made there first, then the link file on the hashed child: a
//!   lookup meanwhile finds nothing, as before the create.
//! - `mkdir`: child 0 first (it decides EEXIST, permissions...), then every other child with
//!   the same GFID and each child's layout slice set atomically with the directory
//!   (`CreateXattrs`); a failure removes the copies made.
//! - `link`: on the file's child, then a link file on the new name's hashed child.
//! - `unlink`: the data's name first, then the link file (a lookup meanwhile finds a link file
//!   to nothing: no file, as after the unlink).
//! - `rmdir`: every other child first, child 0 last; a failure makes the removed copies again.
//! - `rename` of a file, data on child C, new name hashed to H: the data never moves; the new
//!   name is made to resolve to C. (1) if H ≠ C and H has nothing named `new`, a link file
//!   `new` → C on H (until the rename, it points to nothing: `new` still does not exist);
//!   (2) the rename on C, which is the moment the change happens for every client: before
//!   it `old` resolves to the file, after it `new` does; (3) if H held a link file to another
//!   child it is pointed at C; if H held the replaced file itself, a link file to C made under
//!   a temporary name is renamed over it (atomic on H); (4) the replaced file on a third child
//!   is unlinked; (5) the old name's link file is removed. Between (2) and (3)/(4) a client
//!   may still reach the replaced file through `new`: `new` always exists, never neither
//!   name.
//! - `rename` of a directory: every copy marked with where it goes, the new name's hashed
//!   child first, then the others, then the marks removed; a lookup that finds a marked copy
//!   finishes the rename ([`crate::dirrename`]). An exchange: child 0, then the others.
//!
//! `mkdir`, `rmdir` and a directory's `rename` hold their names' directory locks on child 0
//! ([`crate::dirlock`]); a lookup repairing a directory's missing copies tries them.

use futures::future::join_all;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{
    CreateXattrs, Ctx, Entry, Errno, Fd, Gfid, GfidReq, Iatt, Loc, LogLevel, Removed, XattrReq,
};

use crate::dirrename::Renaming;
use crate::layout::LAYOUT_XATTR;
use crate::lookup::Found;
use crate::shared::{Home, Shared, first_error, strip_own};

const RENAME_NOREPLACE: u32 = 1;

/// Entries of one child's copy looked at when deciding whether only stale link files keep it
/// from being removed.
const STALE_SCAN_MAX: usize = 4096;
const RENAME_EXCHANGE: u32 = 2;

/// How many more times a create without O_EXCL is tried when it found its name taken and
/// then nowhere, and the first pause before it (doubled each time: 5 + 10 + ... + 80 ms).
const CREATE_TRIES: u32 = 5;
const CREATE_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

impl Shared {
    /// A new non-directory named `loc`, made by `op(child)` on the hashed child (or the child
    /// `min-free-disk` picks, with a link file). EEXIST handling as in the module doc.
    async fn make_file<F, Fut>(
        &self,
        cx: &Ctx,
        loc: &Loc,
        fd: Option<Fd>,
        op: F,
    ) -> Result<(usize, Entry), Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<Entry, Errno>>,
    {
        for attempt in 0..2 {
            let layout = self.layout_of(loc.parent).await?;
            let h = layout.hashed(&loc.name);
            let target = self.placement(h).await;
            let made = if target == h {
                match op(h).await {
                    Ok(e) => return Ok((h, e)),
                    Err(Errno::EEXIST) => false,
                    Err(e) => return Err(e),
                }
            } else {
                Shared::bump(&self.counters.diverted_creates);
                match op(target).await {
                    Ok(e) => match self.make_linkfile(h, loc, target).await {
                        Ok(_) => return Ok((target, e)),
                        Err(Errno::EEXIST) if self.resolves_to(cx, loc, target, &e).await => {
                            // Another client's lookup found our file first (a directory
                            // whose layout is not trusted is searched everywhere) and
                            // linked it: the create is done. Undoing it here removed the
                            // file that client had just opened.
                            return Ok((target, e));
                        }
                        Err(Errno::EEXIST) => {
                            // The name appeared on the hashed child meanwhile: ours goes.
                            self.undo_made(target, loc, fd).await;
                            true
                        }
                        Err(err) => {
                            self.undo_made(target, loc, fd).await;
                            return Err(err);
                        }
                    },
                    Err(Errno::EEXIST) => false,
                    Err(e) => return Err(e),
                }
            };
            let _ = made;
            let r = self.resolve(cx, loc).await?;
            match (r.found, r.link) {
                (Some(_), _) => return Err(Errno::EEXIST),
                (None, Some(_)) if attempt == 0 => {
                    // A link file to nothing holds the name on the hashed child: remove it.
                    Shared::bump(&self.counters.stale_linkfiles);
                    let _ = self.children[r.hashed]
                        .unlink(&Ctx::root(), loc.clone())
                        .await;
                }
                (None, _) => return Err(Errno::EEXIST),
            }
        }
        Err(Errno::EEXIST)
    }

    /// Whether `loc` now resolves to the file `made` on child `child`.
    async fn resolves_to(&self, cx: &Ctx, loc: &Loc, child: usize, made: &Entry) -> bool {
        matches!(
            self.resolve(cx, loc).await,
            Ok(crate::lookup::Resolved {
                found: Some(Found::File { child: c, entry }),
                ..
            }) if c == child && entry.attr.gfid == made.attr.gfid
        )
    }

    /// Removes a file just made on child `i` (and closes the fd the create opened there).
    async fn undo_made(&self, i: usize, loc: &Loc, fd: Option<Fd>) {
        if let Some(fd) = fd {
            let _ = self.children[i].release(&Ctx::root(), fd).await;
        }
        let _ = self.children[i].unlink(&Ctx::root(), loc.clone()).await;
    }

    pub async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let excl = Fd {
            flags: fd.flags | libc::O_EXCL,
            ..fd
        };
        let mut pause = CREATE_PAUSE;
        for attempt in 0..=CREATE_TRIES {
            let made = self
                .make_file(cx, &loc, Some(excl), |i| {
                    self.children[i].create(cx, loc.clone(), excl, mode, umask)
                })
                .await;
            match made {
                Ok((c, e)) => {
                    self.remember_home(e.attr.gfid, Home::File(c));
                    self.opened(fd, false, one_hot(self.n(), c));
                    let mut e = e;
                    strip_own(&mut e.xattrs, cx.ext::<XattrReq>().as_ref());
                    return Ok(e);
                }
                Err(Errno::EEXIST) if fd.flags & libc::O_EXCL == 0 => {
                    match self.open_existing(cx, &loc, fd).await {
                        // Taken, yet found nowhere: another client's create diverted by
                        // `min-free-disk` is between its two steps (its data made, its link
                        // file not yet), or the name was removed again. Once more, a little
                        // later.
                        Err(Errno::ENOENT) if attempt < CREATE_TRIES => {
                            self.services.sleep(pause).await;
                            pause *= 2;
                        }
                        r => return r,
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Errno::ENOENT)
    }

    /// A create without O_EXCL that found `loc` taken: opens the file where it lives (EISDIR
    /// for a directory, ENOENT when nothing resolves).
    async fn open_existing(&self, cx: &Ctx, loc: &Loc, fd: Fd) -> Result<Entry, Errno> {
        let r = self.resolve(cx, loc).await?;
        match r.found {
            Some(Found::File { child, entry }) => {
                let ofd = Fd {
                    gfid: entry.attr.gfid,
                    flags: fd.flags & !(libc::O_CREAT | libc::O_EXCL),
                    ..fd
                };
                self.children[child].open(cx, ofd).await?;
                self.opened(fd, false, one_hot(self.n(), child));
                let attr = self.children[child]
                    .fstat(cx, ofd)
                    .await
                    .unwrap_or(entry.attr);
                let mut e = Entry {
                    attr,
                    postparent: ROption::RNone,
                    xattrs: entry.xattrs,
                };
                strip_own(&mut e.xattrs, cx.ext::<XattrReq>().as_ref());
                Ok(e)
            }
            Some(Found::Dir { .. }) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
        }
    }

    pub async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let (c, mut e) = self
            .make_file(cx, &loc, None, |i| {
                self.children[i].mknod(cx, loc.clone(), mode, rdev, umask)
            })
            .await?;
        self.remember_home(e.attr.gfid, Home::File(c));
        strip_own(&mut e.xattrs, cx.ext::<XattrReq>().as_ref());
        Ok(e)
    }

    pub async fn symlink(
        &self,
        cx: &Ctx,
        loc: Loc,
        target: xlator_api::abi_stable::std_types::RString,
    ) -> Result<Entry, Errno> {
        let (c, mut e) = self
            .make_file(cx, &loc, None, |i| {
                self.children[i].symlink(cx, loc.clone(), target.clone())
            })
            .await?;
        self.remember_home(e.attr.gfid, Home::File(c));
        strip_own(&mut e.xattrs, cx.ext::<XattrReq>().as_ref());
        Ok(e)
    }

    /// `mkdir` under the name's directory lock ([`crate::dirlock`]).
    pub async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        self.require_all_up()?;
        self.with_names(&[&loc], self.mkdir_locked(cx, loc.clone(), mode, umask))
            .await
    }

    /// The name's hashed child first, then every other child at once: a mkdir cut short (its
    /// client killed) leaves copies only where the hashed child has one, so a lookup (which
    /// asks the hashed child, and with a trusted layout takes its ENOENT as final) finds the
    /// directory and makes the missing copies, and a listing never shows a name that lookup
    /// says is absent. A child failing removes the copies made, the hashed child's last.
    async fn mkdir_locked(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let hashed = self.layout_of(loc.parent).await?.hashed(&loc.name); // ENOTDIR under a file
        let gfid = cx.ext::<GfidReq>().map_or_else(Gfid::random, |g| g.0);
        let layout = self.fresh_layout(gfid, true);
        let base = cx.ext::<CreateXattrs>().unwrap_or_default();
        let ctx_for = |i: usize| {
            let mut x = base.clone();
            if let Some(s) = layout.slice_of(i) {
                x.0.push((LAYOUT_XATTR.to_string(), s.encode()));
            }
            cx.to_builder().ext(&GfidReq(gfid)).ext(&x).build()
        };
        let first = self.children[hashed]
            .mkdir(&ctx_for(hashed), loc.clone(), mode, umask)
            .await?;
        let rest = join_all((0..self.n()).filter(|i| *i != hashed).map(|i| {
            let c = ctx_for(i);
            let loc = loc.clone();
            async move { (i, self.children[i].mkdir(&c, loc, mode, umask).await) }
        }))
        .await;
        let mut failed = None;
        let mut made = Vec::new();
        let mut e0 = (hashed == 0).then_some(first);
        for (i, r) in rest {
            match r {
                Ok(e) => {
                    if i == 0 {
                        e0 = Some(e);
                    }
                    made.push(i);
                }
                Err(e) => {
                    failed.get_or_insert((i, e));
                }
            }
        }
        if let Some((i, err)) = failed {
            self.log(
                LogLevel::Warn,
                &format!(
                    "mkdir {}/{}: child {i} failed ({err}); removing the copies made",
                    loc.parent, loc.name
                ),
            );
            join_all(
                made.iter()
                    .map(|j| self.children[*j].rmdir(&Ctx::root(), loc.clone())),
            )
            .await;
            let _ = self.children[hashed].rmdir(&Ctx::root(), loc.clone()).await;
            return Err(err);
        }
        let Some(mut e0) = e0 else {
            return Err(Errno::EIO); // child 0 answered (no failure above)
        };
        self.remember_layout(gfid, std::sync::Arc::new(layout));
        self.remember_home(gfid, Home::Dir);
        strip_own(&mut e0.xattrs, cx.ext::<XattrReq>().as_ref());
        Ok(e0)
    }

    pub async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        let c = match self.home(cx, gfid).await? {
            Home::File(c) => c,
            Home::Dir => return Err(Errno::EPERM),
        };
        let layout = self.layout_of(new.parent).await?;
        let h = layout.hashed(&new.name);
        let mut e = self.children[c].link(cx, gfid, new.clone()).await?;
        if h != c
            && let Err(err) = self.make_linkfile(h, &new, c).await
        {
            let _ = self.children[c].unlink(&Ctx::root(), new).await;
            return Err(err);
        }
        strip_own(&mut e.xattrs, cx.ext::<XattrReq>().as_ref());
        Ok(e)
    }

    /// Unlink: first on the name's hashed child, refused there if it is a link file
    /// ([`xlator_api::UnlinkUnlessMarked`]): a file on its hashed child (most of them) goes in
    /// one call. A link file there, or (layout not trusted) no name there, takes the lookup
    /// path: the data's name first, then its link file.
    pub async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let layout = self.layout_of(loc.parent).await?;
        let h = layout.hashed(&loc.name);
        let keep = xlator_api::UnlinkUnlessMarked {
            perm: crate::shared::LINK_MODE,
            xattr: crate::shared::LINKTO_XATTR.into(),
        };
        let hcx = cx.to_builder().ext(&keep).build();
        match self.children[h].unlink(&hcx, loc.clone()).await {
            Err(Errno::EEXIST) => {}
            Err(Errno::ENOENT) if !layout.trusted && self.cfg().lookup_unhashed => {}
            Err(Errno::ENOTCONN) => {}
            r => return r,
        }
        let r = self.resolve(cx, &loc).await?;
        match r.found {
            Some(Found::File { child, .. }) => {
                let out = self.children[child].unlink(cx, loc.clone()).await?;
                if child != r.hashed && r.link.is_some() {
                    let _ = self.children[r.hashed].unlink(&Ctx::root(), loc).await;
                }
                Ok(out)
            }
            Some(Found::Dir { .. }) => self.children[self.dir_reader()].unlink(cx, loc).await,
            None => {
                if r.link.is_some() {
                    let _ = self.children[r.hashed].unlink(&Ctx::root(), loc).await;
                }
                Err(Errno::ENOENT)
            }
        }
    }

    /// rmdir in two round trips: every other child's copy is removed while child 0's is
    /// looked up (for its GFID, and its attributes should a copy have to be made again), then
    /// child 0's. Child 0 keeps its copy until the others are gone: it lists the
    /// subdirectories, and decides ENOTEMPTY for the files it holds. What the name is comes
    /// from the children's own answers: ENOTDIR from the child holding a file of that name,
    /// ENOENT from all when no child has it.
    pub async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        self.require_all_up()?;
        self.with_names(&[&loc], self.rmdir_locked(cx, loc.clone()))
            .await
    }

    /// [`Shared::rmdir`] under the name's directory lock ([`crate::dirlock`]).
    async fn rmdir_locked(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let (rcx, _) = crate::shared::with_own_req(cx);
        let (first, others) = futures::future::join(
            self.children[0].lookup(&rcx, loc.clone()),
            join_all((1..self.n()).map(|i| {
                let loc = loc.clone();
                async move { self.rmdir_on(i, cx, loc).await }
            })),
        )
        .await;
        let removed: Vec<(usize, Removed)> = others
            .iter()
            .enumerate()
            .filter_map(|(k, r)| r.as_ref().ok().map(|x| (k + 1, *x)))
            .collect();
        let errs: Vec<Errno> = others
            .into_iter()
            .filter_map(Result::err)
            .filter(|e| *e != Errno::ENOENT)
            .collect();
        let like = match first {
            Ok(e) if e.attr.is_dir() => e,
            Ok(_) => return Err(Errno::ENOTDIR), // a file on child 0: nothing else was removed
            // Child 0 has no copy (a damaged directory, or none at all): what the others said.
            Err(Errno::ENOENT) => {
                return match (errs.is_empty(), removed.into_iter().next()) {
                    (true, Some((_, r))) => Ok(r),
                    (true, None) => Err(Errno::ENOENT),
                    (false, _) => Err(first_error(errs)),
                };
            }
            Err(e) => {
                if !removed.is_empty() {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "rmdir {}/{}: child 0's lookup failed ({e}) after children {:?}                              removed their copies; the next lookup makes them again",
                            loc.parent,
                            loc.name,
                            removed.iter().map(|r| r.0).collect::<Vec<_>>()
                        ),
                    );
                }
                return Err(e);
            }
        };
        let gfid = like.attr.gfid;
        let result = if errs.is_empty() {
            self.rmdir_on(0, cx, loc.clone()).await
        } else {
            Err(first_error(errs))
        };
        match result {
            Ok(r) => {
                self.forget_layout(gfid);
                self.forget_home(gfid);
                self.forget_dir_name(gfid);
                Ok(r)
            }
            Err(e) => {
                // The slices the removed copies had: the cached layout (the directory was
                // looked up or listed just before, as a rmdir's caller does), else none, and
                // the next lookup repairs the layout.
                let layout = self.cached_layout(gfid);
                for (i, _) in removed {
                    let slice = layout.as_ref().and_then(|l| l.slice_of(i));
                    let _ = self.heal_dir_copy(i, &loc, &like.attr, slice).await;
                }
                Err(e)
            }
        }
    }

    /// rmdir of child `i`'s copy of `loc`; when it is not empty only because of stale link
    /// files (to a child without the name: left by a crash between two steps), they are
    /// removed and the rmdir tried again.
    async fn rmdir_on(&self, i: usize, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        match self.children[i].rmdir(cx, loc.clone()).await {
            Err(Errno::ENOTEMPTY) => {
                let dir = match self.children[i].lookup(&Ctx::root(), loc.clone()).await {
                    Ok(e) => e.attr.gfid,
                    Err(_) => return Err(Errno::ENOTEMPTY),
                };
                if self.clear_stale_links(i, dir).await {
                    self.children[i].rmdir(cx, loc).await
                } else {
                    Err(Errno::ENOTEMPTY)
                }
            }
            r => r,
        }
    }

    /// Removes child `i`'s entries of `dir` if every one is a stale link file (at most
    /// [`STALE_SCAN_MAX`] entries looked at); whether it did.
    async fn clear_stale_links(&self, i: usize, dir: Gfid) -> bool {
        let (cx, _) = crate::shared::with_own_req(&Ctx::root());
        let child = &self.children[i];
        let fd = Fd {
            id: self.services.new_fd_id(),
            gfid: dir,
            flags: libc::O_RDONLY,
        };
        if child.opendir(&cx, fd).await.is_err() {
            return false;
        }
        let mut names = Vec::new();
        let mut off = 0;
        let mut ok = true;
        'pages: while ok {
            let page = match child.readdirp(&cx, fd, off, 64 << 10).await {
                Ok(p) => p,
                Err(_) => {
                    ok = false;
                    break;
                }
            };
            let Some(last) = page.last().map(|e| e.next_offset) else {
                break;
            };
            off = last;
            for e in page {
                if !crate::shared::dirent_is_linkfile(&e) || names.len() >= STALE_SCAN_MAX {
                    ok = false;
                    break 'pages;
                }
                let target = xlator_api::find_xattr(&e.xattrs, crate::shared::LINKTO_XATTR)
                    .and_then(|v| self.child_named(v.as_slice()));
                let loc = Loc::new(dir, e.name.clone());
                if let Some(t) = target {
                    match self.children[t].lookup(&cx, loc.clone()).await {
                        // ESTALE: the target's copy of the directory is gone (removed first).
                        Err(Errno::ENOENT | Errno::ESTALE) => {}
                        Ok(f) if crate::shared::entry_is_linkfile(&f) => {}
                        _ => {
                            ok = false; // a live link file (or no answer): the directory is not empty
                            break 'pages;
                        }
                    }
                }
                names.push(loc);
            }
        }
        let _ = child.releasedir(&cx, fd).await;
        if !ok || names.is_empty() {
            return false;
        }
        for loc in names {
            Shared::bump(&self.counters.stale_linkfiles);
            let _ = child.unlink(&Ctx::root(), loc).await;
        }
        self.log(
            LogLevel::Info,
            &format!("directory {dir}: removed stale link files on child {i} for rmdir"),
        );
        true
    }

    /// A file's rename holds both names' directory locks ([`crate::dirlock`]) from before it
    /// resolves them: two clients renaming two files over one name at once each put their
    /// file under it on its own child, and the name ended as two files (listed twice), or as
    /// a link file to the other client's file; one rename failed with EEXIST. A directory's
    /// rename gives them back first and takes them in [`Shared::rename_dir`] (after the move
    /// lock, which is always taken before names).
    pub async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        let held = self.lock_names(&[&old, &new], true).await?;
        let r = self.rename_file_locked(cx, &old, &new, flags).await;
        self.unlock_names(held).await;
        match r {
            Ok(Some(dir)) => self.rename_dir(cx, dir, old, new, flags).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// [`Shared::rename`] of a file under its names' locks; `Some(gfid)` (nothing done) when
    /// `old` is the directory `gfid`.
    async fn rename_file_locked(
        &self,
        cx: &Ctx,
        old: &Loc,
        new: &Loc,
        flags: u32,
    ) -> Result<Option<Gfid>, Errno> {
        let src = self.resolve(cx, old).await?;
        let (c, src_gfid) = match &src.found {
            None => return Err(Errno::ENOENT),
            Some(Found::Dir { entry }) => return Ok(Some(entry.attr.gfid)),
            Some(Found::File { child, entry }) => (*child, entry.attr.gfid),
        };
        self.rename_file(cx, old.clone(), new.clone(), flags, src, c, src_gfid)
            .await
            .map(|()| None)
    }

    #[allow(clippy::too_many_arguments)]
    async fn rename_file(
        &self,
        cx: &Ctx,
        old: Loc,
        new: Loc,
        flags: u32,
        src: crate::lookup::Resolved,
        c: usize,
        src_gfid: Gfid,
    ) -> Result<(), Errno> {
        let dst = self.resolve(cx, &new).await?;
        if flags & RENAME_NOREPLACE != 0 && dst.found.is_some() {
            return Err(Errno::EEXIST);
        }
        let d = match &dst.found {
            Some(Found::File { child, entry }) => {
                if entry.attr.gfid == src_gfid {
                    return Ok(()); // two names of one file: rename does nothing (POSIX)
                }
                Some(*child)
            }
            // A directory at `new`: every child has it, child C answers (EISDIR...).
            Some(Found::Dir { .. }) => Some(c),
            None => None,
        };
        let (h1, h2) = (src.hashed, dst.hashed);
        if flags & RENAME_EXCHANGE != 0 && !(h1 == c && h2 == c && d == Some(c)) {
            self.log(
                LogLevel::Debug,
                "RENAME_EXCHANGE of names on different children is not supported",
            );
            return Err(Errno::EINVAL);
        }
        if h1 != c || h2 != c || d.is_some_and(|d| d != c) {
            Shared::bump(&self.counters.cross_renames);
        }
        let root = Ctx::root();
        // (1)
        let mut made_link = false;
        if h2 != c && dst.link.is_none() && d != Some(h2) {
            self.make_linkfile(h2, &new, c).await?;
            made_link = true;
        }
        // (2)
        if let Err(e) = self.children[c]
            .rename(cx, old.clone(), new.clone(), flags)
            .await
        {
            if made_link {
                let _ = self.children[h2].unlink(&root, new).await;
            }
            return Err(e);
        }
        // (3)
        if h2 != c {
            if let Some((lg, t)) = dst.link {
                if t != Some(c)
                    && let Err(e) = self.point_link(h2, lg, c).await
                {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "rename: pointing link file {}/{} on child {h2} at child {c}: {e}",
                            new.parent, new.name
                        ),
                    );
                }
            } else if d == Some(h2) {
                let tmp = Loc::new(new.parent, format!(".dht.rename.{}", Gfid::random()));
                match self.make_linkfile(h2, &tmp, c).await {
                    Ok(_) => {
                        if let Err(e) = self.children[h2]
                            .rename(&root, tmp.clone(), new.clone(), 0)
                            .await
                        {
                            self.log(
                                LogLevel::Warn,
                                &format!(
                                    "rename: replacing {}/{} on child {h2} by a link file: {e}",
                                    new.parent, new.name
                                ),
                            );
                            let _ = self.children[h2].unlink(&root, tmp).await;
                        }
                    }
                    Err(e) => self.log(
                        LogLevel::Warn,
                        &format!(
                            "rename: link file for {}/{} on child {h2}: {e}",
                            new.parent, new.name
                        ),
                    ),
                }
            }
        }
        // (4)
        if let Some(d) = d
            && d != c
            && d != h2
        {
            let _ = self.children[d].unlink(&root, new.clone()).await;
        }
        // (5)
        if h1 != c
            && let Some((lg, _)) = src.link
        {
            // Only that link file: a rebalance may have put the file itself there meanwhile.
            let exact = Ctx::builder(0, 0).ext(&xlator_api::UnlinkExact(lg)).build();
            let _ = self.children[h1].unlink(&exact, old).await;
        }
        Ok(())
    }

    async fn rename_dir(
        &self,
        cx: &Ctx,
        dir: Gfid,
        old: Loc,
        new: Loc,
        flags: u32,
    ) -> Result<(), Errno> {
        self.require_all_up()?;
        let names = [&old, &new];
        let renamed = self.with_names(
            &names,
            self.rename_dir_locked(cx, dir, old.clone(), new.clone(), flags),
        );
        if old.parent == new.parent {
            renamed.await
        } else {
            self.with_move_lock(renamed).await
        }
    }

    /// A directory's rename under both names' directory locks ([`crate::dirlock`]), marked
    /// on every copy while it runs and the new name's hashed child first
    /// ([`crate::dirrename`]). `dir` is the directory's GFID.
    async fn rename_dir_locked(
        &self,
        cx: &Ctx,
        dir: Gfid,
        old: Loc,
        new: Loc,
        flags: u32,
    ) -> Result<(), Errno> {
        // What `new` is, over every child: child 0 alone would replace a directory that is
        // empty there but not on another child, or take the name of a file it does not hold.
        let target = self.resolve(cx, &new).await?;
        // The directory `new` names, if any: a rename over it that some child refuses as not
        // empty is undone (below).
        let replaced = match &target.found {
            Some(Found::Dir { entry }) if flags & RENAME_EXCHANGE == 0 => Some(entry.attr),
            _ => None,
        };
        match target.found {
            Some(Found::File { .. }) if flags & RENAME_EXCHANGE == 0 => {
                return Err(if flags & RENAME_NOREPLACE != 0 {
                    Errno::EEXIST
                } else {
                    Errno::ENOTDIR
                });
            }
            Some(Found::File { .. }) => return Err(Errno::EINVAL),
            Some(Found::Dir { entry }) if flags & RENAME_EXCHANGE == 0 => {
                if entry.attr.gfid == dir {
                    return Ok(()); // the same directory: nothing to do (POSIX)
                }
                if flags & RENAME_NOREPLACE != 0 {
                    return Err(Errno::EEXIST);
                }
                if !self.empty_everywhere(entry.attr.gfid).await {
                    return Err(Errno::ENOTEMPTY);
                }
            }
            _ => {}
        }
        // An exchange swaps two directories: a lookup could not tell which half to finish,
        // so it is not marked (child 0, then the others, as before).
        let marked = flags & RENAME_EXCHANGE == 0;
        let first = if marked { target.hashed } else { 0 };
        if marked {
            let r = Renaming {
                old: old.clone(),
                new: new.clone(),
            };
            self.mark_renaming(dir, &r).await?;
        }
        if let Err(e) = self.children[first]
            .rename(cx, old.clone(), new.clone(), flags)
            .await
        {
            // Nothing renamed anywhere: the marks go, the error is the answer.
            if marked {
                self.unmark_renaming(dir).await;
            }
            return Err(e);
        }
        let rest = join_all((0..self.n()).filter(|&i| i != first).map(|i| {
            let (old, new) = (old.clone(), new.clone());
            async move { (i, self.children[i].rename(cx, old, new, flags).await) }
        }))
        .await;
        if let Some(like) = &replaced
            && rest
                .iter()
                .any(|(_, r)| matches!(r, Err(Errno::ENOTEMPTY | Errno::EEXIST)))
        {
            let renamed: Vec<usize> = std::iter::once(first)
                .chain(rest.iter().filter(|(_, r)| r.is_ok()).map(|(i, _)| *i))
                .collect();
            return self
                .undo_rename_over(dir, &old, &new, like, &renamed, marked)
                .await;
        }
        let mut failed = false;
        for (i, r) in rest {
            if let Err(e) = r {
                failed = true;
                self.log(
                    LogLevel::Warn,
                    &format!(
                        "rename of directory {}/{} -> {}/{}: child {i} failed ({e}) after child {first} renamed it{}",
                        old.parent,
                        old.name,
                        new.parent,
                        new.name,
                        finish_hint(marked)
                    ),
                );
            }
        }
        if marked && !failed {
            self.unmark_renaming(dir).await;
        }
        Ok(())
    }
}

impl Shared {
    /// Undoes a directory's rename over directory `new` (`like`, empty when checked) that
    /// some child refused because its copy of `new` is not empty: a file was made in it on
    /// that child after the check (creates in a directory take no lock of it). On each child
    /// in `renamed` the directory goes back to `old` and `new`'s copy is made again (same
    /// GFID, mode, owner, layout slice), so every child holds both directories as before and
    /// the caller gets ENOTEMPTY, as if the create had come first. Carried forward instead,
    /// `new` would have named the renamed directory on some children and the one it replaced
    /// on the others for good (two GFIDs under one name: lookups EIO).
    async fn undo_rename_over(
        &self,
        dir: Gfid,
        old: &Loc,
        new: &Loc,
        like: &Iatt,
        renamed: &[usize],
        marked: bool,
    ) -> Result<(), Errno> {
        let layout = self.cached_layout(like.gfid);
        let undone = join_all(renamed.iter().map(|&i| {
            let slice = layout.as_ref().and_then(|l| l.slice_of(i));
            async move {
                self.children[i]
                    .rename(&Ctx::root(), new.clone(), old.clone(), 0)
                    .await?;
                self.heal_dir_copy(i, new, like, slice).await.map(drop)
            }
        }))
        .await;
        let left: Vec<(usize, Errno)> = renamed
            .iter()
            .zip(undone)
            .filter_map(|(&i, r)| r.err().map(|e| (i, e)))
            .collect();
        if left.is_empty() {
            if marked {
                self.unmark_renaming(dir).await;
            }
        } else {
            self.log(
                LogLevel::Warn,
                &format!(
                    "rename of directory {}/{} over {}/{}: a copy of the target was not empty, and undoing the rename failed on {left:?}{}",
                    old.parent,
                    old.name,
                    new.parent,
                    new.name,
                    finish_hint(marked)
                ),
            );
        }
        Err(Errno::ENOTEMPTY)
    }
}

/// What a log line about a directory rename left half done adds when its copies are marked.
fn finish_hint(marked: bool) -> &'static str {
    if marked {
        "; the next lookup of either name finishes it"
    } else {
        ""
    }
}

fn one_hot(n: usize, i: usize) -> Vec<bool> {
    (0..n).map(|k| k == i).collect()
}
