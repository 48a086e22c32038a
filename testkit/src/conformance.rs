//! A POSIX-semantics conformance suite that runs in-process against any graph, given its top
//! [`Subvol`] (no mount), gated by what the graph supports ([`Caps`]) — the behaviour-suite
//! idea of Apache OpenDAL.
//!
//! Each case makes its own uniquely named directory (mode 0777) under the root, so cases are
//! independent and the suite can run on a volume that already holds data. Cases run one after
//! another, each under a timeout; a panicking case fails without stopping the run.
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)] async fn main() {
//! use xlfs_testkit::conformance::{self, Caps};
//! let top = xlfs_testkit::memfs::MemLeaf::new();
//! let report = conformance::run(&top, Caps { locks: false, ..Caps::all() }).await;
//! println!("{report}");
//! report.assert_all_passed();
//! # }
//! ```

mod cases;
mod env;
mod report;

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use xlator_api::{Ctx, Gfid, Loc, Subvol};

use env::{CaseResult, Env};
pub use report::{CaseReport, Outcome, Report};

/// What the graph under test supports. Cases needing a missing capability are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `link`: hard links sharing a GFID, with `nlink`.
    pub hardlinks: bool,
    /// `symlink` / `readlink`.
    pub symlinks: bool,
    /// `setxattr` & co on `user.*` names, with XATTR_CREATE/XATTR_REPLACE.
    pub xattrs: bool,
    /// `mknod` of FIFOs.
    pub mknod: bool,
    /// Permission checks for non-root callers (mode bits, ownership, sticky directories).
    pub permissions: bool,
    /// `fallocate`, `discard`, `zerofill`.
    pub fallocate: bool,
    /// `seek` with SEEK_DATA / SEEK_HOLE.
    pub seek: bool,
    /// POSIX byte-range locks through `lk`.
    pub locks: bool,
    /// Names longer than 255 bytes fail with ENAMETOOLONG.
    pub name_max: bool,
    /// An open file stays readable after its last name is removed.
    pub open_unlinked: bool,
    /// `readv`/`writev` through anonymous fds.
    pub anonymous_fds: bool,
    /// `xattrop` counter arithmetic on `trusted.*` names.
    pub xattrop: bool,
    /// Directory `nlink` counts subdirectories (2 + subdirs).
    pub dir_nlink: bool,
}

impl Caps {
    /// Everything (what `storage/memory` and `storage/posix` provide).
    pub fn all() -> Caps {
        Caps {
            hardlinks: true,
            symlinks: true,
            xattrs: true,
            mknod: true,
            permissions: true,
            fallocate: true,
            seek: true,
            locks: true,
            name_max: true,
            open_unlinked: true,
            anonymous_fds: true,
            xattrop: true,
            dir_nlink: true,
        }
    }

    /// Only what every graph must do: files, directories, data, rename, attributes.
    pub fn none() -> Caps {
        Caps {
            hardlinks: false,
            symlinks: false,
            xattrs: false,
            mknod: false,
            permissions: false,
            fallocate: false,
            seek: false,
            locks: false,
            name_max: false,
            open_unlinked: false,
            anonymous_fds: false,
            xattrop: false,
            dir_nlink: false,
        }
    }

    fn has(&self, need: Need) -> bool {
        match need {
            Need::Hardlinks => self.hardlinks,
            Need::Symlinks => self.symlinks,
            Need::Xattrs => self.xattrs,
            Need::Mknod => self.mknod,
            Need::Permissions => self.permissions,
            Need::Fallocate => self.fallocate,
            Need::Seek => self.seek,
            Need::Locks => self.locks,
            Need::NameMax => self.name_max,
            Need::OpenUnlinked => self.open_unlinked,
            Need::AnonymousFds => self.anonymous_fds,
            Need::Xattrop => self.xattrop,
            Need::DirNlink => self.dir_nlink,
        }
    }
}

/// One capability a case needs (mirrors the fields of [`Caps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Hardlinks,
    Symlinks,
    Xattrs,
    Mknod,
    Permissions,
    Fallocate,
    Seek,
    Locks,
    NameMax,
    OpenUnlinked,
    AnonymousFds,
    Xattrop,
    DirNlink,
}

impl fmt::Display for Need {
    /// The [`Caps`] field that grants this need.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Need::Hardlinks => "hardlinks",
            Need::Symlinks => "symlinks",
            Need::Xattrs => "xattrs",
            Need::Mknod => "mknod",
            Need::Permissions => "permissions",
            Need::Fallocate => "fallocate",
            Need::Seek => "seek",
            Need::Locks => "locks",
            Need::NameMax => "name_max",
            Need::OpenUnlinked => "open_unlinked",
            Need::AnonymousFds => "anonymous_fds",
            Need::Xattrop => "xattrop",
            Need::DirNlink => "dir_nlink",
        })
    }
}

/// One conformance case.
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) needs: &'static [Need],
    pub(crate) run: fn(Env) -> BoxFuture<'static, CaseResult>,
}

/// Declares a [`Case`] for an `async fn(Env) -> CaseResult` in scope.
macro_rules! case {
    ($group:literal, $f:ident $(, $need:ident)*) => {
        $crate::conformance::Case {
            name: concat!($group, "::", stringify!($f)),
            needs: &[$($crate::conformance::Need::$need),*],
            run: |env| Box::pin($f(env)),
        }
    };
}
pub(crate) use case;

/// Longest a single case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Names of every case, in run order.
pub fn case_names() -> Vec<&'static str> {
    cases::all().iter().map(|c| c.name).collect()
}

/// Runs every case against `top`. Needs a tokio runtime with timers (as `#[tokio::test]`
/// provides); use a multi-threaded one, some cases run fops from spawned tasks.
pub async fn run(top: &Subvol, caps: Caps) -> Report {
    run_matching(top, caps, |_| true).await
}

/// Runs the cases whose name contains `filter` (e.g. `"rename"` or `"data::append"`).
pub async fn run_filtered(top: &Subvol, caps: Caps, filter: &str) -> Report {
    run_matching(top, caps, |n| n.contains(filter)).await
}

async fn run_matching(top: &Subvol, caps: Caps, select: impl Fn(&str) -> bool) -> Report {
    let mut report = Report::default();
    for case in cases::all().into_iter().filter(|c| select(c.name)) {
        let start = Instant::now();
        let outcome = match case.needs.iter().find(|n| !caps.has(**n)) {
            Some(n) => Outcome::Skipped(format!("graph lacks capability `{n}`")),
            None => run_case(top, &case).await,
        };
        let elapsed = if matches!(outcome, Outcome::Skipped(_)) {
            Duration::ZERO
        } else {
            start.elapsed()
        };
        report.cases.push(CaseReport {
            name: case.name,
            outcome,
            elapsed,
        });
    }
    report
}

async fn run_case(top: &Subvol, case: &Case) -> Outcome {
    let cx = Ctx::root();
    let name = format!(
        "conformance.{}.{}",
        case.name.replace("::", "."),
        Gfid::random()
    );
    let dir = match top
        .mkdir(&cx, Loc::new(Gfid::ROOT, name.as_str()), 0o777, 0)
        .await
    {
        Ok(e) => e.attr.gfid,
        Err(e) => return Outcome::Failed(format!("setup: mkdir {name:?} in the root: {e:?}")),
    };
    let env = Env {
        top: top.clone(),
        cx,
        dir,
    };
    let fut = AssertUnwindSafe((case.run)(env)).catch_unwind();
    match tokio::time::timeout(CASE_TIMEOUT, fut).await {
        Ok(Ok(Ok(()))) => Outcome::Passed,
        Ok(Ok(Err(msg))) => Outcome::Failed(msg),
        Ok(Err(p)) => Outcome::Failed(format!("panicked: {}", xlator_api::panic_message(&p))),
        Err(_) => Outcome::Failed(format!("timed out after {CASE_TIMEOUT:?}")),
    }
}
