//! The ABI id: what a translator library and the core must agree on, derived from the ABI
//! itself rather than from source text.
//!
//! The id is a hash of the [`manifest`]: one line per type that crosses the boundary (walked
//! from the root module's abi_stable layout: every field, field type, function pointer
//! signature, enum variant and discriminant, size, alignment and repr), plus the fop table
//! (names, order and attributes) and the target. Doc comments, formatting, line numbers and
//! the crate version are not in it, so a comment-only change keeps every prebuilt plugin
//! loadable, while a field added to any ABI type changes it. When two ids differ, the loader
//! compares the two manifests (each library exports its own) and names the types that differ
//! in words: [`describe_differences`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::OnceLock;

use abi_stable::StableAbi;
use abi_stable::type_layout::{TLData, TLField, TLFields, TypeLayout};

use crate::abi::XlatorModuleRef;
use crate::fops::Fop;

/// Prefix of every ABI-derived build id (older releases used `xlator-api X.Y.Z (...)`).
pub const ABI_ID_PREFIX: &str = "xlator-api abi ";

/// Prefix of the symbol exporting a library's ABI manifest; the suffix is the crate name.
pub const ABI_MANIFEST_SYMBOL_PREFIX: &str = "xlfs_xlator_abi_manifest_";

/// Key of the manifest line holding the fop table.
const FOPS_KEY: &str = "fop table";
/// Key of the manifest line holding the target.
const TARGET_KEY: &str = "target";

/// The manifest of this build: `key = shape` lines, sorted by key. Computed once.
pub fn manifest() -> &'static str {
    static M: OnceLock<String> = OnceLock::new();
    M.get_or_init(|| {
        let mut seen = BTreeSet::new();
        let mut instances: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        walk(
            <XlatorModuleRef as StableAbi>::LAYOUT,
            &mut seen,
            &mut instances,
        );
        // Instances of one generic type (abi_stable names `RVec<u8>` and `RVec<Iatt>` both
        // `RVec`) share a line: their shapes, sorted, joined by ` || `.
        let mut shapes: BTreeMap<String, String> = instances
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect::<Vec<_>>().join(" || ")))
            .collect();
        let fops: Vec<String> = Fop::ALL
            .iter()
            .map(|f| format!("{}:{:#x}", f.name(), f.attrs().0))
            .collect();
        shapes.insert(FOPS_KEY.to_owned(), fops.join(" "));
        shapes.insert(TARGET_KEY.to_owned(), env!("XLFS_TARGET").to_owned());
        let mut out = String::new();
        for (k, v) in &shapes {
            let _ = writeln!(out, "{k} = {v}");
        }
        out
    })
}

/// The build id of this xlator-api: `xlator-api abi <hash> (<target>)` then, for people, the
/// crate version and compiler (not compared: the layouts decide).
pub fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        format!(
            "{ABI_ID_PREFIX}{:016x} ({}; xlator-api {}, {})",
            fnv1a(manifest().as_bytes()),
            env!("XLFS_TARGET"),
            env!("CARGO_PKG_VERSION"),
            env!("XLFS_RUSTC_VERSION"),
        )
    })
}

/// The compared part of a build id: the hash and target (`abi <hash> (<target>`), or the
/// whole id for ids of older releases.
pub fn compared_part(id: &str) -> &str {
    match id.strip_prefix(ABI_ID_PREFIX) {
        Some(rest) => rest.split(';').next().unwrap_or(rest),
        None => id,
    }
}

/// [`build_id`] as a NUL-terminated static string, for the exported symbol.
#[doc(hidden)]
pub fn build_id_c() -> *const std::ffi::c_char {
    static C: OnceLock<std::ffi::CString> = OnceLock::new();
    C.get_or_init(|| std::ffi::CString::new(build_id()).unwrap_or_default())
        .as_ptr()
}

/// [`manifest`] as a NUL-terminated static string, for the exported symbol.
#[doc(hidden)]
pub fn manifest_c() -> *const std::ffi::c_char {
    static C: OnceLock<std::ffi::CString> = OnceLock::new();
    C.get_or_init(|| std::ffi::CString::new(manifest()).unwrap_or_default())
        .as_ptr()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
    h
}

/// A type's name with its generic type parameters (abi_stable's own display leaves them out
/// for some types, `RVec` for one, which would make `RVec<u8>` and `RVec<Iatt>` one entry).
fn type_name(l: &'static TypeLayout) -> String {
    let shown = l.full_type().to_string();
    let shown = shown.trim();
    let params = l.generics().type_params();
    if params.is_empty() || shown.contains('<') || shown.starts_with('*') || shown.starts_with('&')
    {
        return shown.to_owned();
    }
    let names: Vec<String> = params.iter().map(|p| type_name(p())).collect();
    format!("{shown}<{}>", names.join(", "))
}

/// The manifest key of a type: its module path and name with generics.
fn key_of(l: &'static TypeLayout) -> String {
    format!("{}::{}", l.mod_path(), type_name(l))
}

/// Adds `l` and every type it reaches to `instances` (each layout once: `seen` holds their
/// addresses, unique per instance within one binary).
fn walk(
    l: &'static TypeLayout,
    seen: &mut BTreeSet<usize>,
    instances: &mut BTreeMap<String, BTreeSet<String>>,
) {
    if !seen.insert(std::ptr::from_ref(l) as usize) {
        return;
    }
    instances.entry(key_of(l)).or_default().insert(shape_of(l));
    for f in l.shared_vars().type_layouts() {
        walk(f(), seen, instances);
    }
    for f in l.generics().type_params() {
        walk(f(), seen, instances);
    }
    if let Some(fields) = fields_of(l) {
        for field in fields.iter() {
            walk(field.layout(), seen, instances);
            for func in field.function_range().iter() {
                for p in func.param_type_layouts.iter() {
                    walk(p(), seen, instances);
                }
                if let Some(r) = func.return_type_layout() {
                    walk(r(), seen, instances);
                }
            }
        }
    }
}

fn fields_of(l: &'static TypeLayout) -> Option<TLFields> {
    match l.data() {
        TLData::Struct { fields } | TLData::Union { fields } => Some(fields),
        TLData::Enum(e) => Some(e.fields),
        TLData::PrefixType(p) => Some(p.fields),
        TLData::Primitive(_) | TLData::Opaque => None,
    }
}

/// `name: Type`, or for a function pointer `name: fn(a: A, b: B) -> R` (unsafe marked).
fn field_text(f: &TLField) -> String {
    let fns: Vec<String> = f
        .function_range()
        .iter()
        .map(|func| {
            let names: Vec<&str> = func.param_names.as_str().split(';').collect();
            let params: Vec<String> = func
                .param_type_layouts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let n = names
                        .get(i)
                        .copied()
                        .filter(|n| !n.is_empty())
                        .unwrap_or("_");
                    format!("{n}: {}", type_name(p()))
                })
                .collect();
            let ret = func
                .return_type_layout()
                .map(|r| type_name(r()))
                .unwrap_or_else(|| "()".into());
            let unsafety = if func.fn_qualifs.is_unsafe() {
                "unsafe "
            } else {
                ""
            };
            format!("{unsafety}fn({}) -> {ret}", params.join(", "))
        })
        .collect();
    if fns.is_empty() {
        format!("{}: {}", f.name(), type_name(f.layout()))
    } else {
        format!("{}: {}", f.name(), fns.join(" | "))
    }
}

/// One line describing `l`: size, alignment, repr, then its data.
fn shape_of(l: &'static TypeLayout) -> String {
    let head = format!(
        "size {} align {} repr {:?}",
        l.size(),
        l.alignment(),
        l.repr_attr()
    );
    let list = |fields: TLFields| {
        fields
            .iter()
            .map(|f| field_text(&f))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let body = match l.data() {
        TLData::Primitive(p) => format!("primitive {p:?}"),
        TLData::Opaque => "opaque".to_owned(),
        TLData::Struct { fields } => format!("struct {{ {} }}", list(fields)),
        TLData::Union { fields } => format!("union {{ {} }}", list(fields)),
        TLData::PrefixType(p) => format!(
            "prefix (first suffix field {}) {{ {} }}",
            p.first_suffix_field,
            list(p.fields)
        ),
        TLData::Enum(e) => {
            let names: Vec<&str> = e.variant_names.as_str().split(';').collect();
            let mut fields = e.fields.iter();
            let variants: Vec<String> = e
                .field_count
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let fs: Vec<String> = (0..*n)
                        .filter_map(|_| fields.next())
                        .map(|f| field_text(&f))
                        .collect();
                    let name = names.get(i).copied().unwrap_or("?");
                    if fs.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{name}({})", fs.join(", "))
                    }
                })
                .collect();
            format!(
                "enum {{ {} }} discriminants {:?} exhaustive {}",
                variants.join(", "),
                e.discriminants,
                e.exhaustiveness.is_exhaustive()
            )
        }
    };
    // Generated vtables and prefix types may carry field names only in `l.get_fields()`; the
    // data above already lists them.
    format!("{head} {body}")
}

/// Parses a manifest into `key -> shape`.
fn parse(manifest: &str) -> BTreeMap<&str, &str> {
    manifest
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .collect()
}

/// The fields of a shape (of every instance, for a generic type's ` || `-joined shapes).
fn fields_in(shape: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in shape.split(" || ") {
        for f in fields_of_one(part) {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// The `{ ... }` field list of one shape, split at top-level commas.
fn fields_of_one(shape: &str) -> Vec<String> {
    let Some(start) = shape.find("{ ") else {
        return Vec::new();
    };
    let Some(end) = shape.rfind(" }") else {
        return Vec::new();
    };
    if end <= start + 2 {
        return Vec::new();
    }
    let inner = &shape[start + 2..end];
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in inner.chars() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(cur.trim().to_owned());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

fn size_of_shape(shape: &str) -> String {
    shape
        .split(" || ")
        .map(|p| p.split(" repr ").next().unwrap_or(p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the library's ABI (`theirs`) differs from the core's (`ours`), in words a user can act
/// on: the types that differ with the fields added, removed or changed, at most `max` types
/// (the rest counted). Types that only differ in size because a type they contain changed are
/// named after the types whose fields changed.
pub fn describe_differences(ours: &str, theirs: &str, max: usize) -> String {
    let (a, b) = (parse(ours), parse(theirs));
    let mut field_changes: Vec<String> = Vec::new();
    let mut size_changes: Vec<String> = Vec::new();
    if let (Some(x), Some(y)) = (a.get(TARGET_KEY), b.get(TARGET_KEY))
        && x != y
    {
        field_changes.push(format!("it was built for {y}, this xlfs for {x}"));
    }
    if let (Some(x), Some(y)) = (a.get(FOPS_KEY), b.get(FOPS_KEY))
        && x != y
    {
        field_changes.push(describe_fops(x, y));
    }
    let keys: BTreeSet<&str> = a.keys().chain(b.keys()).copied().collect();
    let mut only_theirs = Vec::new();
    let mut only_ours = Vec::new();
    for k in keys {
        if k == TARGET_KEY || k == FOPS_KEY {
            continue;
        }
        match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x != y => {
                let (fx, fy) = (fields_in(x), fields_in(y));
                let added: Vec<&String> = fy.iter().filter(|f| !fx.contains(f)).collect();
                let removed: Vec<&String> = fx.iter().filter(|f| !fy.contains(f)).collect();
                let name = short(k);
                if added.is_empty() && removed.is_empty() {
                    if fx.is_empty() && x != y {
                        field_changes.push(format!(
                            "type `{name}` differs (library: {y}; this xlfs: {x})"
                        ));
                    } else {
                        size_changes.push(format!(
                            "type `{name}` has another size ({} in the library, {} here)",
                            size_of_shape(y),
                            size_of_shape(x)
                        ));
                    }
                    continue;
                }
                let mut parts = Vec::new();
                let names = |v: &[&String]| {
                    v.iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if !added.is_empty() {
                    parts.push(format!(
                        "the library's has {} that this xlfs's has not",
                        names(&added)
                    ));
                }
                if !removed.is_empty() {
                    parts.push(format!(
                        "this xlfs's has {} that the library's has not",
                        names(&removed)
                    ));
                }
                field_changes.push(format!("type `{name}` differs: {}", parts.join("; ")));
            }
            (None, Some(_)) => only_theirs.push(short(k)),
            (Some(_), None) => only_ours.push(short(k)),
            _ => {}
        }
    }
    let mut all = field_changes;
    if all.is_empty() {
        all = size_changes;
    }
    if all.is_empty() && !only_theirs.is_empty() {
        all.push(format!(
            "the library uses types this xlfs does not have: {}",
            only_theirs.join(", ")
        ));
    }
    if all.is_empty() && !only_ours.is_empty() {
        all.push(format!(
            "this xlfs has types the library does not: {}",
            only_ours.join(", ")
        ));
    }
    if all.is_empty() {
        return "the ABI manifests differ only in their text".to_owned();
    }
    let more = all.len().saturating_sub(max);
    let mut text = all.into_iter().take(max).collect::<Vec<_>>().join("; ");
    if more > 0 {
        let _ = write!(text, "; and {more} more difference(s)");
    }
    text
}

/// `xlator_api::backing::BackingFile` -> `BackingFile (in xlator_api::backing)`: the module
/// path is cut at the last `::` before any generics.
fn short(key: &str) -> String {
    let plain = key.find('<').map_or(key, |i| &key[..i]);
    match plain.rfind("::") {
        Some(i) => format!("{} (in {})", &key[i + 2..], &key[..i]),
        None => key.to_owned(),
    }
}

fn describe_fops(ours: &str, theirs: &str) -> String {
    let parse = |s: &str| -> Vec<(String, String)> {
        s.split(' ')
            .map(|f| match f.split_once(':') {
                Some((n, a)) => (n.to_owned(), a.to_owned()),
                None => (f.to_owned(), String::new()),
            })
            .collect()
    };
    let (a, b) = (parse(ours), parse(theirs));
    let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let (na, nb) = (names(&a), names(&b));
    let added: Vec<&String> = nb.iter().filter(|f| !na.contains(f)).collect();
    let removed: Vec<&String> = na.iter().filter(|f| !nb.contains(f)).collect();
    let mut parts = Vec::new();
    if !added.is_empty() {
        parts.push(format!(
            "the library has fops {added:?} that this xlfs has not"
        ));
    }
    if !removed.is_empty() {
        parts.push(format!(
            "this xlfs has fops {removed:?} that the library has not"
        ));
    }
    for (n, attrs) in &b {
        if let Some((_, ours)) = a.iter().find(|(m, _)| m == n)
            && ours != attrs
        {
            parts.push(format!(
                "fop `{n}` has other attributes (library {attrs}, this xlfs {ours}: see \
                 FopAttrs)"
            ));
        }
    }
    if parts.is_empty() {
        parts.push("the same fops in another order".to_owned());
    }
    format!("the fop table differs: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_covers_the_boundary_types() {
        let m = manifest();
        for ty in [
            "XlatorVTable",
            "Subvol",
            "InitArgs",
            "TypeInfo",
            "OptionSpec",
            "BackingFile",
            "Iatt",
            "Dump",
            "HostServices",
        ] {
            assert!(
                m.lines().any(|l| l.contains(&format!("::{ty} = "))),
                "{ty} missing from the manifest:\n{m}"
            );
        }
        assert!(m.contains("fop table = lookup:"), "{m}");
        // No source positions: a comment edit must not change the id.
        assert!(!m.contains(".rs:"), "{m}");
    }

    #[test]
    fn build_id_is_stable_and_compared_by_hash_and_target() {
        let id = build_id();
        assert!(id.starts_with(ABI_ID_PREFIX), "{id}");
        assert_eq!(id, build_id());
        let part = compared_part(id);
        assert!(part.contains(env!("XLFS_TARGET")), "{part}");
        assert!(!part.contains("rustc"), "{part}");
    }

    #[test]
    fn an_added_field_is_named_with_its_type() {
        let ours = "xlator_api::backing::BackingFile = size 8 align 4 repr C struct { fd: i32, \
                    flags: u32 }\nxlator_api::abi::Opened = size 16 align 8 repr C struct { \
                    backing: ROption<BackingFile> }\n";
        let theirs = "xlator_api::backing::BackingFile = size 12 align 4 repr C struct { fd: \
                      i32, flags: u32, extra: u32 }\nxlator_api::abi::Opened = size 24 align 8 \
                      repr C struct { backing: ROption<BackingFile> }\n";
        let d = describe_differences(ours, theirs, 3);
        assert!(d.contains("`BackingFile (in xlator_api::backing)`"), "{d}");
        assert!(d.contains("`extra: u32`"), "{d}");
        assert!(!d.contains("Opened"), "consequences are not named: {d}");
    }

    #[test]
    fn fop_table_changes_are_named() {
        let ours = "fop table = lookup:0x20 stat:0x20\n";
        let theirs = "fop table = lookup:0x20 stat:0x20 frobnicate:0x1\n";
        let d = describe_differences(ours, theirs, 3);
        assert!(d.contains("frobnicate"), "{d}");
        let theirs = "fop table = lookup:0x20 stat:0x420\n";
        let d = describe_differences(ours, theirs, 3);
        assert!(d.contains("fop `stat` has other attributes"), "{d}");
        assert!(!d.contains("`lookup`"), "{d}");
    }
}
