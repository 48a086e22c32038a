#![doc = include_str!("../README.md")]
//!
//! ```
//! use xlator_api::XlatorOptions;
//! let schema = xlfs_posix::PosixOptions::schema();
//! assert_eq!(schema[0].key.as_str(), "directory");
//! assert!(schema[0].is_required());
//! ```

mod acl;
mod atime;
mod brick;
mod checksum;
mod creds;
mod data;
mod dir;
mod direct;
mod entry;
mod fdtable;
mod gfid;
mod handle;
mod health;
mod iatt;
mod index;
mod inode;
mod options;
mod reaper;
mod staged;
mod stats;
mod sys;
mod wanted;
mod xattr;
mod xlator;

pub use gfid::{GfidReq, ino_of};
pub use handle::{Layout, META_DIR};
#[doc(hidden)]
pub use health::{ProbeHook, set_probe_hook};
pub use index::{
    Found, INDEX_DIR, Located, PENDING_PREFIX, SETTLE as INDEX_SETTLE, entries as index_entries,
    index_path, locate,
};
pub use options::{GfidXattrMode, PosixOptions};
pub use xlator::Posix;

xlator_api::export_translators!(Posix);
