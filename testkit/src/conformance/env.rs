//! What a case gets ([`Env`]) and the helpers cases are written with: fop wrappers that turn
//! errors into messages, and `ensure!`-style checks.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use xlator_api::{Buf, Ctx, DirEntry, Errno, Fd, FdId, Gfid, Iatt, Loc, SetAttr, Subvol};

/// The result of a case: `Err` carries the failure message.
pub(crate) type CaseResult = Result<(), String>;

/// Fails the case with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// Fails the case unless the two values are equal, showing both.
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!("{}: got {:?}, want {:?}", format!($($fmt)+), got, want));
        }
    }};
}
pub(crate) use {ensure, ensure_eq};

/// Turns a fop error into a case failure naming the operation.
pub(crate) trait OrFail<T> {
    fn or_fail(self, what: &str) -> Result<T, String>;
}

impl<T> OrFail<T> for Result<T, Errno> {
    fn or_fail(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: unexpected {e:?}"))
    }
}

/// Checks that `r` failed with one of `want`.
pub(crate) fn expect_err<T: Debug>(r: Result<T, Errno>, want: &[Errno], what: &str) -> CaseResult {
    match r {
        Err(e) if want.contains(&e) => Ok(()),
        Err(e) => Err(format!("{what}: got {e:?}, want one of {want:?}")),
        Ok(v) => Err(format!("{what}: succeeded ({v:?}), want one of {want:?}")),
    }
}

/// Fd ids for the suite's opens; high so they do not collide with a host's.
static NEXT_FD: AtomicU64 = AtomicU64::new(1 << 48);

/// A fresh fd for `gfid` with open flags `flags`.
pub(crate) fn new_fd(gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(NEXT_FD.fetch_add(1, Ordering::Relaxed)),
        gfid,
        flags,
    }
}

/// A byte pattern that differs at every offset of a short period, seeded by `seed`.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ ((i >> 8) as u8))
        .collect()
}

/// A case's world: the graph, a root context, and a fresh directory (mode 0777) of its own.
#[derive(Clone)]
pub(crate) struct Env {
    pub(crate) top: Subvol,
    pub(crate) cx: Ctx,
    pub(crate) dir: Gfid,
}

impl Env {
    /// The same world seen by another caller.
    pub(crate) fn as_user(&self, uid: u32, gid: u32, groups: &[u32]) -> Env {
        Env {
            cx: Ctx::builder(uid, gid).groups(groups).build(),
            ..self.clone()
        }
    }

    pub(crate) async fn lookup(&self, parent: Gfid, name: &str) -> Result<Iatt, String> {
        let r = self.top.lookup(&self.cx, Loc::new(parent, name)).await;
        r.map(|e| e.attr).or_fail(&format!("lookup {name:?}"))
    }

    pub(crate) async fn stat(&self, gfid: Gfid) -> Result<Iatt, String> {
        self.top.stat(&self.cx, gfid).await.or_fail("stat")
    }

    pub(crate) async fn mkdir(&self, parent: Gfid, name: &str, mode: u32) -> Result<Iatt, String> {
        let r = self
            .top
            .mkdir(&self.cx, Loc::new(parent, name), mode, 0)
            .await;
        r.map(|e| e.attr).or_fail(&format!("mkdir {name:?}"))
    }

    /// Creates and opens `name` read-write (umask 0).
    pub(crate) async fn create(
        &self,
        parent: Gfid,
        name: &str,
        mode: u32,
    ) -> Result<(Iatt, Fd), String> {
        let fd = new_fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
        let r = self
            .top
            .create(&self.cx, Loc::new(parent, name), fd, mode, 0)
            .await;
        let attr = r.or_fail(&format!("create {name:?}"))?.attr;
        Ok((
            attr,
            Fd {
                gfid: attr.gfid,
                ..fd
            },
        ))
    }

    /// Creates `name` holding `data`, and closes it.
    pub(crate) async fn file_with(
        &self,
        parent: Gfid,
        name: &str,
        data: &[u8],
    ) -> Result<Iatt, String> {
        let (attr, fd) = self.create(parent, name, 0o644).await?;
        if !data.is_empty() {
            self.write(fd, 0, data).await?;
        }
        self.close(fd).await?;
        Ok(attr)
    }

    pub(crate) async fn open(&self, gfid: Gfid, flags: i32) -> Result<Fd, String> {
        let fd = new_fd(gfid, flags);
        self.top.open(&self.cx, fd).await.or_fail("open")?;
        Ok(fd)
    }

    /// flush + release.
    pub(crate) async fn close(&self, fd: Fd) -> CaseResult {
        self.top.flush(&self.cx, fd).await.or_fail("flush")?;
        self.top.release(&self.cx, fd).await.or_fail("release")
    }

    /// Writes all of `data` at `off` (a short write fails the case).
    pub(crate) async fn write(&self, fd: Fd, off: u64, data: &[u8]) -> CaseResult {
        let r = self
            .top
            .writev(&self.cx, fd, off, Buf::copy_from_slice(data), 0)
            .await
            .or_fail("writev")?;
        ensure_eq!(r.written, data.len() as u64, "bytes written at {off}");
        if let Some(a) = r.attr.into_option() {
            let end = off + data.len() as u64;
            ensure!(
                a.size >= end,
                "writev's post-write attributes say size {} after writing up to {end}",
                a.size
            );
        }
        Ok(())
    }

    pub(crate) async fn read(&self, fd: Fd, off: u64, size: u32) -> Result<Vec<u8>, String> {
        let b = self
            .top
            .readv(&self.cx, fd, off, size)
            .await
            .or_fail("readv")?;
        ensure!(
            b.data.len() <= size as usize,
            "readv returned {} bytes for a {size}-byte read",
            b.data.len()
        );
        if let Some(a) = b.attr.into_option()
            && !b.data.is_empty()
        {
            let end = off + b.data.len() as u64;
            ensure!(
                a.size >= end,
                "readv's post-read attributes say size {} after reading up to {end}",
                a.size
            );
        }
        Ok(b.data.to_vec())
    }

    /// Reads from `off` to end of file in pieces of `piece` bytes.
    pub(crate) async fn read_to_end(
        &self,
        fd: Fd,
        mut off: u64,
        piece: u32,
    ) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        loop {
            let b = self.read(fd, off, piece).await?;
            if b.is_empty() {
                return Ok(out);
            }
            off += b.len() as u64;
            out.extend_from_slice(&b);
        }
    }

    pub(crate) async fn setattr(&self, gfid: Gfid, set: SetAttr) -> Result<Iatt, String> {
        self.top
            .setattr(&self.cx, gfid, set)
            .await
            .or_fail("setattr")
    }

    /// Every entry of `dir` (without `.`/`..`), reading `page` bytes per `readdirp`; also
    /// returns the number of calls that returned entries.
    pub(crate) async fn list(
        &self,
        dir: Gfid,
        page: u32,
    ) -> Result<(Vec<DirEntry>, usize), String> {
        let fd = new_fd(dir, libc::O_RDONLY | libc::O_DIRECTORY);
        self.top.opendir(&self.cx, fd).await.or_fail("opendir")?;
        let mut out = Vec::new();
        let mut pages = 0;
        let mut offset = 0;
        loop {
            let batch = self
                .top
                .readdirp(&self.cx, fd, offset, page)
                .await
                .or_fail("readdirp")?;
            let Some(last) = batch.last() else { break };
            ensure!(pages < 100_000, "readdirp never ends (cookie {offset})");
            offset = last.next_offset;
            pages += 1;
            out.extend(
                batch
                    .into_iter()
                    .filter(|e| e.name != "." && e.name != ".."),
            );
        }
        self.top
            .releasedir(&self.cx, fd)
            .await
            .or_fail("releasedir")?;
        Ok((out, pages))
    }

    /// Sorted names of `dir`.
    pub(crate) async fn names(&self, dir: Gfid) -> Result<Vec<String>, String> {
        let (entries, _) = self.list(dir, 64 * 1024).await?;
        let mut names: Vec<String> = entries.into_iter().map(|e| e.name.into_string()).collect();
        names.sort();
        Ok(names)
    }

    /// Checks that `name` does not exist in `parent`.
    pub(crate) async fn absent(&self, parent: Gfid, name: &str) -> CaseResult {
        let r = self.top.lookup(&self.cx, Loc::new(parent, name)).await;
        expect_err(r, &[Errno::ENOENT], &format!("lookup of removed {name:?}"))
    }
}
