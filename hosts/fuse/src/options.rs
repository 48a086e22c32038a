//! The command line and the mount options it resolves to.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Parser};

/// Largest write the kernel sends: `fs.fuse.max_pages_limit` is 256 pages here, so 1 MiB.
pub const DEFAULT_MAX_WRITE: u32 = 1 << 20;

/// Mounts an xlfs volume (a translator graph described by a volfile) on a directory through
/// FUSE. Runs in the foreground until SIGINT/SIGTERM, then unmounts and exits 0. SIGHUP
/// re-reads the volfile and applies it (in place when only reconfigurable options changed).
#[derive(Parser, Debug, Clone)]
#[command(name = "xlfs-mount", version, about, long_about = None)]
#[command(group(ArgGroup::new("source").required(true).args(["volfile", "local"])))]
pub struct Cli {
    /// The client volfile (RON) describing the translator graph to mount; its top volume
    /// receives the fops.
    #[arg(long, value_name = "FILE")]
    pub volfile: Option<PathBuf>,

    /// Mount a local volume instead of a volfile: storage/posix on DIR/brick (created if
    /// missing) with features/locks and debug/io-stats on top.
    #[arg(long, value_name = "DIR", conflicts_with = "volfile")]
    pub local: Option<PathBuf>,

    /// The directory to mount on. It must exist, be a directory and not be a mount point.
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,

    /// Let users other than the mounting one reach the mount (FUSE `allow_other`). Default:
    /// on when running as root.
    #[arg(long, overrides_with = "no_allow_other")]
    pub allow_other: bool,

    /// Only the mounting user may reach the mount.
    #[arg(long, overrides_with = "allow_other")]
    pub no_allow_other: bool,

    /// Do not ask the kernel to check permissions (`default_permissions`) against the
    /// attributes; leave every check to the translators.
    #[arg(long)]
    pub no_default_permissions: bool,

    /// Enable the kernel writeback cache: buffered writes are gathered in the page cache and
    /// sent as large writes (fewer, bigger writev fops; mtime/ctime kept by the kernel).
    #[arg(long)]
    pub writeback_cache: bool,

    /// How long the kernel may cache attributes (e.g. 1s, 500ms, 0.5, 0).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_timeout)]
    pub attr_timeout: Duration,

    /// How long the kernel may cache a name -> object mapping.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_timeout)]
    pub entry_timeout: Duration,

    /// How long the kernel may remember that a name does not exist (0: not at all).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_timeout)]
    pub negative_timeout: Duration,

    /// Open every file with FOPEN_DIRECT_IO: no page cache, reads and writes reach the graph
    /// at the application's size. Otherwise files keep their page cache across opens and the
    /// kernel drops it when size or mtime change.
    #[arg(long)]
    pub direct_io_mode: bool,

    /// Do not offer READDIRPLUS (listings then send a lookup per name).
    #[arg(long)]
    pub no_readdirplus: bool,

    /// Leave POSIX byte-range locks to the kernel (local to this mount) instead of sending
    /// them to the graph as `lk` fops; for volumes without features/locks.
    #[arg(long)]
    pub kernel_locks: bool,

    /// Largest write request the kernel may send (e.g. 128KiB, 1MiB); the kernel caps it at
    /// max_pages_limit (1 MiB here).
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = parse_max_write)]
    pub max_write: u32,

    /// Number of FUSE request-reading loops, each on its own cloned /dev/fuse fd. Requests
    /// are served concurrently on the async runtime either way; more loops spread decoding.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,

    /// Stay in the foreground (always the case: xlfs-mount never daemonizes; accepted for
    /// compatibility with mount helpers).
    #[arg(long, short = 'f')]
    pub foreground: bool,

    /// Log filter: error, warn, info, debug, trace, or a tracing directive such as
    /// `xlfs_mount=debug,info`. RUST_LOG, when set, takes precedence.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,

    /// Print the graph's statedump (io-stats counters included) to stdout after unmounting.
    #[arg(long)]
    pub dump_on_exit: bool,

    /// If MOUNTPOINT holds a stale FUSE mount (its server died: "Transport endpoint is not
    /// connected"), detach it (`umount -l`) and mount over it instead of failing.
    #[arg(long)]
    pub force_unmount_stale: bool,

    /// The source name shown in /proc/mounts (default: xlfs:<top volume name>).
    #[arg(long, value_name = "NAME")]
    pub fsname: Option<String>,
}

/// Everything the file system shim needs to know, resolved from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsOptions {
    pub attr_timeout: Duration,
    pub entry_timeout: Duration,
    pub negative_timeout: Duration,
    pub writeback_cache: bool,
    pub direct_io: bool,
    pub readdirplus: bool,
    pub posix_locks: bool,
    pub max_write: u32,
}

impl Default for FsOptions {
    fn default() -> FsOptions {
        FsOptions {
            attr_timeout: Duration::from_secs(1),
            entry_timeout: Duration::from_secs(1),
            negative_timeout: Duration::ZERO,
            writeback_cache: false,
            direct_io: false,
            readdirplus: true,
            posix_locks: true,
            max_write: DEFAULT_MAX_WRITE,
        }
    }
}

impl Cli {
    /// Whether `allow_other` is in effect (explicit flags first, then "on when root").
    pub fn allow_other(&self, is_root: bool) -> bool {
        if self.no_allow_other {
            false
        } else {
            self.allow_other || is_root
        }
    }

    pub fn fs_options(&self) -> FsOptions {
        FsOptions {
            attr_timeout: self.attr_timeout,
            entry_timeout: self.entry_timeout,
            negative_timeout: self.negative_timeout,
            writeback_cache: self.writeback_cache,
            direct_io: self.direct_io_mode,
            readdirplus: !self.no_readdirplus,
            posix_locks: !self.kernel_locks,
            max_write: self.max_write,
        }
    }
}

/// A timeout: `parse_duration` forms (`500ms`, `1s`, `2m`) or decimal seconds (`0.5`, `1.5s`)
/// as GlusterFS writes them.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.contains('.') {
        let num = t.strip_suffix('s').unwrap_or(t);
        let secs: f64 = num
            .parse()
            .map_err(|_| format!("{s:?} is not a duration (try 500ms, 1s, 0.5)"))?;
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("{s:?} is not a valid duration (negative or too large)"));
    }
    xlator_api::parse_duration(t)
}

fn parse_max_write(s: &str) -> Result<u32, String> {
    let n = xlator_api::parse_size(s)?;
    if !(4096..=16 << 20).contains(&n) {
        return Err(format!("{s:?} is out of range (4KiB..16MiB)"));
    }
    Ok(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xlfs-mount").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_match_glusterfs_fuse_bridge() {
        let cli = parse(&["--volfile", "v.ron", "/mnt"]).expect("parse");
        let o = cli.fs_options();
        assert_eq!(o, FsOptions::default());
        assert_eq!(cli.threads, 2);
        assert!(cli.allow_other(true));
        assert!(!cli.allow_other(false));
    }

    #[test]
    fn allow_other_flags() {
        let cli = parse(&["--local", "/d", "--no-allow-other", "/mnt"]).expect("parse");
        assert!(!cli.allow_other(true));
        let cli = parse(&["--local", "/d", "--allow-other", "/mnt"]).expect("parse");
        assert!(cli.allow_other(false));
    }

    #[test]
    fn needs_exactly_one_source() {
        assert!(parse(&["/mnt"]).is_err());
        assert!(parse(&["--local", "/d", "--volfile", "v", "/mnt"]).is_err());
    }

    #[test]
    fn timeouts_and_sizes() {
        assert_eq!(parse_timeout("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_timeout("0"), Ok(Duration::ZERO));
        assert!(parse_timeout("-1.0").is_err());
        assert!(parse_timeout("soon").is_err());
        let cli = parse(&["--local", "/d", "--max-write", "128KiB", "/mnt"]).expect("parse");
        assert_eq!(cli.max_write, 128 << 10);
        assert!(parse(&["--local", "/d", "--max-write", "1", "/mnt"]).is_err());
        assert!(parse(&["--local", "/d", "--threads", "0", "/mnt"]).is_err());
    }
}
