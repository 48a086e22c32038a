//! One answer from N children: the attributes and entries of a striped object.
//!
//! A regular file's answer needs every child: its size is the furthest logical end of any
//! child's data ([`Geometry::logical_size`]), its blocks the sum, its times the latest (a
//! write changes only the children it touches). Without every child the size is unknown,
//! so the answer is the error (ENOTCONN for a child that is down), never a smaller size.
//! Anything else (directories, symlinks, devices) is answered by child 0; the others must
//! agree on the GFID when they answer.

use xlator_api::{Buf, Ctx, Entry, Errno, FileType, Iatt};

use crate::geometry::{self, GEOMETRY_XATTR};
use crate::shared::{Shared, all_ok, caller_wants_geometry};
use crate::units::Geometry;

/// The attributes of a regular file striped with `geo` whose children answered `attrs`.
pub(crate) fn merge_file(geo: Geometry, attrs: &[Iatt]) -> Iatt {
    let sizes: Vec<u64> = attrs.iter().map(|a| a.size).collect();
    let mut out = attrs[0];
    out.size = geo.logical_size(&sizes);
    out.blocks = attrs.iter().map(|a| a.blocks).sum();
    out.atime = attrs.iter().map(|a| a.atime).max().unwrap_or(out.atime);
    out.mtime = attrs.iter().map(|a| a.mtime).max().unwrap_or(out.mtime);
    out.ctime = attrs.iter().map(|a| a.ctime).max().unwrap_or(out.ctime);
    out
}

impl Shared {
    /// Checks that every answering child names the same object as child 0.
    fn same_object(&self, what: &str, attrs: &[Option<&Iatt>]) -> Result<(), Errno> {
        let Some(Some(first)) = attrs.first() else {
            return Ok(());
        };
        for (i, a) in attrs.iter().enumerate().skip(1) {
            if let Some(a) = a
                && (a.gfid != first.gfid || a.kind != first.kind)
            {
                self.services.log(
                    xlator_api::LogLevel::Error,
                    "xlfs::stripe",
                    &format!(
                        "{}: {what}: child {i} has {} ({:?}), child 0 {} ({:?}); replying EIO",
                        self.name, a.gfid, a.kind, first.gfid, first.kind
                    ),
                );
                return Err(Errno::EIO);
            }
        }
        Ok(())
    }

    /// Attributes answered by every child (stat, fstat, setattr...): child 0's for anything
    /// but a regular file, else the merge over all children. `geo` is the file's geometry
    /// when the caller knows it.
    pub async fn merge_attrs(
        &self,
        cx: &Ctx,
        what: &str,
        geo: Option<Geometry>,
        replies: Vec<Result<Iatt, Errno>>,
    ) -> Result<Iatt, Errno> {
        let first = match &replies[0] {
            Ok(a) => *a,
            Err(e) => return Err(*e),
        };
        if first.kind != FileType::Regular {
            let attrs: Vec<Option<&Iatt>> = replies.iter().map(|r| r.as_ref().ok()).collect();
            self.same_object(what, &attrs)?;
            return Ok(first);
        }
        let attrs = all_ok(replies)?;
        self.same_object(what, &attrs.iter().map(Some).collect::<Vec<_>>())?;
        let geo = match geo {
            Some(g) => g,
            None => self.geometry_of(cx, first.gfid).await?,
        };
        Ok(merge_file(geo, &attrs))
    }

    /// An entry answered by every child (lookup, create, link...), asked with the geometry
    /// xattr: checks the copies, caches the geometry and answers with the merged
    /// attributes. The geometry xattr is left out unless the caller (`cx`) asked for it.
    pub fn merge_entries(
        &self,
        cx: &Ctx,
        what: impl std::fmt::Display,
        replies: Vec<Result<Entry, Errno>>,
    ) -> Result<(Entry, Option<Geometry>), Errno> {
        let what = what.to_string();
        let first = match &replies[0] {
            Ok(e) => e.attr,
            Err(e) => return Err(*e),
        };
        let strip = |mut e: Entry| {
            if !caller_wants_geometry(cx) {
                e.xattrs.retain(|x| x.name.as_str() != GEOMETRY_XATTR);
            }
            e
        };
        if first.kind != FileType::Regular {
            let attrs: Vec<Option<&Iatt>> = replies
                .iter()
                .map(|r| r.as_ref().ok().map(|e| &e.attr))
                .collect();
            self.same_object(&what, &attrs)?;
            let e0 = replies.into_iter().next().and_then(Result::ok);
            return e0.map(|e| (strip(e), None)).ok_or(Errno::EIO);
        }
        let entries = all_ok(replies)?;
        self.same_object(
            &what,
            &entries.iter().map(|e| Some(&e.attr)).collect::<Vec<_>>(),
        )?;
        let values: Vec<Option<&Buf>> = entries.iter().map(|e| e.xattr(GEOMETRY_XATTR)).collect();
        let geo = geometry::check(&values)
            .map_err(|(i, why)| self.log_refusal(format!("{what} ({})", first.gfid), i, &why))?;
        self.remember(first.gfid, geo);
        let attrs: Vec<Iatt> = entries.iter().map(|e| e.attr).collect();
        let attr = merge_file(geo, &attrs);
        let e0 = entries.into_iter().next().ok_or(Errno::EIO)?;
        Ok((strip(Entry { attr, ..e0 }), Some(geo)))
    }
}
