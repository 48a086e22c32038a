//! The options of performance/io-cache.

use std::time::Duration;

use crate::priority::Priorities;

xlator_api::options! {
    /// Options of performance/io-cache.
    pub struct IoCacheOptions {
        /// Size of a cache page, and of the reads sent to the child to fill one. Fixed for the
        /// life of the graph.
        pub page_size: u64 = OptionSpec::size("page-size", "128KiB").range(512, 16 << 20),
        /// Upper bound of cached file data, over all files; least recently used pages of the
        /// lowest priority are evicted first. 0 caches nothing.
        pub cache_size: u64 =
            OptionSpec::size("cache-size", "32MiB").range(0, 1 << 40).reconfigurable(),
        /// How long cached pages of a file are trusted before a read revalidates them with an
        /// fstat (a changed mtime or size drops the file's pages). 0 revalidates every read.
        pub cache_timeout: Duration = OptionSpec::duration("cache-timeout", "1s")
            .range(0, 60_000)
            .reconfigurable(),
        /// `pattern:priority,...` on file names (shell globs, first match wins; unmatched
        /// files get 1). Lower priorities are evicted first; priority 0 is never cached.
        pub priority: String = OptionSpec::string("priority", "").reconfigurable(),
        /// Files smaller than this are not cached (0: no lower bound).
        pub min_file_size: u64 =
            OptionSpec::size("min-file-size", "0").range(0, 1 << 50).reconfigurable(),
        /// Files larger than this are not cached (0: no upper bound).
        pub max_file_size: u64 =
            OptionSpec::size("max-file-size", "0").range(0, 1 << 50).reconfigurable(),
    }
}

/// The reconfigurable policy, checked and parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub cache_size: u64,
    pub cache_timeout: Duration,
    pub priorities: Priorities,
    pub min_file_size: u64,
    pub max_file_size: u64,
}

impl Policy {
    /// Reads the reconfigurable options; refuses a bad `priority` or inverted size bounds.
    pub fn from_options(o: &IoCacheOptions) -> Result<Policy, String> {
        let priorities =
            Priorities::parse(&o.priority).map_err(|e| format!("option \"priority\": {e}"))?;
        if o.max_file_size != 0 && o.min_file_size > o.max_file_size {
            return Err(format!(
                "option \"min-file-size\" ({}) is above \"max-file-size\" ({}); \
                 lower it or raise max-file-size (0 means no bound)",
                o.min_file_size, o.max_file_size
            ));
        }
        Ok(Policy {
            cache_size: o.cache_size,
            cache_timeout: o.cache_timeout,
            priorities,
            min_file_size: o.min_file_size,
            max_file_size: o.max_file_size,
        })
    }

    /// Whether a file of `size` bytes may be cached.
    pub fn size_allowed(&self, size: u64) -> bool {
        size >= self.min_file_size && (self.max_file_size == 0 || size <= self.max_file_size)
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::{Options, XlatorOptions};

    use super::*;

    fn opts(set: &[(&str, &str)]) -> Result<IoCacheOptions, String> {
        let mut o = Options::new();
        for spec in IoCacheOptions::schema() {
            o.set(&spec.key, &spec.default);
        }
        for (k, v) in set {
            o.set(k, v);
        }
        IoCacheOptions::from_options(&o)
    }

    #[test]
    fn defaults_match_glusterfs() {
        let o = opts(&[]).expect("defaults parse");
        assert_eq!(o.page_size, 128 << 10);
        assert_eq!(o.cache_size, 32 << 20);
        assert_eq!(o.cache_timeout, Duration::from_secs(1));
        let p = Policy::from_options(&o).expect("valid");
        assert!(p.priorities.is_empty());
        assert!(p.size_allowed(0) && p.size_allowed(u64::MAX));
        for s in IoCacheOptions::schema() {
            assert!(!s.doc.is_empty(), "{} lacks a doc", s.key);
            assert_eq!(s.reconfigurable, s.key.as_str() != "page-size", "{}", s.key);
            s.check(&s.default).expect("default is in range");
        }
    }

    #[test]
    fn size_bounds_and_priorities_are_checked() {
        let o = opts(&[("min-file-size", "1KiB"), ("max-file-size", "1MiB")]).expect("parse");
        let p = Policy::from_options(&o).expect("valid");
        assert!(!p.size_allowed(1023) && p.size_allowed(1024));
        assert!(p.size_allowed(1 << 20) && !p.size_allowed((1 << 20) + 1));
        let o = opts(&[("min-file-size", "2MiB"), ("max-file-size", "1MiB")]).expect("parse");
        assert!(
            Policy::from_options(&o)
                .expect_err("must fail")
                .contains("min-file-size")
        );
        let o = opts(&[("priority", "*.jpg")]).expect("parse");
        assert!(
            Policy::from_options(&o)
                .expect_err("must fail")
                .contains("priority")
        );
    }
}
