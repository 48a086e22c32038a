//! The NFSv3 program (RFC 1813) on the graph: every procedure maps to a few fops on the
//! current graph's top translator, with anonymous fds for I/O (NFS has no open/close).
//!
//! Each procedure takes the graph `Arc` for its whole life (a graph switch never disturbs a
//! call in flight) and the caller's [`Ctx`], built from its AUTH_UNIX credential.

mod attr;
mod data;
mod dir;
mod entry;
mod inode;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nfs3_types::nfs3::{
    ACCESS3args, COMMIT3args, CREATE3args, FSINFO3args, FSSTAT3args, GETATTR3args, LINK3args,
    LOOKUP3args, MKDIR3args, MKNOD3args, PATHCONF3args, READ3args, READDIR3args, READDIRPLUS3args,
    READLINK3args, REMOVE3args, RENAME3args, RMDIR3args, SETATTR3args, SYMLINK3args, WRITE3args,
    cookieverf3, filename3, nfs_fh3, nfsstat3, writeverf3,
};
use nfs3_types::rpc::accept_stat_data;
use nfs3_types::xdr_codec::Void;
use xlator_api::{Ctx, FdId, Gfid, Iatt};
use xlfs_core::graph::Graph;
use xlfs_core::volume::Volume;

use crate::handle::HandleCodec;
use crate::rpc::{self, Call};

/// Largest READ/WRITE transfer offered in FSINFO (and accepted).
pub const MAX_IO: u32 = 1 << 20;
/// Preferred READDIR size offered in FSINFO.
const DIR_PREF: u32 = 64 << 10;
/// Longest name accepted (NAME_MAX of the bricks' file systems).
pub const NAME_MAX: usize = 255;

/// The NFS program's state: the volume, its handle codec and the verifiers.
pub struct Nfs {
    volume: Arc<Volume>,
    codec: HandleCodec,
    fsid: u64,
    /// Changes with every start of the server, so clients resend UNSTABLE writes the previous
    /// instance may have lost (RFC 1813 §3.3.7), and whenever a brick lost writes it had
    /// acknowledged (its machine restarted: an fsync fails with EIO, see `data.rs`).
    write_verf: AtomicU64,
    /// Readdir cookies are the translators' `readdirp` offsets, which stay valid across
    /// directory changes and restarts: the verifier only names the volume.
    cookie_verf: cookieverf3,
    /// Ids for the few fds the host opens itself (CREATE: `create` needs a real fd).
    next_fd: AtomicU64,
}

impl Nfs {
    pub fn new(volume: Arc<Volume>, codec: HandleCodec, boot: [u8; 8]) -> Nfs {
        let id = codec.volume();
        Nfs {
            volume,
            codec,
            fsid: id.as_u64(),
            write_verf: AtomicU64::new(u64::from_be_bytes(boot)),
            cookie_verf: cookieverf3(id.0),
            // High bit set: never collides with ids a graph translator might mint for itself.
            next_fd: AtomicU64::new(1 << 63),
        }
    }

    /// The write verifier now.
    fn write_verf(&self) -> writeverf3 {
        writeverf3(self.write_verf.load(Ordering::Relaxed).to_be_bytes())
    }

    /// Gives clients a new write verifier: they send again every UNSTABLE write not yet
    /// committed.
    fn renew_write_verf(&self) {
        self.write_verf.fetch_add(1, Ordering::Relaxed);
    }

    pub fn codec(&self) -> &HandleCodec {
        &self.codec
    }

    pub fn graph(&self) -> Arc<Graph> {
        self.volume.graph()
    }

    fn fd_id(&self) -> FdId {
        FdId(self.next_fd.fetch_add(1, Ordering::Relaxed))
    }

    fn gfid(&self, fh: &nfs_fh3) -> Result<Gfid, nfsstat3> {
        self.codec.decode(fh)
    }

    fn fh(&self, gfid: Gfid) -> nfs_fh3 {
        self.codec.encode(gfid)
    }

    /// Attributes of `gfid`, `None` on any error (for the optional post-op attributes).
    async fn attrs(&self, g: &Graph, cx: &Ctx, gfid: Gfid) -> Option<Iatt> {
        g.top().stat(cx, gfid).await.ok()
    }

    /// Serves one NFSv3 call.
    pub async fn dispatch(&self, call: &Call, record: &[u8], cx: &Ctx) -> Vec<u8> {
        let xid = call.xid;
        macro_rules! procedure {
            ($args:ty, $f:ident) => {
                match rpc::decode_args::<$args>(record, call.args_at) {
                    Some(args) => rpc::success(xid, &self.$f(cx, args).await),
                    None => rpc::accept_error(xid, accept_stat_data::GARBAGE_ARGS),
                }
            };
        }
        match call.proc {
            0 => rpc::success(xid, &Void),
            1 => procedure!(GETATTR3args, getattr),
            2 => procedure!(SETATTR3args, setattr),
            3 => procedure!(LOOKUP3args<'static>, lookup),
            4 => procedure!(ACCESS3args, access),
            5 => procedure!(READLINK3args, readlink),
            6 => procedure!(READ3args, read),
            7 => procedure!(WRITE3args<'static>, write),
            8 => procedure!(CREATE3args<'static>, create),
            9 => procedure!(MKDIR3args<'static>, mkdir),
            10 => procedure!(SYMLINK3args<'static>, symlink),
            11 => procedure!(MKNOD3args<'static>, mknod),
            12 => procedure!(REMOVE3args<'static>, remove),
            13 => procedure!(RMDIR3args<'static>, rmdir),
            14 => procedure!(RENAME3args<'static, 'static>, rename),
            15 => procedure!(LINK3args<'static>, link),
            16 => procedure!(READDIR3args, readdir),
            17 => procedure!(READDIRPLUS3args, readdirplus),
            18 => procedure!(FSSTAT3args, fsstat),
            19 => procedure!(FSINFO3args, fsinfo),
            20 => procedure!(PATHCONF3args, pathconf),
            21 => procedure!(COMMIT3args, commit),
            _ => rpc::accept_error(xid, accept_stat_data::PROC_UNAVAIL),
        }
    }
}

/// A name from the wire as the graph takes it.
///
/// Names travel as UTF-8 strings through the graph; others are refused with `NFS3ERR_INVAL`
/// (storage/posix skips them in listings too). `/` and NUL can never be in a name (ACCES, as
/// knfsd answers).
fn name(n: &filename3<'_>) -> Result<String, nfsstat3> {
    let b: &[u8] = n.as_ref();
    if b.is_empty() || b.contains(&b'/') || b.contains(&0) {
        return Err(nfsstat3::NFS3ERR_ACCES);
    }
    if b.len() > NAME_MAX {
        return Err(nfsstat3::NFS3ERR_NAMETOOLONG);
    }
    String::from_utf8(b.to_vec()).map_err(|_| nfsstat3::NFS3ERR_INVAL)
}

/// A name a procedure creates: also not `.` or `..` (they exist already).
fn new_name(n: &filename3<'_>) -> Result<String, nfsstat3> {
    let s = name(n)?;
    if s == "." || s == ".." {
        return Err(nfsstat3::NFS3ERR_EXIST);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let f = |s: &[u8]| filename3::from(s.to_vec());
        assert_eq!(name(&f(b"a.txt")), Ok("a.txt".to_string()));
        assert_eq!(name(&f(b"")), Err(nfsstat3::NFS3ERR_ACCES));
        assert_eq!(name(&f(b"a/b")), Err(nfsstat3::NFS3ERR_ACCES));
        assert_eq!(name(&f(b"a\0")), Err(nfsstat3::NFS3ERR_ACCES));
        assert_eq!(name(&f(&[b'x'; 256])), Err(nfsstat3::NFS3ERR_NAMETOOLONG));
        assert_eq!(name(&f(&[0xff, 0xfe])), Err(nfsstat3::NFS3ERR_INVAL));
        assert_eq!(name(&f(b"..")), Ok("..".to_string()));
        assert_eq!(new_name(&f(b"..")), Err(nfsstat3::NFS3ERR_EXIST));
        assert_eq!(new_name(&f(b".")), Err(nfsstat3::NFS3ERR_EXIST));
    }
}
