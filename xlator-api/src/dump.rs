//! Typed statedumps: a translator's `dump()` returns a [`Dump`] (named fields holding numbers,
//! text, lists and nested sections); the core renders the whole graph's dumps once, as text or
//! as JSON, so every dump is valid JSON whatever a translator puts in it.

use abi_stable::StableAbi;
use abi_stable::std_types::{RString, RVec};

/// The statedump field (a number) where a translator reports what it still owes its children
/// and sends on its own later (cluster/replicate's eager holds, whose post-ops and unlocks
/// come after a timer). After [`EventKind::GraphSwitch`](crate::EventKind::GraphSwitch) a
/// translator sends those at once; a host that exits waits until every translator reports 0
/// (or for a bounded time), so nothing owed is lost with the process.
pub const PENDING_AT_EXIT: &str = "pending-at-exit";

/// One value in a statedump.
#[repr(C, u8)]
#[derive(StableAbi, Clone, Debug, PartialEq)]
pub enum DumpValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(RString),
    List(RVec<DumpValue>),
    Section(Dump),
}

/// A named field of a [`Dump`].
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq)]
pub struct DumpField {
    pub key: RString,
    pub value: DumpValue,
}

/// A translator's statedump: fields in the order they were added.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Default)]
pub struct Dump {
    pub fields: RVec<DumpField>,
    /// How the dump reads as text, for a translator with a better layout than one line per
    /// field (io-stats' table); empty: the fields, one per line.
    pub text: RString,
}

impl From<u64> for DumpValue {
    fn from(v: u64) -> DumpValue {
        DumpValue::U64(v)
    }
}
impl From<u32> for DumpValue {
    fn from(v: u32) -> DumpValue {
        DumpValue::U64(v.into())
    }
}
impl From<usize> for DumpValue {
    fn from(v: usize) -> DumpValue {
        DumpValue::U64(v as u64)
    }
}
impl From<i64> for DumpValue {
    fn from(v: i64) -> DumpValue {
        DumpValue::I64(v)
    }
}
impl From<f64> for DumpValue {
    fn from(v: f64) -> DumpValue {
        DumpValue::F64(v)
    }
}
impl From<bool> for DumpValue {
    fn from(v: bool) -> DumpValue {
        DumpValue::Bool(v)
    }
}
impl From<&str> for DumpValue {
    fn from(v: &str) -> DumpValue {
        DumpValue::Str(v.into())
    }
}
impl From<String> for DumpValue {
    fn from(v: String) -> DumpValue {
        DumpValue::Str(v.into())
    }
}
impl From<Dump> for DumpValue {
    fn from(v: Dump) -> DumpValue {
        DumpValue::Section(v)
    }
}
impl<T: Into<DumpValue>> From<Vec<T>> for DumpValue {
    fn from(v: Vec<T>) -> DumpValue {
        DumpValue::List(v.into_iter().map(Into::into).collect())
    }
}

impl Dump {
    pub fn new() -> Dump {
        Dump::default()
    }

    /// Adds field `key` (builder style).
    pub fn with(mut self, key: &str, value: impl Into<DumpValue>) -> Dump {
        self.push(key, value);
        self
    }

    /// Adds field `key`.
    pub fn push(&mut self, key: &str, value: impl Into<DumpValue>) {
        self.fields.push(DumpField {
            key: key.into(),
            value: value.into(),
        });
    }

    /// A dump of named counters.
    pub fn counters(fields: &[(&str, u64)]) -> Dump {
        let mut d = Dump::new();
        for (k, v) in fields {
            d.push(k, *v);
        }
        d
    }

    /// Sets the text rendering (see [`Dump::text`]).
    pub fn with_text(mut self, text: String) -> Dump {
        self.text = text.into();
        self
    }

    /// Whether the dump has no fields and no text.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.text.is_empty()
    }

    /// The value of field `key`.
    pub fn get(&self, key: &str) -> Option<&DumpValue> {
        self.fields
            .iter()
            .find(|f| f.key.as_str() == key)
            .map(|f| &f.value)
    }

    /// The first field named `key`, depth first through sections and lists (for tests and
    /// tools that look for one counter).
    pub fn find(&self, key: &str) -> Option<&DumpValue> {
        fn in_value<'a>(v: &'a DumpValue, key: &str) -> Option<&'a DumpValue> {
            match v {
                DumpValue::Section(d) => d.find(key),
                DumpValue::List(items) => items.iter().find_map(|x| in_value(x, key)),
                _ => None,
            }
        }
        self.fields.iter().find_map(|f| {
            if f.key.as_str() == key {
                Some(&f.value)
            } else {
                in_value(&f.value, key)
            }
        })
    }

    /// The first unsigned counter named `key` ([`Dump::find`]).
    pub fn find_u64(&self, key: &str) -> Option<u64> {
        match self.find(key)? {
            DumpValue::U64(n) => Some(*n),
            _ => None,
        }
    }

    /// A dump from a JSON value (an object's keys become fields; anything else one `value`
    /// field), for translators that build their state with `serde_json`.
    pub fn from_json(v: serde_json::Value) -> Dump {
        fn value(v: serde_json::Value) -> DumpValue {
            match v {
                serde_json::Value::Null => DumpValue::Str("".into()),
                serde_json::Value::Bool(b) => DumpValue::Bool(b),
                serde_json::Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                    (Some(u), _) => DumpValue::U64(u),
                    (None, Some(i)) => DumpValue::I64(i),
                    _ => DumpValue::F64(n.as_f64().unwrap_or(0.0)),
                },
                serde_json::Value::String(s) => DumpValue::Str(s.into()),
                serde_json::Value::Array(a) => DumpValue::List(a.into_iter().map(value).collect()),
                serde_json::Value::Object(m) => DumpValue::Section(section(m)),
            }
        }
        fn section(m: serde_json::Map<String, serde_json::Value>) -> Dump {
            let mut d = Dump::new();
            // A null field (an optional value that is not there) is left out.
            for (k, v) in m.into_iter().filter(|(_, v)| !v.is_null()) {
                d.push(&k, value(v));
            }
            d
        }
        match v {
            serde_json::Value::Object(m) => section(m),
            other => Dump::new().with("value", value(other)),
        }
    }

    /// The dump as one JSON object.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        json_section(&mut out, self);
        out
    }

    /// The dump as indented `key value` lines, each line starting with `indent` spaces.
    pub fn to_text(&self, indent: usize) -> String {
        if !self.text.is_empty() {
            return self.text.to_string();
        }
        let mut out = String::new();
        text_section(&mut out, self, indent);
        out
    }
}

fn json_section(out: &mut String, d: &Dump) {
    out.push('{');
    for (i, f) in d.fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        json_string(out, &f.key);
        out.push_str(": ");
        json_value(out, &f.value);
    }
    out.push('}');
}

fn json_value(out: &mut String, v: &DumpValue) {
    match v {
        DumpValue::U64(n) => out.push_str(&n.to_string()),
        DumpValue::I64(n) => out.push_str(&n.to_string()),
        // JSON has no NaN or infinity.
        DumpValue::F64(x) if x.is_finite() => out.push_str(&format!("{x}")),
        DumpValue::F64(_) => out.push_str("null"),
        DumpValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        DumpValue::Str(s) => json_string(out, s),
        DumpValue::List(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_value(out, x);
            }
            out.push(']');
        }
        DumpValue::Section(d) => json_section(out, d),
    }
}

/// Appends `s` as a JSON string literal.
pub fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn text_section(out: &mut String, d: &Dump, indent: usize) {
    let width = d
        .fields
        .iter()
        .filter(|f| !matches!(f.value, DumpValue::Section(_)))
        .map(|f| f.key.len())
        .max()
        .unwrap_or(0);
    for f in d.fields.iter() {
        match &f.value {
            DumpValue::Section(sub) => {
                out.push_str(&format!("{:indent$}{}:\n", "", f.key));
                text_section(out, sub, indent + 2);
            }
            DumpValue::List(items) if items.iter().any(|x| matches!(x, DumpValue::Section(_))) => {
                out.push_str(&format!("{:indent$}{}:\n", "", f.key));
                for x in items.iter() {
                    match x {
                        DumpValue::Section(sub) => {
                            out.push_str(&format!("{:w$}-\n", "", w = indent + 2));
                            text_section(out, sub, indent + 4);
                        }
                        other => out.push_str(&format!(
                            "{:w$}- {}\n",
                            "",
                            text_value(other),
                            w = indent + 2
                        )),
                    }
                }
            }
            v => out.push_str(&format!(
                "{:indent$}{:<width$} {}\n",
                "",
                f.key,
                text_value(v)
            )),
        }
    }
}

fn text_value(v: &DumpValue) -> String {
    match v {
        DumpValue::U64(n) => n.to_string(),
        DumpValue::I64(n) => n.to_string(),
        DumpValue::F64(x) => format!("{x}"),
        DumpValue::Bool(b) => b.to_string(),
        DumpValue::Str(s) => s.to_string(),
        DumpValue::List(items) => {
            let parts: Vec<String> = items.iter().map(text_value).collect();
            format!("[{}]", parts.join(", "))
        }
        DumpValue::Section(d) => d.to_json(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_valid_whatever_the_strings_hold() {
        let d = Dump::new()
            .with("hits", 3u64)
            .with("path", "a \"b\"\n\\c\u{1}")
            .with("ratio", f64::NAN)
            .with(
                "fds",
                vec![Dump::new().with("id", 1u64), Dump::new().with("id", 2u64)],
            )
            .with("sub", Dump::new().with("on", true).with("delta", -4i64));
        let j = d.to_json();
        assert_eq!(
            j,
            r#"{"hits": 3, "path": "a \"b\"\n\\c\u0001", "ratio": null, "fds": [{"id": 1}, {"id": 2}], "sub": {"on": true, "delta": -4}}"#
        );
        let t = d.to_text(2);
        assert!(t.contains("  hits  3\n"), "{t}");
        assert!(t.contains("  sub:\n    on    true\n"), "{t}");
        assert_eq!(d.get("hits"), Some(&DumpValue::U64(3)));
    }
}
