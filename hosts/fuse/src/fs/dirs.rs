//! Directory handles: opendir, releasedir and fsyncdir, and the kernel's readdir and
//! readdirplus (the listings themselves are in `crate::dir`).

use super::*;

impl XlfsFs {
    pub(super) fn do_opendir(
        &self,
        req: &Request,
        ino: INodeNo,
        flags: OpenFlags,
        reply: ReplyOpen,
    ) {
        let gfid = tri!(reply, self.gfid(ino));
        let flags = self.s.opts.atime.dir_flags(flags.0 | libc::O_DIRECTORY);
        let fd = self.s.fds.allocate(gfid, flags);
        let cx = ctx(req, Need::of(Fop::Opendir), None);
        let graph = self.s.graph();
        let fopen = self.s.dir_fopen_flags(ino, &graph);
        if self.s.opts.default_permissions {
            // The kernel checked the caller's access; the graph opens the directory when a
            // fop first needs it there (see fds.rs): a listing the kernel answers from its
            // cache, and the close after it, cost no round trip.
            let fh = self.s.fds.insert_dir(fd, graph, cx);
            return reply.opened(fh, fopen);
        }
        self.spawn(|s| async move {
            match graph.top().opendir(&cx, fd).await {
                Ok(()) => reply.opened(s.fds.insert(fd, graph.clone()), fopen),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    pub(super) fn do_readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Readdirp), None);
        self.spawn(|s| async move {
            let u = match dir::from_start(offset) {
                true => follow!(s, reply, fh, fd),
                false => fd,
            };
            dir::readdir(&s, cx, ino, &u, offset, reply).await
        });
    }

    pub(super) fn do_readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let fd = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Readdirp), None);
        self.spawn(|s| async move {
            let u = match dir::from_start(offset) {
                true => follow!(s, reply, fh, fd),
                false => fd,
            };
            dir::readdirplus(&s, cx, ino, &u, offset, reply).await
        });
    }

    pub(super) fn do_releasedir(&self, req: &Request, fh: FileHandle, reply: ReplyEmpty) {
        let u = tri!(reply, self.s.fds.remove(fh).ok_or(fuser::Errno::EBADF));
        if !u.opened() {
            // Never opened on its graph: nothing to release there.
            return reply.ok();
        }
        let cx = ctx(req, Need::of(Fop::Releasedir), None);
        self.spawn(|_| async move {
            reply_empty(reply, u.top().releasedir(&cx, u.fd()).await);
        });
    }

    pub(super) fn do_fsyncdir(
        &self,
        req: &Request,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        // On the graph the directory is open on: a directory fd moves only when a listing
        // starts over (see `readdir`).
        let u = tri!(reply, self.fd(fh));
        let cx = ctx(req, Need::of(Fop::Fsyncdir), None);
        self.spawn(|_| async move {
            if let Err(e) = u.ensure_open().await {
                return reply.error(errno(e));
            }
            reply_empty(reply, u.top().fsyncdir(&cx, u.fd(), datasync).await);
        });
    }
}
