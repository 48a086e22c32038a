//! The case table, by group.

mod attr;
mod data;
mod dir;
mod links;
mod misc;
mod namespace;
mod perms;
mod rename;
mod xattr;

use super::Case;

/// Every case, in run order.
pub(crate) fn all() -> Vec<Case> {
    [
        namespace::cases(),
        data::cases(),
        dir::cases(),
        rename::cases(),
        links::cases(),
        xattr::cases(),
        attr::cases(),
        perms::cases(),
        misc::cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
