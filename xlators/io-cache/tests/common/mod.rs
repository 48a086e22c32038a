//! Test support specific to io-cache: building it with 4 KiB pages. The rest (options,
//! the scripted remote file, fd helpers, counters) comes from `xlfs_testkit`.
#![allow(dead_code)]

use xlator_api::Subvol;
use xlfs_io_cache::IoCache;
use xlfs_testkit::build::build;

/// io-cache with 4 KiB pages over `child`.
pub fn io_cache(set: &[(&str, &str)], child: Subvol) -> Subvol {
    let mut all = vec![("page-size", "4KiB")];
    all.extend_from_slice(set);
    build::<IoCache>(&all, vec![child])
}

/// The page size [`io_cache`] sets.
pub const PS: u64 = 4096;
