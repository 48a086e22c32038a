//! `MockCluster`: children over real leaves that go down and up (ENOTCONN, events through
//! the normal notify path into `Init::child_state`), fail on demand, hold fops at gates and
//! record what they saw.

use std::sync::{Arc, Mutex};

use xlator_api::{
    ChildState, Ctx, Entry, Errno, Event, EventKind, Fop, Gfid, Init, Loc, Subvol, Translator,
};
use xlfs_testkit::MockCluster;
use xlfs_testkit::mock::FopCall;

/// Events a parent received: (kind, child, whether its child state said up in `notify`).
type Log = Arc<Mutex<Vec<(EventKind, u32, bool)>>>;

/// A replicate-like parent: `mkdir` goes to every child that is up (all must succeed),
/// `lookup` to the first one up; it logs every event with the state its SDK keeps.
struct Fan {
    children: Vec<Subvol>,
    state: ChildState,
    events: Log,
}

/// The event log of the most recently built `Fan` (tests build one each; see `fan`).
static LOGS: Mutex<Vec<Log>> = Mutex::new(Vec::new());

impl Translator for Fan {
    const TYPE: &'static str = "test/fan";
    const MAX_CHILDREN: u32 = u32::MAX;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        let events = Arc::new(Mutex::new(Vec::new()));
        LOGS.lock().expect("logs").push(events.clone());
        Ok(Fan {
            children: init.children,
            state: init.child_state,
            events,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    fn notify(&self, event: Event) {
        let up = self.state.is_up(event.child as usize);
        self.events
            .lock()
            .expect("events")
            .push((event.kind, event.child, up));
    }
    fn dump(&self) -> xlator_api::Dump {
        xlator_api::Dump::new().with("up", self.state.up_count() as u64)
    }
    async fn mkdir(&self, cx: &Ctx, loc: Loc, mode: u32, umask: u32) -> Result<Entry, Errno> {
        let up = self.state.up();
        let mut last = Err(Errno::ENOTCONN);
        for i in up {
            last = Ok(self.children[i].mkdir(cx, loc.clone(), mode, umask).await?);
        }
        last
    }
    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        match self.state.up().first() {
            Some(&i) => self.children[i].lookup(cx, loc).await,
            None => Err(Errno::ENOTCONN),
        }
    }
}

/// A `Fan` over `cluster` and its event log.
fn fan(cluster: &MockCluster) -> (Subvol, Log) {
    // Serialise builds so the log taken is this build's (tests run in parallel threads).
    static BUILD: Mutex<()> = Mutex::new(());
    let _g = BUILD.lock().expect("build lock");
    let top = cluster.build::<Fan>(&[]);
    let log = LOGS.lock().expect("logs").last().cloned().expect("built");
    (top, log)
}

fn events(log: &Log) -> Vec<(EventKind, u32, bool)> {
    log.lock().expect("events").clone()
}

fn d(name: &str) -> Loc {
    Loc::new(Gfid::ROOT, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_and_up_reach_the_parent_and_a_down_child_answers_enotconn() {
    use EventKind::{ChildDown, ChildUp};
    let cluster = MockCluster::new(3);
    cluster.down(2);
    let (top, log) = fan(&cluster);
    // Attached: the children that are up were announced, in order; the down one was not.
    assert_eq!(events(&log), [(ChildUp, 0, true), (ChildUp, 1, true)]);
    assert_eq!(xlfs_testkit::fixtures::counter(&top, "up"), 2);

    let root = Ctx::root();
    top.mkdir(&root, d("a"), 0o755, 0).await.expect("mkdir");
    // Only the children that are up got it; the leaves hold it.
    for (i, has) in [(0, true), (1, true), (2, false)] {
        assert_eq!(
            cluster.leaf(i).lookup(&root, d("a")).await.is_ok(),
            has,
            "{i}"
        );
    }
    cluster.down(0);
    cluster.down(0); // already down: no second event
    cluster.up(2);
    assert_eq!(
        events(&log)[2..],
        [(ChildDown, 0, false), (ChildUp, 2, true)]
    );
    assert_eq!(
        cluster.children()[0].stat(&root, Gfid::ROOT).await,
        Err(Errno::ENOTCONN)
    );
    assert_eq!(
        cluster.children()[0]
            .lookup(&root, d("a"))
            .await
            .map(|e| e.attr.gfid),
        Err(Errno::ENOTCONN)
    );
    // The parent now uses children 1 and 2 only.
    top.mkdir(&root, d("b"), 0o755, 0).await.expect("mkdir");
    assert_eq!(cluster.handle(0).count(Fop::Mkdir), 1);
    assert_eq!(cluster.handle(2).count(Fop::Mkdir), 1);
    // The down child's leaf kept its data: back up, it serves it again.
    cluster.up(0);
    assert_eq!(events(&log).last(), Some(&(ChildUp, 0, true)));
    assert!(cluster.children()[0].lookup(&root, d("a")).await.is_ok());
    assert!(!cluster.is_down(0));
    // The calls answered while down are recorded as such.
    let records = cluster.handle(0).records();
    let down: Vec<Fop> = records
        .iter()
        .filter(|r| r.while_down)
        .map(|r| r.call.fop())
        .collect();
    assert_eq!(down, [Fop::Stat, Fop::Lookup]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fop_fails_once_or_always_with_the_chosen_errno() {
    let cluster = MockCluster::new(2);
    let (top, _log) = fan(&cluster);
    let root = Ctx::root();
    cluster.handle(1).fail(Fop::Mkdir, Errno::ENOSPC);
    assert_eq!(
        top.mkdir(&root, d("a"), 0o755, 0)
            .await
            .map(|e| e.attr.gfid),
        Err(Errno::ENOSPC)
    );
    // Once: the next one goes through (child 0 already has "a").
    top.mkdir(&root, d("b"), 0o755, 0)
        .await
        .expect("second mkdir");
    cluster.handle(0).fail_always(Fop::Lookup, Errno::EIO);
    for _ in 0..3 {
        assert_eq!(
            top.lookup(&root, d("b")).await.map(|e| e.attr.gfid),
            Err(Errno::EIO)
        );
    }
    // Other fops of that child are unaffected.
    assert!(cluster.children()[0].stat(&root, Gfid::ROOT).await.is_ok());
    cluster.handle(0).clear_handler(Fop::Lookup);
    assert!(top.lookup(&root, d("b")).await.is_ok());
    cluster.handle(1).verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_fop_waits_for_the_test_and_fails_if_its_child_went_down_meanwhile() {
    let cluster = MockCluster::new(2);
    let (top, _log) = fan(&cluster);
    cluster.handle(1).hold(Fop::Mkdir);
    let call = |name: &'static str| {
        let top = top.clone();
        tokio::spawn(async move {
            top.mkdir(&Ctx::root(), d(name), 0o755, 0)
                .await
                .map(|e| e.attr.gfid)
        })
    };
    let first = call("a");
    cluster.handle(1).wait_for(Fop::Mkdir, 1).await;
    // Child 0 answered, child 1 holds it: the leaf of 1 has nothing yet.
    assert_eq!(cluster.handle(1).held(Fop::Mkdir), 1);
    assert!(cluster.leaf(0).lookup(&Ctx::root(), d("a")).await.is_ok());
    assert_eq!(
        cluster
            .leaf(1)
            .lookup(&Ctx::root(), d("a"))
            .await
            .map(|e| e.attr.gfid),
        Err(Errno::ENOENT)
    );
    assert!(!first.is_finished());
    cluster.handle(1).release(Fop::Mkdir, 1);
    assert!(first.await.expect("task").is_ok());
    assert!(cluster.leaf(1).lookup(&Ctx::root(), d("a")).await.is_ok());

    // Held, then the child goes down: let through, it answers ENOTCONN.
    let second = call("b");
    cluster.handle(1).wait_for(Fop::Mkdir, 2).await;
    cluster.down(1);
    cluster.handle(1).open_gate(Fop::Mkdir);
    assert_eq!(second.await.expect("task"), Err(Errno::ENOTCONN));
    assert_eq!(
        cluster
            .leaf(1)
            .lookup(&Ctx::root(), d("b"))
            .await
            .map(|e| e.attr.gfid),
        Err(Errno::ENOENT)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_child_records_the_calls_it_saw_in_order() {
    let cluster = MockCluster::new(2);
    let (top, _log) = fan(&cluster);
    let root = Ctx::root();
    top.mkdir(&root, d("x"), 0o700, 0o22).await.expect("mkdir");
    top.lookup(&root, d("x")).await.expect("lookup");
    assert_eq!(cluster.handle(0).fops(), [Fop::Mkdir, Fop::Lookup]);
    assert_eq!(cluster.handle(1).fops(), [Fop::Mkdir]);
    assert_eq!(
        cluster.calls(1),
        [FopCall::Mkdir {
            loc: d("x"),
            mode: 0o700,
            umask: 0o22
        }]
    );
    let lines = cluster.log();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("0: mkdir(loc=Loc { parent: 00000000-0000-0000-0000-000000000001, name: \"x\" }, mode=448, umask=18)"), "{lines:?}");
    assert!(lines[1].starts_with("0: lookup("), "{lines:?}");
    assert!(lines[2].starts_with("1: mkdir("), "{lines:?}");
    // Calls straight to a leaf are not recorded.
    cluster.leaf(1).stat(&root, Gfid::ROOT).await.expect("stat");
    assert_eq!(cluster.handle(1).fops(), [Fop::Mkdir]);
}
