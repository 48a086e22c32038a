//! Volfiles: the RON description of a translator graph.
//!
//! A volfile is a list of volumes (name, translator type, options, subvolumes); the last
//! volume, or the one `top` names, is the top of the graph.
//!
//! ```
//! use xlfs_core::volfile::Volfile;
//!
//! let vf = Volfile::parse(
//!     r#"(
//!         volumes: [
//!             (name: "brick", type: "storage/posix", options: { "directory": "/data" }),
//!             // comments and trailing commas are fine
//!             (name: "wb", type: "performance/write-behind", subvolumes: ["brick"]),
//!         ],
//!     )"#,
//!     "<inline>",
//! )?;
//! assert_eq!(vf.top_name(), "wb");
//! let order: Vec<&str> = vf.build_order().iter().map(|v| v.name.as_str()).collect();
//! assert_eq!(order, ["brick", "wb"]);
//! # Ok::<(), xlfs_core::volfile::VolfileError>(())
//! ```
//!
//! [`Volfile::parse`] checks syntax and structure (names, duplicates, subvolume references,
//! `top`, cycles); [`validate`] checks the volumes against the translator types (type known,
//! options known and valid, required options present, child count). Every error carries the
//! file and line:column.

// A `VolfileError` carries every name the user needs to fix the file (~170 bytes); errors
// are rare and never on a fop path, so that is not worth boxing (and `kind` stays matchable).
#![allow(clippy::result_large_err)]

mod error;
mod parse;
mod scan;
mod validate;

use std::collections::{HashMap, HashSet};
use std::fmt;

pub use error::{VolfileError, VolfileErrorKind};
pub use validate::{TypeLookup, effective_options, validate};

/// A place in a volfile, 1-based, columns in characters. `0:0` (the `Default`) means unknown,
/// e.g. in a volfile built in code; errors at an unknown place carry no position.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub fn is_known(&self) -> bool {
        self.line > 0
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One `"key": "value"` of a volume's options.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OptionDecl {
    pub key: String,
    /// The text of the value (numbers and booleans in the file are turned into text).
    pub value: String,
    /// Where the key is.
    pub pos: Pos,
}

/// One volume: an instance of a translator type.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VolumeDecl {
    pub name: String,
    /// `category/name`, e.g. `performance/write-behind`.
    pub type_name: String,
    /// In file order.
    pub options: Vec<OptionDecl>,
    /// Names of the children, in file order.
    pub subvolumes: Vec<String>,
    /// Where the value of `name` is (the volume's `(` if that is unknown).
    pub pos: Pos,
}

impl VolumeDecl {
    /// The value of option `key`, if given.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|o| o.key == key)
            .map(|o| o.value.as_str())
    }
}

/// A parsed volfile.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Volfile {
    /// The file path, or `<inline>`; errors start with it.
    pub origin: String,
    /// In file order.
    pub volumes: Vec<VolumeDecl>,
    /// The volume named by `top`, if the file names one.
    pub top: Option<String>,
}

impl Volfile {
    /// Parses `text` and checks its structure: names allowed and unique, option keys unique,
    /// subvolumes declared and listed once, `top` declared, no cycles. `origin` names the
    /// text in errors (a path, or `<inline>`).
    pub fn parse(text: &str, origin: &str) -> Result<Volfile, VolfileError> {
        parse::parse(text, origin)
    }

    /// `top` if given, else the last volume (empty if there are no volumes).
    pub fn top_name(&self) -> &str {
        match &self.top {
            Some(t) => t,
            None => self.volumes.last().map_or("", |v| v.name.as_str()),
        }
    }

    /// The volume called `name`.
    pub fn get(&self, name: &str) -> Option<&VolumeDecl> {
        self.volumes.iter().find(|v| v.name == name)
    }

    /// The volumes reachable from the top, children before parents, the top last. A volume
    /// with several parents appears once, before the first of them. Unknown names are
    /// skipped, and a cycle does not loop (parse rejects both).
    pub fn build_order(&self) -> Vec<&VolumeDecl> {
        let by_name: HashMap<&str, &VolumeDecl> = self
            .volumes
            .iter()
            .rev()
            .map(|v| (v.name.as_str(), v))
            .collect();
        let Some(top) = by_name.get(self.top_name()).copied() else {
            return Vec::new();
        };
        let mut order = Vec::new();
        let mut seen: HashSet<&str> = HashSet::from([top.name.as_str()]);
        // An explicit stack (volfiles can chain many volumes): (volume, next child index).
        let mut stack = vec![(top, 0usize)];
        while let Some((v, next)) = stack.last_mut() {
            let v = *v;
            match v.subvolumes.get(*next) {
                Some(child) => {
                    *next += 1;
                    if let Some(c) = by_name.get(child.as_str()).copied()
                        && seen.insert(c.name.as_str())
                    {
                        stack.push((c, 0));
                    }
                }
                None => {
                    order.push(v);
                    stack.pop();
                }
            }
        }
        order
    }

    /// Volumes the top does not reach. Not an error (a file may carry spare volumes and pick
    /// one with `top`), but [`validate`] logs a warning for each.
    pub fn unreachable(&self) -> Vec<&VolumeDecl> {
        let reached: HashSet<*const VolumeDecl> = self
            .build_order()
            .into_iter()
            .map(|v| v as *const VolumeDecl)
            .collect();
        self.volumes
            .iter()
            .filter(|v| !reached.contains(&(*v as *const VolumeDecl)))
            .collect()
    }

    /// The volfile as pretty RON; [`Volfile::parse`] reads it back to an equal volfile (up to
    /// positions and `origin`).
    pub fn to_ron(&self) -> String {
        let mut out = String::from("(\n    volumes: [\n");
        for v in &self.volumes {
            out.push_str("        (\n");
            out.push_str(&format!("            name: {},\n", ron_str(&v.name)));
            out.push_str(&format!("            type: {},\n", ron_str(&v.type_name)));
            if !v.options.is_empty() {
                out.push_str("            options: {\n");
                for o in &v.options {
                    out.push_str(&format!(
                        "                {}: {},\n",
                        ron_str(&o.key),
                        ron_str(&o.value)
                    ));
                }
                out.push_str("            },\n");
            }
            if !v.subvolumes.is_empty() {
                let subs: Vec<String> = v.subvolumes.iter().map(|s| ron_str(s)).collect();
                out.push_str(&format!("            subvolumes: [{}],\n", subs.join(", ")));
            }
            out.push_str("        ),\n");
        }
        out.push_str("    ],\n");
        if let Some(top) = &self.top {
            out.push_str(&format!("    top: {},\n", ron_str(top)));
        }
        out.push_str(")\n");
        out
    }
}

/// A RON string literal.
fn ron_str(s: &str) -> String {
    // Rust's escapes (`\"`, `\\`, `\n`, `\u{..}`) are RON's; ron's serializer is the
    // reference, the fallback is for the impossible error.
    ron::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}
