//! Lookups, layouts and directory self-heal.
//!
//! A name is looked up on the child its hash names in the parent's layout. There:
//! - a directory: the other children are asked too, missing copies are made (same GFID,
//!   attributes of the first copy) and the layout is checked and repaired;
//! - a link file: its target child is asked (the data lives there);
//! - a file: that is the answer (one call);
//! - nothing: with a trusted complete layout that is the answer (one call); otherwise every
//!   other child is asked once, and a file found elsewhere gets a link file on the hashed
//!   child so the next lookup goes straight to it.
//!
//! Repairs (missing directory copies, layouts) are made only while every child is up: a
//! layout written while a child is unreachable would leave it out.

use std::sync::Arc;

use xlator_api::{
    CreateXattrs, Ctx, Entry, Errno, Fd, Gfid, GfidReq, Iatt, Loc, LogLevel, SetAttr, Xattr,
    XattrReq,
};

use crate::dirrename::{Renaming, asking_for_marks};
use crate::layout::{self, LAYOUT_XATTR, Layout, Slice};
use crate::shared::{
    Home, LINK_MODE, LINKTO_XATTR, Shared, entry_is_linkfile, first_error, internal_with,
    merge_dir_attrs, strip_own, with_own_req,
};

/// How many times a directory's lookup asks again when its copies answer with different
/// GFIDs before calling it a split (EIO): each retry is one more round trip, taken only then.
const GFID_RACE_RETRIES: u32 = 2;

/// What a name resolves to.
pub(crate) struct Resolved {
    /// The name's hashed child in the parent's layout.
    pub hashed: usize,
    /// A link file with this name on the hashed child: its GFID and the child it names
    /// (`None`: a name no child has).
    pub link: Option<(Gfid, Option<usize>)>,
    pub found: Option<Found>,
}

pub(crate) enum Found {
    /// A non-directory on one child (its entry there, own xattrs still in it).
    File { child: usize, entry: Entry },
    /// A directory (merged entry).
    Dir { entry: Entry },
}

impl Shared {
    /// The layout of directory `dir`: cached, or read from every child (and repaired).
    pub async fn layout_of(&self, dir: Gfid) -> Result<Arc<Layout>, Errno> {
        if let Some(l) = self.cached_layout(dir) {
            return Ok(l);
        }
        let cx = Ctx::root();
        // Not a directory: every child but one would answer ESTALE; the POSIX answer is this.
        if let Home::File(_) = self.home(&cx, dir).await? {
            return Err(Errno::ENOTDIR);
        }
        let names: Vec<xlator_api::abi_stable::std_types::RString> = vec![LAYOUT_XATTR.into()];
        let replies = self
            .fan(|i| self.children[i].getxattrs(&cx, dir, names.clone().into()))
            .await;
        let complete = replies.iter().all(Result::is_ok);
        if !complete && replies.iter().all(Result::is_err) {
            return Err(first_error(replies.into_iter().filter_map(Result::err)));
        }
        let slices: Vec<Option<Slice>> = replies
            .iter()
            .map(|r| {
                r.as_ref()
                    .ok()
                    .and_then(|xs| layout::slice_in(xlator_api::find_xattr(xs, LAYOUT_XATTR)))
            })
            .collect();
        self.settle_layout(dir, &slices, complete).await
    }

    /// The layout the slices make, repaired when they are anomalous and `can_repair` (every
    /// copy of the directory answered). Cached when it is what the children hold.
    pub async fn settle_layout(
        &self,
        dir: Gfid,
        slices: &[Option<Slice>],
        can_repair: bool,
    ) -> Result<Arc<Layout>, Errno> {
        let excluded = {
            let mut v = self.excluded();
            v.sort_unstable();
            v
        };
        let merged = Layout::merge(slices).and_then(|l| {
            if l.empty_children() == excluded.as_slice() {
                Ok(l)
            } else {
                Err(vec![layout::Anomaly::Decommission])
            }
        });
        match merged {
            Ok(l) => {
                let l = Arc::new(l);
                self.remember_layout(dir, l.clone());
                Ok(l)
            }
            Err(why) if can_repair && self.all_up() => {
                let what: Vec<String> = why.iter().map(ToString::to_string).collect();
                // Under the layout lock, from the slices as they are now: another client
                // may have repaired it meanwhile.
                let repaired = self
                    .with_layout_lock(dir, async {
                        let now = self.read_slices(dir).await?;
                        if let Some(l) = self.settled(&now) {
                            let l = Arc::new(l);
                            self.remember_layout(dir, l.clone());
                            return Ok((l, false));
                        }
                        Ok((self.repair_layout(dir, &now).await, true))
                    })
                    .await;
                let l = match repaired {
                    Ok((l, false)) => return Ok(l),
                    Ok((l, true)) => l,
                    // Used now, written by a later repair.
                    Err(_) => return Ok(Arc::new(self.fresh_layout(dir, false))),
                };
                self.log(
                    LogLevel::Info,
                    &format!(
                        "directory {dir}: layout repaired ({}); new layout {}",
                        what.join("; "),
                        if l.trusted { "trusted" } else { "not trusted: names missing on their hashed child are looked up everywhere" }
                    ),
                );
                Ok(l)
            }
            // A child is missing: the layout it would get, used now, written by a later repair.
            Err(_) => Ok(Arc::new(self.fresh_layout(dir, false))),
        }
    }

    /// Writes a new layout of `dir` to every child: equal ranges over the children not
    /// decommissioned, each given to the child whose current range overlaps it most (so
    /// adding a child moves as few names as equal ranges allow, [`Layout::generate_keeping`]).
    /// It is trusted when it places every name as before (each child with a range keeps its
    /// range, all trusted) or the directory is empty on every child; otherwise a file may sit
    /// on a child its hash no longer names.
    pub(crate) async fn repair_layout(&self, dir: Gfid, slices: &[Option<Slice>]) -> Arc<Layout> {
        Shared::bump(&self.counters.layouts_repaired);
        let fresh = Layout::generate_keeping(dir, self.n(), &self.excluded(), slices, true);
        let same = fresh.keeps_ranges_of(slices)
            && slices
                .iter()
                .flatten()
                .all(|s| s.flags & layout::TRUSTED != 0);
        let trusted = same || self.empty_everywhere(dir).await;
        let l = fresh.with_trust(trusted);
        let cx = Ctx::root();
        let writes = self
            .fan(|i| {
                let v = l.slice_of(i).map(|s| s.encode()).unwrap_or_default();
                let x = Xattr {
                    name: LAYOUT_XATTR.into(),
                    value: v.into(),
                };
                self.children[i].setxattr(&cx, dir, x, 0)
            })
            .await;
        let l = Arc::new(l);
        if writes.iter().all(Result::is_ok) {
            self.remember_layout(dir, l.clone());
        } else {
            let errs: Vec<String> = writes
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("child {i}: {e}")))
                .collect();
            self.log(
                LogLevel::Warn,
                &format!(
                    "directory {dir}: layout write failed ({}); the next lookup repairs it again",
                    errs.join(", ")
                ),
            );
        }
        l
    }

    /// Whether directory `dir` lists no entry on any child.
    pub(crate) async fn empty_everywhere(&self, dir: Gfid) -> bool {
        let cx = Ctx::root();
        let r = self
            .fan(|i| {
                let cx = cx.clone();
                async move {
                    let child = &self.children[i];
                    let fd = Fd {
                        id: self.services.new_fd_id(),
                        gfid: dir,
                        flags: libc::O_RDONLY,
                    };
                    child.opendir(&cx, fd).await?;
                    let page = child.readdirp(&cx, fd, 0, 4096).await;
                    let _ = child.releasedir(&cx, fd).await;
                    page.map(|p| p.is_empty())
                }
            })
            .await;
        r.iter().all(|x| matches!(x, Ok(true)))
    }

    /// Resolves `loc` as the module doc says. `cx` is the caller's.
    pub async fn resolve(&self, cx: &Ctx, loc: &Loc) -> Result<Resolved, Errno> {
        Shared::bump(&self.counters.lookups);
        let layout = self.layout_of(loc.parent).await?;
        let h = layout.hashed(&loc.name);
        let (rcx, _) = with_own_req(cx);
        let mut out = Resolved {
            hashed: h,
            link: None,
            found: None,
        };
        // A name last seen as a directory: asked of every child at once (a directory's lookup
        // needs them all), unless that is no longer what it is.
        if self.seen_dir(loc.parent, &loc.name) {
            match self.dir_lookup(cx, loc, None).await {
                Ok(found) => {
                    out.found = Some(found);
                    return Ok(out);
                }
                // Not a directory now (or no copy answered): the ordinary lookup decides.
                Err(_) => self.unsee_dir(loc.parent, &loc.name),
            }
        }
        let mut skip = vec![h];
        match self.children[h].lookup(&rcx, loc.clone()).await {
            Ok(e) if e.attr.is_dir() => {
                out.found = Some(self.dir_lookup(cx, loc, Some((h, e))).await?);
                return Ok(out);
            }
            Ok(e) if entry_is_linkfile(&e) => {
                let target = e
                    .xattr(LINKTO_XATTR)
                    .and_then(|v| self.child_named(v.as_slice()));
                out.link = Some((e.attr.gfid, target));
                if let Some(t) = target.filter(|t| *t != h) {
                    Shared::bump(&self.counters.linkfiles_followed);
                    skip.push(t);
                    match self.children[t].lookup(&rcx, loc.clone()).await {
                        Ok(f) if !f.attr.is_dir() && !entry_is_linkfile(&f) => {
                            self.remember_home(f.attr.gfid, Home::File(t));
                            out.found = Some(Found::File { child: t, entry: f });
                            return Ok(out);
                        }
                        Ok(_) | Err(Errno::ENOENT) => {}
                        Err(e) => return Err(e),
                    }
                }
                Shared::bump(&self.counters.stale_linkfiles);
                if !self.cfg().lookup_unhashed {
                    return Ok(out);
                }
            }
            Ok(e) => {
                self.remember_home(e.attr.gfid, Home::File(h));
                out.found = Some(Found::File { child: h, entry: e });
                return Ok(out);
            }
            Err(Errno::ENOENT) => {
                if layout.trusted || !self.cfg().lookup_unhashed {
                    Shared::bump(&self.counters.negative_one_call);
                    return Ok(out);
                }
            }
            Err(e) => return Err(e),
        }
        self.everywhere(cx, &rcx, loc, &mut out, &skip).await?;
        Ok(out)
    }

    /// The lookup of `loc` on every child not in `skip`, once.
    async fn everywhere(
        &self,
        cx: &Ctx,
        rcx: &Ctx,
        loc: &Loc,
        out: &mut Resolved,
        skip: &[usize],
    ) -> Result<(), Errno> {
        Shared::bump(&self.counters.everywhere);
        let replies = self
            .fan(|i| {
                let loc = loc.clone();
                async move {
                    if skip.contains(&i) {
                        Err(Errno::ENOENT)
                    } else {
                        self.children[i].lookup(rcx, loc).await
                    }
                }
            })
            .await;
        let mut down = false;
        let mut file = None;
        for (i, r) in replies.into_iter().enumerate() {
            match r {
                Ok(e) if e.attr.is_dir() => {
                    out.found = Some(self.dir_lookup(cx, loc, Some((i, e))).await?);
                    return Ok(());
                }
                Ok(e) if entry_is_linkfile(&e) => {}
                Ok(e) if file.is_none() => file = Some((i, e)),
                Ok(_) => {}
                Err(Errno::ENOENT) => {}
                Err(Errno::ENOTCONN) => down = true,
                Err(e) => return Err(e),
            }
        }
        match file {
            Some((c, e)) => {
                self.remember_home(e.attr.gfid, Home::File(c));
                // Point the hashed child at it, so the next lookup goes straight there.
                let h = out.hashed;
                match out.link {
                    Some((lg, _)) => {
                        if self.point_link(h, lg, c).await.is_ok() {
                            out.link = Some((lg, Some(c)));
                        }
                    }
                    None => {
                        if let Ok(g) = self.make_linkfile(h, loc, c).await {
                            out.link = Some((g, Some(c)));
                        }
                    }
                }
                out.found = Some(Found::File { child: c, entry: e });
                Ok(())
            }
            None if down => Err(Errno::ENOTCONN),
            None => Ok(()),
        }
    }

    /// Creates a link file `loc` on child `on` naming child `target`; its GFID.
    pub async fn make_linkfile(&self, on: usize, loc: &Loc, target: usize) -> Result<Gfid, Errno> {
        let x = CreateXattrs(vec![(
            LINKTO_XATTR.to_string(),
            self.children[target].name().as_bytes().to_vec(),
        )]);
        let cx = internal_with(&x);
        let r = self.children[on]
            .mknod(&cx, loc.clone(), libc::S_IFREG | LINK_MODE, 0, 0)
            .await;
        match &r {
            Ok(_) => Shared::bump(&self.counters.linkfiles_made),
            Err(e) => self.log(
                LogLevel::Debug,
                &format!(
                    "link file {}/{} on child {on} -> child {target}: {e}",
                    loc.parent, loc.name
                ),
            ),
        }
        r.map(|e| e.attr.gfid)
    }

    /// Points link file `link` on child `on` at child `target`.
    pub async fn point_link(&self, on: usize, link: Gfid, target: usize) -> Result<(), Errno> {
        let x = Xattr {
            name: LINKTO_XATTR.into(),
            value: self.children[target].name().as_bytes().to_vec().into(),
        };
        self.children[on].setxattr(&Ctx::root(), link, x, 0).await
    }

    /// A directory's lookup on every child (`known`: one child's answer already in hand):
    /// copies checked for one GFID, missing copies made, the layout checked and repaired.
    pub async fn dir_lookup(
        &self,
        cx: &Ctx,
        loc: &Loc,
        known: Option<(usize, Entry)>,
    ) -> Result<Found, Errno> {
        let (found, renaming) = self.dir_lookup_once(cx, loc, known).await?;
        match renaming {
            // A rename of it left unfinished ([`crate::dirrename`]): finished now, then the
            // name is looked up again (the old name is gone, the new one complete).
            Some(r) if self.finish_renaming(r.0, &r.1).await => {
                Ok(self.dir_lookup_once(cx, loc, None).await?.0)
            }
            _ => Ok(found),
        }
    }

    async fn dir_lookup_once(
        &self,
        cx: &Ctx,
        loc: &Loc,
        known: Option<(usize, Entry)>,
    ) -> Result<(Found, Option<(Gfid, Renaming)>), Errno> {
        let (rcx, caller) = with_own_req(cx);
        let rcx = asking_for_marks(&rcx);
        let mut known = known;
        let mut retries = GFID_RACE_RETRIES;
        let (replies, base_at, base) = loop {
            let known_at = known.as_ref().map(|k| k.0);
            let replies: Vec<Result<Entry, Errno>> = self
                .fan(|i| {
                    let pre = if Some(i) == known_at {
                        known.clone()
                    } else {
                        None
                    };
                    let loc = loc.clone();
                    let rcx = rcx.clone();
                    async move {
                        match pre {
                            Some((_, e)) => Ok(e),
                            None => self.children[i].lookup(&rcx, loc).await,
                        }
                    }
                })
                .await;
            let Some((base_at, base)) = replies.iter().enumerate().find_map(|(i, r)| {
                r.as_ref()
                    .ok()
                    .filter(|e| e.attr.is_dir())
                    .map(|e| (i, e.clone()))
            }) else {
                return Err(first_error(replies.into_iter().filter_map(Result::err)));
            };
            // A rename over an existing directory cut short: the children that renamed
            // have the renamed directory here, the others still the one it replaces. Not
            // an EIO: the lookup finishes the rename.
            if let Some((e, r)) = replies.iter().find_map(|r| {
                let e = r.as_ref().ok().filter(|e| e.attr.is_dir())?;
                Some((e, Renaming::marked_in(&e.xattrs)?))
            }) && r.new == *loc
                && replies
                    .iter()
                    .flatten()
                    .any(|o| o.attr.is_dir() && o.attr.gfid != e.attr.gfid)
            {
                let mut entry = e.clone();
                strip_own(&mut entry.xattrs, caller.as_ref());
                return Ok((Found::Dir { entry }, Some((e.attr.gfid, r))));
            }
            // Two GFIDs for one name: the answers may span another client's rmdir and
            // mkdir of it (one child answered before, another after). Asked again, a race
            // agrees; copies that still differ are a split the brick's admin must settle.
            let split = replies
                .iter()
                .flatten()
                .any(|e| e.attr.is_dir() && e.attr.gfid != base.attr.gfid);
            if split && retries > 0 {
                retries -= 1;
                known = None;
                continue;
            }
            break (replies, base_at, base);
        };
        let gfid = base.attr.gfid;
        let mut missing = Vec::new();
        for (i, r) in replies.iter().enumerate() {
            match r {
                Ok(e) if e.attr.is_dir() && e.attr.gfid != gfid => {
                    self.log(
                        LogLevel::Error,
                        &format!(
                            "directory {}/{}: child {i}'s copy has GFID {}, another child's {gfid}; replying EIO (remove the wrong copy on the brick)",
                            loc.parent, loc.name, e.attr.gfid
                        ),
                    );
                    return Err(Errno::EIO);
                }
                Ok(e) if !e.attr.is_dir() => {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{}/{}: a directory elsewhere, a non-directory on child {i}",
                            loc.parent, loc.name
                        ),
                    );
                }
                Ok(_) => {}
                Err(Errno::ENOENT) => missing.push(i),
                Err(_) => {}
            }
        }
        let mut copies: Vec<Option<Entry>> = replies
            .into_iter()
            .map(|r| r.ok().filter(|e| e.attr.is_dir()))
            .collect();
        // The copies are made under the name's directory lock, taken without waiting (a
        // mkdir, rmdir or rename of it in progress holds it: the repair is left to a later
        // lookup), once the copy found is still there (an rmdir may have ended meanwhile).
        let guard = if !missing.is_empty() && self.all_up() {
            match self.lock_names(&[loc], false).await {
                Ok(held) => {
                    let still = self.children[base_at]
                        .lookup(&Ctx::root(), loc.clone())
                        .await;
                    if still.is_ok_and(|e| e.attr.gfid == gfid) {
                        Some(held)
                    } else {
                        self.unlock_names(held).await;
                        None
                    }
                }
                Err(_) => None,
            }
        } else {
            None
        };
        if let Some(held) = guard {
            // A new copy gets its slice of the deterministic layout when every other copy
            // holds exactly that layout, trusted: the new copy is empty, so nothing in its
            // range is misplaced. Otherwise the layout repair below decides.
            let fresh = self.fresh_layout(gfid, true);
            let consistent = copies.iter().enumerate().all(|(i, c)| {
                missing.contains(&i)
                    || c.as_ref()
                        .and_then(|e| layout::slice_in(e.xattr(LAYOUT_XATTR)))
                        == fresh.slice_of(i)
            });
            for i in missing {
                let slice = if consistent { fresh.slice_of(i) } else { None };
                if let Ok(e) = self.heal_dir_copy(i, loc, &base.attr, slice).await {
                    copies[i] = Some(e);
                }
            }
            self.unlock_names(held).await;
        }
        let all_answered = copies.iter().all(Option::is_some);
        let slices: Vec<Option<Slice>> = copies
            .iter()
            .map(|c| {
                c.as_ref()
                    .and_then(|e| layout::slice_in(e.xattr(LAYOUT_XATTR)))
            })
            .collect();
        self.settle_layout(gfid, &slices, all_answered).await?;
        self.remember_home(gfid, Home::Dir);
        self.remember_dir_name(gfid, loc.parent, &loc.name);
        let attrs: Vec<Iatt> = copies.iter().flatten().map(|e| e.attr).collect();
        let first = copies.iter().flatten().next().cloned().unwrap_or(base);
        let mut entry = Entry {
            attr: merge_dir_attrs(&attrs).unwrap_or(first.attr),
            postparent: first.postparent,
            xattrs: first.xattrs,
        };
        let renaming = copies
            .iter()
            .flatten()
            .find_map(|e| Renaming::marked_in(&e.xattrs))
            .map(|r| (gfid, r));
        strip_own(&mut entry.xattrs, caller.as_ref());
        Ok((Found::Dir { entry }, renaming))
    }

    /// Makes child `i`'s missing copy of directory `loc` like `like` (same GFID, mode, owner).
    pub(crate) async fn heal_dir_copy(
        &self,
        i: usize,
        loc: &Loc,
        like: &Iatt,
        slice: Option<Slice>,
    ) -> Result<Entry, Errno> {
        let mut b = Ctx::builder(0, 0).ext(&GfidReq(like.gfid));
        if let Some(s) = slice {
            b = b.ext(&CreateXattrs(vec![(LAYOUT_XATTR.to_string(), s.encode())]));
        }
        let cx = b.build();
        let e = self.children[i]
            .mkdir(&cx, loc.clone(), like.perm & 0o7777, 0)
            .await;
        match &e {
            Ok(_) => {
                Shared::bump(&self.counters.dirs_healed);
                let set = SetAttr {
                    uid: xlator_api::abi_stable::std_types::ROption::RSome(like.uid),
                    gid: xlator_api::abi_stable::std_types::ROption::RSome(like.gid),
                    perm: xlator_api::abi_stable::std_types::ROption::RSome(like.perm & 0o7777),
                    ..SetAttr::default()
                };
                let _ = self.children[i].setattr(&Ctx::root(), like.gfid, set).await;
                self.log(
                    LogLevel::Info,
                    &format!(
                        "directory {}/{}: made the missing copy on child {i}",
                        loc.parent, loc.name
                    ),
                );
            }
            Err(err) => self.log(
                LogLevel::Warn,
                &format!(
                    "directory {}/{}: could not make the missing copy on child {i}: {err}",
                    loc.parent, loc.name
                ),
            ),
        }
        e
    }

    /// The lookup fop: the resolved entry, this translator's xattrs stripped.
    pub async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let r = self.resolve(cx, &loc).await?;
        let caller = cx.ext::<XattrReq>();
        match r.found {
            Some(f) => {
                let mut e = match f {
                    Found::File { entry, .. } | Found::Dir { entry } => entry,
                };
                strip_own(&mut e.xattrs, caller.as_ref());
                Ok(e)
            }
            None => Err(Errno::ENOENT),
        }
    }
}
