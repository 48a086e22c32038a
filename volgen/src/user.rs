//! User translators: a translator type volgen does not know (an outside developer's), placed
//! in the client graph above or below one of volgen's slots by a volume option.
//!
//! ```text
//! xlfs volume set gv0 user.counter "user/counter above performance.write-behind"
//! xlfs volume set gv0 user.counter.count off        (an option of that translator)
//! xlfs volume reset gv0 user.counter                 (takes it out, with its options)
//! ```
//!
//! The keys live in the volume's `options` like every other override. Setting one
//! regenerates the client volfile; mounts follow it (a watch at the brick, or the file
//! reread) and switch to the new graph without a remount. The type and its options are
//! checked when the volfile is generated (validated against the registry, which loads the
//! plugin from the search path): an unknown type or option writes nothing.

use xlfs_core::volfile::{OptionDecl, Pos, VolumeDecl};

use crate::error::VolgenError;
use crate::spec::VolumeSpec;
use crate::stack::{SLOTS, Side};

/// Prefix of the user translator keys.
pub const PREFIX: &str = "user.";

/// Where a user translator goes, relative to a slot's translator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Between the slot's translator and its parent (it becomes the slot's parent).
    Above,
    /// Between the slot's translator and its only child.
    Below,
}

/// A parsed `user.NAME = "TYPE above|below SLOT"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub name: String,
    pub type_name: String,
    pub position: Position,
    pub slot: String,
}

/// `user.NAME` -> `(NAME, None)`, `user.NAME.OPTION` -> `(NAME, Some(OPTION))`.
pub fn split_key(key: &str) -> Option<(&str, Option<&str>)> {
    let rest = key.trim().strip_prefix(PREFIX)?;
    Some(match rest.split_once('.') {
        Some((n, o)) => (n, Some(o)),
        None => (rest, None),
    })
}

const EXPECTED: &str = "\"TYPE above SLOT\" or \"TYPE below SLOT\" (e.g. \"user/counter above \
                        performance.write-behind\"); SLOT is a client-side key of `xlfs volume \
                        options` with a translator (debug.io-stats, performance.*, \
                        cluster.distribute)";

fn invalid(key: &str, value: &str, reason: String) -> VolgenError {
    VolgenError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason,
        expected: EXPECTED.into(),
    }
}

/// The client graph volume that fills `slot`, when it is one volume (protocol/client and
/// the replica/stripe sets are one per brick or set).
fn slot_volume(spec: &VolumeSpec, slot: &str) -> Option<String> {
    match slot {
        "debug.io-stats" => Some(spec.name.clone()),
        "cluster.distribute" => Some(format!("{}-dht", spec.name)),
        "protocol.client" | "cluster.replicate" | "cluster.stripe" => None,
        s => {
            let known = SLOTS
                .iter()
                .any(|x| x.key == s && matches!(x.side, Side::Client | Side::Both));
            known.then(|| format!("{}-{}", spec.name, s.rsplit('.').next().unwrap_or(s)))
        }
    }
}

/// Checks a user key and its value (the placement's syntax and slot, or an option's name);
/// the type and option values are checked when the volfile is generated.
pub fn check(spec: &VolumeSpec, key: &str, value: &str) -> Result<(), VolgenError> {
    let Some((name, option)) = split_key(key) else {
        return Err(invalid(key, value, "not a user.NAME key".into()));
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(invalid(
            key,
            value,
            format!("{name:?} is not a name of lowercase letters, digits and '-'"),
        ));
    }
    match option {
        Some("") => Err(invalid(key, value, "the option name is empty".into())),
        Some(_) => Ok(()),
        None => parse(spec, key, value).map(|_| ()),
    }
}

/// Parses the placement `value` of `key` (`user.NAME`).
pub fn parse(spec: &VolumeSpec, key: &str, value: &str) -> Result<Placement, VolgenError> {
    let name = split_key(key).map(|(n, _)| n).unwrap_or_default();
    let words: Vec<&str> = value.split_whitespace().collect();
    let [type_name, position, slot] = words.as_slice() else {
        return Err(invalid(key, value, "expected three words".into()));
    };
    if !type_name.contains('/') {
        return Err(invalid(
            key,
            value,
            format!("{type_name:?} is not a translator type (category/name)"),
        ));
    }
    let position = match *position {
        "above" => Position::Above,
        "below" => Position::Below,
        other => {
            return Err(invalid(
                key,
                value,
                format!("{other:?} is neither `above` nor `below`"),
            ));
        }
    };
    if slot_volume(spec, slot).is_none() {
        let slots: Vec<&str> = SLOTS
            .iter()
            .filter(|s| matches!(s.side, Side::Client | Side::Both))
            .map(|s| s.key)
            .filter(|k| slot_volume(spec, k).is_some())
            .collect();
        return Err(invalid(
            key,
            value,
            format!(
                "{slot:?} is not a slot with one translator in the client graph; slots: {}",
                slots.join(", ")
            ),
        ));
    }
    Ok(Placement {
        name: name.to_owned(),
        type_name: (*type_name).to_owned(),
        position,
        slot: (*slot).to_owned(),
    })
}

/// Every user translator of `spec`, in key order, with its options.
pub fn placements(spec: &VolumeSpec) -> Result<Vec<(Placement, Vec<OptionDecl>)>, VolgenError> {
    let mut out = Vec::new();
    for (key, value) in &spec.options {
        let Some((name, None)) = split_key(key) else {
            continue;
        };
        let p = parse(spec, key, value)?;
        let options = spec
            .options
            .iter()
            .filter_map(|(k, v)| match split_key(k) {
                Some((n, Some(opt))) if n == name => Some(OptionDecl {
                    key: opt.to_owned(),
                    value: v.trim().to_owned(),
                    pos: Pos::default(),
                }),
                _ => None,
            })
            .collect();
        out.push((p, options));
    }
    // Options of a user translator that is not placed.
    for key in spec.options.keys() {
        if let Some((name, Some(_))) = split_key(key)
            && !spec.options.contains_key(&format!("{PREFIX}{name}"))
        {
            return Err(invalid(
                key,
                &spec.options[key],
                format!(
                    "no user translator {name:?} is placed; set {PREFIX}{name} first (\"TYPE above \
                     SLOT\")"
                ),
            ));
        }
    }
    Ok(out)
}

/// Inserts the user translators of `spec` into the client graph `volumes` (a chain above
/// the cluster layers, top last).
pub(crate) fn place(spec: &VolumeSpec, volumes: &mut Vec<VolumeDecl>) -> Result<(), VolgenError> {
    for (p, options) in placements(spec)? {
        let key = format!("{PREFIX}{}", p.name);
        let value = &spec.options[&key];
        let target = slot_volume(spec, &p.slot).unwrap_or_default();
        let Some(at) = volumes.iter().position(|v| v.name == target) else {
            return Err(invalid(
                &key,
                value,
                format!(
                    "slot {} has no translator in this volume's client graph (switched off, or \
                     not needed by its layout)",
                    p.slot
                ),
            ));
        };
        let name = format!("{}-user-{}", spec.name, p.name);
        let mut decl = VolumeDecl {
            name: name.clone(),
            type_name: p.type_name.clone(),
            options,
            subvolumes: Vec::new(),
            pos: Pos::default(),
        };
        match p.position {
            Position::Above => {
                for v in volumes.iter_mut() {
                    for s in v.subvolumes.iter_mut().filter(|s| **s == target) {
                        *s = name.clone();
                    }
                }
                decl.subvolumes = vec![target];
                volumes.insert(at + 1, decl);
            }
            Position::Below => {
                let children = std::mem::take(&mut volumes[at].subvolumes);
                if children.len() != 1 {
                    volumes[at].subvolumes = children;
                    return Err(invalid(
                        &key,
                        value,
                        format!(
                            "{} has {} children here; `below` needs a slot with one child (use \
                             `above`)",
                            p.slot,
                            volumes[at].subvolumes.len()
                        ),
                    ));
                }
                decl.subvolumes = children;
                volumes[at].subvolumes = vec![name];
                volumes.insert(at, decl);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brick::Brick;

    fn spec() -> VolumeSpec {
        VolumeSpec::new("gv0", vec![Brick::parse("/b0").expect("brick")])
    }

    fn decl(name: &str, subs: &[&str]) -> VolumeDecl {
        VolumeDecl {
            name: name.into(),
            type_name: "t/x".into(),
            options: vec![],
            subvolumes: subs.iter().map(|s| s.to_string()).collect(),
            pos: Pos::default(),
        }
    }

    fn chain() -> Vec<VolumeDecl> {
        vec![
            decl("gv0-client-0", &[]),
            decl("gv0-write-behind", &["gv0-client-0"]),
            decl("gv0", &["gv0-write-behind"]),
        ]
    }

    fn shape(v: &[VolumeDecl]) -> Vec<(String, Vec<String>)> {
        v.iter()
            .map(|d| (d.name.clone(), d.subvolumes.clone()))
            .collect()
    }

    #[test]
    fn above_and_below_a_slot() {
        let mut s = spec();
        s.options.insert(
            "user.c".into(),
            "user/c above performance.write-behind".into(),
        );
        s.options.insert("user.c.count".into(), "off".into());
        let mut v = chain();
        place(&s, &mut v).expect("placed");
        assert_eq!(
            shape(&v),
            vec![
                ("gv0-client-0".into(), vec![]),
                ("gv0-write-behind".into(), vec!["gv0-client-0".into()]),
                ("gv0-user-c".into(), vec!["gv0-write-behind".into()]),
                ("gv0".into(), vec!["gv0-user-c".into()]),
            ]
        );
        assert_eq!(v[2].options[0].key, "count");

        let mut s = spec();
        s.options.insert(
            "user.c".into(),
            "user/c below performance.write-behind".into(),
        );
        let mut v = chain();
        place(&s, &mut v).expect("placed");
        assert_eq!(
            shape(&v),
            vec![
                ("gv0-client-0".into(), vec![]),
                ("gv0-user-c".into(), vec!["gv0-client-0".into()]),
                ("gv0-write-behind".into(), vec!["gv0-user-c".into()]),
                ("gv0".into(), vec!["gv0-write-behind".into()]),
            ]
        );
        // Above the top: it becomes the top.
        let mut s = spec();
        s.options
            .insert("user.c".into(), "user/c above debug.io-stats".into());
        let mut v = chain();
        place(&s, &mut v).expect("placed");
        assert_eq!(v.last().map(|d| d.name.as_str()), Some("gv0-user-c"));
    }

    #[test]
    fn bad_placements_say_what_is_expected() {
        let s = spec();
        for (value, why) in [
            ("user/c", "three words"),
            ("counter above debug.io-stats", "not a translator type"),
            (
                "user/c beside debug.io-stats",
                "neither `above` nor `below`",
            ),
            (
                "user/c above protocol.client",
                "not a slot with one translator",
            ),
            (
                "user/c above storage.posix",
                "not a slot with one translator",
            ),
        ] {
            let e = check(&s, "user.c", value).expect_err(value).to_string();
            assert!(e.contains(why), "{value}: {e}");
        }
        let mut s = spec();
        s.options.insert("user.c.count".into(), "off".into());
        let e = placements(&s).expect_err("orphan option").to_string();
        assert!(e.contains("set user.c first"), "{e}");
        let mut s = spec();
        s.options
            .insert("user.c".into(), "user/c above performance.io-cache".into());
        let e = place(&s, &mut chain())
            .expect_err("absent slot")
            .to_string();
        assert!(e.contains("has no translator"), "{e}");
    }
}
