//! [`MockHandle`]: the test's side of a mock — scripting replies and asserting calls.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use xlator_api::{Ctx, Errno, Fop};

use super::script::{Handler, MockState};
use super::{FopCall, FopReply};

/// A call as the mock saw it, with the caller's context.
#[derive(Debug, Clone)]
pub struct RecordedCall {
    /// The fop and its arguments.
    pub call: FopCall,
    /// Who made it (uid, gid, groups, pid, lock owner...).
    pub ctx: Ctx,
    /// It arrived while the mock was down and was answered ENOTCONN without going further.
    pub while_down: bool,
}

/// Controls one mock instance. Cheap to clone; all clones share the script and the call log.
#[derive(Clone)]
pub struct MockHandle {
    state: Arc<MockState>,
}

impl std::fmt::Debug for MockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MockHandle({}, {} calls)",
            self.state.name,
            self.state.script().calls.len()
        )
    }
}

impl MockHandle {
    pub(crate) fn from_state(state: Arc<MockState>) -> MockHandle {
        MockHandle { state }
    }

    /// The handle of a live mock instance named `instance` (e.g. built from a volfile with
    /// `type testing/mock`).
    pub fn attach(instance: &str) -> Option<MockHandle> {
        super::registered(instance).map(MockHandle::from_state)
    }

    /// The mock's instance name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    // ---- scripting ----

    /// Queues `reply` for the next unanswered call of `reply.fop()` (FIFO per fop).
    pub fn reply(&self, reply: FopReply) -> &Self {
        self.state
            .script()
            .queued
            .entry(reply.fop())
            .or_default()
            .push_back(reply);
        self
    }

    /// Queues a failure with `errno` for the next call of `fop`.
    pub fn fail(&self, fop: Fop, errno: Errno) -> &Self {
        self.reply(FopReply::error(fop, errno))
    }

    /// Answers every call of `fop` that has no queued reply with `f(call)`. The reply must be
    /// for `fop`; otherwise the caller gets EIO and [`MockHandle::verify`] reports it.
    pub fn on<F>(&self, fop: Fop, f: F) -> &Self
    where
        F: Fn(&FopCall) -> FopReply + Send + Sync + 'static,
    {
        let h: Handler = Arc::new(f);
        self.state.script().handlers.insert(fop, h);
        self
    }

    /// Fails every call of `fop` with `errno` from now on (until [`MockHandle::clear_handler`]);
    /// queued replies still come first.
    pub fn fail_always(&self, fop: Fop, errno: Errno) -> &Self {
        self.on(fop, move |_| FopReply::error(fop, errno))
    }

    /// Takes the mock down (`true`: every call from now on, and every held or delayed call
    /// let through from now on, is answered ENOTCONN without reaching its script or child,
    /// like a brick whose connection is gone) or brings it back up. Raises no event: see
    /// [`MockCluster`](super::MockCluster) for a parent that is told.
    pub fn set_down(&self, down: bool) -> &Self {
        self.state.script().down = down;
        self
    }

    /// Whether the mock is down.
    pub fn is_down(&self) -> bool {
        self.state.script().down
    }

    /// Every call so far as one line each (`fop(arg=value, ...)`, with ` [down]` after those
    /// answered ENOTCONN while down), in arrival order: for assertions and failure messages.
    pub fn summaries(&self) -> Vec<String> {
        self.state
            .script()
            .calls
            .iter()
            .map(|r| {
                let mut line = r.call.summary();
                if r.while_down {
                    line.push_str(" [down]");
                }
                line
            })
            .collect()
    }

    /// Removes the handler of `fop`.
    pub fn clear_handler(&self, fop: Fop) -> &Self {
        self.state.script().handlers.remove(&fop);
        self
    }

    /// The error of calls with no queued reply, no handler and no child (default ENOSYS).
    pub fn set_default_errno(&self, errno: Errno) -> &Self {
        self.state.script().default_errno = errno;
        self
    }

    /// Delays every reply of `fop` by `d` (zero: no delay), measured after its gate.
    pub fn delay(&self, fop: Fop, d: Duration) -> &Self {
        let mut s = self.state.script();
        if d.is_zero() {
            s.delays.remove(&fop);
        } else {
            s.delays.insert(fop, d);
        }
        self
    }

    /// Holds calls of `fop` that arrive from now on (they are recorded at once, answered
    /// only when let through by [`MockHandle::release`] or [`MockHandle::open_gate`]).
    pub fn hold(&self, fop: Fop) -> &Self {
        let mut s = self.state.script();
        if s.gates.get(&fop).is_none_or(|g| g.is_open()) {
            s.gates.remove(&fop);
        }
        drop(s);
        self.state.gate(fop);
        self
    }

    /// Lets `n` held calls of `fop` through (in arrival order), or the next `n` to arrive.
    pub fn release(&self, fop: Fop, n: usize) -> &Self {
        self.state.gate(fop).release(n);
        self
    }

    /// Stops holding `fop`: every held and future call goes through.
    pub fn open_gate(&self, fop: Fop) -> &Self {
        if let Some(g) = self.state.script().gates.remove(&fop) {
            g.open();
        }
        self
    }

    /// How many calls of `fop` are waiting at its gate.
    pub fn held(&self, fop: Fop) -> usize {
        self.state
            .script()
            .gates
            .get(&fop)
            .map_or(0, |g| g.waiting.load(Ordering::SeqCst))
    }

    // ---- observing ----

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<FopCall> {
        self.state
            .script()
            .calls
            .iter()
            .map(|r| r.call.clone())
            .collect()
    }

    /// Every call so far with its caller's context.
    pub fn records(&self) -> Vec<RecordedCall> {
        self.state.script().calls.clone()
    }

    /// Every call so far, clearing the log.
    pub fn take_calls(&self) -> Vec<FopCall> {
        std::mem::take(&mut self.state.script().calls)
            .into_iter()
            .map(|r| r.call)
            .collect()
    }

    /// The fops called so far, in order.
    pub fn fops(&self) -> Vec<Fop> {
        self.state
            .script()
            .calls
            .iter()
            .map(|r| r.call.fop())
            .collect()
    }

    /// The calls of one fop, in order.
    pub fn calls_of(&self, fop: Fop) -> Vec<FopCall> {
        let s = self.state.script();
        s.calls
            .iter()
            .filter(|r| r.call.fop() == fop)
            .map(|r| r.call.clone())
            .collect()
    }

    /// How many calls of `fop` arrived.
    pub fn count(&self, fop: Fop) -> usize {
        self.state
            .script()
            .calls
            .iter()
            .filter(|r| r.call.fop() == fop)
            .count()
    }

    /// Waits until at least `n` calls have arrived in total.
    pub async fn wait_for_calls(&self, n: usize) {
        self.wait_until(|s| s.calls.len() >= n).await;
    }

    /// Waits until at least `n` calls of `fop` have arrived.
    pub async fn wait_for(&self, fop: Fop, n: usize) {
        self.wait_until(|s| s.calls.iter().filter(|r| r.call.fop() == fop).count() >= n)
            .await;
    }

    async fn wait_until(&self, done: impl Fn(&super::script::Script) -> bool) {
        loop {
            let notified = self.state.arrived.notified();
            let mut notified = std::pin::pin!(notified);
            // Register before checking, so a call recorded in between still wakes us.
            notified.as_mut().enable();
            if done(&self.state.script()) {
                return;
            }
            notified.await;
        }
    }

    /// Queued replies not yet consumed.
    pub fn pending_replies(&self) -> usize {
        self.state.script().queued.values().map(VecDeque::len).sum()
    }

    // ---- asserting ----

    /// Panics unless the fops called so far are exactly `expected`, in order.
    #[track_caller]
    pub fn assert_calls(&self, expected: &[Fop]) {
        let got = self.fops();
        assert!(
            got == expected,
            "mock {}: fops reaching the child differ\n  expected: {}\n       got: {}\n  calls: {:#?}",
            self.state.name,
            names(expected),
            names(&got),
            self.calls()
        );
    }

    /// Panics if any call arrived.
    #[track_caller]
    pub fn assert_no_calls(&self) {
        self.assert_calls(&[]);
    }

    /// Panics if queued replies were left unconsumed or a reply answered the wrong fop.
    #[track_caller]
    pub fn verify(&self) {
        let s = self.state.script();
        let left: Vec<String> = s
            .queued
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(f, q)| format!("{f} x{}", q.len()))
            .collect();
        let misuses = s.misuses.join("\n  ");
        drop(s);
        assert!(
            left.is_empty() && misuses.is_empty(),
            "mock {}: unconsumed replies: [{}]; misuses:\n  {}",
            self.state.name,
            left.join(", "),
            misuses
        );
    }
}

fn names(fops: &[Fop]) -> String {
    let v: Vec<&str> = fops.iter().map(|f| f.name()).collect();
    format!("[{}]", v.join(", "))
}
