//! The options of debug/io-stats.

use std::path::PathBuf;
use std::time::Duration;

use xlator_api::{DumpFormat, FromOption, OptionSpec, Options};

xlator_api::options! {
    /// Options of debug/io-stats.
    pub struct IoStatsOptions {
        /// Time every fop into a per-fop latency histogram (log2 buckets in microseconds).
        /// Off saves two clock reads per fop.
        pub latency_measurement: bool =
            OptionSpec::bool("latency-measurement", "on").reconfigurable(),
        /// Count calls, errors (per errno) and bytes read/written of every fop.
        pub count_fop_hits: bool = OptionSpec::bool("count-fop-hits", "on").reconfigurable(),
        /// How often to write a dump to `dump-path`; 0 turns periodic dumps off.
        pub dump_interval: Duration = OptionSpec::duration("dump-interval", "0")
            .range(0, 86_400_000)
            .reconfigurable(),
        /// Absolute path of the file periodic dumps replace (written to `<path>.tmp`, then
        /// renamed); empty: no periodic dumps.
        pub dump_path: String = OptionSpec::string("dump-path", "").reconfigurable(),
        /// Format of periodic dumps: `json` or `text`.
        pub dump_format: DumpFormatOption =
            OptionSpec::enumeration("dump-format", "json", &["json", "text"]).reconfigurable(),
    }
}

/// The `dump-format` option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpFormatOption(pub DumpFormat);

impl FromOption for DumpFormatOption {
    fn from_option(opts: &Options, spec: &OptionSpec) -> Result<Self, String> {
        match opts.string(&spec.key)?.as_str() {
            "json" => Ok(DumpFormatOption(DumpFormat::Json)),
            "text" => Ok(DumpFormatOption(DumpFormat::Text)),
            other => Err(format!(
                "option {:?}: {other:?} is not json or text",
                spec.key
            )),
        }
    }
}

/// Where and how often to write periodic dumps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodicDump {
    pub interval: Duration,
    pub path: Option<PathBuf>,
    pub format: DumpFormat,
}

impl PeriodicDump {
    /// Reads and checks the `dump-*` options.
    pub fn from_options(o: &IoStatsOptions) -> Result<PeriodicDump, String> {
        let path = match o.dump_path.trim() {
            "" => None,
            p if p.starts_with('/') => Some(PathBuf::from(p)),
            p => {
                return Err(format!(
                    "option \"dump-path\": {p:?} is not an absolute path (give /var/log/... or leave it empty)"
                ));
            }
        };
        Ok(PeriodicDump {
            interval: o.dump_interval,
            path,
            format: o.dump_format.0,
        })
    }

    /// The dump file, when periodic dumps are on.
    pub fn target(&self) -> Option<&PathBuf> {
        if self.interval.is_zero() {
            None
        } else {
            self.path.as_ref()
        }
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::XlatorOptions;

    use super::*;

    fn opts(set: &[(&str, &str)]) -> Result<IoStatsOptions, String> {
        let mut o = Options::new();
        for spec in IoStatsOptions::schema() {
            o.set(&spec.key, &spec.default);
        }
        for (k, v) in set {
            o.set(k, v);
        }
        IoStatsOptions::from_options(&o)
    }

    #[test]
    fn defaults_measure_everything_and_do_not_dump() {
        let o = opts(&[]).expect("defaults parse");
        assert!(o.latency_measurement && o.count_fop_hits);
        let p = PeriodicDump::from_options(&o).expect("valid");
        assert_eq!(p.target(), None);
        assert_eq!(p.format, DumpFormat::Json);
        assert!(
            IoStatsOptions::schema()
                .iter()
                .all(|s| s.reconfigurable && !s.doc.is_empty())
        );
    }

    #[test]
    fn periodic_dump_needs_interval_and_absolute_path() {
        let o = opts(&[("dump-interval", "10s"), ("dump-path", "/tmp/x.json")]).expect("parse");
        let p = PeriodicDump::from_options(&o).expect("valid");
        assert_eq!(p.target(), Some(&PathBuf::from("/tmp/x.json")));
        assert_eq!(p.interval, Duration::from_secs(10));
        let o = opts(&[("dump-path", "/tmp/x.json")]).expect("parse");
        assert_eq!(
            PeriodicDump::from_options(&o).expect("valid").target(),
            None
        );
        let o = opts(&[("dump-path", "stats.json"), ("dump-format", "text")]).expect("parse");
        assert_eq!(o.dump_format, DumpFormatOption(DumpFormat::Text));
        let e = PeriodicDump::from_options(&o).expect_err("relative path");
        assert!(e.contains("dump-path") && e.contains("absolute"), "{e}");
    }
}
