//! `test/probe`: a translator that records what the graph engine does to it (init order,
//! events, reconfigure, drop) and can hold `lookup` calls at a gate, for graph tests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;
use xlator_api::{Ctx, Entry, Errno, Event, Init, Loc, Subvol, Translator};

/// What happened to probes, by instance label (`label` option, else the volume name).
#[derive(Default)]
pub struct Journal {
    pub lines: Vec<String>,
}

fn journal() -> &'static Mutex<Journal> {
    static J: OnceLock<Mutex<Journal>> = OnceLock::new();
    J.get_or_init(Default::default)
}

/// Journal lines that start with `prefix` (each test uses its own label prefix).
pub fn journal_lines(prefix: &str) -> Vec<String> {
    journal()
        .lock()
        .expect("journal")
        .lines
        .iter()
        .filter(|l| l.starts_with(prefix))
        .cloned()
        .collect()
}

fn note(line: String) {
    journal().lock().expect("journal").lines.push(line);
}

/// Gates by label: `lookup` of the name "wait" blocks until the gate is opened.
pub fn gate(label: &str) -> Arc<Notify> {
    static G: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    G.get_or_init(Default::default)
        .lock()
        .expect("gates")
        .entry(label.to_owned())
        .or_default()
        .clone()
}

xlator_api::options! {
    pub struct ProbeOptions {
        /// Label used in the journal (default: the volume name).
        pub label: String = OptionSpec::string("label", ""),
        /// A reconfigurable value.
        pub tag: String = OptionSpec::string("tag", "none").reconfigurable(),
        /// A value that needs a new graph to change.
        pub fixed: i64 = OptionSpec::int("fixed", "0").range(0, 100),
    }
}

pub struct Probe {
    label: String,
    children: Vec<Subvol>,
    tag: Mutex<String>,
    lookups: AtomicU64,
}

impl Translator for Probe {
    const TYPE: &'static str = "test/probe";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = u32::MAX;
    type Options = ProbeOptions;

    fn init(init: Init<ProbeOptions>) -> Result<Self, String> {
        let label = if init.options.label.is_empty() {
            init.name
        } else {
            init.options.label
        };
        note(format!("{label} init children={}", init.children.len()));
        Ok(Probe {
            label,
            children: init.children,
            tag: Mutex::new(init.options.tag),
            lookups: AtomicU64::new(0),
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    fn notify(&self, event: Event) {
        note(format!(
            "{} event {:?} {}",
            self.label, event.kind, event.child
        ));
    }
    fn reconfigure(&self, options: ProbeOptions) -> Result<(), String> {
        note(format!("{} reconfigure tag={}", self.label, options.tag));
        *self.tag.lock().map_err(|_| "poisoned")? = options.tag;
        Ok(())
    }
    fn dump(&self) -> xlator_api::Dump {
        xlator_api::Dump::new().with("lookups", self.lookups.load(Ordering::Relaxed))
    }
    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        if loc.name.as_str() == "wait" {
            note(format!("{} lookup waiting", self.label));
            gate(&self.label).notified().await;
            note(format!("{} lookup released", self.label));
            return Ok(Entry::default());
        }
        match self.children.first() {
            Some(c) => c.lookup(cx, loc).await,
            None => Err(Errno::ENOENT),
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        note(format!("{} dropped", self.label));
    }
}

/// `test/announcer`: a leaf that raises its own ChildUp/ChildDown (like a network client):
/// `lookup("up")` / `lookup("down")` raise them, and it keeps its services for a late call.
/// An instance named `early` raises ChildUp from inside `init`.
pub struct Announcer {
    services: xlator_api::HostServices,
}

impl Translator for Announcer {
    const TYPE: &'static str = "test/announcer";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    const ANNOUNCES_CHILD_UP: bool = true;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        if init.name == "early" {
            // Like a connection that completes while the graph is still being built.
            init.services.notify_parents(xlator_api::EventKind::ChildUp);
        }
        Ok(Announcer {
            services: init.services,
        })
    }
    fn children(&self) -> &[Subvol] {
        &[]
    }
    async fn lookup(&self, _cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        match loc.name.as_str() {
            "up" => self.services.notify_parents(xlator_api::EventKind::ChildUp),
            "down" => self
                .services
                .notify_parents(xlator_api::EventKind::ChildDown),
            _ => return Err(Errno::ENOENT),
        }
        Ok(Entry::default())
    }
}

xlator_api::export_translators!(Probe, Announcer);
