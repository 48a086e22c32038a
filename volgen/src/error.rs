//! Why a volume description or an option was rejected. Every message says what is wrong and
//! what to do instead.

use std::path::PathBuf;

use xlfs_core::volfile::VolfileError;

/// A rejected volume description, option or spec file.
#[derive(thiserror::Error, Debug)]
pub enum VolgenError {
    #[error("volume name {name:?} is not allowed: {reason}")]
    BadName { name: String, reason: String },

    #[error(
        "volume {volume:?} has no bricks; give at least one brick (a local path or host:/path)"
    )]
    NoBricks { volume: String },

    #[error("brick {brick:?} is not valid: {reason}")]
    BadBrick { brick: String, reason: String },

    #[error(
        "brick {brick:?} is given twice (bricks {first} and {second}); each brick must be a \
         different directory"
    )]
    DuplicateBrick {
        brick: String,
        first: usize,
        second: usize,
    },

    #[error(
        "brick {inner:?} is inside brick {outer:?}; a brick directory must not contain another \
         brick (both would store the same files)"
    )]
    NestedBrick { inner: String, outer: String },

    #[error("{what} count must be at least 1 (got 0); use 1 or leave it out")]
    ZeroCount { what: &'static str },

    #[error(
        "arbiter {arbiter} with replica {replica}: an arbiter needs replica 3 and there is at \
         most one per set (replica 3 arbiter 1: two data bricks and an arbiter, the last brick \
         of each set)"
    )]
    BadArbiter { replica: u32, arbiter: u32 },

    #[error(
        "{bricks} brick{} cannot be laid out as {layout}: the brick count must be a multiple \
         of {set} (replica {replica} x stripe {stripe}), e.g. {set} or {twice} bricks",
        if *.bricks == 1 { "" } else { "s" }, twice = .set * 2
    )]
    BrickCount {
        bricks: usize,
        replica: u32,
        stripe: u32,
        set: usize,
        layout: String,
    },

    #[error(
        "ports {base}..{} do not fit: {bricks} bricks need one port each from the base port \
         {base}; pick a base port between 1024 and {}",
        u64::from(*.base) + *.bricks as u64 - 1, 65536 - *.bricks as u64
    )]
    PortRange { base: u16, bricks: usize },

    #[error(
        "volume {volume:?}: brick_ids are not valid: {reason}; they are written by `xlfs \
         volume add-brick/remove-brick`; restore the ids they wrote, or remove the field if \
         no brick was ever removed"
    )]
    BadBrickIds { volume: String, reason: String },

    #[error("auth allow entry {entry:?} is not valid: {reason}")]
    BadAuth { entry: String, reason: String },

    #[error(
        "{what} needs translator type {type_name}, which is not available in this build \
         ({detail}); build or install that translator, or change the volume layout"
    )]
    Unavailable {
        what: String,
        type_name: String,
        detail: String,
    },

    #[error("unknown option key {key:?}{}; run `xlfs volume options` for every key",
        suggestion_text(.suggestion))]
    UnknownKey {
        key: String,
        suggestion: Option<String>,
    },

    #[error("option key {key:?} is ambiguous, it is an option of several translators: {}; \
             give the full key", .candidates.join(", "))]
    AmbiguousKey {
        key: String,
        candidates: Vec<String>,
    },

    #[error("option {key:?} cannot be set: {reason}")]
    ManagedKey { key: String, reason: String },

    #[error("option {key:?}: {reason}; expected {expected}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
        expected: String,
    },

    #[error("generated {which} does not load: {source}")]
    Generated {
        which: String,
        #[source]
        source: Box<VolfileError>,
    },

    #[error("{}: not a valid volume description: {message}", .path.display())]
    SpecSyntax { path: PathBuf, message: String },

    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl VolgenError {
    /// Whether the error is about what the user asked for (a rejected description, key or
    /// value), as opposed to an I/O problem or a missing translator.
    pub fn is_rejection(&self) -> bool {
        !matches!(
            self,
            VolgenError::Io { .. } | VolgenError::Unavailable { .. }
        )
    }
}

fn suggestion_text(s: &Option<String>) -> String {
    match s {
        Some(s) => format!(" (did you mean {s:?}?)"),
        None => String::new(),
    }
}

/// The closest candidate to `word`, if any is close enough to be a likely typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(word, c);
        if score > best.map_or(0.0, |b| b.0) {
            best = Some((score, c));
        }
    }
    best.filter(|(score, c)| {
        *score >= 0.85 || strsim::levenshtein(word, c) <= word.len().max(c.len()) / 4
    })
    .map(|(_, c)| c.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_words_only() {
        let keys = ["window-size", "flush-behind", "cache-size"];
        assert_eq!(suggest("windo-size", keys).as_deref(), Some("window-size"));
        assert_eq!(suggest("zzz", keys), None);
    }

    #[test]
    fn brick_count_message_reads_well() {
        let e = VolgenError::BrickCount {
            bricks: 3,
            replica: 2,
            stripe: 1,
            set: 2,
            layout: "replica 2".into(),
        };
        assert_eq!(
            e.to_string(),
            "3 bricks cannot be laid out as replica 2: the brick count must be a multiple of 2 \
             (replica 2 x stripe 1), e.g. 2 or 4 bricks"
        );
    }
}
