//! The shared state of one mock: the call log, the reply script, delays and gates.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use xlator_api::{Ctx, Errno, Fop, HostServices, Subvol};

use super::{FopCall, FopReply, RecordedCall};

/// A closure computing a reply from the call.
pub(crate) type Handler = Arc<dyn Fn(&FopCall) -> FopReply + Send + Sync>;

/// Holds calls of one fop until the test lets them through.
pub(crate) struct Gate {
    permits: Semaphore,
    /// Calls currently waiting at the gate.
    pub(crate) waiting: AtomicUsize,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            permits: Semaphore::new(0),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Lets `n` more calls through.
    pub(crate) fn release(&self, n: usize) {
        self.permits.add_permits(n);
    }

    /// Lets every call through, now and later.
    pub(crate) fn open(&self) {
        self.permits.close();
    }

    /// Whether [`Gate::open`] was called.
    pub(crate) fn is_open(&self) -> bool {
        self.permits.is_closed()
    }

    /// Counts a call as waiting here: done under the script's lock, with the call's record,
    /// so a test that saw the call arrive also sees it held.
    fn arrive(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits for a permit (or the gate's opening) after [`Gate::arrive`].
    async fn pass(&self) {
        // `Err` means the gate was opened for good: pass.
        if let Ok(permit) = self.permits.acquire().await {
            permit.forget();
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the test has scripted and what the mock has seen.
pub(crate) struct Script {
    pub(crate) calls: Vec<RecordedCall>,
    pub(crate) queued: HashMap<Fop, VecDeque<FopReply>>,
    pub(crate) handlers: HashMap<Fop, Handler>,
    pub(crate) delays: HashMap<Fop, Duration>,
    pub(crate) gates: HashMap<Fop, Arc<Gate>>,
    pub(crate) default_errno: Errno,
    /// Disconnected: every call is answered ENOTCONN (see [`MockHandle::set_down`]).
    pub(crate) down: bool,
    /// Scripted replies that answered the wrong fop, described for [`MockHandle::verify`].
    pub(crate) misuses: Vec<String>,
}

/// How one call will be answered, decided on arrival.
enum Answer {
    Reply(Box<FopReply>),
    Handler(Handler),
    Forward,
    Error(Errno),
}

/// One mock's state, shared by the translator instance and its handles.
pub(crate) struct MockState {
    pub(crate) name: String,
    script: Mutex<Script>,
    /// Woken whenever a call is recorded.
    pub(crate) arrived: Notify,
}

impl MockState {
    pub(crate) fn new(name: &str) -> MockState {
        MockState {
            name: name.to_owned(),
            script: Mutex::new(Script {
                calls: Vec::new(),
                queued: HashMap::new(),
                handlers: HashMap::new(),
                delays: HashMap::new(),
                gates: HashMap::new(),
                default_errno: Errno::ENOSYS,
                down: false,
                misuses: Vec::new(),
            }),
            arrived: Notify::new(),
        }
    }

    /// The script, even if a panicking test thread poisoned the lock.
    pub(crate) fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `call`, then answers it per the script (after its gate and delay). A call that
    /// arrives while the mock is down, or is let through its gate or delay while it is down,
    /// is answered ENOTCONN (scripted replies are kept for later).
    pub(crate) async fn serve(
        &self,
        services: &HostServices,
        child: Option<&Subvol>,
        cx: &Ctx,
        call: FopCall,
    ) -> FopReply {
        let fop = call.fop();
        let (answer, gate, delay) = {
            let mut s = self.script();
            let down = s.down;
            s.calls.push(RecordedCall {
                call: call.clone(),
                ctx: cx.clone(),
                while_down: down,
            });
            if down {
                drop(s);
                self.arrived.notify_waiters();
                return FopReply::error(fop, Errno::ENOTCONN);
            }
            let answer = match s.queued.get_mut(&fop).and_then(VecDeque::pop_front) {
                Some(reply) => Answer::Reply(Box::new(reply)),
                None => match s.handlers.get(&fop) {
                    Some(h) => Answer::Handler(h.clone()),
                    None if child.is_some() => Answer::Forward,
                    None => Answer::Error(s.default_errno),
                },
            };
            let gate = s.gates.get(&fop).cloned();
            if let Some(g) = &gate {
                g.arrive();
            }
            (answer, gate, s.delays.get(&fop).copied())
        };
        self.arrived.notify_waiters();
        if let Some(gate) = gate {
            gate.pass().await;
        }
        if let Some(d) = delay {
            services.sleep(d).await;
        }
        if self.script().down {
            return FopReply::error(fop, Errno::ENOTCONN);
        }
        match (answer, child) {
            (Answer::Reply(r), _) => *r,
            (Answer::Handler(h), _) => h(&call),
            (Answer::Forward, Some(child)) => call.send(cx, child).await,
            (Answer::Forward, None) => FopReply::error(fop, Errno::ENOSYS),
            (Answer::Error(e), _) => FopReply::error(fop, e),
        }
    }

    /// Notes a reply scripted for the wrong fop; the caller gets EIO.
    pub(crate) fn mismatch(&self, fop: Fop, reply: &FopReply) -> Errno {
        self.script().misuses.push(format!(
            "mock {}: a {} call was answered with a reply for {}: {reply:?}",
            self.name,
            fop,
            reply.fop()
        ));
        Errno::EIO
    }

    /// The gate of `fop`, made closed if there is none.
    pub(crate) fn gate(&self, fop: Fop) -> Arc<Gate> {
        self.script()
            .gates
            .entry(fop)
            .or_insert_with(|| Arc::new(Gate::new()))
            .clone()
    }
}
