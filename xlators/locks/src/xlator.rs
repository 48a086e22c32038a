//! The features/locks translator: answers `lk`, `inodelk` and `entrylk` itself (and takes
//! the locks an `xattrop`'s [`LocksAround`] asks for around it, and those a `create`'s asks
//! to keep with the new file), drops an
//! owner's POSIX locks on `flush`, an fd's on `release` and a client's on `forget_client`;
//! every other fop passes through, the modifying ones after the migration barrier's gate
//! ([`crate::gate`], [`crate::barrier`]). Every lock is keyed by (client, owner) ([`Owner`]).

use std::sync::Arc;

use xlator_api::abi_stable::std_types::RString;
use xlator_api::abi_stable::std_types::RVec;
#[allow(unused_imports)] // used by the generated fops
use xlator_api::*;
use xlator_api::{
    AroundLock, Buf, ClientId, Ctx, Dump, EntrylkCmd, Errno, Fd, FdId, Flock, Fop, Gfid, Init,
    LOCKS_AROUND_CREATE_XATTR, LOCKS_AROUND_XATTR, LkCmd, LkModeChecked, Loc, LockKind,
    LocksAround, Subvol, Translator, Xattr, XattropOp,
};

use crate::barrier::{self, Admitted, Barriers};
use crate::dump::LISTED_MAX;
use crate::gate::{self, Gate};
use crate::owner::{Owner, client_of};
use crate::range::{Held, Kind, Range};
use crate::table::{LockTable, Space};

pub struct Locks {
    children: Vec<Subvol>,
    table: Arc<LockTable>,
    barriers: Barriers,
    /// For lock-contention upcalls.
    services: HostServices,
}

/// The lock a POSIX request of the caller of `cx` describes (`None`: an unlock).
fn request(cx: &Ctx, fd: FdId, lock: &Flock) -> Result<(Option<Kind>, Held), Errno> {
    let range = Range::from_start_len(lock.start, lock.len).ok_or(Errno::EINVAL)?;
    let kind = match lock.kind {
        LockKind::Read => Some(Kind::Read),
        LockKind::Write => Some(Kind::Write),
        LockKind::Unlock => None,
    };
    let held = Held {
        kind: kind.unwrap_or(Kind::Read),
        range,
        owner: Owner::new(cx, lock.owner),
        fd,
        pid: lock.pid,
    };
    Ok((kind, held))
}

fn to_flock(h: &Held) -> Flock {
    Flock {
        kind: if h.kind == Kind::Write {
            LockKind::Write
        } else {
            LockKind::Read
        },
        start: h.range.start,
        len: h.range.len(),
        pid: h.pid,
        owner: h.owner.lk,
    }
}

/// POSIX: a read lock needs an fd open for reading, a write lock one open for writing.
fn check_mode(fd: &Fd, kind: Kind) -> Result<(), Errno> {
    let acc = fd.flags & libc::O_ACCMODE;
    let ok = match kind {
        Kind::Read => acc == libc::O_RDONLY || acc == libc::O_RDWR,
        Kind::Write => acc == libc::O_WRONLY || acc == libc::O_RDWR,
    };
    if ok { Ok(()) } else { Err(Errno::EBADF) }
}

impl Locks {
    async fn range_op(
        &self,
        g: Gfid,
        s: Space,
        cmd: LkCmd,
        kind: Option<Kind>,
        req: Held,
    ) -> Result<Option<Held>, Errno> {
        match (cmd, kind) {
            (LkCmd::Get, None) => Err(Errno::EINVAL),
            (LkCmd::Get, Some(_)) => Ok(self.table.test(g, &s, &req)),
            (LkCmd::Set | LkCmd::SetWait, None) => {
                self.table.unlock(g, &s, req.owner, req.range);
                Ok(None)
            }
            (LkCmd::Set, Some(_)) => self.table.try_lock(g, &s, req).map(|_| None),
            (LkCmd::SetWait, Some(_)) => self.table.lock_wait(g, &s, req).await.map(|_| None),
        }
    }

    /// Lets a fop through its gate: at once, or after the barrier of another client on its
    /// file went. Keep the result until the fop is done.
    async fn admit(&self, cx: &Ctx, gate: Gate, loc: Option<&Loc>) -> Option<Admitted<'_>> {
        match gate {
            Gate::Free => None,
            Gate::On(g) => Some(self.barriers.admit(g, client_of(cx)).await),
            Gate::ByName => {
                if let Some(a) = self.barriers.admit_by_name() {
                    return Some(a);
                }
                // Some barrier exists: find which file the name would truncate. No such name:
                // the create makes a new file, which no barrier can be on.
                let e = self.children[0].lookup(cx, loc?.clone()).await.ok()?;
                Some(self.barriers.admit(e.attr.gfid, client_of(cx)).await)
            }
        }
    }

    async fn lk_fop(&self, cx: &Ctx, fd: Fd, cmd: LkCmd, lock: Flock) -> Result<Flock, Errno> {
        let (kind, req) = request(cx, fd.id, &lock)?;
        if let (Some(k), LkCmd::Set | LkCmd::SetWait) = (kind, cmd)
            && cx.ext::<LkModeChecked>().is_none()
        {
            check_mode(&fd, k)?;
        }
        match self.range_op(fd.gfid, Space::Posix, cmd, kind, req).await? {
            Some(conflict) => Ok(to_flock(&conflict)),
            None => Ok(Flock {
                kind: LockKind::Unlock,
                ..lock
            }),
        }
    }

    async fn inodelk_fop(
        &self,
        cx: &Ctx,
        domain: RString,
        gfid: Gfid,
        cmd: LkCmd,
        lock: Flock,
    ) -> Result<(), Errno> {
        let (kind, req) = request(cx, FdId::ANONYMOUS, &lock)?;
        let barrier = domain.as_str() == barrier::DOMAIN;
        let space = Space::Domain(domain.into());
        let r = if barrier {
            crate::migrate::inodelk(&self.table, &self.barriers, gfid, &space, cmd, kind, req)
                .await?
        } else {
            if kind.is_some() && matches!(cmd, LkCmd::Set | LkCmd::SetWait) {
                self.tell_holder(gfid, &space, &req);
            }
            self.range_op(gfid, space, cmd, kind, req).await?
        };
        match r {
            Some(_) => Err(Errno::EAGAIN),
            None => Ok(()),
        }
    }

    /// When another client's inodelk stands in `req`'s way, tells that client (a
    /// lock-contention upcall: cluster/replicate gives up a lock it holds eagerly).
    fn tell_holder(&self, gfid: Gfid, space: &Space, req: &Held) {
        if let (Some(other), Space::Domain(domain)) = (self.table.test(gfid, space, req), space) {
            self.tell(gfid, domain, other.owner, req.owner);
        }
    }

    /// When another client's entrylk stands in the way of `(name, owner)`, tells that client
    /// (cluster/replicate gives up a directory it holds eagerly).
    fn tell_entry_holder(&self, parent: Gfid, domain: &str, name: Option<&str>, owner: Owner) {
        if let Some(other) = self.table.entry_holder(parent, domain, name, owner) {
            self.tell(parent, domain, other, owner);
        }
    }

    /// A lock-contention upcall of `gfid` in `domain` to `holder`'s client, when that is not
    /// the asker's own client.
    fn tell(&self, gfid: Gfid, domain: &str, holder: Owner, asker: Owner) {
        if let Some(client) = holder.client
            && holder.client != asker.client
        {
            self.services
                .upcall_parents(&Upcall::contention(gfid, domain, client));
        }
    }

    async fn entrylk_fop(
        &self,
        cx: &Ctx,
        domain: RString,
        loc: Loc,
        cmd: EntrylkCmd,
    ) -> Result<(), Errno> {
        let name = (!loc.name.is_empty()).then_some(loc.name.as_str());
        let owner = Owner::new(cx, cx.lk_owner());
        if cmd != EntrylkCmd::Unlock {
            self.tell_entry_holder(loc.parent, &domain, name, owner);
        }
        match cmd {
            EntrylkCmd::Lock => {
                self.table
                    .entry_wait(loc.parent, &domain, name, owner)
                    .await
            }
            EntrylkCmd::LockNonBlocking => {
                if self.table.entry_try(loc.parent, &domain, name, owner) {
                    Ok(())
                } else {
                    Err(Errno::EAGAIN)
                }
            }
            EntrylkCmd::Unlock => self.table.entry_unlock(loc.parent, &domain, name, owner),
        }
    }

    /// Takes (`LkCmd::Set`, `EntrylkCmd::LockNonBlocking`) or gives back one lock of a
    /// [`LocksAround`] for the caller.
    async fn around(&self, cx: &Ctx, l: &AroundLock, take: bool) -> Result<(), Errno> {
        match l {
            AroundLock::Inode { domain, gfid } => {
                let lock = Flock {
                    kind: if take {
                        LockKind::Write
                    } else {
                        LockKind::Unlock
                    },
                    start: 0,
                    len: 0,
                    pid: 0,
                    owner: cx.lk_owner(),
                };
                self.inodelk_fop(cx, domain.as_str().into(), *gfid, LkCmd::Set, lock)
                    .await
            }
            AroundLock::Entry {
                domain,
                parent,
                name,
            } => {
                let cmd = if take {
                    EntrylkCmd::LockNonBlocking
                } else {
                    EntrylkCmd::Unlock
                };
                let loc = Loc::new(*parent, name.as_str());
                self.entrylk_fop(cx, domain.as_str().into(), loc, cmd).await
            }
        }
    }

    async fn give_back(&self, cx: &Ctx, locks: &[AroundLock]) {
        for l in locks.iter().rev() {
            // Nothing to answer: a lock not held (its owner's client went) is simply gone.
            let _ = self.around(cx, l, false).await;
        }
    }

    /// `xattrop` with the locks its [`LocksAround`] asks for taken before and given back
    /// after (see there); without one, as every other fop.
    async fn xattrop_fop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xattrs: RVec<Xattr>,
    ) -> Result<RVec<Xattr>, Errno> {
        let around = cx.ext::<LocksAround>();
        if let Some(a) = &around {
            for (k, l) in a.take.iter().enumerate() {
                if let Err(e) = self.around(cx, l, true).await {
                    self.give_back(cx, &a.take[..k]).await;
                    return Err(e);
                }
            }
        }
        let r = {
            let _admitted = self
                .admit(cx, gate::classify(Fop::Xattrop, Some(gfid), None), None)
                .await;
            self.children[0].xattrop(cx, gfid, op, xattrs).await
        };
        if let Some(a) = &around {
            if r.is_err() {
                self.give_back(cx, &a.take).await;
            }
            self.give_back(cx, &a.give).await;
        }
        r
    }

    /// `create` with the locks its [`LocksAround`] asks for (`take`) taken just before the
    /// file is made and kept for the caller, given back if the create fails or opens an
    /// existing file of another GFID; without one, as every other fop. The file's GFID is
    /// new, so nobody else holds them: a refusal (EAGAIN, a GFID in use) fails the create
    /// before it touches anything.
    async fn create_fop(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let take = cx.ext::<LocksAround>().map(|a| a.take).unwrap_or_default();
        for (k, l) in take.iter().enumerate() {
            if let Err(e) = self.around(cx, l, true).await {
                self.give_back(cx, &take[..k]).await;
                return Err(e);
            }
        }
        let r = {
            let gate = gate::classify(Fop::Create, Some(fd.gfid), Some(fd.flags));
            let _admitted = self.admit(cx, gate, Some(&loc)).await;
            self.children[0].create(cx, loc, fd, mode, umask).await
        };
        // Kept only with the file they name: a create of a name that exists may open that
        // file (another GFID) instead of making one.
        let made = |e: &Entry| {
            take.iter()
                .all(|l| !matches!(l, AroundLock::Inode { gfid, .. } if *gfid != e.attr.gfid))
        };
        if !r.as_ref().is_ok_and(made) {
            self.give_back(cx, &take).await;
        }
        r
    }

    /// Answers [`LOCKS_AROUND_XATTR`] and [`LOCKS_AROUND_CREATE_XATTR`] (this translator
    /// honours [`LocksAround`] on xattrops and creates); every other name goes to the child.
    async fn getxattr_fop(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        if name.as_str() == LOCKS_AROUND_XATTR || name.as_str() == LOCKS_AROUND_CREATE_XATTR {
            return Ok(Buf::from_vec(b"1".to_vec()));
        }
        self.children[0].getxattr(cx, gfid, name).await
    }

    async fn flush_fop(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.table
            .release_owner(fd.gfid, Owner::new(cx, cx.lk_owner()));
        self.children[0].flush(cx, fd).await
    }

    async fn release_fop(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        if !fd.is_anonymous() {
            self.table.release_fd(fd.gfid, client_of(cx), fd.id);
        }
        self.children[0].release(cx, fd).await
    }

    /// Drops the client's locks and waiting requests here, then tells the child (something
    /// below may hold state for the client too); a child that does not know the fop (ENOSYS,
    /// as storage/posix) had nothing to drop.
    async fn forget_client_fop(&self, cx: &Ctx, client: ClientId) -> Result<(), Errno> {
        self.table.forget_client(Some(client));
        // After the table: a barrier waiting behind the client's is granted there first.
        self.barriers.forget_client(Some(client));
        match self.children[0].forget_client(cx, client).await {
            Err(Errno::ENOSYS) => Ok(()),
            r => r,
        }
    }
}

/// The body of fop `$name`: the lock fops and the closers are this translator's own
/// (`*_fop` methods); every other fop passes the barrier gate its attributes call for
/// ([`gate::classify`]) and goes to the child, admitted until its reply.
macro_rules! fop_body {
    (lk, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.lk_fop($cx $(, $a)*).await };
    (inodelk, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.inodelk_fop($cx $(, $a)*).await };
    (entrylk, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.entrylk_fop($cx $(, $a)*).await };
    (flush, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.flush_fop($cx $(, $a)*).await };
    (xattrop, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.xattrop_fop($cx $(, $a)*).await };
    (getxattr, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.getxattr_fop($cx $(, $a)*).await };
    (release, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.release_fop($cx $(, $a)*).await };
    (create, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => { $s.create_fop($cx $(, $a)*).await };
    (forget_client, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => {
        $s.forget_client_fop($cx $(, $a)*).await
    };
    ($name:ident, $s:ident, $cx:ident, $V:ident, ($($a:ident),*)) => {{
        let target: Option<Gfid> = None $(.or(arg_of!(target, $a, $a)))*;
        let flags: Option<i32> = None $(.or(arg_of!(flags, $a, $a)))*;
        let loc: Option<&Loc> = None $(.or(arg_of!(loc, $a, $a)))*;
        let _admitted = $s.admit($cx, gate::classify(Fop::$V, target, flags), loc).await;
        $s.children[0].$name($cx $(, $a)*).await
    }};
}

/// What the gate needs from argument `$a` (matched by its name in the fop table: a `gfid`
/// is the object, an `fd` names its file and open flags, a `loc` a name).
macro_rules! arg_of {
    (target, gfid, $v:ident) => {
        Some($v)
    };
    (target, fd, $v:ident) => {
        Some($v.gfid)
    };
    (flags, fd, $v:ident) => {
        Some($v.flags)
    };
    (loc, loc, $v:ident) => {
        Some(&$v)
    };
    ($what:ident, $other:ident, $v:ident) => {
        None
    };
}

/// Every fop of the table, each with its [`fop_body!`].
macro_rules! locks_fops {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                fop_body!($name, self, cx, $Variant, ($($arg),*))
            }
        )*
    };
}

impl Translator for Locks {
    const TYPE: &'static str = "features/locks";
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "POSIX byte-range locks (lk) for applications, and the internal \
        inodelk/entrylk locks cluster translators take on bricks.";
    type Options = ();

    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(Locks {
            children: init.children,
            table: Arc::new(LockTable::default()),
            barriers: Barriers::default(),
            services: init.services,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn dump(&self) -> Dump {
        self.table
            .dump(LISTED_MAX)
            .with("migration", self.barriers.dump(LISTED_MAX))
    }

    xlator_api::for_each_fop!(locks_fops);
}
