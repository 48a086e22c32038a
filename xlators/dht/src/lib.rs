#![doc = include_str!("../README.md")]

mod ahead;
pub mod cookie;
mod dir;
mod dirlock;
pub mod dirrename;
mod entry;
pub mod hash;
pub mod layout;
mod links;
mod lookup;
mod meta;
pub mod migrate;
pub mod options;
mod shared;
mod xlator;

pub use dirlock::{DIR_LOCK_DOMAIN, LAYOUT_LOCK_DOMAIN};
pub use layout::{LAYOUT_XATTR, Layout, Slice};
pub use options::DhtOptions;
pub use shared::{LINK_MODE, LINKTO_XATTR};
pub use xlator::{Dht, DhtAlias, Distribute, DistributeAs, Primary, Spelling};

xlator_api::export_translators!(Distribute, Dht);
