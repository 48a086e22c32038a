//! [`MockCluster`]: N children for a cluster translator under test (replicate, distribute,
//! disperse), each a recording mock over a real in-memory leaf, that a test takes down and
//! brings up, makes fail, holds at gates and inspects.
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)] async fn main() {
//! use xlator_api::{ChildState, Ctx, Entry, Errno, Event, EventKind, Fop, Gfid, Init, Loc};
//! use xlator_api::{Subvol, Translator};
//! use xlfs_testkit::MockCluster;
//!
//! /// A toy cluster translator: lookups go to the first child that is up.
//! struct FirstUp {
//!     children: Vec<Subvol>,
//!     up: ChildState,
//! }
//!
//! impl Translator for FirstUp {
//!     const TYPE: &'static str = "test/first-up";
//!     const MAX_CHILDREN: u32 = u32::MAX;
//!     type Options = ();
//!     fn init(init: Init<()>) -> Result<Self, String> {
//!         Ok(FirstUp { children: init.children, up: init.child_state })
//!     }
//!     fn children(&self) -> &[Subvol] {
//!         &self.children
//!     }
//!     async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
//!         match self.up.up().first() {
//!             Some(&i) => self.children[i].lookup(cx, loc).await,
//!             None => Err(Errno::ENOTCONN),
//!         }
//!     }
//! }
//!
//! let cluster = MockCluster::new(2);
//! // Built over the cluster's children; each is announced up, as a graph would.
//! let top = cluster.build::<FirstUp>(&[]);
//! let root = Ctx::root();
//! // Each child is a real leaf: make a directory on both, straight on the leaves.
//! for i in 0..2 {
//!     cluster.leaf(i).mkdir(&root, Loc::new(Gfid::ROOT, "d"), 0o755, 0).await.unwrap();
//! }
//! top.lookup(&root, Loc::new(Gfid::ROOT, "d")).await.unwrap();
//! cluster.handle(0).assert_calls(&[Fop::Lookup]);
//!
//! // Child 0 goes down: it answers ENOTCONN and the parent got ChildDown for it.
//! cluster.down(0);
//! assert_eq!(cluster.children()[0].stat(&root, Gfid::ROOT).await, Err(Errno::ENOTCONN));
//! top.lookup(&root, Loc::new(Gfid::ROOT, "d")).await.unwrap();
//! assert_eq!(cluster.handle(1).fops(), [Fop::Lookup]);
//!
//! // A fop fails once (or always) with a chosen errno.
//! cluster.handle(1).fail(Fop::Lookup, Errno::EIO);
//! assert_eq!(top.lookup(&root, Loc::new(Gfid::ROOT, "d")).await.map(drop), Err(Errno::EIO));
//!
//! // A call held at a gate waits until the test lets it through.
//! cluster.up(0);
//! cluster.handle(0).hold(Fop::Lookup);
//! let pending = tokio::spawn({
//!     let top = top.clone();
//!     async move { top.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "d")).await.map(drop) }
//! });
//! cluster.handle(0).wait_for(Fop::Lookup, 2).await;
//! assert_eq!(cluster.handle(0).held(Fop::Lookup), 1);
//! cluster.handle(0).open_gate(Fop::Lookup);
//! assert_eq!(pending.await.unwrap(), Ok(()));
//!
//! // What each child saw, in order, one line per call.
//! let seen = cluster.handle(0).summaries();
//! assert!(seen[0].starts_with("lookup(loc=Loc {"), "{seen:?}");
//! assert!(seen[1].starts_with("stat(") && seen[1].ends_with("[down]"), "{seen:?}");
//! # }
//! ```

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use xlator_api::{Event, EventKind, EventSink, Subvol, Translator};

use super::{FopCall, MockChild, MockHandle};
use crate::memfs::MemLeaf;

/// Numbers clusters, for unique mock instance names.
static NEXT_CLUSTER: AtomicU64 = AtomicU64::new(1);

/// N children for a translator under test. Child `i` is a recording [`MockChild`] (instance
/// `cluster-<n>-<i>`) over a leaf (an empty [`MemLeaf`] unless given); calls go through to
/// the leaf unless the child's [`MockHandle`] scripts them (`fail`, `fail_always`, `on`,
/// `hold`...).
///
/// [`MockCluster::down`] / [`MockCluster::up`] model a lost and restored connection: a down
/// child answers every fop ENOTCONN (recorded with `while_down`), and the parent hears
/// `ChildDown`/`ChildUp` through the child's own event sink, the path a network client's
/// events take in a graph, so `Init::child_state` and `notify` see them. The leaf keeps its
/// contents (and open fds) across a down/up: a brick that was unreachable, not restarted.
/// Calls held at a gate stay held when the child goes down; let through while it is down,
/// they answer ENOTCONN.
pub struct MockCluster {
    children: Vec<Member>,
}

struct Member {
    subvol: Subvol,
    handle: MockHandle,
    leaf: Subvol,
    link: &'static ParentLink,
    /// The services the mock was built with: its event sink is the child's own.
    services: xlator_api::HostServices,
}

/// Where one child's events go: the parent and the index it holds the child under. Leaked
/// (the event sink contract wants a target that lives for the process; a few words per
/// child); emptied when the cluster drops, which breaks the parent -> child -> parent cycle.
struct ParentLink {
    parent: Mutex<Option<Subvol>>,
    index: u32,
}

unsafe extern "C" fn deliver(target: *const c_void, kind: EventKind) {
    // SAFETY: `target` is a leaked `ParentLink` (see `MockCluster::with_leaves`).
    let link = unsafe { &*target.cast::<ParentLink>() };
    let parent = link
        .parent
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(p) = parent {
        p.notify(Event {
            kind,
            child: link.index,
        });
    }
}

impl MockCluster {
    /// `n` children over fresh in-memory leaves, all up.
    ///
    /// Uses [`xlfs_core::services::host_services`]: call it inside a tokio runtime.
    pub fn new(n: usize) -> MockCluster {
        Self::with_leaves((0..n).map(|_| MemLeaf::new()).collect())
    }

    /// One child over each of `leaves` (any translator: a stub, a real brick...), all up.
    pub fn with_leaves(leaves: Vec<Subvol>) -> MockCluster {
        let id = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
        let children = leaves
            .into_iter()
            .enumerate()
            .map(|(i, leaf)| {
                let link: &'static ParentLink = Box::leak(Box::new(ParentLink {
                    parent: Mutex::new(None),
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                }));
                // SAFETY: `link` is leaked ('static) and `deliver` only reads it under its
                // mutex, from any thread.
                let sink = unsafe { EventSink::new((link as *const ParentLink).cast(), deliver) };
                let services = xlator_api::HostServices {
                    events: sink,
                    ..xlfs_core::services::host_services()
                };
                let name = format!("cluster-{id}-{i}");
                let (subvol, handle) = MockChild::build_with(&name, vec![leaf.clone()], services);
                Member {
                    subvol,
                    handle,
                    leaf,
                    link,
                    services,
                }
            })
            .collect();
        MockCluster { children }
    }

    /// Number of children.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// The children, in order: what the parent under test is built over.
    pub fn children(&self) -> Vec<Subvol> {
        self.children.iter().map(|m| m.subvol.clone()).collect()
    }

    /// Builds `T` over the children with options `set` (see [`crate::build::build`]), then
    /// [`MockCluster::attach`]es it.
    pub fn build<T: Translator>(&self, set: &[(&str, &str)]) -> Subvol {
        let parent = crate::build::build::<T>(set, self.children());
        self.attach(&parent);
        parent
    }

    /// Makes `parent` (built over [`MockCluster::children`], in that order) the receiver of
    /// the children's events, and tells it `ChildUp` for every child that is up, in order,
    /// as the core does once a graph is built.
    pub fn attach(&self, parent: &Subvol) {
        for m in &self.children {
            *m.link.parent.lock().unwrap_or_else(PoisonError::into_inner) = Some(parent.clone());
        }
        for m in &self.children {
            if !m.handle.is_down() {
                self.raise(m, EventKind::ChildUp);
            }
        }
    }

    /// Takes child `i` down (its connection is lost): from now on it answers ENOTCONN, and
    /// the parent is told `ChildDown` (only when it was up).
    pub fn down(&self, i: usize) {
        let m = self.member(i);
        if !m.handle.is_down() {
            m.handle.set_down(true);
            self.raise(m, EventKind::ChildDown);
        }
    }

    /// Brings child `i` back: it serves fops again and the parent is told `ChildUp` (only
    /// when it was down).
    pub fn up(&self, i: usize) {
        let m = self.member(i);
        if m.handle.is_down() {
            m.handle.set_down(false);
            self.raise(m, EventKind::ChildUp);
        }
    }

    /// Whether child `i` is down.
    pub fn is_down(&self, i: usize) -> bool {
        self.member(i).handle.is_down()
    }

    /// The handle of child `i`: script failures (`fail`, `fail_always`), gates (`hold`,
    /// `release`, `open_gate`, `held`, `wait_for`) and read what it saw.
    pub fn handle(&self, i: usize) -> &MockHandle {
        &self.member(i).handle
    }

    /// The leaf behind child `i`, to set up or inspect a brick directly (not recorded, and
    /// served even while the child is down).
    pub fn leaf(&self, i: usize) -> &Subvol {
        &self.member(i).leaf
    }

    /// The calls child `i` saw, in order (see [`MockHandle::calls`]).
    pub fn calls(&self, i: usize) -> Vec<FopCall> {
        self.member(i).handle.calls()
    }

    /// The calls of every child as one line each (see [`MockHandle::summaries`]), prefixed
    /// with the child's index: a readable log for failure messages.
    pub fn log(&self) -> Vec<String> {
        self.children
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.handle
                    .summaries()
                    .into_iter()
                    .map(move |s| format!("{i}: {s}"))
            })
            .collect()
    }

    fn member(&self, i: usize) -> &Member {
        match self.children.get(i) {
            Some(m) => m,
            None => panic!(
                "the cluster has {} children, not {}",
                self.children.len(),
                i + 1
            ),
        }
    }

    /// Raises `kind` through the child's own event sink, as a network client would.
    fn raise(&self, m: &Member, kind: EventKind) {
        m.services.notify_parents(kind);
    }
}

impl Drop for MockCluster {
    fn drop(&mut self) {
        for m in &self.children {
            *m.link.parent.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
    }
}
