//! READDIR and READDIRPLUS on the `readdirp` fop, through an anonymous directory fd.
//!
//! Cookies: 1 after ".", 2 after "..", and `offset + 2` after an entry whose `readdirp`
//! offset is `offset` (translators never hand out 0, which means "from the start"). So a cookie
//! `c` resumes the translator at `c - 2` (0 for c <= 2). Translator offsets (storage/posix: the
//! file system's `d_off`) stay valid while entries come and go and across restarts, so the
//! cookie verifier names only the volume and a listing never fails with BAD_COOKIE because
//! the directory changed.

use nfs3_types::nfs3::{
    Nfs3Result, READDIR3args, READDIR3res, READDIR3resfail, READDIR3resok, READDIRPLUS3args,
    READDIRPLUS3res, READDIRPLUS3resfail, READDIRPLUS3resok, cookieverf3, dirlist3, dirlistplus3,
    entry3, entryplus3, filename3, nfsstat3, post_op_attr, post_op_fh3,
};
use nfs3_types::xdr_codec::List;
use xlator_api::{Ctx, Fd, Gfid, Iatt, Loc};
use xlfs_core::graph::Graph;

use super::attr::{fattr, fileid, post_op, stale};
use super::{MAX_IO, Nfs};
use crate::handle::HANDLE_LEN;

/// Cookie after ".".
const AFTER_DOT: u64 = 1;
/// Cookie after ".."; also the shift between translator offsets and cookies.
const AFTER_DOTDOT: u64 = 2;
/// XDR bytes of a READDIR(PLUS)3resok around its entries: status, dir attributes, cookie
/// verifier, list terminator, eof.
const REPLY_OVERHEAD: usize = 4 + 4 + 84 + 8 + 4 + 4;
/// Smallest `readdirp` request.
const MIN_BATCH: u32 = 4096;

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// XDR bytes of one entry3 in its list (the "value follows" word included).
fn entry_size(name: &str) -> usize {
    4 + 8 + 4 + pad4(name.len()) + 8
}

/// XDR bytes of one entryplus3 with attributes and a handle.
fn entryplus_size(name: &str) -> usize {
    entry_size(name) + 4 + 84 + 4 + 4 + pad4(HANDLE_LEN)
}

/// One listed name.
struct Listed {
    name: String,
    cookie: u64,
    attr: Iatt,
}

struct Listing {
    entries: Vec<Listed>,
    eof: bool,
}

/// A reply being filled up to its byte budget.
struct Page {
    entries: Vec<Listed>,
    used: usize,
    budget: usize,
    size: fn(&str) -> usize,
}

impl Page {
    /// Adds an entry if it fits.
    fn push(&mut self, name: &str, cookie: u64, attr: Iatt) -> bool {
        let n = (self.size)(name);
        if self.used + n > self.budget {
            return false;
        }
        self.used += n;
        self.entries.push(Listed {
            name: name.to_string(),
            cookie,
            attr,
        });
        true
    }

    fn done(self, eof: bool) -> Listing {
        Listing {
            entries: self.entries,
            eof,
        }
    }
}

impl Nfs {
    fn check_verifier(&self, cookie: u64, verf: cookieverf3) -> Result<(), nfsstat3> {
        // Clients send zeros on the first call; some keep doing so (knfsd accepts that too).
        if cookie != 0 && verf != cookieverf3::default() && verf != self.cookie_verf {
            return Err(nfsstat3::NFS3ERR_BAD_COOKIE);
        }
        Ok(())
    }

    /// The entries after `cookie` that fit in `budget` bytes of entries, sized by `size`.
    async fn list(
        &self,
        g: &Graph,
        cx: &Ctx,
        dir: &Iatt,
        cookie: u64,
        budget: usize,
        size: fn(&str) -> usize,
    ) -> Result<Listing, nfsstat3> {
        let mut page = Page {
            entries: Vec::new(),
            used: 0,
            budget,
            size,
        };
        if cookie < AFTER_DOT && !page.push(".", AFTER_DOT, *dir) {
            return Err(nfsstat3::NFS3ERR_TOOSMALL);
        }
        if cookie < AFTER_DOTDOT {
            let parent = g
                .top()
                .lookup(cx, Loc::new(dir.gfid, ".."))
                .await
                .map(|e| e.attr)
                .unwrap_or(*dir);
            if !page.push("..", AFTER_DOTDOT, parent) {
                return Ok(page.done(false));
            }
        }
        let fd = Fd::anonymous(dir.gfid, libc::O_RDONLY);
        let hint = (budget.min(MAX_IO as usize) as u32).max(MIN_BATCH);
        let mut offset = cookie.saturating_sub(AFTER_DOTDOT);
        loop {
            let batch = g
                .top()
                .readdirp(cx, fd, offset, hint)
                .await
                .map_err(stale)?;
            if batch.is_empty() {
                return Ok(page.done(true));
            }
            let start = offset;
            for e in batch.iter() {
                if e.name == "." || e.name == ".." {
                    offset = e.next_offset;
                    continue;
                }
                let Some(c) = e.next_offset.checked_add(AFTER_DOTDOT) else {
                    tracing::error!(
                        offset = e.next_offset,
                        "readdirp offset out of range; listing cut short"
                    );
                    return Ok(page.done(true));
                };
                if !page.push(e.name.as_str(), c, e.attr) {
                    if page.entries.is_empty() {
                        return Err(nfsstat3::NFS3ERR_TOOSMALL);
                    }
                    return Ok(page.done(false));
                }
                offset = e.next_offset;
            }
            if offset == start {
                // A translator that does not advance would loop forever.
                tracing::error!(offset, "readdirp returned an offset that does not advance");
                return Ok(page.done(true));
            }
        }
    }

    pub(super) async fn readdir(&self, cx: &Ctx, args: READDIR3args) -> READDIR3res<'static> {
        let fail = |s, a: Option<&Iatt>| {
            Nfs3Result::Err((
                s,
                READDIR3resfail {
                    dir_attributes: post_op(a, self.fsid),
                },
            ))
        };
        let gfid = match self.gfid(&args.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, None),
        };
        if let Err(s) = self.check_verifier(args.cookie, args.cookieverf) {
            return fail(s, None);
        }
        let g = self.graph();
        let d = match self.dir_attrs(&g, cx, gfid).await {
            Ok(d) => d,
            Err(s) => return fail(s, None),
        };
        let budget = (args.count as usize).saturating_sub(REPLY_OVERHEAD);
        let l = match self.list(&g, cx, &d, args.cookie, budget, entry_size).await {
            Ok(l) => l,
            Err(s) => return fail(s, Some(&d)),
        };
        let entries = l
            .entries
            .into_iter()
            .map(|e| entry3 {
                fileid: fileid(&e.attr),
                name: filename3::from(e.name.into_bytes()),
                cookie: e.cookie,
            })
            .collect();
        Nfs3Result::Ok(READDIR3resok {
            dir_attributes: post_op(Some(&d), self.fsid),
            cookieverf: self.cookie_verf,
            reply: dirlist3 {
                entries: List(entries),
                eof: l.eof,
            },
        })
    }

    pub(super) async fn readdirplus(
        &self,
        cx: &Ctx,
        args: READDIRPLUS3args,
    ) -> READDIRPLUS3res<'static> {
        let fail = |s, a: Option<&Iatt>| {
            Nfs3Result::Err((
                s,
                READDIRPLUS3resfail {
                    dir_attributes: post_op(a, self.fsid),
                },
            ))
        };
        let gfid = match self.gfid(&args.dir) {
            Ok(g) => g,
            Err(s) => return fail(s, None),
        };
        if let Err(s) = self.check_verifier(args.cookie, args.cookieverf) {
            return fail(s, None);
        }
        let g = self.graph();
        let d = match self.dir_attrs(&g, cx, gfid).await {
            Ok(d) => d,
            Err(s) => return fail(s, None),
        };
        // `maxcount` bounds the reply; `dircount` is advisory (knfsd ignores it as well).
        let budget = (args.maxcount as usize).saturating_sub(REPLY_OVERHEAD);
        let l = match self
            .list(&g, cx, &d, args.cookie, budget, entryplus_size)
            .await
        {
            Ok(l) => l,
            Err(s) => return fail(s, Some(&d)),
        };
        let entries = l
            .entries
            .into_iter()
            .map(|e| {
                let known = !e.attr.gfid.is_null();
                entryplus3 {
                    fileid: fileid(&e.attr),
                    name: filename3::from(e.name.into_bytes()),
                    cookie: e.cookie,
                    name_attributes: if known {
                        post_op_attr::Some(fattr(&e.attr, self.fsid))
                    } else {
                        post_op_attr::None
                    },
                    name_handle: if known {
                        post_op_fh3::Some(self.fh(e.attr.gfid))
                    } else {
                        post_op_fh3::None
                    },
                }
            })
            .collect();
        Nfs3Result::Ok(READDIRPLUS3resok {
            dir_attributes: post_op(Some(&d), self.fsid),
            cookieverf: self.cookie_verf,
            reply: dirlistplus3 {
                entries: List(entries),
                eof: l.eof,
            },
        })
    }

    /// The attributes of a directory handle: STALE if gone, NOTDIR if not a directory.
    async fn dir_attrs(&self, g: &Graph, cx: &Ctx, gfid: Gfid) -> Result<Iatt, nfsstat3> {
        let d = g.top().stat(cx, gfid).await.map_err(stale)?;
        if !d.is_dir() {
            return Err(nfsstat3::NFS3ERR_NOTDIR);
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use nfs3_types::xdr_codec::Pack;

    use super::*;
    use crate::handle::{HandleCodec, VolumeId};

    #[test]
    fn entry_sizes_match_xdr() {
        let codec = HandleCodec::new(VolumeId::derive("v"));
        for name in ["a", "abcd", "abcde", "a-rather-long-file-name.txt"] {
            let e = entry3 {
                fileid: 1,
                name: filename3::from(name.as_bytes().to_vec()),
                cookie: 2,
            };
            assert_eq!(entry_size(name), 4 + e.packed_size(), "{name}");
            let p = entryplus3 {
                fileid: 1,
                name: filename3::from(name.as_bytes().to_vec()),
                cookie: 2,
                name_attributes: post_op_attr::Some(fattr(&Iatt::default(), 1)),
                name_handle: post_op_fh3::Some(codec.encode(Gfid::ROOT)),
            };
            assert_eq!(entryplus_size(name), 4 + p.packed_size(), "{name}");
        }
        let empty = READDIRPLUS3res::Ok(READDIRPLUS3resok {
            dir_attributes: post_op_attr::Some(fattr(&Iatt::default(), 1)),
            cookieverf: cookieverf3::default(),
            reply: dirlistplus3 {
                entries: List(Vec::new()),
                eof: true,
            },
        });
        assert_eq!(empty.packed_size(), REPLY_OVERHEAD);
    }
}
