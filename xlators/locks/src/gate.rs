//! Which fops a migration barrier holds, from the fop table's attributes (never a list of
//! names): those that change an object's data, size or metadata (`WRITES_DATA`,
//! `TRUNCATES`, `WRITES_META`), on the object their `gfid` or `fd` names; an `open` only with
//! O_TRUNC; a `create` (which makes a name, `WRITES_NAMESPACE`) only with O_TRUNC and without
//! O_EXCL, when it may truncate an existing file whose GFID nobody knows before it runs.
//! Namespace fops (`unlink`, `rename`, `link`...), reads, locks and host-only fops pass: a
//! barrier guards one file's contents, and moving names is cluster/distribute's own business.

use xlator_api::{Fop, FopAttrs, Gfid};

/// What a fop must pass before it goes down.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Gate {
    /// Nothing: it changes no file's data or metadata (or has no object to name).
    Free,
    /// The barrier on this GFID.
    On(Gfid),
    /// The barrier on whatever file its name resolves to (a truncating `create`).
    ByName,
}

/// The gate of `fop`, whose `gfid` or `fd.gfid` argument is `target` and whose fd's open
/// flags are `flags` (when it has an fd).
pub const fn classify(fop: Fop, target: Option<Gfid>, flags: Option<i32>) -> Gate {
    let a = fop.attrs();
    if a.intersects(FopAttrs(FopAttrs::LOCKS.0 | FopAttrs::HOST_ONLY.0)) {
        return Gate::Free;
    }
    let on = match target {
        Some(g) => Gate::On(g),
        None => Gate::Free,
    };
    let flags = match flags {
        Some(f) => f,
        None => 0,
    };
    if a.contains(FopAttrs(FopAttrs::OPENS.0 | FopAttrs::TRUNCATES.0)) {
        // Truncates only what it opens with O_TRUNC.
        if flags & libc::O_TRUNC == 0 {
            return Gate::Free;
        }
        if !a.contains(FopAttrs::WRITES_NAMESPACE) {
            return on;
        }
        // A create: a new file nobody else has, unless the name exists and O_EXCL is off.
        return if flags & libc::O_EXCL != 0 {
            Gate::Free
        } else {
            Gate::ByName
        };
    }
    if a.contains(FopAttrs::WRITES_NAMESPACE) {
        return Gate::Free;
    }
    let changes =
        FopAttrs(FopAttrs::WRITES_DATA.0 | FopAttrs::TRUNCATES.0 | FopAttrs::WRITES_META.0);
    if a.intersects(changes) {
        on
    } else {
        Gate::Free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fop of the table against the list the barrier promises to hold (a new fop that
    /// changes data is held by its attributes; this list is only the check).
    #[test]
    fn exactly_the_modifying_fops_on_a_file_are_held() {
        let g = Gfid::random();
        let held = [
            Fop::Setattr,
            Fop::Fsetattr,
            Fop::Writev,
            Fop::Setxattr,
            Fop::Removexattr,
            Fop::Fsetxattr,
            Fop::Fremovexattr,
            Fop::Fallocate,
            Fop::Discard,
            Fop::Zerofill,
            Fop::Xattrop,
            Fop::Fxattrop,
            Fop::Setxattrs,
        ];
        for &f in Fop::ALL {
            let plain = classify(f, Some(g), Some(libc::O_RDWR));
            let want = if held.contains(&f) {
                Gate::On(g)
            } else {
                Gate::Free
            };
            assert_eq!(plain, want, "{f}");
        }
        let trunc = Some(libc::O_RDWR | libc::O_TRUNC);
        assert_eq!(classify(Fop::Open, Some(g), trunc), Gate::On(g));
        assert_eq!(classify(Fop::Create, Some(g), trunc), Gate::ByName);
        assert_eq!(
            classify(Fop::Create, Some(g), Some(libc::O_TRUNC | libc::O_EXCL)),
            Gate::Free
        );
        for f in [
            Fop::Unlink,
            Fop::Rename,
            Fop::Link,
            Fop::Readv,
            Fop::Lk,
            Fop::Inodelk,
        ] {
            assert_eq!(classify(f, Some(g), trunc), Gate::Free, "{f}");
        }
    }
}
