//! `features/arbiter`: the brick side of an arbiter brick (`replica 3 arbiter 1`). It sits on
//! storage/posix of the third brick of each replica set and keeps everything replicate needs
//! to decide which copy is good — names, GFIDs, modes, owners, times, xattrs (the pending
//! counters among them) and *sizes* — but no file data: a file on an arbiter is sparse, of
//! the size the data bricks give it, with no blocks.
//!
//! - `writev` stores nothing: the file is extended (never shrunk) to the write's end and its
//!   mtime set, and the reply says the whole buffer was written, with the attributes after.
//! - `zerofill`, and `fallocate` that may grow the file (no `FALLOC_FL_KEEP_SIZE`), extend it
//!   the same way; `discard` and keep-size `fallocate` change nothing; collapse and insert
//!   ranges (which shift the size) go to the brick, where a file without blocks costs none.
//! - Truncation (`setattr` of a size) goes to the brick as it is.
//! - `readv`, `seek` and `rchecksum` answer EIO: there is no data to read. cluster/replicate
//!   never reads a file's data or attributes from its arbiter child (`arbiter-count`), nor
//!   takes it as the source of a data heal; if anything else does, it hears so.
//!
//! Sizes are changed under a per-file lock (a shard of [`SHARDS`] async mutexes by GFID), so
//! two writes extending one file at once never shrink it (replicate sends a client's writes
//! in parallel under one eager lock).

use std::sync::atomic::{AtomicU64, Ordering};

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{
    Buf, Ctx, Errno, Fd, Gfid, Iatt, Init, Rchecksum, ReadReply, SeekWhat, SetAttr, Subvol,
    TimeSet, Translator, WriteReply,
};

/// Size-change locks, by GFID.
pub const SHARDS: usize = 64;

pub struct Arbiter {
    children: Vec<Subvol>,
    locks: Vec<tokio::sync::Mutex<()>>,
    /// Data bytes not stored (writes and zerofills), for the dump.
    dropped: AtomicU64,
}

fn shard(g: Gfid) -> usize {
    let h = g.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h % SHARDS as u64) as usize
}

impl Arbiter {
    fn child(&self) -> &Subvol {
        &self.children[0]
    }

    /// Grows the file behind `fd` to at least `end` bytes (`None`: to its size plus `len`, an
    /// append) and stamps its mtime; the attributes after.
    async fn extend(&self, cx: &Ctx, fd: Fd, end: Option<u64>, len: u64) -> Result<Iatt, Errno> {
        let _one = self.locks[shard(fd.gfid)].lock().await;
        let now = self.child().fstat(cx, fd).await?;
        let end = end.unwrap_or(now.size.saturating_add(len));
        let attr = SetAttr {
            size: if end > now.size {
                ROption::RSome(end)
            } else {
                ROption::RNone
            },
            mtime: TimeSet::Now,
            ..SetAttr::default()
        };
        self.child().fsetattr(cx, fd, attr).await
    }
}

impl Translator for Arbiter {
    const TYPE: &'static str = "features/arbiter";
    const DOC: &'static str = "The brick side of an arbiter brick: keeps names, metadata, sizes and \
         changelog xattrs, stores no file data (reads answer EIO).";
    type Options = ();

    fn init(init: Init<()>) -> Result<Self, String> {
        let [child] = xlator_api::one_child(Self::TYPE, &init.name, init.children)?;
        Ok(Arbiter {
            children: vec![child],
            locks: (0..SHARDS).map(|_| tokio::sync::Mutex::new(())).collect(),
            dropped: AtomicU64::new(0),
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn dump(&self) -> xlator_api::Dump {
        xlator_api::Dump::counters(&[(
            "data-bytes-not-stored",
            self.dropped.load(Ordering::Relaxed),
        )])
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        _flags: i32,
    ) -> Result<WriteReply, Errno> {
        let len = data.len() as u64;
        let end = if fd.flags & libc::O_APPEND != 0 {
            None
        } else {
            Some(offset.saturating_add(len))
        };
        let attr = self.extend(cx, fd, end, len).await?;
        self.dropped.fetch_add(len, Ordering::Relaxed);
        Ok(WriteReply {
            written: len,
            attr: ROption::RSome(attr),
        })
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.extend(cx, fd, Some(offset.saturating_add(len)), len)
            .await
            .map(|_| ())
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        if mode & (libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE) != 0 {
            return self.child().fallocate(cx, fd, mode, offset, len).await;
        }
        if mode & libc::FALLOC_FL_KEEP_SIZE != 0 {
            // Checks the fd like the brick would, and changes nothing.
            return self.child().fstat(cx, fd).await.map(|_| ());
        }
        self.extend(cx, fd, Some(offset.saturating_add(len)), len)
            .await
            .map(|_| ())
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, _offset: u64, _len: u64) -> Result<(), Errno> {
        self.child().fstat(cx, fd).await.map(|_| ())
    }

    async fn readv(
        &self,
        _cx: &Ctx,
        _fd: Fd,
        _offset: u64,
        _size: u32,
    ) -> Result<ReadReply, Errno> {
        Err(Errno::EIO)
    }

    async fn seek(&self, _cx: &Ctx, _fd: Fd, _offset: u64, _what: SeekWhat) -> Result<u64, Errno> {
        Err(Errno::EIO)
    }

    async fn rchecksum(
        &self,
        _cx: &Ctx,
        _fd: Fd,
        _offset: u64,
        _len: u32,
    ) -> Result<Rchecksum, Errno> {
        Err(Errno::EIO)
    }
}

xlator_api::export_translators!(Arbiter);
