//! Checks a volfile against the translator types: type known, options known and valid,
//! required options given, child count in range.

use abi_stable::std_types::ROption;
use xlator_api::{OptionKind, OptionSpec, Options, TypeInfo};

use super::error::suggest;
use super::{Volfile, VolfileError, VolfileErrorKind as K, VolumeDecl, parse};

/// Where translator types come from (the registry and the loader).
pub trait TypeLookup {
    /// Err(message) for an unknown type; the message may list every path searched (loader).
    fn type_info(&self, type_name: &str) -> Result<TypeInfo, String>;
    /// Every type name known (for "did you mean").
    fn known_types(&self) -> Vec<String>;
}

/// Checks every volume of `vf` (reachable or not) against its type, after the structural
/// checks of [`Volfile::parse`] (repeated here for volfiles built in code). The first
/// problem, in file order, is the error; volumes the top does not reach are logged as
/// warnings.
pub fn validate(vf: &Volfile, types: &dyn TypeLookup) -> Result<(), VolfileError> {
    parse::check_structure(vf, None)?;
    let mut known: Option<Vec<String>> = None;
    for decl in &vf.volumes {
        let info = match types.type_info(&decl.type_name) {
            Ok(info) => info,
            Err(detail) => {
                let known = known.get_or_insert_with(|| types.known_types());
                let kind = K::UnknownType {
                    volume: decl.name.clone(),
                    type_name: decl.type_name.clone(),
                    suggestion: suggest(&decl.type_name, known.iter().map(String::as_str)),
                    detail,
                };
                return Err(VolfileError::new(&vf.origin, Some(decl.pos), kind));
            }
        };
        effective_options(decl, &info, &vf.origin)?;
        let count = decl.subvolumes.len();
        let fits = u32::try_from(count)
            .is_ok_and(|n| (info.min_children..=info.max_children).contains(&n));
        if !fits {
            let kind = K::ChildCount {
                volume: decl.name.clone(),
                type_name: decl.type_name.clone(),
                count,
                min: info.min_children,
                max: info.max_children,
            };
            return Err(VolfileError::new(&vf.origin, Some(decl.pos), kind));
        }
    }
    for v in vf.unreachable() {
        tracing::warn!(
            volfile = %vf.origin,
            volume = %v.name,
            top = %vf.top_name(),
            "volume {} at {} is not reachable from the top `{}` and will not be built",
            v.name,
            v.pos,
            vf.top_name()
        );
    }
    Ok(())
}

/// The effective options of one volume: every key of the schema, in schema order, with the
/// volfile's value or the default (empty for a `String` option without one). Errors for an
/// unknown key, a value that fails its check, a key given twice and a required option
/// missing.
pub fn effective_options(
    decl: &VolumeDecl,
    info: &TypeInfo,
    origin: &str,
) -> Result<Options, VolfileError> {
    let err = |pos, kind| Err(VolfileError::new(origin, Some(pos), kind));
    for (i, o) in decl.options.iter().enumerate() {
        let Some(spec) = info.options.iter().find(|s| s.key.as_str() == o.key) else {
            let keys = info.options.iter().map(|s| s.key.as_str());
            let kind = K::UnknownOption {
                volume: decl.name.clone(),
                type_name: decl.type_name.clone(),
                key: o.key.clone(),
                suggestion: suggest(&o.key, keys.clone()),
                known: keys.map(str::to_owned).collect(),
            };
            return err(o.pos, kind);
        };
        if let Some(first) = decl.options[..i].iter().find(|p| p.key == o.key) {
            let kind = K::DuplicateOption {
                volume: decl.name.clone(),
                key: o.key.clone(),
                first: first.pos,
            };
            return err(o.pos, kind);
        }
        if let Err(reason) = spec.check(&o.value) {
            let kind = K::InvalidOption {
                volume: decl.name.clone(),
                key: o.key.clone(),
                value: o.value.clone(),
                reason,
                expected: expected(spec),
            };
            return err(o.pos, kind);
        }
    }
    let mut out = Options::new();
    for spec in info.options.iter() {
        match decl.option(&spec.key) {
            Some(value) => out.set(&spec.key, value),
            None if spec.is_required() => {
                let kind = K::MissingOption {
                    volume: decl.name.clone(),
                    type_name: decl.type_name.clone(),
                    key: spec.key.to_string(),
                    expected: expected(spec),
                };
                return err(decl.pos, kind);
            }
            None => out.set(&spec.key, &spec.default),
        }
    }
    Ok(out)
}

/// What a valid value of `spec` looks like, e.g. "a size such as 64KiB, from 4KiB to 1GiB".
fn expected(spec: &OptionSpec) -> String {
    let bounds = |show: &dyn Fn(i64) -> String| match (spec.min, spec.max) {
        (ROption::RSome(a), ROption::RSome(b)) => format!(", from {} to {}", show(a), show(b)),
        (ROption::RSome(a), ROption::RNone) => format!(", at least {}", show(a)),
        (ROption::RNone, ROption::RSome(b)) => format!(", at most {}", show(b)),
        (ROption::RNone, ROption::RNone) => String::new(),
    };
    match spec.kind {
        OptionKind::Size => format!("a size such as 64KiB or 1MB{}", bounds(&show_size)),
        OptionKind::Duration => {
            format!(
                "a duration such as 500ms or 10s{}",
                bounds(&|ms| format!("{ms}ms"))
            )
        }
        OptionKind::Bool => "on or off".to_owned(),
        OptionKind::Int => format!("an integer{}", bounds(&|n| n.to_string())),
        OptionKind::Enum => {
            let words: Vec<&str> = spec.choices.iter().map(|c| c.as_str()).collect();
            format!("one of: {}", words.join(", "))
        }
        OptionKind::String => "text".to_owned(),
        OptionKind::Path => "an absolute path".to_owned(),
    }
}

/// `4096` as `4KiB`, `1073741824` as `1GiB`, odd numbers of bytes as they are.
fn show_size(n: i64) -> String {
    const UNITS: [(i64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if n != 0 && n % unit == 0 {
            return format!("{}{name}", n / unit);
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_read_well() {
        let s = OptionSpec::size("window-size", "1MiB").range(4096, 1 << 30);
        assert_eq!(
            expected(&s),
            "a size such as 64KiB or 1MB, from 4KiB to 1GiB"
        );
        assert_eq!(show_size(1000), "1000 bytes");
        assert_eq!(show_size(3 << 20), "3MiB");
        let e = OptionSpec::enumeration("mode", "a", &["a", "b"]);
        assert_eq!(expected(&e), "one of: a, b");
        let d = OptionSpec::duration("timeout", "1s").range(1, 60_000);
        assert_eq!(
            expected(&d),
            "a duration such as 500ms or 10s, from 1ms to 60000ms"
        );
    }
}
