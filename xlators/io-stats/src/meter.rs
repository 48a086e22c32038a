//! The state shared by an io-stats instance and its periodic dumper: the counters, the
//! reconfigurable switches, and rendering of dumps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use xlator_api::{DumpFormat, Errno, Fop};

use crate::options::{IoStatsOptions, PeriodicDump};
use crate::report::{self, Header};
use crate::stats::{Io, Stats, StatsSnapshot};

/// Translator type name.
pub const TYPE: &str = "debug/io-stats";

pub struct Meter {
    name: String,
    stats: Stats,
    latency: AtomicBool,
    count_hits: AtomicBool,
    /// Read once per dump interval, never on the fop path.
    periodic: Mutex<PeriodicDump>,
    /// Whether a periodic dump task is alive (at most one is).
    pub(crate) dumper_running: AtomicBool,
}

impl Meter {
    pub fn new(name: String, o: &IoStatsOptions) -> Result<Meter, String> {
        Ok(Meter {
            name,
            stats: Stats::new(),
            latency: AtomicBool::new(o.latency_measurement),
            count_hits: AtomicBool::new(o.count_fop_hits),
            periodic: Mutex::new(PeriodicDump::from_options(o)?),
            dumper_running: AtomicBool::new(false),
        })
    }

    /// Applies (reconfigured) options; nothing changes if they are invalid.
    pub fn apply(&self, o: &IoStatsOptions) -> Result<(), String> {
        let periodic = PeriodicDump::from_options(o)?;
        self.latency.store(o.latency_measurement, Ordering::Relaxed);
        self.count_hits.store(o.count_fop_hits, Ordering::Relaxed);
        *self.periodic.lock().unwrap_or_else(PoisonError::into_inner) = periodic;
        Ok(())
    }

    pub fn periodic(&self) -> PeriodicDump {
        self.periodic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Called before a fop goes down: the start time, if latency is measured.
    #[inline]
    pub fn start(&self) -> Option<Instant> {
        self.latency.load(Ordering::Relaxed).then(Instant::now)
    }

    /// Called when the reply comes back up.
    #[inline]
    pub fn finish(&self, fop: Fop, start: Option<Instant>, outcome: Result<Io, Errno>) {
        if let Some(t) = start {
            self.stats.time(fop, t.elapsed());
        }
        if self.count_hits.load(Ordering::Relaxed) {
            self.stats.count(fop, outcome);
        }
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The statedump (the JSON report's fields, typed).
    pub fn dump_value(&self) -> xlator_api::Dump {
        let j = self.dump(DumpFormat::Json);
        let mut d = match serde_json::from_str(&j) {
            Ok(v) => xlator_api::Dump::from_json(v),
            Err(e) => xlator_api::Dump::new().with("error", format!("io-stats dump: {e}")),
        };
        // The core adds `"type"` to every translator's JSON dump: a second would be a
        // duplicate key. (The periodic dump files keep theirs.)
        d.fields.retain(|f| f.key.as_str() != "type");
        // The core heads every translator's dump with `[name (type)]`: the report's own
        // `debug/io-stats "name": ` prefix (kept in the periodic dump files) would say it twice.
        let text = self.dump(DumpFormat::Text);
        let own = format!("{TYPE} {:?}: ", self.name);
        let text = text.strip_prefix(&own).map(str::to_owned).unwrap_or(text);
        d.with_text(text)
    }

    /// The report in `format` (periodic dump files).
    pub fn dump(&self, format: DumpFormat) -> String {
        let header = Header {
            xlator: &self.name,
            type_name: TYPE,
            count_fop_hits: self.count_hits.load(Ordering::Relaxed),
            latency_measurement: self.latency.load(Ordering::Relaxed),
        };
        let snap = self.stats.snapshot();
        match format {
            DumpFormat::Text => report::text(&header, &snap),
            DumpFormat::Json => report::json(&header, &snap),
        }
    }
}
