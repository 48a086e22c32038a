//! Requests stuck on a brick that went down get EIO from the server itself.
//!
//! storage/posix's health check marks a brick whose disk hangs down, and from then on every
//! fop answers EIO at once. But a request already inside a system call the disk never
//! returns from cannot be answered by posix: the thread that polls it is the one stuck in the
//! kernel (the server runs a request's first poll, and so posix's system calls, on the thread
//! that received it). Its client would wait for its `frame-timeout` (30 minutes).
//!
//! So the server keeps, per connection, the requests it is running (not lock requests: they
//! wait by design) and when they started. While one has been running for [`STUCK_AFTER`], a
//! probe asks the brick graph for `statfs` of the root every [`PROBE_EVERY`]: a brick marked
//! down answers it EIO at once. Then every request of the connection running for longer than
//! `STUCK_AFTER` is answered EIO by the server, and its own reply, should it ever come, is
//! dropped. A probe that does not answer in time, or answers anything else, changes nothing: a
//! slow but healthy brick is never given EIO this way.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use xlator_api::{Ctx, Errno, Gfid, Subvol};

use crate::wire::{self, FrameSender, WriteHalf};

/// How long a request runs before the server asks whether the brick is down.
pub const STUCK_AFTER: Duration = Duration::from_secs(5);
/// How often it asks while such a request runs (also how long a probe may take).
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// The requests of one connection being run, by call id, with when they started.
#[derive(Default)]
pub struct Running(Mutex<HashMap<u64, Instant>>);

impl Running {
    fn map(&self) -> MutexGuard<'_, HashMap<u64, Instant>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Call `id` starts.
    pub fn start(&self, id: u64) {
        self.map().insert(id, Instant::now());
    }

    /// Call `id` has its result: true if the caller is to send it (the server has not
    /// answered it already).
    pub fn finish(&self, id: u64) -> bool {
        self.map().remove(&id).is_some()
    }

    fn any_older_than(&self, age: Duration) -> bool {
        let now = Instant::now();
        self.map().values().any(|t| now.duration_since(*t) >= age)
    }

    /// Takes the calls running for at least `age`: the server answers them.
    fn take_older_than(&self, age: Duration) -> Vec<u64> {
        let now = Instant::now();
        let mut m = self.map();
        let old: Vec<u64> = m
            .iter()
            .filter(|(_, t)| now.duration_since(**t) >= age)
            .map(|(id, _)| *id)
            .collect();
        for id in &old {
            m.remove(id);
        }
        old
    }
}

/// Runs for the life of a connection (never returns; the connection aborts it): answers EIO
/// to its requests stuck on a brick that is down (see the module documentation). `name`: the
/// server's, for the log.
pub async fn answer_stuck(
    name: &str,
    child: &Subvol,
    running: &Running,
    tx: &FrameSender<WriteHalf>,
    peer_max: usize,
) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        if !running.any_older_than(STUCK_AFTER) {
            continue;
        }
        let probe = child.statfs(&Ctx::root(), Gfid::ROOT);
        if !matches!(
            tokio::time::timeout(PROBE_EVERY, probe).await,
            Ok(Err(Errno::EIO))
        ) {
            continue;
        }
        let stuck = running.take_older_than(STUCK_AFTER);
        if stuck.is_empty() {
            continue;
        }
        tracing::error!(
            "{name}: the brick answers EIO (down) while {} requests of a client have been \
             running for over {STUCK_AFTER:?}: answering them EIO",
            stuck.len()
        );
        for id in stuck {
            if let Ok(f) = wire::encode_reply(id, Err(Errno::EIO), peer_max)
                && tx.send(f).await.is_err()
            {
                return std::future::pending().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_answered_by_the_server_is_not_answered_again() {
        let r = Running::default();
        r.start(1);
        r.start(2);
        assert!(r.finish(2), "finished normally");
        assert!(!r.any_older_than(Duration::from_secs(3600)));
        assert_eq!(r.take_older_than(Duration::ZERO), vec![1]);
        assert!(!r.finish(1), "already answered by the server");
    }
}
