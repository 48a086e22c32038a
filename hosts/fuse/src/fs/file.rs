//! Open files: open, create, read, write, flush, release, fsync, fallocate, copy_file_range,
//! lseek and ioctl.

use super::*;

impl XlfsFs {
    pub(super) fn do_open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let gfid = tri!(reply, self.gfid(ino));
        let atime = self.s.opts.atime;
        let graph_flags = atime.file_flags(graph_open_flags(self.s.opts.writeback_cache, flags.0));
        let fd = self.s.fds.allocate(gfid, graph_flags);
        // The brick counts a reading open as an access; the kernel's cached atime may go.
        let touches = atime.may_touch(graph_flags, self.s.inodes.last_attr(ino).as_ref());
        let cx = ctx_builder(req, Need::of(Fop::Open), None);
        // A plain read-only open may be answered with a backing file to pass through.
        let pt = self.s.pt.on();
        let cx = if pt
            && flags.0 & libc::O_ACCMODE == libc::O_RDONLY
            && flags.0 & (libc::O_TRUNC | libc::O_DIRECT) == 0
        {
            cx.ext(&BackingWanted)
        } else {
            cx
        }
        .build();
        // A non-root writer that may pass through: see `passthrough_writer_kills_privs`.
        let kill_privs = pt && flags.0 & libc::O_ACCMODE != libc::O_RDONLY && req.uid() != 0;
        // A truncating open changes the size and mtime behind the recorded attributes.
        let truncates = flags.0 & libc::O_TRUNC != 0;
        if truncates {
            self.s.inodes.begin_reshape(ino);
        }
        let direct = self.s.kernel_direct(flags.0);
        // Close-to-open: what the kernel caches of the file (attributes, pages) may predate
        // another client's close, and the name it came through may name another file now.
        // Both are checked beside the open (before it, for a truncating open, which must not
        // empty a file the name no longer names): a name that changed is ESTALE (see
        // `stale_open`), and attributes that differ from what this mount last gave the
        // kernel drop its cached attributes and pages before the open returns. With the
        // writeback cache the kernel keeps the size itself (single-client only). An open
        // right after the lookup that gave the node (`fresh`) needs neither: that lookup's
        // reply just gave the kernel the name and the attributes (and FUSE_AUTO_INVAL_DATA
        // dropped its pages if they changed), so it costs no extra round trip.
        let pid = req.pid();
        let fresh = self
            .s
            .inodes
            .take_fresh_for(ino, FRESH_NAME, pid, crate::inodes::Retry::Open);
        let check = (!self.s.opts.writeback_cache && !fresh).then(|| {
            let names: Vec<Loc> = (self.s.inodes.names(ino).into_iter())
                .filter_map(|(p, n)| {
                    let parent = self.s.inodes.gfid(p)?;
                    Some(Loc::new(parent, name_str(&n).ok()?))
                })
                .collect();
            (
                ctx(req, Need::of(Fop::Stat), None),
                self.s.inodes.last_attr(ino),
                names,
            )
        });
        let flags = flags.0;
        self.spawn(|s| async move {
            let top = s.graph();
            let checked = async {
                match &check {
                    Some((scx, _, names)) => Some(s.current(scx, gfid, names.clone()).await),
                    None => None,
                }
            };
            let (r, now) = if truncates {
                let now = checked.await;
                if let Some(now) = &now
                    && s.stale_open(ino, fresh, now).await
                {
                    s.inodes.end_reshape();
                    s.inodes.expect_retry(pid, crate::inodes::Retry::Open);
                    return reply.error(fuser::Errno::ESTALE);
                }
                (top.top().open(&cx, fd).await, None)
            } else {
                tokio::join!(top.top().open(&cx, fd), checked)
            };
            if truncates {
                s.inodes.end_reshape();
            }
            match r {
                Ok(opened) => {
                    let mut fopen = s.fopen_flags(flags);
                    if let (Some((_, before, _)), Some(now)) = (check, now) {
                        if s.stale_open(ino, fresh, &now).await {
                            let _ = top.top().release(&Ctx::root(), fd).await;
                            s.inodes.expect_retry(pid, crate::inodes::Retry::Open);
                            return reply.error(fuser::Errno::ESTALE);
                        }
                        if changed_since(before.as_ref(), now.0.as_ref().ok()) {
                            s.kernel.drop_attrs(ino).await;
                            fopen.remove(FopenFlags::FOPEN_KEEP_CACHE);
                        } else if touches {
                            s.kernel.drop_attrs(ino).await;
                        }
                    } else if touches {
                        s.kernel.drop_attrs(ino).await;
                    }
                    let fh = s.fds.insert_as(fd, direct, top.clone());
                    if pt {
                        let backing = opened.backing.into_option();
                        s.answer_passthrough(&top, ino, fd, kill_privs, || {
                            s.pt.reply_open(reply, ino, fh, backing, fopen)
                        })
                        .await;
                    } else {
                        reply.opened(fh, fopen);
                    }
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let loc = tri!(reply, self.loc(parent, name));
        let fd = self.s.fds.allocate(
            Gfid::NULL,
            graph_open_flags(self.s.opts.writeback_cache, flags),
        );
        let uid = req.uid();
        let cx = ctx(req, Need::of(Fop::Create), None);
        let stamp = self.s.inodes.stamp();
        let ds = self.s.inodes.begin_dir_op(parent);
        self.s.fresh.adding(parent, name);
        let pid = req.pid();
        self.spawn(|s| async move {
            let name = loc.name.clone();
            // Another client (or process) made the name first: without O_EXCL that is an
            // open of what it made (a brick does it itself; replicate, stripe and distribute
            // answer EEXIST when a create of the same name won the race). If that name is
            // gone again by the time it is opened, the create is tried again (a few times).
            let mut tries = 0;
            let (graph, r) = loop {
                tries += 1;
                // The graph the file is opened on (the fd is bound to it).
                let graph = s.graph();
                match graph.top().create(&cx, loc.clone(), fd, mode, umask).await {
                    Err(Errno::EEXIST) if flags & libc::O_EXCL == 0 => {
                        match s.open_existing(&graph, &cx, loc.clone(), fd).await {
                            Err(Errno::ENOENT) if tries < CREATE_TRIES => {
                                // The winner's create may still be on its way to the other
                                // children (stripe, distribute): give it a moment, longer
                                // each time, before trying again.
                                tokio::time::sleep(create_backoff(tries)).await;
                                continue;
                            }
                            r => break (graph, r),
                        }
                    }
                    r => break (graph, r),
                }
            };
            s.end_dir_op(parent, ds, r.as_ref().ok().map(|e| &e.postparent));
            let e = match s.in_dir(pid, parent, r) {
                Ok(e) => e,
                Err(e) => return reply.error(errno(e)),
            };
            let attr = match s.entry_attr(&e.attr, stamp) {
                Ok(a) => a,
                Err(err) => {
                    // Opened in the graph but not by the kernel: close it there.
                    let _ = graph
                        .top()
                        .release(
                            &cx,
                            Fd {
                                gfid: e.attr.gfid,
                                ..fd
                            },
                        )
                        .await;
                    return reply.error(err);
                }
            };
            let fh = s.fds.insert_as(
                Fd {
                    gfid: e.attr.gfid,
                    ..fd
                },
                s.kernel_direct(flags),
                graph.clone(),
            );
            // A file made by O_EXCL is new, so it has no capability: the kernel's check before
            // its first write is answered here instead of by a GETXATTR round trip. (Without
            // O_EXCL the brick may have opened an existing file, whose xattrs we don't know.)
            if flags & libc::O_EXCL != 0 {
                s.caps.set_none(e.attr.gfid, Instant::now());
            }
            s.inodes
                .note_name(attr.ino, parent, OsStr::new(name.as_str()));
            let ttl = s.opts.entry_timeout.min(s.opts.attr_timeout);
            if s.pt.on() {
                let fd = Fd {
                    gfid: e.attr.gfid,
                    ..fd
                };
                s.answer_passthrough(&graph, attr.ino, fd, uid != 0, || {
                    s.pt.reply_create(reply, &ttl, &attr, fh, s.fopen_flags(flags))
                })
                .await;
            } else {
                reply.created(&ttl, &attr, Generation(0), fh, s.fopen_flags(flags));
            }
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Readv), lock_owner.map(|o| o.0));
        let stamp = self
            .s
            .opts
            .writeback_cache
            .then(|| self.s.inodes.meta_stamp());
        self.spawn(|s| async move {
            let u = follow!(s, reply, fh, fd);
            match u.top().readv(&cx, u.fd(), offset, size).await {
                Ok(r) => {
                    if let (Some(stamp), ROption::RSome(a)) = (stamp, &r.attr) {
                        s.inodes.note_file_attr(ino, a, stamp);
                    }
                    reply.data(&r.data)
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let fd = tri!(reply, self.fd(fh));
        // The one copy of the payload: out of fuser's request buffer into a shared Buf.
        let buf = Buf::copy_from_slice(data);
        let cx = ctx(req, Need::of(Fop::Writev), lock_owner.map(|o| o.0));
        let kill_suidgid = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        let gfid = fd.fd().gfid;
        let drops_pages = self.drops_pages_after(write_flags, flags, &gfid);
        let cached = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        let append = !cached && appends(flags.0);
        let flags = write_flags_for_graph(self.s.opts.writeback_cache, flags.0, cached);
        self.s.inodes.begin_write(ino);
        self.spawn(|s| async move {
            let u = match s.follow(fh, fd).await {
                Ok(u) => u,
                Err(e) => {
                    s.inodes.end_write();
                    return reply.error(e);
                }
            };
            let (top, fd) = (u.top(), u.fd());
            let r = top.writev(&cx, fd, offset, buf, flags).await;
            s.inodes.end_write();
            match r {
                Ok(r) => {
                    if kill_suidgid {
                        kill_suidgid_after_write(top, &cx, fd, r.attr.into_option()).await;
                    }
                    if append && s.fds.open_buffered(&fd.gfid) {
                        // The bricks put it at their end of file, not at `offset` (the
                        // kernel marks its size stale after every write by itself), so
                        // pages of the range really written may be cached through other
                        // opens of the file on this mount: drop them.
                        match r.attr.into_option().map(|a| a.size) {
                            Some(end) => {
                                let start = end.saturating_sub(r.written);
                                s.kernel.drop_pages(ino, start, r.written).await;
                            }
                            None => s.kernel.drop_pages(ino, 0, i64::MAX as u64).await,
                        }
                    } else if drops_pages {
                        // Written, not yet acknowledged: a page read back from now on has
                        // the new data, and the one read before is dropped here.
                        s.kernel.drop_pages(ino, offset, r.written).await;
                    }
                    reply.written(u32::try_from(r.written).unwrap_or(u32::MAX))
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    pub(super) fn do_flush(
        &self,
        req: &Request,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2): on the graph the fd is open on (moving it only to close it would cost an
        // open), then wherever else this file's locks live (see migrate.rs).
        let u = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Flush), Some(lock_owner.0));
        self.spawn(|s| async move {
            let r = u.top().flush(&cx, u.fd()).await;
            s.flush_locks_elsewhere(&cx, &u).await;
            reply_empty(reply, r);
        });
    }

    pub(super) fn do_release(
        &self,
        req: &Request,
        fh: FileHandle,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        // Released on the graph it is open on (never moved for a release).
        let u = tri!(reply, self.s.fds.remove(fh).ok_or(fuser::Errno::EBADF));
        if self.s.pt.on() {
            self.s.pt.released(fh);
        }
        let cx = ctx(req, Need::of(Fop::Release), lock_owner.map(|o| o.0));
        self.spawn(|s| async move {
            let fd = u.fd();
            if flush {
                // FUSE_RELEASE_FLUSH: the kernel skipped FLUSH for this close.
                let _ = u.top().flush(&cx, fd).await;
                s.flush_locks_elsewhere(&cx, &u).await;
            }
            reply_empty(reply, u.top().release(&cx, fd).await);
        });
    }

    pub(super) fn do_fsync(
        &self,
        req: &Request,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Fsync), None);
        self.spawn(|s| async move {
            let u = follow!(s, reply, fh, fd);
            reply_empty(reply, u.top().fsync(&cx, u.fd(), datasync).await);
        });
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Fallocate), None);
        self.s.inodes.begin_reshape(ino);
        self.spawn(|s| async move {
            let u = match s.follow(fh, fd).await {
                Ok(u) => u,
                Err(e) => {
                    s.inodes.end_reshape();
                    return reply.error(e);
                }
            };
            let (top, fd) = (u.top(), u.fd());
            let r = if mode & libc::FALLOC_FL_PUNCH_HOLE != 0 {
                top.discard(&cx, fd, offset, length).await
            } else if mode & libc::FALLOC_FL_ZERO_RANGE != 0 {
                top.zerofill(&cx, fd, offset, length).await
            } else {
                top.fallocate(&cx, fd, mode, offset, length).await
            };
            s.inodes.end_reshape();
            reply_empty(reply, r);
        });
    }

    /// No ioctl is supported: ENOTTY, as a local file system answers an ioctl it does not
    /// know (isatty() on every open by many programs asks TCGETS). Answered quietly: fuser's
    /// default logs a warning for each.
    pub(super) fn do_ioctl(&self, reply: ReplyIoctl) {
        reply.error(fuser::Errno::ENOTTY);
    }

    pub(super) fn do_copy_file_range(&self, reply: ReplyWrite) {
        // No fop for it: ENOSYS makes the kernel stop asking and copy through read/write.
        reply.error(fuser::Errno::ENOSYS);
    }

    pub(super) fn do_lseek(
        &self,
        req: &Request,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        // The kernel handles SEEK_SET/CUR/END itself; only hole-aware seeks come here.
        if self.s.opts.writeback_cache {
            // The kernel's dirty pages are not on the bricks yet, and it never writes them
            // back for a seek: a brick would answer ENXIO inside a file just written
            // (stress-ng's seek stressor). ENOSYS makes the kernel answer hole-aware seeks
            // itself from the size it keeps (all data, one hole at the end), for the rest of
            // the mount, which is correct in the writeback cache's single-client use.
            return reply.error(fuser::Errno::ENOSYS);
        }
        let what = match whence {
            libc::SEEK_DATA => SeekWhat::Data,
            libc::SEEK_HOLE => SeekWhat::Hole,
            _ => return reply.error(fuser::Errno::EINVAL),
        };
        let offset = tri!(
            reply,
            u64::try_from(offset).map_err(|_| fuser::Errno::ENXIO)
        );
        let fd = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Seek), None);
        self.spawn(|s| async move {
            let u = follow!(s, reply, fh, fd);
            match u.top().seek(&cx, u.fd(), offset, what).await {
                Ok(off) => match i64::try_from(off) {
                    Ok(off) => reply.offset(off),
                    Err(_) => reply.error(fuser::Errno::EOVERFLOW),
                },
                Err(e) => reply.error(errno(e)),
            }
        });
    }
}
