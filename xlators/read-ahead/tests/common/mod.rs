//! Test support specific to read-ahead: building it with 4 KiB pages. The rest (options,
//! the scripted remote file, fd helpers, counters) comes from `xlfs_testkit`.
#![allow(dead_code)]

use xlator_api::Subvol;
use xlfs_read_ahead::ReadAhead;
use xlfs_testkit::build::build;

/// read-ahead with 4 KiB pages over `child`.
pub fn read_ahead(set: &[(&str, &str)], child: Subvol) -> Subvol {
    let mut all = vec![("page-size", "4KiB")];
    all.extend_from_slice(set);
    build::<ReadAhead>(&all, vec![child])
}

/// The page size [`read_ahead`] sets.
pub const PS: u64 = 4096;
