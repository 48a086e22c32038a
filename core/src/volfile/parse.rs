//! Text to [`Volfile`]: ron does the syntax, [`scan`](super::scan) finds the positions, then
//! the structural checks.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::error::suggest;
use super::scan::{self, Layout, VolumeLayout};
use super::{OptionDecl, Pos, Volfile, VolfileError, VolfileErrorKind as K, VolumeDecl};

/// The file as ron sees it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "Volfile")]
struct RawVolfile {
    volumes: Vec<RawVolume>,
    #[serde(default, deserialize_with = "some_string")]
    top: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "Volume")]
struct RawVolume {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    #[serde(default, deserialize_with = "option_pairs")]
    options: Vec<(String, String)>,
    #[serde(default)]
    subvolumes: Vec<String>,
}

/// `top: "x"` (without ron's `Some(...)`).
fn some_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// The options map as pairs in file order, so that duplicate keys survive to be reported
/// (a `BTreeMap` would keep the last one silently).
fn option_pairs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of option names to values, like { \"window-size\": \"1MB\" }")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, OptionText>()? {
                out.push((k, v.0));
            }
            Ok(out)
        }
    }
    d.deserialize_map(Pairs)
}

/// An option value: a string, or a number or boolean taken as its text.
struct OptionText(String);

impl<'de> Deserialize<'de> for OptionText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = OptionText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an option value in quotes, like \"1MB\" or \"on\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OptionText, E> {
                Ok(OptionText(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<OptionText, E> {
                Ok(OptionText(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<OptionText, E> {
                Ok(OptionText(if v { "on" } else { "off" }.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<OptionText, E> {
                Ok(OptionText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<OptionText, E> {
                Ok(OptionText(v.to_string()))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<OptionText, E> {
                Ok(OptionText(v.to_string()))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<OptionText, E> {
                Ok(OptionText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<OptionText, E> {
                Ok(OptionText(v.to_string()))
            }
        }
        d.deserialize_any(Text)
    }
}

pub(super) fn parse(text: &str, origin: &str) -> Result<Volfile, VolfileError> {
    let raw: RawVolfile = match ron::Options::default().from_str(text) {
        Ok(raw) => raw,
        Err(e) => return Err(syntax_error(text, origin, &e)),
    };
    // ron accepted the text, so the layout is found; if not (a bug in `scan`), positions are
    // unknown rather than wrong.
    let layout = scan::layout(text)
        .filter(|l| l.volumes.len() == raw.volumes.len())
        .unwrap_or_else(|| Layout {
            volumes: vec![VolumeLayout::default(); raw.volumes.len()],
            ..Layout::default()
        });
    let volumes = raw
        .volumes
        .into_iter()
        .zip(&layout.volumes)
        .map(|(v, l)| {
            let key_pos = |i: usize| {
                (l.option_keys.len() == v.options.len())
                    .then(|| l.option_keys.get(i).copied())
                    .flatten()
                    .unwrap_or_default()
            };
            VolumeDecl {
                pos: l.name.unwrap_or(l.open),
                options: v
                    .options
                    .iter()
                    .enumerate()
                    .map(|(i, (key, value))| OptionDecl {
                        key: key.clone(),
                        value: value.clone(),
                        pos: key_pos(i),
                    })
                    .collect(),
                name: v.name,
                type_name: v.type_name,
                subvolumes: v.subvolumes,
            }
        })
        .collect();
    let vf = Volfile {
        origin: origin.to_owned(),
        volumes,
        top: raw.top,
    };
    check_structure(&vf, Some(&layout))?;
    Ok(vf)
}

/// ron's error, unless the lexer finds the real cause of it (an unterminated string or
/// comment, an unbalanced bracket), or the text has no tokens at all.
fn syntax_error(text: &str, origin: &str, e: &ron::error::SpannedError) -> VolfileError {
    let (pos, kind) = match scan::check(text) {
        Err(lex) => (Some(lex.pos), K::Syntax(lex.message)),
        Ok(true) => (None, K::Empty),
        Ok(false) => {
            let mut msg = e.code.to_string();
            if scan::starts_with_brace(text) {
                msg.push_str("; a volfile is a parenthesised struct: `( volumes: [ ... ] )`");
            }
            let pos = Pos {
                line: u32::try_from(e.span.start.line).unwrap_or(u32::MAX),
                col: u32::try_from(e.span.start.col).unwrap_or(u32::MAX),
            };
            (Some(scan::next_token_at(text, pos)), K::Syntax(msg))
        }
    };
    VolfileError::new(origin, pos, kind)
}

/// Characters a volume name may have (names become log fields, metric labels and paths).
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty; give the volume a name".to_owned());
    }
    if name.len() > 255 {
        return Some("it is longer than 255 bytes".to_owned());
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return Some("it must start with a letter, a digit or `_`".to_owned());
    }
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c)))
        .map(|c| format!("{c:?} is not allowed; use letters, digits, `-`, `_` and `.`"))
}

fn key_problem(key: &str) -> Option<String> {
    if key.trim().is_empty() {
        return Some("it is empty; write the option's name".to_owned());
    }
    key.chars()
        .find(|c| c.is_whitespace() || c.is_control())
        .map(|c| format!("{c:?} is not allowed in an option name"))
}

/// The checks that need no translator types. `layout` gives the positions of what the
/// declarations do not record (subvolume entries, `top`); without it (a volfile built in
/// code) those errors point at the volume.
pub(super) fn check_structure(vf: &Volfile, layout: Option<&Layout>) -> Result<(), VolfileError> {
    let err = |pos: Option<Pos>, kind| Err(VolfileError::new(&vf.origin, pos, kind));
    if vf.volumes.is_empty() {
        return err(layout.and_then(|l| l.volumes_list), K::Empty);
    }
    let sub_pos = |vi: usize, si: usize| -> Pos {
        layout
            .and_then(|l| l.volumes.get(vi))
            .filter(|l| l.subvolumes.len() == vf.volumes[vi].subvolumes.len())
            .and_then(|l| l.subvolumes.get(si).copied())
            .unwrap_or(vf.volumes[vi].pos)
    };

    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, v) in vf.volumes.iter().enumerate() {
        if let Some(reason) = name_problem(&v.name) {
            return err(
                Some(v.pos),
                K::BadName {
                    what: "volume name",
                    name: v.name.clone(),
                    reason,
                },
            );
        }
        if let Some(&first) = index.get(v.name.as_str()) {
            let first = vf.volumes[first].pos;
            return err(
                Some(v.pos),
                K::DuplicateVolume {
                    name: v.name.clone(),
                    first,
                },
            );
        }
        index.insert(&v.name, i);
    }

    for (vi, v) in vf.volumes.iter().enumerate() {
        let mut keys: HashMap<&str, Pos> = HashMap::new();
        for o in &v.options {
            if let Some(reason) = key_problem(&o.key) {
                return err(
                    Some(o.pos),
                    K::BadName {
                        what: "option key",
                        name: o.key.clone(),
                        reason,
                    },
                );
            }
            if let Some(&first) = keys.get(o.key.as_str()) {
                let kind = K::DuplicateOption {
                    volume: v.name.clone(),
                    key: o.key.clone(),
                    first,
                };
                return err(Some(o.pos), kind);
            }
            keys.insert(&o.key, o.pos);
        }
        for (si, child) in v.subvolumes.iter().enumerate() {
            if !index.contains_key(child.as_str()) {
                let suggestion = suggest(child, index.keys().copied());
                let kind = K::UnknownSubvolume {
                    volume: v.name.clone(),
                    child: child.clone(),
                    suggestion,
                };
                return err(Some(sub_pos(vi, si)), kind);
            }
            if v.subvolumes[..si].contains(child) {
                let kind = K::DuplicateSubvolume {
                    volume: v.name.clone(),
                    child: child.clone(),
                };
                return err(Some(sub_pos(vi, si)), kind);
            }
        }
    }

    if let Some(top) = &vf.top
        && !index.contains_key(top.as_str())
    {
        let suggestion = suggest(top, index.keys().copied());
        return err(
            layout.and_then(|l| l.top),
            K::UnknownTop {
                name: top.clone(),
                suggestion,
            },
        );
    }

    if let Some((path, (vi, si))) = find_cycle(vf, &index) {
        return err(Some(sub_pos(vi, si)), K::Cycle { path });
    }
    Ok(())
}

/// The first cycle met by a depth-first walk from each volume in file order: its names
/// (first repeated last) and the (volume, subvolume entry) that closes it. Every subvolume
/// is known to be in `index`.
fn find_cycle(vf: &Volfile, index: &HashMap<&str, usize>) -> Option<(Vec<String>, (usize, usize))> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; vf.volumes.len()];
    for start in 0..vf.volumes.len() {
        if mark[start] != Mark::New {
            continue;
        }
        mark[start] = Mark::OnPath;
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some((v, next)) = stack.last_mut() {
            let (v, si) = (*v, *next);
            let Some(child) = vf.volumes[v].subvolumes.get(si) else {
                mark[v] = Mark::Done;
                stack.pop();
                continue;
            };
            *next += 1;
            let Some(&c) = index.get(child.as_str()) else {
                continue;
            };
            match mark[c] {
                Mark::New => {
                    mark[c] = Mark::OnPath;
                    stack.push((c, 0));
                }
                Mark::OnPath => {
                    let from = stack.iter().position(|&(n, _)| n == c).unwrap_or(0);
                    let mut path: Vec<String> = stack[from..]
                        .iter()
                        .map(|&(n, _)| vf.volumes[n].name.clone())
                        .collect();
                    path.push(vf.volumes[c].name.clone());
                    return Some((path, (v, si)));
                }
                Mark::Done => {}
            }
        }
    }
    None
}
