//! How a write is handled, from its fd's open flags and its own per-write flags.
//!
//! The values are Linux's (this crate depends on nothing but `xlator-api`); a unit test checks
//! them against `libc` on the build target.

/// `O_ACCMODE`.
pub const O_ACCMODE: i32 = 0o3;
/// `O_RDONLY`.
pub const O_RDONLY: i32 = 0;
/// `O_TRUNC`.
pub const O_TRUNC: i32 = 0o1000;
/// `O_APPEND`.
pub const O_APPEND: i32 = 0o2000;
/// `O_DSYNC` (also set within `O_SYNC`).
pub const O_DSYNC: i32 = 0o10000;
/// `O_DIRECT` (architecture dependent).
#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
pub const O_DIRECT: i32 = 0o200000;
/// `O_DIRECT` (architecture dependent).
#[cfg(any(target_arch = "powerpc", target_arch = "powerpc64"))]
pub const O_DIRECT: i32 = 0o400000;
/// `O_DIRECT` (architecture dependent).
#[cfg(not(any(
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "powerpc",
    target_arch = "powerpc64"
)))]
pub const O_DIRECT: i32 = 0o40000;

/// What write-behind does with one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Acknowledged at once and sent in the background.
    Cached,
    /// Sent by the caller, who gets the child's answer, after the file's earlier writes.
    Through,
    /// Passed straight down: the child refuses it (fd not open for writing) or it is empty.
    Direct,
}

/// The mode of a write of `len` bytes at `offset` through an fd opened with `fd_flags`,
/// carrying per-write `flags`.
pub fn write_mode(
    fd_flags: i32,
    flags: i32,
    offset: u64,
    len: usize,
    strict_o_direct: bool,
) -> WriteMode {
    let all = fd_flags | flags;
    if fd_flags & O_ACCMODE == O_RDONLY || len == 0 {
        WriteMode::Direct
    } else if all & O_DSYNC != 0
        || (strict_o_direct && all & O_DIRECT != 0)
        || offset.checked_add(len as u64).is_none()
    {
        WriteMode::Through
    } else {
        WriteMode::Cached
    }
}

/// Whether the write lands at the end of file, wherever `offset` says.
pub fn is_append(fd_flags: i32, flags: i32) -> bool {
    (fd_flags | flags) & O_APPEND != 0
}

/// Whether opening with `flags` truncates the file.
pub fn truncates(flags: i32) -> bool {
    flags & O_TRUNC != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_libc() {
        assert_eq!(O_ACCMODE, libc::O_ACCMODE);
        assert_eq!(O_RDONLY, libc::O_RDONLY);
        assert_eq!(O_TRUNC, libc::O_TRUNC);
        assert_eq!(O_APPEND, libc::O_APPEND);
        assert_eq!(O_DSYNC, libc::O_DSYNC);
        assert_eq!(libc::O_SYNC & O_DSYNC, O_DSYNC, "O_SYNC includes O_DSYNC");
        assert_eq!(O_DIRECT, libc::O_DIRECT);
    }

    #[test]
    fn modes() {
        let rw = libc::O_RDWR;
        assert_eq!(write_mode(rw, 0, 0, 10, false), WriteMode::Cached);
        assert_eq!(
            write_mode(rw | libc::O_SYNC, 0, 0, 10, false),
            WriteMode::Through
        );
        assert_eq!(
            write_mode(rw, libc::O_DSYNC, 0, 10, false),
            WriteMode::Through
        );
        assert_eq!(
            write_mode(rw | libc::O_DIRECT, 0, 0, 10, false),
            WriteMode::Cached
        );
        assert_eq!(
            write_mode(rw | libc::O_DIRECT, 0, 0, 10, true),
            WriteMode::Through
        );
        assert_eq!(
            write_mode(libc::O_RDONLY, 0, 0, 10, false),
            WriteMode::Direct
        );
        assert_eq!(write_mode(rw, 0, 0, 0, false), WriteMode::Direct);
        assert_eq!(write_mode(rw, 0, u64::MAX, 10, false), WriteMode::Through);
        assert!(is_append(libc::O_WRONLY | libc::O_APPEND, 0));
        assert!(is_append(rw, libc::O_APPEND));
        assert!(truncates(rw | libc::O_TRUNC) && !truncates(rw));
    }
}
