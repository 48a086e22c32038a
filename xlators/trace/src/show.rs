//! How arguments and replies appear in trace lines: their `Debug` form, except types carrying
//! payloads, which show lengths instead of bytes (and long listings, which show a count).
//!
//! The choice is made per concrete type at the call site with autoref specialisation:
//! `(&Show(&value)).show(out)` picks [`Payload::show`] when `Show<T>` implements it and falls
//! back to [`ViaDebug::show`] (one auto-reference further away) for any other `Debug` type, so
//! a fop added to the table with new argument types is traced without an edit here.

use std::fmt::{Debug, Write as _};

use abi_stable::std_types::RVec;
use xlator_api::{Buf, DirEntry, Errno, Xattr};

/// A value to render into a trace line.
pub struct Show<'a, T>(pub &'a T);

/// Types with a trace form of their own.
pub trait Payload {
    fn show(&self, out: &mut String);
}

/// Everything else: `Debug`.
pub trait ViaDebug {
    fn show(&self, out: &mut String);
}

impl<T: Debug> ViaDebug for &Show<'_, T> {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "{:?}", self.0);
    }
}

impl Payload for Show<'_, Buf> {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "<{} bytes>", self.0.len());
    }
}

impl Payload for Show<'_, Xattr> {
    fn show(&self, out: &mut String) {
        let _ = write!(
            out,
            "{:?}=<{} bytes>",
            self.0.name.as_str(),
            self.0.value.len()
        );
    }
}

impl Payload for Show<'_, RVec<Xattr>> {
    fn show(&self, out: &mut String) {
        out.push('[');
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            Show(x).show(out);
        }
        out.push(']');
    }
}

/// Directory listings show how many entries and the first few names.
const LISTED_NAMES: usize = 8;

impl Payload for Show<'_, RVec<DirEntry>> {
    fn show(&self, out: &mut String) {
        let _ = write!(out, "<{} entries: [", self.0.len());
        for (i, e) in self.0.iter().take(LISTED_NAMES).enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{:?}", e.name.as_str());
        }
        if self.0.len() > LISTED_NAMES {
            out.push_str(", ...");
        }
        out.push_str("]>");
    }
}

/// Appends `name=<value>` to an argument list.
macro_rules! push_arg {
    ($out:expr, $name:ident) => {{
        #[allow(unused_imports)]
        use $crate::show::{Payload as _, ViaDebug as _};
        if !$out.is_empty() {
            $out.push_str(", ");
        }
        $out.push_str(concat!(stringify!($name), "="));
        (&$crate::show::Show(&$name)).show(&mut $out);
    }};
}

/// Renders a reply: `Ok(<value>)` or `Err(ENOENT)`.
macro_rules! show_reply {
    ($reply:expr) => {{
        #[allow(unused_imports)]
        use $crate::show::{Payload as _, ViaDebug as _};
        let mut out = String::new();
        match $reply {
            Ok(v) => {
                out.push_str("Ok(");
                (&$crate::show::Show(v)).show(&mut out);
                out.push(')');
            }
            Err(e) => $crate::show::push_errno(&mut out, *e),
        }
        out
    }};
}

pub(crate) use {push_arg, show_reply};

/// Appends `Err(ENOENT)`.
pub fn push_errno(out: &mut String, e: Errno) {
    let _ = write!(out, "Err({e:?})");
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::RString;
    use xlator_api::{Gfid, Iatt, Loc};

    use super::*;

    fn args_of(data: Buf, loc: Loc, flags: i32) -> String {
        let mut out = String::new();
        push_arg!(out, loc);
        push_arg!(out, data);
        push_arg!(out, flags);
        out
    }

    #[test]
    fn payloads_show_lengths_and_the_rest_debug() {
        let s = args_of(Buf::from("top secret"), Loc::new(Gfid::ROOT, "a"), 3);
        assert_eq!(
            s,
            "loc=Loc { parent: 00000000-0000-0000-0000-000000000001, name: \"a\" }, \
             data=<10 bytes>, flags=3"
        );
    }

    #[test]
    fn xattrs_show_names_and_value_lengths() {
        let xattrs: RVec<Xattr> = vec![
            Xattr {
                name: "user.a".into(),
                value: Buf::from("12345"),
            },
            Xattr {
                name: "user.b".into(),
                value: Buf::new(),
            },
        ]
        .into();
        let mut out = String::new();
        push_arg!(out, xattrs);
        assert_eq!(out, "xattrs=[\"user.a\"=<5 bytes>, \"user.b\"=<0 bytes>]");
    }

    #[test]
    fn replies() {
        let ok: Result<Buf, Errno> = Ok(Buf::zeroed(4096));
        assert_eq!(show_reply!(&ok), "Ok(<4096 bytes>)");
        let unit: Result<(), Errno> = Ok(());
        assert_eq!(show_reply!(&unit), "Ok(())");
        let err: Result<u64, Errno> = Err(Errno::ENOENT);
        assert_eq!(show_reply!(&err), "Err(ENOENT)");
        let name: Result<RString, Errno> = Ok("target".into());
        assert_eq!(show_reply!(&name), "Ok(\"target\")");
    }

    #[test]
    fn long_listings_are_cut() {
        let entry = |i: usize| DirEntry {
            name: format!("f{i}").into(),
            next_offset: i as u64,
            attr: Iatt::default(),
            xattrs: Default::default(),
        };
        let few: Result<RVec<DirEntry>, Errno> = Ok((0..2).map(entry).collect());
        assert_eq!(show_reply!(&few), "Ok(<2 entries: [\"f0\", \"f1\"]>)");
        let many: Result<RVec<DirEntry>, Errno> = Ok((0..100).map(entry).collect());
        let s = show_reply!(&many);
        assert!(s.starts_with("Ok(<100 entries: [\"f0\", \"f1\","), "{s}");
        assert!(s.ends_with("\"f7\", ...]>)"), "{s}");
        assert!(!s.contains("f8"), "{s}");
    }
}
