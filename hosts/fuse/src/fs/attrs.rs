//! Attributes: getattr, setattr, readlink, statfs and access.

use super::*;

impl XlfsFs {
    pub(super) fn do_getattr(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        let gfid = tri!(reply, self.gfid(ino));
        // A directory's attributes as the last entry fop in it left them (see inodes.rs).
        if let Some(a) = self.s.inodes.fresh_attr(ino, self.s.opts.attr_timeout) {
            return reply.attr(&self.s.opts.attr_timeout, &file_attr(ino, &a));
        }
        // A regular file's attributes as its latest read left them, valid for what is left
        // of the attribute timeout (the kernel keeps size and times itself; see inodes.rs).
        if self.s.opts.writeback_cache
            && let Some((a, left)) = self.s.inodes.file_attr(ino, self.s.opts.attr_timeout)
        {
            return reply.attr(&left, &file_attr(ino, &a));
        }
        let fd = fh.and_then(|fh| Some((fh, self.s.fds.get(fh)?)));
        let cx = ctx(req, Need::of(Fop::Stat), None);
        let stamp = self.s.inodes.stamp();
        let pid = req.pid();
        let fresh =
            self.s
                .inodes
                .take_fresh_for(ino, FRESH_NAME, pid, crate::inodes::Retry::Getattr);
        // The attributes the lookup of this stat's own path walk just gave, for a directory.
        let at_lookup = fresh.then(|| self.s.inodes.seen_dir_attr(ino)).flatten();
        self.spawn(|s| async move {
            // (A directory not opened on its graph yet is asked by GFID.)
            let fd = match fd {
                Some((fh, u)) => s.follow(fh, u).await.ok().filter(FdUse::opened),
                None => None,
            };
            let graph = s.graph();
            // A directory removed while open here answers as removed (see
            // `removed_dir_attr`): a brick may no longer know it even through the open fd
            // (distribute asks for a directory's attributes by GFID).
            let (cx, s) = (&cx, &s);
            let open_fstat = |u: FdUse| async move {
                match u.ensure_open().await {
                    Ok(()) => match u.top().fstat(cx, u.fd()).await {
                        Err(e) if gone(e) => s.removed_dir_attr(ino, &u).ok_or(e),
                        r => r,
                    },
                    Err(e) => s.removed_dir_attr(ino, &u).ok_or(e),
                }
            };
            let r = match fd {
                Some(u) => open_fstat(u).await,
                None => match graph.top().stat(cx, gfid).await {
                    // fstat(2) of an unlinked open file arrives without its fh (on the
                    // graph that fd is open on).
                    Err(e) if gone(e) => match s.fds.find_open(&gfid) {
                        Some(u) => open_fstat(u).await,
                        None => Err(e),
                    },
                    r => r,
                },
            };
            // A directory another client removed between the walk's lookup and this stat:
            // the stat answers as of the lookup, which its system call spans. An ESTALE would
            // make the kernel walk again, and under a name made and removed again meanwhile
            // the retry can fail the same way and reach the caller.
            let r = match (r, at_lookup) {
                (Err(e), Some(a)) if gone(e) => Ok(a),
                (r, _) => r,
            };
            if let Ok(a) = &r
                && s.drop_dead_name(ino, a, fresh).await
            {
                s.inodes.expect_retry(pid, crate::inodes::Retry::Getattr);
                return reply.error(fuser::Errno::ESTALE);
            }
            s.reply_attr(ino, reply, r, stamp);
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let fd = fh.and_then(|fh| Some((fh, self.s.fds.get(fh)?)));
        let attr = SetAttr {
            perm: mode.map(|m| m & 0o7777).into(),
            uid: uid.into(),
            gid: gid.into(),
            size: size.into(),
            atime: time_set(atime),
            mtime: size_mtime(size, time_set(mtime)),
        };
        // With the writeback cache the kernel re-sends its mtime with a new ctime after every
        // unlink, rename or link of a file, and at close after changing the mode or owner.
        // When the mtime is the one we last reported and nothing else changes, the object
        // already has it (the brick sets ctime itself): answer without a round trip. For the
        // unlink case that round trip would only have failed with ESTALE.
        if let Some(a) = self.s.inodes.last_attr(ino)
            && resends_known_times(&attr, &a)
        {
            return reply.attr(&self.s.opts.attr_timeout, &file_attr(ino, &a));
        }
        let cx = ctx(req, Need::of(Fop::Setattr), None);
        let stamp = self.s.inodes.stamp();
        let ds = self.s.inodes.begin_dir_op(ino);
        self.spawn(|s| async move {
            // (A directory not opened on its graph yet is asked by GFID.)
            let fd = match fd {
                Some((fh, u)) => s.follow(fh, u).await.ok().filter(FdUse::opened),
                None => None,
            };
            let graph = s.graph();
            let top = graph.top();
            // Only ctime (writeback cache) or nothing we keep: report the attributes.
            let r = match (attr == SetAttr::default(), &fd) {
                (true, Some(u)) => u.top().fstat(&cx, u.fd()).await,
                (true, None) => top.stat(&cx, gfid).await,
                (false, Some(u)) => match u.top().fsetattr(&cx, u.fd(), attr).await {
                    Err(Errno::EPERM)
                        if s.opts.writeback_cache && is_times_flush(&attr, &u.fd()) =>
                    {
                        u.top().fstat(&cx, u.fd()).await
                    }
                    r => r,
                },
                (false, None) => match top.setattr(&cx, gfid, attr).await {
                    // fchmod/fchown/futimens of an unlinked open file arrive without its fh.
                    Err(e) if gone(e) => match s.fds.find_open(&gfid) {
                        Some(u) => match u.ensure_open().await {
                            Ok(()) => u.top().fsetattr(&cx, u.fd(), attr).await,
                            Err(_) => Err(e),
                        },
                        None => Err(e),
                    },
                    r => r,
                },
            };
            s.inodes.end_dir_op(ino, ds, None);
            s.reply_attr(ino, reply, r, stamp);
        });
    }

    pub(super) fn do_readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let cx = ctx(req, Need::of(Fop::Readlink), None);
        self.spawn(|s| async move {
            match s.graph().top().readlink(&cx, gfid).await {
                Ok(target) => reply.data(target.as_bytes()),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    pub(super) fn do_statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let gfid = self.gfid(ino).unwrap_or(Gfid::ROOT);
        let cx = ctx(req, Need::of(Fop::Statfs), None);
        self.spawn(|s| async move {
            match s.graph().top().statfs(&cx, gfid).await {
                Ok(st) => reply.statfs(
                    st.blocks,
                    st.bfree,
                    st.bavail,
                    st.files,
                    st.ffree,
                    u32::try_from(st.bsize).unwrap_or(4096),
                    u32::try_from(st.namemax).unwrap_or(255),
                    u32::try_from(st.frsize).unwrap_or(4096),
                ),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    pub(super) fn do_access(
        &self,
        req: &Request,
        ino: INodeNo,
        mask: AccessFlags,
        reply: ReplyEmpty,
    ) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let cx = ctx(req, Need::of(Fop::Access), None);
        let mask = mask.bits() as u32;
        self.spawn(|s| async move {
            reply_empty(reply, s.graph().top().access(&cx, gfid, mask).await);
        });
    }
}
