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
//! When `max-pending-handshakes` is full, a new connection from an address that holds fewer
//! pending connections than the address holding the most does not get refused: that other
//! address's oldest pending connection is evicted (closed) to make room. So one address that
//! opens connections and never speaks cannot keep every other client out, while a burst of
//! handshakes from one host with nobody else waiting is still admitted whole.
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
    /// The pending connections of each address (`None`: the Unix socket), oldest first.
    pending_by: HashMap<Option<IpAddr>, std::collections::VecDeque<(u64, Arc<Evict>)>>,
    next_id: u64,
}

/// Tells a pending connection it was evicted to make room (see the module documentation).
#[derive(Default)]
pub struct Evict {
    flag: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Evict {
    fn fire(&self) {
        self.flag.store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Returns once the connection is evicted.
    pub async fn evicted(&self) {
        loop {
            let n = self.notify.notified();
            if self.flag.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            n.await;
        }
    }
}

/// At most one log line a second of one kind: a flood of refused or broken connections
/// must not flood the log too. What was left unlogged is counted and said in the next line.
#[derive(Default)]
pub struct Throttle {
    state: Mutex<ThrottleState>,
}

#[derive(Default)]
struct ThrottleState {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    /// Whether a line should be logged now; `Some(n)`: log it, with `n` lines left unlogged
    /// since the previous one.
    pub fn admit(&self) -> Option<u64> {
        let mut l = self.state.lock().unwrap_or_else(PoisonError::into_inner);
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

    /// `" (N more ... since the last such line)"` for [`Throttle::admit`]'s count, or nothing.
    pub fn more(suppressed: u64, what: &str) -> String {
        if suppressed > 0 {
            format!(" ({suppressed} more {what} since the last such line)")
        } else {
            String::new()
        }
    }

    #[cfg(test)]
    fn age(&self, by: Duration) {
        let mut l = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        l.last = l.last.map(|t| t - by);
    }
}

/// See the module documentation.
pub struct Limits {
    bounds: Bounds,
    counts: Mutex<Counts>,
    log: Throttle,
}

/// A connection admitted under the bounds; dropping it gives its place back.
pub struct Slot {
    limits: Arc<Limits>,
    addr: Option<IpAddr>,
    pending: bool,
    id: u64,
    evict: Arc<Evict>,
}

/// How often refusals are logged at most.
const LOG_EVERY: Duration = Duration::from_secs(1);

impl Limits {
    pub fn new(bounds: Bounds) -> Arc<Limits> {
        Arc::new(Limits {
            bounds,
            counts: Mutex::new(Counts::default()),
            log: Throttle::default(),
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
            let mine = c.pending_by.get(&addr).map_or(0, |q| q.len());
            let hog = c
                .pending_by
                .iter()
                .max_by_key(|(_, q)| q.len())
                .filter(|(_, q)| q.len() > mine + 1)
                .map(|(a, _)| *a);
            let Some(hog) = hog else {
                return Err(format!(
                    "max-pending-handshakes ({}) connections have not completed their \
                     handshake yet",
                    b.pending
                ));
            };
            // The oldest pending connection of the address holding the most gives way; its
            // slot stops counting as pending now (its task closes it).
            if let Some((_, victim)) = c.pending_by.get_mut(&hog).and_then(|q| q.pop_front()) {
                victim.fire();
                c.pending -= 1;
            }
            if c.pending_by.get(&hog).is_some_and(|q| q.is_empty()) {
                c.pending_by.remove(&hog);
            }
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
        c.next_id += 1;
        let id = c.next_id;
        let evict = Arc::new(Evict::default());
        c.pending_by
            .entry(addr)
            .or_default()
            .push_back((id, evict.clone()));
        Ok(Slot {
            limits: self.clone(),
            addr,
            pending: true,
            id,
            evict,
        })
    }

    /// Whether a refusal should be logged now ([`Throttle::admit`]).
    pub fn should_log(&self) -> Option<u64> {
        self.log.admit()
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
            self.limits.done_pending(self.addr, self.id);
        }
    }
}

impl Slot {
    /// Returns once this connection is evicted from the pending handshakes.
    pub async fn evicted(&self) {
        self.evict.evicted().await
    }
}

impl Limits {
    /// `id` of `addr` no longer counts as pending (unless it was evicted: then it was taken
    /// off already).
    fn done_pending(&self, addr: Option<IpAddr>, id: u64) {
        let mut c = self.counts();
        let Some(q) = c.pending_by.get_mut(&addr) else {
            return;
        };
        let Some(i) = q.iter().position(|(x, _)| *x == id) else {
            return;
        };
        q.remove(i);
        if q.is_empty() {
            c.pending_by.remove(&addr);
        }
        c.pending -= 1;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.pending {
            self.limits.done_pending(self.addr, self.id);
        }
        let mut c = self.limits.counts();
        c.total -= 1;
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
    fn one_address_cannot_hold_every_pending_slot() {
        let hog: IpAddr = "10.0.0.9".parse().expect("ip");
        let good: IpAddr = "10.0.0.1".parse().expect("ip");
        let l = limits(100, 100, 4);
        let held: Vec<Slot> = (0..4).map(|_| l.admit(Some(hog)).expect("hog")).collect();
        // Alone, a burst from one address is admitted up to the bound, then refused.
        assert!(l.admit(Some(hog)).is_err(), "its own fifth is refused");
        // Another address gets in: the hog's oldest pending connection is evicted.
        let mut g = l.admit(Some(good)).expect("another address gets in");
        let evicted = |s: &Slot| s.evict.flag.load(std::sync::atomic::Ordering::Acquire);
        assert!(evicted(&held[0]) && !evicted(&held[1]));
        assert_eq!(l.dump().1, 4);
        // Shares even out: 3 and 1, then 2 and 2; at 2 and 2 nobody is evicted.
        let _g2 = l.admit(Some(good)).expect("second");
        assert!(evicted(&held[1]));
        assert!(l.admit(Some(good)).is_err(), "equal shares: refused");
        g.handshake_done();
        drop(held);
        assert_eq!(l.dump(), (2, 1));
        assert!(!l.counts().pending_by.contains_key(&Some(hog)));
    }

    #[test]
    fn refusals_are_logged_at_most_once_a_second() {
        let l = limits(1, 1, 1);
        assert_eq!(l.should_log(), Some(0));
        assert_eq!(l.should_log(), None);
        assert_eq!(l.should_log(), None);
        l.log.age(LOG_EVERY);
        assert_eq!(l.should_log(), Some(2));
    }
}
