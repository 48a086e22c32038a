//! The translator: which fops are transactions, which are reads, which go to every child.
//!
//! | fops | handling |
//! |---|---|
//! | writev, fallocate, discard, zerofill | data transaction, under the eager hold when on ([`crate::eager`]); an O_APPEND write gets its offset there, once for all ([`crate::append`]) |
//! | setattr, fsetattr | metadata transaction (data + metadata with a size) |
//! | setxattr, fsetxattr, removexattr, fremovexattr, setxattrs, xattrop, fxattrop | metadata transaction |
//! | create, mkdir, mknod, symlink, link, unlink, rmdir, rename | entry transaction on the parent(s), one GFID on every child |
//! | lookup | every up child, learns the counters, heals ([`crate::reads::lookup`]) |
//! | stat, fstat, access, readlink, getxattr, fgetxattr, listxattr, getxattrs, statfs, readv, seek, rchecksum | one readable child, fail over |
//! | readdirp | one readable child per directory fd |
//! | open, opendir | every up child, without O_APPEND (O_TRUNC: then a truncate transaction, by GFID with the caller's rights for a read-only fd); a read-only open only its read child, the others on the fd's first use there |
//! | flush, fsync, fsyncdir, release, releasedir | every child holding the fd (fsync ends the eager hold first) |
//! | lk | every child holding the fd (every up child for a read-only fd opened on its read child) |
//! | inodelk, entrylk, forget_client | every up child |
//!
//! `getxattr(gfid, "replica.heal")` heals the object now (a hook for the heal commands).

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::join_all;
use xlator_api::abi_stable::std_types::{ROption, RString, RVec};
use xlator_api::{
    Buf, ClientId, Ctx, DirEntry, Dump, DumpValue, Entry, EntrylkCmd, Errno, Event, EventKind, Fd,
    FileType, Flock, Gfid, GfidReq, Iatt, Init, LkCmd, Loc, LockKind, Opened, Rchecksum, ReadReply,
    Removed, SeekWhat, SetAttr, Statfs, Subvol, Translator, WriteReply, Xattr, XattropOp, Xattrs,
};

use crate::changelog::Lanes;
use crate::eager::On;
use crate::options::{AfrOptions, Config, pending_keys};
use crate::reads::{self, read};
use crate::shared::{HEAR_ALL_WAIT, Handle, Shared, fails_over, first_error, lock};
use crate::transaction::{self, Plan, Replies};
use crate::{append, eager, heal};

/// How a build spells the type: `cluster/replicate`, or its alias `cluster/afr`.
pub trait Spelling: Send + Sync + 'static {
    const TYPE: &'static str;
}

/// `cluster/replicate`.
pub struct Primary;
impl Spelling for Primary {
    const TYPE: &'static str = "cluster/replicate";
}

/// `cluster/afr`, GlusterFS's other name for it.
pub struct AfrAlias;
impl Spelling for AfrAlias {
    const TYPE: &'static str = "cluster/afr";
}

/// cluster/replicate, generic only over the name it is registered under.
pub struct ReplicateAs<S: Spelling> {
    sh: Handle,
    _spelling: PhantomData<S>,
}

pub type Replicate = ReplicateAs<Primary>;
pub type Afr = ReplicateAs<AfrAlias>;

/// The virtual xattr that heals an object on request.
pub const HEAL_XATTR: &str = "replica.heal";

impl<S: Spelling> ReplicateAs<S> {
    /// A data and/or metadata transaction on `gfid`.
    async fn inode_txn<R, F, Fut>(&self, gfid: Gfid, lanes: Lanes, op: F) -> Result<R, Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        // This client's own hold (both domains) would make the transaction wait for its
        // timer.
        eager::release_now(&self.sh, gfid).await;
        let cfg = self.sh.cfg();
        transaction::run(&self.sh, Plan::inode(&self.sh, gfid, lanes), op)
            .await?
            .reply_as_read(&cfg, gfid)
    }

    /// A data write through `fd`: eager when on.
    async fn data_write<R, F, Fut>(&self, fd: Fd, op: F) -> Result<R, Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        self.data_write_prepared(fd, false, |_| async { Ok(()) }, |i, ()| op(i))
            .await
    }

    /// A data write through `fd` whose fop needs `prepare`'s answer, learnt under the lock
    /// from the good copies (see [`transaction::run_prepared`] and [`eager::write`]).
    async fn data_write_prepared<R, P, G, GFut, F, Fut>(
        &self,
        fd: Fd,
        exclusive: bool,
        prepare: G,
        op: F,
    ) -> Result<R, Errno>
    where
        P: Copy,
        G: FnOnce(Vec<bool>) -> GFut,
        GFut: Future<Output = Result<P, Errno>>,
        F: Fn(usize, P) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        let cfg = self.sh.cfg();
        if cfg.eager_lock && !fd.is_anonymous() {
            eager::write(
                &self.sh,
                fd.gfid,
                On::File,
                Lanes::DATA,
                exclusive,
                prepare,
                op,
            )
            .await?
            .0
            .reply_as_read(&cfg, fd.gfid)
        } else {
            eager::release_now(&self.sh, fd.gfid).await;
            let plan = Plan::inode(&self.sh, fd.gfid, Lanes::DATA);
            transaction::run_prepared(&self.sh, plan, prepare, op)
                .await?
                .reply_as_read(&cfg, fd.gfid)
        }
    }

    /// Which eager hold an attribute change of `gfid` goes through, if any: a change of
    /// metadata only (a truncate ends the hold instead), with eager locking on, of a file
    /// that has a hold or is open through this translator (its hold then ends after
    /// `post-op-delay`), or of a directory (its metadata hold, [`On::Meta`]). A path-only
    /// `chmod` of a file nobody here has open stays a plain transaction.
    fn eager_meta(&self, gfid: Gfid, attr: &SetAttr) -> Option<On> {
        if attr.size.is_some() || !self.sh.cfg().eager_lock {
            return None;
        }
        if self.sh.eager.holds(gfid) || self.sh.fds.file_open(gfid) {
            return Some(On::File);
        }
        (self.sh.cached_kind(gfid) == Some(FileType::Directory)).then_some(On::Meta)
    }

    /// `setattr`/`fsetattr` (`op` on each child) of `gfid`: through the hold `eager` says
    /// ([`Self::eager_meta`]), or as a transaction of its own.
    async fn attr_change<F, Fut>(
        &self,
        gfid: Gfid,
        attr: &SetAttr,
        eager: Option<On>,
        op: F,
    ) -> Result<Iatt, Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<Iatt, Errno>>,
    {
        let Some(on) = eager else {
            return self.inode_txn(gfid, setattr_lanes(attr), op).await;
        };
        let cfg = self.sh.cfg();
        eager::write(
            &self.sh,
            gfid,
            on,
            Lanes::META,
            false,
            no_prepare,
            |i, ()| op(i),
        )
        .await?
        .0
        .reply_as_read(&cfg, gfid)
    }

    /// A namespace fop on the names `locs`: one name goes through its directory's eager hold
    /// when `entry-eager-lock` is on; a rename (two names) is a transaction of its own, after
    /// this client's holds of both directories end (they would make it wait for their timers).
    async fn entry_txn<R, F, Fut>(&self, locs: &[&Loc], op: F) -> Result<Replies<R>, Errno>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        let cfg = self.sh.cfg();
        if let [loc] = locs
            && cfg.eager_lock
            && cfg.entry_eager_lock
        {
            return eager::write(
                &self.sh,
                loc.parent,
                On::Dir,
                Lanes::ENTRY,
                true,
                no_prepare,
                |i, ()| op(i),
            )
            .await
            .map(|(replies, ())| replies);
        }
        for l in locs {
            eager::release_now(&self.sh, l.parent).await;
        }
        transaction::run(&self.sh, Plan::entry(&self.sh, locs), op).await
    }

    /// A new object's fop on every child with one GFID (the caller's, or a new one).
    /// Whether child `i`'s attributes `attr` of an object may be stale: its copy is not good
    /// to read for the lanes attributes come from (data for a file's size and times,
    /// metadata for every kind), as far as the cached state or the children's counters say.
    /// Unknown (the children cannot be asked) is not stale: child `i`'s answer stands.
    async fn stale_on(&self, i: usize, attr: &Iatt) -> bool {
        if attr.gfid.is_null() {
            return false;
        }
        let lanes = match attr.kind {
            FileType::Regular => Lanes::DATA | Lanes::META,
            _ => Lanes::META,
        };
        match reads::state_as(&self.sh, attr.gfid, attr.kind).await {
            Ok(st) => st.split(lanes) || !st.readable(lanes)[i],
            Err(_) => false,
        }
    }

    async fn make<F, Fut>(&self, cx: &Ctx, loc: Loc, op: F) -> Result<Entry, Errno>
    where
        F: Fn(usize, Ctx, Loc) -> Fut,
        Fut: Future<Output = Result<Entry, Errno>>,
    {
        let (_, r) = self.make_all(cx, loc, op).await?;
        r
    }

    async fn make_all<F, Fut>(
        &self,
        cx: &Ctx,
        loc: Loc,
        op: F,
    ) -> Result<(Vec<bool>, Result<Entry, Errno>), Errno>
    where
        F: Fn(usize, Ctx, Loc) -> Fut,
        Fut: Future<Output = Result<Entry, Errno>>,
    {
        let gfid = cx.ext::<GfidReq>().map_or_else(Gfid::random, |g| g.0);
        let gcx = cx.to_builder().ext(&GfidReq(gfid)).build();
        let generation = self.sh.generation.load(Ordering::Acquire);
        let replies = self
            .entry_txn(&[&loc], |i| op(i, gcx.clone(), loc.clone()))
            .await?;
        Ok(self.made(replies, gfid, generation))
    }

    /// The answer of a new object's fop (`replies`) that asked for `gfid`, `generation` of
    /// the children's state when it began: which children succeeded, and the answer, the new
    /// object's state remembered when it has that GFID.
    fn made(
        &self,
        replies: Replies<Entry>,
        gfid: Gfid,
        generation: u64,
    ) -> (Vec<bool>, Result<Entry, Errno>) {
        let ok = replies.succeeded();
        let r = replies.reply_as_read(&self.sh.cfg(), gfid);
        match &r {
            Ok(e) if e.attr.gfid == gfid => self.sh.made(gfid, e.attr.kind, &ok, generation),
            _ => self.sh.forget(gfid),
        }
        (ok, r)
    }

    /// `create` through the directory's eager hold, the new file made with its own eager hold
    /// when it can be ([`transaction::born_held`]): the create goes to every child up, each
    /// a good copy of the directory whose brick takes a create's locks. The file's first
    /// writes then find their hold taken (GlusterFS takes it with the first write: one more
    /// round trip per new file). The create's lock owner is the hold's. A create that did
    /// not make the file everywhere it went takes back what it made of the hold.
    async fn create_held(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<(Vec<bool>, Result<Entry, Errno>), Errno> {
        let sh = &self.sh;
        let gfid = cx.ext::<GfidReq>().map_or_else(Gfid::random, |g| g.0);
        let gcx = cx.to_builder().ext(&GfidReq(gfid)).build();
        let generation = sh.generation.load(Ordering::Acquire);
        let plan = Plan::inode(sh, gfid, Lanes::DATA | Lanes::META);
        let owner = sh.new_owner();
        // The children the create goes to with the hold (as a bit set: `prepare`'s answer is
        // `Copy`); `None` when it goes without.
        let prepare = |sources: Vec<bool>| async move {
            let up = sh.up_set();
            let held =
                sources == up && up.len() <= 64 && transaction::born_held_everywhere(sh, &up).await;
            Ok(held.then(|| bits_of(&up)))
        };
        let on_of = |b: u64| -> Vec<bool> { (0..sh.n()).map(|i| b & (1 << i) != 0).collect() };
        let op = |i: usize, held: Option<u64>| {
            let ccx = match held {
                None => gcx.clone(),
                Some(b) => {
                    let (around, marks) = transaction::born_held(sh, &plan, i, &on_of(b));
                    let mut xs = cx.ext::<xlator_api::CreateXattrs>().unwrap_or_default();
                    xs.0.extend(marks.0);
                    gcx.to_builder()
                        .lk_owner(owner)
                        .ext(&around)
                        .ext(&xs)
                        .build()
                }
            };
            let loc = loc.clone();
            async move { self.child(i).create(&ccx, loc, fd, mode, umask).await }
        };
        let (replies, held) =
            eager::write(sh, loc.parent, On::Dir, Lanes::ENTRY, true, prepare, op).await?;
        if let Some(b) = held {
            let on = on_of(b);
            // Where it made this GFID's file (a create of a name that exists opens that
            // file instead, and the brick gave the locks back).
            let made: Vec<bool> = replies
                .0
                .iter()
                .map(|r| matches!(r, Some(Ok(e)) if e.attr.gfid == gfid))
                .collect();
            if made == on && sh.cfg().quorum.met(&made) {
                eager::adopt(sh, gfid, plan.clone(), owner, made).await;
            } else if made.iter().any(|m| *m) {
                transaction::unborn(sh, &plan, owner, &made, &on).await;
            }
        }
        Ok(self.made(replies, gfid, generation))
    }

    /// `op` on every up child (`on`: a narrower set); the first success, or the error.
    async fn all<R, F, Fut>(&self, on: Option<Vec<bool>>, op: F) -> (Vec<bool>, Result<R, Errno>)
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<R, Errno>>,
    {
        let up = self.sh.up_set();
        let set: Vec<bool> = match on {
            Some(on) => on.iter().zip(&up).map(|(a, b)| *a && *b).collect(),
            None => up,
        };
        let replies = transaction::fan_out(&set, &op).await;
        let ok = replies.succeeded();
        let mut errs = Vec::new();
        let mut first = None;
        for r in replies.0.into_iter().flatten() {
            match r {
                Ok(v) if first.is_none() => first = Some(v),
                Ok(_) => {}
                Err(e) => errs.push(e),
            }
        }
        let r = first.ok_or_else(|| first_error(errs));
        (ok, r)
    }

    /// A lock asked from above (another translator's inodelk or entrylk: distribute's
    /// directory locks, its migration barrier), taken as replicate takes its own
    /// ([`transaction::lock_in_order`]): locking every child at once and waiting, two clients
    /// could each hold a part the other waits for. `take(i, wait)` asks child `i`, `give(i)`
    /// gives its lock back. Granted when the children that granted make a quorum (a child
    /// without lock support counts as granted, as for replicate's own locks); otherwise
    /// those are given back and the first error is the answer (EAGAIN when busy and not
    /// `blocking`).
    async fn lock_from_above<T, TFut, G, GFut>(
        &self,
        blocking: bool,
        take: T,
        give: G,
    ) -> Result<(), Errno>
    where
        T: Fn(usize, bool) -> TFut,
        TFut: Future<Output = Result<(), Errno>>,
        G: Fn(usize) -> GFut,
        GFut: Future<Output = Result<(), Errno>>,
    {
        let take = |i, wait| {
            let f = take(i, wait);
            async move {
                match f.await {
                    Err(Errno::ENOSYS) => Ok(()),
                    r => r,
                }
            }
        };
        let give = |i| {
            let f = give(i);
            async move {
                let _ = f.await;
            }
        };
        let up = self.sh.up_set();
        let (granted, contended, errs) =
            transaction::lock_in_order(&up, blocking, &take, &give).await;
        let busy = |e: &Errno| matches!(*e, Errno::EAGAIN | Errno::EBUSY);
        if (blocking || !contended)
            && !errs.iter().any(busy)
            && granted.iter().any(|g| *g)
            && self.sh.cfg().quorum.met(&granted)
        {
            return Ok(());
        }
        join_all((0..granted.len()).filter(|&i| granted[i]).map(give)).await;
        Err(if !blocking && contended {
            Errno::EAGAIN
        } else if errs.is_empty() {
            Errno::ENOTCONN
        } else {
            first_error(errs)
        })
    }

    fn child(&self, i: usize) -> &Subvol {
        &self.sh.children[i]
    }

    /// The kind of `gfid` from the first up child that has it (every copy of one GFID is of
    /// one kind), whether or not its counters make it readable.
    async fn any_kind(&self, gfid: Gfid) -> Result<FileType, Errno> {
        let up = self.sh.up_set();
        let mut errs = Vec::new();
        for (child, _) in self.sh.children.iter().zip(&up).filter(|(_, u)| **u) {
            match child.stat(&Ctx::root(), gfid).await {
                Ok(a) => return Ok(a.kind),
                Err(e) => errs.push(e),
            }
        }
        if errs.is_empty() {
            return Err(Errno::ENOTCONN);
        }
        Err(first_error(errs))
    }

    /// The O_TRUNC of `open(fd)`, a transaction of its own once the children hold the fd.
    /// open(2) with O_TRUNC needs write permission whatever the access mode: a read-only fd
    /// is truncated by GFID with the caller's rights (EACCES for a user who may not write,
    /// as one brick answers; a truncate through the read-only fd would be EINVAL).
    async fn truncate_opened(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let zero = SetAttr {
            size: ROption::RSome(0),
            ..SetAttr::default()
        };
        if fd.flags & libc::O_ACCMODE == libc::O_RDONLY {
            self.setattr(cx, fd.gfid, zero).await.map(drop)
        } else {
            self.fsetattr(cx, fd, zero).await.map(drop)
        }
    }

    async fn ensure(&self, i: usize, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        self.sh
            .fds
            .ensure(i, self.child(i), cx, append::below(fd))
            .await
    }

    /// The entries of child `i`'s listing page, each looked up through replicate when that
    /// copy's attributes may be stale (see `readdirp`), those gone meanwhile left out, and
    /// the counters the caller did not ask for taken out.
    async fn check_entries(
        &self,
        cx: &Ctx,
        fd: Fd,
        i: usize,
        asked: &xlator_api::XattrReq,
        list: RVec<DirEntry>,
    ) -> RVec<DirEntry> {
        let checked = futures::future::join_all(list.into_iter().map(|mut d| {
            async move {
                // Counters this client's own idle hold of the file set (its pre-op: `tar x`
                // then `rm -rf` lists files whose holds still wait for their post-op) say
                // nothing the hold does not know better.
                let pending = d.xattrs.iter().any(|x| {
                    x.name.as_str().starts_with(crate::changelog::PREFIX)
                        && x.value.as_slice().iter().any(|b| *b != 0)
                }) && !self.sh.eager.holds_idle_with_good(d.attr.gfid, i);
                let dot = d.name.as_str() == "." || d.name.as_str() == "..";
                let stale = pending || (!dot && self.stale_on(i, &d.attr).await);
                if stale && !dot {
                    match reads::lookup(&self.sh, cx, Loc::new(fd.gfid, d.name.as_str())).await {
                        Ok(e) => {
                            d.attr = e.attr;
                            d.xattrs = e.xattrs;
                        }
                        // Gone since the listing was read.
                        Err(Errno::ENOENT | Errno::ESTALE) => return None,
                        Err(_) => {}
                    }
                }
                d.xattrs.retain(|x| {
                    !x.name.as_str().starts_with(crate::changelog::PREFIX) || asked.wants(&x.name)
                });
                Some(d)
            }
        }))
        .await;
        checked.into_iter().flatten().collect()
    }
}

impl<S: Spelling> Translator for ReplicateAs<S> {
    const TYPE: &'static str = S::TYPE;
    const DOC: &'static str = "Synchronous replication (GlusterFS AFR): every modification \
        goes to all replicas inside a lock + changelog transaction, reads go to a replica no \
        other accuses, quorum guards writes, split-brain answers EIO and lookups heal stale \
        replicas from good ones.";
    const MIN_CHILDREN: u32 = 1;
    const MAX_CHILDREN: u32 = 64;
    const ANNOUNCES_CHILD_UP: bool = true;
    type Options = AfrOptions;

    fn init(init: Init<AfrOptions>) -> Result<Self, String> {
        let n = init.children.len();
        let cfg =
            Config::from_options(&init.options, n).map_err(|e| format!("{}: {e}", init.name))?;
        let names: Vec<String> = init.children.iter().map(|c| c.name().to_string()).collect();
        let keys =
            pending_keys(&init.options, &names).map_err(|e| format!("{}: {e}", init.name))?;
        let sh = Shared::new(
            init.name,
            init.children,
            keys,
            init.child_state,
            init.services,
            cfg,
        );
        let sh = Arc::new(sh);
        // Children that never speak (a host that does not answer) do not keep the volume
        // down for more than HEAR_ALL_WAIT.
        let later = sh.clone();
        sh.services.spawn(async move {
            later.services.sleep(HEAR_ALL_WAIT).await;
            later.waited.store(true, Ordering::Release);
            later.announce_if_ready();
        });
        Ok(ReplicateAs {
            sh,
            _spelling: PhantomData,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.sh.children
    }

    fn reconfigure(&self, o: AfrOptions) -> Result<(), String> {
        let cfg = Config::from_options(&o, self.sh.n())?;
        let mut now = lock(&self.sh.cfg);
        if cfg.arbiter != now.arbiter {
            // Its brick stores no data: making a data brick an arbiter (or the reverse)
            // would lose data or trust what is not there.
            return Err(format!(
                "{}: arbiter-count cannot change on a running volume",
                self.sh.name
            ));
        }
        *now = cfg;
        Ok(())
    }

    /// A brick says another client waits for a lock this one holds: an eager hold of the
    /// file ends now instead of at `post-op-delay` (the others pass up to the caches).
    fn upcall(&self, _child: usize, up: &xlator_api::Upcall) -> bool {
        if !up.says(xlator_api::Upcall::LOCK_CONTENTION) {
            return true;
        }
        let (bg, gfid) = (self.sh.clone(), up.gfid);
        self.sh
            .services
            .spawn(async move { crate::eager::release_now(&bg, gfid).await });
        false
    }

    fn notify(&self, ev: Event) {
        let sh = &self.sh;
        match ev.kind {
            EventKind::ChildUp => {
                // What was learnt of the copies predates this child's return.
                sh.generation.fetch_add(1, Ordering::AcqRel);
                // The brick may have been replaced by one of another version.
                for known in [&sh.around, &sh.around_create] {
                    if let Some(a) = known.get(ev.child as usize) {
                        a.store(crate::shared::AROUND_UNKNOWN, Ordering::Release);
                    }
                }
                let (bg, i) = (sh.clone(), ev.child as usize);
                sh.services
                    .spawn(async move { transaction::unlock_stale(&bg, i).await });
                sh.heard_from(i);
                sh.announce_if_ready();
            }
            EventKind::ChildDown => {
                sh.heard_from(ev.child as usize);
                sh.announce_if_ready();
                sh.fds.child_lost(ev.child as usize);
                if sh.up.up_count() == 0 && sh.announced.swap(false, Ordering::AcqRel) {
                    sh.services.notify_parents(EventKind::ChildDown);
                }
            }
            EventKind::GraphSwitch => {
                // The post-ops and unlocks of the eager holds are owed to the bricks: sent
                // now, not after a timer the process may not live to see.
                let bg = sh.clone();
                sh.services
                    .spawn(async move { crate::eager::release_all(&bg).await });
            }
        }
    }

    fn dump(&self) -> Dump {
        crate::status::dump(&self.sh)
    }

    // ---- reads ----

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        reads::lookup(&self.sh, cx, loc).await
    }

    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        read(&self.sh, gfid, Lanes::DATA | Lanes::META, |i| {
            self.child(i).stat(cx, gfid)
        })
        .await
    }

    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        read(
            &self.sh,
            fd.gfid,
            Lanes::DATA | Lanes::META,
            |i| async move {
                self.ensure(i, cx, fd).await?;
                self.child(i).fstat(cx, fd).await
            },
        )
        .await
    }

    async fn access(&self, cx: &Ctx, gfid: Gfid, mask: u32) -> Result<(), Errno> {
        read(&self.sh, gfid, Lanes::META, |i| {
            self.child(i).access(cx, gfid, mask)
        })
        .await
    }

    async fn readlink(&self, cx: &Ctx, gfid: Gfid) -> Result<RString, Errno> {
        read(&self.sh, gfid, Lanes::META, |i| {
            self.child(i).readlink(cx, gfid)
        })
        .await
    }

    async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        if name.as_str() == HEAL_XATTR {
            // The kind from any copy: a stat through replicate needs a readable one, which
            // a file in split-brain (that a favorite-child-policy may resolve) has not.
            let kind = self.any_kind(gfid).await?;
            heal::object(&self.sh, gfid, kind).await?;
            return Ok(Buf::from_vec(b"healed".to_vec()));
        }
        read(&self.sh, gfid, Lanes::META, |i| {
            self.child(i).getxattr(cx, gfid, name.clone())
        })
        .await
    }

    async fn fgetxattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<Buf, Errno> {
        read(&self.sh, fd.gfid, Lanes::META, |i| {
            let name = name.clone();
            async move {
                self.ensure(i, cx, fd).await?;
                self.child(i).fgetxattr(cx, fd, name).await
            }
        })
        .await
    }

    async fn listxattr(&self, cx: &Ctx, gfid: Gfid) -> Result<RVec<RString>, Errno> {
        read(&self.sh, gfid, Lanes::META, |i| {
            self.child(i).listxattr(cx, gfid)
        })
        .await
    }

    async fn getxattrs(&self, cx: &Ctx, gfid: Gfid, names: RVec<RString>) -> Result<Xattrs, Errno> {
        read(&self.sh, gfid, Lanes::META, |i| {
            self.child(i).getxattrs(cx, gfid, names.clone())
        })
        .await
    }

    async fn statfs(&self, cx: &Ctx, gfid: Gfid) -> Result<Statfs, Errno> {
        read(&self.sh, gfid, Lanes::META, |i| {
            self.child(i).statfs(cx, gfid)
        })
        .await
    }

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        read(&self.sh, fd.gfid, Lanes::DATA, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).readv(cx, fd, offset, size).await
        })
        .await
    }

    async fn seek(&self, cx: &Ctx, fd: Fd, offset: u64, what: SeekWhat) -> Result<u64, Errno> {
        read(&self.sh, fd.gfid, Lanes::DATA, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).seek(cx, fd, offset, what).await
        })
        .await
    }

    async fn rchecksum(&self, cx: &Ctx, fd: Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        read(&self.sh, fd.gfid, Lanes::DATA, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).rchecksum(cx, fd, offset, len).await
        })
        .await
    }

    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        // Gated by quorum as lookups are: a listing's entries fill the kernel's cache too.
        if !self.sh.cfg().quorum.met(&self.sh.up_set()) {
            return Err(Errno::ENOTCONN);
        }
        let st = reads::state(&self.sh, fd.gfid).await?;
        if st.split(Lanes::ENTRY) {
            self.sh.split_brain(&fd.gfid.to_string(), "entry");
            return Err(Errno::EIO);
        }
        let up = self.sh.up_set();
        let mut readable: Vec<bool> = st
            .readable(Lanes::ENTRY)
            .iter()
            .zip(&up)
            .map(|(a, b)| *a && *b)
            .collect();
        let cfg = self.sh.cfg();
        if let Some(a) = self.sh.arbiter
            && readable.iter().enumerate().any(|(j, r)| *r && j != a)
        {
            // Its files' attributes are not their data's (no blocks): every regular file it
            // lists would be looked up again (`stale_on`).
            readable[a] = false;
        }
        let order = crate::read::order(&readable, cfg.read_policy, fd.gfid, &vec![0; self.sh.n()]);
        let Some(i) = self.sh.fds.readdir_child(fd, || order.first().copied()) else {
            return Err(Errno::ENOTCONN);
        };
        // Each entry's pending counters come with it: an entry whose copy on child `i` has
        // one that is not zero (a transaction open on it, or a copy entry heal just made and
        // its own heal has not filled in) is looked up instead of answered with child `i`'s
        // attributes, which may be stale. So is one whose copy on child `i` the other
        // children accuse (it missed writes while down, and is not healed yet): what this
        // instance knows of the object in the current generation says so, or, for an object
        // it knows nothing of yet, the children's counters, asked once (then known).
        let asked = cx.ext::<xlator_api::XattrReq>().unwrap_or_default();
        let mut req = asked.clone();
        req.prefixes.push(crate::changelog::PREFIX.to_owned());
        let (ccx, asked) = (&cx.to_builder().ext(&req).build(), &asked);
        // A page whose entries all went before their lookups is followed by the next.
        xlator_api::sdk::listing_page(offset, |offset| async move {
            let r = async {
                self.ensure(i, cx, fd).await?;
                self.child(i).readdirp(ccx, fd, offset, size).await
            }
            .await;
            let list = match r {
                Ok(list) => list,
                Err(e) => {
                    self.sh.fds.reset_readdir(fd);
                    return Err(e);
                }
            };
            let next = list.last().map(|d| d.next_offset);
            Ok((next, self.check_entries(cx, fd, i, asked, list).await))
        })
        .await
    }

    // ---- data and metadata transactions ----

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let down = append::below(fd);
        if !append::appends(fd, flags) {
            return self
                .data_write(fd, |i| {
                    let data = data.clone();
                    async move {
                        self.ensure(i, cx, fd).await?;
                        self.child(i).writev(cx, down, offset, data, flags).await
                    }
                })
                .await;
        }
        // An append: its offset is resolved once, under the lock, from the good copies;
        // every replica gets the same positional write ([`crate::append`]).
        let flags = flags & !libc::O_APPEND;
        self.data_write_prepared(
            fd,
            true,
            |sources| async move { append::end_of_file(&self.sh, cx, fd, &sources).await },
            |i, end| {
                let data = data.clone();
                async move {
                    self.ensure(i, cx, fd).await?;
                    self.child(i).writev(cx, down, end, data, flags).await
                }
            },
        )
        .await
    }

    async fn fallocate(
        &self,
        cx: &Ctx,
        fd: Fd,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        self.data_write(fd, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).fallocate(cx, fd, mode, offset, len).await
        })
        .await
    }

    async fn discard(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.data_write(fd, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).discard(cx, fd, offset, len).await
        })
        .await
    }

    async fn zerofill(&self, cx: &Ctx, fd: Fd, offset: u64, len: u64) -> Result<(), Errno> {
        self.data_write(fd, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).zerofill(cx, fd, offset, len).await
        })
        .await
    }

    async fn setattr(&self, cx: &Ctx, gfid: Gfid, attr: SetAttr) -> Result<Iatt, Errno> {
        let eager = self.eager_meta(gfid, &attr);
        self.attr_change(gfid, &attr, eager, |i| {
            self.child(i).setattr(cx, gfid, attr)
        })
        .await
    }

    async fn fsetattr(&self, cx: &Ctx, fd: Fd, attr: SetAttr) -> Result<Iatt, Errno> {
        let eager = if fd.is_anonymous() {
            None
        } else {
            self.eager_meta(fd.gfid, &attr)
        };
        self.attr_change(fd.gfid, &attr, eager, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).fsetattr(cx, fd, attr).await
        })
        .await
    }

    async fn setxattr(&self, cx: &Ctx, gfid: Gfid, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.inode_txn(gfid, Lanes::META, |i| {
            self.child(i).setxattr(cx, gfid, xattr.clone(), flags)
        })
        .await
    }

    async fn fsetxattr(&self, cx: &Ctx, fd: Fd, xattr: Xattr, flags: i32) -> Result<(), Errno> {
        self.inode_txn(fd.gfid, Lanes::META, |i| {
            let xattr = xattr.clone();
            async move {
                self.ensure(i, cx, fd).await?;
                self.child(i).fsetxattr(cx, fd, xattr, flags).await
            }
        })
        .await
    }

    async fn removexattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<(), Errno> {
        self.inode_txn(gfid, Lanes::META, |i| {
            self.child(i).removexattr(cx, gfid, name.clone())
        })
        .await
    }

    async fn fremovexattr(&self, cx: &Ctx, fd: Fd, name: RString) -> Result<(), Errno> {
        self.inode_txn(fd.gfid, Lanes::META, |i| {
            let name = name.clone();
            async move {
                self.ensure(i, cx, fd).await?;
                self.child(i).fremovexattr(cx, fd, name).await
            }
        })
        .await
    }

    async fn setxattrs(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        xattrs: Xattrs,
        flags: i32,
    ) -> Result<(), Errno> {
        self.inode_txn(gfid, Lanes::META, |i| {
            self.child(i).setxattrs(cx, gfid, xattrs.clone(), flags)
        })
        .await
    }

    async fn xattrop(
        &self,
        cx: &Ctx,
        gfid: Gfid,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.inode_txn(gfid, Lanes::META, |i| {
            self.child(i).xattrop(cx, gfid, op, xattrs.clone())
        })
        .await
    }

    async fn fxattrop(
        &self,
        cx: &Ctx,
        fd: Fd,
        op: XattropOp,
        xattrs: Xattrs,
    ) -> Result<Xattrs, Errno> {
        self.inode_txn(fd.gfid, Lanes::META, |i| {
            let xattrs = xattrs.clone();
            async move {
                self.ensure(i, cx, fd).await?;
                self.child(i).fxattrop(cx, fd, op, xattrs).await
            }
        })
        .await
    }

    // ---- namespace transactions ----

    async fn create(
        &self,
        cx: &Ctx,
        loc: Loc,
        fd: Fd,
        mode: u32,
        umask: u32,
    ) -> Result<Entry, Errno> {
        let down = append::below(fd);
        let cfg = self.sh.cfg();
        let (ok, r) = if cfg.eager_lock && cfg.entry_eager_lock {
            self.create_held(cx, loc, down, mode, umask).await?
        } else {
            self.make_all(cx, loc, |i, cx, loc| async move {
                self.child(i).create(&cx, loc, down, mode, umask).await
            })
            .await?
        };
        if let Ok(e) = &r {
            self.sh.fds.opened(
                Fd {
                    gfid: e.attr.gfid,
                    ..fd
                },
                false,
                ok,
            );
        }
        r
    }

    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        // A directory is born with every child's counter, at zero. On ext4 (256-byte inodes)
        // a directory's counters take its xattrs past what the inode holds, into a block of
        // their own (st_blocks 8 -> 16): from its birth, then, not at its first metadata
        // transaction, so its block count does not change under its users later (a
        // directory rename on distribute over replicate marks the directory with an xattr:
        // pjdfstest's rename::preserve_metadata_dir saw 8 blocks, then 16).
        let mut xs = cx.ext::<xlator_api::CreateXattrs>().unwrap_or_default();
        for k in &self.sh.keys {
            if !xs.0.iter().any(|(n, _)| n == k) {
                xs.0.push((k.clone(), vec![0; crate::changelog::LEN]));
            }
        }
        let cx = cx.to_builder().ext(&xs).build();
        self.make(&cx, loc, |i, cx, loc| async move {
            self.child(i).mkdir(&cx, loc, mode, umask).await
        })
        .await
    }

    async fn mknod(
        &self,
        cx: &Ctx,
        loc: Loc,
        mode: u32,
        rdev: u64,
        umask: u32,
    ) -> Result<Entry, Errno> {
        self.make(cx, loc, |i, cx, loc| async move {
            self.child(i).mknod(&cx, loc, mode, rdev, umask).await
        })
        .await
    }

    async fn symlink(&self, cx: &Ctx, loc: Loc, target: RString) -> Result<Entry, Errno> {
        self.make(cx, loc, |i, cx, loc| {
            let target = target.clone();
            async move { self.child(i).symlink(&cx, loc, target).await }
        })
        .await
    }

    async fn link(&self, cx: &Ctx, gfid: Gfid, new: Loc) -> Result<Entry, Errno> {
        let cfg = self.sh.cfg();
        self.entry_txn(&[&new], |i| self.child(i).link(cx, gfid, new.clone()))
            .await?
            .reply_as_read(&cfg, gfid)
    }

    async fn unlink(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let q = self.sh.cfg().quorum;
        self.entry_txn(&[&loc], |i| self.child(i).unlink(cx, loc.clone()))
            .await?
            .reply(q)
    }

    async fn rmdir(&self, cx: &Ctx, loc: Loc) -> Result<Removed, Errno> {
        let q = self.sh.cfg().quorum;
        self.entry_txn(&[&loc], |i| self.child(i).rmdir(cx, loc.clone()))
            .await?
            .reply(q)
    }

    async fn rename(&self, cx: &Ctx, old: Loc, new: Loc, flags: u32) -> Result<(), Errno> {
        let q = self.sh.cfg().quorum;
        self.entry_txn(&[&old, &new], |i| {
            self.child(i).rename(cx, old.clone(), new.clone(), flags)
        })
        .await?
        .reply(q)
    }

    // ---- fds ----

    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let plain = Fd {
            flags: fd.flags & !(libc::O_TRUNC | libc::O_APPEND),
            ..fd
        };
        // A read-only open goes to the child reads of the file will use: the others open the
        // fd on its first use there (a failover, a lock, an fsetattr), and a whole-file read
        // costs an open, a flush and a release fewer per extra replica.
        if fd.flags & (libc::O_ACCMODE | libc::O_TRUNC) == libc::O_RDONLY
            && let Some(i) = reads::first_read_child(&self.sh, fd.gfid, Lanes::DATA)
        {
            match self.child(i).open(cx, plain).await {
                Ok(opened) => {
                    self.sh.fds.opened_lazily(fd, i, self.sh.n());
                    return Ok(opened);
                }
                Err(e) if !fails_over(e) => return Err(e),
                // Every child up is asked below.
                Err(_) => {}
            }
        }
        let (ok, r) = self.all(None, |i| self.child(i).open(cx, plain)).await;
        let opened = r?;
        self.sh.fds.opened(fd, false, ok);
        if fd.flags & libc::O_TRUNC != 0
            && let Err(e) = self.truncate_opened(cx, fd).await
        {
            // The open fails as a whole: the children's fds are given back.
            let held = self.sh.fds.closed(fd, self.sh.n());
            let _ = self
                .all(Some(held), |i| self.child(i).release(cx, plain))
                .await;
            return Err(e);
        }
        Ok(opened)
    }

    async fn opendir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let (ok, r) = self.all(None, |i| self.child(i).opendir(cx, fd)).await;
        r?;
        self.sh.fds.opened(fd, true, ok);
        Ok(())
    }

    /// The file's eager hold outlives its flush and release (its timer, another client's
    /// lock or the next data transaction of this one end it): the attribute changes that
    /// follow a close (`tar x` sets the times by path then) go through it, and the close
    /// waits for no post-op.
    async fn flush(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let held = self.sh.fds.holders(fd);
        // Children that lost the fd have nothing of this caller's to flush.
        match self.all(held, |i| self.child(i).flush(cx, fd)).await.1 {
            Err(Errno::ENOTCONN) if self.sh.up.up_count() > 0 => Ok(()),
            r => r,
        }
    }

    async fn fsync(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        eager::release_now(&self.sh, fd.gfid).await;
        let held = self.sh.fds.holders(fd);
        self.all(held, |i| self.child(i).fsync(cx, fd, datasync))
            .await
            .1
    }

    async fn fsyncdir(&self, cx: &Ctx, fd: Fd, datasync: bool) -> Result<(), Errno> {
        let held = self.sh.fds.holders(fd);
        self.all(held, |i| self.child(i).fsyncdir(cx, fd, datasync))
            .await
            .1
    }

    async fn release(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let held = self.sh.fds.closed(fd, self.sh.n());
        self.sh.eager.forget(fd.gfid);
        self.all(Some(held), |i| self.child(i).release(cx, fd))
            .await
            .1
            .or(Ok(()))
    }

    async fn releasedir(&self, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let held = self.sh.fds.closed(fd, self.sh.n());
        self.all(Some(held), |i| self.child(i).releasedir(cx, fd))
            .await
            .1
            .or(Ok(()))
    }

    async fn lk(&self, cx: &Ctx, fd: Fd, cmd: LkCmd, lock: Flock) -> Result<Flock, Errno> {
        let held = self.sh.fds.lock_targets(fd);
        self.all(held, |i| async move {
            self.ensure(i, cx, fd).await?;
            self.child(i).lk(cx, fd, cmd, lock).await
        })
        .await
        .1
    }

    // ---- locks from above, housekeeping ----

    async fn inodelk(
        &self,
        cx: &Ctx,
        domain: RString,
        gfid: Gfid,
        cmd: LkCmd,
        lock: Flock,
    ) -> Result<(), Errno> {
        if cmd == LkCmd::Get || lock.kind == LockKind::Unlock {
            return self
                .all(None, |i| {
                    self.child(i).inodelk(cx, domain.clone(), gfid, cmd, lock)
                })
                .await
                .1;
        }
        let give = Flock {
            kind: LockKind::Unlock,
            ..lock
        };
        self.lock_from_above(
            cmd == LkCmd::SetWait,
            |i, wait| {
                let c = if wait { LkCmd::SetWait } else { LkCmd::Set };
                self.child(i).inodelk(cx, domain.clone(), gfid, c, lock)
            },
            |i| {
                self.child(i)
                    .inodelk(cx, domain.clone(), gfid, LkCmd::Set, give)
            },
        )
        .await
    }

    async fn entrylk(
        &self,
        cx: &Ctx,
        domain: RString,
        loc: Loc,
        cmd: EntrylkCmd,
    ) -> Result<(), Errno> {
        if cmd == EntrylkCmd::Unlock {
            return self
                .all(None, |i| {
                    self.child(i).entrylk(cx, domain.clone(), loc.clone(), cmd)
                })
                .await
                .1;
        }
        self.lock_from_above(
            cmd == EntrylkCmd::Lock,
            |i, wait| {
                let c = if wait {
                    EntrylkCmd::Lock
                } else {
                    EntrylkCmd::LockNonBlocking
                };
                self.child(i).entrylk(cx, domain.clone(), loc.clone(), c)
            },
            |i| {
                self.child(i)
                    .entrylk(cx, domain.clone(), loc.clone(), EntrylkCmd::Unlock)
            },
        )
        .await
    }

    async fn forget_client(&self, cx: &Ctx, client: ClientId) -> Result<(), Errno> {
        let all = vec![true; self.sh.n()];
        let _ = join_all(
            (0..self.sh.n())
                .filter(|&i| all[i])
                .map(|i| self.child(i).forget_client(cx, client)),
        )
        .await;
        Ok(())
    }
}

/// The children of `on` as a bit set (at most 64).
fn bits_of(on: &[bool]) -> u64 {
    on.iter()
        .enumerate()
        .filter(|(_, o)| **o)
        .fold(0, |b, (i, _)| b | (1 << i))
}

/// [`eager::write`]'s `prepare` for a fop that needs nothing learnt under the lock.
async fn no_prepare(_sources: Vec<bool>) -> Result<(), Errno> {
    Ok(())
}

/// The lanes a setattr changes: data too when it sets a size.
fn setattr_lanes(attr: &SetAttr) -> Lanes {
    match attr.size {
        ROption::RSome(_) => Lanes::DATA | Lanes::META,
        ROption::RNone => Lanes::META,
    }
}

/// Unused-kind guard: every value of `FileType` heals some lanes.
#[allow(dead_code)]
fn kinds_heal(k: FileType) -> Lanes {
    reads::lanes_of(k)
}

#[allow(dead_code)]
fn dump_value(v: Vec<String>) -> DumpValue {
    DumpValue::List(v.into_iter().map(|s| DumpValue::Str(s.into())).collect())
}
