//! READ, WRITE and COMMIT through anonymous fds (NFS has no open/close: every call names the
//! object by GFID and the translators open it on demand).
//!
//! UNSTABLE writes are sent as plain `writev`s, so performance/write-behind (when the graph has
//! it) may cache them; DATA_SYNC and FILE_SYNC writes are followed by an `fsync` before the
//! reply, and COMMIT is an `fsync`. The write verifier changes with every server start, so a
//! client resends what an earlier instance acknowledged but may not have written, and when an
//! fsync fails with EIO (a brick whose machine restarted lost writes it had acknowledged:
//! [`Nfs::sync`]), so that clients send those writes again instead of losing them.

use nfs3_types::nfs3::{
    COMMIT3args, COMMIT3res, COMMIT3resfail, COMMIT3resok, Nfs3Result, READ3args, READ3res,
    READ3resfail, READ3resok, WRITE3args, WRITE3res, WRITE3resfail, WRITE3resok, nfsstat3,
    stable_how,
};
use nfs3_types::xdr_codec::Opaque;
use xlator_api::{Buf, Ctx, Errno, Fd};

use super::attr::{post_op, stale, wcc};
use super::{MAX_IO, Nfs};

/// EISDIR from a data fop: NFSv3 answers INVAL for I/O on a non-regular file.
fn io_status(e: Errno) -> nfsstat3 {
    if e == Errno::EISDIR {
        nfsstat3::NFS3ERR_INVAL
    } else {
        stale(e)
    }
}

impl Nfs {
    pub(super) async fn read(&self, cx: &Ctx, args: READ3args) -> READ3res<'static> {
        let gfid = match self.gfid(&args.file) {
            Ok(g) => g,
            Err(s) => return Nfs3Result::Err((s, READ3resfail::default())),
        };
        let g = self.graph();
        let count = args.count.min(MAX_IO);
        let fd = Fd::anonymous(gfid, libc::O_RDONLY);
        // The leaf returns the post-read attributes with the data; only a reply served from a
        // cache without them costs a separate stat.
        let data = g.top().readv(cx, fd, args.offset, count).await;
        let a = match &data {
            Ok(r) if r.attr.is_some() => r.attr.into_option(),
            _ => self.attrs(&g, cx, gfid).await,
        };
        if a.as_ref().is_some_and(super::attr::nameless) {
            return Nfs3Result::Err((nfsstat3::NFS3ERR_STALE, READ3resfail::default()));
        }
        match data {
            Ok(reply) => {
                let buf = reply.data;
                let len = buf.len() as u64;
                let eof = len < u64::from(count)
                    || a.is_some_and(|a| args.offset.saturating_add(len) >= a.size);
                Nfs3Result::Ok(READ3resok {
                    file_attributes: post_op(a.as_ref(), self.fsid),
                    count: len as u32,
                    eof,
                    data: Opaque::owned(buf.into_vec()),
                })
            }
            Err(e) => Nfs3Result::Err((
                io_status(e),
                READ3resfail {
                    file_attributes: post_op(a.as_ref(), self.fsid),
                },
            )),
        }
    }

    pub(super) async fn write(&self, cx: &Ctx, args: WRITE3args<'static>) -> WRITE3res {
        let fail = |s| {
            Nfs3Result::Err((
                s,
                WRITE3resfail {
                    file_wcc: wcc(None, None, self.fsid),
                },
            ))
        };
        let gfid = match self.gfid(&args.file) {
            Ok(g) => g,
            Err(s) => return fail(s),
        };
        let mut data = args.data.into_owned();
        let count = args.count as usize;
        if count > data.len() || count > MAX_IO as usize {
            return fail(nfsstat3::NFS3ERR_INVAL);
        }
        data.truncate(count);
        let g = self.graph();
        let fd = Fd::anonymous(gfid, libc::O_WRONLY);
        let reply = match g
            .top()
            .writev(cx, fd, args.offset, Buf::from_vec(data), 0)
            .await
        {
            Ok(r) => r,
            Err(e) => return fail(io_status(e)),
        };
        if args.stable != stable_how::UNSTABLE {
            let datasync = args.stable == stable_how::DATA_SYNC;
            if let Err(e) = self.sync(&g, cx, gfid, datasync).await {
                return fail(io_status(e));
            }
        }
        // Post-write attributes come with the reply from the leaf; a write acknowledged early
        // (write-behind) has none and costs a stat.
        let after = match reply.attr.into_option() {
            Some(a) => Some(a),
            None => self.attrs(&g, cx, gfid).await,
        };
        if after.as_ref().is_some_and(super::attr::nameless) {
            return fail(nfsstat3::NFS3ERR_STALE);
        }
        let written = reply.written;
        Nfs3Result::Ok(WRITE3resok {
            file_wcc: wcc(None, after.as_ref(), self.fsid),
            count: written.min(u64::from(u32::MAX)) as u32,
            committed: args.stable,
            verf: self.write_verf(),
        })
    }

    /// An fsync of `gfid`. One failing with EIO may mean that a brick lost writes it had
    /// acknowledged (its machine restarted before they were synced: protocol/client reports
    /// that once per file): the clients get a new write verifier, so that they send their
    /// uncommitted writes again, and the fsync is tried once more. The reply carries the new
    /// verifier. A second EIO is the answer.
    async fn sync(
        &self,
        g: &xlfs_core::graph::Graph,
        cx: &Ctx,
        gfid: xlator_api::Gfid,
        datasync: bool,
    ) -> Result<(), Errno> {
        let fd = Fd::anonymous(gfid, libc::O_WRONLY);
        match g.top().fsync(cx, fd, datasync).await {
            Err(Errno::EIO) => {
                self.renew_write_verf();
                tracing::warn!(
                    %gfid,
                    "fsync failed with EIO (a brick may have lost acknowledged writes): new \
                     write verifier, clients send their uncommitted writes again"
                );
                g.top().fsync(cx, fd, datasync).await
            }
            r => r,
        }
    }

    /// COMMIT: the whole file is made durable (`fsync` has no range), which covers any range
    /// the client names.
    pub(super) async fn commit(&self, cx: &Ctx, args: COMMIT3args) -> COMMIT3res {
        let gfid = match self.gfid(&args.file) {
            Ok(g) => g,
            Err(s) => {
                return Nfs3Result::Err((
                    s,
                    COMMIT3resfail {
                        file_wcc: wcc(None, None, self.fsid),
                    },
                ));
            }
        };
        let g = self.graph();
        let r = self.sync(&g, cx, gfid, false).await;
        let after = self.attrs(&g, cx, gfid).await;
        match r {
            Ok(()) => Nfs3Result::Ok(COMMIT3resok {
                file_wcc: wcc(None, after.as_ref(), self.fsid),
                verf: self.write_verf(),
            }),
            Err(e) => Nfs3Result::Err((
                io_status(e),
                COMMIT3resfail {
                    file_wcc: wcc(None, after.as_ref(), self.fsid),
                },
            )),
        }
    }
}
