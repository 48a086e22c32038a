//! Volfile errors: where (file, line:column) and what, in words that say what to do.

use std::fmt;

use super::Pos;

/// A volfile that cannot be used. Displays as one line, `FILE:LINE:COL: message`
/// (`FILE: message` when the position is unknown, e.g. for a generated volfile).
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub struct VolfileError {
    /// The file path, or `<inline>`.
    pub origin: String,
    pub pos: Option<Pos>,
    pub kind: VolfileErrorKind,
}

impl VolfileError {
    /// `pos` of `0:0` (unknown, see [`Pos`]) becomes `None`.
    pub(crate) fn new(origin: &str, pos: Option<Pos>, kind: VolfileErrorKind) -> VolfileError {
        VolfileError {
            origin: origin.to_owned(),
            pos: pos.filter(Pos::is_known),
            kind,
        }
    }
}

impl fmt::Display for VolfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self.pos {
            Some(pos) => format!("{}:{}: {}", self.origin, pos, self.kind),
            None => format!("{}: {}", self.origin, self.kind),
        };
        // Names and values come from the file and may hold newlines; the error stays one line.
        for c in text.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// What is wrong. The `Display` of a kind is the message without the location.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VolfileErrorKind {
    /// Not RON, or not the shape of a volfile (ron's message, or ours for unterminated strings,
    /// comments and unbalanced brackets, which ron reports at a misleading place).
    Syntax(String),
    /// No volumes at all.
    Empty,
    /// A volume name or option key that is empty or has characters we do not allow.
    BadName {
        what: &'static str,
        name: String,
        reason: String,
    },
    /// Two volumes with the same name; `first` is where the first one is.
    DuplicateVolume { name: String, first: Pos },
    /// The same option key twice in one volume.
    DuplicateOption {
        volume: String,
        key: String,
        first: Pos,
    },
    /// The same child twice in one `subvolumes` list.
    DuplicateSubvolume { volume: String, child: String },
    /// A `subvolumes` entry that names no volume of the file.
    UnknownSubvolume {
        volume: String,
        child: String,
        suggestion: Option<String>,
    },
    /// `top` names no volume of the file.
    UnknownTop {
        name: String,
        suggestion: Option<String>,
    },
    /// A volume is its own descendant; `path` is `[a, b, a]`.
    Cycle { path: Vec<String> },
    /// No translator provides `type_name`; `detail` is the lookup's explanation (for cdylibs:
    /// every path searched).
    UnknownType {
        volume: String,
        type_name: String,
        suggestion: Option<String>,
        detail: String,
    },
    /// The type declares no option `key`.
    UnknownOption {
        volume: String,
        type_name: String,
        key: String,
        suggestion: Option<String>,
        /// Every key the type declares.
        known: Vec<String>,
    },
    /// The value does not pass the option's check; `reason` is the check's message and
    /// `expected` describes a valid value.
    InvalidOption {
        volume: String,
        key: String,
        value: String,
        reason: String,
        expected: String,
    },
    /// A required option (no default) is not given.
    MissingOption {
        volume: String,
        type_name: String,
        key: String,
        expected: String,
    },
    /// The number of subvolumes is outside the type's `min_children..=max_children`.
    ChildCount {
        volume: String,
        type_name: String,
        count: usize,
        min: u32,
        max: u32,
    },
}

impl fmt::Display for VolfileErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use VolfileErrorKind as K;
        match self {
            K::Syntax(msg) => write!(f, "syntax error: {msg}"),
            K::Empty => write!(
                f,
                "the volfile declares no volumes; write `( volumes: [ (name: \"...\", type: \
                 \"...\"), ... ] )`"
            ),
            K::BadName { what, name, reason } => {
                write!(f, "{what} {name:?} is not allowed: {reason}")
            }
            K::DuplicateVolume { name, first } => write!(
                f,
                "volume `{name}` is declared twice (first at {first}); rename one of them"
            ),
            K::DuplicateOption { volume, key, first } => write!(
                f,
                "option `{key}` is given twice in volume `{volume}` (first at {first}); keep one"
            ),
            K::DuplicateSubvolume { volume, child } => write!(
                f,
                "volume `{volume}` lists subvolume `{child}` twice; remove one of the entries"
            ),
            K::UnknownSubvolume {
                volume,
                child,
                suggestion,
            } => {
                write!(
                    f,
                    "volume `{volume}` has subvolume `{child}`, which is not declared"
                )?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean `{s}`?"),
                    None => write!(f, "; declare it in `volumes` or fix the name"),
                }
            }
            K::UnknownTop { name, suggestion } => {
                write!(f, "`top` names volume `{name}`, which is not declared")?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean `{s}`?"),
                    None => write!(f, "; name one of the declared volumes or remove `top`"),
                }
            }
            K::Cycle { path } => write!(
                f,
                "volumes form a cycle: {}; a volume cannot be its own subvolume, remove one of \
                 these links",
                path.join(" -> ")
            ),
            K::UnknownType {
                volume,
                type_name,
                suggestion,
                detail,
            } => {
                if let Some(why) = detail.strip_prefix(crate::registry::LIBRARY_REFUSED) {
                    // The library was found: say so, and why it was refused.
                    return write!(
                        f,
                        "volume `{volume}`: the library of type `{type_name}` was found but \
                         not loaded: {}",
                        one_line(why)
                    );
                }
                write!(f, "volume `{volume}` has unknown type `{type_name}`")?;
                if let Some(s) = suggestion {
                    write!(f, "; did you mean `{s}`?")?;
                }
                let detail = one_line(detail);
                if !detail.is_empty() {
                    write!(f, " ({detail})")?;
                }
                Ok(())
            }
            K::UnknownOption {
                volume,
                type_name,
                key,
                suggestion,
                known,
            } => {
                write!(f, "volume `{volume}` ({type_name}) has no option `{key}`")?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean `{s}`?"),
                    None if known.is_empty() => write!(f, "; {type_name} takes no options"),
                    None => write!(f, "; its options are: {}", known.join(", ")),
                }
            }
            K::InvalidOption {
                volume,
                key,
                value: _,
                reason,
                expected,
            } => write!(
                f,
                "option `{key}` of volume `{volume}`: {reason}; expected {expected}"
            ),
            K::MissingOption {
                volume,
                type_name,
                key,
                expected,
            } => write!(
                f,
                "volume `{volume}` ({type_name}) needs option `{key}` ({expected}); add \
                 `\"{key}\": \"...\"` to its options"
            ),
            K::ChildCount {
                volume,
                type_name,
                count,
                min,
                max,
            } => write!(
                f,
                "volume `{volume}` ({type_name}) has {count} subvolume{} but {type_name} takes \
                 {}; fix its `subvolumes` list",
                if *count == 1 { "" } else { "s" },
                child_range(*min, *max)
            ),
        }
    }
}

/// "exactly 1", "at least 2", "none", "1 to 3".
fn child_range(min: u32, max: u32) -> String {
    match (min, max) {
        (0, 0) => "none (it is a leaf)".to_owned(),
        (a, b) if a == b => format!("exactly {a}"),
        (a, u32::MAX) => format!("at least {a}"),
        (0, b) => format!("at most {b}"),
        (a, b) => format!("{a} to {b}"),
    }
}

/// Joins the lines of a multi-line explanation so the error stays on one line.
fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The candidate closest to `word`, if it is close enough to be a likely typo. A word without
/// `/` is also compared with the part after the `/` of a candidate (`posix` finds
/// `storage/posix`).
pub(crate) fn suggest<'a, I>(word: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = (word.chars().count() / 3).clamp(1, 3);
    let lower = word.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for cand in candidates {
        if cand == word {
            continue;
        }
        let mut d = strsim::osa_distance(&lower, &cand.to_lowercase());
        if !word.contains('/')
            && let Some((_, tail)) = cand.rsplit_once('/')
        {
            d = d.min(strsim::osa_distance(&lower, &tail.to_lowercase()));
        }
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = ["window-size", "flush-behind"];
        assert_eq!(suggest("window-sise", keys).as_deref(), Some("window-size"));
        assert_eq!(
            suggest("flush_behind", keys).as_deref(),
            Some("flush-behind")
        );
        assert_eq!(suggest("cache", keys), None);
        let types = ["storage/posix", "performance/write-behind"];
        assert_eq!(
            suggest("storage/posx", types).as_deref(),
            Some("storage/posix")
        );
        assert_eq!(suggest("posix", types).as_deref(), Some("storage/posix"));
        assert_eq!(
            suggest("write-behnd", types).as_deref(),
            Some("performance/write-behind")
        );
    }

    #[test]
    fn child_ranges_read_well() {
        assert_eq!(child_range(0, 0), "none (it is a leaf)");
        assert_eq!(child_range(1, 1), "exactly 1");
        assert_eq!(child_range(1, u32::MAX), "at least 1");
        assert_eq!(child_range(0, 4), "at most 4");
        assert_eq!(child_range(2, 4), "2 to 4");
    }
}
