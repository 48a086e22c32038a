//! Value types that cross the translator boundary. All are `#[repr(C)]` + `StableAbi`.

use std::fmt;

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec};

use crate::buf::Buf;

/// 128-bit identity of a file or directory, assigned at creation and kept by storage/posix.
#[repr(C)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
)]
pub struct Gfid(pub [u8; 16]);

impl Gfid {
    /// The volume root: `00000000-0000-0000-0000-000000000001`, as in GlusterFS.
    pub const ROOT: Gfid = Gfid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    /// The null GFID ("not known yet").
    pub const NULL: Gfid = Gfid([0; 16]);

    pub fn is_null(&self) -> bool {
        self.0 == [0; 16]
    }

    /// A fresh random (version 4) GFID.
    pub fn random() -> Gfid {
        let mut b = [0u8; 16];
        fill_random(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        Gfid(b)
    }

    /// Parses the canonical 8-4-4-4-12 hex form.
    pub fn parse(s: &str) -> Option<Gfid> {
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 || s.len() != 36 {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
        }
        Some(Gfid(b))
    }
}

fn fill_random(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: getrandom writes at most `len` bytes into the valid, writable slice tail.
        let n = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), buf.len() - done, 0) };
        if n > 0 {
            done += n as usize;
        } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // getrandom(2) cannot fail on Linux >= 3.17 with flags 0 except EINTR; stay total.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            for (i, b) in buf[done..].iter_mut().enumerate() {
                *b = (t >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(131);
            }
            return;
        }
    }
}

impl fmt::Display for Gfid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            b[0],
            b[1],
            b[2],
            b[3],
            b[4],
            b[5],
            b[6],
            b[7],
            b[8],
            b[9],
            b[10],
            b[11],
            b[12],
            b[13],
            b[14],
            b[15]
        )
    }
}

impl fmt::Debug for Gfid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A POSIX error number. Fops fail with exactly one of these.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(pub const $name: Errno = Errno(libc::$name);)*
            /// The symbolic name (`"ENOENT"`), or `None` for an unusual value.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $(libc::$name => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}
errnos!(
    EPERM,
    ENOENT,
    EIO,
    ENXIO,
    E2BIG,
    EBADF,
    EAGAIN,
    ENOMEM,
    EACCES,
    EFAULT,
    EBUSY,
    EEXIST,
    EXDEV,
    ENODEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    ENFILE,
    EMFILE,
    ETXTBSY,
    EFBIG,
    ENOSPC,
    ESPIPE,
    EROFS,
    EMLINK,
    ERANGE,
    ENAMETOOLONG,
    ENOLCK,
    ENOSYS,
    ENOTEMPTY,
    ELOOP,
    ENODATA,
    ENOTSUP,
    ENOTCONN,
    ETIMEDOUT,
    ESTALE,
    EDQUOT,
    EOVERFLOW,
    EDEADLK,
    EINTR,
    ECANCELED,
    EPROTO,
    EBADFD,
    ENOTSOCK,
    EMSGSIZE
);

impl Errno {
    /// The errno of an `std::io::Error`, EIO when it carries none.
    pub fn from_io(e: &std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
    /// The current thread's `errno`.
    pub fn last() -> Errno {
        Errno::from_io(&std::io::Error::last_os_error())
    }
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        Errno::from_io(&e)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} ({})",
            self,
            std::io::Error::from_raw_os_error(self.0)
        )
    }
}

impl std::error::Error for Errno {}

/// The kind of a file system object.
#[repr(u8)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Debug,
    Default,
)]
pub enum FileType {
    #[default]
    Regular,
    Directory,
    Symlink,
    BlockDevice,
    CharDevice,
    Fifo,
    Socket,
}

impl FileType {
    /// From the `S_IFMT` bits of a mode.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => FileType::Regular,
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFBLK => FileType::BlockDevice,
            libc::S_IFCHR => FileType::CharDevice,
            libc::S_IFIFO => FileType::Fifo,
            libc::S_IFSOCK => FileType::Socket,
            _ => return None,
        })
    }
    /// The `S_IFMT` bits of this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => libc::S_IFREG,
            FileType::Directory => libc::S_IFDIR,
            FileType::Symlink => libc::S_IFLNK,
            FileType::BlockDevice => libc::S_IFBLK,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::Fifo => libc::S_IFIFO,
            FileType::Socket => libc::S_IFSOCK,
        }
    }
}

/// Seconds and nanoseconds since the epoch.
#[repr(C)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    Default,
)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

impl Timespec {
    pub fn now() -> Timespec {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        }
    }
}

/// The full attributes of an object (GlusterFS `struct iatt`).
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default,
)]
pub struct Iatt {
    pub gfid: Gfid,
    pub ino: u64,
    pub dev: u64,
    pub kind: FileType,
    /// Permission bits including setuid/setgid/sticky (`mode & 0o7777`).
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub blksize: u32,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
}

impl Iatt {
    /// `st_mode`: file type bits | permission bits.
    pub fn mode(&self) -> u32 {
        self.kind.mode_bits() | (self.perm & 0o7777)
    }
    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }
}

/// An entry fop's target: a name inside a parent directory.
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Eq, Hash, Debug, Default,
)]
pub struct Loc {
    pub parent: Gfid,
    pub name: RString,
}

impl Loc {
    pub fn new(parent: Gfid, name: impl Into<RString>) -> Loc {
        Loc {
            parent,
            name: name.into(),
        }
    }
}

/// Host-allocated id of an open file or directory; unique per graph instance.
#[repr(C)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Debug,
    Default,
    PartialOrd,
    Ord,
)]
pub struct FdId(pub u64);

impl FdId {
    /// An anonymous fd: the fop names the object by GFID only, with no prior `open`
    /// (NFS and self-heal use these). Translators that keep per-fd state open on demand.
    pub const ANONYMOUS: FdId = FdId(0);
}

/// An open file or directory as fops see it.
#[repr(C)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Debug,
    Default,
)]
pub struct Fd {
    pub id: FdId,
    pub gfid: Gfid,
    /// The `open(2)` flags the fd was opened with (`O_ACCMODE`, `O_APPEND`, `O_SYNC`...).
    pub flags: i32,
}

impl Fd {
    pub fn anonymous(gfid: Gfid, flags: i32) -> Fd {
        Fd {
            id: FdId::ANONYMOUS,
            gfid,
            flags,
        }
    }
    pub fn is_anonymous(&self) -> bool {
        self.id == FdId::ANONYMOUS
    }
}

/// Reply of entry fops: the object found or made and, when the answering translator knows
/// them, the parent directory's attributes right after the fop (GlusterFS `postparent`). A
/// host answers the kernel's next stat of that directory with them instead of a round trip
/// (the FUSE kernel drops a directory's attributes after every create or removal in it).
/// Translators that change the parent in a way the leaf did not see set it to `RNone`.
///
/// `xattrs` holds the object's extended attributes that the caller asked for with
/// [`XattrReq`](crate::XattrReq) (empty otherwise), read by the leaf in the same call: a
/// cluster translator learns pending counters, layouts or link targets with the lookup itself.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct Entry {
    pub attr: Iatt,
    pub postparent: ROption<Iatt>,
    pub xattrs: Xattrs,
}

impl Entry {
    /// An entry without parent attributes or xattrs.
    pub fn new(attr: Iatt) -> Entry {
        Entry {
            attr,
            postparent: ROption::RNone,
            xattrs: RVec::new(),
        }
    }
    /// The value of xattr `name` in [`Entry::xattrs`].
    pub fn xattr(&self, name: &str) -> Option<&crate::Buf> {
        find_xattr(&self.xattrs, name)
    }
}

/// The value of `name` in a list of xattrs.
pub fn find_xattr<'a>(xattrs: &'a [Xattr], name: &str) -> Option<&'a crate::Buf> {
    xattrs
        .iter()
        .find(|x| x.name.as_str() == name)
        .map(|x| &x.value)
}

/// Reply of `unlink` and `rmdir`: the parent directory's attributes right after the removal,
/// when the answering translator knows them (see [`Entry::postparent`]).
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default,
)]
pub struct Removed {
    pub postparent: ROption<Iatt>,
}

/// Reply of `readv`: the bytes read (a short read means end of file) and, when the answering
/// translator knows them, the file's attributes after the read (GlusterFS `readv_cbk`'s
/// `stbuf`). A leaf returns them (it can fstat in the same system call batch); a cache that
/// answers from memory returns `RNone`. Hosts use them instead of a separate `fstat` round trip
/// (NFS post-op attributes) and caches use them to notice a changed file.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct ReadReply {
    pub data: crate::Buf,
    pub attr: ROption<Iatt>,
}

impl ReadReply {
    /// Data without attributes (a cache hit).
    pub fn data(data: crate::Buf) -> ReadReply {
        ReadReply {
            data,
            attr: ROption::RNone,
        }
    }
}

/// Reply of `writev`: bytes written and, when the answering translator knows them, the file's
/// attributes after the write (GlusterFS `writev_cbk`'s `postbuf`). `RNone` when the write was
/// acknowledged before it reached the leaf (write-behind).
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default,
)]
pub struct WriteReply {
    pub written: u64,
    pub attr: ROption<Iatt>,
}

impl WriteReply {
    /// A count without attributes.
    pub fn written(written: u64) -> WriteReply {
        WriteReply {
            written,
            attr: ROption::RNone,
        }
    }
}

/// How a time is set by `setattr`.
#[repr(C, u8)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default,
)]
pub enum TimeSet {
    #[default]
    Omit,
    Now,
    At(Timespec),
}

/// What `setattr` changes; `None`/`Omit` fields are left alone.
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default,
)]
pub struct SetAttr {
    pub perm: ROption<u32>,
    pub uid: ROption<u32>,
    pub gid: ROption<u32>,
    /// Truncate or extend to this size.
    pub size: ROption<u64>,
    pub atime: TimeSet,
    pub mtime: TimeSet,
}

/// One directory entry with its attributes.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct DirEntry {
    pub name: RString,
    /// Opaque cookie: pass it as the offset of the next `readdirp` to continue after this entry.
    pub next_offset: u64,
    pub attr: Iatt,
    /// The entry's xattrs asked for with [`XattrReq`](crate::XattrReq) (empty otherwise).
    pub xattrs: Xattrs,
}

/// Reply of `rchecksum`: checksums of the `len` bytes actually read (shorter than asked at
/// end of file). `weak` is Adler-32 (cheap, for a first comparison), `strong` SHA-256.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Rchecksum {
    pub len: u32,
    pub weak: u32,
    pub strong: [u8; 32],
}

/// Which client connection a request came from: protocol/server numbers its connections
/// (unique for the life of the server process; a reconnecting client gets a new number) and
/// sets this on every request it passes down (as the [`CtxExtension`](crate::CtxExtension)
/// `srv/client-id`, which a client cannot set). Absent on requests that did not come through a
/// server (a local graph). features/locks keys its locks by it; storage/posix uses it to tell
/// a file read by several clients from one client's read.
#[repr(transparent)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Hash,
    Default,
    PartialOrd,
    Ord,
)]
pub struct ClientId(pub u64);

/// File system statistics (`statvfs`).
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default,
)]
pub struct Statfs {
    pub bsize: u64,
    pub frsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub favail: u64,
    pub namemax: u64,
}

/// `lseek` whence for hole-aware seeking.
#[repr(u8)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub enum SeekWhat {
    Data,
    Hole,
}

/// Owner of POSIX locks (FUSE's lock_owner, NFS's owner).
#[repr(C)]
#[derive(
    StableAbi,
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Debug,
    Default,
    PartialOrd,
    Ord,
)]
pub struct LkOwner(pub u64);

/// Kind of a byte-range lock.
#[repr(u8)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug,
)]
pub enum LockKind {
    Read,
    Write,
    Unlock,
}

/// `fcntl` lock commands.
#[repr(u8)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug,
)]
pub enum LkCmd {
    /// F_GETLK: report a conflicting lock or `Unlock`.
    Get,
    /// F_SETLK: take or release without waiting (EAGAIN on conflict).
    Set,
    /// F_SETLKW: wait for conflicting locks to go away.
    SetWait,
}

/// A byte-range lock; `len == 0` means "to end of file".
#[repr(C)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug,
)]
pub struct Flock {
    pub kind: LockKind,
    pub start: u64,
    pub len: u64,
    pub pid: u32,
    pub owner: LkOwner,
}

/// Internal entry-lock type (cluster translators serialise namespace changes with these).
#[repr(u8)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug,
)]
pub enum EntrylkCmd {
    Lock,
    LockNonBlocking,
    Unlock,
}

/// `xattrop` operations, applied atomically per key to big-endian counter arrays.
#[repr(u8)]
#[derive(
    StableAbi, serde::Serialize, serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug,
)]
pub enum XattropOp {
    /// Add each 32-bit big-endian lane of the value to the stored lanes.
    AddArray32,
    /// Same with 64-bit lanes.
    AddArray64,
}

/// One extended attribute.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Xattr {
    pub name: RString,
    pub value: Buf,
}

/// Reply of `getxattr`-style fops with several values.
pub type Xattrs = RVec<Xattr>;

impl Default for Flock {
    /// An unlock of the whole file by owner 0.
    fn default() -> Flock {
        Flock {
            kind: LockKind::Unlock,
            start: 0,
            len: 0,
            pid: 0,
            owner: LkOwner(0),
        }
    }
}

/// A brick's word that something a client may cache changed (another client changed it):
/// raised by protocol/client, passed up the graph ([`Translator::upcall`](crate::Translator::upcall)),
/// and acted on by caches and hosts, which drop exactly what it names. Advisory: it may come
/// late or, when a brick's queue overflows or a connection drops, not at all, so caches keep
/// their timeouts; it never carries the new state, only that the old one is stale.
#[repr(C)]
#[derive(StableAbi, serde::Serialize, serde::Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Upcall {
    /// The object that changed; for [`Upcall::ENTRY`], the directory whose name changed.
    pub gfid: Gfid,
    /// What changed: [`Upcall::ATTR`], [`Upcall::DATA`], [`Upcall::XATTR`], [`Upcall::ENTRY`].
    pub what: u32,
    /// With [`Upcall::ENTRY`]: the name in `gfid` that was made, removed or renamed. With
    /// [`Upcall::LOCK_CONTENTION`]: the lock domain.
    pub name: RString,
    /// With [`Upcall::LOCK_CONTENTION`], inside a brick: the [`ClientId`] of the connection
    /// holding the lock (protocol/server sends the upcall to that client alone). 0 otherwise.
    pub client: u64,
}

impl Upcall {
    /// Attributes (mode, owner, size, times, link count).
    pub const ATTR: u32 = 1;
    /// File contents (implies `ATTR`).
    pub const DATA: u32 = 2;
    /// Extended attributes.
    pub const XATTR: u32 = 4;
    /// The name `name` in directory `gfid` now names another object, or none (the directory's
    /// own attributes changed with it).
    pub const ENTRY: u32 = 8;
    /// Another client waits for an inodelk that this client holds on `gfid` in domain
    /// `name`: a lock held longer than needed (cluster/replicate's eager lock) should be
    /// given up now.
    pub const LOCK_CONTENTION: u32 = 16;

    /// `what` of object `gfid` changed.
    pub fn inode(gfid: Gfid, what: u32) -> Upcall {
        Upcall {
            gfid,
            what,
            name: RString::new(),
            client: 0,
        }
    }

    /// Name `name` of directory `parent` changed.
    pub fn entry(parent: Gfid, name: &str) -> Upcall {
        Upcall {
            gfid: parent,
            what: Upcall::ENTRY | Upcall::ATTR,
            name: name.into(),
            client: 0,
        }
    }

    /// Client `holder` (a brick's id for its connection) holds an inodelk of `gfid` in
    /// `domain` that another client waits for.
    pub fn contention(gfid: Gfid, domain: &str, holder: ClientId) -> Upcall {
        Upcall {
            gfid,
            what: Upcall::LOCK_CONTENTION,
            name: domain.into(),
            client: holder.0,
        }
    }

    /// Whether it says `flag` (one of the constants) changed.
    pub fn says(&self, flag: u32) -> bool {
        self.what & flag != 0
    }
}
