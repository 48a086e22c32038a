//! `ChildUp`/`ChildDown` delivery through a built graph: the core's "once built" `ChildUp`
//! and a child's own events share one ordered path, so a parent sees each child's events in
//! the order they were raised and never ends "up" for a child that last said "down"; and
//! `Init::child_state` reflects every event before the parent's `notify` runs.
//!
//! Each race is played as an explicit interleaving: a parent's `notify` is held at a gate
//! while another thread raises an event, so the tests fail the same way every time without
//! the ordering (no sleeps, no retries).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use xlator_api::{ChildState, Event, EventKind, HostServices, Init, Subvol, Translator};
use xlfs_core::graph::Graph;
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;

/// A latch: `wait` blocks until `set`.
#[derive(Default)]
struct Latch {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    fn set(&self) {
        *self.set.lock().expect("latch") = true;
        self.cv.notify_all();
    }
    fn wait(&self) {
        let mut s = self.set.lock().expect("latch");
        while !*s {
            s = self.cv.wait(s).expect("latch");
        }
    }
}

/// Holds one parent `notify` call (the first matching one) until opened.
#[derive(Default)]
struct Gate {
    entered: Latch,
    open: Latch,
}

/// What the tests share with the translators, by instance name (each test uses its own).
#[derive(Default)]
struct World {
    /// Leaves' services, to raise events through their real sinks.
    services: HashMap<String, HostServices>,
    /// Parents' child state, as the SDK keeps it.
    states: HashMap<String, ChildState>,
    /// Per parent: (event, whether child_state said up for that child inside notify).
    log: HashMap<String, Vec<(EventKind, u32, bool)>>,
    /// Per parent: the event (kind, child) whose first delivery is held, and its gate.
    gates: HashMap<String, ((EventKind, u32), Arc<Gate>)>,
}

fn world() -> std::sync::MutexGuard<'static, World> {
    static W: OnceLock<Mutex<World>> = OnceLock::new();
    W.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// `test/leaf`: no children; the core announces it once the graph is built.
struct Leaf;

impl Translator for Leaf {
    const TYPE: &'static str = "test/leaf";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        world().services.insert(init.name, init.services);
        Ok(Leaf)
    }
    fn children(&self) -> &[Subvol] {
        &[]
    }
}

/// `test/net`: like `test/leaf`, but raises its own `ChildUp` (a network client).
struct Net;

impl Translator for Net {
    const TYPE: &'static str = "test/net";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    const ANNOUNCES_CHILD_UP: bool = true;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        world().services.insert(init.name, init.services);
        Ok(Net)
    }
    fn children(&self) -> &[Subvol] {
        &[]
    }
}

/// `test/recorder`: logs every event with what its child state said, and holds the gated
/// event before logging it.
struct Recorder {
    name: String,
    children: Vec<Subvol>,
    state: ChildState,
}

impl Translator for Recorder {
    const TYPE: &'static str = "test/recorder";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = u32::MAX;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        world()
            .states
            .insert(init.name.clone(), init.child_state.clone());
        Ok(Recorder {
            name: init.name,
            children: init.children,
            state: init.child_state,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    fn notify(&self, event: Event) {
        let gate = {
            let mut w = world();
            match w.gates.get(&self.name) {
                Some((at, _)) if *at == (event.kind, event.child) => {
                    w.gates.remove(&self.name).map(|(_, g)| g)
                }
                _ => None,
            }
        };
        if let Some(g) = gate {
            g.entered.set();
            g.open.wait();
        }
        let up = self.state.is_up(event.child as usize);
        world()
            .log
            .entry(self.name.clone())
            .or_default()
            .push((event.kind, event.child, up));
    }
}

xlator_api::export_translators!(Leaf, Net, Recorder);

fn build(text: &str) -> Graph {
    let registry = Registry::with_search_path(Vec::new(), true);
    let vf = Volfile::parse(text, "test.vol").unwrap_or_else(|e| panic!("{e}"));
    Graph::build(vf, &registry).unwrap_or_else(|e| panic!("{e}"))
}

fn hold(parent: &str, kind: EventKind, child: u32) -> Arc<Gate> {
    let g = Arc::new(Gate::default());
    world()
        .gates
        .insert(parent.to_owned(), ((kind, child), g.clone()));
    g
}

fn raise(instance: &str, kind: EventKind) {
    let s = *world().services.get(instance).expect("instance built");
    s.notify_parents(kind);
}

fn log_of(parent: &str) -> Vec<(EventKind, u32, bool)> {
    world().log.get(parent).cloned().unwrap_or_default()
}

fn events_of(parent: &str, child: u32) -> Vec<EventKind> {
    log_of(parent)
        .into_iter()
        .filter(|e| e.1 == child)
        .map(|e| e.0)
        .collect()
}

fn is_up(parent: &str, child: usize) -> bool {
    world()
        .states
        .get(parent)
        .expect("parent built")
        .is_up(child)
}

/// The race of the issue: the core's "once built" `ChildUp` for `e1-b` is still to come
/// (the build is busy delivering `e1-a`'s) when `e1-b` says it is down. The parent must see
/// up, then down, and stay down.
#[test]
fn a_child_down_raised_during_the_builds_announcements_is_not_overtaken_by_them() {
    let gate = hold("e1-top", EventKind::ChildUp, 0);
    let builder = std::thread::spawn(|| {
        build(
            r#"( volumes: [
                (name: "e1-a", type: "test/leaf"),
                (name: "e1-b", type: "test/leaf"),
                (name: "e1-top", type: "test/recorder", subvolumes: ["e1-a", "e1-b"]),
            ] )"#,
        )
    });
    gate.entered.wait();
    // The graph is wired and `e1-b`'s announcement not yet delivered: `e1-b` goes down.
    raise("e1-b", EventKind::ChildDown);
    gate.open.set();
    let graph = builder.join().expect("build");
    assert_eq!(
        events_of("e1-top", 1),
        [EventKind::ChildUp, EventKind::ChildDown],
        "{:?}",
        log_of("e1-top")
    );
    assert!(!is_up("e1-top", 1), "the parent thinks a down child is up");
    assert!(is_up("e1-top", 0));
    drop(graph);
}

/// Two threads raise events of one child: the second event waits for the first to be
/// delivered (it is not handed to the parent while the first is still on its way), and the
/// parent sees both in the order they were raised.
#[test]
fn events_of_one_child_reach_the_parent_in_the_order_they_were_raised() {
    let graph = build(
        r#"( volumes: [
            (name: "e2-net", type: "test/net"),
            (name: "e2-top", type: "test/recorder", subvolumes: ["e2-net"]),
        ] )"#,
    );
    assert!(log_of("e2-top").is_empty(), "test/net announces itself");
    let gate = hold("e2-top", EventKind::ChildUp, 0);
    let up = std::thread::spawn(|| raise("e2-net", EventKind::ChildUp));
    gate.entered.wait();
    // Raised after the ChildUp, while the ChildUp is still being delivered.
    raise("e2-net", EventKind::ChildDown);
    assert!(
        log_of("e2-top").is_empty(),
        "ChildDown overtook the ChildUp raised before it: {:?}",
        log_of("e2-top")
    );
    gate.open.set();
    up.join().expect("raiser");
    // The thread that delivered the ChildUp delivered the queued ChildDown before returning.
    assert_eq!(
        events_of("e2-top", 0),
        [EventKind::ChildUp, EventKind::ChildDown]
    );
    assert!(!is_up("e2-top", 0));
    // Uncontended, an event is delivered before `notify_parents` returns.
    raise("e2-net", EventKind::ChildUp);
    assert_eq!(events_of("e2-top", 0).last(), Some(&EventKind::ChildUp));
    drop(graph);
}

/// The SDK applies each event to `Init::child_state` before the parent's `notify` runs, so
/// the state read inside `notify` (and after) is what the events say.
#[test]
fn child_state_reflects_each_event_before_notify() {
    let graph = build(
        r#"( volumes: [
            (name: "e3-a", type: "test/leaf"),
            (name: "e3-net", type: "test/net"),
            (name: "e3-top", type: "test/recorder", subvolumes: ["e3-a", "e3-net"]),
        ] )"#,
    );
    // Built: the core announced e3-a, e3-net has said nothing yet.
    assert_eq!(log_of("e3-top"), [(EventKind::ChildUp, 0, true)]);
    assert!(is_up("e3-top", 0) && !is_up("e3-top", 1));
    raise("e3-net", EventKind::ChildUp);
    raise("e3-a", EventKind::ChildDown);
    raise("e3-net", EventKind::ChildDown);
    raise("e3-a", EventKind::ChildUp);
    assert_eq!(
        log_of("e3-top"),
        [
            (EventKind::ChildUp, 0, true),
            (EventKind::ChildUp, 1, true),
            (EventKind::ChildDown, 0, false),
            (EventKind::ChildDown, 1, false),
            (EventKind::ChildUp, 0, true),
        ]
    );
    let state = world().states.get("e3-top").cloned().expect("state");
    assert_eq!(state.up(), [0]);
    assert_eq!(state.up_count(), 1);
    drop(graph);
}
