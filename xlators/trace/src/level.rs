//! The `log-level` option: which `tracing` level trace lines are emitted at.

use std::sync::atomic::{AtomicU8, Ordering};

use xlator_api::{FromOption, OptionSpec, Options};

/// Level of trace lines.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceLevel {
    Trace = 0,
    Debug = 1,
    Info = 2,
}

impl TraceLevel {
    /// The option words, in order.
    pub const NAMES: [&'static str; 3] = ["trace", "debug", "info"];

    pub fn from_name(s: &str) -> Option<TraceLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "trace" => Some(TraceLevel::Trace),
            "debug" => Some(TraceLevel::Debug),
            "info" => Some(TraceLevel::Info),
            _ => None,
        }
    }

    fn from_u8(n: u8) -> TraceLevel {
        match n {
            0 => TraceLevel::Trace,
            1 => TraceLevel::Debug,
            _ => TraceLevel::Info,
        }
    }
}

impl FromOption for TraceLevel {
    fn from_option(opts: &Options, spec: &OptionSpec) -> Result<Self, String> {
        let v = opts.string(&spec.key)?;
        TraceLevel::from_name(&v).ok_or_else(|| {
            format!(
                "option {:?}: {v:?} is not one of {}",
                spec.key,
                TraceLevel::NAMES.join(", ")
            )
        })
    }
}

/// The current level, changed by reconfigure while fops run.
pub struct SharedLevel(AtomicU8);

impl SharedLevel {
    pub fn new(level: TraceLevel) -> SharedLevel {
        SharedLevel(AtomicU8::new(level as u8))
    }

    pub fn get(&self) -> TraceLevel {
        TraceLevel::from_u8(self.0.load(Ordering::Relaxed))
    }

    pub fn set(&self, level: TraceLevel) {
        self.0.store(level as u8, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_round_trip() {
        for (i, name) in TraceLevel::NAMES.iter().enumerate() {
            let l = TraceLevel::from_name(name).expect("known level");
            assert_eq!(l as usize, i);
            let s = SharedLevel::new(TraceLevel::Info);
            s.set(l);
            assert_eq!(s.get(), l);
        }
        assert_eq!(TraceLevel::from_name(" DEBUG "), Some(TraceLevel::Debug));
        assert_eq!(TraceLevel::from_name("warn"), None);
    }

    #[test]
    fn option_error_lists_choices() {
        let spec = OptionSpec::enumeration("log-level", "info", &TraceLevel::NAMES);
        let mut o = Options::new();
        o.set("log-level", "loud");
        let e = TraceLevel::from_option(&o, &spec).expect_err("bad level");
        assert!(
            e.contains("\"loud\" is not one of trace, debug, info"),
            "{e}"
        );
    }
}
