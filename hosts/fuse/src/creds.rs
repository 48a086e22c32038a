//! Who is calling: the [`Ctx`] of a FUSE request.
//!
//! FUSE requests carry uid, gid and pid but no supplementary groups. Fops that create names or
//! check permissions need them, so for those the groups are read from `/proc/<pid>/status`
//! (on the fuser reader thread: a small blocking read, never on an async worker). They are
//! not cached: a process may change its groups between two calls (pjdfstest does), and pids
//! are reused.

use fuser::Request;
use xlator_api::{Ctx, CtxBuilder, Fop, LkOwner};

/// How much of the caller a fop needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Need {
    /// uid/gid/pid: data path (read, write, getattr, readdir, release...).
    Basic,
    /// Also the supplementary groups: creation, setattr, permission checks, xattrs.
    Groups,
}

impl Need {
    /// What a request sending `fop` needs of its caller. One exhaustive `match` over the fop
    /// table (no `_` arm), so a fop added to the table needs a decision here; the unit tests
    /// tie it to the table's attributes: changing metadata or names, and opening, need the
    /// groups (ownership and permission checks); data, sync, close and lock fops go through
    /// an fd already checked at open and do not. Reads of metadata differ: a lookup checks
    /// search permission and xattr reads check the namespace's rights, a stat does not.
    pub const fn of(fop: Fop) -> Need {
        use Need::*;
        match fop {
            Fop::Lookup | Fop::Access | Fop::Getxattr | Fop::Fgetxattr | Fop::Listxattr => Groups,
            Fop::Getxattrs => Groups,
            Fop::Stat | Fop::Fstat | Fop::Readlink | Fop::Statfs | Fop::Readdirp => Basic,
            Fop::Setattr
            | Fop::Fsetattr
            | Fop::Mknod
            | Fop::Mkdir
            | Fop::Unlink
            | Fop::Rmdir
            | Fop::Symlink
            | Fop::Rename
            | Fop::Link
            | Fop::Create
            | Fop::Open
            | Fop::Opendir
            | Fop::Setxattr
            | Fop::Removexattr
            | Fop::Fsetxattr
            | Fop::Fremovexattr
            | Fop::Xattrop
            | Fop::Fxattrop
            | Fop::Setxattrs => Groups,
            Fop::Readv
            | Fop::Writev
            | Fop::Flush
            | Fop::Fsync
            | Fop::Fsyncdir
            | Fop::Release
            | Fop::Releasedir
            | Fop::Fallocate
            | Fop::Discard
            | Fop::Zerofill
            | Fop::Seek
            | Fop::Rchecksum
            | Fop::Lk
            | Fop::Inodelk
            | Fop::Entrylk => Basic,
            // Never sent by a mount (protocol/server sends it); nothing to check.
            Fop::ForgetClient => Basic,
        }
    }
}

/// The context of `req`, with `lk_owner` when the request names one.
pub fn ctx(req: &Request, need: Need, lk_owner: Option<u64>) -> Ctx {
    ctx_builder(req, need, lk_owner).build()
}

/// [`ctx`], not built yet (to add extensions).
pub fn ctx_builder(req: &Request, need: Need, lk_owner: Option<u64>) -> CtxBuilder {
    let (uid, gid, pid) = (req.uid(), req.gid(), req.pid());
    let mut b = Ctx::builder(uid, gid).pid(pid).request_id(req.unique().0);
    // Root passes every permission check, and pid 0 is the kernel itself (writeback).
    if need == Need::Groups
        && uid != 0
        && pid != 0
        && let Some(groups) = proc_groups(pid)
    {
        b = b.groups(&groups);
    }
    if let Some(o) = lk_owner {
        b = b.lk_owner(LkOwner(o));
    }
    b
}

/// The supplementary groups of thread `pid`, `None` if it is gone or unreadable.
pub fn proc_groups(pid: u32) -> Option<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_groups(&status)
}

/// The `Groups:` line of a `/proc/<pid>/status` text.
pub fn parse_groups(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:"))?;
    Some(
        line.split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::FopAttrs;

    #[test]
    fn what_a_fop_needs_follows_the_table() {
        for &f in Fop::ALL {
            let a = f.attrs();
            if f.writes_meta() || f.writes_namespace() || f.opens_fd() {
                assert_eq!(Need::of(f), Need::Groups, "{f} changes or opens: groups");
            }
            let by_fd = FopAttrs::WRITES_DATA
                | FopAttrs::READS_DATA
                | FopAttrs::DURABILITY
                | FopAttrs::CLOSES
                | FopAttrs::LOCKS
                | FopAttrs::HOST_ONLY;
            if a.intersects(by_fd) && !f.writes_meta() && !f.writes_namespace() && !f.opens_fd() {
                assert_eq!(Need::of(f), Need::Basic, "{f} works on a checked fd");
            }
        }
        // As the single-xattr fops they batch.
        assert_eq!(Need::of(Fop::Getxattrs), Need::of(Fop::Getxattr));
        assert_eq!(Need::of(Fop::Setxattrs), Need::of(Fop::Setxattr));
    }

    #[test]
    fn parses_groups_line() {
        let s = "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 27 1000 \nNgid:\t0\n";
        assert_eq!(parse_groups(s), Some(vec![4, 24, 27, 1000]));
        assert_eq!(parse_groups("Groups:\t\n"), Some(vec![]));
        assert_eq!(parse_groups("Name:\tx\n"), None);
    }

    #[test]
    fn reads_own_groups() {
        let pid = std::process::id();
        assert!(proc_groups(pid).is_some());
    }
}
