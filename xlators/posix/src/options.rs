//! Options of storage/posix.

use xlator_api::{FromOption, OptionSpec, Options};

xlator_api::options! {
    /// Options of a storage/posix brick.
    pub struct PosixOptions {
        /// The brick directory (must exist, on a file system with extended attributes).
        pub directory: std::path::PathBuf = OptionSpec::path("directory", ""),
        /// Where GFIDs are stored: `trusted` (`trusted.gfid`, needs root), `user`
        /// (`user.xlfs.gfid`, for bricks run without root) or `auto` (what the brick root
        /// already uses, else `trusted` when running as root, else `user`).
        pub gfid_xattr: GfidXattrMode =
            OptionSpec::enumeration("gfid-xattr", "auto", &["auto", "trusted", "user"]),
        /// Remove an unlinked file's GFID handle after replying (a reaper thread; the object
        /// is gone for GFID lookups at once either way). off: before replying.
        pub background_unlink: bool = OptionSpec::bool("background-unlink", "on"),
        /// How long a file whose last name was removed (unlink, or a rename over it) stays
        /// reachable by GFID, read-only in effect (stat, open, read; `link` refuses it). A
        /// client that still caches the name (another mount, within its entry timeout, or
        /// between its lookup and its open) then opens the file as it was instead of getting
        /// ESTALE, which is what makes "write a temporary file, rename it over the name"
        /// atomic to every client (docs/consistency.md). The space is freed this much later.
        /// Needs `background-unlink`. 0: gone for GFID lookups at once.
        pub unlinked_grace: std::time::Duration =
            OptionSpec::duration("unlinked-grace", "5s").range(0, 3600),
        /// Reads of this size and up (at a 4 KiB-aligned offset, through an fd open for
        /// reading) whose range the brick's page cache holds no page of are read with
        /// O_DIRECT: the disk writes straight into the reply's buffer, and the data is not
        /// cached a second time on the brick (the client caches what it reads). Saves the
        /// brick filling and then copying page cache pages it will not read again: on this
        /// machine 30 concurrent readers of 500-800 KiB files read 10-30% more files per
        /// second, and a cold sequential 1 MiB read ran about 1.35x faster. Reads of cached
        /// (or partly cached) data, smaller or unaligned reads, and file systems that refuse
        /// O_DIRECT use the page cache as before. Needs cachestat(2) (Linux 6.5); older
        /// kernels always use the page cache. 0: never.
        pub direct_read_min: u64 = OptionSpec::size("direct-read-min", "64KiB")
            .range(0, 67_108_864)
            .reconfigurable(),
        /// A file whose cold reads went direct for one client (connection) and that another
        /// client reads within this long of the first one's last direct read counts as
        /// shared: its reads use the page cache, so many clients reading one input set cost
        /// at most two disk reads of each byte, not one per client. It stays shared until a
        /// whole window passes without a cold read of it. 0: never shared.
        pub direct_read_share_window: std::time::Duration =
            OptionSpec::duration("direct-read-share-window", "30s").reconfigurable(),
        /// Answer a read-only open from a caller that asks for it (a FUSE mount with
        /// `--passthrough`, on this machine, over the brick's Unix socket) with a descriptor
        /// of the file (opened read-write as root: writers beside passthrough readers use it
        /// too), which the caller's kernel then reads directly: no request per read reaches
        /// the brick (nor its io-stats). off: such opens are answered normally and every read
        /// goes through the brick.
        pub backing_files: bool = OptionSpec::bool("backing-files", "on").reconfigurable(),
        /// Let mknod make character and block device nodes (S_IFCHR, S_IFBLK). A device
        /// node gives whoever may open it the device itself (a node of the brick host's
        /// disk, /dev/mem...), and a brick that believes a client's uid 0 lets any client
        /// make one, so off: such a mknod is refused with EPERM (FIFOs, sockets and regular
        /// files are always allowed). Turn it on for volumes whose users need device nodes
        /// (a root file system, conformance suites such as pjdfstest).
        pub allow_devices: bool = OptionSpec::bool("allow-devices", "off").reconfigurable(),
        /// How often a thread writes, fsyncs and reads back `<brick>/.xlfs/health` (GlusterFS
        /// `storage.health-check-interval`). If that fails or takes longer than
        /// `health-check-timeout`, the brick marks itself down for good: every fop answers
        /// EIO at once (clients get errors in seconds instead of after their frame-timeout)
        /// and the reason is logged at error level; restart the brick once the disk is fixed.
        /// 0: off.
        pub health_check_interval: std::time::Duration =
            OptionSpec::duration("health-check-interval", "10s").range(0, 3_600_000),
        /// How long one health check may take before the disk counts as hung.
        pub health_check_timeout: std::time::Duration =
            OptionSpec::duration("health-check-timeout", "20s").range(100, 3_600_000),
    }
}

/// Value of the `gfid-xattr` option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GfidXattrMode {
    Auto,
    Trusted,
    User,
}

impl FromOption for GfidXattrMode {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        match o.get(&s.key).unwrap_or("auto") {
            "auto" => Ok(GfidXattrMode::Auto),
            "trusted" => Ok(GfidXattrMode::Trusted),
            "user" => Ok(GfidXattrMode::User),
            v => Err(format!(
                "option \"gfid-xattr\": {v:?} is not one of auto, trusted, user"
            )),
        }
    }
}
