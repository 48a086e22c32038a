//! Options by name: the keys `volume set` accepts, read from the schemas the translators
//! export (there is no second option table).
//!
//! A key is `<slot>.<option>` (`performance.write-behind.window-size`), the bare option
//! (`window-size`) when exactly one placed translator has it, or `<slot>` alone for an
//! optional translator (`performance.io-cache off` leaves it out). `auth.allow` sets the
//! volume's allow-list.

use std::collections::BTreeMap;

use xlator_api::{OptionKind, OptionSpec};
use xlfs_core::volfile::TypeLookup;

use crate::check::check_auth_entry;
use crate::error::{VolgenError, suggest};
use crate::spec::VolumeSpec;
use crate::stack::{Role, SLOTS, Side, Slot};

/// Overrides by slot key: `(option, value)`, a switch with an empty option name.
pub(crate) type Overrides = BTreeMap<&'static str, Vec<(String, String)>>;

/// The key of the volume's allow-list.
pub const AUTH_ALLOW: &str = "auth.allow";

/// What a key changes.
#[derive(Clone, Debug)]
pub enum Target {
    /// An option of every translator placed in `slot`.
    Option {
        slot: &'static Slot,
        type_name: String,
    },
    /// Whether the optional translator of `slot` is placed.
    Switch {
        slot: &'static Slot,
        type_name: String,
    },
    /// The volume's allow-list (`protocol/server` `auth-allow` on every brick).
    AuthAllow,
}

/// One settable key with its schema.
#[derive(Clone, Debug)]
pub struct KeyInfo {
    /// The full key.
    pub key: String,
    pub target: Target,
    /// The option's schema (for switches and `auth.allow`, one made up here).
    pub spec: OptionSpec,
}

impl KeyInfo {
    /// Which graph(s) the key changes.
    pub fn side(&self) -> Side {
        match &self.target {
            Target::Option { slot, .. } | Target::Switch { slot, .. } => slot.side,
            Target::AuthAllow => Side::Server,
        }
    }

    /// Whether a running graph takes the change in place (`reconfigure`); otherwise it needs
    /// a new graph (a client reload or remount, a brick restart).
    pub fn live(&self) -> bool {
        self.spec.reconfigurable
    }

    /// The valid values, e.g. `4KiB..1GiB`, `on|off`, `json|text` (empty: any text).
    pub fn range(&self) -> String {
        describe_range(&self.spec)
    }
}

/// The settable keys of a build.
#[derive(Clone, Debug)]
pub struct Catalog {
    keys: Vec<KeyInfo>,
    /// The type filling each available slot.
    types: Vec<(&'static Slot, String)>,
    /// Slots whose type the build lacks, with the lookup's explanation.
    unavailable: Vec<(&'static Slot, String)>,
}

impl Catalog {
    /// Reads the schemas of every translator volgen can place from `types`.
    pub fn new(types: &dyn TypeLookup) -> Catalog {
        let mut keys = vec![KeyInfo {
            key: AUTH_ALLOW.into(),
            target: Target::AuthAllow,
            spec: OptionSpec::string(AUTH_ALLOW, "").doc(
                "Client addresses the bricks accept, comma-separated: `*`, addresses and networks \
                 (e.g. 10.0.0.0/8,127.0.0.1); empty: the brick's default.",
            ),
        }];
        let mut unavailable = Vec::new();
        let mut placed = Vec::new();
        for slot in SLOTS {
            let info = match slot.resolve(types) {
                Ok(info) => info,
                Err(detail) => {
                    unavailable.push((slot, detail));
                    continue;
                }
            };
            let type_name = info.name.to_string();
            placed.push((slot, type_name.clone()));
            if let Role::Optional { default_on } = slot.role {
                let default = if default_on { "on" } else { "off" };
                let doc = format!(
                    "Place {type_name} in the {} graph. {}",
                    slot.side.name(),
                    info.doc.as_str()
                );
                keys.push(KeyInfo {
                    key: slot.key.into(),
                    target: Target::Switch {
                        slot,
                        type_name: type_name.clone(),
                    },
                    spec: OptionSpec::bool(slot.key, default).doc(&doc),
                });
            }
            for spec in info.options.iter() {
                if slot.managed_reason(&spec.key).is_some() {
                    continue;
                }
                keys.push(KeyInfo {
                    key: format!("{}.{}", slot.key, spec.key),
                    target: Target::Option {
                        slot,
                        type_name: type_name.clone(),
                    },
                    spec: spec.clone(),
                });
            }
        }
        keys.sort_by(|a, b| a.key.cmp(&b.key));
        Catalog {
            keys,
            types: placed,
            unavailable,
        }
    }

    /// Every settable key, sorted.
    pub fn keys(&self) -> &[KeyInfo] {
        &self.keys
    }

    /// Slots this build cannot fill, with why.
    pub fn unavailable(&self) -> &[(&'static Slot, String)] {
        &self.unavailable
    }

    /// The type that fills `slot`, or why there is none; `what` says what needed it.
    pub fn type_for(&self, slot: &Slot, what: &str) -> Result<&str, VolgenError> {
        if let Some((_, t)) = self.types.iter().find(|(s, _)| s.key == slot.key) {
            return Ok(t);
        }
        let detail = self
            .unavailable
            .iter()
            .find(|(s, _)| s.key == slot.key)
            .map_or_else(String::new, |(_, d)| d.clone());
        Err(VolgenError::Unavailable {
            what: what.into(),
            type_name: slot.type_name().into(),
            detail,
        })
    }

    /// Whether the build has a type for `slot`.
    pub fn has(&self, slot: &Slot) -> bool {
        self.types.iter().any(|(s, _)| s.key == slot.key)
    }

    /// Finds the key `key` names (full, bare option or `category/name.option`).
    pub fn resolve(&self, key: &str) -> Result<&KeyInfo, VolgenError> {
        let key = key.trim();
        let norm = key.replacen('/', ".", 1);
        if let Some(k) = self.keys.iter().find(|k| k.key == norm) {
            return Ok(k);
        }
        // A key of a translator this build lacks, or one volgen writes itself.
        for slot in SLOTS {
            let Some(rest) = norm.strip_prefix(slot.key) else {
                continue;
            };
            if !(rest.is_empty() || rest.starts_with('.')) {
                continue;
            }
            if let Some((_, detail)) = self.unavailable.iter().find(|(s, _)| s.key == slot.key) {
                return Err(VolgenError::Unavailable {
                    what: format!("option key {key:?}"),
                    type_name: slot.type_name().into(),
                    detail: detail.clone(),
                });
            }
            if let Some(reason) = slot.managed_reason(rest.trim_start_matches('.')) {
                return Err(VolgenError::ManagedKey {
                    key: key.into(),
                    reason: reason.into(),
                });
            }
        }
        let bare: Vec<&KeyInfo> = self
            .keys
            .iter()
            .filter(|k| matches!(k.target, Target::Option { .. }) && k.spec.key.as_str() == key)
            .collect();
        match bare.as_slice() {
            [one] => return Ok(one),
            [] => {}
            many => {
                let candidates = many.iter().map(|k| k.key.clone()).collect();
                return Err(VolgenError::AmbiguousKey {
                    key: key.into(),
                    candidates,
                });
            }
        }
        if let Some(slot) = SLOTS.iter().find(|s| s.managed_reason(key).is_some()) {
            let reason = slot.managed_reason(key).unwrap_or_default();
            return Err(VolgenError::ManagedKey {
                key: key.into(),
                reason: reason.into(),
            });
        }
        let names = self
            .keys
            .iter()
            .flat_map(|k| [k.key.as_str(), k.spec.key.as_str()]);
        Err(VolgenError::UnknownKey {
            key: key.into(),
            suggestion: suggest(key, names),
        })
    }

    /// Resolves `key` and checks `value` against its schema.
    pub fn check(&self, key: &str, value: &str) -> Result<&KeyInfo, VolgenError> {
        let info = self.resolve(key)?;
        let invalid = |reason: String| VolgenError::InvalidValue {
            key: info.key.clone(),
            value: value.into(),
            reason,
            expected: expected(&info.spec),
        };
        match info.target {
            Target::AuthAllow => {
                for entry in split_list(value) {
                    check_auth_entry(entry)?;
                }
            }
            _ => info.spec.check(value.trim()).map_err(invalid)?,
        }
        Ok(info)
    }

    /// `volume set`: checks and records `key = value` in `spec`; returns the full key.
    pub fn set(
        &self,
        spec: &mut VolumeSpec,
        key: &str,
        value: &str,
    ) -> Result<String, VolgenError> {
        if crate::user::split_key(key).is_some() {
            crate::user::check(spec, key, value)?;
            spec.options.insert(key.trim().into(), value.trim().into());
            return Ok(key.trim().into());
        }
        let info = self.check(key, value)?;
        match info.target {
            Target::AuthAllow => {
                spec.auth_allow = split_list(value).map(str::to_owned).collect();
            }
            _ => {
                spec.options
                    .insert(info.key.clone(), value.trim().to_owned());
            }
        }
        Ok(info.key.clone())
    }

    /// `volume reset`: drops the override of `key` (back to the default); returns the full
    /// key and whether anything was set.
    pub fn reset(&self, spec: &mut VolumeSpec, key: &str) -> Result<(String, bool), VolgenError> {
        // A user translator goes out with its options.
        if let Some((name, None)) = crate::user::split_key(key) {
            let options = format!("{}{name}.", crate::user::PREFIX);
            spec.options.retain(|k, _| !k.starts_with(&options));
        }
        // A stored key that no longer resolves (its translator is gone) can still be reset.
        if spec.options.remove(key).is_some() {
            return Ok((key.to_owned(), true));
        }
        let info = self.resolve(key)?;
        let was_set = match info.target {
            Target::AuthAllow => !std::mem::take(&mut spec.auth_allow).is_empty(),
            _ => spec.options.remove(&info.key).is_some(),
        };
        Ok((info.key.clone(), was_set))
    }

    /// The value of `info` for `spec` and whether it is the default.
    pub fn value(&self, spec: &VolumeSpec, info: &KeyInfo) -> (String, bool) {
        let stored = match info.target {
            Target::AuthAllow => {
                Some(spec.auth_allow.join(",")).filter(|_| !spec.auth_allow.is_empty())
            }
            _ => spec.options.get(&info.key).cloned(),
        };
        match stored {
            Some(v) => (v, false),
            None => (info.spec.default.to_string(), true),
        }
    }

    /// Every stored override of `spec`, checked and grouped by slot key: option name ->
    /// value (switches under their slot key with an empty option name).
    pub(crate) fn overrides(&self, spec: &VolumeSpec) -> Result<Overrides, VolgenError> {
        let mut out = Overrides::new();
        for (key, value) in &spec.options {
            // User translators are placed by `user::place`.
            if crate::user::split_key(key).is_some() {
                continue;
            }
            let info = self.check(key, value)?;
            match &info.target {
                Target::Option { slot, .. } => out
                    .entry(slot.key)
                    .or_default()
                    .push((info.spec.key.to_string(), value.trim().to_owned())),
                Target::Switch { slot, .. } => out
                    .entry(slot.key)
                    .or_default()
                    .push((String::new(), value.trim().into())),
                Target::AuthAllow => {}
            }
        }
        Ok(out)
    }
}

/// Entries of a comma- or space-separated list.
fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value
        .split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A size in its largest exact unit (`4096` -> `4KiB`).
fn show_size(n: i64) -> String {
    for (unit, name) in [
        (1i64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ] {
        if n != 0 && n % unit == 0 {
            return format!("{}{name}", n / unit);
        }
    }
    n.to_string()
}

/// A duration in its largest exact unit (`60000` ms -> `1m`).
fn show_ms(ms: i64) -> String {
    for (unit, name) in [(3_600_000i64, "h"), (60_000, "m"), (1000, "s")] {
        if ms != 0 && ms % unit == 0 {
            return format!("{}{name}", ms / unit);
        }
    }
    format!("{ms}ms")
}

/// The valid values of `spec`, short: `4KiB..1GiB`, `on|off`, `json|text`, `>= 1`.
pub fn describe_range(spec: &OptionSpec) -> String {
    let show: fn(i64) -> String = match spec.kind {
        OptionKind::Size => show_size,
        OptionKind::Duration => show_ms,
        _ => |n| n.to_string(),
    };
    let bounds = match (spec.min.into_option(), spec.max.into_option()) {
        (Some(a), Some(b)) => format!("{}..{}", show(a), show(b)),
        (Some(a), None) => format!(">= {}", show(a)),
        (None, Some(b)) => format!("<= {}", show(b)),
        (None, None) => String::new(),
    };
    match spec.kind {
        OptionKind::Bool => "on|off".into(),
        OptionKind::Enum => spec
            .choices
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join("|"),
        OptionKind::Path => "absolute path".into(),
        OptionKind::String => String::new(),
        OptionKind::Size | OptionKind::Duration | OptionKind::Int if bounds.is_empty() => {
            spec.kind.name().into()
        }
        _ => bounds,
    }
}

/// What a valid value looks like, for error messages.
fn expected(spec: &OptionSpec) -> String {
    let range = describe_range(spec);
    match spec.kind {
        OptionKind::Size => format!("a size such as 64KiB or 1MB ({range})"),
        OptionKind::Duration => format!("a duration such as 500ms or 10s ({range})"),
        OptionKind::Int => format!("an integer ({range})"),
        OptionKind::Bool => "on or off".into(),
        OptionKind::Enum => format!("one of {}", range.replace('|', ", ")),
        OptionKind::Path => "an absolute path".into(),
        OptionKind::String => "text".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_well() {
        let s = OptionSpec::size("window-size", "1MiB").range(4096, 1 << 30);
        assert_eq!(describe_range(&s), "4KiB..1GiB");
        let d = OptionSpec::duration("t", "1s").range(0, 3_600_000);
        assert_eq!(describe_range(&d), "0ms..1h");
        assert_eq!(describe_range(&OptionSpec::int("n", "1")), "int");
        let i = OptionSpec::int("n", "1");
        let i = OptionSpec {
            min: Some(1).into(),
            ..i
        };
        assert_eq!(describe_range(&i), ">= 1");
        let e = OptionSpec::enumeration("f", "json", &["json", "text"]);
        assert_eq!(expected(&e), "one of json, text");
    }
}
