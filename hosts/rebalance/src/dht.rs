//! The three virtual xattrs cluster/distribute answers for the runner (interfaces brief,
//! section A), and what their answers and errors mean to it.
//!
//! Guarantees: an answer outside the contract, or an error saying the volume's distribute
//! does not know the name (ENODATA, ENOTSUP, ENOSYS, EPERM: what a distribute without
//! rebalance support, or no distribute at all, answers), is [`Reply::Fatal`]: the run stops
//! as failed at once instead of "completing" having moved nothing. ENOENT is the object
//! gone meanwhile ([`Reply::Vanished`]), never a failure. Every message names the xattr
//! and the errno.

use xlator_api::{Buf, Errno, Gfid};

/// `getxattr(DIR, FIX_LAYOUT)`: rewrite the directory's layout over the current children.
pub const FIX_LAYOUT: &str = "xlfs.dht.fix-layout";
/// `getxattr(DIR, COMMIT_LAYOUT)`: mark the directory's layout trusted again.
pub const COMMIT_LAYOUT: &str = "xlfs.dht.commit-layout";
/// Prefix of `getxattr(FILE, "xlfs.dht.migrate:<PARENT>/<NAME>")`.
pub const MIGRATE_PREFIX: &str = "xlfs.dht.migrate:";

/// Prefix of `getxattr(FILE, "xlfs.dht.migrate-links:<P1>/<N1>/<P2>/<N2>...")`: move a file
/// with hard links off a decommissioned child, every one of its names at once (answers as
/// migrate does).
pub const MIGRATE_LINKS_PREFIX: &str = "xlfs.dht.migrate-links:";

/// The skip reason of a name of a file with hard links that moves only with all its names.
pub const HARD_LINKS: &str = "hard-links";

/// The migrate-links xattr name for a file's names (directory, name).
pub fn migrate_links_name<'a>(names: impl IntoIterator<Item = (Gfid, &'a str)>) -> String {
    let mut out = MIGRATE_LINKS_PREFIX.to_owned();
    for (k, (parent, name)) in names.into_iter().enumerate() {
        if k > 0 {
            out.push('/');
        }
        out.push_str(&format!("{parent}/{name}"));
    }
    out
}

/// The migrate xattr name for `name` in directory `parent`.
pub fn migrate_name(parent: Gfid, name: &str) -> String {
    format!("{MIGRATE_PREFIX}{parent}/{name}")
}

/// What a file's migrate answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migrated {
    InPlace,
    Moved(u64),
    Skipped(String),
}

/// A virtual xattr's outcome, as the runner counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    Ok(T),
    /// ENOENT: the object went away meanwhile.
    Vanished,
    /// An error for this object only (ENOTCONN, EIO...): counted, the run goes on.
    Failed(String),
    /// The volume cannot do this at all: the run ends as failed.
    Fatal(String),
}

/// Errors meaning "this distribute does not know the name" (or there is none).
fn unsupported(e: Errno) -> bool {
    [Errno::ENODATA, Errno::ENOTSUP, Errno::ENOSYS, Errno::EPERM].contains(&e)
}

/// `what` is the object in words for messages (`directory /a (GFID)`).
fn classify<T>(
    xattr: &str,
    what: &str,
    r: Result<Buf, Errno>,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Reply<T> {
    match r {
        Ok(buf) => {
            let text = String::from_utf8_lossy(buf.as_slice());
            match parse(text.trim_end_matches(['\n', '\0'])) {
                Some(v) => Reply::Ok(v),
                None => Reply::Fatal(format!(
                    "getxattr {xattr} on {what} answered {text:?}, which is not an answer this \
                     runner knows (cluster/distribute of another version?)"
                )),
            }
        }
        Err(Errno::ENOENT) => Reply::Vanished,
        Err(e) if unsupported(e) => Reply::Fatal(format!(
            "getxattr {xattr} on {what} failed with {e}: the volume's cluster/distribute does not \
             support rebalance (an older version, or no cluster/distribute in the client graph); \
             nothing was moved"
        )),
        Err(e) => Reply::Failed(format!("getxattr {xattr} on {what} failed with {e}")),
    }
}

/// fix-layout's answer: `true` when the layout was rewritten (`fixed`), `false` unchanged.
pub fn fix_layout(what: &str, r: Result<Buf, Errno>) -> Reply<bool> {
    classify(FIX_LAYOUT, what, r, |t| match t {
        "fixed" => Some(true),
        "unchanged" => Some(false),
        _ => None,
    })
}

/// commit-layout's answer: `true` when marked trusted now, `false` unchanged.
pub fn commit_layout(what: &str, r: Result<Buf, Errno>) -> Reply<bool> {
    classify(COMMIT_LAYOUT, what, r, |t| match t {
        "trusted" => Some(true),
        "unchanged" => Some(false),
        _ => None,
    })
}

/// migrate's answer, for the xattr named `xattr`.
pub fn migrate(xattr: &str, what: &str, r: Result<Buf, Errno>) -> Reply<Migrated> {
    classify(xattr, what, r, |t| {
        if t == "in-place" {
            return Some(Migrated::InPlace);
        }
        if let Some(n) = t.strip_prefix("moved ") {
            return n.parse().ok().map(Migrated::Moved);
        }
        t.strip_prefix("skipped ")
            .filter(|r| !r.is_empty())
            .map(|r| Migrated::Skipped(r.to_owned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Result<Buf, Errno> {
        Ok(Buf::from_vec(s.as_bytes().to_vec()))
    }

    #[test]
    fn answers_and_errors() {
        assert_eq!(fix_layout("d", ok("fixed")), Reply::Ok(true));
        assert_eq!(fix_layout("d", ok("unchanged")), Reply::Ok(false));
        assert_eq!(commit_layout("d", ok("trusted")), Reply::Ok(true));
        assert_eq!(commit_layout("d", ok("unchanged\n")), Reply::Ok(false));
        let m = |r| migrate("xlfs.dht.migrate:p/n", "f", r);
        assert_eq!(m(ok("in-place")), Reply::Ok(Migrated::InPlace));
        assert_eq!(m(ok("moved 4096")), Reply::Ok(Migrated::Moved(4096)));
        assert_eq!(
            m(ok("skipped busy")),
            Reply::Ok(Migrated::Skipped("busy".into()))
        );
        assert_eq!(m(Err(Errno::ENOENT)), Reply::Vanished);
        let Reply::Failed(e) = m(Err(Errno::ENOTCONN)) else {
            panic!()
        };
        assert!(
            e.contains("xlfs.dht.migrate:p/n") && e.contains("ENOTCONN"),
            "{e}"
        );
        for bad in ["moved", "moved lots", "skipped ", "yes", ""] {
            let Reply::Fatal(e) = m(ok(bad)) else {
                panic!("{bad:?} accepted")
            };
            assert!(e.contains("not an answer"), "{e}");
        }
        for errno in [Errno::ENODATA, Errno::EPERM, Errno::ENOTSUP, Errno::ENOSYS] {
            let Reply::Fatal(e) = fix_layout("directory /", Err(errno)) else {
                panic!()
            };
            assert!(
                e.contains(FIX_LAYOUT) && e.contains(errno.name().unwrap_or("?")),
                "{e}"
            );
        }
        // Each xattr knows only its own answers.
        assert!(matches!(commit_layout("d", ok("fixed")), Reply::Fatal(_)));
        assert!(matches!(fix_layout("d", ok("trusted")), Reply::Fatal(_)));
        assert_eq!(
            migrate_links_name([(Gfid::ROOT, "a"), (Gfid::ROOT, "b c")]),
            "xlfs.dht.migrate-links:00000000-0000-0000-0000-000000000001/a/\
             00000000-0000-0000-0000-000000000001/b c"
        );
        assert_eq!(
            migrate_name(Gfid::ROOT, "a b"),
            "xlfs.dht.migrate:00000000-0000-0000-0000-000000000001/a b"
        );
    }
}
