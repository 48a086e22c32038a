//! Rebalance of files with hard links.
//!
//! A file with several names lives on one child; each name whose hashed child is another one
//! has a link file there pointing at it. Moving it means moving every name at once: the
//! names are all entries of one inode, and a name left behind on the old child would keep an
//! old copy of the data alive there.
//!
//! - **Add-brick** (the file's child stays): nothing moves. Each name's hashed child gets a
//!   link file to the file (or has its link file repointed), so the name is placed and the
//!   directory's layout can be trusted ([`Shared::point_name`]).
//! - **Remove-brick** (the file's child leaves): the runner collects every name of the file
//!   from its crawl (the names it was refused for with `skipped hard-links`) and, once it has
//!   as many as the file's `nlink`, sends them all in one request
//!   ([`crate::migrate::MIGRATE_LINKS_PREFIX`]). The file goes to the hashed child D of its
//!   first name, like a file with one name; under the barrier the names are checked again
//!   (still this file, no more and no fewer), and after the first name is switched each other
//!   name is linked to the copy on D under a temporary name and renamed into place (over D's
//!   link file where D is that name's hashed child). Once the copy has its mode, the link
//!   files of names hashed elsewhere point at D and the old names are removed.
//!
//! Not held by the barrier: namespace changes. A client adding, removing or renaming one of
//! the names in the instant between the check and the switch is seen afterwards (the old
//! copy keeps a name) and logged; the next run moves what is left.

use xlator_api::{Ctx, Entry, Errno, FileType, Gfid, Loc, LogLevel};

use crate::hash::name_hash;
use crate::migrate::{Moved, TEMP_PREFIX, parse_migrate};
use crate::shared::{LINKTO_XATTR, Shared, entry_is_linkfile, with_own_req};

/// One name of a file with hard links: where it is and which child it hashes to.
pub(crate) struct Linked {
    pub loc: Loc,
    pub hashed: usize,
    /// Its link file on the hashed child, when there is one.
    pub link: Option<Gfid>,
}

/// The arguments of a migrate-links request: `<P1>/<N1>/<P2>/<N2>...`, at least two names,
/// none twice.
pub(crate) fn parse_links(arg: &str) -> Result<Vec<(Gfid, String)>, Errno> {
    let parts: Vec<&str> = arg.split('/').collect();
    if parts.len() < 4 || !parts.len().is_multiple_of(2) {
        return Err(Errno::EINVAL);
    }
    let mut out: Vec<(Gfid, String)> = Vec::with_capacity(parts.len() / 2);
    for pair in parts.chunks(2) {
        let one = parse_migrate(&format!("{}/{}", pair[0], pair[1]))?;
        if out.contains(&one) {
            return Err(Errno::EINVAL);
        }
        out.push(one);
    }
    Ok(out)
}

/// The temporary name under which another name of file `g` is linked on the child it moves
/// to, before being renamed into place: fixed per name, so a run after a crash finds it.
fn temp_for(g: Gfid, loc: &Loc) -> Loc {
    let h = name_hash(&format!("{}/{}", loc.parent, loc.name));
    Loc::new(loc.parent, format!("{TEMP_PREFIX}{g}.{h:08x}").as_str())
}

impl Shared {
    /// Moves file `gfid`, known by every one of `names`, off its decommissioned child.
    pub async fn migrate_links(
        &self,
        gfid: Gfid,
        names: &[(Gfid, String)],
    ) -> Result<Moved, Errno> {
        self.require_all_up()?;
        let root = Ctx::root();
        let (rcx, _) = with_own_req(&root);
        // Where the file goes: the hashed child of its first name.
        let d = self.layout_of(names[0].0).await?.hashed(&names[0].1);
        let mut linked: Vec<Linked> = Vec::with_capacity(names.len());
        // Per child: the names it holds the file under (not as a link file).
        let mut holders: Vec<Vec<usize>> = vec![Vec::new(); self.n()];
        let mut entry = None;
        for (k, (parent, name)) in names.iter().enumerate() {
            let loc = Loc::new(*parent, name.as_str());
            let h = self.layout_of(*parent).await?.hashed(name);
            let replies: Vec<Result<Entry, Errno>> = self
                .fan(|i| self.children[i].lookup(&rcx, loc.clone()))
                .await;
            let mut link = None;
            for (i, r) in replies.into_iter().enumerate() {
                match r {
                    Ok(e) if e.attr.is_dir() => return Ok(Moved::Skipped("not-a-file")),
                    Ok(e) if entry_is_linkfile(&e) && e.attr.gfid == gfid => {
                        // A name switched by a move that stopped before the copy got its
                        // mode: the old child still holds the data; made again.
                        self.unlink_exact(i, &loc, gfid).await?;
                    }
                    Ok(e) if entry_is_linkfile(&e) => {
                        if i == h {
                            link = Some(e.attr.gfid);
                        } else {
                            let _ = self.unlink_exact(i, &loc, e.attr.gfid).await;
                            Shared::bump(&self.counters.stale_linkfiles);
                        }
                    }
                    Ok(e) if e.attr.gfid == gfid => {
                        holders[i].push(k);
                        entry = Some((i, e));
                    }
                    Ok(e) if i == d || i == h => {
                        // Another file where this name resolves or is moved to.
                        self.log(
                            LogLevel::Warn,
                            &format!(
                                "{parent}/{name}: child {i} holds another file {} under this \
                                 name; {gfid} not moved",
                                e.attr.gfid
                            ),
                        );
                        return Ok(Moved::Skipped("conflict"));
                    }
                    Ok(_) | Err(Errno::ENOENT) => {}
                    Err(e) => return Err(e),
                }
            }
            linked.push(Linked {
                loc,
                hashed: h,
                link,
            });
        }
        let Some((s, entry)) = entry else {
            return Err(Errno::ENOENT);
        };
        let ex = self.excluded();
        let at: Vec<usize> = (0..self.n()).filter(|i| !holders[*i].is_empty()).collect();
        let staying: Vec<usize> = at.iter().copied().filter(|i| !ex.contains(i)).collect();
        match staying.as_slice() {
            [] => {}
            [k] if holders[*k].len() == names.len() => {
                // Already moved (a run stopped before removing the old names), or never on a
                // leaving child: the names are placed where the file is.
                for i in at.iter().filter(|i| *i != k) {
                    for n in &holders[*i] {
                        self.unlink_exact(*i, &linked[*n].loc, gfid).await?;
                    }
                }
                for l in &linked {
                    if l.hashed != *k {
                        let on = l.link.map(|g| (g, None));
                        self.point_at(l.hashed, &l.loc, on, *k).await?;
                    }
                }
                return Ok(Moved::InPlace);
            }
            _ => {
                self.log(
                    LogLevel::Warn,
                    &format!("{gfid}: its names are on several children that stay; not moved"),
                );
                return Ok(Moved::Skipped("conflict"));
            }
        }
        let a = entry.attr;
        if at.len() != 1
            || holders[s].len() != names.len()
            || a.nlink as usize != names.len()
            || a.kind != FileType::Regular
        {
            // Names the crawl did not see, or that went since: the next run sends them anew.
            return Ok(Moved::Skipped("hard-links"));
        }
        if self.children[d].stat(&root, gfid).await.is_ok() {
            // A copy of an interrupted move, still reachable under its temporary names.
            let tmp0 = Loc::new(
                linked[0].loc.parent,
                format!("{TEMP_PREFIX}{gfid}").as_str(),
            );
            self.unlink_exact(d, &tmp0, gfid).await?;
            for l in &linked[1..] {
                self.unlink_exact(d, &temp_for(gfid, &l.loc), gfid).await?;
            }
            if self.children[d].stat(&root, gfid).await.is_ok() {
                self.log(
                    LogLevel::Warn,
                    &format!("{gfid}: child {d} holds a copy under a name not known; not moved"),
                );
                return Ok(Moved::Skipped("busy"));
            }
        }
        let first = linked.remove(0);
        self.move_file(s, d, &first.loc, a, &linked).await
    }

    /// Makes `loc`'s hashed child `h` point at child `target`: its link file `on` (GFID and
    /// the child it names now, when known) is repointed, or a link file is made.
    async fn point_at(
        &self,
        h: usize,
        loc: &Loc,
        on: Option<(Gfid, Option<usize>)>,
        target: usize,
    ) -> Result<(), Errno> {
        match on {
            Some((_, Some(now))) if now == target => Ok(()),
            Some((lg, _)) => self.point_link(h, lg, target).await,
            None => match self.make_linkfile(h, loc, target).await {
                Ok(_) | Err(Errno::EEXIST) => Ok(()),
                Err(e) => Err(e),
            },
        }
    }

    /// A name of a file with hard links that stays on child `s`: its hashed child `d` gets a
    /// link file to `s` (`on_d`: the link file it has now).
    pub(crate) async fn point_name(
        &self,
        d: usize,
        loc: &Loc,
        on_d: Option<&Entry>,
        s: usize,
    ) -> Result<(), Errno> {
        let on = on_d.map(|e| {
            let names = e
                .xattr(LINKTO_XATTR)
                .and_then(|v| self.child_named(v.as_slice()));
            (e.attr.gfid, names)
        });
        self.point_at(d, loc, on, s).await
    }

    /// Under the barrier: whether `loc` and every one of `extra` still name file `now` on
    /// child `s`, and it has no other names.
    pub(crate) async fn names_still_ours(
        &self,
        s: usize,
        loc: &Loc,
        extra: &[Linked],
        now: &xlator_api::Iatt,
    ) -> Result<bool, Errno> {
        if now.nlink as usize != 1 + extra.len() {
            return Ok(false);
        }
        for l in std::iter::once(loc).chain(extra.iter().map(|l| &l.loc)) {
            match self.children[s].lookup(&Ctx::root(), l.clone()).await {
                Ok(e) if e.attr.gfid == now.gfid => {}
                Ok(_) | Err(Errno::ENOENT) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Under the barrier, after the first name was switched: each other name becomes the
    /// copy on `d` (linked under a temporary name, renamed into place). On failure the names
    /// switched so far are put back (the first name is the caller's).
    pub(crate) async fn switch_links(
        &self,
        s: usize,
        d: usize,
        extra: &[Linked],
        g: Gfid,
    ) -> Result<(), Errno> {
        let root = Ctx::root();
        for (k, l) in extra.iter().enumerate() {
            let tmp = temp_for(g, &l.loc);
            let r = async {
                self.unlink_exact(d, &tmp, g).await?;
                self.children[d].link(&root, g, tmp.clone()).await?;
                self.children[d]
                    .rename(&root, tmp.clone(), l.loc.clone(), 0)
                    .await
            }
            .await;
            if let Err(e) = r {
                let _ = self.unlink_exact(d, &tmp, g).await;
                self.undo_links(s, d, &extra[..k], g).await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Takes the other names switched onto `d` away again; a name hashed to `d` gets its
    /// link file to `s` back.
    pub(crate) async fn undo_links(&self, s: usize, d: usize, extra: &[Linked], g: Gfid) {
        for l in extra {
            let _ = self.unlink_exact(d, &l.loc, g).await;
            if l.hashed == d {
                let _ = self.make_linkfile(d, &l.loc, s).await;
            }
        }
    }

    /// After the switch: the link files of the other names hashed elsewhere point at `d`.
    /// A failure is only logged: a lookup through a stale link file finds the file anyway
    /// (and fixes the link file).
    pub(crate) async fn repoint_links(&self, d: usize, extra: &[Linked]) {
        for l in extra.iter().filter(|l| l.hashed != d) {
            let on = l.link.map(|g| (g, None));
            if let Err(e) = self.point_at(l.hashed, &l.loc, on, d).await {
                self.log(
                    LogLevel::Warn,
                    &format!(
                        "{}/{}: link file on child {} not pointed at child {d}: {e}",
                        l.loc.parent, l.loc.name, l.hashed
                    ),
                );
            }
        }
    }

    /// The last step of moving a file with hard links: its old names on `s` go. A name that
    /// no longer names the file there (a client removed or replaced it meanwhile) is removed
    /// on `d` as well; if that was every name, the move counts as vanished (ENOENT).
    pub(crate) async fn drop_old_names(
        &self,
        s: usize,
        d: usize,
        loc: &Loc,
        extra: &[Linked],
        g: Gfid,
    ) -> Result<(), Errno> {
        let all: Vec<&Loc> = std::iter::once(loc)
            .chain(extra.iter().map(|l| &l.loc))
            .collect();
        let mut went = 0;
        let mut failed = None;
        for l in &all {
            match self.unlink_if(s, l, g).await {
                Ok(()) => {}
                Err(Errno::ESTALE | Errno::ENOENT) => {
                    let _ = self.unlink_exact(d, l, g).await;
                    went += 1;
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{}/{}: changed by a client while {g} moved; removed on child {d}",
                            l.parent, l.name
                        ),
                    );
                }
                Err(e) => {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{}/{}: old name on child {s} not removed: {e}",
                            l.parent, l.name
                        ),
                    );
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if went == all.len() {
            return Err(Errno::ENOENT);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_arguments_parse() {
        let (p, q) = (Gfid::random(), Gfid::random());
        assert_eq!(
            parse_links(&format!("{p}/a/{q}/b c")).expect("ok"),
            vec![(p, "a".to_owned()), (q, "b c".to_owned())]
        );
        for bad in [
            format!("{p}/a"),
            format!("{p}/a/{q}"),
            format!("{p}/a/{p}/a"),
            format!("{p}/a/{q}/.."),
            format!("{p}/a/{q}/"),
            format!("{p}/a/nope/b"),
        ] {
            assert_eq!(parse_links(&bad), Err(Errno::EINVAL), "{bad}");
        }
    }

    #[test]
    fn temporary_names_are_fixed_per_name_and_hidden_by_prefix() {
        let (g, p) = (Gfid::random(), Gfid::random());
        let a = temp_for(g, &Loc::new(p, "a"));
        assert_eq!(a.name, temp_for(g, &Loc::new(p, "a")).name);
        assert_ne!(a.name, temp_for(g, &Loc::new(p, "b")).name);
        assert!(a.name.starts_with(TEMP_PREFIX));
        assert!(a.name.len() < 255);
    }
}
