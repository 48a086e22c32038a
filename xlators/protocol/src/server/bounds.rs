//! Size limits on what one request may make the brick allocate, applied to every call before
//! it goes down the graph. A `readv` or `readdirp` names how much it wants in a `u32`, and the
//! leaf reserves that much before it reads (storage/posix reserves the read buffer up front),
//! so without this one 4 GiB `readv` from any client made the brick allocate 4 GiB.
//!
//! A `readv` over the cap is refused with **EINVAL**, as protocol/client refuses one over its
//! own `max-write`: it is not clamped, because in this fop table a short read means end of
//! file (`xlator_api::for_each_fop!`), and a read cut short would make its caller (the
//! kernel's page cache, through FUSE) believe the file ends there. `rchecksum` is refused the
//! same way: its callers (afr's diff heal) skip the whole range they asked for when two
//! checksums match, so a checksum of a shorter range would skip bytes nobody compared. A
//! `readdirp` is **clamped**: its size is a budget ("at most about `size` bytes' worth") and a
//! listing that stops early is continued from its last cookie by every caller.
//!
//! `fallocate`, `discard` and `zerofill` take 64-bit lengths but allocate nothing for them
//! (the kernel does the work; posix's zerofill fallback writes from one 1 MiB buffer of
//! zeroes), so they pass unchanged.

use xlator_api::Errno;

use crate::wire::{HEADER_ROOM, Request};

/// The most a reply may carry to a client whose frames are at most `peer_max` bytes, when
/// the server's `max-read` is `max_read`.
pub fn read_cap(max_read: usize, peer_max: usize) -> u32 {
    let cap = max_read.min(peer_max.saturating_sub(HEADER_ROOM));
    u32::try_from(cap).unwrap_or(u32::MAX)
}

/// Clamps `req` to `cap` (see the module doc); `Err` for a request that must be refused.
pub fn apply(req: &mut Request, cap: u32) -> Result<(), Errno> {
    match req {
        Request::Readdirp { size, .. } => {
            *size = (*size).min(cap);
            Ok(())
        }
        Request::Readv { size: len, .. } | Request::Rchecksum { len, .. } if *len > cap => {
            Err(Errno::EINVAL)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{Fd, FdId, Gfid};

    fn fd() -> Fd {
        Fd {
            id: FdId(1),
            gfid: Gfid::ROOT,
            flags: 0,
        }
    }

    #[test]
    fn readdirp_is_clamped_readv_and_rchecksum_refused() {
        let cap = read_cap(1 << 20, (1 << 20) + HEADER_ROOM);
        assert_eq!(cap, 1 << 20);
        let mut r = Request::Readv {
            fd: fd(),
            offset: 0,
            size: u32::MAX,
        };
        assert_eq!(apply(&mut r, cap), Err(Errno::EINVAL));
        let mut r = Request::Readv {
            fd: fd(),
            offset: 0,
            size: 1 << 20,
        };
        apply(&mut r, cap).expect("at the cap");
        assert!(matches!(r, Request::Readv { size, .. } if size == 1 << 20));
        let mut r = Request::Readdirp {
            fd: fd(),
            offset: 0,
            size: u32::MAX,
        };
        apply(&mut r, cap).expect("clamped");
        assert!(matches!(r, Request::Readdirp { size, .. } if size == 1 << 20));
        let mut r = Request::Rchecksum {
            fd: fd(),
            offset: 0,
            len: (1 << 20) + 1,
        };
        assert_eq!(apply(&mut r, cap), Err(Errno::EINVAL));
        let mut r = Request::Rchecksum {
            fd: fd(),
            offset: 0,
            len: 1 << 20,
        };
        apply(&mut r, cap).expect("at the cap");
    }

    #[test]
    fn the_cap_never_exceeds_what_fits_a_reply_frame() {
        assert_eq!(read_cap(64 << 20, (1 << 20) + HEADER_ROOM), 1 << 20);
        assert_eq!(read_cap(1 << 20, 100), 0);
    }
}
