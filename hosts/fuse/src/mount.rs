//! Mounting and unmounting: checks on the mount point with messages that say what to do,
//! stale-mount detection, the fuser session, and unmount (lazy when busy).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use fuser::{Config, MountOption, Session, SessionACL};

use crate::fs::XlfsFs;

/// The FUSE device.
pub const DEV_FUSE: &str = "/dev/fuse";

/// Why a mount could not be made.
#[derive(thiserror::Error, Debug)]
pub enum MountError {
    #[error(
        "mount point {0} does not exist: create it (`mkdir -p {0}`) or choose another directory"
    )]
    Missing(PathBuf),
    #[error("mount point {0} is not a directory: choose a directory to mount on")]
    NotDir(PathBuf),
    #[error(
        "mount point {path} is busy: it is already a mount point ({fstype} from {origin}); unmount it first (`umount {path}`) or choose another directory"
    )]
    Busy {
        path: PathBuf,
        fstype: String,
        origin: String,
    },
    #[error(
        "stale {what} at {path}: its server is gone (Transport endpoint is not connected); run `umount {path}` (or `umount -l {path}`), or pass --force-unmount-stale"
    )]
    Stale { path: PathBuf, what: String },
    #[error(
        "{DEV_FUSE} is missing: load the FUSE module (`modprobe fuse`) or install fuse3; in a container, pass the device through (e.g. --device /dev/fuse)"
    )]
    NoDevFuse,
    #[error("cannot inspect mount point {path}: {source}")]
    Inspect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "mounting on {path} failed: {source} (mounting needs root, or fusermount3 from fuse3 for other users)"
    )]
    Mount {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not detach the stale mount at {path}: {source}")]
    Detach {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// `major:minor` of the mounted file system (its backing device info in /sys/class/bdi).
    pub dev: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
}

/// Parses mountinfo text (`man 5 proc`): field 5 is the mount point; after the ` - `
/// separator come the fs type and the source. Octal escapes (`\040`) are decoded.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let mut pre = pre.split(' ');
            let dev = pre.nth(2)?;
            let mount_point = pre.nth(1)?;
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let source = post.next().unwrap_or("");
            Some(MountEntry {
                dev: dev.to_string(),
                mount_point: PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(mount_point))),
                fstype: String::from_utf8_lossy(&unescape(fstype)).into_owned(),
                source: String::from_utf8_lossy(&unescape(source)).into_owned(),
            })
        })
        .collect()
}

pub(crate) fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The mounts of this process's namespace.
pub fn mounts() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// The mount at exactly `path` (the last one wins: it is the visible one).
pub fn mount_at(path: &Path) -> Option<MountEntry> {
    mounts().into_iter().rfind(|m| m.mount_point == path)
}

/// Whether `e` looks like one of ours.
fn is_xlfs(e: &MountEntry) -> bool {
    e.fstype == "fuse.xlfs" || e.source.starts_with("xlfs")
}

/// Checks the mount point and the FUSE device; returns the absolute, canonical mount point.
/// With `force_stale`, a stale FUSE mount on it is detached first.
pub fn preflight(mountpoint: &Path, force_stale: bool) -> Result<PathBuf, MountError> {
    let abs = std::path::absolute(mountpoint).map_err(|source| MountError::Inspect {
        path: mountpoint.to_path_buf(),
        source,
    })?;
    match std::fs::metadata(&abs) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            let entry = mount_at(&abs);
            let what = match &entry {
                Some(m) if is_xlfs(m) => "xlfs mount".to_string(),
                Some(m) => format!("FUSE mount ({} from {})", m.fstype, m.source),
                None => "xlfs mount".to_string(),
            };
            if !force_stale {
                return Err(MountError::Stale { path: abs, what });
            }
            tracing::warn!(path = %abs.display(), "detaching the stale {what}");
            detach(&abs).map_err(|source| MountError::Detach {
                path: abs.clone(),
                source,
            })?;
            return preflight(&abs, false);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(MountError::Missing(abs)),
        Err(source) => return Err(MountError::Inspect { path: abs, source }),
        Ok(m) if !m.is_dir() => return Err(MountError::NotDir(abs)),
        Ok(_) => {}
    }
    let canonical = std::fs::canonicalize(&abs).map_err(|source| MountError::Inspect {
        path: abs.clone(),
        source,
    })?;
    if let Some(m) = mount_at(&canonical) {
        return Err(MountError::Busy {
            path: canonical,
            fstype: m.fstype,
            origin: m.source,
        });
    }
    if !Path::new(DEV_FUSE).exists() {
        return Err(MountError::NoDevFuse);
    }
    Ok(canonical)
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountConfig {
    pub fsname: String,
    pub allow_other: bool,
    pub default_permissions: bool,
    pub threads: usize,
    /// Mount without `nodev` (`--dev`): device nodes on the volume may be opened.
    pub dev: bool,
    /// Mounted read-only (`--read-only`).
    pub read_only: bool,
    /// Kernel readahead for the mount in KiB (`--read-ahead`); 0 leaves the kernel's.
    pub read_ahead_kb: u64,
}

/// Mounts `fs` on `mountpoint` (already checked by [`preflight`]) and completes the FUSE
/// handshake. Dropping the session unmounts.
pub fn mount(
    fs: XlfsFs,
    mountpoint: &Path,
    cfg: &MountConfig,
) -> Result<Session<XlfsFs>, MountError> {
    let mut options = vec![
        MountOption::FSName(cfg.fsname.clone()),
        // Passed to the kernel, so /proc/mounts shows `fuse.xlfs`.
        MountOption::CUSTOM("subtype=xlfs".into()),
        if cfg.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
    ];
    if cfg.default_permissions {
        options.push(MountOption::DefaultPermissions);
    }
    // fuser mounts `nodev` unless told `dev`.
    if cfg.dev {
        options.push(MountOption::Dev);
    }
    let mut config = Config::default();
    config.mount_options = options;
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(cfg.threads.max(1));
    config.clone_fd = cfg.threads > 1;
    let session = Session::new(fs, mountpoint, &config).map_err(|source| {
        if Path::new(DEV_FUSE).exists() {
            MountError::Mount {
                path: mountpoint.to_path_buf(),
                source,
            }
        } else {
            MountError::NoDevFuse
        }
    })?;
    if cfg.read_ahead_kb > 0 {
        match set_read_ahead(mountpoint, cfg.read_ahead_kb) {
            Ok(()) => tracing::debug!(kb = cfg.read_ahead_kb, "kernel readahead set"),
            Err(e) => tracing::info!(
                "cannot set the mount's readahead to {} KiB ({e}; writing \
                 /sys/class/bdi/*/read_ahead_kb needs root): the kernel's default stays",
                cfg.read_ahead_kb
            ),
        }
    }
    Ok(session)
}

/// Sets the kernel's readahead window for the FUSE mount on `mountpoint`: the
/// `read_ahead_kb` of its backing device info, found through /proc/self/mountinfo (a stat of
/// the mount point would be a FUSE request, before anything serves them). The kernel starts a
/// FUSE mount at 128 KiB whatever the file system offers at init, which splits a large
/// sequential read into more, smaller requests.
/// `mountpoint` must be canonical, as [`preflight`] returns it: resolving it now would walk
/// into the mount.
pub fn set_read_ahead(mountpoint: &Path, kb: u64) -> io::Result<()> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    let entry = parse_mountinfo(&text)
        .into_iter()
        .rev()
        .find(|m| is_xlfs(m) && m.mount_point == mountpoint)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "mount not in mountinfo"))?;
    std::fs::write(
        format!("/sys/class/bdi/{}/read_ahead_kb", entry.dev),
        format!("{kb}\n"),
    )
}

/// Unmounts `path`; when it is busy (open files, a shell inside), detaches it lazily instead
/// and says so. Returns whether the unmount was lazy.
pub fn unmount(path: &Path, session_unmount: impl FnOnce() -> io::Result<()>) -> io::Result<bool> {
    match session_unmount() {
        Ok(()) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            tracing::warn!(
                path = %path.display(),
                "mount point busy: detaching lazily; processes still using it will get errors"
            );
            detach(path)?;
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// `umount -l`: detaches the mount now; the kernel drops it when its last user goes.
pub fn detach(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call; umount2 reads it only.
    let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 0:31 / /mnt/with\\040space rw,nosuid,nodev,relatime shared:20 - fuse.xlfs xlfs:local rw,user_id=0,group_id=0,default_permissions,allow_other
36 22 0:32 / /proc rw - proc proc rw
";

    #[test]
    fn parses_mountinfo_with_escapes_and_optional_fields() {
        let m = parse_mountinfo(SAMPLE);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].mount_point, PathBuf::from("/"));
        assert_eq!(m[0].dev, "8:1");
        assert_eq!(m[1].dev, "0:31");
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[1].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(m[1].fstype, "fuse.xlfs");
        assert_eq!(m[1].source, "xlfs:local");
        assert!(is_xlfs(&m[1]) && !is_xlfs(&m[0]));
        assert_eq!(m[2].source, "proc");
    }

    #[test]
    fn unescape_leaves_plain_backslashes() {
        assert_eq!(unescape("a\\134b"), b"a\\b");
        assert_eq!(unescape("tail\\04"), b"tail\\04");
        assert_eq!(unescape("x\\"), b"x\\");
    }

    #[test]
    fn preflight_messages() {
        let base = std::env::temp_dir().join(format!("xlfs-preflight-{}", std::process::id()));
        std::fs::create_dir_all(&base).expect("mkdir");
        let missing = base.join("nope");
        let e = preflight(&missing, false).expect_err("missing");
        assert!(e.to_string().contains("does not exist"), "{e}");
        let file = base.join("file");
        std::fs::write(&file, b"x").expect("write");
        let e = preflight(&file, false).expect_err("not a dir");
        assert!(e.to_string().contains("is not a directory"), "{e}");
        let e = preflight(Path::new("/proc"), false).expect_err("busy");
        assert!(e.to_string().contains("busy"), "{e}");
        std::fs::remove_dir_all(&base).expect("cleanup");
    }
}
