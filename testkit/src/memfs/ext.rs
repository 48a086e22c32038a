//! What cluster translators ask of a leaf besides the fop itself: the [`Ctx`] extensions
//! `GfidReq`, `XattrReq` and `CreateXattrs`, and `rchecksum`'s checksums.

use sha2::Digest as _;
use xlator_api::{CreateXattrs, Ctx, Entry, Errno, Fd, GfidReq, Iatt, Rchecksum, XattrReq};

use super::inode::Table;
use super::namespace::Make;

/// The GFID asked for a new object (a null one counts as none).
fn gfid_req(cx: &Ctx) -> Option<xlator_api::Gfid> {
    cx.ext::<GfidReq>().map(|r| r.0).filter(|g| !g.is_null())
}

/// Whether `cx` asks for a GFID other than `existing`'s: the name is someone else's object
/// (a replica's create racing another), so creating "it" again must fail with EEXIST.
pub(crate) fn wants_other_gfid(cx: &Ctx, existing: &Iatt) -> bool {
    gfid_req(cx).is_some_and(|g| g != existing.gfid)
}

/// `m` with the GFID and creation xattrs `cx` asks for.
pub(crate) fn asked(cx: &Ctx, m: Make) -> Make {
    Make {
        gfid: gfid_req(cx),
        xattrs: cx.ext::<CreateXattrs>().map(|c| c.0).unwrap_or_default(),
        ..m
    }
}

/// The xattrs `cx` asks to see in entry replies.
pub(crate) fn xattr_req(cx: &Ctx) -> Option<XattrReq> {
    cx.ext::<XattrReq>()
}

impl Table {
    /// The entry reply for `attr`, with the xattrs `cx` asks for.
    pub(crate) fn entry(&self, cx: &Ctx, attr: Iatt) -> Result<Entry, Errno> {
        let xattrs = self.wanted_xattrs(attr.gfid, xattr_req(cx).as_ref())?;
        Ok(Entry {
            xattrs,
            ..Entry::new(attr)
        })
    }

    /// Adler-32 and SHA-256 of the `len` bytes at `offset` (fewer at end of file), read with
    /// `readv`'s rights.
    pub(crate) fn rchecksum(
        &self,
        cx: &Ctx,
        fd: &Fd,
        offset: u64,
        len: u32,
    ) -> Result<Rchecksum, Errno> {
        let data = self.readv(cx, fd, offset, len)?;
        Ok(checksums(&data))
    }
}

/// The checksums of `data`.
pub(crate) fn checksums(data: &[u8]) -> Rchecksum {
    Rchecksum {
        len: u32::try_from(data.len()).unwrap_or(u32::MAX),
        weak: adler2::adler32_slice(data),
        strong: sha2::Sha256::digest(data).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::checksums;

    #[test]
    fn checksums_are_adler32_and_sha256() {
        let c = checksums(b"Wikipedia");
        assert_eq!(c.len, 9);
        // The example of the Adler-32 article.
        assert_eq!(c.weak, 0x11E6_0398);
        let empty = checksums(b"");
        assert_eq!(empty.weak, 1);
        assert_eq!(
            empty.strong[..4],
            [0xe3, 0xb0, 0xc4, 0x42],
            "SHA-256 of nothing starts e3b0c442"
        );
    }
}
