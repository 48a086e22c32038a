//! The options of performance/read-ahead.

xlator_api::options! {
    /// Options of performance/read-ahead.
    pub struct ReadAheadOptions {
        /// Size of a prefetched page, and of each read sent ahead to the child. Fixed for the
        /// life of the graph.
        pub page_size: u64 = OptionSpec::size("page-size", "128KiB").range(512, 16 << 20),
        /// Pages kept ahead of a sequential reader (the window is page-count x page-size).
        /// Reads larger than the window pass straight through.
        pub page_count: u64 = OptionSpec::int("page-count", "4").range(1, 16).reconfigurable(),
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::{Options, XlatorOptions};

    use super::*;

    #[test]
    fn defaults_match_glusterfs_and_are_documented() {
        let mut o = Options::new();
        for spec in ReadAheadOptions::schema() {
            assert!(!spec.doc.is_empty(), "{} lacks a doc", spec.key);
            spec.check(&spec.default).expect("default in range");
            o.set(&spec.key, &spec.default);
        }
        let r = ReadAheadOptions::from_options(&o).expect("defaults parse");
        assert_eq!((r.page_size, r.page_count), (128 << 10, 4));
        let schema = ReadAheadOptions::schema();
        assert!(schema[1].check("17").is_err() && schema[1].check("0").is_err());
        assert!(schema[1].reconfigurable && !schema[0].reconfigurable);
    }
}
