//! Rebalance: fixing layouts and moving a file to the child its name hashes to, while other
//! clients keep it open and write it.
//!
//! The rebalance runner (`xlfs-rebalance`) drives this through three virtual xattrs, read with
//! `getxattr` by root ([`FIX_LAYOUT`], [`MIGRATE_PREFIX`], [`COMMIT_LAYOUT`]; see the README).
//!
//! # Moving one file (data on child S, name hashed to child D)
//! 1. Every child is asked for the name: stale link files on children other than D are
//!    removed, a copy left by a move that crashed after its switch is finished, a half-made
//!    copy is removed.
//! 2. S's copy is marked [`MIGRATED_XATTR`] = D (meaningless while it has a name).
//! 3. The data, xattrs and owner are copied into a temporary file on D with the same GFID,
//!    made as a link file to S (so it is hidden from listings and lookups resolve through
//!    it to S), in the same directory.
//! 4. The *barrier*: an inodelk in domain [`BARRIER_DOMAIN`] on S. features/locks on S then
//!    holds every change of the file from other clients until it is released, and grants it
//!    only once the changes in flight finished. A file with POSIX locks is refused (EBUSY:
//!    skipped; the locks would not follow the data).
//! 5. Under the barrier: if the size, mtime or ctime moved since the copy, the data is copied
//!    again (now nothing can change it). The copy is synced; renamed over the name on D
//!    (replacing D's link file: lookups still reach S); given its mode and times (from here
//!    on it is the file, for every client's lookups); then S's name is removed with
//!    [`UnlinkExact`] (only if it still names this GFID, and the old copy unreachable by
//!    GFID at once). If S's name changed meanwhile (another client renamed or removed it),
//!    the copy on D is removed again and the move counts as vanished.
//! 6. The barrier is released. Changes held by it land on S's old copy, now nameless: their
//!    replies show `nlink` 0, and the client sees the marker, opens the file on D, moves the
//!    fd there and sends them again ([`Shared::moved_to`]). Clients naming the file by GFID
//!    get ESTALE from S and look it up again ([`Shared::home`]).
//!
//! Files with hard links: [`crate::links`].

use xlator_api::abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{
    Buf, CreateXattrs, Ctx, Entry, Errno, Fd, FileType, Flock, Gfid, GfidReq, Iatt, LkCmd, LkOwner,
    Loc, LockKind, LogLevel, SetAttr, TimeSet, UnlinkExact, Xattr,
};

use crate::layout::{self, LAYOUT_XATTR, Layout, Slice};
use crate::links::Linked;
use crate::shared::{
    Home, LINK_MODE, LINKTO_XATTR, OWN_PREFIX, Shared, entry_is_linkfile, with_own_req,
};

/// `getxattr(dir, FIX_LAYOUT)`: the directory's layout over the children not decommissioned.
pub const FIX_LAYOUT: &str = "xlfs.dht.fix-layout";
/// `getxattr(dir, COMMIT_LAYOUT)`: every file of the directory is placed; trust the layout.
pub const COMMIT_LAYOUT: &str = "xlfs.dht.commit-layout";
/// `getxattr(file, "xlfs.dht.migrate:<PARENT>/<NAME>")`: move the file to its hashed child.
pub const MIGRATE_PREFIX: &str = "xlfs.dht.migrate:";
/// `getxattr(file, "xlfs.dht.migrate-links:<P1>/<N1>/<P2>/<N2>...")`: move a file with hard
/// links, every one of its names at once, off a decommissioned child (see [`crate::links`]).
pub const MIGRATE_LINKS_PREFIX: &str = "xlfs.dht.migrate-links:";
/// On the old copy of a file being moved: the name of the child that gets its data.
pub const MIGRATED_XATTR: &str = "trusted.dht.migrated";
/// The inodelk domain features/locks treats as a write barrier.
pub const BARRIER_DOMAIN: &str = "xlfs.dht.migrate";
/// The temporary name of a copy being made, in the file's directory.
pub(crate) const TEMP_PREFIX: &str = ".xlfs-dht-move.";
/// Bytes copied per read.
const CHUNK: u32 = 1 << 20;
/// Copy passes before the barrier, at most.
const PRE_PASSES: usize = 3;
/// The largest file copied again under the barrier (other clients' changes wait meanwhile);
/// a larger one that changed since its last pass is skipped (`changing`).
const RECOPY_UNDER_BARRIER_MAX: u64 = 64 << 20;

/// What says a file changed: size, mtime, ctime.
fn stamp(a: &Iatt) -> (u64, xlator_api::Timespec, xlator_api::Timespec) {
    (a.size, a.mtime, a.ctime)
}

/// A lock owner no other migration of this process uses.
pub(crate) fn new_owner() -> LkOwner {
    xlator_api::sdk::new_lock_owner()
}

pub(crate) fn whole(kind: LockKind, owner: LkOwner) -> Flock {
    Flock {
        kind,
        start: 0,
        len: 0,
        pid: 0,
        owner,
    }
}

fn text(s: impl Into<String>) -> Buf {
    Buf::from_vec(s.into().into_bytes())
}

/// What a move did.
#[derive(Debug, PartialEq, Eq)]
pub enum Moved {
    InPlace,
    Moved(u64),
    Skipped(&'static str),
}

impl Moved {
    fn answer(&self) -> String {
        match self {
            Moved::InPlace => "in-place".into(),
            Moved::Moved(n) => format!("moved {n}"),
            Moved::Skipped(why) => format!("skipped {why}"),
        }
    }
}

/// The arguments of a migrate request: `<PARENT>/<NAME>`.
pub(crate) fn parse_migrate(arg: &str) -> Result<(Gfid, String), Errno> {
    let (p, name) = arg.split_once('/').ok_or(Errno::EINVAL)?;
    let parent = Gfid::parse(p).ok_or(Errno::EINVAL)?;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Errno::EINVAL);
    }
    Ok((parent, name.to_owned()))
}

impl Shared {
    /// The virtual xattrs of rebalance, or `None` for any other name.
    pub async fn rebalance_xattr(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        name: &str,
    ) -> Option<Result<Buf, Errno>> {
        let op = if name == FIX_LAYOUT || name == COMMIT_LAYOUT {
            name
        } else if name.starts_with(MIGRATE_LINKS_PREFIX) {
            MIGRATE_LINKS_PREFIX
        } else if name.starts_with(MIGRATE_PREFIX) {
            MIGRATE_PREFIX
        } else {
            return None;
        };
        if cx.uid() != 0 {
            return Some(Err(Errno::EPERM));
        }
        Some(match op {
            FIX_LAYOUT => self.fix_layout(gfid).await.map(text),
            COMMIT_LAYOUT => self.commit_layout(gfid).await.map(text),
            MIGRATE_LINKS_PREFIX => {
                match crate::links::parse_links(&name[MIGRATE_LINKS_PREFIX.len()..]) {
                    Ok(names) => self
                        .migrate_links(gfid, &names)
                        .await
                        .map(|m| text(m.answer())),
                    Err(e) => Err(e),
                }
            }
            _ => match parse_migrate(&name[MIGRATE_PREFIX.len()..]) {
                Ok((parent, n)) => self
                    .migrate(gfid, parent, &n)
                    .await
                    .map(|m| text(m.answer())),
                Err(e) => Err(e),
            },
        })
    }

    /// Each child's slice of directory `dir`, read now (`Err`: a child did not answer).
    pub(crate) async fn read_slices(&self, dir: Gfid) -> Result<Vec<Option<Slice>>, Errno> {
        let cx = Ctx::root();
        let names: RVec<RString> = vec![RString::from(LAYOUT_XATTR)].into();
        let replies = self
            .fan(|i| self.children[i].getxattrs(&cx, dir, names.clone()))
            .await;
        let mut out = Vec::with_capacity(replies.len());
        for r in replies {
            let xs = r?;
            out.push(layout::slice_in(xlator_api::find_xattr(&xs, LAYOUT_XATTR)));
        }
        Ok(out)
    }

    /// The layout the slices make if it is complete and leaves out exactly the decommissioned
    /// children.
    pub(crate) fn settled(&self, slices: &[Option<Slice>]) -> Option<Layout> {
        let mut ex = self.excluded();
        ex.sort_unstable();
        Layout::merge(slices)
            .ok()
            .filter(|l| l.empty_children() == ex.as_slice())
    }

    /// Rewrites `dir`'s layout when it is not the one the current children (less the
    /// decommissioned) call for: `"fixed"` or `"unchanged"`. A directory copy missing on a
    /// child is made first (its name known from a listing or lookup of this client).
    pub async fn fix_layout(&self, dir: Gfid) -> Result<&'static str, Errno> {
        self.require_all_up()?;
        if let Home::File(_) = self.home(&Ctx::root(), dir).await? {
            return Err(Errno::ENOTDIR);
        }
        if dir != Gfid::ROOT
            && let Some((parent, name)) = self.dir_name(dir)
        {
            // Heals missing copies (and repairs an anomalous layout on the way).
            self.forget_layout(dir);
            self.dir_lookup(&Ctx::root(), &Loc::new(parent, name.as_str()), None)
                .await?;
        }
        self.forget_layout(dir);
        let fixed = self
            .with_layout_lock(dir, async {
                let slices = self.read_slices(dir).await?;
                if let Some(l) = self.settled(&slices) {
                    self.remember_layout(dir, std::sync::Arc::new(l));
                    return Ok(None);
                }
                Ok(Some(self.repair_layout(dir, &slices).await))
            })
            .await?;
        let Some(l) = fixed else {
            return Ok("unchanged");
        };
        self.log(
            LogLevel::Info,
            &format!(
                "directory {dir}: layout fixed for {} children ({} without a range){}",
                self.n(),
                l.empty_children().len(),
                if l.trusted {
                    ""
                } else {
                    ", not trusted until rebalance placed its files"
                }
            ),
        );
        Ok("fixed")
    }

    /// Marks `dir`'s layout trusted (its files are all on their hashed children): `"trusted"`,
    /// or `"unchanged"` when it already was. EAGAIN when the layout is not the settled one
    /// (fix it first).
    pub async fn commit_layout(&self, dir: Gfid) -> Result<&'static str, Errno> {
        self.require_all_up()?;
        self.with_layout_lock(dir, self.commit_layout_locked(dir))
            .await
    }

    async fn commit_layout_locked(&self, dir: Gfid) -> Result<&'static str, Errno> {
        let slices = self.read_slices(dir).await?;
        let Some(l) = self.settled(&slices) else {
            return Err(Errno::EAGAIN);
        };
        let fresh = l.with_trust(true);
        if l.trusted {
            return Ok("unchanged");
        }
        let cx = Ctx::root();
        let writes = self
            .fan(|i| {
                let v = fresh.slice_of(i).map(|s| s.encode()).unwrap_or_default();
                let x = Xattr {
                    name: LAYOUT_XATTR.into(),
                    value: v.into(),
                };
                self.children[i].setxattr(&cx, dir, x, 0)
            })
            .await;
        self.forget_layout(dir);
        writes.into_iter().collect::<Result<Vec<()>, Errno>>()?;
        Ok("trusted")
    }

    /// Moves file `gfid`, named `name` in `parent`, to the child its name hashes to.
    pub async fn migrate(&self, gfid: Gfid, parent: Gfid, name: &str) -> Result<Moved, Errno> {
        self.require_all_up()?;
        let loc = Loc::new(parent, name);
        let layout = self.layout_of(parent).await?;
        let d = layout.hashed(name);
        let (rcx, _) = with_own_req(&Ctx::root());
        let names: Vec<Result<Entry, Errno>> = self
            .fan(|i| self.children[i].lookup(&rcx, loc.clone()))
            .await;
        // Where the data is, stale link files, leftovers of an interrupted move.
        let mut copies: Vec<(usize, Entry)> = Vec::new();
        let mut half_switched = false;
        let mut other_on_d = None;
        for (i, r) in names.iter().enumerate() {
            match r {
                Ok(e) if e.attr.is_dir() => return Ok(Moved::Skipped("not-a-file")),
                Ok(e) if entry_is_linkfile(e) => {
                    if e.attr.gfid == gfid && i == d {
                        // The copy renamed into place by a move that stopped before giving
                        // it its mode: S still holds the data; the move is made again.
                        half_switched = true;
                    } else if i != d {
                        // Lookups ask the hashed child: a link file elsewhere is stale.
                        let _ = self.unlink_exact(i, &loc, e.attr.gfid).await;
                        Shared::bump(&self.counters.stale_linkfiles);
                    }
                }
                Ok(e) if e.attr.gfid == gfid => copies.push((i, e.clone())),
                Ok(e) if i == d => other_on_d = Some(e.attr.gfid),
                Ok(_) => {}
                Err(Errno::ENOENT) => {}
                Err(e) => return Err(*e),
            }
        }
        if copies.is_empty() {
            return Err(Errno::ENOENT);
        }
        if let Some((_, on_d)) = copies.iter().find(|(i, _)| *i == d) {
            // In place. Other copies are old ones a move switched away from but could not
            // remove (it stopped in between): they go now.
            for (i, _) in copies.iter().filter(|(i, _)| *i != d) {
                let _ = self.unlink_exact(*i, &loc, gfid).await;
                self.log(
                    LogLevel::Info,
                    &format!("{parent}/{name}: removed child {i}'s old copy of a finished move"),
                );
            }
            if on_d.xattr(LINKTO_XATTR).is_some() {
                let _ = self.children[d]
                    .removexattr(&Ctx::root(), gfid, LINKTO_XATTR.into())
                    .await;
            }
            return Ok(Moved::InPlace);
        }
        if copies.len() > 1 {
            // Copies on several children, none on D: what a move stopped after its switch
            // leaves when D changed since (another add-brick) or when the file has hard links
            // (it went to the hashed child of another of its names). The copy on a child that
            // stays is the file; those on decommissioned children are old ones.
            let ex = self.excluded();
            let (keep, old): (Vec<_>, Vec<_>) =
                copies.into_iter().partition(|(i, _)| !ex.contains(i));
            if keep.len() != 1 {
                self.log(
                    LogLevel::Warn,
                    &format!(
                        "{parent}/{name}: {} copies of {gfid} on children that stay; not moved",
                        keep.len()
                    ),
                );
                return Ok(Moved::Skipped("conflict"));
            }
            for (i, _) in &old {
                self.unlink_exact(*i, &loc, gfid).await?;
                self.log(
                    LogLevel::Info,
                    &format!("{parent}/{name}: removed child {i}'s old copy of a finished move"),
                );
            }
            copies = keep;
        }
        let (s, entry) = copies.swap_remove(0);
        if let Some(other) = other_on_d {
            // Another file holds the name on D: two files under one name; leave it alone.
            self.log(
                LogLevel::Warn,
                &format!(
                    "{parent}/{name}: child {d} holds another file {other} under this name; not moved"
                ),
            );
            return Ok(Moved::Skipped("conflict"));
        }
        if half_switched {
            self.unlink_exact(d, &loc, gfid).await?;
        }
        let a = entry.attr;
        if a.nlink > 1 {
            if self.excluded().contains(&s) {
                // Every name must move at once: the runner sends them together once its crawl
                // found them all (`migrate_links`).
                return Ok(Moved::Skipped("hard-links"));
            }
            // The file stays where its other names are; this name's hashed child points at it.
            let on_d = names[d]
                .as_ref()
                .ok()
                .filter(|e| !half_switched && entry_is_linkfile(e));
            self.point_name(d, &loc, on_d, s).await?;
            return Ok(Moved::InPlace);
        }
        if a.kind != FileType::Regular {
            return self.move_special(s, d, &loc, a).await;
        }
        self.move_file(s, d, &loc, a, &[]).await
    }

    /// Moves a symlink, fifo, socket or device node: nothing to copy under a barrier, since
    /// what it holds (a symlink's target, a device number) never changes. A copy with the
    /// same GFID, owner, xattrs and times is made on D under a temporary name and renamed over
    /// the name there (replacing D's link file, if any); then S's name is removed if it still
    /// names the GFID. If another client renamed or replaced it on S meanwhile, the copy on D
    /// goes again and the move counts as vanished (ENOENT). A device node a brick refuses to
    /// make (`allow-devices off`) is skipped (`no-devices`).
    async fn move_special(&self, s: usize, d: usize, loc: &Loc, a: Iatt) -> Result<Moved, Errno> {
        let g = a.gfid;
        let root = Ctx::root();
        let tmp = Loc::new(loc.parent, format!("{TEMP_PREFIX}{g}").as_str());
        let cx = Ctx::builder(0, 0).ext(&GfidReq(g)).build();
        let made = match a.kind {
            FileType::Symlink => {
                let target = self.children[s].readlink(&root, g).await?;
                self.children[d].symlink(&cx, tmp.clone(), target).await
            }
            kind => {
                self.children[d]
                    .mknod(
                        &cx,
                        tmp.clone(),
                        kind.mode_bits() | (a.perm & 0o7777),
                        a.rdev,
                        0,
                    )
                    .await
            }
        };
        match made {
            Ok(_) => {}
            Err(Errno::EPERM) if a.kind != FileType::Symlink => {
                return Ok(Moved::Skipped("no-devices"));
            }
            Err(e) => return Err(e),
        }
        let undo_tmp = async || {
            let _ = self.unlink_exact(d, &tmp, g).await;
        };
        let attrs = SetAttr {
            uid: ROption::RSome(a.uid),
            gid: ROption::RSome(a.gid),
            ..SetAttr::default()
        };
        if let Err(e) = self.children[d].setattr(&root, g, attrs).await {
            undo_tmp().await;
            return Err(e);
        }
        if let Err(e) = self.copy_xattrs(s, d, g).await {
            undo_tmp().await;
            return Err(e);
        }
        // Times last (the owner and xattr changes above moved ctime, not these), and for a
        // symlink only if the brick sets them on the link itself.
        let times = SetAttr {
            atime: TimeSet::At(a.atime),
            mtime: TimeSet::At(a.mtime),
            ..SetAttr::default()
        };
        let _ = self.children[d].setattr(&root, g, times).await;
        if let Err(e) = self.children[d]
            .rename(&root, tmp.clone(), loc.clone(), 0)
            .await
        {
            undo_tmp().await;
            return Err(e);
        }
        self.drop_old_name(s, d, loc, g).await?;
        self.forget_home(g);
        self.remember_home(g, Home::File(d));
        self.log(
            LogLevel::Debug,
            &format!(
                "{}/{}: moved a {:?} from child {s} to child {d}",
                loc.parent, loc.name, a.kind
            ),
        );
        Ok(Moved::Moved(0))
    }

    /// Removes `loc` on child `i` if it still names `gfid`; a name already gone is done.
    pub(crate) async fn unlink_exact(&self, i: usize, loc: &Loc, gfid: Gfid) -> Result<(), Errno> {
        match self.unlink_if(i, loc, gfid).await {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes `loc` on child `i` only while it names `gfid`: ESTALE when it names another
    /// object, ENOENT when it is gone.
    pub(crate) async fn unlink_if(&self, i: usize, loc: &Loc, gfid: Gfid) -> Result<(), Errno> {
        let cx = Ctx::builder(0, 0).ext(&UnlinkExact(gfid)).build();
        self.children[i].unlink(&cx, loc.clone()).await.map(drop)
    }

    /// Steps 2 to 6 of the module doc. `extra`: the file's other names (hard links), all on
    /// S, switched with `loc` under the barrier.
    pub(crate) async fn move_file(
        &self,
        s: usize,
        d: usize,
        loc: &Loc,
        a: Iatt,
        extra: &[Linked],
    ) -> Result<Moved, Errno> {
        let g = a.gfid;
        let root = Ctx::root();
        let marker = Xattr {
            name: MIGRATED_XATTR.into(),
            value: self.children[d].name().as_bytes().to_vec().into(),
        };
        self.children[s].setxattr(&root, g, marker, 0).await?;
        let src = Fd {
            id: self.services.new_fd_id(),
            gfid: g,
            flags: libc::O_RDONLY,
        };
        if let Err(e) = self.children[s].open(&root, src).await {
            let _ = self.unmark(s, g).await;
            return Err(e);
        }
        let tmp = Loc::new(loc.parent, format!("{TEMP_PREFIX}{g}").as_str());
        let dst = Fd {
            id: self.services.new_fd_id(),
            gfid: g,
            flags: libc::O_RDWR,
        };
        let r = self.copy_and_switch(s, d, loc, &tmp, src, dst, extra).await;
        let _ = self.children[s].release(&root, src).await;
        match &r {
            Ok(Moved::Moved(_)) => {
                self.forget_home(g);
                self.remember_home(g, Home::File(d));
            }
            _ => {
                let _ = self.unmark(s, g).await;
            }
        }
        r
    }

    async fn unmark(&self, s: usize, g: Gfid) -> Result<(), Errno> {
        self.children[s]
            .removexattr(&Ctx::root(), g, MIGRATED_XATTR.into())
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn copy_and_switch(
        &self,
        s: usize,
        d: usize,
        loc: &Loc,
        tmp: &Loc,
        src: Fd,
        dst: Fd,
        extra: &[Linked],
    ) -> Result<Moved, Errno> {
        let g = src.gfid;
        let root = Ctx::root();
        // A temporary copy left by an interrupted move.
        self.unlink_exact(d, tmp, g).await?;
        let made = CreateXattrs(vec![(
            LINKTO_XATTR.to_string(),
            self.children[s].name().as_bytes().to_vec(),
        )]);
        let mcx = Ctx::builder(0, 0).ext(&GfidReq(g)).ext(&made).build();
        match self.children[d]
            .create(
                &mcx,
                tmp.clone(),
                Fd {
                    flags: dst.flags | libc::O_EXCL,
                    ..dst
                },
                LINK_MODE,
                0,
            )
            .await
        {
            Ok(_) => {}
            Err(Errno::EEXIST) => return Ok(Moved::Skipped("busy")),
            Err(e) => return Err(e),
        }
        let r = self
            .copy_under_barrier(s, d, loc, tmp, src, dst, extra)
            .await;
        let _ = self.children[d].release(&root, dst).await;
        if !matches!(r, Ok(Moved::Moved(_))) {
            // Not switched: the temporary copy goes (by whichever name it has now).
            let _ = self.unlink_exact(d, tmp, g).await;
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    async fn copy_under_barrier(
        &self,
        s: usize,
        d: usize,
        loc: &Loc,
        tmp: &Loc,
        src: Fd,
        dst: Fd,
        extra: &[Linked],
    ) -> Result<Moved, Errno> {
        let g = src.gfid;
        let root = Ctx::root();
        // Copy passes until a whole pass saw the file unchanged (or PRE_PASSES): the barrier
        // then usually finds nothing to copy again, and holds other clients' writes only for
        // the check and the switch.
        let mut before = self.children[s].fstat(&root, src).await?;
        let mut size = 0;
        for pass in 0..PRE_PASSES {
            size = self.copy_data(s, d, src, dst, before.size).await?;
            self.copy_xattrs(s, d, g).await?;
            let after = self.children[s].fstat(&root, src).await?;
            if stamp(&after) == stamp(&before) || pass + 1 == PRE_PASSES {
                // `before` stays the state the copy started from: what the barrier compares
                // with (a change during this last pass is seen there).
                break;
            }
            before = after;
        }
        let owner = SetAttr {
            uid: ROption::RSome(before.uid),
            gid: ROption::RSome(before.gid),
            ..SetAttr::default()
        };
        self.children[d].setattr(&root, g, owner).await?;
        // The barrier (step 4).
        let owner = new_owner();
        let bcx = Ctx::builder(0, 0).lk_owner(owner).build();
        let lock = self.children[s]
            .inodelk(
                &bcx,
                BARRIER_DOMAIN.into(),
                g,
                LkCmd::SetWait,
                whole(LockKind::Write, owner),
            )
            .await;
        match lock {
            Ok(()) => {}
            Err(Errno::EBUSY) => return Ok(Moved::Skipped("locked")),
            // No features/locks below: nothing would hold other clients' writes.
            Err(Errno::ENOSYS) => return Ok(Moved::Skipped("no-barrier")),
            Err(e) => return Err(e),
        }
        let r = async {
            let now = self.children[s].fstat(&root, src).await?;
            if !extra.is_empty() && !self.names_still_ours(s, loc, extra, &now).await? {
                // A name was added, removed or replaced since the crawl found them.
                return Ok(Moved::Skipped("hard-links"));
            }
            if stamp(&now) != stamp(&before) {
                if now.size > RECOPY_UNDER_BARRIER_MAX {
                    // Still changing, and too large to copy again while writers wait (they
                    // would time out): left for a later run.
                    return Ok(Moved::Skipped("changing"));
                }
                // Changed since the last pass: again, now that nothing can change it.
                size = self.copy_data(s, d, src, dst, now.size).await?;
                self.copy_xattrs(s, d, g).await?;
                if (now.uid, now.gid) != (before.uid, before.gid) {
                    let owner = SetAttr {
                        uid: ROption::RSome(now.uid),
                        gid: ROption::RSome(now.gid),
                        ..SetAttr::default()
                    };
                    self.children[d].setattr(&root, g, owner).await?;
                }
            }
            self.children[d].fsync(&root, dst, false).await?;
            // The switch (step 5).
            self.children[d]
                .rename(&root, tmp.clone(), loc.clone(), 0)
                .await?;
            if let Err(e) = self.switch_links(s, d, extra, g).await {
                self.undo_switch(s, d, loc, g).await;
                return Err(e);
            }
            let final_attrs = SetAttr {
                perm: ROption::RSome(now.perm & 0o7777),
                atime: TimeSet::At(now.atime),
                mtime: TimeSet::At(now.mtime),
                ..SetAttr::default()
            };
            if let Err(e) = self.children[d].setattr(&root, g, final_attrs).await {
                // Still a link file to S on D: put the names back as they were.
                self.undo_links(s, d, extra, g).await;
                self.undo_switch(s, d, loc, g).await;
                return Err(e);
            }
            let _ = self.children[d]
                .removexattr(&root, g, LINKTO_XATTR.into())
                .await;
            if !extra.is_empty() {
                self.repoint_links(d, extra).await;
                self.drop_old_names(s, d, loc, extra, g).await?;
                if let Ok(left) = self.children[s].fstat(&root, src).await
                    && left.nlink > 0
                {
                    // A name added by a client since the check (namespace changes are not
                    // held by the barrier): it still reaches the old copy; the next run
                    // moves it.
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{g}: child {s} kept {} name(s) added during its move",
                            left.nlink
                        ),
                    );
                }
                return Ok(Moved::Moved(size));
            }
            self.drop_old_name(s, d, loc, g).await?;
            // ENOENT from the unlink above (S's name already gone) means the name was
            // removed by a client between the lookup and now; unlink_exact treats it as done,
            // so check that S does not hold the name under another GFID either.
            Ok(Moved::Moved(size))
        }
        .await;
        let _ = self.children[s]
            .inodelk(
                &bcx,
                BARRIER_DOMAIN.into(),
                g,
                LkCmd::Set,
                whole(LockKind::Unlock, owner),
            )
            .await;
        if let Ok(Moved::Moved(n)) = &r {
            self.log(
                LogLevel::Debug,
                &format!(
                    "{}/{}: moved {n} bytes from child {s} to child {d}",
                    loc.parent, loc.name
                ),
            );
        }
        r
    }

    /// The last step of a move: S's name is removed if it still names `g`. If another client
    /// renamed or replaced it on S meanwhile, the file is not ours to move: the copy on D goes
    /// again and the move counts as vanished (ENOENT). Any other failure undoes the switch.
    async fn drop_old_name(&self, s: usize, d: usize, loc: &Loc, g: Gfid) -> Result<(), Errno> {
        match self.unlink_exact(s, loc, g).await {
            Ok(()) => Ok(()),
            Err(Errno::ESTALE) => {
                let _ = self.unlink_exact(d, loc, g).await;
                Err(Errno::ENOENT)
            }
            Err(e) => {
                self.undo_switch(s, d, loc, g).await;
                Err(e)
            }
        }
    }

    /// Takes the copy renamed into place on D away again; the name on D becomes a link file
    /// to S if S still holds the file under it (else the name went meanwhile: nothing).
    pub(crate) async fn undo_switch(&self, s: usize, d: usize, loc: &Loc, g: Gfid) {
        let _ = self.unlink_exact(d, loc, g).await;
        let on_s = self.children[s].lookup(&Ctx::root(), loc.clone()).await;
        if on_s.is_ok_and(|e| e.attr.gfid == g) {
            let _ = self.make_linkfile(d, loc, s).await;
        }
    }

    /// Copies `size` bytes from `src` on child `s` into `dst` on child `d` (all-zero chunks
    /// are left as holes), then sets `dst`'s size. The number of bytes copied.
    async fn copy_data(
        &self,
        s: usize,
        d: usize,
        src: Fd,
        dst: Fd,
        size: u64,
    ) -> Result<u64, Errno> {
        let root = Ctx::root();
        let cut = SetAttr {
            size: ROption::RSome(0),
            ..SetAttr::default()
        };
        self.children[d].fsetattr(&root, dst, cut).await?;
        let mut off = 0u64;
        while off < size {
            let want = CHUNK.min(u32::try_from(size - off).unwrap_or(CHUNK));
            let r = self.children[s].readv(&root, src, off, want).await?;
            let n = r.data.len() as u64;
            if n == 0 {
                break;
            }
            if r.data.as_slice().iter().any(|b| *b != 0) {
                let w = self.children[d].writev(&root, dst, off, r.data, 0).await?;
                if w.written != n {
                    return Err(Errno::EIO);
                }
            }
            off += n;
        }
        let len = SetAttr {
            size: ROption::RSome(off),
            ..SetAttr::default()
        };
        self.children[d].fsetattr(&root, dst, len).await?;
        Ok(off)
    }

    /// Copies the file's own xattrs (not this translator's) from child `s` to child `d`.
    async fn copy_xattrs(&self, s: usize, d: usize, g: Gfid) -> Result<(), Errno> {
        let root = Ctx::root();
        let names: RVec<RString> = self.children[s]
            .listxattr(&root, g)
            .await?
            .into_iter()
            .filter(|n| !n.starts_with(OWN_PREFIX))
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let xs = self.children[s].getxattrs(&root, g, names).await?;
        if xs.is_empty() {
            return Ok(());
        }
        self.children[d].setxattrs(&root, g, xs, 0).await
    }

    // ---- clients: fds of a file that moved ----

    /// Whether the file behind `fd`, open on child `c` and now nameless there (a reply said
    /// `nlink` 0), was moved: then `fd` is opened on the child that holds it now and becomes
    /// that child's; the new child. A file simply unlinked is remembered as such per fd (one
    /// check).
    pub async fn moved_to(&self, fd: Fd, c: usize) -> Option<usize> {
        if fd.is_anonymous() {
            // No fd to move: the next fop resolves the GFID afresh.
            self.forget_home(fd.gfid);
            return None;
        }
        // One check at a time (a rare path): fops on the fd that saw the same reply wait here
        // and find it already moved or known unlinked.
        let _one = self.move_checks.lock().await;
        match self.fd_state(fd) {
            Some(st) if st.child != c => return Some(st.child),
            Some(st) if st.unlinked => return None,
            Some(_) => {}
            None => return None,
        }
        let root = Ctx::root();
        let to = match self.children[c]
            .fgetxattr(&root, fd, MIGRATED_XATTR.into())
            .await
        {
            Ok(v) => self.child_named(v.as_slice()).filter(|d| *d != c),
            Err(_) => None,
        };
        let Some(d) = to else {
            self.fd_moved(fd.id, None);
            return None;
        };
        let again = Fd {
            flags: fd.flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC),
            ..fd
        };
        match self.children[d].open(&root, again).await {
            Ok(_) => {
                self.fd_moved(fd.id, Some(d));
                let _ = self.children[c].release(&root, fd).await;
                self.forget_home(fd.gfid);
                self.remember_home(fd.gfid, Home::File(d));
                self.log(
                    LogLevel::Debug,
                    &format!("fd {} of {}: its file moved to child {d}", fd.id.0, fd.gfid),
                );
                Some(d)
            }
            Err(e) => {
                self.log(
                    LogLevel::Warn,
                    &format!(
                        "fd {} of {}: its file moved to child {d} but cannot be opened there: {e}",
                        fd.id.0, fd.gfid
                    ),
                );
                self.fd_moved(fd.id, None);
                None
            }
        }
    }
}

/// Whether a reply's attributes say the file behind an fd lost its last name.
pub fn nameless(a: Option<&Iatt>) -> bool {
    a.is_some_and(|a| a.nlink == 0 && a.kind == FileType::Regular)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate_arguments_parse() {
        let g = Gfid::random();
        assert_eq!(
            parse_migrate(&format!("{g}/a b")).expect("ok"),
            (g, "a b".to_owned())
        );
        for bad in [
            format!("{g}"),
            format!("{g}/"),
            format!("{g}/a/b"),
            format!("{g}/.."),
            "nope/a".to_owned(),
        ] {
            assert_eq!(parse_migrate(&bad), Err(Errno::EINVAL), "{bad}");
        }
    }

    #[test]
    fn answers_are_what_the_runner_parses() {
        assert_eq!(Moved::InPlace.answer(), "in-place");
        assert_eq!(Moved::Moved(12).answer(), "moved 12");
        assert_eq!(Moved::Skipped("locked").answer(), "skipped locked");
    }
}
