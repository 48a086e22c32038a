//! Thin safe wrappers over the Linux syscalls the brick uses. Every `unsafe` block of the crate
//! lives here; callers see `Result<_, Errno>` and owned/borrowed fds.
//!
//! Paths of the form `/proc/self/fd/N[/name]` address an object through an `O_PATH` fd without
//! walking (or needing search permission on) the real path: the kernel jumps straight to the
//! inode, so syscalls made there check only the caller's permission on the object itself.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use xlator_api::Errno;

/// `Ok(n)` for a non-negative return, the thread's errno otherwise.
fn check(r: libc::c_long) -> Result<libc::c_long, Errno> {
    if r < 0 { Err(Errno::last()) } else { Ok(r) }
}

fn check_i(r: libc::c_int) -> Result<(), Errno> {
    check(libc::c_long::from(r)).map(|_| ())
}

/// A C string; interior NUL bytes are an invalid argument.
pub fn cstr(s: &str) -> Result<CString, Errno> {
    CString::new(s).map_err(|_| Errno::EINVAL)
}

/// `/proc/self/fd/N`: the object behind `fd`.
pub fn proc_path(fd: BorrowedFd<'_>) -> CString {
    // Digits only: cannot contain NUL.
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// `/proc/self/fd/N/name`: the entry `name` of the directory behind `dir`.
pub fn proc_child(dir: BorrowedFd<'_>, name: &str) -> Result<CString, Errno> {
    cstr(&format!("/proc/self/fd/{}/{}", dir.as_raw_fd(), name))
}

pub fn openat(
    dir: Option<BorrowedFd<'_>>,
    path: &CStr,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd, Errno> {
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    loop {
        // SAFETY: `path` is NUL-terminated; the kernel returns a new fd we then own.
        let r = unsafe { libc::openat(dirfd, path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
        if r >= 0 {
            // SAFETY: `r` is a freshly opened descriptor owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(r) });
        }
        let e = Errno::last();
        if e != Errno::EINTR {
            return Err(e);
        }
    }
}

/// `fstatat`; an empty `name` with `AT_EMPTY_PATH` stats the fd itself.
pub fn fstatat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> Result<libc::stat, Errno> {
    // SAFETY: all-zero is a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated and `st` is a valid, writable stat buffer.
    check_i(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// Stats the object an fd refers to (works for `O_PATH` fds).
pub fn fstat(fd: BorrowedFd<'_>) -> Result<libc::stat, Errno> {
    fstatat(fd, c"", libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
}

pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> Result<(), Errno> {
    // SAFETY: NUL-terminated name, plain integer arguments.
    check_i(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })
}

pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, rdev: u64) -> Result<(), Errno> {
    // SAFETY: NUL-terminated name, plain integer arguments.
    check_i(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, rdev) })
}

pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> Result<(), Errno> {
    // SAFETY: both strings are NUL-terminated.
    check_i(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })
}

/// Target of a symbolic link (`name` empty: the link `dir` itself refers to).
pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: the buffer is valid for `buf.len()` writable bytes.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = check(n as libc::c_long)? as usize;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(buf);
        }
        buf.resize(buf.len() * 2, 0);
    }
}

pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> Result<(), Errno> {
    // SAFETY: NUL-terminated name.
    check_i(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
}

pub fn renameat2(
    odir: BorrowedFd<'_>,
    oname: &CStr,
    ndir: BorrowedFd<'_>,
    nname: &CStr,
    flags: u32,
) -> Result<(), Errno> {
    // SAFETY: NUL-terminated names, plain integer arguments.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            odir.as_raw_fd(),
            oname.as_ptr(),
            ndir.as_raw_fd(),
            nname.as_ptr(),
            flags,
        )
    };
    check(r).map(|_| ())
}

pub fn linkat(
    odir: Option<BorrowedFd<'_>>,
    oname: &CStr,
    ndir: BorrowedFd<'_>,
    nname: &CStr,
    flags: i32,
) -> Result<(), Errno> {
    let ofd = odir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: NUL-terminated names.
    check_i(unsafe { libc::linkat(ofd, oname.as_ptr(), ndir.as_raw_fd(), nname.as_ptr(), flags) })
}

/// `chown` of the object behind an (`O_PATH`) fd, never following a symlink.
pub fn fchown_obj(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> Result<(), Errno> {
    let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
    // SAFETY: empty NUL-terminated path with AT_EMPTY_PATH operates on `fd`.
    check_i(unsafe {
        libc::fchownat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            u,
            g,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

pub fn chmod(path: &CStr, mode: u32) -> Result<(), Errno> {
    // SAFETY: NUL-terminated path.
    check_i(unsafe { libc::chmod(path.as_ptr(), mode) })
}

pub fn truncate(path: &CStr, size: u64) -> Result<(), Errno> {
    let size = i64::try_from(size).map_err(|_| Errno::EFBIG)?;
    // SAFETY: NUL-terminated path.
    check_i(unsafe { libc::truncate(path.as_ptr(), size) })
}

pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> Result<(), Errno> {
    // SAFETY: plain integer arguments.
    check_i(unsafe { libc::fchmod(fd.as_raw_fd(), mode) })
}

pub fn fchown(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> Result<(), Errno> {
    // SAFETY: plain integer arguments.
    check_i(unsafe {
        libc::fchown(
            fd.as_raw_fd(),
            uid.unwrap_or(u32::MAX),
            gid.unwrap_or(u32::MAX),
        )
    })
}

pub fn ftruncate(fd: BorrowedFd<'_>, size: u64) -> Result<(), Errno> {
    let size = i64::try_from(size).map_err(|_| Errno::EFBIG)?;
    // SAFETY: plain integer arguments.
    check_i(unsafe { libc::ftruncate(fd.as_raw_fd(), size) })
}

/// `utimensat` on a path (following the final magic link of `/proc/self/fd/N`).
pub fn utimens_path(path: &CStr, times: &[libc::timespec; 2]) -> Result<(), Errno> {
    // SAFETY: NUL-terminated path and a two-element timespec array.
    check_i(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) })
}

pub fn futimens(fd: BorrowedFd<'_>, times: &[libc::timespec; 2]) -> Result<(), Errno> {
    // SAFETY: a two-element timespec array.
    check_i(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })
}

/// `faccessat(..., AT_EACCESS)`: checks with the thread's fs credentials.
pub fn eaccess(path: &CStr, mask: i32) -> Result<(), Errno> {
    // SAFETY: NUL-terminated path.
    check_i(unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), mask, libc::AT_EACCESS) })
}

/// A pipe (read end, write end) with room for `len` bytes of a file starting at `offset`:
/// a file splices into a pipe one page per slot, so an unaligned range needs a slot more
/// than its length suggests (`F_SETPIPE_SZ`; beyond `/proc/sys/fs/pipe-max-size` this needs
/// CAP_SYS_RESOURCE, else EPERM).
pub fn pipe_for(offset: u64, len: usize) -> Result<(OwnedFd, OwnedFd), Errno> {
    const PAGE: usize = 4096;
    let pages = ((offset % PAGE as u64) as usize + len)
        .div_ceil(PAGE)
        .max(1);
    xlator_api::pipe_with_room(pages * PAGE)
        .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EINVAL)))
}

/// Moves up to `len` bytes of `file` at `offset` into `pipe` (`splice`: the pipe references
/// the page cache pages, no copy). Short at the end of the file; EAGAIN when the pipe is
/// full (it never waits for room).
pub fn splice_to_pipe(
    file: BorrowedFd<'_>,
    offset: u64,
    pipe: BorrowedFd<'_>,
    len: usize,
) -> Result<usize, Errno> {
    let mut off = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
    loop {
        // SAFETY: valid fds; `off` is a live i64 the kernel advances.
        let r = unsafe {
            libc::splice(
                file.as_raw_fd(),
                &mut off,
                pipe.as_raw_fd(),
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_NONBLOCK,
            )
        };
        match check(r as libc::c_long) {
            Ok(n) => return Ok(n as usize),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `preadv2` with `RWF_*` flags into uninitialised memory (a read buffer need not be zeroed
/// first: the kernel writes every byte it reports). Returns the bytes read, now initialised.
/// With `RWF_NOWAIT` it reads only what the page cache holds and fails with EAGAIN (or
/// ENOTSUP where unsupported) when that is nothing.
pub fn pread_uninit(
    fd: BorrowedFd<'_>,
    buf: &mut [std::mem::MaybeUninit<u8>],
    offset: u64,
    rwf: i32,
) -> Result<usize, Errno> {
    let off = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    loop {
        // SAFETY: one iovec describing `buf`, valid for writes; the kernel only writes.
        let r = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, off, rwf) };
        match check(r as libc::c_long) {
            Ok(n) => return Ok(n as usize),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `cachestat(2)` (Linux 6.5): its number is 451 on every architecture (the table is shared
/// from 425 on), and libc does not name it for all of them.
const SYS_CACHESTAT: libc::c_long = 451;

/// How many pages of `len` bytes at `offset` of `fd` are in the page cache, without touching
/// them or starting any I/O. ENOSYS before Linux 6.5 (or where a sandbox refuses it).
pub fn cached_pages(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<u64, Errno> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    let range = Range { off: offset, len };
    let mut st = Stat::default();
    // SAFETY: both structs have the kernel's layout and outlive the call; flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &raw const range,
            &raw mut st,
            0 as libc::c_uint,
        )
    };
    check(r).map(|_| st.nr_cache)
}

/// `pwritev2` of one buffer with `RWF_*` flags (`offset` -1: the current position).
pub fn pwrite2(fd: BorrowedFd<'_>, buf: &[u8], offset: u64, rwf: i32) -> Result<usize, Errno> {
    let off = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    loop {
        // SAFETY: one iovec describing `buf`, which the kernel only reads.
        let r = unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, off, rwf) };
        match check(r as libc::c_long) {
            Ok(n) => return Ok(n as usize),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

pub fn fsync(fd: BorrowedFd<'_>, datasync: bool) -> Result<(), Errno> {
    // SAFETY: plain integer argument.
    check_i(unsafe {
        if datasync {
            libc::fdatasync(fd.as_raw_fd())
        } else {
            libc::fsync(fd.as_raw_fd())
        }
    })
}

pub fn fallocate(fd: BorrowedFd<'_>, mode: i32, offset: u64, len: u64) -> Result<(), Errno> {
    let off = i64::try_from(offset).map_err(|_| Errno::EFBIG)?;
    let len = i64::try_from(len).map_err(|_| Errno::EFBIG)?;
    // SAFETY: plain integer arguments.
    check_i(unsafe { libc::fallocate(fd.as_raw_fd(), mode, off, len) })
}

pub fn lseek(fd: BorrowedFd<'_>, offset: u64, whence: i32) -> Result<u64, Errno> {
    let off = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
    // SAFETY: plain integer arguments.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), off, whence) };
    check(r as libc::c_long).map(|n| n as u64)
}

pub fn fstatvfs(fd: BorrowedFd<'_>) -> Result<libc::statvfs, Errno> {
    // SAFETY: all-zero is a valid `statvfs`.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable statvfs buffer.
    check_i(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// One raw directory entry from `getdents64`.
pub struct RawDirent {
    /// Cookie to `lseek` to for continuing after this entry.
    pub off: u64,
    pub name: Vec<u8>,
}

/// Reads the next batch of entries of a directory fd (empty: end of directory).
pub fn getdents(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<Vec<RawDirent>, Errno> {
    // SAFETY: `buf` is valid for `buf.len()` writable bytes.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    let n = check(n)? as usize;
    let mut out = Vec::new();
    let mut pos = 0;
    // linux_dirent64: u64 d_ino, i64 d_off, u16 d_reclen, u8 d_type, char d_name[].
    while pos + 19 <= n {
        let rd = |a: usize, b: usize| buf.get(pos + a..pos + b).ok_or(Errno::EIO);
        let off = u64::from_ne_bytes(rd(8, 16)?.try_into().map_err(|_| Errno::EIO)?);
        let reclen = usize::from(u16::from_ne_bytes(
            rd(16, 18)?.try_into().map_err(|_| Errno::EIO)?,
        ));
        if reclen == 0 || pos + reclen > n {
            return Err(Errno::EIO);
        }
        let raw = rd(19, reclen)?;
        let len = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        out.push(RawDirent {
            off,
            name: raw[..len].to_vec(),
        });
        pos += reclen;
    }
    Ok(out)
}

/// Where an xattr syscall goes.
#[derive(Clone, Copy)]
pub enum XTarget<'a> {
    /// A path whose final component is followed (`/proc/self/fd/N` of an `O_PATH` fd).
    Follow(&'a CStr),
    /// A path whose final component is not followed (`/proc/self/fd/P/name`).
    NoFollow(&'a CStr),
    /// An open (non-`O_PATH`) fd.
    Fd(RawFd),
}

pub fn getxattr(t: XTarget<'_>, name: &CStr) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; 64];
    loop {
        let (p, l) = (buf.as_mut_ptr().cast::<libc::c_void>(), buf.len());
        // SAFETY: NUL-terminated strings and a buffer valid for `l` writable bytes.
        let r = unsafe {
            match t {
                XTarget::Follow(path) => libc::getxattr(path.as_ptr(), name.as_ptr(), p, l),
                XTarget::NoFollow(path) => libc::lgetxattr(path.as_ptr(), name.as_ptr(), p, l),
                XTarget::Fd(fd) => libc::fgetxattr(fd, name.as_ptr(), p, l),
            }
        };
        match check(r as libc::c_long) {
            Ok(n) => {
                buf.truncate(n as usize);
                return Ok(buf);
            }
            Err(Errno::ERANGE) if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            Err(e) => return Err(e),
        }
    }
}

pub fn setxattr(t: XTarget<'_>, name: &CStr, value: &[u8], flags: i32) -> Result<(), Errno> {
    let (p, l) = (value.as_ptr().cast::<libc::c_void>(), value.len());
    // SAFETY: NUL-terminated strings and a buffer valid for `l` readable bytes.
    check_i(unsafe {
        match t {
            XTarget::Follow(path) => libc::setxattr(path.as_ptr(), name.as_ptr(), p, l, flags),
            XTarget::NoFollow(path) => libc::lsetxattr(path.as_ptr(), name.as_ptr(), p, l, flags),
            XTarget::Fd(fd) => libc::fsetxattr(fd, name.as_ptr(), p, l, flags),
        }
    })
}

pub fn listxattr(t: XTarget<'_>) -> Result<Vec<String>, Errno> {
    let mut buf = vec![0u8; 256];
    let n = loop {
        let (p, l) = (buf.as_mut_ptr().cast::<libc::c_char>(), buf.len());
        // SAFETY: NUL-terminated path and a buffer valid for `l` writable bytes.
        let r = unsafe {
            match t {
                XTarget::Follow(path) => libc::listxattr(path.as_ptr(), p, l),
                XTarget::NoFollow(path) => libc::llistxattr(path.as_ptr(), p, l),
                XTarget::Fd(fd) => libc::flistxattr(fd, p, l),
            }
        };
        match check(r as libc::c_long) {
            Ok(n) => break n as usize,
            Err(Errno::ERANGE) if buf.len() < 1 << 22 => buf.resize(buf.len() * 4, 0),
            Err(e) => return Err(e),
        }
    };
    Ok(buf[..n]
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .filter_map(|s| std::str::from_utf8(s).ok().map(str::to_owned))
        .collect())
}

pub fn removexattr(t: XTarget<'_>, name: &CStr) -> Result<(), Errno> {
    // SAFETY: NUL-terminated strings.
    check_i(unsafe {
        match t {
            XTarget::Follow(path) => libc::removexattr(path.as_ptr(), name.as_ptr()),
            XTarget::NoFollow(path) => libc::lremovexattr(path.as_ptr(), name.as_ptr()),
            XTarget::Fd(fd) => libc::fremovexattr(fd, name.as_ptr()),
        }
    })
}

pub fn geteuid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

/// Sets this thread's fs uid (not process-wide: a raw syscall, no glibc broadcast). Returns
/// the previous fs uid. The kernel reports no error: an id it refuses ((uid_t)-1, one not
/// mapped in the user namespace, or any change without CAP_SETUID) leaves the fs uid as it
/// was, which [`fsuid`] then shows.
pub fn set_fsuid(uid: u32) -> u32 {
    // SAFETY: plain integer argument; setfsuid returns the previous fs uid, never an error.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) as u32 }
}

/// Sets this thread's fs gid (raw syscall, this thread only); returns the previous one. As
/// [`set_fsuid`], a refused id leaves it unchanged.
pub fn set_fsgid(gid: u32) -> u32 {
    // SAFETY: plain integer argument; setfsgid returns the previous fs gid.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) as u32 }
}

/// This thread's fs uid: `setfsuid(-1)`, which the kernel always refuses (-1 is no id), so
/// it changes nothing and returns the current one.
pub fn fsuid() -> u32 {
    set_fsuid(u32::MAX)
}

/// This thread's fs gid (`setfsgid(-1)`, see [`fsuid`]).
pub fn fsgid() -> u32 {
    set_fsgid(u32::MAX)
}

/// Sets this thread's supplementary groups. glibc's `setgroups` changes every thread of the
/// process; the raw syscall changes only the calling thread, which is what we need.
pub fn set_thread_groups(groups: &[u32]) -> Result<(), Errno> {
    // SAFETY: a pointer to `groups.len()` readable gid_t values.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    check(r).map(|_| ())
}

/// This thread's supplementary groups.
pub fn get_groups() -> Vec<u32> {
    let mut v = vec![0u32; 256];
    // SAFETY: a buffer of `v.len()` writable gid_t values.
    let n = unsafe { libc::getgroups(v.len() as i32, v.as_mut_ptr()) };
    v.truncate(usize::try_from(n).unwrap_or(0));
    v
}

/// Gives this thread its own fs_struct (cwd, root, umask), so `umask` affects it alone.
pub fn unshare_fs() -> Result<(), Errno> {
    // SAFETY: plain integer argument.
    check_i(unsafe { libc::unshare(libc::CLONE_FS) })
}

/// Sets the umask of this thread's fs_struct; returns the previous one.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: plain integer argument, cannot fail.
    unsafe { libc::umask(mask) }
}
