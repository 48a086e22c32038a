//! Which fops write-behind takes part in, and how: one exhaustive `match` over the fop table
//! ([`handling`]). A fop added to the table does not compile here until someone decides how it
//! orders against cached writes, and the unit tests below tie each decision to the fop's
//! attributes in the table (a fop that may change data is ordered as a modification, one that
//! reads data as an observer, a host-only fop passes through). `tests/fops.rs` then checks, for
//! every fop of the table, that the translator does what [`handling`] says.
//!
//! Not all of it can be derived from the attributes: which metadata reads depend on cached
//! writes (a reply with the file's size does, an xattr does not), and which namespace fops can
//! drop or replace a file with writes in flight, are decisions written here.

use xlator_api::Fop;

/// What write-behind does with a fop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handling {
    /// Passes through at once: it neither depends on nor changes what cached writes change.
    Pass,
    /// `writev`: cached, written through or passed down (see `flags::write_mode`).
    Write,
    /// Reads data from its offset: observes `[offset, ∞)`, since a write anywhere past the
    /// offset moves the end of file it sees.
    ObserveFrom,
    /// Its reply carries the file's attributes (size, times): observes the whole file.
    ObserveAll,
    /// Changes data or size other than by writing: modifies the whole file (`open` only with
    /// O_TRUNC).
    Modify,
    /// Waits for every earlier request of its file (durability, last close, POSIX locks).
    Barrier,
    /// Names its object by parent and name, not GFID, and may drop, replace or empty a file:
    /// waits for every earlier request of every file (`create` only with O_TRUNC).
    BarrierAll,
    /// Passes through; the reply's attributes are refreshed for files with unfinished writes.
    RefreshReply,
}

impl Handling {
    /// Whether the fop waits for a cached write of its file before it reaches the child
    /// (for `open`/`create`, when they truncate).
    pub const fn waits(self) -> bool {
        matches!(
            self,
            Handling::ObserveFrom
                | Handling::ObserveAll
                | Handling::Modify
                | Handling::Barrier
                | Handling::BarrierAll
        )
    }
}

/// What write-behind does with `fop`. Exhaustive on purpose: no `_` arm.
pub const fn handling(fop: Fop) -> Handling {
    use Handling::*;
    match fop {
        Fop::Writev => Write,
        Fop::Readv | Fop::Seek | Fop::Rchecksum => ObserveFrom,
        Fop::Stat | Fop::Fstat | Fop::Link => ObserveAll,
        Fop::Setattr
        | Fop::Fsetattr
        | Fop::Fallocate
        | Fop::Discard
        | Fop::Zerofill
        | Fop::Open => Modify,
        Fop::Fsync | Fop::Flush | Fop::Release | Fop::Lk => Barrier,
        Fop::Rename | Fop::Unlink | Fop::Readdirp | Fop::Create => BarrierAll,
        Fop::Lookup => RefreshReply,
        // Metadata that cached writes do not change, directories, cluster-internal locks and
        // xattr counters (taken by translators below write-behind), host-only fops.
        Fop::Access
        | Fop::Readlink
        | Fop::Mknod
        | Fop::Mkdir
        | Fop::Rmdir
        | Fop::Symlink
        | Fop::Opendir
        | Fop::Fsyncdir
        | Fop::Releasedir
        | Fop::Statfs
        | Fop::Setxattr
        | Fop::Getxattr
        | Fop::Listxattr
        | Fop::Removexattr
        | Fop::Fsetxattr
        | Fop::Fgetxattr
        | Fop::Fremovexattr
        | Fop::Inodelk
        | Fop::Entrylk
        | Fop::Xattrop
        | Fop::Fxattrop
        | Fop::Getxattrs
        | Fop::Setxattrs
        | Fop::ForgetClient => Pass,
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::{Fop, FopAttrs};

    use super::{Handling, handling};

    fn each(rule: &str, holds: impl Fn(Fop, Handling) -> bool) {
        for &f in Fop::ALL {
            assert!(
                holds(f, handling(f)),
                "{f} ({:?}) breaks: {rule}",
                handling(f)
            );
        }
    }

    #[test]
    fn a_fop_that_may_change_data_is_ordered_as_a_write_or_modification() {
        // A create may truncate an existing file it names only in its reply: it waits for
        // every file's cached writes (BarrierAll), which covers the file it empties.
        each(
            "may change data <=> Write or Modify (or a barrier on all)",
            |f, h| {
                f.may_change_data()
                    == (matches!(h, Handling::Write | Handling::Modify)
                        || (f == Fop::Create && h == Handling::BarrierAll))
            },
        );
        each("only writev is cached", |f, h| {
            (h == Handling::Write) == (f == Fop::Writev)
        });
    }

    #[test]
    fn a_fop_that_reads_data_observes_from_its_offset() {
        each("reads data <=> ObserveFrom", |f, h| {
            f.attrs().contains(FopAttrs::READS_DATA) == (h == Handling::ObserveFrom)
        });
    }

    #[test]
    fn observers_read_and_barriers_have_an_fd() {
        each(
            "ObserveAll reads metadata or makes a name for the file",
            |f, h| {
                h != Handling::ObserveAll
                    || f.attrs().contains(FopAttrs::READS_META)
                    || f.writes_namespace()
            },
        );
        each("Barrier has an fd", |f, h| {
            h != Handling::Barrier || f.uses_fd()
        });
        each("durability fops of files are barriers", |f, h| {
            !f.attrs().contains(FopAttrs::DURABILITY)
                || h == Handling::Barrier
                || f == Fop::Fsyncdir
        });
        each("BarrierAll changes or lists the namespace", |f, h| {
            h != Handling::BarrierAll || f.writes_namespace() || f == Fop::Readdirp
        });
    }

    #[test]
    fn host_only_and_new_metadata_fops_pass() {
        each("host-only fops pass", |f, h| {
            !f.host_only() || h == Handling::Pass
        });
        // As getxattr/setxattr do: xattrs are not file data.
        assert_eq!(handling(Fop::Getxattrs), handling(Fop::Getxattr));
        assert_eq!(handling(Fop::Setxattrs), handling(Fop::Setxattr));
        assert_eq!(handling(Fop::Rchecksum), handling(Fop::Readv));
    }
}
