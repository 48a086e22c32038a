//! Names: lookup, forget, and the fops that make, remove, rename or link one.

use super::*;

impl XlfsFs {
    pub(super) fn do_lookup(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEntry,
    ) {
        if name.as_bytes() == b"." {
            return self.lookup_handle(req, parent, reply);
        }
        // ".." (the kernel reconnecting a directory's file handle) goes to the graph like
        // any name: the brick answers with the parent. A fresh directory has it too.
        let loc = tri!(reply, self.loc(parent, name));
        if name.as_bytes() != b".."
            && let Some(ttl) = self.s.fresh.absent(parent, name)
        {
            return reply_negative(reply, &ttl);
        }
        let cx = ctx(req, Need::of(Fop::Lookup), None);
        let stamp = self.s.inodes.stamp();
        let pid = req.pid();
        self.spawn(|s| async move {
            let name = loc.name.clone();
            let r = s.graph().top().lookup(&cx, loc).await;
            let r = s.in_dir(pid, parent, r);
            if r == Err(Errno::ENOENT) && !s.opts.negative_timeout.is_zero() {
                return reply_negative(reply, &s.opts.negative_timeout);
            }
            s.reply_entry_at(reply, r, stamp, parent, &name, true);
        });
    }

    pub(super) fn do_forget(&self, ino: INodeNo, nlookup: u64) {
        self.s.inodes.forget(ino, nlookup);
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let loc = tri!(reply, self.loc(parent, name));
        let cx = ctx(req, Need::of(Fop::Mknod), None);
        let stamp = self.s.inodes.stamp();
        let ds = self.s.inodes.begin_dir_op(parent);
        self.s.fresh.adding(parent, name);
        let pid = req.pid();
        self.spawn(|s| async move {
            let name = loc.name.clone();
            // The kernel's 32-bit dev encoding equals glibc's dev_t for majors < 4096.
            let r = s
                .graph()
                .top()
                .mknod(&cx, loc, mode, u64::from(rdev), umask)
                .await;
            let r = s.in_dir(pid, parent, r);
            s.end_dir_op(parent, ds, r.as_ref().ok().map(|e| &e.postparent));
            s.reply_entry_at(reply, r, stamp, parent, &name, false);
        });
    }

    pub(super) fn do_mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let loc = tri!(reply, self.loc(parent, name));
        let cx = ctx(req, Need::of(Fop::Mkdir), None);
        let stamp = self.s.inodes.stamp();
        let ds = self.s.inodes.begin_dir_op(parent);
        self.s.fresh.adding(parent, name);
        let sent = Instant::now();
        let pid = req.pid();
        self.spawn(|s| async move {
            let r = s.graph().top().mkdir(&cx, loc, mode, umask).await;
            let r = s.in_dir(pid, parent, r);
            s.end_dir_op(parent, ds, r.as_ref().ok().map(|e| &e.postparent));
            s.reply_entry_made(reply, r, stamp, Some(sent), None);
        });
    }

    pub(super) fn do_unlink(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
    ) {
        let loc = tri!(reply, self.loc(parent, name));
        let cx = ctx(req, Need::of(Fop::Unlink), None);
        let ds = self.s.inodes.begin_dir_op(parent);
        let gone = name.to_owned();
        let pid = req.pid();
        self.spawn(|s| async move {
            // The kernel invalidates the victim's cached attributes (nlink, ctime) itself.
            let r = s.graph().top().unlink(&cx, loc).await;
            let r = s.in_dir(pid, parent, r);
            if r.is_ok() {
                s.inodes.unlink_name(parent, &gone);
            }
            s.end_removal(parent, ds, reply, r);
        });
    }

    pub(super) fn do_rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let loc = tri!(reply, self.loc(parent, name));
        let cx = ctx(req, Need::of(Fop::Rmdir), None);
        let ds = self.s.inodes.begin_dir_op(parent);
        let pid = req.pid();
        self.spawn(|s| async move {
            let r = s.graph().top().rmdir(&cx, loc).await;
            let r = s.in_dir(pid, parent, r);
            s.end_removal(parent, ds, reply, r);
        });
    }

    pub(super) fn do_symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let loc = tri!(reply, self.loc(parent, link_name));
        let target = tri!(reply, name_str(target.as_os_str()));
        let cx = ctx(req, Need::of(Fop::Symlink), None);
        let stamp = self.s.inodes.stamp();
        let ds = self.s.inodes.begin_dir_op(parent);
        self.s.fresh.adding(parent, link_name);
        let pid = req.pid();
        self.spawn(|s| async move {
            let name = loc.name.clone();
            let r = s.graph().top().symlink(&cx, loc, target).await;
            let r = s.in_dir(pid, parent, r);
            s.end_dir_op(parent, ds, r.as_ref().ok().map(|e| &e.postparent));
            s.reply_entry_at(reply, r, stamp, parent, &name, false);
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let old = tri!(reply, self.loc(parent, name));
        let new = tri!(reply, self.loc(newparent, newname));
        let cx = ctx(req, Need::of(Fop::Rename), None);
        let ds = [
            self.s.inodes.begin_dir_op(parent),
            self.s.inodes.begin_dir_op(newparent),
        ];
        self.s.fresh.adding(newparent, newname);
        let names = (name.to_owned(), newname.to_owned());
        let pid = req.pid();
        self.spawn(|s| async move {
            let r = s.graph().top().rename(&cx, old, new, flags.bits()).await;
            // (Either directory may be the one gone: the retry walks both again.)
            let r = s.in_dir(pid, parent, r);
            s.inodes.end_dir_op(parent, ds[0], None);
            s.inodes.end_dir_op(newparent, ds[1], None);
            if r.is_ok() {
                // The kernel moves its cached name once it has the reply; so does the
                // record, first (an exchange swaps two: both are dropped instead).
                if flags.bits() & libc::RENAME_EXCHANGE != 0 {
                    s.inodes.unlink_name(parent, &names.0);
                    s.inodes.unlink_name(newparent, &names.1);
                } else {
                    s.inodes.rename_name(parent, &names.0, newparent, &names.1);
                }
            }
            reply_empty(reply, r);
        });
    }

    pub(super) fn do_link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let new = tri!(reply, self.loc(newparent, newname));
        let cx = ctx(req, Need::of(Fop::Link), None);
        let stamp = self.s.inodes.stamp();
        let ds = self.s.inodes.begin_dir_op(newparent);
        self.s.fresh.adding(newparent, newname);
        self.spawn(|s| async move {
            // The reply carries the new nlink, so the kernel's attributes are fresh.
            let name = new.name.clone();
            // (Its ESTALE may be the file's, replaced under the name the kernel resolved:
            // kept, see docs/consistency.md.)
            let r = s.graph().top().link(&cx, gfid, new).await;
            s.end_dir_op(newparent, ds, r.as_ref().ok().map(|e| &e.postparent));
            s.reply_entry_at(reply, r, stamp, newparent, &name, false);
        });
    }
}
