//! Data: reads and writes split by units and sent to the children at once, sizes, holes,
//! appends, preallocation and hole punching, seeking and checksums.

use std::sync::atomic::Ordering;

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{
    Buf, Ctx, Errno, Fd, Flock, LkCmd, LkOwner, LockKind, Rchecksum, ReadReply, SeekWhat,
    WriteReply,
};

use crate::shared::{Shared, all_ok, child_fd};
use crate::units::{Extent, Geometry};

/// The inode-lock domain of O_APPEND writes, on child 0.
pub const APPEND_DOMAIN: &str = "xlfs.stripe.append";

impl Shared {
    /// The logical size of the file open as `fd`, from every child's size. `known` gives the
    /// sizes already learnt (a read's post-read attributes); the others are fstat'ed.
    pub async fn size_of(
        &self,
        cx: &Ctx,
        fd: Fd,
        geo: Geometry,
        known: &[Option<u64>],
    ) -> Result<u64, Errno> {
        let cfd = child_fd(fd);
        let replies = self
            .fan(|i| async move {
                if let Some(Some(s)) = known.get(i) {
                    return Ok(*s);
                }
                self.ensure(i, cx, fd).await?;
                self.children[i].fstat(cx, cfd).await.map(|a| a.size)
            })
            .await;
        Ok(geo.logical_size(&all_ok(replies)?))
    }

    /// Reads `[off, off + size)`: one read per child touched, at once; a child that holds
    /// less than asked inside the file has a hole there (zeros up to the logical size).
    pub async fn read(&self, cx: &Ctx, fd: Fd, off: u64, size: u32) -> Result<Buf, Errno> {
        self.counters.readv.fetch_add(1, Ordering::Relaxed);
        let geo = self.fd_geometry(cx, fd).await?;
        let extents = geo.split(off, size);
        let cfd = child_fd(fd);
        let replies = join_extents(&extents, |e| async move {
            self.ensure(e.child, cx, fd).await?;
            self.counters.child_reads.fetch_add(1, Ordering::Relaxed);
            let len = u32::try_from(e.len).map_err(|_| Errno::EINVAL)?;
            self.children[e.child]
                .readv(cx, cfd, e.child_off, len)
                .await
        })
        .await;
        let replies = all_ok(replies)?;
        let short = extents
            .iter()
            .zip(&replies)
            .any(|(e, r)| (r.data.len() as u64) < e.len);
        if !short {
            if let ([e], [r]) = (extents.as_slice(), replies.as_slice())
                && e.segs.len() == 1
            {
                // One piece: the child's buffer is the answer (no copy).
                return Ok(r.data.slice(..e.len as usize));
            }
            return Ok(assemble(&extents, &replies, u64::from(size)));
        }
        // A short child: end of file or a hole; the logical size tells which.
        self.counters.short_reads.fetch_add(1, Ordering::Relaxed);
        let mut known = vec![None; self.n()];
        for (e, r) in extents.iter().zip(&replies) {
            if let ROption::RSome(a) = &r.attr {
                known[e.child] = Some(a.size);
            }
        }
        let end = self.size_of(cx, fd, geo, &known).await?;
        let want = end.saturating_sub(off).min(u64::from(size));
        Ok(assemble(&extents, &replies, want))
    }

    /// Writes `data` at `off` (at the end of file, under the append lock, for O_APPEND).
    pub async fn write(
        &self,
        cx: &Ctx,
        fd: Fd,
        off: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.counters.writev.fetch_add(1, Ordering::Relaxed);
        let geo = self.fd_geometry(cx, fd).await?;
        let append = (fd.flags | flags) & libc::O_APPEND != 0;
        let flags = flags & !libc::O_APPEND;
        if append {
            return self.append(cx, fd, geo, data, flags).await;
        }
        self.write_at(cx, fd, geo, off, data, flags).await
    }

    /// Appends under an inode lock on child 0 in [`APPEND_DOMAIN`]: the end of file is
    /// computed from every child's size and the data written there before another append
    /// (from any client) can compute its own end.
    async fn append(
        &self,
        cx: &Ctx,
        fd: Fd,
        geo: Geometry,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.counters.appends.fetch_add(1, Ordering::Relaxed);
        let lock = |kind| Flock {
            kind,
            start: 0,
            len: 0,
            pid: cx.pid(),
            owner: LkOwner(0),
        };
        let owner = LkOwner(self.next_owner());
        let take = Flock {
            owner,
            ..lock(LockKind::Write)
        };
        let domain = || APPEND_DOMAIN.into();
        self.children[0]
            .inodelk(cx, domain(), fd.gfid, LkCmd::SetWait, take)
            .await?;
        let r = async {
            let end = self.size_of(cx, fd, geo, &[]).await?;
            self.write_at(cx, fd, geo, end, data, flags).await
        }
        .await;
        let give = Flock {
            owner,
            ..lock(LockKind::Unlock)
        };
        let unlocked = self.children[0]
            .inodelk(cx, domain(), fd.gfid, LkCmd::Set, give)
            .await;
        let reply = r?;
        unlocked?;
        Ok(reply)
    }

    async fn write_at(
        &self,
        cx: &Ctx,
        fd: Fd,
        geo: Geometry,
        off: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let len = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        if len == 0 {
            return Ok(WriteReply::written(0));
        }
        let extents = geo.split(off, len);
        let cfd = child_fd(fd);
        let data = &data;
        let replies = join_extents(&extents, |e| async move {
            self.ensure(e.child, cx, fd).await?;
            self.counters.child_writes.fetch_add(1, Ordering::Relaxed);
            let bytes = match e.segs.as_slice() {
                // One piece: a view of the caller's buffer (no copy).
                [s] => data.slice(s.buf_off as usize..(s.buf_off + s.len) as usize),
                segs => Buf::concat(
                    &segs
                        .iter()
                        .map(|s| data.slice(s.buf_off as usize..(s.buf_off + s.len) as usize))
                        .collect::<Vec<_>>(),
                ),
            };
            self.children[e.child]
                .writev(cx, cfd, e.child_off, bytes, flags)
                .await
        })
        .await;
        let replies = all_ok(replies)?;
        Ok(WriteReply::written(written_prefix(
            &extents,
            &replies,
            u64::from(len),
        )))
    }

    /// `op(child, child_off, len)` on the children holding part of `[off, off + len)`.
    pub async fn ranges<F, Fut>(
        &self,
        cx: &Ctx,
        fd: Fd,
        off: u64,
        len: u64,
        op: F,
    ) -> Result<(), Errno>
    where
        F: Fn(usize, Fd, u64, u64) -> Fut,
        Fut: Future<Output = Result<(), Errno>>,
    {
        let geo = self.fd_geometry(cx, fd).await?;
        let ranges = geo.child_ranges(off, len);
        let cfd = child_fd(fd);
        let op = &op;
        let replies = futures::future::join_all(ranges.iter().map(|&(i, c, l)| async move {
            self.ensure(i, cx, fd).await?;
            op(i, cfd, c, l).await
        }))
        .await;
        all_ok(replies).map(drop)
    }

    /// SEEK_DATA / SEEK_HOLE: each child seeks from its first byte at or after `off`; the
    /// answer is the nearest logical position any child gives (a hole no further than the
    /// logical end of file).
    pub async fn seek(&self, cx: &Ctx, fd: Fd, off: u64, what: SeekWhat) -> Result<u64, Errno> {
        let geo = self.fd_geometry(cx, fd).await?;
        let size = self.size_of(cx, fd, geo, &[]).await?;
        if off >= size {
            return Err(Errno::ENXIO);
        }
        let cfd = child_fd(fd);
        let replies = self
            .fan(|i| async move {
                let from = geo.child_start(i, off);
                match self.children[i].seek(cx, cfd, from, what).await {
                    Ok(c) => Ok(Some(geo.logical_of(i, c))),
                    // Nothing after `from` on this child: no data; a hole from `from` on.
                    Err(Errno::ENXIO) => Ok(match what {
                        SeekWhat::Data => None,
                        SeekWhat::Hole => Some(geo.logical_of(i, from)),
                    }),
                    Err(e) => Err(e),
                }
            })
            .await;
        let found = all_ok(replies)?.into_iter().flatten().min();
        match what {
            SeekWhat::Data => found.filter(|&p| p < size).ok_or(Errno::ENXIO),
            SeekWhat::Hole => Ok(found.map_or(size, |p| p.min(size))),
        }
    }

    pub async fn checksum(&self, cx: &Ctx, fd: Fd, off: u64, len: u32) -> Result<Rchecksum, Errno> {
        let data = self.read(cx, fd, off, len).await?;
        use sha2::Digest as _;
        Ok(Rchecksum {
            len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            weak: adler2::adler32_slice(&data),
            strong: sha2::Sha256::digest(&data[..]).into(),
        })
    }
}

/// `op` on every extent at once, replies in extent order.
async fn join_extents<'a, R, F, Fut>(extents: &'a [Extent], op: F) -> Vec<Result<R, Errno>>
where
    F: Fn(&'a Extent) -> Fut,
    Fut: Future<Output = Result<R, Errno>>,
{
    futures::future::join_all(extents.iter().map(op)).await
}

/// The caller's `want` bytes from the children's replies; bytes a child did not return
/// (a hole below the logical size) are zeros.
fn assemble(extents: &[Extent], replies: &[ReadReply], want: u64) -> Buf {
    let mut out = vec![0u8; want as usize];
    for (e, r) in extents.iter().zip(replies) {
        let got = r.data.len() as u64;
        for s in &e.segs {
            let end = (s.at + s.len).min(got);
            if s.buf_off >= want || s.at >= end {
                continue;
            }
            let n = (end - s.at).min(want - s.buf_off) as usize;
            let (b, a) = (s.buf_off as usize, s.at as usize);
            out[b..b + n].copy_from_slice(&r.data[a..a + n]);
        }
    }
    Buf::from_vec(out)
}

/// How much of the caller's `len` bytes is written from its start on (a child that wrote
/// less ends the count at its first unwritten byte).
fn written_prefix(extents: &[Extent], replies: &[WriteReply], len: u64) -> u64 {
    let mut first_gap = len;
    for (e, r) in extents.iter().zip(replies) {
        for s in &e.segs {
            if r.written < s.at + s.len {
                let done = r.written.saturating_sub(s.at);
                first_gap = first_gap.min(s.buf_off + done);
            }
        }
    }
    first_gap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_child_counts_only_the_bytes_before_its_gap() {
        let geo = Geometry::new(2, 4).expect("valid");
        let extents = geo.split(0, 16);
        // Child 1 wrote its first unit (buffer 4..8) and one byte of its second (12..16).
        let r = [WriteReply::written(8), WriteReply::written(5)];
        assert_eq!(written_prefix(&extents, &r, 16), 13);
        let r = [WriteReply::written(8), WriteReply::written(8)];
        assert_eq!(written_prefix(&extents, &r, 16), 16);
    }

    #[test]
    fn holes_read_as_zeros_up_to_what_is_wanted() {
        let geo = Geometry::new(2, 4).expect("valid");
        let extents = geo.split(0, 16);
        let r = [
            ReadReply::data(Buf::copy_from_slice(b"abcdefgh")),
            ReadReply::data(Buf::copy_from_slice(b"AB")),
        ];
        assert_eq!(assemble(&extents, &r, 10).as_slice(), b"abcdAB\0\0ef");
    }
}
