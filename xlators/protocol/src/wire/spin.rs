//! Brief polling instead of sleeping (server `request-spin`), with an exponential backoff for
//! what keeps missing the window.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Most polls skipped after repeated misses.
const MAX_SKIP: u8 = 63;

/// Whether polling pays: a miss (nothing within the budget) doubles how many of the next
/// chances skip polling, up to 63; a hit resets it. Races between threads only blur the
/// heuristic.
#[derive(Default)]
pub struct Backoff {
    backoff: AtomicU8,
    skip: AtomicU8,
}

impl Backoff {
    /// Whether to poll this time (counts a skipped chance down).
    fn should_poll(&self) -> bool {
        let n = self.skip.load(Ordering::Relaxed);
        if n == 0 {
            return true;
        }
        self.skip.store(n - 1, Ordering::Relaxed);
        false
    }

    fn hit(&self) {
        self.backoff.store(0, Ordering::Relaxed);
    }

    fn miss(&self) {
        let b = self.backoff.load(Ordering::Relaxed);
        let b = (b.saturating_mul(2) + 1).min(MAX_SKIP);
        self.backoff.store(b, Ordering::Relaxed);
        self.skip.store(b, Ordering::Relaxed);
    }

    /// Unless `budget` is zero or this chance is skipped, polls `ready` until it says true
    /// or `budget` has passed, yielding the CPU between polls (the thread being waited for
    /// may have been woken on this CPU), and records the hit or miss.
    pub fn poll_until(&self, budget: Duration, mut ready: impl FnMut() -> bool) {
        if budget.is_zero() || !self.should_poll() {
            return;
        }
        let deadline = Instant::now() + budget;
        loop {
            if ready() {
                return self.hit();
            }
            if Instant::now() >= deadline {
                return self.miss();
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_back_off_exponentially_and_a_hit_resets() {
        let b = Backoff::default();
        let budget = Duration::from_micros(1);
        let polled = |b: &Backoff, ready: bool| {
            let mut asked = false;
            b.poll_until(budget, || {
                asked = true;
                ready
            });
            asked
        };
        assert!(polled(&b, false), "first chance polls");
        assert!(!polled(&b, false), "one skipped after a miss");
        assert!(polled(&b, false));
        assert!(!polled(&b, false) && !polled(&b, false) && !polled(&b, false));
        assert!(polled(&b, true), "polls again after three skips");
        assert!(polled(&b, false), "a hit resets the backoff");
        b.poll_until(Duration::ZERO, || panic!("a zero budget never polls"));
    }
}
