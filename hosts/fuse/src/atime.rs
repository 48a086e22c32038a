//! Access times on the mount (`--atime`, `--nodiratime`, the mount helper's `noatime`,
//! `relatime`, `strictatime`, `nodiratime`).
//!
//! The kernel leaves atime to a FUSE file system (its inodes are S_NOATIME) and serves many
//! reads from its page cache, so the bricks decide: storage/posix counts every open for
//! reading, and every listing, as an access under the brick file system's own rule (see
//! its `atime` module). This mount then only
//! - asks for no access at all where its options say so: O_NOATIME on the open of a file
//!   (`noatime`, or a read-only mount) or of a directory (also `nodiratime`);
//! - drops the kernel's cached attributes after an open that may have moved the atime, so a
//!   stat(2) right after shows it: under `relatime`, when the attributes it last gave the
//!   kernel say the brick's relatime rule would update it (atime not after mtime or ctime,
//!   or a day old) — the first read after a change, not every read; under `strictatime`,
//!   after every reading open.
//!
//! `strictatime` cannot make a brick on a relatime file system update atime on every read:
//! the only update that keeps ctime is a read under the brick's own rule. Bricks on a
//! file system mounted `strictatime` give strict behaviour.

use std::time::{SystemTime, UNIX_EPOCH};

use xlator_api::Iatt;

/// `--atime`: when reads update a file's access time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AtimeMode {
    /// The first read after the file changed, or a day after the last update (the Linux
    /// default).
    #[default]
    Relatime,
    /// Every read, as far as the bricks' file system updates it (see the module doc).
    Strictatime,
    /// Never.
    Noatime,
}

/// What a mount does about access times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Atime {
    pub mode: AtimeMode,
    /// Listings never update a directory's atime.
    pub nodiratime: bool,
    /// A read-only mount updates no atime (as the kernel's own read-only mounts).
    pub read_only: bool,
}

/// One day: relatime updates an atime at least that old.
const DAY_SECS: i64 = 24 * 60 * 60;

impl Atime {
    fn files_untouched(&self) -> bool {
        self.mode == AtimeMode::Noatime || self.read_only
    }

    /// The graph open flags of a regular file opened with `flags`, O_NOATIME added when
    /// this mount wants no access recorded and the open may read.
    pub fn file_flags(&self, flags: i32) -> i32 {
        if self.files_untouched() && flags & libc::O_ACCMODE != libc::O_WRONLY {
            flags | libc::O_NOATIME
        } else {
            flags
        }
    }

    /// The graph open flags of a directory opened with `flags`.
    pub fn dir_flags(&self, flags: i32) -> i32 {
        if self.files_untouched() || self.nodiratime {
            flags | libc::O_NOATIME
        } else {
            flags
        }
    }

    /// Whether an open with graph flags `flags` of a file whose attributes, as last given to
    /// the kernel, were `last` (None: unknown) may have moved its atime on the brick, so the
    /// kernel's cached attributes must go.
    pub fn may_touch(&self, flags: i32, last: Option<&Iatt>) -> bool {
        if flags & libc::O_ACCMODE == libc::O_WRONLY
            || flags & (libc::O_NOATIME | libc::O_TRUNC | libc::O_DIRECT) != 0
        {
            return false;
        }
        match (self.mode, last) {
            (AtimeMode::Noatime, _) => false,
            (AtimeMode::Strictatime, _) | (AtimeMode::Relatime, None) => true,
            (AtimeMode::Relatime, Some(a)) => relatime_updates(a, now_secs()),
        }
    }
}

/// The kernel's relatime rule: an access updates atime if it is not after mtime or ctime,
/// or at least a day old.
fn relatime_updates(a: &Iatt, now: i64) -> bool {
    let (at, mt, ct) = (
        (a.atime.sec, a.atime.nsec),
        (a.mtime.sec, a.mtime.nsec),
        (a.ctime.sec, a.ctime.nsec),
    );
    at <= mt || at <= ct || now - a.atime.sec >= DAY_SECS
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::Timespec;

    fn attr(atime: i64, mtime: i64, ctime: i64) -> Iatt {
        let t = |sec| Timespec { sec, nsec: 0 };
        Iatt {
            atime: t(atime),
            mtime: t(mtime),
            ctime: t(ctime),
            ..Iatt::default()
        }
    }

    #[test]
    fn relatime_follows_the_kernels_rule() {
        let now = 10 * DAY_SECS;
        assert!(
            relatime_updates(&attr(now - 5, now - 5, now - 5), now),
            "equal"
        );
        assert!(
            relatime_updates(&attr(now - 9, now - 5, now - 9), now),
            "older than mtime"
        );
        assert!(
            relatime_updates(&attr(now - 9, now - 9, now - 5), now),
            "older than ctime"
        );
        assert!(
            !relatime_updates(&attr(now - 1, now - 5, now - 5), now),
            "read since"
        );
        assert!(
            relatime_updates(&attr(now - DAY_SECS, 0, 0), now),
            "a day old"
        );
    }

    #[test]
    fn options_choose_the_flags_and_when_to_drop_attributes() {
        let ro = libc::O_RDONLY;
        let read_since = attr(i64::MAX / 2, 0, 0);
        let relatime = Atime::default();
        assert_eq!(relatime.file_flags(ro), ro);
        assert_eq!(relatime.dir_flags(ro), ro);
        assert!(relatime.may_touch(ro, None), "unknown attributes");
        assert!(!relatime.may_touch(ro, Some(&read_since)));
        assert!(relatime.may_touch(ro, Some(&attr(5, 5, 5))));
        assert!(!relatime.may_touch(libc::O_WRONLY, None), "no read");
        assert!(!relatime.may_touch(libc::O_RDWR | libc::O_TRUNC, None));

        let noatime = Atime {
            mode: AtimeMode::Noatime,
            ..Atime::default()
        };
        assert_eq!(noatime.file_flags(ro), ro | libc::O_NOATIME);
        assert_eq!(noatime.file_flags(libc::O_WRONLY), libc::O_WRONLY);
        assert_eq!(noatime.dir_flags(ro), ro | libc::O_NOATIME);
        assert!(!noatime.may_touch(noatime.file_flags(ro), None));

        let nodiratime = Atime {
            nodiratime: true,
            ..Atime::default()
        };
        assert_eq!(nodiratime.file_flags(ro), ro);
        assert_eq!(nodiratime.dir_flags(ro), ro | libc::O_NOATIME);

        let read_only = Atime {
            mode: AtimeMode::Strictatime,
            read_only: true,
            ..Atime::default()
        };
        assert_eq!(
            read_only.file_flags(libc::O_RDWR),
            libc::O_RDWR | libc::O_NOATIME
        );
        assert_eq!(read_only.dir_flags(ro), ro | libc::O_NOATIME);

        let strict = Atime {
            mode: AtimeMode::Strictatime,
            ..Atime::default()
        };
        assert!(strict.may_touch(ro, Some(&read_since)), "every read");
    }
}
