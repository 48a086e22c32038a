//! Connection admission bounds: how many connections a server holds at once
//! (`max-connections`), how many come from one address (`max-connections-per-address`), and
//! how many have not sent their first frame yet (`max-pending-handshakes`). Each bounds what a
//! peer can make the brick hold without being admitted: a task, a socket, up to 64 KiB of
//! frame buffer before the handshake, and a session with fds and locks after it.
//!
//! A connection over a bound is closed as soon as it is accepted (after a best-effort
//! `Refused` frame saying which bound, written without waiting), before anything is read
//! from it, so thousands of idle or silent sockets cost no more than the bound. Refusals are
//! logged at most once a second per server (with how many were refused since the last line):
//! a flood of connections must not become a flood of log lines.
//!
//! Unix-socket peers count towards `max-connections` and `max-pending-handshakes` but not
//! towards the per-address bound: they all count as 127.0.0.1, and the kernel says who each
//! one is.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The bounds (options of protocol/server).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub total: usize,
    pub per_address: usize,
    pub pending: usize,
}

#[derive(Default)]
struct Counts {
    total: usize,
    pending: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// Refusals since the last log line, and when that was.
struct LogState {
    last: Option<Instant>,
    suppressed: u64,
}

/// See the module documentation.
pub struct Limits {
    bounds: Bounds,
    counts: Mutex<Counts>,
    log: Mutex<LogState>,
}

/// A connection admitted under the bounds; dropping it gives its place back.
pub struct Slot {
    limits: Arc<Limits>,
    addr: Option<IpAddr>,
    pending: bool,
}

/// How often refusals are logged at most.
const LOG_EVERY: Duration = Duration::from_secs(1);

impl Limits {
    pub fn new(bounds: Bounds) -> Arc<Limits> {
        Arc::new(Limits {
            bounds,
            counts: Mutex::new(Counts::default()),
            log: Mutex::new(LogState {
                last: None,
                suppressed: 0,
            }),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a new connection from `addr` (`None`: the Unix socket), or says which bound it
    /// is over (a sentence for the peer and the log).
    pub fn admit(self: &Arc<Limits>, addr: Option<IpAddr>) -> Result<Slot, String> {
        let mut c = self.counts();
        let b = self.bounds;
        if c.total >= b.total {
            return Err(format!(
                "the brick holds max-connections ({}) connections already",
                b.total
            ));
        }
        if c.pending >= b.pending {
            return Err(format!(
                "max-pending-handshakes ({}) connections have not completed their handshake yet",
                b.pending
            ));
        }
        if let Some(a) = addr {
            let n = c.by_address.entry(a).or_insert(0);
            if *n >= b.per_address {
                return Err(format!(
                    "address {a} has max-connections-per-address ({}) connections already",
                    b.per_address
                ));
            }
            *n += 1;
        }
        c.total += 1;
        c.pending += 1;
        Ok(Slot {
            limits: self.clone(),
            addr,
            pending: true,
        })
    }

    /// Whether a refusal should be logged now; `Some(n)`: log it, with `n` refusals left
    /// unlogged since the previous line.
    pub fn should_log(&self) -> Option<u64> {
        let mut l = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match l.last {
            Some(t) if now.duration_since(t) < LOG_EVERY => {
                l.suppressed += 1;
                None
            }
            _ => {
                l.last = Some(now);
                Some(std::mem::take(&mut l.suppressed))
            }
        }
    }

    /// (connections, connections that have not completed the handshake) for the dump.
    pub fn dump(&self) -> (usize, usize) {
        let c = self.counts();
        (c.total, c.pending)
    }
}

impl Slot {
    /// The first frame has been read: the connection no longer counts as pending.
    pub fn handshake_done(&mut self) {
        if std::mem::take(&mut self.pending) {
            self.limits.counts().pending -= 1;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.limits.counts();
        c.total -= 1;
        if self.pending {
            c.pending -= 1;
        }
        if let Some(a) = self.addr
            && let Some(n) = c.by_address.get_mut(&a)
        {
            *n -= 1;
            if *n == 0 {
                c.by_address.remove(&a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_address: usize, pending: usize) -> Arc<Limits> {
        Limits::new(Bounds {
            total,
            per_address,
            pending,
        })
    }

    #[test]
    fn each_bound_refuses_and_a_dropped_slot_gives_its_place_back() {
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let l = limits(3, 2, 10);
        let s1 = l.admit(Some(a)).expect("1");
        let _s2 = l.admit(Some(a)).expect("2");
        let e = l.admit(Some(a)).err().expect("third from a");
        assert!(e.contains("max-connections-per-address (2)"), "{e}");
        let _s3 = l.admit(Some(b)).expect("b");
        let e = l.admit(None).err().expect("over total");
        assert!(e.contains("max-connections (3)"), "{e}");
        drop(s1);
        l.admit(Some(a)).expect("a's place is back");
        assert_eq!(l.counts().by_address.len(), 2);
    }

    #[test]
    fn pending_handshakes_are_bounded_until_done() {
        let l = limits(100, 100, 2);
        let mut s1 = l.admit(None).expect("1");
        let _s2 = l.admit(None).expect("2");
        assert!(
            l.admit(None)
                .err()
                .expect("3")
                .contains("max-pending-handshakes")
        );
        s1.handshake_done();
        s1.handshake_done();
        let _s3 = l.admit(None).expect("one handshake done: room again");
        assert_eq!(l.dump(), (3, 2));
        drop(s1);
        assert_eq!(l.dump(), (2, 2));
    }

    #[test]
    fn refusals_are_logged_at_most_once_a_second() {
        let l = limits(1, 1, 1);
        assert_eq!(l.should_log(), Some(0));
        assert_eq!(l.should_log(), None);
        assert_eq!(l.should_log(), None);
        l.log.lock().expect("lock").last = Some(Instant::now() - LOG_EVERY);
        assert_eq!(l.should_log(), Some(2));
    }
}
