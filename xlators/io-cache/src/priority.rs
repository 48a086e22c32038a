//! The `priority` option: `pattern:priority,...` (GlusterFS `performance.cache-priority`),
//! matched against a file's name as seen in lookup, create, link or readdirp. Pure.
//!
//! The first matching pattern wins; a name matching none gets priority 1. Priority 0 means
//! "never cache". Patterns are shell globs over the base name: `*` (any run), `?` (one
//! character); everything else matches itself.

/// Priority of a file whose name matched no pattern (or was never seen).
pub const DEFAULT_PRIORITY: u32 = 1;

/// Parsed `priority` patterns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Priorities {
    rules: Vec<(String, u32)>,
}

impl Priorities {
    /// Parses `"*.jpg:2,*.tmp:0"`. Empty text: no rules.
    pub fn parse(text: &str) -> Result<Priorities, String> {
        let mut rules = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (pattern, prio) = item.rsplit_once(':').ok_or_else(|| {
                format!("priority entry {item:?} is not pattern:number (e.g. \"*.jpg:2\")")
            })?;
            let pattern = pattern.trim();
            if pattern.is_empty() {
                return Err(format!("priority entry {item:?} has an empty pattern"));
            }
            let prio: u32 = prio.trim().parse().map_err(|_| {
                format!("priority entry {item:?}: {prio:?} is not a non-negative integer")
            })?;
            rules.push((pattern.to_owned(), prio));
        }
        Ok(Priorities { rules })
    }

    /// The priority of a file called `name`.
    pub fn of(&self, name: &str) -> u32 {
        self.rules
            .iter()
            .find(|(p, _)| glob(p.as_bytes(), name.as_bytes()))
            .map_or(DEFAULT_PRIORITY, |(_, prio)| *prio)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Shell-glob match of `name` against `pat` (`*` and `?`), iterative with one backtrack
/// point, so it is linear-ish and never recurses.
fn glob(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pat.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|c| *c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob(b"*.jpg", b"a.jpg"));
        assert!(glob(b"*.jpg", b".jpg"));
        assert!(!glob(b"*.jpg", b"a.jpeg"));
        assert!(glob(b"a?c", b"abc"));
        assert!(!glob(b"a?c", b"ac"));
        assert!(glob(b"*", b""));
        assert!(glob(b"a*b*c", b"axxbyybzc"));
        assert!(!glob(b"a*b*c", b"axxbyyb"));
        assert!(glob(b"**x", b"yyx"));
        assert!(glob(b"exact", b"exact"));
    }

    #[test]
    fn first_match_wins_and_default_is_one() {
        let p = Priorities::parse("*.jpg:2, *.tmp:0 ,*:1").expect("valid");
        assert_eq!(p.of("x.jpg"), 2);
        assert_eq!(p.of("x.tmp"), 0);
        assert_eq!(p.of("x.txt"), 1);
        let p = Priorities::parse("*.log:5").expect("valid");
        assert_eq!(p.of("a.bin"), DEFAULT_PRIORITY);
        assert!(Priorities::parse("").expect("empty is fine").is_empty());
    }

    #[test]
    fn bad_entries_are_explained() {
        assert!(
            Priorities::parse("*.jpg")
                .expect_err("must fail")
                .contains("pattern:number")
        );
        assert!(
            Priorities::parse(":3")
                .expect_err("must fail")
                .contains("empty pattern")
        );
        assert!(
            Priorities::parse("*.jpg:-1")
                .expect_err("must fail")
                .contains("non-negative")
        );
    }
}
