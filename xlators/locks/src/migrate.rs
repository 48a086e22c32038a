//! The migration barrier as an `inodelk`: a whole-file write lock in domain
//! [`barrier::DOMAIN`](crate::barrier::DOMAIN) is an ordinary inodelk (exclusion, waiting,
//! deadlock checks, forget_client, cancellation all as for any domain) that, once the lock
//! table granted it, also puts a barrier mark on the file and waits for the modifying fops
//! in flight on it to finish ([`Barriers::drain`]) before it answers. It is refused with
//! EBUSY while the file has POSIX (`lk`) locks or waiting `lk` requests: cluster/distribute
//! then leaves the file where it is, since application locks would not follow its data.
//! Other inodelks of the domain (read locks, parts of the file) are plain inodelks.
//!
//! Unlocking leaves the barrier when the owner no longer holds a whole-file write lock in
//! the domain. A request given up during its drain (its future dropped) or whose client was
//! forgotten meanwhile takes its mark off and gives the lock back.

use xlator_api::{Errno, Gfid, LkCmd};

use crate::barrier::Barriers;
use crate::range::{Held, Kind, Range};
use crate::table::{LockTable, Space};

const WHOLE: Range = Range {
    start: 0,
    end: u64::MAX,
};

/// An `inodelk` in the barrier domain (`kind: None` is an unlock).
pub(crate) async fn inodelk(
    table: &LockTable,
    barriers: &Barriers,
    g: Gfid,
    s: &Space,
    cmd: LkCmd,
    kind: Option<Kind>,
    req: Held,
) -> Result<Option<Held>, Errno> {
    match (cmd, kind) {
        (LkCmd::Get, None) => Err(Errno::EINVAL),
        (LkCmd::Get, Some(_)) => Ok(table.test(g, s, &req)),
        (LkCmd::Set | LkCmd::SetWait, None) => {
            table.unlock(g, s, req.owner, req.range);
            if !table.holds_write(g, s, req.owner, WHOLE) {
                barriers.remove(g, req.owner);
            }
            Ok(None)
        }
        (LkCmd::Set | LkCmd::SetWait, Some(k)) if k != Kind::Write || req.range != WHOLE => {
            match cmd {
                LkCmd::SetWait => table.lock_wait(g, s, req).await?,
                _ => table.try_lock(g, s, req)?,
            }
            Ok(None)
        }
        (LkCmd::Set | LkCmd::SetWait, Some(_)) => {
            take(table, barriers, g, s, cmd, req).await?;
            Ok(None)
        }
    }
}

/// Takes the barrier: the lock (EBUSY while POSIX locks are there), the mark, the drain.
async fn take(
    table: &LockTable,
    barriers: &Barriers,
    g: Gfid,
    s: &Space,
    cmd: LkCmd,
    req: Held,
) -> Result<(), Errno> {
    if barriers.holds(g, req.owner) {
        // Asked again by its holder: the lock and the mark are there; answer once drained
        // (the first request may still be draining).
        return barriers.drain(g, req.owner).await;
    }
    if cmd == LkCmd::SetWait {
        if table.posix_busy(g) {
            return Err(Errno::EBUSY);
        }
        table.lock_wait(g, s, req).await?;
        if table.posix_busy(g) {
            // POSIX locks came while it waited for the previous barrier.
            table.unlock(g, s, req.owner, req.range);
            return Err(Errno::EBUSY);
        }
    } else {
        table.try_lock_unless_posix(g, s, req)?;
    }
    let mut undo = Undo {
        table,
        barriers,
        g,
        s,
        req,
        armed: true,
    };
    barriers.install(g, req.owner);
    barriers.drain(g, req.owner).await?;
    undo.armed = false;
    Ok(())
}

/// Gives a barrier back that was not granted after all (failed or abandoned drain).
struct Undo<'a> {
    table: &'a LockTable,
    barriers: &'a Barriers,
    g: Gfid,
    s: &'a Space,
    req: Held,
    armed: bool,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.barriers.remove(self.g, self.req.owner);
            self.table
                .unlock(self.g, self.s, self.req.owner, self.req.range);
        }
    }
}
