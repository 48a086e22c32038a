//! The options of debug/trace.

use crate::filter::FopList;
use crate::level::TraceLevel;

xlator_api::options! {
    /// Options of debug/trace.
    pub struct TraceOptions {
        /// `tracing` level of the trace lines: `trace`, `debug` or `info`. Lines show only if
        /// the host's log filter lets this level through for target `xlfs::trace`.
        pub log_level: TraceLevel =
            OptionSpec::enumeration("log-level", "info", &TraceLevel::NAMES).reconfigurable(),
        /// Fops to trace, comma-separated (`lookup,readv,writev`); empty: every fop.
        pub include: FopList = OptionSpec::string("include", "").reconfigurable(),
        /// Fops never to trace, comma-separated; applied after `include`.
        pub exclude: FopList = OptionSpec::string("exclude", "").reconfigurable(),
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::{Fop, Options, XlatorOptions};

    use super::*;

    #[test]
    fn defaults_trace_everything_at_info() {
        let mut o = Options::new();
        for s in TraceOptions::schema() {
            o.set(&s.key, &s.default);
        }
        let t = TraceOptions::from_options(&o).expect("defaults parse");
        assert_eq!(t.log_level, TraceLevel::Info);
        assert!(t.include.0.is_empty() && t.exclude.0.is_empty());
        assert!(
            TraceOptions::schema()
                .iter()
                .all(|s| s.reconfigurable && !s.doc.is_empty())
        );
        o.set("include", "readv writev");
        let t = TraceOptions::from_options(&o).expect("parse");
        assert_eq!(t.include.0, vec![Fop::Readv, Fop::Writev]);
    }
}
