//! Small values and observations shared by translator tests: made-up GFIDs and fds, a file
//! created through a graph, counters read from a statedump, the reads a mock saw.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlfs_testkit::fixtures::{create_file, fd, gfid};
//! use xlfs_testkit::MemLeaf;
//!
//! assert_ne!(gfid(1), gfid(2));
//! assert_eq!(fd(3, gfid(1), libc::O_RDONLY).gfid, gfid(1));
//! let top = MemLeaf::new();
//! let f = create_file(&top, "f").await;
//! assert!(!f.gfid.is_null());
//! # }
//! ```

use xlator_api::{Ctx, Fd, FdId, Fop, Gfid, Loc, Subvol};

use crate::mock::{FopCall, MockHandle};

/// A made-up GFID numbered `n`: `11111111-…-111111nn`, distinct from [`Gfid::ROOT`] and
/// [`Gfid::NULL`].
pub const fn gfid(n: u8) -> Gfid {
    let mut b = [0x11; 16];
    b[15] = n;
    Gfid(b)
}

/// An fd numbered `id` on `gfid`, opened with the `open(2)` `flags`.
pub fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// Creates `name` (mode 0644) in the root of `top` as root, through fd 1 opened
/// `O_RDWR | O_CREAT`, and returns that fd with the new file's GFID. Panics if `create`
/// fails.
pub async fn create_file(top: &Subvol, name: &str) -> Fd {
    let fd = fd(1, Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let e = top
        .create(&Ctx::root(), Loc::new(Gfid::ROOT, name), fd, 0o644, 0)
        .await
        .expect("create");
    Fd {
        gfid: e.attr.gfid,
        ..fd
    }
}

/// The unsigned counter `key` in `sv`'s statedump (the first, depth first); panics if the
/// key is missing or not a counter.
pub fn counter(sv: &Subvol, key: &str) -> u64 {
    let d = sv.dump();
    d.find_u64(key)
        .unwrap_or_else(|| panic!("no counter {key} in {}", d.to_json()))
}

/// The `readv` calls that reached the mock `h`, as (offset, size), in arrival order.
pub fn reads(h: &MockHandle) -> Vec<(u64, u32)> {
    h.calls_of(Fop::Readv)
        .into_iter()
        .filter_map(|c| match c {
            FopCall::Readv { offset, size, .. } => Some((offset, size)),
            _ => None,
        })
        .collect()
}
