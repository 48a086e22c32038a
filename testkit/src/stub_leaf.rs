//! [`StubLeaf`] (`test/leaf`): a leaf translator with a few fixed answers, for tests of
//! translators that only observe or pass fops through (counting, logging) and need a child
//! that succeeds, fails and takes time in known ways — without scripting a mock.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlator_api::{Ctx, Errno, Gfid, Loc};
//! use xlfs_testkit::stub_leaf::{StubLeaf, ro_fd};
//!
//! let leaf = StubLeaf::new();
//! let cx = Ctx::root();
//! assert_eq!(leaf.lookup(&cx, Loc::new(Gfid::ROOT, "missing")).await, Err(Errno::ENOENT));
//! assert_eq!(leaf.writev(&cx, ro_fd(), 0, "x".into(), 0).await, Err(Errno::EBADF));
//! assert_eq!(leaf.statfs(&cx, Gfid::ROOT).await, Err(Errno::ENOSYS));
//! # }
//! ```
//!
//! To name it in a volfile, register it in the test binary:
//! `xlator_api::export_translators!(xlfs_testkit::stub_leaf::StubLeaf);`.

use std::time::Duration;

use xlator_api::{
    Buf, Ctx, Entry, Errno, Fd, Gfid, HostServices, Init, Loc, ReadReply, Subvol, Translator,
    WriteReply,
};

use crate::build::try_build;
use crate::fixtures::fd;

/// Size of the one file the leaf pretends to hold.
pub const FILE_SIZE: u64 = 10_000;
/// How long the leaf's `fsync` takes.
pub const FSYNC_DELAY: Duration = Duration::from_millis(2);

/// The leaf: `lookup` fails for the names "missing" (ENOENT) and "forbidden" (EACCES) and
/// succeeds with a default entry otherwise; `readv` returns zeroes from a
/// [`FILE_SIZE`]-byte file; `writev` accepts everything except on an fd whose flags are
/// exactly `O_RDONLY` (EBADF); `fsync` takes [`FSYNC_DELAY`]. Every other fop is the SDK
/// default, which answers ENOSYS for a translator without children.
pub struct StubLeaf {
    services: HostServices,
}

impl StubLeaf {
    /// An instance named `leaf`.
    ///
    /// Uses [`xlfs_core::services::host_services`]: call it inside a tokio runtime.
    #[allow(clippy::new_ret_no_self)] // the translator lives behind the Subvol, as in a graph
    pub fn new() -> Subvol {
        try_build::<StubLeaf>("leaf", &[], Vec::new()).expect("the test leaf builds")
    }
}

/// A read-write fd (id 7) on the root: the leaf accepts writes through it.
pub fn rw_fd() -> Fd {
    fd(7, Gfid::ROOT, libc::O_RDWR)
}

/// A read-only fd (id 8) on the root: the leaf refuses writes through it with EBADF.
pub fn ro_fd() -> Fd {
    fd(8, Gfid::ROOT, libc::O_RDONLY)
}

impl Translator for StubLeaf {
    const TYPE: &'static str = "test/leaf";
    const DOC: &'static str = "Fixed answers for tests: lookup of \"missing\"/\"forbidden\" \
        fails, readv returns zeroes, writev through a read-only fd fails, fsync is slow.";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    type Options = ();

    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(StubLeaf {
            services: init.services,
        })
    }

    fn children(&self) -> &[Subvol] {
        &[]
    }

    async fn lookup(&self, _cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        match loc.name.as_str() {
            "missing" => Err(Errno::ENOENT),
            "forbidden" => Err(Errno::EACCES),
            _ => Ok(Entry::default()),
        }
    }

    async fn readv(&self, _cx: &Ctx, _fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let n = FILE_SIZE.saturating_sub(offset).min(u64::from(size));
        Ok(ReadReply::data(Buf::zeroed(n as usize)))
    }

    async fn writev(
        &self,
        _cx: &Ctx,
        fd: Fd,
        _offset: u64,
        data: Buf,
        _flags: i32,
    ) -> Result<WriteReply, Errno> {
        if fd.flags == libc::O_RDONLY {
            Err(Errno::EBADF)
        } else {
            Ok(WriteReply::written(data.len() as u64))
        }
    }

    async fn fsync(&self, _cx: &Ctx, _fd: Fd, _datasync: bool) -> Result<(), Errno> {
        self.services.sleep(FSYNC_DELAY).await;
        Ok(())
    }
}
