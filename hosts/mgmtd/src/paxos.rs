//! The replicated log: one single-decree Paxos instance per slot (Lamport's "Paxos Made
//! Simple", with the membership of slot `s` read from the log before `s`, so one slot is
//! decided at a time).
//!
//! The acceptor half ([`Acceptor`]) is a plain state machine over [`Durable`], which the
//! caller persists before it answers (see [`crate::store`]). The proposer half ([`propose`])
//! talks to the acceptors through a [`Transport`], which is the network in the daemon and a
//! lossy in-memory switch in the tests.
//!
//! Why it is safe: a value is chosen for slot `s` once a majority of slot `s`'s members have
//! accepted it at one ballot; a higher ballot first asks a majority (which overlaps it) for
//! what they accepted and must propose the highest-ballot one of those. A chosen value is
//! never changed, so any peer's chosen log is a prefix of any other's, and a peer that was
//! away catches up by copying the chosen entries of any peer ([`Acceptor::learn`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A peer of the cluster.
pub type PeerId = u64;

/// A proposal number: rounds first, then the proposer's id, so two proposers never use the
/// same one.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default)]
pub struct Ballot {
    pub round: u64,
    pub peer: PeerId,
}

/// What a slot of the log holds: the change, and a unique id so a proposer can tell its own
/// value from another that won the slot.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Entry<V> {
    pub id: u64,
    pub value: V,
}

/// One undecided slot as this acceptor sees it.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct SlotState<V> {
    pub promised: Ballot,
    pub accepted: Option<(Ballot, Entry<V>)>,
}

impl<V> Default for SlotState<V> {
    fn default() -> Self {
        SlotState {
            promised: Ballot::default(),
            accepted: None,
        }
    }
}

/// Everything an acceptor must not forget across a crash.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Durable<V> {
    /// `chosen[s]` is the value of slot `s`.
    pub chosen: Vec<Entry<V>>,
    /// Promises and accepted values of slots not yet known to be chosen.
    pub slots: BTreeMap<u64, SlotState<V>>,
    /// The highest round this peer has seen (its next ballot is above it).
    pub max_round: u64,
}

impl<V> Default for Durable<V> {
    fn default() -> Self {
        Durable {
            chosen: Vec::new(),
            slots: BTreeMap::new(),
            max_round: 0,
        }
    }
}

/// A proposer's requests.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub enum Request<V> {
    Prepare {
        slot: u64,
        ballot: Ballot,
    },
    Accept {
        slot: u64,
        ballot: Ballot,
        entry: Entry<V>,
    },
}

/// An acceptor's answers.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub enum Reply<V> {
    /// Phase 1b: the promise, with the value accepted at the highest ballot, if any.
    Promise(Option<(Ballot, Entry<V>)>),
    /// Phase 2b.
    Accepted,
    /// A higher ballot was promised.
    Nack(Ballot),
    /// The slot is decided; here is its value.
    Chosen(Entry<V>),
}

/// The acceptor: the answers to [`Request`]s, and what it learns.
pub struct Acceptor<'a, V> {
    pub d: &'a mut Durable<V>,
}

impl<V: Clone + PartialEq> Acceptor<'_, V> {
    /// Answers a request. The caller persists [`Durable`] before sending the answer if
    /// `changed` (the second value) is true.
    pub fn handle(&mut self, req: Request<V>) -> (Reply<V>, bool) {
        match req {
            Request::Prepare { slot, ballot } => {
                if let Some(e) = self.d.chosen.get(slot as usize) {
                    return (Reply::Chosen(e.clone()), false);
                }
                self.d.max_round = self.d.max_round.max(ballot.round);
                let s = self.d.slots.entry(slot).or_default();
                if ballot > s.promised {
                    s.promised = ballot;
                    (Reply::Promise(s.accepted.clone()), true)
                } else {
                    (Reply::Nack(s.promised), false)
                }
            }
            Request::Accept {
                slot,
                ballot,
                entry,
            } => {
                if let Some(e) = self.d.chosen.get(slot as usize) {
                    return (Reply::Chosen(e.clone()), false);
                }
                self.d.max_round = self.d.max_round.max(ballot.round);
                let s = self.d.slots.entry(slot).or_default();
                if ballot >= s.promised {
                    s.promised = ballot;
                    s.accepted = Some((ballot, entry));
                    (Reply::Accepted, true)
                } else {
                    (Reply::Nack(s.promised), false)
                }
            }
        }
    }

    /// Records that slot `slot` is decided with `entry`. Only the next slot is taken (a gap
    /// is filled by fetching the chosen entries in order); returns whether it was.
    pub fn learn(&mut self, slot: u64, entry: Entry<V>) -> Result<bool, Conflict> {
        let next = self.d.chosen.len() as u64;
        if slot < next {
            return if self.d.chosen[slot as usize] == entry {
                Ok(false)
            } else {
                Err(Conflict { slot })
            };
        }
        if slot > next {
            return Ok(false);
        }
        self.d.chosen.push(entry);
        self.d.slots = self.d.slots.split_off(&(slot + 1));
        Ok(true)
    }
}

/// Two different values learnt for one slot: the logs of two peers disagree, which Paxos
/// rules out unless the peers belong to different clusters (or a state file was edited).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("slot {slot} holds another value here than the one a peer reports as chosen")]
pub struct Conflict {
    pub slot: u64,
}

/// How the proposer reaches the acceptors of a slot (itself included).
pub trait Transport<V> {
    /// Sends `req` to every peer in `to` at once and returns the answers that came back in
    /// time (a lost request or answer is simply missing).
    fn call_all(&self, to: &[PeerId], req: &Request<V>) -> Vec<(PeerId, Reply<V>)>;
}

/// What the proposer needs of its own peer: the chosen log so far, the members of a slot
/// (from the log before it), a fresh ballot, and where to record a chosen value.
pub trait Local<V> {
    fn me(&self) -> PeerId;
    /// The number of chosen slots known here (the next slot to decide).
    fn next_slot(&self) -> u64;
    /// The peers whose majority decides `slot` (`slot` ≤ [`Local::next_slot`]).
    fn members(&self, slot: u64) -> Vec<PeerId>;
    /// A round above every round seen here, remembered so it is never reused.
    fn next_round(&self) -> u64;
    /// An acceptor refused a ballot because it promised `round`: the next round is above.
    fn saw_round(&self, round: u64);
    /// Records (and applies) `entry` as chosen for `slot`.
    fn chosen(&self, slot: u64, entry: Entry<V>);
    /// The id of the entry chosen for `slot`, if known here.
    fn chosen_id(&self, slot: u64) -> Option<u64>;
}

/// Why a proposal was not chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error(
        "no majority: {answered} of the {members} peers answered ({needed} needed); a change \
         needs a majority of the peers up and reachable"
    )]
    NoQuorum {
        answered: usize,
        members: usize,
        needed: usize,
    },
    #[error("this peer is not a member of the cluster any more")]
    NotMember,
}

/// How many times a slot is retried at a higher ballot after a competing proposer won the
/// round, before giving up.
const MAX_ROUNDS: usize = 8;

/// Proposes `entry` until it is chosen for some slot; returns that slot. Slots that turn
/// out to be decided already (with other values) are learnt on the way.
pub fn propose<V: Clone + PartialEq>(
    local: &impl Local<V>,
    net: &impl Transport<V>,
    entry: Entry<V>,
) -> Result<u64, ProposeError> {
    let mut rounds = 0;
    let first = local.next_slot();
    loop {
        let slot = local.next_slot();
        // Another proposer may have found this entry accepted and finished it in a slot
        // learnt meanwhile: it is chosen once, never again.
        if let Some(s) = (first..slot).find(|s| local.chosen_id(*s) == Some(entry.id)) {
            return Ok(s);
        }
        let members = local.members(slot);
        if !members.contains(&local.me()) {
            return Err(ProposeError::NotMember);
        }
        let needed = members.len() / 2 + 1;
        let ballot = Ballot {
            round: local.next_round(),
            peer: local.me(),
        };
        // Phase 1.
        let answers = net.call_all(&members, &Request::Prepare { slot, ballot });
        if let Some(e) = decided(&answers) {
            // Decided already, perhaps with this very entry (another proposer found it
            // accepted and finished it): then it is chosen, and must not be proposed again.
            let mine = e.id == entry.id;
            local.chosen(slot, e);
            if mine {
                return Ok(slot);
            }
            continue;
        }
        note_nacks(local, &answers);
        let promises: Vec<_> = answers
            .iter()
            .filter_map(|(_, r)| match r {
                Reply::Promise(a) => Some(a.clone()),
                _ => None,
            })
            .collect();
        if promises.len() < needed {
            if answers.len() >= needed && rounds < MAX_ROUNDS {
                rounds += 1;
                backoff(rounds);
                continue;
            }
            return Err(ProposeError::NoQuorum {
                answered: answers.len(),
                members: members.len(),
                needed,
            });
        }
        let value = promises
            .into_iter()
            .flatten()
            .max_by_key(|(b, _)| *b)
            .map(|(_, e)| e)
            .unwrap_or_else(|| entry.clone());
        // Phase 2.
        let answers = net.call_all(
            &members,
            &Request::Accept {
                slot,
                ballot,
                entry: value.clone(),
            },
        );
        if let Some(e) = decided(&answers) {
            // Decided already, perhaps with this very entry (another proposer found it
            // accepted and finished it): then it is chosen, and must not be proposed again.
            let mine = e.id == entry.id;
            local.chosen(slot, e);
            if mine {
                return Ok(slot);
            }
            continue;
        }
        note_nacks(local, &answers);
        let accepted = answers
            .iter()
            .filter(|(_, r)| matches!(r, Reply::Accepted))
            .count();
        if accepted < needed {
            if answers.len() >= needed && rounds < MAX_ROUNDS {
                rounds += 1;
                backoff(rounds);
                continue;
            }
            return Err(ProposeError::NoQuorum {
                answered: answers.len(),
                members: members.len(),
                needed,
            });
        }
        let mine = value.id == entry.id;
        local.chosen(slot, value);
        if mine {
            return Ok(slot);
        }
        rounds = 0;
    }
}

fn note_nacks<V>(local: &impl Local<V>, answers: &[(PeerId, Reply<V>)]) {
    for (_, r) in answers {
        if let Reply::Nack(b) = r {
            local.saw_round(b.round);
        }
    }
}

/// A value some acceptor reports as already chosen for the slot.
fn decided<V: Clone>(answers: &[(PeerId, Reply<V>)]) -> Option<Entry<V>> {
    answers.iter().find_map(|(_, r)| match r {
        Reply::Chosen(e) => Some(e.clone()),
        _ => None,
    })
}

/// A short, growing, randomized pause before another round, so two proposers racing for a
/// slot stop colliding.
fn backoff(round: usize) {
    let mut b = [0u8; 2];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    let ms = u64::from(u16::from_le_bytes(b)) % (10 * round as u64 + 10);
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: u64) -> Entry<u64> {
        Entry { id, value: id }
    }

    #[test]
    fn a_lower_ballot_is_refused_after_a_promise() {
        let mut d = Durable::default();
        let mut a = Acceptor { d: &mut d };
        let hi = Ballot { round: 5, peer: 1 };
        let lo = Ballot { round: 4, peer: 9 };
        assert!(matches!(
            a.handle(Request::Prepare {
                slot: 0,
                ballot: hi
            }),
            (Reply::Promise(None), true)
        ));
        assert!(matches!(
            a.handle(Request::Accept {
                slot: 0,
                ballot: lo,
                entry: e(1)
            }),
            (Reply::Nack(b), false) if b == hi
        ));
        assert!(matches!(
            a.handle(Request::Accept {
                slot: 0,
                ballot: hi,
                entry: e(2)
            }),
            (Reply::Accepted, true)
        ));
        // A later prepare learns the accepted value.
        let higher = Ballot { round: 6, peer: 2 };
        match a.handle(Request::Prepare {
            slot: 0,
            ballot: higher,
        }) {
            (Reply::Promise(Some((b, v))), true) => assert_eq!((b, v), (hi, e(2))),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_chosen_slot_answers_with_its_value_and_learning_keeps_order() {
        let mut d = Durable::default();
        let mut a = Acceptor { d: &mut d };
        assert_eq!(a.learn(1, e(7)), Ok(false), "a gap is not taken");
        assert_eq!(a.learn(0, e(7)), Ok(true));
        assert_eq!(a.learn(0, e(7)), Ok(false));
        assert_eq!(a.learn(0, e(8)), Err(Conflict { slot: 0 }));
        assert!(matches!(
            a.handle(Request::Prepare {
                slot: 0,
                ballot: Ballot { round: 9, peer: 9 }
            }),
            (Reply::Chosen(v), false) if v == e(7)
        ));
    }
}
