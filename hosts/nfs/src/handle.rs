//! NFS file handles: `version (1) | volume id (8) | GFID (16)`.
//!
//! A handle names an object by its GFID, which storage/posix keeps in an xattr, so handles stay
//! valid across restarts of xlfs-nfsd (and across graph switches). The volume id tells handles of
//! different volumes apart: a handle minted for another volume, or bytes that are not a handle
//! at all, are `NFS3ERR_BADHANDLE`; a well-formed handle whose object is gone is
//! `NFS3ERR_STALE` (decided later, when the graph cannot resolve the GFID).

use std::fmt;

use nfs3_types::nfs3::{nfs_fh3, nfsstat3};
use nfs3_types::xdr_codec::Opaque;
use xlator_api::Gfid;

/// Layout version of the handle; bump it when the layout changes.
const VERSION: u8 = 1;
/// Bytes in a handle.
pub const HANDLE_LEN: usize = 1 + 8 + 16;

/// Identity of the exported volume inside file handles, and the NFS `fsid`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct VolumeId(pub [u8; 8]);

impl VolumeId {
    /// Derives the id from a stable description of the volume (64-bit FNV-1a: a fixed,
    /// documented function, unlike `std`'s hasher, so ids do not change with the compiler).
    pub fn derive(description: &str) -> VolumeId {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in description.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        VolumeId(h.to_be_bytes())
    }

    /// As the NFS `fsid` attribute.
    pub fn as_u64(self) -> u64 {
        u64::from_be_bytes(self.0)
    }
}

impl fmt::Debug for VolumeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.as_u64())
    }
}

impl fmt::Display for VolumeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Mints and checks the handles of one volume.
#[derive(Clone, Copy, Debug)]
pub struct HandleCodec {
    volume: VolumeId,
}

impl HandleCodec {
    pub fn new(volume: VolumeId) -> HandleCodec {
        HandleCodec { volume }
    }

    pub fn volume(&self) -> VolumeId {
        self.volume
    }

    /// The handle of `gfid`.
    pub fn encode(&self, gfid: Gfid) -> nfs_fh3 {
        let mut v = Vec::with_capacity(HANDLE_LEN);
        v.push(VERSION);
        v.extend_from_slice(&self.volume.0);
        v.extend_from_slice(&gfid.0);
        nfs_fh3 {
            data: Opaque::owned(v),
        }
    }

    /// The GFID a handle names; `NFS3ERR_BADHANDLE` for anything this server did not mint.
    pub fn decode(&self, fh: &nfs_fh3) -> Result<Gfid, nfsstat3> {
        let b: &[u8] = &fh.data.0;
        if b.len() != HANDLE_LEN || b[0] != VERSION || b[1..9] != self.volume.0 {
            return Err(nfsstat3::NFS3ERR_BADHANDLE);
        }
        let mut g = [0u8; 16];
        g.copy_from_slice(&b[9..]);
        let gfid = Gfid(g);
        if gfid.is_null() {
            return Err(nfsstat3::NFS3ERR_BADHANDLE);
        }
        Ok(gfid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fh(bytes: Vec<u8>) -> nfs_fh3 {
        nfs_fh3 {
            data: Opaque::owned(bytes),
        }
    }

    #[test]
    fn round_trip_and_stable_id() {
        let id = VolumeId::derive("local|storage/posix directory=/srv/b");
        assert_eq!(id, VolumeId::derive("local|storage/posix directory=/srv/b"));
        assert_ne!(id, VolumeId::derive("local|storage/posix directory=/srv/c"));
        // FNV-1a of the empty string is the offset basis: pins the function.
        assert_eq!(VolumeId::derive("").as_u64(), 0xcbf2_9ce4_8422_2325);
        let c = HandleCodec::new(id);
        let g = Gfid::random();
        let h = c.encode(g);
        assert_eq!(h.data.len(), HANDLE_LEN);
        assert_eq!(c.decode(&h), Ok(g));
        assert_eq!(c.decode(&c.encode(Gfid::ROOT)), Ok(Gfid::ROOT));
    }

    #[test]
    fn forged_handles_are_bad() {
        let c = HandleCodec::new(VolumeId::derive("a"));
        let other = HandleCodec::new(VolumeId::derive("b"));
        let g = Gfid::random();
        let good = c.encode(g).data.into_owned();
        let bad = nfsstat3::NFS3ERR_BADHANDLE;
        assert_eq!(other.decode(&fh(good.clone())), Err(bad));
        assert_eq!(c.decode(&fh(good[..HANDLE_LEN - 1].to_vec())), Err(bad));
        assert_eq!(c.decode(&fh(Vec::new())), Err(bad));
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(c.decode(&fh(longer)), Err(bad));
        let mut wrong_version = good.clone();
        wrong_version[0] = 9;
        assert_eq!(c.decode(&fh(wrong_version)), Err(bad));
        assert_eq!(c.decode(&c.encode(Gfid::NULL)), Err(bad));
        assert_eq!(c.decode(&fh(vec![0xff; 64])), Err(bad));
    }
}
