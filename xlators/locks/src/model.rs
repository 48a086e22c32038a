//! The POSIX lock table ([`LockTable`]: F_SETLK, F_SETLKW, unlock, close, withdrawn waits)
//! checked against a per-byte model, driven by random operations of a few owners on two
//! files. What the model says, after every operation:
//! - each byte is held by exactly the (owner, kind) pairs the operations left there;
//! - F_SETLK fails (EAGAIN) exactly when a byte of its range is held by another owner in a
//!   conflicting kind; F_SETLKW is then EDEADLK exactly when an owner holding such a byte
//!   waits, directly or through other waiting owners and on either file, for the requester
//!   (the wait-for graph, built from the bytes), and otherwise waits;
//! - no request waits that could go (a change that frees its range, an unlock or a
//!   write-to-read downgrade, lets it in right away), served in arrival order, over and over
//!   until none can go (a grant may itself free a range: its owner's write lock there
//!   becomes the requested read lock).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use proptest::prelude::*;
use xlator_api::{Errno, FdId, Gfid, LkOwner};

use crate::owner::Owner;
use crate::range::{Held, Kind, Range};
use crate::table::{LockTable, Space};

/// Bytes the model tracks; every range the ops make ends before it.
const N: usize = 48;
const OWNERS: u64 = 4;
const FILES: usize = 2;

#[derive(Clone, Debug)]
enum Op {
    /// F_SETLK (`wait` false) or F_SETLKW of a read or write lock on `[start, start + len)`.
    Lock {
        owner: u64,
        file: usize,
        write: bool,
        wait: bool,
        start: u64,
        len: u64,
    },
    Unlock {
        owner: u64,
        file: usize,
        start: u64,
        len: u64,
    },
    /// close(2) of the file by the owner (flush): all its locks there go; a wait it has goes
    /// on.
    Close(u64, usize),
    /// The owner's wait is given up (its caller was interrupted, the client cancelled it).
    Withdraw(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..OWNERS, 0..FILES, any::<bool>(), any::<bool>(), 0..40u64, 1..8u64).prop_map(
            |(owner, file, write, wait, start, len)| Op::Lock { owner, file, write, wait, start, len }
        ),
        2 => (0..OWNERS, 0..FILES, 0..40u64, 1..8u64)
            .prop_map(|(owner, file, start, len)| Op::Unlock { owner, file, start, len }),
        1 => (0..OWNERS, 0..FILES).prop_map(|(o, f)| Op::Close(o, f)),
        1 => (0..OWNERS).prop_map(Op::Withdraw),
    ]
}

fn owner(n: u64) -> Owner {
    Owner {
        client: None,
        lk: LkOwner(n),
    }
}

fn req(n: u64, kind: Kind, start: u64, len: u64) -> Held {
    Held {
        kind,
        range: Range::from_start_len(start, len).expect("range"),
        owner: owner(n),
        fd: FdId(n),
        pid: 0,
    }
}

fn conflicts(a: Kind, b: Kind) -> bool {
    a == Kind::Write || b == Kind::Write
}

/// A waiting request: owner, file, kind, bytes `[s, e)`.
type Want = (u64, usize, Kind, usize, usize);

/// Per file and byte: who holds it, in which kind. Waiting requests in arrival order.
struct Model {
    bytes: Vec<Vec<HashMap<u64, Kind>>>,
    waiting: Vec<Want>,
}

impl Model {
    fn new() -> Model {
        Model {
            bytes: vec![vec![HashMap::new(); N]; FILES],
            waiting: Vec::new(),
        }
    }

    /// The owners a request of `o` for `kind` on `[s, e)` of `file` would wait for.
    fn blockers(&self, (o, file, kind, s, e): Want) -> HashSet<u64> {
        self.bytes[file][s..e]
            .iter()
            .flat_map(|b| b.iter())
            .filter(|(h, k)| **h != o && conflicts(kind, **k))
            .map(|(h, _)| *h)
            .collect()
    }

    fn set(&mut self, (o, file, kind, s, e): Want) {
        for b in &mut self.bytes[file][s..e] {
            b.insert(o, kind);
        }
    }

    fn unset(&mut self, o: u64, file: usize, s: usize, e: usize) {
        for b in &mut self.bytes[file][s..e] {
            b.remove(&o);
        }
    }

    /// Whether `o` waiting for `blockers` closes a cycle of the wait-for graph.
    fn deadlock(&self, o: u64, blockers: HashSet<u64>) -> bool {
        let mut seen = HashSet::new();
        let mut todo: Vec<u64> = blockers.into_iter().collect();
        while let Some(x) = todo.pop() {
            if x == o {
                return true;
            }
            if !seen.insert(x) {
                continue;
            }
            for w in self.waiting.iter().filter(|w| w.0 == x) {
                todo.extend(self.blockers(*w));
            }
        }
        false
    }

    /// Grants, pass after pass in arrival order, every waiter that can go; returns them.
    fn grant(&mut self) -> HashSet<u64> {
        let mut granted = HashSet::new();
        loop {
            let mut any = false;
            let mut i = 0;
            while i < self.waiting.len() {
                let w = self.waiting[i];
                if self.blockers(w).is_empty() {
                    self.set(w);
                    self.waiting.remove(i);
                    granted.insert(w.0);
                    any = true;
                } else {
                    i += 1;
                }
            }
            if !any {
                return granted;
            }
        }
    }
}

type Pending<'a> = Pin<Box<dyn Future<Output = Result<(), Errno>> + 'a>>;

/// Polls every waiting request once; returns the owners whose wait ended, with how.
fn poll_all(waits: &mut HashMap<u64, Pending<'_>>) -> HashMap<u64, Result<(), Errno>> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut done = HashMap::new();
    for (o, f) in waits.iter_mut() {
        if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
            done.insert(*o, r);
        }
    }
    for o in done.keys() {
        waits.remove(o);
    }
    done
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let table = LockTable::default();
    let gs: Vec<Gfid> = (0..FILES).map(|_| Gfid::random()).collect();
    let mut m = Model::new();
    let mut waits: HashMap<u64, Pending<'_>> = HashMap::new();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Lock {
                owner: o,
                file,
                write,
                wait,
                start,
                len,
            } => {
                if waits.contains_key(&o) {
                    // One process waits for one lock at a time.
                    continue;
                }
                let kind = if write { Kind::Write } else { Kind::Read };
                let want = (o, file, kind, start as usize, (start + len) as usize);
                let blockers = m.blockers(want);
                let (g, r) = (gs[file], req(o, kind, start, len));
                if !wait {
                    let got = table.try_lock(g, &Space::Posix, r);
                    let outcome = if blockers.is_empty() {
                        Ok(())
                    } else {
                        Err(Errno::EAGAIN)
                    };
                    prop_assert_eq!(got, outcome, "step {}: F_SETLK", step);
                    if blockers.is_empty() {
                        m.set(want);
                    }
                } else {
                    let mut f: Pending<'_> = Box::pin(table.lock_wait(g, &Space::Posix, r));
                    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
                    let got = f.as_mut().poll(&mut cx);
                    if blockers.is_empty() {
                        prop_assert_eq!(got, Poll::Ready(Ok(())), "step {}: free", step);
                        m.set(want);
                    } else if m.deadlock(o, blockers) {
                        prop_assert_eq!(
                            got,
                            Poll::Ready(Err(Errno::EDEADLK)),
                            "step {}: cycle",
                            step
                        );
                    } else {
                        prop_assert_eq!(got, Poll::Pending, "step {}: waits", step);
                        m.waiting.push(want);
                        waits.insert(o, f);
                    }
                }
            }
            Op::Unlock {
                owner: o,
                file,
                start,
                len,
            } => {
                let r = Range::from_start_len(start, len).expect("range");
                table.unlock(gs[file], &Space::Posix, owner(o), r);
                m.unset(o, file, start as usize, (start + len) as usize);
            }
            Op::Close(o, file) => {
                table.release_owner(gs[file], owner(o));
                m.unset(o, file, 0, N);
            }
            Op::Withdraw(o) => {
                if waits.remove(&o).is_some() {
                    m.waiting.retain(|w| w.0 != o);
                }
            }
        }
        let want = m.grant();
        let got = poll_all(&mut waits);
        prop_assert!(
            got.values().all(Result::is_ok),
            "step {}: a wait failed: {:?}",
            step,
            got
        );
        let got: HashSet<u64> = got.keys().copied().collect();
        prop_assert_eq!(got, want, "step {}: granted waiters", step);
        // The same bytes held, by the same owners, in the same kinds.
        for (file, bytes) in m.bytes.iter().enumerate() {
            let held: Vec<Held> = table.held(gs[file], &Space::Posix);
            for (b, want) in bytes.iter().enumerate() {
                let got: HashMap<u64, Kind> = held
                    .iter()
                    .filter(|h| h.range.start <= b as u64 && b as u64 <= h.range.end)
                    .map(|h| (h.owner.lk.0, h.kind))
                    .collect();
                prop_assert_eq!(&got, want, "step {}: file {} byte {}", step, file, b);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn the_lock_table_matches_a_per_byte_model(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}

/// A reader waits behind a writer; the writer's own F_SETLK of a read lock (a downgrade)
/// lets the reader in at once, as on a local file system.
#[test]
fn a_downgrade_lets_waiting_readers_in() {
    use Op::*;
    run(vec![
        Lock {
            owner: 0,
            file: 0,
            write: true,
            wait: false,
            start: 0,
            len: 4,
        },
        Lock {
            owner: 1,
            file: 0,
            write: false,
            wait: true,
            start: 0,
            len: 4,
        },
        Lock {
            owner: 0,
            file: 0,
            write: false,
            wait: false,
            start: 0,
            len: 4,
        },
    ])
    .expect("model");
}

/// A grant can free a range for a request that was passed over: owner 0's write lock
/// waited for owner 2 while owner 1's read waited for owner 0's write lock; when 2 goes,
/// 0 is granted a read lock over its write lock, so 1 may go too.
#[test]
fn a_grant_that_downgrades_lets_an_earlier_waiter_in() {
    use Op::*;
    run(vec![
        Lock {
            owner: 0,
            file: 0,
            write: true,
            wait: false,
            start: 0,
            len: 4,
        },
        Lock {
            owner: 2,
            file: 0,
            write: true,
            wait: false,
            start: 4,
            len: 4,
        },
        Lock {
            owner: 1,
            file: 0,
            write: false,
            wait: true,
            start: 0,
            len: 4,
        },
        Lock {
            owner: 0,
            file: 0,
            write: false,
            wait: true,
            start: 0,
            len: 8,
        },
        Close(2, 0),
    ])
    .expect("model");
}

/// Owner 0 holds file 0 and owner 1 file 1; 1 waits for file 0; 0 asking for file 1 would
/// close the cycle across the two files: EDEADLK (before, only cycles on one file were seen
/// and both waited forever).
#[test]
fn a_cycle_across_two_files_is_a_deadlock() {
    use Op::*;
    let lock = |owner, file, wait| Lock {
        owner,
        file,
        write: true,
        wait,
        start: 0,
        len: 4,
    };
    run(vec![
        lock(0, 0, false),
        lock(1, 1, false),
        lock(1, 0, true),
        lock(0, 1, true),
    ])
    .expect("model");
    let table = LockTable::default();
    let (f0, f1) = (Gfid::random(), Gfid::random());
    let w = |o| req(o, Kind::Write, 0, 4);
    table
        .try_lock(f0, &Space::Posix, w(0))
        .expect("0 holds file 0");
    table
        .try_lock(f1, &Space::Posix, w(1))
        .expect("1 holds file 1");
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut one = Box::pin(table.lock_wait(f0, &Space::Posix, w(1)));
    assert_eq!(
        one.as_mut().poll(&mut cx),
        Poll::Pending,
        "1 waits for file 0"
    );
    let mut zero = Box::pin(table.lock_wait(f1, &Space::Posix, w(0)));
    assert_eq!(
        zero.as_mut().poll(&mut cx),
        Poll::Ready(Err(Errno::EDEADLK)),
        "0 waiting for file 1 closes the cycle"
    );
}
