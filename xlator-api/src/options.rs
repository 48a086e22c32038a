//! The option schema. A translator declares its options once, next to its code, with
//! [`options!`](crate::options); the schema crosses the ABI so the core validates volfiles
//! against it, and volgen and the docs read the same table.

use std::time::Duration;

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec};

/// The type of an option value.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Debug)]
pub enum OptionKind {
    /// Bytes, written `4096`, `64KiB`, `1MB`, `2g` (K/M/G/T are powers of 1024, as in GlusterFS).
    Size,
    /// A time, written `250ms`, `10s`, `5m`, `1h` (a bare number is seconds).
    Duration,
    /// `on/off`, `true/false`, `yes/no`, `enable/disable`, `1/0`.
    Bool,
    /// A signed integer.
    Int,
    /// One of a fixed list of words.
    Enum,
    /// Any text.
    String,
    /// An absolute file system path.
    Path,
}

impl OptionKind {
    pub fn name(self) -> &'static str {
        match self {
            OptionKind::Size => "size",
            OptionKind::Duration => "duration",
            OptionKind::Bool => "bool",
            OptionKind::Int => "int",
            OptionKind::Enum => "enum",
            OptionKind::String => "string",
            OptionKind::Path => "path",
        }
    }
}

/// One declared option.
#[repr(C)]
#[derive(StableAbi, Clone, PartialEq, Eq, Debug)]
pub struct OptionSpec {
    pub key: RString,
    pub kind: OptionKind,
    /// Default value, in the option's text form (empty: no default, the option is required
    /// unless the kind is `String`).
    pub default: RString,
    pub doc: RString,
    /// Inclusive bounds, in bytes (Size), milliseconds (Duration) or the value (Int).
    pub min: ROption<i64>,
    pub max: ROption<i64>,
    /// Allowed words (Enum).
    pub choices: RVec<RString>,
    /// May change on a running graph through `reconfigure`.
    pub reconfigurable: bool,
}

impl OptionSpec {
    fn new(key: &str, kind: OptionKind, default: &str) -> OptionSpec {
        OptionSpec {
            key: key.into(),
            kind,
            default: default.into(),
            doc: RString::new(),
            min: ROption::RNone,
            max: ROption::RNone,
            choices: RVec::new(),
            reconfigurable: false,
        }
    }
    pub fn size(key: &str, default: &str) -> Self {
        Self::new(key, OptionKind::Size, default)
    }
    pub fn duration(key: &str, default: &str) -> Self {
        Self::new(key, OptionKind::Duration, default)
    }
    pub fn bool(key: &str, default: &str) -> Self {
        Self::new(key, OptionKind::Bool, default)
    }
    pub fn int(key: &str, default: &str) -> Self {
        Self::new(key, OptionKind::Int, default)
    }
    pub fn string(key: &str, default: &str) -> Self {
        Self::new(key, OptionKind::String, default)
    }
    pub fn path(key: &str, default: &str) -> Self {
        Self::new(key, OptionKind::Path, default)
    }
    pub fn enumeration(key: &str, default: &str, choices: &[&str]) -> Self {
        let mut s = Self::new(key, OptionKind::Enum, default);
        s.choices = choices.iter().map(|c| RString::from(*c)).collect();
        s
    }
    /// Inclusive range (bytes for sizes, milliseconds for durations).
    pub fn range(mut self, min: i64, max: i64) -> Self {
        self.min = ROption::RSome(min);
        self.max = ROption::RSome(max);
        self
    }
    pub fn reconfigurable(mut self) -> Self {
        self.reconfigurable = true;
        self
    }
    pub fn doc(mut self, doc: &str) -> Self {
        self.doc = doc.trim().into();
        self
    }

    /// Whether a volfile must give this option.
    pub fn is_required(&self) -> bool {
        self.default.is_empty() && !matches!(self.kind, OptionKind::String)
    }

    /// Checks `value` against kind, choices and range. The error says what was expected.
    pub fn check(&self, value: &str) -> Result<(), String> {
        let in_range = |n: i64, unit: &str| -> Result<(), String> {
            if let ROption::RSome(min) = self.min
                && n < min
            {
                return Err(format!("{value:?} is below the minimum {min}{unit}"));
            }
            if let ROption::RSome(max) = self.max
                && n > max
            {
                return Err(format!("{value:?} is above the maximum {max}{unit}"));
            }
            Ok(())
        };
        match self.kind {
            OptionKind::Size => {
                let n = parse_size(value)?;
                in_range(i64::try_from(n).unwrap_or(i64::MAX), " bytes")
            }
            OptionKind::Duration => {
                let d = parse_duration(value)?;
                in_range(i64::try_from(d.as_millis()).unwrap_or(i64::MAX), " ms")
            }
            OptionKind::Bool => parse_bool(value).map(|_| ()),
            OptionKind::Int => {
                let n = value
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{value:?} is not an integer"))?;
                in_range(n, "")
            }
            OptionKind::Enum => {
                if self.choices.iter().any(|c| c.as_str() == value) {
                    Ok(())
                } else {
                    let list: Vec<&str> = self.choices.iter().map(RString::as_str).collect();
                    Err(format!("{value:?} is not one of: {}", list.join(", ")))
                }
            }
            OptionKind::String => Ok(()),
            OptionKind::Path => {
                if value.starts_with('/') {
                    Ok(())
                } else {
                    Err(format!("{value:?} is not an absolute path"))
                }
            }
        }
    }
}

/// Parses a size: a number with an optional unit `B`, `K/KB/KiB`, `M/MB/MiB`, `G...`, `T...`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (try 4096, 64KiB, 1MB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "{s:?} has an unknown size unit (use B, KiB, MiB, GiB, TiB)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// Parses a duration: a number with an optional unit `ns`, `us`, `ms`, `s`, `m`, `h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 500ms, 10s, 5m)"))?;
    Ok(match unit.trim() {
        "ns" => Duration::from_nanos(n),
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("{s:?} has an unknown time unit (use ms, s, m, h)")),
    })
}

/// Parses a boolean the way GlusterFS does.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "enable" | "1" => Ok(true),
        "off" | "false" | "no" | "disable" | "0" => Ok(false),
        _ => Err(format!("{s:?} is not a boolean (use on/off)")),
    }
}

/// One validated option value, in text form.
#[repr(C)]
#[derive(StableAbi, Clone, PartialEq, Eq, Debug)]
pub struct OptionKv {
    pub key: RString,
    pub value: RString,
}

/// The effective options of one translator instance: every declared key, with the volfile's
/// value or the default, already validated by the core against the schema.
#[repr(C)]
#[derive(StableAbi, Clone, PartialEq, Eq, Debug, Default)]
pub struct Options(pub RVec<OptionKv>);

impl Options {
    pub fn new() -> Options {
        Options(RVec::new())
    }
    pub fn set(&mut self, key: &str, value: &str) {
        match self.0.iter_mut().find(|kv| kv.key.as_str() == key) {
            Some(kv) => kv.value = value.into(),
            None => self.0.push(OptionKv {
                key: key.into(),
                value: value.into(),
            }),
        }
    }
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.as_str())
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|kv| (kv.key.as_str(), kv.value.as_str()))
    }
    fn require(&self, key: &str) -> Result<&str, String> {
        self.get(key)
            .ok_or_else(|| format!("option {key:?} is not set"))
    }
    pub fn size(&self, key: &str) -> Result<u64, String> {
        parse_size(self.require(key)?).map_err(|e| format!("option {key:?}: {e}"))
    }
    pub fn duration(&self, key: &str) -> Result<Duration, String> {
        parse_duration(self.require(key)?).map_err(|e| format!("option {key:?}: {e}"))
    }
    pub fn bool(&self, key: &str) -> Result<bool, String> {
        parse_bool(self.require(key)?).map_err(|e| format!("option {key:?}: {e}"))
    }
    pub fn int(&self, key: &str) -> Result<i64, String> {
        let v = self.require(key)?;
        v.trim()
            .parse()
            .map_err(|_| format!("option {key:?}: {v:?} is not an integer"))
    }
    pub fn string(&self, key: &str) -> Result<String, String> {
        self.require(key).map(str::to_owned)
    }
}

/// A value type an option field of an [`options!`](crate::options) struct can have.
pub trait FromOption: Sized {
    fn from_option(opts: &Options, spec: &OptionSpec) -> Result<Self, String>;
}

impl FromOption for u64 {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        match s.kind {
            OptionKind::Size => o.size(&s.key),
            _ => o.int(&s.key).and_then(|n| {
                u64::try_from(n).map_err(|_| format!("option {:?} must not be negative", s.key))
            }),
        }
    }
}
impl FromOption for usize {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        u64::from_option(o, s).map(|n| n as usize)
    }
}
impl FromOption for u32 {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        u64::from_option(o, s)
            .and_then(|n| u32::try_from(n).map_err(|_| format!("option {:?} too large", s.key)))
    }
}
impl FromOption for i64 {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        o.int(&s.key)
    }
}
impl FromOption for bool {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        o.bool(&s.key)
    }
}
impl FromOption for Duration {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        o.duration(&s.key)
    }
}
impl FromOption for String {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        Ok(o.get(&s.key).unwrap_or_default().to_owned())
    }
}
impl FromOption for std::path::PathBuf {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        o.string(&s.key).map(Into::into)
    }
}

/// A typed options struct made by [`options!`](crate::options).
pub trait XlatorOptions: Sized {
    /// The declared options, in declaration order.
    fn schema() -> Vec<OptionSpec>;
    /// Reads the (validated) values.
    fn from_options(opts: &Options) -> Result<Self, String>;
}

/// No options at all.
impl XlatorOptions for () {
    fn schema() -> Vec<OptionSpec> {
        Vec::new()
    }
    fn from_options(_: &Options) -> Result<(), String> {
        Ok(())
    }
}

/// Declares a translator's options as a typed struct; the doc comment of each field is the
/// option's documentation.
///
/// ```
/// xlator_api::options! {
///     /// Options of a cache.
///     pub struct CacheOptions {
///         /// Upper bound of cached bytes.
///         pub cache_size: u64 = OptionSpec::size("cache-size", "32MiB")
///             .range(1 << 20, 1 << 40).reconfigurable(),
///         /// Whether to cache at all.
///         pub enabled: bool = OptionSpec::bool("enabled", "on"),
///     }
/// }
/// use xlator_api::XlatorOptions;
/// let schema = CacheOptions::schema();
/// assert_eq!(schema[0].doc.as_str(), "Upper bound of cached bytes.");
/// ```
#[macro_export]
macro_rules! options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:expr])*
                $fvis:vis $field:ident : $ty:ty = $spec:expr
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug)]
        $vis struct $name {
            $( $(#[doc = $doc])* $fvis $field: $ty, )*
        }

        impl $crate::XlatorOptions for $name {
            fn schema() -> ::std::vec::Vec<$crate::OptionSpec> {
                #[allow(unused_imports)]
                use $crate::OptionSpec;
                ::std::vec![ $( ($spec).doc(concat!($($doc, "\n"),*)) ),* ]
            }
            fn from_options(opts: &$crate::Options)
                -> ::std::result::Result<Self, ::std::string::String>
            {
                let schema = <Self as $crate::XlatorOptions>::schema();
                let mut it = schema.iter();
                Ok($name {
                    $( $field: {
                        let spec = it.next().ok_or("schema changed while reading")?;
                        <$ty as $crate::FromOption>::from_option(opts, spec)?
                    }, )*
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_durations_bools() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1MB"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999T").is_err());
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_bool("On"), Ok(true));
        assert_eq!(parse_bool("disable"), Ok(false));
        assert!(parse_bool("maybe").is_err());
    }

    #[test]
    fn check_enforces_range_and_choices() {
        let s = OptionSpec::size("window-size", "1MiB").range(4096, 1 << 30);
        assert!(s.check("1MiB").is_ok());
        assert!(
            s.check("1K")
                .expect_err("below")
                .contains("below the minimum")
        );
        assert!(
            s.check("2GiB")
                .expect_err("above")
                .contains("above the maximum")
        );
        let e = OptionSpec::enumeration("mode", "a", &["a", "b"]);
        assert!(
            e.check("c")
                .expect_err("choice")
                .contains("not one of: a, b")
        );
        assert!(OptionSpec::path("directory", "").check("rel/dir").is_err());
        assert!(OptionSpec::path("directory", "").is_required());
    }

    options! {
        struct T {
            /// The size.
            size: u64 = OptionSpec::size("size", "1KiB"),
            /// A flag.
            flag: bool = OptionSpec::bool("flag", "off").reconfigurable(),
        }
    }

    #[test]
    fn typed_struct_reads_values() {
        let mut o = Options::new();
        o.set("size", "2KiB");
        o.set("flag", "on");
        let t = T::from_options(&o).expect("valid");
        assert_eq!((t.size, t.flag), (2048, true));
        assert!(T::schema()[1].reconfigurable);
        assert_eq!(T::schema()[0].doc.as_str(), "The size.");
    }
}
