//! A directory's rename spans children, so a client that dies in the middle of one leaves
//! the directory under the new name on some children and the old name on the others. A
//! lookup goes to the name's hashed child and, under a trusted layout, takes its ENOENT as
//! final: without a repair, whatever the children that still had the other name held was out
//! of reach.
//!
//! So the rename says what it is doing where every later lookup sees it: before renaming
//! anything, each copy of the directory gets the xattr [`RENAMING_XATTR`] naming both places;
//! the rename goes to the new name's hashed child first (from then on a lookup of the new
//! name reaches a copy), then to every other child at once; the marks go when every child
//! has renamed. A lookup that finds a marked copy finishes the rename on every child that
//! still has the old name (under both names' directory locks, taken without waiting: the
//! rename itself holds them while it runs) and removes the marks, then looks up again. A
//! rename cut short, or failing on a child, is so carried to its end by the next lookup of
//! either name, never undone: its caller got no answer, and a rename that went through just
//! before the crash is as valid an outcome.

use xlator_api::{Ctx, Errno, Gfid, Loc, LogLevel, Xattr, XattrReq};

use crate::shared::Shared;

/// The mark on each copy of a directory being renamed: [`Renaming::encode`].
pub const RENAMING_XATTR: &str = "trusted.dht.renaming";

/// A directory rename in progress: from `old` to `new`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renaming {
    pub old: Loc,
    pub new: Loc,
}

impl Renaming {
    /// Old parent (16 bytes), new parent (16), old name's length (u32, big-endian), old
    /// name, new name.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(36 + self.old.name.len() + self.new.name.len());
        v.extend_from_slice(&self.old.parent.0);
        v.extend_from_slice(&self.new.parent.0);
        v.extend_from_slice(&(self.old.name.len() as u32).to_be_bytes());
        v.extend_from_slice(self.old.name.as_bytes());
        v.extend_from_slice(self.new.name.as_bytes());
        v
    }

    /// The rename a copy's xattrs (as a lookup or listing asked for them with
    /// [`asking_for_marks`]) say is in progress.
    pub fn marked_in(xattrs: &[Xattr]) -> Option<Renaming> {
        Renaming::decode(xlator_api::find_xattr(xattrs, RENAMING_XATTR)?.as_slice())
    }

    pub fn decode(b: &[u8]) -> Option<Renaming> {
        let gfid = |s: &[u8]| Some(Gfid(s.try_into().ok()?));
        let old_parent = gfid(b.get(..16)?)?;
        let new_parent = gfid(b.get(16..32)?)?;
        let n = u32::from_be_bytes(b.get(32..36)?.try_into().ok()?) as usize;
        let old_name = std::str::from_utf8(b.get(36..36usize.checked_add(n)?)?).ok()?;
        let new_name = std::str::from_utf8(b.get(36 + n..)?).ok()?;
        if old_name.is_empty() || new_name.is_empty() {
            return None;
        }
        Some(Renaming {
            old: Loc::new(old_parent, old_name),
            new: Loc::new(new_parent, new_name),
        })
    }
}

/// `cx` with [`RENAMING_XATTR`] added to the xattrs it asks for (when it asks for some).
pub(crate) fn asking_for_marks(cx: &Ctx) -> Ctx {
    match cx.ext::<XattrReq>() {
        Some(mut req) => {
            req.names.push(RENAMING_XATTR.into());
            cx.to_builder().ext(&req).build()
        }
        None => cx.clone(),
    }
}

impl Shared {
    /// Marks every copy of directory `dir` as being renamed by `r`. On an error the marks
    /// made are removed again and nothing else has changed.
    pub(crate) async fn mark_renaming(&self, dir: Gfid, r: &Renaming) -> Result<(), Errno> {
        let value = r.encode();
        let set = self
            .fan(|i| {
                let x = Xattr {
                    name: RENAMING_XATTR.into(),
                    value: value.clone().into(),
                };
                async move {
                    match self.children[i].setxattr(&Ctx::root(), dir, x, 0).await {
                        // No copy there to mark: that child's rename fails and is logged, as
                        // before the marks.
                        Err(Errno::ENOENT | Errno::ESTALE) => Ok(()),
                        r => r,
                    }
                }
            })
            .await;
        if let Some(e) = set.iter().find_map(|r| r.as_ref().err()) {
            let e = *e;
            self.unmark_renaming(dir).await;
            return Err(e);
        }
        Ok(())
    }

    /// Removes the marks of a finished rename of `dir` from every child (best effort: a
    /// mark left makes a later lookup finish an already finished rename, which finds
    /// nothing to do and removes it).
    pub(crate) async fn unmark_renaming(&self, dir: Gfid) {
        self.fan(|i| async move {
            match self.children[i]
                .removexattr(&Ctx::root(), dir, RENAMING_XATTR.into())
                .await
            {
                Err(Errno::ENODATA) => Ok(()),
                r => r,
            }
        })
        .await;
    }

    /// Finishes the rename `r` of directory `dir` that a lookup found marked: renames the
    /// copy on every child that still has `dir` at the old name, then removes the marks.
    /// Does nothing while another client holds either name's directory lock (the rename
    /// itself, still running). Whether every child now has it at the new name.
    pub(crate) async fn finish_renaming(&self, dir: Gfid, r: &Renaming) -> bool {
        let what = || {
            format!(
                "directory {dir}: its rename {}/{} -> {}/{} was left unfinished",
                r.old.parent, r.old.name, r.new.parent, r.new.name
            )
        };
        if !self.all_up() {
            self.log(
                LogLevel::Warn,
                &format!("{}; not every child is up: left to a later lookup", what()),
            );
            return false;
        }
        let held = match self.lock_names(&[&r.old, &r.new], false).await {
            Ok(held) => held,
            Err(e) => {
                self.log(
                    LogLevel::Warn,
                    &format!(
                        "{}; its names are locked ({e}): left to a later lookup",
                        what()
                    ),
                );
                return false;
            }
        };
        let done = self
            .fan(|i| {
                let r = r.clone();
                async move {
                    let child = &self.children[i];
                    match child.lookup(&Ctx::root(), r.old.clone()).await {
                        Ok(e) if e.attr.gfid == dir => child
                            .rename(&Ctx::root(), r.old, r.new, 0)
                            .await
                            .map(|()| true),
                        // Renamed there already (or the name is something else now).
                        Ok(_) | Err(Errno::ENOENT) => Ok(false),
                        Err(e) => Err(e),
                    }
                }
            })
            .await;
        let ok = done.iter().all(Result::is_ok);
        if ok {
            self.unmark_renaming(dir).await;
        }
        self.unlock_names(held).await;
        self.unsee_dir(r.old.parent, &r.old.name);
        let moved: Vec<usize> = (0..done.len())
            .filter(|&i| matches!(done[i], Ok(true)))
            .collect();
        self.log(
            if ok { LogLevel::Info } else { LogLevel::Warn },
            &format!(
                "directory {dir}: finished its rename {}/{} -> {}/{} left unfinished (renamed now on children {moved:?}){}",
                r.old.parent,
                r.old.name,
                r.new.parent,
                r.new.name,
                if ok {
                    String::new()
                } else {
                    let errs: Vec<String> = done
                        .iter()
                        .enumerate()
                        .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("child {i}: {e}")))
                        .collect();
                    format!("; not finished on {}", errs.join(", "))
                }
            ),
        );
        if ok {
            Shared::bump(&self.counters.renames_finished);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_decodes_to_what_was_encoded_and_garbage_to_nothing() {
        let r = Renaming {
            old: Loc::new(Gfid::random(), "a"),
            new: Loc::new(Gfid::random(), "bé c"),
        };
        assert_eq!(Renaming::decode(&r.encode()), Some(r.clone()));
        let v = r.encode();
        for cut in 0..v.len() {
            // Every prefix is either refused or (only the whole) the same rename.
            assert_ne!(Renaming::decode(&v[..cut]), Some(r.clone()));
        }
        assert_eq!(Renaming::decode(&[0xff; 40]), None);
        assert_eq!(Renaming::decode(&[]), None);
    }
}
