//! Extended attributes: set, get, list and remove.

use super::*;

impl XlfsFs {
    #[allow(
        clippy::too_many_arguments,
        reason = "the kernel request's fields, as fuser hands them over"
    )]
    pub(super) fn do_setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        self.s.inodes.used(ino);
        if position != 0 {
            // macOS resource forks only.
            return reply.error(fuser::Errno::EINVAL);
        }
        let gfid = tri!(reply, self.gfid(ino));
        let xattr = Xattr {
            name: tri!(reply, name_str(name)),
            value: Buf::copy_from_slice(value),
        };
        self.s.caps.invalidate(&gfid);
        let sets_mode = xattr.name.as_str() == ACCESS_ACL_XATTR;
        let cx = ctx(req, Need::of(Fop::Setxattr), None);
        // It changes the ctime: a directory's recorded attributes are stale.
        let ds = self.s.inodes.begin_dir_op(ino);
        self.spawn(|s| async move {
            let r = s.graph().top().setxattr(&cx, gfid, xattr, flags).await;
            s.inodes.end_dir_op(ino, ds, None);
            if sets_mode && r.is_ok() {
                // An access ACL sets the mode's group bits to its mask. The kernel drops
                // its cached attributes itself only when it handles ACLs (FUSE_POSIX_ACL,
                // not negotiated without `default_permissions`); stat would show the old
                // mode for up to the attribute timeout.
                s.kernel.drop_attrs(ino).await;
            }
            reply_empty(reply, r);
        });
    }

    pub(super) fn do_getxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let name = tri!(reply, name_str(name));
        let is_cap = name.as_str() == CAPABILITY_XATTR;
        if is_cap && self.s.caps.known_none(&gfid, Instant::now()) {
            return reply.error(fuser::Errno::ENODATA);
        }
        let cx = ctx(req, Need::of(Fop::Getxattr), None);
        self.spawn(|s| async move {
            match s.graph().top().getxattr(&cx, gfid, name).await {
                Ok(v) => reply_xattr(reply, size, &v),
                Err(e) => {
                    if is_cap && e == Errno::ENODATA {
                        s.caps.set_none(gfid, Instant::now());
                    }
                    reply.error(errno(e))
                }
            }
        });
    }

    pub(super) fn do_listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let cx = ctx(req, Need::of(Fop::Listxattr), None);
        self.spawn(|s| async move {
            match s.graph().top().listxattr(&cx, gfid).await {
                Ok(names) => reply_xattr(reply, size, &xattr_list(&names)),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    pub(super) fn do_removexattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
    ) {
        self.s.inodes.used(ino);
        let gfid = tri!(reply, self.gfid(ino));
        let name = tri!(reply, name_str(name));
        self.s.caps.invalidate(&gfid);
        let cx = ctx(req, Need::of(Fop::Removexattr), None);
        let ds = self.s.inodes.begin_dir_op(ino);
        self.spawn(|s| async move {
            let r = s.graph().top().removexattr(&cx, gfid, name).await;
            s.inodes.end_dir_op(ino, ds, None);
            reply_empty(reply, r);
        });
    }
}
