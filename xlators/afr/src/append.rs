//! O_APPEND writes, resolved by replicate itself.
//!
//! A brick places an O_APPEND write at its own end of file. Sent as it is to every replica,
//! one append lands at different offsets wherever the replicas' sizes differ, and two appends
//! of one client in flight at once may reach the replicas in different orders: the copies
//! diverge with no counter saying so. So replicate never lets O_APPEND reach its children
//! (neither in the fds it opens there nor on a write): under the write's inodelk (the
//! transaction's, or the client's eager hold, kept exclusive for the append) it asks the
//! participants that are good copies for their size, takes the largest (an append never
//! overwrites what any good copy holds), and sends one positional write at that offset to
//! every participant. Appends of other clients wait for the lock, so each finds the end of
//! file the previous one made.

use futures::future::join_all;
use xlator_api::{Ctx, Errno, Fd};

use crate::shared::{Shared, first_error};

/// Whether a write with per-write `flags` through `fd` appends (the per-write flag the FUSE
/// host sends, or an fd opened with O_APPEND by another host).
pub(crate) fn appends(fd: Fd, flags: i32) -> bool {
    (fd.flags | flags) & libc::O_APPEND != 0
}

/// `fd` as the children see it: without O_APPEND (see the module doc).
pub(crate) fn below(fd: Fd) -> Fd {
    Fd {
        flags: fd.flags & !libc::O_APPEND,
        ..fd
    }
}

/// The end of file an append through `fd` goes to: the largest size among the children in
/// `sources` (the participants that are good copies). Errs with the children's error when
/// none answers.
pub(crate) async fn end_of_file(
    sh: &Shared,
    cx: &Ctx,
    fd: Fd,
    sources: &[bool],
) -> Result<u64, Errno> {
    let fd = below(fd);
    let sizes = join_all((0..sh.n()).filter(|&i| sources[i]).map(|i| async move {
        sh.fds.ensure(i, &sh.children[i], cx, fd).await?;
        sh.children[i].fstat(cx, fd).await.map(|a| a.size)
    }))
    .await;
    let mut end: Option<u64> = None;
    let mut errs = Vec::new();
    for r in sizes {
        match r {
            Ok(size) => end = Some(end.map_or(size, |e| e.max(size))),
            Err(e) => errs.push(e),
        }
    }
    end.ok_or_else(|| first_error(errs))
}
