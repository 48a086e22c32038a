//! Building a translator graph from a validated volfile: children before parents, every
//! instance given its effective options, children and the host services; `ChildUp` events
//! delivered once the graph stands.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use xlator_api::{
    Dump, DumpFormat, DumpValue, Event, EventKind, EventSink, InitArgs, Options, PENDING_AT_EXIT,
    Subvol, TypeInfo, Upcall, json_string,
};

use crate::hop;
use crate::registry::{Registry, ResolveError};
use crate::services::host_services_with;
use crate::volfile::{self, Volfile, VolfileError};

/// Why a graph could not be built.
#[derive(thiserror::Error, Debug)]
pub enum GraphError {
    #[error(transparent)]
    Volfile(Box<VolfileError>),
    #[error("{origin}: volume {volume:?}: {source}")]
    Resolve {
        origin: String,
        volume: String,
        #[source]
        source: Box<ResolveError>,
    },
    #[error("{origin}: volume {volume:?} ({type_name}) failed to initialise: {reason}")]
    Init {
        origin: String,
        volume: String,
        type_name: String,
        reason: String,
    },
}

/// Where a translator's up-calls go: each parent, with the child index it holds it under.
/// Leaked (a few words per translator per graph build) so a late up-call from a background
/// task of a dropped graph never touches freed memory; emptied when its graph drops, which
/// breaks the parent -> child -> parent reference cycle.
///
/// Ordering: every event of one child (its own up-calls and the `ChildUp` the core raises for
/// it once the graph stands) enters one queue under the mutex, and one thread at a time
/// delivers that queue in order, so each parent sees the child's events in the order they
/// were raised and ends with the state the child last announced. Delivering with the mutex
/// released but the `delivering` flag set keeps that order without holding a lock across a
/// parent's `notify` (which may raise events of its own, or even, through a child, of this
/// translator: those are queued and delivered after the current one). The price: when two
/// threads raise at once, the second returns before its event is delivered (the first
/// delivers it right after its own). Events raised while the graph is still being built (a
/// fast connection) wait in the queue until the parents are wired.
struct UpLinks {
    state: Mutex<UpState>,
    /// Signalled when `announced` changes (see [`Graph::wait_up`]).
    changed: Condvar,
}

#[derive(Default)]
struct UpState {
    parents: Vec<(Subvol, u32)>,
    /// Whether the parents are known; before that, events only queue up.
    wired: bool,
    /// Some thread is draining `queue`: others only append to it.
    delivering: bool,
    queue: VecDeque<EventKind>,
    /// The last ChildUp (true) or ChildDown (false) this translator raised, once delivered.
    announced: Option<bool>,
    /// At the top of a graph: the host's receiver of upcalls ([`Graph::on_upcall`]).
    host_upcalls: Option<UpcallHook>,
}

/// A host's receiver of the upcalls that reach the top of a graph. Called on the thread
/// that received the upcall (a connection's reader): it must not block.
pub type UpcallHook = std::sync::Arc<dyn Fn(&Upcall) + Send + Sync>;

unsafe extern "C" fn deliver_upcall(target: *const c_void, up: &Upcall) {
    // SAFETY: `target` is a leaked `UpLinks` (see `UpLinks::sink`).
    let links = unsafe { &*target.cast::<UpLinks>() };
    links.upcall(up);
}

unsafe extern "C" fn deliver_up(target: *const c_void, kind: EventKind) {
    // SAFETY: `target` is a leaked `UpLinks` (see `UpLinks::sink`).
    let links = unsafe { &*target.cast::<UpLinks>() };
    links.raise(kind);
}

impl UpLinks {
    fn leak() -> &'static UpLinks {
        Box::leak(Box::new(UpLinks {
            state: Mutex::new(UpState::default()),
            changed: Condvar::new(),
        }))
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, UpState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn sink(&'static self) -> EventSink {
        // SAFETY: `self` is 'static and `deliver_up` only reads it under its mutex.
        unsafe {
            EventSink::new((self as *const UpLinks).cast(), deliver_up).with_upcalls(deliver_upcall)
        }
    }
    /// Passes `up` to every parent, or to the host at the top. Not ordered with the queued
    /// events: an upcall says only that something changed, whenever it arrives. One that
    /// comes before the graph is wired is dropped (nothing above can have cached anything).
    fn upcall(&self, up: &Upcall) {
        let (parents, host) = {
            let st = self.lock();
            if !st.wired {
                return;
            }
            (st.parents.clone(), st.host_upcalls.clone())
        };
        for (parent, child) in parents {
            parent.upcall(child, up);
        }
        if let Some(host) = host {
            host(up);
        }
    }
    /// Queues `kind` and, unless another thread is delivering (or the graph is not wired
    /// yet), delivers the queue.
    fn raise(&self, kind: EventKind) {
        let mut st = self.lock();
        st.queue.push_back(kind);
        if !st.wired || st.delivering {
            return;
        }
        st.delivering = true;
        drop(st);
        self.drain();
    }
    /// Delivers queued events in order until the queue is empty, then clears `delivering`.
    /// Called only by the thread that set `delivering`.
    fn drain(&self) {
        loop {
            let (kind, parents) = {
                let mut st = self.lock();
                match st.queue.pop_front() {
                    Some(kind) => {
                        let up = match kind {
                            EventKind::ChildUp => Some(true),
                            EventKind::ChildDown => Some(false),
                            _ => None,
                        };
                        if up.is_some() && st.announced != up {
                            st.announced = up;
                            self.changed.notify_all();
                        }
                        (kind, st.parents.clone())
                    }
                    None => {
                        st.delivering = false;
                        return;
                    }
                }
            };
            for (parent, child) in parents {
                parent.notify(Event { kind, child });
            }
        }
    }
    /// Wires the parents, with the core's `ChildUp` (when `announce`) queued ahead of events
    /// raised before, and everything raised from now on behind it. The caller must then
    /// [`UpLinks::drain`]: until it does, other threads only queue.
    fn wire(&self, parents: Vec<(Subvol, u32)>, announce: bool) {
        let mut st = self.lock();
        st.parents = parents;
        st.wired = true;
        st.delivering = true;
        if announce {
            st.queue.push_front(EventKind::ChildUp);
        }
    }
    fn unwire(&self) {
        let mut st = self.lock();
        st.parents.clear();
        st.host_upcalls = None;
    }
}

impl From<VolfileError> for GraphError {
    fn from(e: VolfileError) -> GraphError {
        GraphError::Volfile(Box::new(e))
    }
}

/// One translator instance in a graph.
pub struct Node {
    /// What parents and hosts call (may be wrapped by a per-hop span layer).
    pub subvol: Subvol,
    /// The translator itself, for reconfigure and dump.
    pub control: Subvol,
    pub info: TypeInfo,
    /// The options in effect: the volfile's at build, then each in-place reconfigure's
    /// (what the next volfile is compared with).
    options: Mutex<Options>,
    pub children: Vec<String>,
    up: &'static UpLinks,
}

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// A built graph. Dropping it drops every translator that no in-flight fop still holds.
pub struct Graph {
    id: u64,
    volfile: Volfile,
    nodes: BTreeMap<String, Node>,
    top: Subvol,
}

impl Node {
    /// The options in effect.
    pub fn options(&self) -> Options {
        self.options
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Reconfigures the translator in place with `options` and, when it takes them, keeps
    /// them as the options in effect.
    pub fn reconfigure(&self, options: Options) -> Result<(), String> {
        let mut cur = self
            .options
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.control.reconfigure(options.clone())?;
        *cur = options;
        Ok(())
    }
}

impl Graph {
    /// Validates `volfile` against the registry's schemas and builds it bottom-up.
    pub fn build(volfile: Volfile, registry: &Registry) -> Result<Graph, GraphError> {
        volfile::validate(&volfile, registry)?;
        let trace_hops = hop::enabled();
        let origin = volfile.origin.clone();
        let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
        for decl in volfile.build_order() {
            let resolved =
                registry
                    .resolve(&decl.type_name)
                    .map_err(|source| GraphError::Resolve {
                        origin: origin.clone(),
                        volume: decl.name.clone(),
                        source: Box::new(source),
                    })?;
            let options = volfile::effective_options(decl, &resolved.info, &origin)?;
            let children: Vec<Subvol> = decl
                .subvolumes
                .iter()
                .filter_map(|c| nodes.get(c).map(|n| n.subvol.clone()))
                .collect();
            let up = UpLinks::leak();
            let args = InitArgs {
                name: decl.name.as_str().into(),
                options: options.clone(),
                children: children.into_iter().collect(),
                services: host_services_with(up.sink()),
            };
            let built = (resolved.module.new_xlator())(decl.type_name.as_str().into(), args)
                .into_result()
                .map_err(|reason| GraphError::Init {
                    origin: origin.clone(),
                    volume: decl.name.clone(),
                    type_name: decl.type_name.clone(),
                    reason: reason.into(),
                })?;
            let control = built.clone();
            let built = if resolved.info.keeps_file_data {
                built
            } else {
                hop::drop_backing(built)
            };
            let subvol = if trace_hops { hop::wrap(built) } else { built };
            tracing::debug!(volume = %decl.name, r#type = %decl.type_name, "translator initialised");
            nodes.insert(
                decl.name.clone(),
                Node {
                    subvol,
                    control,
                    info: resolved.info,
                    options: Mutex::new(options),
                    children: decl.subvolumes.clone(),
                    up,
                },
            );
        }
        let top_name = volfile.top_name().to_owned();
        let top = match nodes.get(&top_name) {
            Some(n) => n.subvol.clone(),
            None => {
                return Err(GraphError::Init {
                    origin,
                    volume: top_name,
                    type_name: String::new(),
                    reason: "top volume was not built".into(),
                });
            }
        };
        let graph = Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            volfile,
            nodes,
            top,
        };
        // Wire up-calls: each child learns its parents and its index under each.
        let mut parents_of: BTreeMap<&str, Vec<(Subvol, u32)>> = BTreeMap::new();
        for node in graph.nodes.values() {
            for (i, child) in node.children.iter().enumerate() {
                parents_of
                    .entry(child)
                    .or_default()
                    .push((node.subvol.clone(), i as u32));
            }
        }
        // Every child initialised successfully: each parent is told, unless the child
        // announces its own readiness (network clients, quorum-based cluster layers). That
        // `ChildUp` goes through the child's queue, so an event the child raises meanwhile
        // (from another thread) reaches the parents after it, never before.
        for (name, node) in &graph.nodes {
            let parents = parents_of.remove(name.as_str()).unwrap_or_default();
            node.up.wire(parents, !node.info.announces_child_up);
        }
        // Children before parents, and each parent's children in its order.
        for decl in graph.volfile.build_order() {
            if let Some(node) = graph.nodes.get(&decl.name) {
                node.up.drain();
            }
        }
        Ok(graph)
    }

    /// Waits, at most `timeout`, until every translator that announces its own readiness
    /// (network clients, cluster translators) has said whether it is up: network clients
    /// after their first connection attempt, cluster translators once they have heard
    /// from their children. Hosts call it before serving, so the first fops do not find
    /// bricks still connecting. Returns the names of those still silent (empty: ready).
    /// Blocks the calling thread: not from an async task.
    pub fn wait_ready(&self, timeout: Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut silent = Vec::new();
        for (name, node) in &self.nodes {
            if !node.info.announces_child_up {
                continue;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let st = node.up.lock();
            let (st, _) = node
                .up
                .changed
                .wait_timeout_while(st, left, |st| st.announced.is_none())
                .unwrap_or_else(|p| p.into_inner());
            if st.announced.is_none() {
                silent.push(name.clone());
            }
        }
        silent
    }

    /// What translator `name` last announced: Some(true) up, Some(false) down, None if it
    /// has said nothing yet (or there is no such translator).
    pub fn announced(&self, name: &str) -> Option<bool> {
        self.nodes.get(name)?.up.lock().announced
    }

    /// Sends the upcalls that reach the top of the graph to `hook` (replacing any earlier
    /// one; `None` stops them).
    pub fn on_upcall(&self, hook: Option<UpcallHook>) {
        if let Some(node) = self.nodes.get(self.volfile.top_name()) {
            node.up.lock().host_upcalls = hook;
        }
    }

    /// The top translator: where hosts send fops.
    pub fn top(&self) -> &Subvol {
        &self.top
    }

    /// A translator instance by volume name.
    pub fn get(&self, name: &str) -> Option<&Subvol> {
        self.nodes.get(name).map(|n| &n.subvol)
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    pub fn nodes(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.nodes.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn volfile(&self) -> &Volfile {
        &self.volfile
    }

    /// Unique per built graph in this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Delivers `kind` to every translator.
    pub fn broadcast(&self, kind: EventKind) {
        for node in self.nodes.values() {
            node.subvol.notify(Event { kind, child: 0 });
        }
    }

    /// What the translators still owe their children ([`PENDING_AT_EXIT`] summed over every
    /// translator's dump).
    pub fn pending_at_exit(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| match n.control.dump().get(PENDING_AT_EXIT) {
                Some(DumpValue::U64(v)) => *v,
                _ => 0,
            })
            .sum()
    }

    /// Before a host exits: asks every translator to send what it keeps for later
    /// ([`EventKind::GraphSwitch`]) and waits, up to `limit`, until none reports anything
    /// [`PENDING_AT_EXIT`]. Returns what is still owed then (0: all sent).
    pub async fn drain(&self, limit: Duration) -> u64 {
        self.broadcast(EventKind::GraphSwitch);
        let start = std::time::Instant::now();
        loop {
            let owed = self.pending_at_exit();
            if owed == 0 || start.elapsed() >= limit {
                return owed;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Statedump of every translator that has something to say, top-down.
    pub fn dump(&self, format: DumpFormat) -> String {
        let order: Vec<&str> = self
            .volfile
            .build_order()
            .iter()
            .rev()
            .map(|d| d.name.as_str())
            .collect();
        let dumps: Vec<(&str, &str, Dump)> = order
            .iter()
            .filter_map(|name| {
                let n = self.nodes.get(*name)?;
                let d = n.control.dump();
                (!d.is_empty()).then(|| (*name, n.info.name.as_str(), d))
            })
            .collect();
        render_dumps(format, &dumps)
    }
}

/// Renders translators' dumps `(instance, type, dump)` once, top-down: text (a `[name (type)]`
/// header then indented fields per translator) or one JSON object keyed by instance name, each
/// value the translator's fields plus its `"type"`.
pub fn render_dumps(format: DumpFormat, dumps: &[(&str, &str, Dump)]) -> String {
    match format {
        DumpFormat::Text => {
            let mut out = String::new();
            for (name, ty, d) in dumps {
                out.push_str(&format!("[{name} ({ty})]\n{}\n", d.to_text(2)));
            }
            out
        }
        DumpFormat::Json => {
            let mut out = String::from("{");
            for (i, (name, ty, d)) in dumps.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(&mut out, name);
                out.push(':');
                let mut with_type = Dump::new().with("type", *ty);
                with_type.fields.extend(d.fields.iter().cloned());
                out.push_str(&with_type.to_json());
            }
            out.push('}');
            out
        }
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // Break parent <-> child cycles so every translator of this graph can drop once the
        // last in-flight fop lets go of it.
        for node in self.nodes.values() {
            node.up.unwire();
        }
    }
}
