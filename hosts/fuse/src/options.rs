//! The command line and the mount options it resolves to.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::atime::{Atime, AtimeMode};
use xlfs_protocol::fetch::VolfileServer;

/// Largest write the kernel sends: `fs.fuse.max_pages_limit` is 256 pages here, so 1 MiB.
pub const DEFAULT_MAX_WRITE: u32 = 1 << 20;

/// Mounts an xlfs volume (a translator graph described by a volfile) on a directory through
/// FUSE. Runs in the foreground until SIGINT/SIGTERM, then unmounts and exits 0. SIGHUP
/// re-reads the volfile (or fetches it again) and applies it (in place when only
/// reconfigurable options changed).
#[derive(Parser, Debug, Clone)]
#[command(name = "xlfs-mount", version, about, long_about)]
#[command(override_usage = "xlfs-mount [OPTIONS] HOST[:PORT]:/VOLUME MOUNTPOINT
       xlfs-mount [OPTIONS] --volfile FILE MOUNTPOINT
       xlfs-mount [OPTIONS] --local DIR MOUNTPOINT")]
#[command(after_help = "Where the graph comes from (exactly one):
  HOST:/VOLUME, HOST:PORT:/VOLUME   the client volfile of VOLUME, fetched from a running
                                    brick (one started by `xlfs volume start`, or
                                    `xlfsd --client-volfile`) or xlfs-mgmtd, after its
                                    auth-allow and secret checks (--secret-file). Without
                                    PORT: HOST's xlfs-mgmtd (port 24018, any volume of its
                                    cluster), then port 49152 (brick 0 of a volume created
                                    without --port). Several hosts: h1,h2,h3:/gv0 (the
                                    first that answers). IPv6 in brackets: [::1]:/gv0
  --volfile FILE                    a client volfile on disk
  --local DIR                       a local volume on DIR/brick, no network

Examples:
  xlfs-mount server1:/gv0 /mnt/gv0
  xlfs-mount h1,h2,h3:/gv0 /mnt/gv0 --secret-file /etc/xlfs/gv0.secret
  xlfs-mount 127.0.0.1:24010:/gv0 /mnt/gv0 --secret-file /etc/xlfs/gv0.secret
  xlfs-mount --volfile /var/lib/xlfs/volumes/gv0/client.vol /mnt/gv0
  xlfs-mount --local /srv/x /mnt/x")]
pub struct Cli {
    /// The client volfile (RON) describing the translator graph to mount; its top volume
    /// receives the fops.
    #[arg(long, value_name = "FILE")]
    pub volfile: Option<PathBuf>,

    /// Mount a local volume instead of a volfile: storage/posix on DIR/brick (created if
    /// missing) with features/locks and debug/io-stats on top.
    #[arg(long, value_name = "DIR", conflicts_with = "volfile")]
    pub local: Option<PathBuf>,

    /// `HOST[:PORT]:/VOLUME` (volfile fetched from that brick), then the directory to mount on;
    /// or only the directory with --volfile/--local. The directory must exist and not be a
    /// mount point.
    #[arg(value_name = "[HOST:/VOLUME] MOUNTPOINT", num_args = 1..=2, required = true)]
    pub positional: Vec<PathBuf>,

    /// A file whose first line is the volume's secret (mode 0600; `xlfs volume create` makes
    /// `<state>/volumes/VOLUME/secret`): proven to the brick when fetching the volfile
    /// (HOST:/VOLUME) and used by every protocol/client of the fetched graph. With --volfile,
    /// the volfile names its own (`secret-file`).
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,

    /// Refused: a secret on the command line is seen by every user (ps); use --secret-file.
    #[arg(long, value_name = "SECRET", hide = true)]
    pub secret: Option<String>,

    /// More volfile servers, asked in turn when the first does not answer: hosts separated
    /// by `:`, each on the first server's port (GlusterFS's `backup-volfile-servers`; the
    /// mount helper takes `-o backup-volfile-servers=h2:h3`). Servers with their own ports go
    /// in the source instead: `h1,h2:24010,h3:/VOLUME`.
    #[arg(long, value_name = "HOSTS")]
    pub backup_volfile_servers: Option<String>,

    /// How long fetching the volfile may take (connect, checks, answer).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub fetch_timeout: Duration,

    /// Let users other than the mounting one reach the mount (FUSE `allow_other`). Default:
    /// on when running as root.
    #[arg(long, overrides_with = "no_allow_other")]
    pub allow_other: bool,

    /// Only the mounting user may reach the mount.
    #[arg(long, overrides_with = "allow_other")]
    pub no_allow_other: bool,

    /// Do not ask the kernel to check permissions (`default_permissions`) against the
    /// attributes; leave every check to the translators (storage/posix runs every fop with
    /// the caller's credentials, so the brick's kernel checks them). The kernel drops a
    /// directory's attributes on every create or unlink in it and, with default_permissions,
    /// asks for them again before the next permission check; the mount answers that from the
    /// attributes the entry fop returned when it can, else it is a round trip. One
    /// difference: with the writeback cache, utimensat(UTIME_NOW) by a user who neither owns
    /// nor may write the file fails with EPERM instead of EACCES.
    #[arg(long)]
    pub no_default_permissions: bool,

    /// Kernel writeback cache: buffered writes are gathered in the page cache and sent as
    /// large writes (fewer, bigger writev fops; mtime/ctime kept by the kernel until the data
    /// is written back). Faster small writes, but ONLY FOR A VOLUME THIS MOUNT IS THE ONLY
    /// CLIENT OF: with it the kernel keeps each file's size itself and never takes a size
    /// from the graph again while it caches the inode, so another client's appends,
    /// extensions and truncations never show here (and a seek, stat or read stops at the
    /// size this kernel last knew). Off by default for that reason (docs/consistency.md).
    #[arg(long, overrides_with = "no_writeback_cache")]
    pub writeback_cache: bool,

    /// No kernel writeback cache (the default): every write(2) becomes a FUSE write request
    /// (performance/write-behind, when in the graph, still acknowledges them early), and
    /// sizes and times come from the bricks, so several clients of one volume see each
    /// other's changes (docs/consistency.md).
    #[arg(long, overrides_with = "writeback_cache")]
    pub no_writeback_cache: bool,

    /// How long the kernel may cache attributes (e.g. 1s, 500ms, 0.5, 0).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_timeout)]
    pub attr_timeout: Duration,

    /// How long the kernel may cache a name -> object mapping.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_timeout)]
    pub entry_timeout: Duration,

    /// How long the mount remembers that a file has no `security.capability` xattr. The
    /// kernel asks before every write(2); the brick drops a capability on every write by
    /// itself (its own kernel does), so this only bounds how late a capability set through
    /// another client shows in getxattr here. 0: ask the brick every time.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_timeout)]
    pub capability_timeout: Duration,

    /// How long the kernel may remember that a name does not exist (0: not at all).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_timeout)]
    pub negative_timeout: Duration,

    /// For this long after this mount makes a directory, a lookup there of a name the mount
    /// did not create is answered "no such name" without asking the bricks (the directory
    /// was empty when made). Saves the lookup before each create of `tar x` or `cp -r`.
    /// Bounds how late a name another client creates in such a directory shows up here.
    /// 0: always ask.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_timeout)]
    pub fresh_dir_timeout: Duration,

    /// Open every file with FOPEN_DIRECT_IO: no page cache, reads and writes reach the graph
    /// at the application's size. Otherwise files keep their page cache across opens and the
    /// kernel drops it when size or mtime change.
    #[arg(long)]
    pub direct_io_mode: bool,

    /// FUSE passthrough: a read-only open of a file on a brick on this machine (--local, or a
    /// brick reached over its Unix socket) is answered with the brick's own descriptor of the file, and the
    /// kernel reads it directly: reads cost what reads of the brick directory cost, with no
    /// request per read to this process or the brick. Only through translators that keep
    /// file data as stored (all of xlfs's own; see the translator API), and only when the
    /// brick allows it (storage/posix `backing-files`, on by default). The kernel (Linux
    /// 6.9+, CONFIG_FUSE_PASSTHROUGH) refuses it together with the writeback cache, so this
    /// mounts without it: every write(2) becomes a write request (write-behind, when in the
    /// graph, still acknowledges them early). Needs root (CAP_SYS_ADMIN to register backing
    /// files, the right to ptrace the brick to take them). See docs/passthrough.md.
    #[arg(long, conflicts_with_all = ["writeback_cache", "direct_io_mode"])]
    pub passthrough: bool,

    /// Do not offer READDIRPLUS (listings then send a lookup per name).
    #[arg(long)]
    pub no_readdirplus: bool,

    /// Let the kernel choose READDIRPLUS per call (FUSE_READDIRPLUS_AUTO): only a listing's
    /// first call, or one of a directory whose names were looked up since, gets the
    /// entries' attributes; the names of its later calls cost a lookup each when used.
    /// Default: every call of a listing is READDIRPLUS. The graph reads the same either way
    /// (a readdirp with attributes); what differs is that the kernel then knows every listed
    /// name (`rm -rf` of drivers/net: about 1,400 lookups fewer, each of them a round trip
    /// to every replica).
    #[arg(long, conflicts_with = "no_readdirplus")]
    pub readdirplus_auto: bool,

    /// Do not let the kernel cache directory listings. By default it keeps each listing
    /// (FOPEN_CACHE_DIR) while the directory's mtime stays the same, drops it on this
    /// mount's own changes and on another client's (upcall), and checks the mtime again
    /// when the attributes expire (--attr-timeout): a listing of an unchanged directory then
    /// costs no round trip. With this flag every listing asks the bricks.
    #[arg(long)]
    pub no_dir_cache: bool,

    /// Leave POSIX byte-range locks to the kernel (local to this mount) instead of sending
    /// them to the graph as `lk` fops; for volumes without features/locks.
    #[arg(long)]
    pub kernel_locks: bool,

    /// Keep flock(2) locks local to this mount (the kernel's) instead of
    /// sending them to the bricks as whole-file locks that exclude other clients. Implied by
    /// --kernel-locks.
    #[arg(long)]
    pub local_flock: bool,

    /// Largest write request the kernel may send (e.g. 128KiB, 1MiB); the kernel caps it at
    /// max_pages_limit (1 MiB here).
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = parse_max_write)]
    pub max_write: u32,

    /// Kernel readahead for this mount (e.g. 4MiB, 128KiB; 0 keeps the kernel's 128 KiB).
    /// A larger window lets a sequential reader keep more large reads in flight (a 650 KiB
    /// file takes two read requests instead of three). Set through
    /// /sys/class/bdi/*/read_ahead_kb, which needs root; otherwise the kernel's stays.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_read_ahead)]
    pub read_ahead: u64,

    /// Number of FUSE request-reading loops, each on its own cloned /dev/fuse fd. Requests
    /// are served concurrently on the async runtime either way; more loops spread decoding.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,

    /// Mount without `nodev`, so device nodes on the volume can be opened (their major/minor
    /// then name devices of this machine). Off by default, as for every FUSE mount: whoever
    /// may create a device node on the volume (any client, as root on the brick) would
    /// otherwise get this machine's devices. Only for trusted setups; needs root.
    #[arg(long)]
    pub dev: bool,

    /// When reads update a file's access time: relatime (the first read after a change, or
    /// a day later), strictatime (every read, as far as the bricks' file system does: a brick
    /// on a relatime file system updates as relatime), noatime (never). An open for reading
    /// counts as a read (the kernel serves many reads from its cache); the mount helper's
    /// `-o noatime|relatime|strictatime` set it.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = AtimeMode::Relatime)]
    pub atime: AtimeMode,

    /// Listings never update a directory's access time (`-o nodiratime`).
    #[arg(long)]
    pub nodiratime: bool,

    /// Mount read-only: the kernel refuses every change with EROFS (`-o ro` of the mount
    /// helper; `mount -o remount,rw` makes it writable again).
    #[arg(long)]
    pub read_only: bool,

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

    /// A Unix socket on which this mount answers while it runs: `xlfs volume statedump`
    /// (host state and every translator's dump, text or JSON) and `xlfs volume set` (reload
    /// the volfile now). `xlfs mount` sets it. The volfile is followed without it too: a
    /// HOST:/VOLUME mount keeps a watch at the brick, a --volfile mount rereads its file.
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,

    /// If MOUNTPOINT holds a stale FUSE mount (its server died: "Transport endpoint is not
    /// connected"), detach it (`umount -l`) and mount over it instead of failing.
    #[arg(long)]
    pub force_unmount_stale: bool,

    /// The source name shown in /proc/mounts (default: xlfs:<top volume name>).
    #[arg(long, value_name = "NAME")]
    pub fsname: Option<String>,
}

/// Where the graph comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphSource {
    File(PathBuf),
    Local(PathBuf),
    /// The volfile server, then the ones asked when it does not answer.
    Fetch(VolfileServer, Vec<VolfileServer>),
}

/// Everything the file system shim needs to know, resolved from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsOptions {
    pub attr_timeout: Duration,
    pub entry_timeout: Duration,
    pub negative_timeout: Duration,
    pub fresh_dir_timeout: Duration,
    pub capability_timeout: Duration,
    pub writeback_cache: bool,
    pub direct_io: bool,
    pub passthrough: bool,
    pub readdirplus: bool,
    /// The kernel chooses READDIRPLUS per call (FUSE_READDIRPLUS_AUTO).
    pub readdirplus_auto: bool,
    /// The kernel may cache listings (FOPEN_CACHE_DIR).
    pub dir_cache: bool,
    pub posix_locks: bool,
    /// flock(2) locks go to the graph (FUSE_FLOCK_LOCKS).
    pub flock_locks: bool,
    /// The kernel checks permissions (`default_permissions`, the default).
    pub default_permissions: bool,
    pub max_write: u32,
    pub atime: Atime,
}

impl Default for FsOptions {
    fn default() -> FsOptions {
        FsOptions {
            attr_timeout: Duration::from_secs(1),
            entry_timeout: Duration::from_secs(1),
            negative_timeout: Duration::ZERO,
            fresh_dir_timeout: Duration::from_secs(1),
            capability_timeout: Duration::from_secs(60),
            writeback_cache: false,
            direct_io: false,
            passthrough: false,
            readdirplus: true,
            readdirplus_auto: false,
            dir_cache: true,
            posix_locks: true,
            flock_locks: true,
            default_permissions: true,
            max_write: DEFAULT_MAX_WRITE,
            atime: Atime::default(),
        }
    }
}

impl Cli {
    /// The graph source and the mount point: exactly one of `HOST:/VOLUME`, --volfile and
    /// --local. The error is meant for the user.
    pub fn source(&self) -> Result<(GraphSource, PathBuf), String> {
        let (server, mountpoint) = match self.positional.as_slice() {
            [mp] => (None, mp.clone()),
            [server, mp] => {
                let text = server
                    .to_str()
                    .ok_or_else(|| format!("{}: not HOST:/VOLUME (not UTF-8)", server.display()))?;
                let mut all = xlfs_protocol::fetch::parse_servers(
                    text,
                    self.backup_volfile_servers.as_deref(),
                )?;
                let first = all.remove(0);
                (Some((first, all)), mp.clone())
            }
            _ => return Err("give the mount point".into()),
        };
        let source = match (server, &self.volfile, &self.local) {
            _ if self.secret.is_some() => {
                return Err(
                    "--secret is gone (a secret on the command line is visible to \
                     every user): put it in a file (chmod 600) and give --secret-file FILE"
                        .to_owned(),
                );
            }
            (Some((s, backups)), None, None) => GraphSource::Fetch(s, backups),
            (None, _, _) if self.secret_file.is_some() => {
                return Err(
                    "--secret-file is for HOST:/VOLUME mounts: a volfile on disk names \
                     its clients' secret file itself (their `secret-file` option)"
                        .to_owned(),
                );
            }
            (None, Some(f), None) => GraphSource::File(f.clone()),
            (None, None, Some(d)) => GraphSource::Local(d.clone()),
            (None, None, None) => {
                let hint = match self.positional.first().and_then(|p| p.to_str()) {
                    Some(t) if t.contains(":/") => {
                        format!("; {t:?} looks like HOST:/VOLUME, so give a mount point after it")
                    }
                    _ => String::new(),
                };
                return Err(format!(
                    "nothing to mount: give HOST[:PORT]:/VOLUME, --volfile FILE or --local DIR \
                     before the mount point{hint}"
                ));
            }
            _ => {
                return Err(
                    "give only one of HOST[:PORT]:/VOLUME, --volfile and --local".to_owned(),
                );
            }
        };
        Ok((source, mountpoint))
    }

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
            fresh_dir_timeout: self.fresh_dir_timeout,
            capability_timeout: self.capability_timeout,
            writeback_cache: self.writeback_cache && !self.passthrough,
            direct_io: self.direct_io_mode,
            passthrough: self.passthrough,
            readdirplus: !self.no_readdirplus,
            readdirplus_auto: self.readdirplus_auto,
            dir_cache: !self.no_dir_cache,
            posix_locks: !self.kernel_locks,
            flock_locks: !self.kernel_locks && !self.local_flock,
            default_permissions: !self.no_default_permissions,
            max_write: self.max_write,
            atime: Atime {
                mode: self.atime,
                nodiratime: self.nodiratime,
                read_only: self.read_only,
            },
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

/// Bytes (whole KiB), up to 64 MiB.
fn parse_read_ahead(s: &str) -> Result<u64, String> {
    let n = xlator_api::parse_size(s)?;
    if n > 64 << 20 || !n.is_multiple_of(1024) {
        return Err(format!("{s:?} is not a whole number of KiB up to 64MiB"));
    }
    Ok(n)
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
    fn writeback_cache_is_off_unless_asked_for_last_flag_wins() {
        let on = |args: &[&str]| parse(args).expect("parse").fs_options().writeback_cache;
        assert!(!on(&["--local", "/d", "/mnt"]));
        assert!(on(&["--local", "/d", "--writeback-cache", "/mnt"]));
        assert!(!on(&["--local", "/d", "--no-writeback-cache", "/mnt"]));
        assert!(on(&[
            "--local",
            "/d",
            "--no-writeback-cache",
            "--writeback-cache",
            "/mnt"
        ]));
        assert!(!on(&[
            "--local",
            "/d",
            "--writeback-cache",
            "--no-writeback-cache",
            "/mnt"
        ]));
    }

    #[test]
    fn allow_other_flags() {
        let cli = parse(&["--local", "/d", "--no-allow-other", "/mnt"]).expect("parse");
        assert!(!cli.allow_other(true));
        let cli = parse(&["--local", "/d", "--allow-other", "/mnt"]).expect("parse");
        assert!(cli.allow_other(false));
    }

    fn source(args: &[&str]) -> Result<(GraphSource, PathBuf), String> {
        parse(args).map_err(|e| e.to_string())?.source()
    }

    #[test]
    fn needs_exactly_one_source() {
        let e = source(&["/mnt"]).expect_err("no source");
        assert!(e.contains("nothing to mount"), "{e}");
        let e = source(&["h:/gv0"]).expect_err("no mount point");
        assert!(e.contains("give a mount point after it"), "{e}");
        assert!(parse(&["--local", "/d", "--volfile", "v", "/mnt"]).is_err());
        let e = source(&["h:/gv0", "--local", "/d", "/mnt"]).expect_err("two");
        assert!(e.contains("only one"), "{e}");
        assert!(parse(&["a", "b", "c"]).is_err());
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn host_volume_sources() {
        let (s, mp) =
            source(&["127.0.0.1:24010:/gv0", "/mnt/x", "--secret-file", "/f"]).expect("ok");
        assert_eq!(mp, PathBuf::from("/mnt/x"));
        let GraphSource::Fetch(v, backups) = s else {
            panic!("{s:?}")
        };
        assert_eq!(
            (v.host.as_str(), v.port, v.volume.as_str()),
            ("127.0.0.1", 24010, "gv0")
        );
        assert!(backups.is_empty());
        let (s, _) = source(&["server1:/gv0", "/mnt"]).expect("ok");
        assert!(
            matches!(&s, GraphSource::Fetch(v, b) if v.port == xlfs_protocol::fetch::VOLFILE_PORT
                && b.len() == 1 && b[0].port == xlfs_protocol::fetch::DEFAULT_PORT),
            "{s:?}"
        );
        // More servers: in the source, and GlusterFS's backup-volfile-servers.
        let (s, _) = source(&[
            "h1,h2:24011:/gv0",
            "/mnt",
            "--backup-volfile-servers",
            "h3:h4",
        ])
        .expect("ok");
        let GraphSource::Fetch(v, backups) = s else {
            panic!("{s:?}")
        };
        let all: Vec<String> = std::iter::once(&v)
            .chain(&backups)
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            all,
            [
                "h1:24018:/gv0",
                "h1:49152:/gv0",
                "h2:24011:/gv0",
                "h3:24018:/gv0",
                "h3:49152:/gv0",
                "h4:24018:/gv0",
                "h4:49152:/gv0"
            ]
        );
        let e = source(&["h:/gv0", "/mnt", "--secret", "s"]).expect_err("argv secret");
        assert!(e.contains("--secret-file FILE"), "{e}");
        let e = source(&["--volfile", "v", "/mnt", "--secret-file", "/f"]).expect_err("volfile");
        assert!(e.contains("HOST:/VOLUME"), "{e}");
        let (s, mp) = source(&["--volfile", "c.vol", "/mnt"]).expect("ok");
        assert_eq!(s, GraphSource::File("c.vol".into()));
        assert_eq!(mp, PathBuf::from("/mnt"));
        let e = source(&["server1:gv0", "/mnt"]).expect_err("bad form");
        assert!(e.contains("HOST:/VOLUME"), "{e}");
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
        let cli = parse(&["--local", "/d", "/mnt"]).expect("parse");
        assert_eq!(cli.read_ahead, 4 << 20);
        let cli = parse(&["--local", "/d", "--read-ahead", "0", "/mnt"]).expect("parse");
        assert_eq!(cli.read_ahead, 0);
        assert!(parse(&["--local", "/d", "--read-ahead", "1000", "/mnt"]).is_err());
        assert!(parse(&["--local", "/d", "--read-ahead", "1GiB", "/mnt"]).is_err());
    }
}
