//! Opening files and moving their bytes: open, readv/writev (pread/pwritev2), fsync, fallocate,
//! discard, zerofill and hole-aware seek. Anonymous fds open the object by GFID for the one
//! call.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{
    BackingFile, Buf, Errno, Fd, FdId, Gfid, Opened, ReadReply, SeekWhat, WriteReply,
};

use crate::atime;
use crate::brick::Brick;
use crate::creds;
use crate::fdtable::OpenFile;
use crate::sys;

/// Logical block size assumed for O_DIRECT alignment.
pub(crate) const DIO_ALIGN: usize = 4096;

/// Flags an `open` may pass to the kernel (creation flags are the entry fops' business).
/// O_NOFOLLOW concerned the client's last path component, which its kernel already
/// resolved; here the object is reopened through its `/proc/self/fd` link, which O_NOFOLLOW
/// would refuse with ELOOP (a symlink object is refused before that).
/// O_NOATIME is set after the open, as root ([`atime::no_atime`]).
fn open_flags(flags: i32) -> i32 {
    flags
        & !(libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOCTTY
            | libc::O_PATH
            | libc::O_NOFOLLOW
            | libc::O_NOATIME)
}

/// Opens `path` (relative to `dir`), retrying without O_DIRECT when the file system refuses
/// it. Returns the fd and the flags actually in effect.
pub fn open_direct_fallback(
    dir: Option<BorrowedFd<'_>>,
    path: &CStr,
    flags: i32,
    mode: u32,
) -> Result<(OwnedFd, i32), Errno> {
    match sys::openat(dir, path, flags, mode) {
        Err(Errno::EINVAL) if flags & libc::O_DIRECT != 0 => {
            let f = flags & !libc::O_DIRECT;
            sys::openat(dir, path, f, mode).map(|fd| (fd, f))
        }
        r => r.map(|fd| (fd, flags)),
    }
}

/// What [`Brick::readv_cached`] found in the page cache.
pub enum Cached {
    /// The whole answer (or an error that any read would give).
    Reply(Result<ReadReply, Errno>),
    /// Not all of it: the bytes it did hold from the start of the range (maybe none).
    Miss(Vec<u8>),
    /// None of it, and the read qualifies for `direct-read-min`: pass it to
    /// [`Brick::readv_direct`] on the blocking pool.
    Cold,
}

impl Brick {
    /// Opens the object `g` under the caller's credentials (permission checked on the object
    /// alone, as for an open by handle).
    pub fn open_gfid(&self, g: Gfid, flags: i32) -> Result<OpenFile, Errno> {
        self.open_object(g, flags).map(|(f, _)| f)
    }

    /// [`Brick::open_gfid`], with the object's size as found before the open.
    fn open_object(&self, g: Gfid, flags: i32) -> Result<(OpenFile, i64), Errno> {
        let obj = self.h.resolve(g)?;
        let st = sys::fstat(obj.as_fd())?;
        let is_dir = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => false,
            libc::S_IFDIR => true,
            libc::S_IFLNK => return Err(Errno::ELOOP),
            // Devices and FIFOs are opened by the client kernel, never on the brick.
            _ => return Err(Errno::ENXIO),
        };
        if is_dir && flags & libc::O_ACCMODE != libc::O_RDONLY {
            return Err(Errno::EISDIR);
        }
        let f = open_flags(flags) | if is_dir { libc::O_DIRECTORY } else { 0 };
        let (fd, mut f) = open_direct_fallback(None, &sys::proc_path(obj.as_fd()), f, 0)?;
        if flags & libc::O_NOATIME != 0 {
            atime::no_atime(fd.as_fd())?;
            f |= libc::O_NOATIME;
        }
        Ok((OpenFile::new(fd, g, f, is_dir), st.st_size))
    }

    /// Opens `fd`; with `backing`, a read-only open of a regular file (not O_DIRECT) also
    /// answers with a backing file (option `backing-files`): the file opened again for
    /// reading and writing, as root. Writable, because the caller's kernel sends every
    /// open of the file to that one backing file while any passthrough open of it lasts,
    /// writers' included; as root, because whether a caller may write is checked on its own
    /// open (this one, or a later open for writing), never by the backing file. A file the
    /// brick cannot open for writing (read-only file system, a running executable) has no
    /// backing file and is read through the brick.
    ///
    /// An open for reading counts as an access of the file ([`atime`]).
    pub fn open(&self, fd: &Fd, backing: bool) -> Result<Opened, Errno> {
        let (f, size) = self.open_object(fd.gfid, fd.flags)?;
        if !f.is_dir && atime::counts_as_access(f.flags) {
            atime::touch(f.fd.as_fd(), size);
        }
        let backing = if backing
            && !f.is_dir
            && f.flags & libc::O_ACCMODE == libc::O_RDONLY
            && f.flags & (libc::O_DIRECT | libc::O_TRUNC | libc::O_PATH) == 0
        {
            let path = sys::proc_path(f.fd.as_fd());
            // The kernel's reads through it update atime as the brick's own would, unless
            // the client asked for none.
            let noatime = f.flags & libc::O_NOATIME;
            creds::as_root(|| sys::openat(None, &path, libc::O_RDWR | libc::O_CLOEXEC | noatime, 0))
                .map_err(|e| std::io::Error::from_raw_os_error(e.0))
                .and_then(BackingFile::new)
                .inspect_err(|e| tracing::debug!("no backing file for {}: {e}", fd.gfid))
                .ok()
        } else {
            None
        };
        self.fds.insert(fd.id, f)?;
        Ok(Opened {
            backing: backing.into(),
        })
    }

    /// The open file of `fd`; for an anonymous fd, the object opened now with `access`
    /// (plus the fd's O_APPEND/O_SYNC/O_DSYNC/O_DIRECT/O_NOATIME).
    pub fn file_for(&self, fd: &Fd, access: i32) -> Result<Arc<OpenFile>, Errno> {
        if fd.id != FdId::ANONYMOUS {
            return self.fds.get(fd.id);
        }
        let keep = fd.flags
            & (libc::O_APPEND | libc::O_SYNC | libc::O_DSYNC | libc::O_DIRECT | libc::O_NOATIME);
        let obj = self.h.resolve(fd.gfid)?;
        let st = sys::fstat(obj.as_fd())?;
        let access = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            libc::O_RDONLY
        } else {
            access
        };
        Ok(Arc::new(self.open_gfid(fd.gfid, access | keep)?))
    }

    pub fn release(&self, fd: &Fd) -> Result<(), Errno> {
        self.fds.remove(fd.id);
        Ok(())
    }

    pub fn flush(&self, fd: &Fd) -> Result<(), Errno> {
        if fd.id != FdId::ANONYMOUS {
            self.fds.get(fd.id)?;
        }
        Ok(())
    }

    /// Reads, then fstats the same fd so the reply carries the post-read attributes (one
    /// more system call here saves the caller a whole round trip).
    /// `have`: the first bytes of the range, already read from the page cache by
    /// [`Brick::readv_cached`] (empty otherwise); only the rest is read here.
    pub fn readv(
        &self,
        fd: &Fd,
        offset: u64,
        size: u32,
        have: Vec<u8>,
    ) -> Result<ReadReply, Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        let data = self.read_file(&f, offset, size, have)?;
        self.read_reply(&f, data)
    }

    /// A read's reply: `data` and the attributes of `f` after it.
    fn read_reply(&self, f: &OpenFile, data: Buf) -> Result<ReadReply, Errno> {
        let attr = self.fd_iatt(f.as_fd(), f.gfid)?;
        Ok(ReadReply {
            data,
            attr: ROption::RSome(attr),
        })
    }

    /// `readv` whose data stays in the kernel: the file's pages are spliced into a pipe and the
    /// reply's [`Buf`] holds that pipe ([`Buf::from_pipe`]), for a sender that splices it on
    /// to its socket. Blocks on the disk like [`Brick::readv`] (pool only). Anonymous,
    /// O_DIRECT and directory fds, and file systems or limits that refuse the pipe or the
    /// splice, get a plain read.
    pub fn readv_spliced(&self, fd: &Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        if f.is_dir || f.direct() || fd.is_anonymous() {
            return self.readv(fd, offset, size, Vec::new());
        }
        let data = match splice_read(f.as_fd(), offset, size as usize) {
            Ok(b) => b,
            Err(Errno::EINVAL | Errno::EPERM | Errno::ENOSYS | Errno::EMFILE | Errno::ENFILE) => {
                read_rest(f.as_fd(), offset, size as usize, Vec::new())?
            }
            Err(e) => return Err(e),
        };
        self.read_reply(&f, data)
    }

    /// `readv` through an opened fd answered from the page cache alone, without blocking,
    /// so it may run on any thread (no credentials needed: the fd was checked at open).
    /// [`Cached::Miss`] when the data is not all cached, or the fd is anonymous, O_DIRECT or a
    /// directory: pass its bytes to [`Brick::readv`] on the blocking pool. [`Cached::Cold`]
    /// when none of it is cached and the read should go direct ([`crate::direct`];
    /// `client` is the caller's connection).
    pub fn readv_cached(&self, fd: &Fd, offset: u64, size: u32, client: u64) -> Cached {
        if fd.is_anonymous() {
            return Cached::Miss(Vec::new());
        }
        let f = match self.fds.get(fd.id) {
            Ok(f) => f,
            Err(e) => return Cached::Reply(Err(e)),
        };
        if f.is_dir || f.direct() {
            return Cached::Miss(Vec::new());
        }
        if self.direct.wanted(&f, client, offset, size) {
            // Checked before the RWF_NOWAIT read below, which would start page cache
            // readahead of the range on a miss.
            return Cached::Cold;
        }
        let mut v = Vec::new();
        let nowait = |buf: &mut _| sys::pread_uninit(f.as_fd(), buf, offset, libc::RWF_NOWAIT);
        match append_read(&mut v, size as usize, nowait) {
            Ok(_) => {}
            Err(Errno::EAGAIN | Errno::ENOTSUP) => return Cached::Miss(v),
            Err(e) => return Cached::Reply(Err(e)),
        }
        let attr = match self.fd_iatt(f.as_fd(), f.gfid) {
            Ok(a) => a,
            Err(e) => return Cached::Reply(Err(e)),
        };
        // A short read is only an answer at the end of the file; short of it, the rest is
        // not cached.
        if v.len() < size as usize && offset + (v.len() as u64) < attr.size {
            return Cached::Miss(v);
        }
        Cached::Reply(Ok(ReadReply {
            data: Buf::from_vec(v),
            attr: ROption::RSome(attr),
        }))
    }

    /// `readv` of data the page cache does not hold ([`Cached::Cold`]), read with O_DIRECT
    /// through the fd's twin so the brick neither caches nor copies it. Falls back to a
    /// buffered read where O_DIRECT is refused (file system or alignment). Blocks on the
    /// disk (pool only).
    pub fn readv_direct(&self, fd: &Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        let twin = if f.is_dir { None } else { direct_twin(&f)? };
        let data = match twin {
            Some(twin) => read_direct(twin, offset, size as usize, Vec::new(), || Ok(f.as_fd()))?,
            None => self.read_file(&f, offset, size, Vec::new())?,
        };
        self.read_reply(&f, data)
    }

    /// `have` is empty for O_DIRECT fds ([`Brick::readv_cached`] leaves those alone).
    pub(crate) fn read_file(
        &self,
        f: &OpenFile,
        offset: u64,
        size: u32,
        have: Vec<u8>,
    ) -> Result<Buf, Errno> {
        if f.is_dir {
            return Err(Errno::EISDIR);
        }
        let size = size as usize;
        if f.direct() {
            return read_direct(f.as_fd(), offset, size, have, || buffered(f));
        }
        read_rest(f.as_fd(), offset, size, have)
    }

    /// Writes, then fstats the same fd for the post-write attributes.
    pub fn writev(
        &self,
        fd: &Fd,
        offset: u64,
        data: &Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let f = self.file_for(fd, libc::O_WRONLY)?;
        let written = self.write_file(&f, offset, data, flags)?;
        let attr = self.fd_iatt(f.as_fd(), f.gfid)?;
        Ok(WriteReply {
            written,
            attr: ROption::RSome(attr),
        })
    }

    fn write_file(&self, f: &OpenFile, offset: u64, data: &Buf, flags: i32) -> Result<u64, Errno> {
        if f.is_dir {
            return Err(Errno::EISDIR);
        }
        let mut rwf = 0;
        if flags & libc::O_APPEND != 0 {
            rwf |= libc::RWF_APPEND;
        }
        if flags & libc::O_SYNC == libc::O_SYNC {
            rwf |= libc::RWF_SYNC;
        } else if flags & libc::O_DSYNC != 0 {
            rwf |= libc::RWF_DSYNC;
        }
        if f.direct() {
            let aligned =
                data.len().is_multiple_of(DIO_ALIGN) && offset.is_multiple_of(DIO_ALIGN as u64);
            if aligned {
                let (mut v, start) = aligned_vec(data.len());
                v[start..start + data.len()].copy_from_slice(data);
                match write_all(f.as_fd(), &v[start..start + data.len()], offset, rwf) {
                    Err(Errno::EINVAL) => {}
                    r => return r,
                }
            }
            // Keep O_DIRECT's durability promise on the buffered path.
            let rwf = if rwf & libc::RWF_SYNC == 0 {
                rwf | libc::RWF_DSYNC
            } else {
                rwf
            };
            return write_all(buffered(f)?, data, offset, rwf);
        }
        write_all(f.as_fd(), data, offset, rwf)
    }

    pub fn fsync(&self, fd: &Fd, datasync: bool) -> Result<(), Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        sys::fsync(f.as_fd(), datasync)
    }

    pub fn fallocate(&self, fd: &Fd, mode: i32, offset: u64, len: u64) -> Result<(), Errno> {
        let f = self.file_for(fd, libc::O_WRONLY)?;
        sys::fallocate(f.as_fd(), mode, offset, len)
    }

    pub fn discard(&self, fd: &Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let f = self.file_for(fd, libc::O_WRONLY)?;
        sys::fallocate(
            f.as_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    }

    /// Zeroes `[offset, offset + len)` (extending the file like a write would).
    pub fn zerofill(&self, fd: &Fd, offset: u64, len: u64) -> Result<(), Errno> {
        let f = self.file_for(fd, libc::O_WRONLY)?;
        match sys::fallocate(f.as_fd(), libc::FALLOC_FL_ZERO_RANGE, offset, len) {
            Err(Errno::ENOTSUP | Errno::ENOSYS) => {}
            r => return r,
        }
        let chunk = vec![0u8; 1 << 20];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            write_all(f.as_fd(), &chunk[..n], offset + done, 0)?;
            done += n as u64;
        }
        Ok(())
    }

    pub fn seek(&self, fd: &Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        let whence = match what {
            SeekWhat::Data => libc::SEEK_DATA,
            SeekWhat::Hole => libc::SEEK_HOLE,
        };
        sys::lseek(f.as_fd(), offset, whence)
    }
}

/// The buffered twin of an O_DIRECT file (opened once, as root: the open was authorised).
fn buffered(f: &OpenFile) -> Result<BorrowedFd<'_>, Errno> {
    if let Some(fd) = f.buffered.get() {
        return Ok(fd.as_fd());
    }
    let flags = f.flags & !(libc::O_DIRECT | libc::O_TRUNC | libc::O_CREAT | libc::O_EXCL);
    let fd = creds::as_root(|| sys::openat(None, &sys::proc_path(f.as_fd()), flags, 0))?;
    let _ = f.buffered.set(fd);
    f.buffered.get().map(|fd| fd.as_fd()).ok_or(Errno::EIO)
}

/// The O_DIRECT twin of a buffered fd open for reading (opened once, as root: the open was
/// authorised; read-only whatever the fd's own mode). `None` when the file system refuses
/// O_DIRECT, remembered for the fd's life.
fn direct_twin(f: &OpenFile) -> Result<Option<BorrowedFd<'_>>, Errno> {
    if let Some(twin) = f.direct.get() {
        return Ok(twin.as_ref().map(|fd| fd.as_fd()));
    }
    let path = sys::proc_path(f.as_fd());
    let twin = match creds::as_root(|| sys::openat(None, &path, libc::O_RDONLY | libc::O_DIRECT, 0))
    {
        Ok(fd) => Some(fd),
        Err(Errno::EINVAL) => None,
        Err(e) => return Err(e),
    };
    let _ = f.direct.set(twin);
    Ok(f.direct.get().and_then(|t| t.as_ref()).map(|fd| fd.as_fd()))
}

/// A zeroed vector with a `DIO_ALIGN`-aligned window of `len` bytes starting at the index
/// returned.
fn aligned_vec(len: usize) -> (Vec<u8>, usize) {
    let v = vec![0u8; len + DIO_ALIGN];
    let start = v.as_ptr().align_offset(DIO_ALIGN).min(DIO_ALIGN);
    (v, start)
}

fn read_aligned(fd: BorrowedFd<'_>, offset: u64, size: usize) -> Result<Buf, Errno> {
    if !offset.is_multiple_of(DIO_ALIGN as u64) {
        return Err(Errno::EINVAL);
    }
    let rounded = size.div_ceil(DIO_ALIGN) * DIO_ALIGN;
    // Not zeroed first: the disk fills the aligned window (a cold read's buffer is large).
    let mut v: Vec<u8> = Vec::with_capacity(rounded + DIO_ALIGN);
    let start = v.as_ptr().align_offset(DIO_ALIGN).min(DIO_ALIGN);
    let spare = v.spare_capacity_mut();
    spare[..start].fill(MaybeUninit::new(0));
    let window = &mut spare[start..start + rounded];
    let mut got = 0;
    while got < size {
        let n = sys::pread_uninit(fd, &mut window[got..], offset + got as u64, 0)?;
        if n == 0 {
            break;
        }
        got += n;
        if !got.is_multiple_of(DIO_ALIGN) {
            break; // short read: end of file
        }
    }
    // SAFETY: the first `start` bytes were zeroed above and the next `got` read into.
    unsafe { v.set_len(start + got) };
    Ok(Buf::from_vec(v).slice(start..start + got.min(size)))
}

/// Reads through the O_DIRECT fd `direct`, or through `buffered()` where the device refuses
/// the alignment (EINVAL).
fn read_direct<'a>(
    direct: BorrowedFd<'_>,
    offset: u64,
    size: usize,
    have: Vec<u8>,
    buffered: impl FnOnce() -> Result<BorrowedFd<'a>, Errno>,
) -> Result<Buf, Errno> {
    match read_aligned(direct, offset, size) {
        Err(Errno::EINVAL) => read_rest(buffered()?, offset, size, have),
        r => r,
    }
}

/// Up to `size` bytes of `file` at `offset` in a pipe (fewer only at the end of the file).
/// Should the pipe fill up short of the end of the file (it is sized for the range, so it
/// should not), what it holds is read out and the rest read normally: a plain buffer comes
/// back.
fn splice_read(file: BorrowedFd<'_>, offset: u64, size: usize) -> Result<Buf, Errno> {
    let (r, w) = sys::pipe_for(offset, size)?;
    let mut got = 0;
    while got < size {
        match sys::splice_to_pipe(file, offset + got as u64, w.as_fd(), size - got) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EAGAIN) => {
                // A full pipe: at the end of the file that is the whole answer (the
                // range's last slot filled up exactly), else the rest is read normally.
                if offset + got as u64 >= sys::fstat(file)?.st_size as u64 {
                    break;
                }
                drop(w);
                let have = Buf::from_pipe(r, got).into_vec();
                return read_rest(file, offset, size, have);
            }
            Err(e) => return Err(e),
        }
    }
    drop(w);
    Ok(Buf::from_pipe(r, got))
}

/// Completes a read of up to `size` bytes at `offset` whose first `have.len()` bytes are
/// already in `have`, with one call: a regular file reads short only at its end, so there is
/// no second call just to see a zero-length read.
fn read_rest(
    fd: BorrowedFd<'_>,
    offset: u64,
    size: usize,
    mut have: Vec<u8>,
) -> Result<Buf, Errno> {
    let at = offset + have.len() as u64;
    append_read(&mut have, size, |buf| sys::pread_uninit(fd, buf, at, 0))?;
    Ok(Buf::from_vec(have))
}

/// Lets `read` fill `v`'s spare room up to `len` bytes in all (no zeroing first) and keeps
/// the bytes it reports.
fn append_read(
    v: &mut Vec<u8>,
    len: usize,
    read: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<usize, Errno>,
) -> Result<usize, Errno> {
    let start = v.len();
    let room = len.saturating_sub(start);
    v.reserve_exact(room);
    let n = read(&mut v.spare_capacity_mut()[..room])?;
    assert!(
        n <= room,
        "a read reported more bytes than it was given room for"
    );
    // SAFETY: `read` initialised the first `n` bytes of the spare room.
    unsafe { v.set_len(start + n) };
    Ok(n)
}

fn write_all(fd: BorrowedFd<'_>, data: &[u8], offset: u64, rwf: i32) -> Result<u64, Errno> {
    let mut done = 0;
    while done < data.len() {
        let n = sys::pwrite2(fd, &data[done..], offset + done as u64, rwf)?;
        if n == 0 {
            return if done == 0 {
                Err(Errno::ENOSPC)
            } else {
                Ok(done as u64)
            };
        }
        done += n;
    }
    Ok(done as u64)
}
