//! THE fop table. Every file operation is declared exactly once, here; the translator trait
//! with its pass-through defaults, the FFI vtable and its shims, the child-call methods on
//! [`Subvol`](crate::Subvol), the [`Fop`] enum, the testkit mocks and the wire messages are
//! all generated from it by passing a macro name to [`for_each_fop!`](crate::for_each_fop).
//! Adding a fop is one edit to this table.

/// Calls `$callback! { ... }` with the whole fop table. Each entry reads
/// `snake_name CamelName (arg: Type, ...) -> Reply;` with doc comments in front.
#[macro_export]
macro_rules! for_each_fop {
    ($callback:ident) => {
        $callback! {
            /// Finds `loc.name` in directory `loc.parent`.
            lookup Lookup (loc: $crate::Loc) -> $crate::Entry;
            /// Attributes of an object by GFID.
            stat Stat (gfid: $crate::Gfid) -> $crate::Iatt;
            /// Attributes through an open fd.
            fstat Fstat (fd: $crate::Fd) -> $crate::Iatt;
            /// Changes mode/owner/size/times; returns the new attributes.
            setattr Setattr (gfid: $crate::Gfid, attr: $crate::SetAttr) -> $crate::Iatt;
            /// `setattr` through an open fd (ftruncate, fchmod...).
            fsetattr Fsetattr (fd: $crate::Fd, attr: $crate::SetAttr) -> $crate::Iatt;
            /// Permission check with `R_OK|W_OK|X_OK` bits.
            access Access (gfid: $crate::Gfid, mask: u32) -> ();
            /// Target of a symbolic link.
            readlink Readlink (gfid: $crate::Gfid) -> $crate::abi_stable::std_types::RString;
            /// Makes a device, FIFO or socket (`mode` includes the type bits).
            mknod Mknod (loc: $crate::Loc, mode: u32, rdev: u64, umask: u32) -> $crate::Entry;
            /// Makes a directory.
            mkdir Mkdir (loc: $crate::Loc, mode: u32, umask: u32) -> $crate::Entry;
            /// Removes a non-directory name.
            unlink Unlink (loc: $crate::Loc) -> $crate::Removed;
            /// Removes an empty directory.
            rmdir Rmdir (loc: $crate::Loc) -> $crate::Removed;
            /// Makes a symbolic link to `target`.
            symlink Symlink (loc: $crate::Loc, target: $crate::abi_stable::std_types::RString) -> $crate::Entry;
            /// Renames `old` to `new` (replacing it per POSIX); `flags` are renameat2 flags.
            rename Rename (old: $crate::Loc, new: $crate::Loc, flags: u32) -> ();
            /// Makes a hard link `new` to the object `gfid`.
            link Link (gfid: $crate::Gfid, new: $crate::Loc) -> $crate::Entry;
            /// Creates and opens a regular file; `fd.gfid` is ignored (not known yet).
            create Create (loc: $crate::Loc, fd: $crate::Fd, mode: u32, umask: u32) -> $crate::Entry;
            /// Opens a file (`fd.flags` are the open(2) flags); the reply may carry a backing
            /// file for a caller that asked for one (see [`BackingWanted`](crate::BackingWanted)).
            open Open (fd: $crate::Fd) -> $crate::Opened;
            /// Opens a directory for `readdirp`.
            opendir Opendir (fd: $crate::Fd) -> ();
            /// Reads up to `size` bytes at `offset`; a short read means end of file. The reply
            /// carries the post-read attributes when the answering translator has them.
            readv Readv (fd: $crate::Fd, offset: u64, size: u32) -> $crate::ReadReply;
            /// Writes `data` at `offset` (`flags`: per-write O_SYNC/O_DSYNC/O_APPEND); returns
            /// bytes written and the post-write attributes when known.
            writev Writev (fd: $crate::Fd, offset: u64, data: $crate::Buf, flags: i32) -> $crate::WriteReply;
            /// Called on every close(2) of a descriptor (release locks of the caller's owner).
            flush Flush (fd: $crate::Fd) -> ();
            /// Makes data (and metadata unless `datasync`) durable.
            fsync Fsync (fd: $crate::Fd, datasync: bool) -> ();
            /// fsync of a directory.
            fsyncdir Fsyncdir (fd: $crate::Fd, datasync: bool) -> ();
            /// Last close of a file fd: drop per-fd state.
            release Release (fd: $crate::Fd) -> ();
            /// Last close of a directory fd.
            releasedir Releasedir (fd: $crate::Fd) -> ();
            /// Directory entries with attributes, starting after cookie `offset` (0: start),
            /// at most about `size` bytes' worth.
            readdirp Readdirp (fd: $crate::Fd, offset: u64, size: u32) -> $crate::abi_stable::std_types::RVec<$crate::DirEntry>;
            /// File system statistics of the volume holding `gfid`.
            statfs Statfs (gfid: $crate::Gfid) -> $crate::Statfs;
            /// Sets extended attributes (`flags`: XATTR_CREATE/XATTR_REPLACE).
            setxattr Setxattr (gfid: $crate::Gfid, xattr: $crate::Xattr, flags: i32) -> ();
            /// One extended attribute's value.
            getxattr Getxattr (gfid: $crate::Gfid, name: $crate::abi_stable::std_types::RString) -> $crate::Buf;
            /// Names of all extended attributes.
            listxattr Listxattr (gfid: $crate::Gfid) -> $crate::abi_stable::std_types::RVec<$crate::abi_stable::std_types::RString>;
            /// Removes one extended attribute.
            removexattr Removexattr (gfid: $crate::Gfid, name: $crate::abi_stable::std_types::RString) -> ();
            /// `setxattr` through an fd.
            fsetxattr Fsetxattr (fd: $crate::Fd, xattr: $crate::Xattr, flags: i32) -> ();
            /// `getxattr` through an fd.
            fgetxattr Fgetxattr (fd: $crate::Fd, name: $crate::abi_stable::std_types::RString) -> $crate::Buf;
            /// `removexattr` through an fd.
            fremovexattr Fremovexattr (fd: $crate::Fd, name: $crate::abi_stable::std_types::RString) -> ();
            /// Preallocates (`mode`: FALLOC_FL_* bits, including KEEP_SIZE).
            fallocate Fallocate (fd: $crate::Fd, mode: i32, offset: u64, len: u64) -> ();
            /// Punches a hole (deallocates, keeps size).
            discard Discard (fd: $crate::Fd, offset: u64, len: u64) -> ();
            /// Writes zeroes efficiently.
            zerofill Zerofill (fd: $crate::Fd, offset: u64, len: u64) -> ();
            /// SEEK_DATA / SEEK_HOLE from `offset`.
            seek Seek (fd: $crate::Fd, offset: u64, what: $crate::SeekWhat) -> u64;
            /// POSIX byte-range lock (fcntl F_GETLK/F_SETLK/F_SETLKW).
            lk Lk (fd: $crate::Fd, cmd: $crate::LkCmd, lock: $crate::Flock) -> $crate::Flock;
            /// Internal inode lock in `domain`, for cluster translators.
            inodelk Inodelk (domain: $crate::abi_stable::std_types::RString, gfid: $crate::Gfid, cmd: $crate::LkCmd, lock: $crate::Flock) -> ();
            /// Internal entry lock on `loc` (empty name: the whole directory) in `domain`.
            entrylk Entrylk (domain: $crate::abi_stable::std_types::RString, loc: $crate::Loc, cmd: $crate::EntrylkCmd) -> ();
            /// Atomically applies `op` to each named xattr; returns the new values.
            xattrop Xattrop (gfid: $crate::Gfid, op: $crate::XattropOp, xattrs: $crate::Xattrs) -> $crate::Xattrs;
            /// `xattrop` through an fd.
            fxattrop Fxattrop (fd: $crate::Fd, op: $crate::XattropOp, xattrs: $crate::Xattrs) -> $crate::Xattrs;
        }
    };
}

macro_rules! gen_fop_enum {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
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

#[cfg(test)]
mod tests {
    use super::Fop;

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
        ] {
            assert!(
                Fop::from_name(must).is_some(),
                "{must} missing from the fop table"
            );
        }
    }
}
