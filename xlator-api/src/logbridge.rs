//! A minimal `tracing` subscriber that forwards events to the host's log callback. Installed
//! inside a loaded cdylib (whose `tracing` copy would otherwise print nothing). Spans are not
//! bridged: fop context travels as event fields.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use abi_stable::std_types::RString;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::services::{LogFn, LogLevel};

pub(crate) struct Bridge {
    pub(crate) log: LogFn,
    pub(crate) max_level: LogLevel,
}

static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl Subscriber for Bridge {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        LogLevel::from_tracing(metadata.level()) <= self.max_level
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(NEXT_SPAN.fetch_add(1, Ordering::Relaxed))
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut f = Fields(String::new());
        event.record(&mut f);
        let level = LogLevel::from_tracing(event.metadata().level());
        (self.log)(
            level,
            RString::from(event.metadata().target()),
            RString::from(f.0),
        );
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
