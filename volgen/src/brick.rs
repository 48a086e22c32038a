//! Bricks: a directory on a host, written `host:/path`, `[v6addr]:/path` or a local `/path`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::VolgenError;

/// Host names that mean "this machine"; a brick on one of them is written as a bare path.
const LOCAL_ALIASES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The address clients use for a brick without a host.
pub const LOOPBACK: &str = "127.0.0.1";

/// A brick directory, normalized: absolute, no `.`/`..`, no repeated or trailing `/`, and
/// local aliases (`localhost`, `127.0.0.1`, `::1`) written as no host.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Brick {
    host: Option<String>,
    path: String,
}

impl Brick {
    /// Parses and normalizes `text`; the error says what a brick looks like.
    pub fn parse(text: &str) -> Result<Brick, VolgenError> {
        let bad = |reason: String| VolgenError::BadBrick {
            brick: text.to_owned(),
            reason,
        };
        let (host, path) = split(text).map_err(bad)?;
        let host = match host {
            Some(h) if text.starts_with('[') && h.parse::<std::net::Ipv6Addr>().is_err() => {
                return Err(bad(format!("{h:?} is not an IPv6 address")));
            }
            Some(h) => check_host(h).map_err(bad)?,
            None => None,
        };
        let path = normalize_path(path).map_err(bad)?;
        Ok(Brick { host, path })
    }

    /// The host, `None` for this machine.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The absolute, normalized directory.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the brick is on this machine by its spelling (no host or a local alias).
    pub fn is_local(&self) -> bool {
        self.host.is_none()
    }

    /// Whether the brick lives on this machine, given the names the machine answers to.
    pub fn is_on(&self, host_names: &[String]) -> bool {
        match &self.host {
            None => true,
            Some(h) => host_names.iter().any(|n| n.eq_ignore_ascii_case(h)),
        }
    }

    /// The address a client connects to.
    pub fn connect_host(&self) -> &str {
        self.host.as_deref().unwrap_or(LOOPBACK)
    }

    /// Whether `other` is a directory strictly inside this brick on the same host.
    pub fn contains(&self, other: &Brick) -> bool {
        self.same_host(other)
            && other.path.len() > self.path.len()
            && other.path.starts_with(&self.path)
            && other.path.as_bytes()[self.path.len()] == b'/'
    }

    fn same_host(&self, other: &Brick) -> bool {
        match (&self.host, &other.host) {
            (None, None) => true,
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            _ => false,
        }
    }

    /// Whether both name the same directory.
    pub fn same_dir(&self, other: &Brick) -> bool {
        self.same_host(other) && self.path == other.path
    }
}

impl fmt::Display for Brick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Some(h) if h.contains(':') => write!(f, "[{h}]:{}", self.path),
            Some(h) => write!(f, "{h}:{}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

impl TryFrom<String> for Brick {
    type Error = VolgenError;
    fn try_from(s: String) -> Result<Brick, VolgenError> {
        Brick::parse(&s)
    }
}

impl From<Brick> for String {
    fn from(b: Brick) -> String {
        b.to_string()
    }
}

/// Splits `host:/path`, `[v6]:/path` or `/path`.
fn split(text: &str) -> Result<(Option<&str>, &str), String> {
    if text.is_empty() {
        return Err(
            "it is empty; write a directory such as /data/brick1 or host1:/data/brick1".into(),
        );
    }
    if text.starts_with('/') {
        return Ok((None, text));
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (host, path) = rest
            .split_once("]:")
            .ok_or("an IPv6 host must be written [addr]:/path")?;
        return Ok((Some(host), path));
    }
    match text.split_once(':') {
        Some((host, path)) => Ok((Some(host), path)),
        None => Err(format!(
            "the path is relative; give an absolute path such as /{} (or host:/path)",
            text.trim_start_matches("./")
        )),
    }
}

/// A host name or address, lower-cased; `None` for a local alias.
fn check_host(host: &str) -> Result<Option<String>, String> {
    if host.is_empty() {
        return Err("the host before `:` is empty; write host:/path or just /path".into());
    }
    let lower = host.to_ascii_lowercase();
    if LOCAL_ALIASES.contains(&lower.as_str()) {
        return Ok(None);
    }
    if lower.contains(':') {
        return match lower.parse::<std::net::Ipv6Addr>() {
            Ok(_) => Ok(Some(lower)),
            Err(_) => Err(format!("{host:?} is not an IPv6 address")),
        };
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if lower.len() > 253 || !lower.split('.').all(label_ok) {
        return Err(format!(
            "{host:?} is not a host name or address (letters, digits, `-` and `.`)"
        ));
    }
    Ok(Some(lower))
}

/// An absolute directory without `.`/`..` components, repeated or trailing `/`.
fn normalize_path(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!(
            "the path {path:?} is not absolute; it must start with `/`"
        ));
    }
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return Err(format!("the path contains the control character {c:?}"));
    }
    if path.len() > 4000 {
        return Err("the path is longer than 4000 bytes".into());
    }
    let mut parts = Vec::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(format!(
                "the path contains `{part}`; write the directory without `.` or `..`"
            ));
        }
        parts.push(part);
    }
    if parts.is_empty() {
        return Err("the brick cannot be the root directory `/`; use a directory below it".into());
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Brick {
        Brick::parse(s).expect("valid brick")
    }

    fn err(s: &str) -> String {
        Brick::parse(s).expect_err("invalid brick").to_string()
    }

    #[test]
    fn parses_and_normalizes() {
        assert_eq!(b("/data//b1/").to_string(), "/data/b1");
        assert_eq!(b("Server1:/data/b1").to_string(), "server1:/data/b1");
        assert_eq!(b("localhost:/data/b1").to_string(), "/data/b1");
        assert_eq!(b("[fe80::1]:/d").to_string(), "[fe80::1]:/d");
        assert_eq!(b("[::1]:/d").host(), None);
        assert_eq!(b("10.0.0.2:/d").connect_host(), "10.0.0.2");
        assert_eq!(b("/d").connect_host(), LOOPBACK);
    }

    #[test]
    fn rejects_with_reasons() {
        assert_eq!(
            err("data/b1"),
            "brick \"data/b1\" is not valid: the path is relative; give an absolute path such \
             as /data/b1 (or host:/path)"
        );
        assert_eq!(
            err("host:data"),
            "brick \"host:data\" is not valid: the path \"data\" is not absolute; it must start \
             with `/`"
        );
        assert!(err("/").contains("cannot be the root directory"));
        assert!(err("/a/../b").contains("contains `..`"));
        assert!(err(":/a").contains("host before `:` is empty"));
        assert!(err("bad_host!:/a").contains("is not a host name"));
        assert!(err("[zz]:/a").contains("is not an IPv6 address"));
        assert!(err("").contains("it is empty"));
        assert!(err("/a\nb").contains("control character"));
    }

    #[test]
    fn nesting_is_by_component_and_host() {
        assert!(b("/data").contains(&b("/data/b1")));
        assert!(!b("/data").contains(&b("/database")));
        assert!(!b("/data").contains(&b("/data")));
        assert!(!b("h1:/data").contains(&b("h2:/data/b1")));
        assert!(b("/data").same_dir(&b("localhost:/data/")));
    }
}
