//! THE fop table. Every file operation is declared exactly once, here; the translator trait
//! with its pass-through defaults, the FFI vtable and its shims, the child-call methods on
//! [`Subvol`](crate::Subvol), the [`Fop`] enum, the testkit mocks and the wire messages are
//! all generated from it by passing a macro name to [`for_each_fop!`](crate::for_each_fop).
//! Adding a fop is one edit to this table.

/// Calls `$callback! { ... }` with the whole fop table. Each entry reads
/// `snake_name CamelName {ATTR|ATTR} (arg: Type, ...) -> Reply;` with doc comments in front.
/// The attributes say what the fop means ([`FopAttrs`]: data, metadata or namespace changes, fd
/// lifetimes...); every classification in the tree derives from them, so a new fop that
/// changes data is treated as such everywhere by writing `WRITES_DATA` here.
#[macro_export]
macro_rules! for_each_fop {
    ($callback:ident) => {
        $callback! {
            /// Finds `loc.name` in directory `loc.parent`.
            lookup Lookup {READS_META} (loc: $crate::Loc) -> $crate::Entry;
            /// Attributes of an object by GFID.
            stat Stat {READS_META} (gfid: $crate::Gfid) -> $crate::Iatt;
            /// Attributes through an open fd.
            fstat Fstat {READS_META|USES_FD} (fd: $crate::Fd) -> $crate::Iatt;
            /// Changes mode/owner/size/times; returns the new attributes.
            setattr Setattr {WRITES_META|TRUNCATES} (gfid: $crate::Gfid, attr: $crate::SetAttr) -> $crate::Iatt;
            /// `setattr` through an open fd (ftruncate, fchmod...).
            fsetattr Fsetattr {WRITES_META|TRUNCATES|USES_FD} (fd: $crate::Fd, attr: $crate::SetAttr) -> $crate::Iatt;
            /// Permission check with `R_OK|W_OK|X_OK` bits.
            access Access {READS_META} (gfid: $crate::Gfid, mask: u32) -> ();
            /// Target of a symbolic link.
            readlink Readlink {READS_META} (gfid: $crate::Gfid) -> $crate::abi_stable::std_types::RString;
            /// Makes a device, FIFO or socket (`mode` includes the type bits).
            mknod Mknod {WRITES_NAMESPACE} (loc: $crate::Loc, mode: u32, rdev: u64, umask: u32) -> $crate::Entry;
            /// Makes a directory.
            mkdir Mkdir {WRITES_NAMESPACE} (loc: $crate::Loc, mode: u32, umask: u32) -> $crate::Entry;
            /// Removes a non-directory name.
            unlink Unlink {WRITES_NAMESPACE} (loc: $crate::Loc) -> $crate::Removed;
            /// Removes an empty directory.
            rmdir Rmdir {WRITES_NAMESPACE} (loc: $crate::Loc) -> $crate::Removed;
            /// Makes a symbolic link to `target`.
            symlink Symlink {WRITES_NAMESPACE} (loc: $crate::Loc, target: $crate::abi_stable::std_types::RString) -> $crate::Entry;
            /// Renames `old` to `new` (replacing it per POSIX); `flags` are renameat2 flags.
            rename Rename {WRITES_NAMESPACE} (old: $crate::Loc, new: $crate::Loc, flags: u32) -> ();
            /// Makes a hard link `new` to the object `gfid`.
            link Link {WRITES_NAMESPACE} (gfid: $crate::Gfid, new: $crate::Loc) -> $crate::Entry;
            /// Creates and opens a regular file; `fd.gfid` is ignored (not known yet).
            create Create {WRITES_NAMESPACE|OPENS|USES_FD|TRUNCATES} (loc: $crate::Loc, fd: $crate::Fd, mode: u32, umask: u32) -> $crate::Entry;
            /// Opens a file (`fd.flags` are the open(2) flags); the reply may carry a backing
            /// file for a caller that asked for one (see [`BackingWanted`](crate::BackingWanted)).
            open Open {OPENS|USES_FD|TRUNCATES} (fd: $crate::Fd) -> $crate::Opened;
            /// Opens a directory for `readdirp`.
            opendir Opendir {OPENS|USES_FD} (fd: $crate::Fd) -> ();
            /// Reads up to `size` bytes at `offset`; a short read means end of file. The reply
            /// carries the post-read attributes when the answering translator has them.
            readv Readv {READS_DATA|USES_FD} (fd: $crate::Fd, offset: u64, size: u32) -> $crate::ReadReply;
            /// Writes `data` at `offset` (`flags`: per-write O_SYNC/O_DSYNC/O_APPEND); returns
            /// bytes written and the post-write attributes when known.
            writev Writev {WRITES_DATA|USES_FD} (fd: $crate::Fd, offset: u64, data: $crate::Buf, flags: i32) -> $crate::WriteReply;
            /// Called on every close(2) of a descriptor (release locks of the caller's owner).
            flush Flush {DURABILITY|USES_FD} (fd: $crate::Fd) -> ();
            /// Makes data (and metadata unless `datasync`) durable.
            fsync Fsync {DURABILITY|USES_FD} (fd: $crate::Fd, datasync: bool) -> ();
            /// fsync of a directory.
            fsyncdir Fsyncdir {DURABILITY|USES_FD} (fd: $crate::Fd, datasync: bool) -> ();
            /// Last close of a file fd: drop per-fd state.
            release Release {CLOSES|USES_FD} (fd: $crate::Fd) -> ();
            /// Last close of a directory fd.
            releasedir Releasedir {CLOSES|USES_FD} (fd: $crate::Fd) -> ();
            /// Directory entries with attributes, starting after cookie `offset` (0: start),
            /// at most about `size` bytes' worth.
            readdirp Readdirp {READS_META|USES_FD} (fd: $crate::Fd, offset: u64, size: u32) -> $crate::abi_stable::std_types::RVec<$crate::DirEntry>;
            /// File system statistics of the volume holding `gfid`.
            statfs Statfs {READS_META} (gfid: $crate::Gfid) -> $crate::Statfs;
            /// Sets extended attributes (`flags`: XATTR_CREATE/XATTR_REPLACE).
            setxattr Setxattr {WRITES_META} (gfid: $crate::Gfid, xattr: $crate::Xattr, flags: i32) -> ();
            /// One extended attribute's value.
            getxattr Getxattr {READS_META} (gfid: $crate::Gfid, name: $crate::abi_stable::std_types::RString) -> $crate::Buf;
            /// Names of all extended attributes.
            listxattr Listxattr {READS_META} (gfid: $crate::Gfid) -> $crate::abi_stable::std_types::RVec<$crate::abi_stable::std_types::RString>;
            /// Removes one extended attribute.
            removexattr Removexattr {WRITES_META} (gfid: $crate::Gfid, name: $crate::abi_stable::std_types::RString) -> ();
            /// `setxattr` through an fd.
            fsetxattr Fsetxattr {WRITES_META|USES_FD} (fd: $crate::Fd, xattr: $crate::Xattr, flags: i32) -> ();
            /// `getxattr` through an fd.
            fgetxattr Fgetxattr {READS_META|USES_FD} (fd: $crate::Fd, name: $crate::abi_stable::std_types::RString) -> $crate::Buf;
            /// `removexattr` through an fd.
            fremovexattr Fremovexattr {WRITES_META|USES_FD} (fd: $crate::Fd, name: $crate::abi_stable::std_types::RString) -> ();
            /// Preallocates (`mode`: FALLOC_FL_* bits, including KEEP_SIZE).
            fallocate Fallocate {WRITES_DATA|USES_FD} (fd: $crate::Fd, mode: i32, offset: u64, len: u64) -> ();
            /// Punches a hole (deallocates, keeps size).
            discard Discard {WRITES_DATA|USES_FD} (fd: $crate::Fd, offset: u64, len: u64) -> ();
            /// Writes zeroes efficiently.
            zerofill Zerofill {WRITES_DATA|USES_FD} (fd: $crate::Fd, offset: u64, len: u64) -> ();
            /// SEEK_DATA / SEEK_HOLE from `offset`.
            seek Seek {READS_DATA|USES_FD} (fd: $crate::Fd, offset: u64, what: $crate::SeekWhat) -> u64;
            /// POSIX byte-range lock (fcntl F_GETLK/F_SETLK/F_SETLKW).
            lk Lk {LOCKS|USES_FD} (fd: $crate::Fd, cmd: $crate::LkCmd, lock: $crate::Flock) -> $crate::Flock;
            /// Internal inode lock in `domain`, for cluster translators.
            inodelk Inodelk {LOCKS} (domain: $crate::abi_stable::std_types::RString, gfid: $crate::Gfid, cmd: $crate::LkCmd, lock: $crate::Flock) -> ();
            /// Internal entry lock on `loc` (empty name: the whole directory) in `domain`.
            entrylk Entrylk {LOCKS} (domain: $crate::abi_stable::std_types::RString, loc: $crate::Loc, cmd: $crate::EntrylkCmd) -> ();
            /// Atomically applies `op` to each named xattr; returns the new values.
            xattrop Xattrop {WRITES_META} (gfid: $crate::Gfid, op: $crate::XattropOp, xattrs: $crate::Xattrs) -> $crate::Xattrs;
            /// `xattrop` through an fd.
            fxattrop Fxattrop {WRITES_META|USES_FD} (fd: $crate::Fd, op: $crate::XattropOp, xattrs: $crate::Xattrs) -> $crate::Xattrs;
            /// Weak (Adler-32) and strong (SHA-256) checksums of `len` bytes at `offset`, for
            /// diff self-heal: replicas compare chunks without moving their data.
            rchecksum Rchecksum {READS_DATA|USES_FD} (fd: $crate::Fd, offset: u64, len: u32) -> $crate::Rchecksum;
            /// Several extended attributes at once; names the object lacks are left out of
            /// the reply (never ENODATA).
            getxattrs Getxattrs {READS_META} (gfid: $crate::Gfid, names: $crate::abi_stable::std_types::RVec<$crate::abi_stable::std_types::RString>) -> $crate::Xattrs;
            /// Sets several extended attributes at once, all or none (`flags` as `setxattr`).
            setxattrs Setxattrs {WRITES_META} (gfid: $crate::Gfid, xattrs: $crate::Xattrs, flags: i32) -> ();
            /// The client connection `client` is gone: drop everything held on its behalf
            /// (locks, waiting lock requests). Sent down by protocol/server; never accepted
            /// from the wire. A translator with several children sends it to each.
            forget_client ForgetClient {HOST_ONLY} (client: $crate::ClientId) -> ();
        }
    };
}

macro_rules! gen_fop_enum {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attr:ident)|*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// Names every fop; used by tracing, io-stats, the mocks and the wire.
        #[repr(u8)]
        #[derive(::abi_stable::StableAbi, ::serde::Serialize, ::serde::Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
        pub enum Fop {
            $( $(#[doc = $doc])* $Variant, )*
        }

        impl Fop {
            /// Every fop, in table order.
            pub const ALL: &'static [Fop] = &[$(Fop::$Variant),*];
            /// Number of fops.
            pub const COUNT: usize = Self::ALL.len();

            /// The GlusterFS-style name (`"writev"`).
            pub fn name(self) -> &'static str {
                match self { $(Fop::$Variant => stringify!($name),)* }
            }

            /// The fop with this name.
            pub fn from_name(name: &str) -> Option<Fop> {
                match name { $(stringify!($name) => Some(Fop::$Variant),)* _ => None }
            }

            /// What the fop means, from the table.
            pub const fn attrs(self) -> FopAttrs {
                match self { $(Fop::$Variant => FopAttrs(0 $(| FopAttrs::$attr.0)*),)* }
            }

            /// Position in [`Fop::ALL`], for per-fop counter arrays.
            pub fn index(self) -> usize {
                self as usize
            }
        }

        impl ::std::fmt::Display for Fop {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
crate::for_each_fop!(gen_fop_enum);

/// What a fop means, declared with it in the table ([`Fop::attrs`]). Translators and hosts
/// classify fops with these (write-behind's ordering, caches' invalidation, replicate's
/// transactions, the wire's fd tables) instead of lists of their own.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FopAttrs(pub u16);

impl FopAttrs {
    /// Changes file data (`writev`, `fallocate`, `discard`, `zerofill`).
    pub const WRITES_DATA: FopAttrs = FopAttrs(1 << 0);
    /// May change file data by changing its size (`setattr` with a size, `open` or `create` of an
    /// existing file with O_TRUNC).
    pub const TRUNCATES: FopAttrs = FopAttrs(1 << 1);
    /// Changes an object's metadata (mode, owner, times, xattrs).
    pub const WRITES_META: FopAttrs = FopAttrs(1 << 2);
    /// Adds, removes or renames names.
    pub const WRITES_NAMESPACE: FopAttrs = FopAttrs(1 << 3);
    /// Reads file data (or facts about it: `seek`, `rchecksum`).
    pub const READS_DATA: FopAttrs = FopAttrs(1 << 4);
    /// Reads attributes, names, xattrs or link targets.
    pub const READS_META: FopAttrs = FopAttrs(1 << 5);
    /// Makes the fd in its arguments valid.
    pub const OPENS: FopAttrs = FopAttrs(1 << 6);
    /// Ends the fd in its arguments.
    pub const CLOSES: FopAttrs = FopAttrs(1 << 7);
    /// Has an `Fd` argument.
    pub const USES_FD: FopAttrs = FopAttrs(1 << 8);
    /// Flushes or syncs (`flush`, `fsync`, `fsyncdir`).
    pub const DURABILITY: FopAttrs = FopAttrs(1 << 9);
    /// Takes or releases locks.
    pub const LOCKS: FopAttrs = FopAttrs(1 << 10);
    /// Sent only by a host inside its process, never accepted from a network peer.
    pub const HOST_ONLY: FopAttrs = FopAttrs(1 << 11);

    /// Whether every attribute of `other` is set.
    pub const fn contains(self, other: FopAttrs) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether any attribute of `other` is set.
    pub const fn intersects(self, other: FopAttrs) -> bool {
        self.0 & other.0 != 0
    }
    /// Changes anything durable: data, size, metadata or names.
    pub const fn modifies(self) -> bool {
        self.intersects(FopAttrs(
            Self::WRITES_DATA.0
                | Self::TRUNCATES.0
                | Self::WRITES_META.0
                | Self::WRITES_NAMESPACE.0,
        ))
    }
}

impl std::ops::BitOr for FopAttrs {
    type Output = FopAttrs;
    fn bitor(self, o: FopAttrs) -> FopAttrs {
        FopAttrs(self.0 | o.0)
    }
}

impl Fop {
    /// Changes file data (`WRITES_DATA`).
    pub const fn writes_data(self) -> bool {
        self.attrs().contains(FopAttrs::WRITES_DATA)
    }
    /// Changes data or size: what a data cache must drop (`WRITES_DATA` or `TRUNCATES`).
    pub const fn may_change_data(self) -> bool {
        self.attrs()
            .intersects(FopAttrs(FopAttrs::WRITES_DATA.0 | FopAttrs::TRUNCATES.0))
    }
    /// Changes metadata (`WRITES_META`).
    pub const fn writes_meta(self) -> bool {
        self.attrs().contains(FopAttrs::WRITES_META)
    }
    /// Changes the namespace (`WRITES_NAMESPACE`).
    pub const fn writes_namespace(self) -> bool {
        self.attrs().contains(FopAttrs::WRITES_NAMESPACE)
    }
    /// Changes anything durable.
    pub const fn modifies(self) -> bool {
        self.attrs().modifies()
    }
    /// Makes an fd valid (`OPENS`).
    pub const fn opens_fd(self) -> bool {
        self.attrs().contains(FopAttrs::OPENS)
    }
    /// Ends an fd (`CLOSES`).
    pub const fn closes_fd(self) -> bool {
        self.attrs().contains(FopAttrs::CLOSES)
    }
    /// Has an `Fd` argument (`USES_FD`).
    pub const fn uses_fd(self) -> bool {
        self.attrs().contains(FopAttrs::USES_FD)
    }
    /// Never accepted from a network peer (`HOST_ONLY`).
    pub const fn host_only(self) -> bool {
        self.attrs().contains(FopAttrs::HOST_ONLY)
    }
}

#[cfg(test)]
mod tests {
    use super::{Fop, FopAttrs};

    #[test]
    fn attributes_are_consistent() {
        for f in Fop::ALL {
            let a = f.attrs();
            // Every fop says what it does.
            assert!(a != FopAttrs::default(), "{f} has no attributes");
            if a.intersects(FopAttrs::OPENS | FopAttrs::CLOSES) {
                assert!(f.uses_fd(), "{f} opens or closes an fd but has none");
            }
        }
        assert!(Fop::Writev.writes_data() && Fop::Fallocate.writes_data());
        assert!(Fop::Setattr.may_change_data() && !Fop::Setattr.writes_data());
        assert!(Fop::Rename.writes_namespace() && Fop::Create.opens_fd());
        assert!(!Fop::Readv.modifies() && !Fop::Lookup.modifies() && Fop::Xattrop.modifies());
        assert!(Fop::ForgetClient.host_only() && !Fop::Lookup.host_only());
    }

    #[test]
    fn names_round_trip_and_cover_design_list() {
        for f in Fop::ALL {
            assert_eq!(Fop::from_name(f.name()), Some(*f));
            assert_eq!(Fop::ALL[f.index()], *f);
        }
        for must in [
            "lookup",
            "stat",
            "fstat",
            "setattr",
            "fsetattr",
            "access",
            "readlink",
            "mknod",
            "mkdir",
            "unlink",
            "rmdir",
            "symlink",
            "rename",
            "link",
            "create",
            "open",
            "opendir",
            "readv",
            "writev",
            "flush",
            "fsync",
            "fsyncdir",
            "release",
            "releasedir",
            "readdirp",
            "statfs",
            "setxattr",
            "getxattr",
            "listxattr",
            "removexattr",
            "fsetxattr",
            "fgetxattr",
            "fremovexattr",
            "fallocate",
            "discard",
            "zerofill",
            "seek",
            "lk",
            "inodelk",
            "entrylk",
            "xattrop",
            "fxattrop",
            "rchecksum",
            "getxattrs",
            "setxattrs",
            "forget_client",
        ] {
            assert!(
                Fop::from_name(must).is_some(),
                "{must} missing from the fop table"
            );
        }
    }
}
