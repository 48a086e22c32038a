//! The options of performance/md-cache.

xlator_api::options! {
    /// Options of performance/md-cache.
    pub struct MdCacheOptions {
        /// How long an inode's attributes (from a lookup, stat, fstat or listing) answer
        /// `stat` and `fstat` without asking the child. Upcalls from the bricks drop them
        /// sooner when another client changes the inode; this is the bound when one is lost.
        /// 0 turns attribute caching off.
        pub md_cache_timeout: std::time::Duration =
            OptionSpec::duration("md-cache-timeout", "1s").range(0, 600_000).reconfigurable(),
        /// How long a name the child said does not exist is answered ENOENT without asking
        /// again (the lookup `tar x` and `cp -r` send before each create). Creates through
        /// this graph and upcalls drop it. 0 turns it off.
        pub negative_timeout: std::time::Duration =
            OptionSpec::duration("negative-timeout", "1s").range(0, 600_000).reconfigurable(),
        /// Most inodes and absent names remembered (each); past it the oldest half goes.
        pub max_entries: u32 =
            OptionSpec::int("max-entries", "65536").range(64, 16_777_216).reconfigurable(),
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::{Options, XlatorOptions};

    use super::*;

    #[test]
    fn defaults_parse_and_are_documented() {
        let mut o = Options::new();
        for spec in MdCacheOptions::schema() {
            assert!(!spec.doc.is_empty(), "{} lacks a doc", spec.key);
            spec.check(&spec.default).expect("default in range");
            o.set(&spec.key, &spec.default);
        }
        let m = MdCacheOptions::from_options(&o).expect("defaults parse");
        assert_eq!(m.md_cache_timeout, std::time::Duration::from_secs(1));
        assert_eq!(m.max_entries, 65536);
        assert!(MdCacheOptions::schema()[2].check("10").is_err());
    }
}
