//! The replicated log (Raft, through [`Replica`]) against its model, in one thread with no
//! clock: peers that tick, a network that loses, reorders and partitions, peers that crash
//! (losing everything but what they persisted) and restart, proposals on any peer, a peer
//! added and one removed while this goes on. The daemon's rule is kept: a peer's durable
//! state is saved before any message it produced goes out.
//!
//! Checked after every step: the applied logs of all peers (live or on disk) are prefixes of
//! one log and hold no entry twice. At the end, with the network whole and every peer up,
//! every peer holds the same log, and every entry any peer ever applied is in it.
//!
//! Every peer compacts its log every few entries (an entry's value is a list of ids, and a
//! compaction squashes the applied entries into one whose list is all of theirs), so peers
//! that were away are caught up from snapshots as well as from entries; the logs compared
//! are the ids in order.
//!
//! A seed fixes the test's own choices; Raft randomizes its election timeouts, so how much
//! each schedule decides varies from run to run (the progress bar is on the total).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use raft::prelude::Message;
use xlfs_mgmt::replog::{Durable, Entry, PeerId, Proposal, Replica, quiet_logger};

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// An entry's value: the ids it stands for (one, or many once squashed).
type Ids = Vec<u64>;

/// Applied entries kept before a compaction: small, so compactions happen all the time.
const COMPACT_AFTER: usize = 8;

fn squash(log: &[Entry<Ids>]) -> Entry<Ids> {
    Entry {
        id: 0,
        value: ids_of(log),
    }
}

/// The ids a log's entries stand for, in order.
fn ids_of(log: &[Entry<Ids>]) -> Ids {
    log.iter().flat_map(|e| e.value.iter().copied()).collect()
}

fn open(id: PeerId, d: Durable<Ids>, log: &slog::Logger) -> Replica<Ids> {
    Replica::open(id, d, log)
        .expect("open")
        .compacting(COMPACT_AFTER, squash)
}

fn entry(id: u64) -> Entry<Ids> {
    Entry {
        id,
        value: vec![id],
    }
}

struct Peer {
    live: Option<Replica<Ids>>,
    disk: Durable<Ids>,
}

struct World {
    peers: BTreeMap<PeerId, Peer>,
    net: VecDeque<Message>,
    /// Peers cut off from all others.
    cut: BTreeSet<PeerId>,
    rng: Rng,
    next_id: u64,
    /// Every entry some peer applied.
    applied: BTreeSet<u64>,
    log: slog::Logger,
}

impl World {
    fn new(seed: u64) -> World {
        // Peer 1 founds the cluster; the others join it as the daemon's probe makes them.
        let mut w = World {
            peers: BTreeMap::new(),
            net: VecDeque::new(),
            cut: BTreeSet::new(),
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            next_id: 100,
            applied: BTreeSet::new(),
            log: quiet_logger(),
        };
        w.add(1, Durable::found(9, 1, entry(1)));
        w
    }

    fn add(&mut self, id: PeerId, d: Durable<Ids>) {
        let r = open(id, d.clone(), &self.log);
        self.peers.insert(
            id,
            Peer {
                live: Some(r),
                disk: d,
            },
        );
        self.pump(id, |_| {});
    }

    /// Runs `f` on peer `id` if it is up, then persists and sends, as the daemon does.
    fn pump<T>(&mut self, id: PeerId, f: impl FnOnce(&mut Replica<Ids>) -> T) -> Option<T> {
        let p = self.peers.get_mut(&id)?;
        let r = p.live.as_mut()?;
        let t = f(r);
        let out = r.advance();
        if out.changed {
            p.disk = r.durable().clone();
        }
        for e in &out.applied {
            self.applied.insert(e.id);
        }
        self.net.extend(out.messages);
        Some(t)
    }

    fn leader(&self) -> Option<PeerId> {
        self.peers
            .iter()
            .find(|(_, p)| p.live.as_ref().is_some_and(|r| r.is_leader()))
            .map(|(id, _)| *id)
    }

    fn any_peer(&mut self) -> PeerId {
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        ids[self.rng.below(ids.len() as u64) as usize]
    }

    fn step(&mut self, loss: u64) {
        match self.rng.below(50) {
            0..=14 => {
                let ids: Vec<PeerId> = self.peers.keys().copied().collect();
                for id in ids {
                    self.pump(id, |r| r.tick());
                }
            }
            15..=34 => {
                let n = self.net.len().min(1 + self.rng.below(8) as usize);
                for _ in 0..n {
                    let Some(m) = self.net.pop_front() else { break };
                    if self.cut.contains(&m.from)
                        || self.cut.contains(&m.to)
                        || self.rng.chance(loss)
                        || self.peers.get(&m.to).is_none_or(|p| p.live.is_none())
                    {
                        self.report_snapshot(&m, false);
                        continue;
                    }
                    if self.rng.chance(10) {
                        // Late: behind what was sent after it.
                        self.net.push_back(m);
                        continue;
                    }
                    self.deliver(m);
                }
            }
            35..=41 => {
                let id = self.any_peer();
                self.next_id += 1;
                let e = entry(self.next_id);
                self.pump(id, |r| {
                    let _ = r.propose(Proposal::Change(e));
                });
            }
            42 => {
                // A crash, or a restart from what was persisted.
                let id = self.any_peer();
                let p = self.peers.get_mut(&id).expect("peer");
                if p.live.is_some() {
                    p.live = None;
                } else {
                    p.live = Some(open(id, p.disk.clone(), &self.log));
                    self.pump(id, |_| {});
                }
            }
            _ => {
                if self.rng.chance(10) {
                    if self.cut.is_empty() {
                        let id = self.any_peer();
                        self.cut.insert(id);
                    } else {
                        self.cut.clear();
                    }
                }
            }
        }
    }

    /// Hands `m` to its peer.
    fn deliver(&mut self, m: Message) {
        let snapshot = m.clone();
        let to = m.to;
        self.pump(to, |r| {
            let _ = r.step(m);
        });
        self.report_snapshot(&snapshot, true);
    }

    /// As the daemon's sender does: tells the sender of a snapshot whether it arrived.
    fn report_snapshot(&mut self, m: &Message, arrived: bool) {
        if m.get_msg_type() == raft::prelude::MessageType::MsgSnapshot {
            let (from, to) = (m.from, m.to);
            self.pump(from, |r| r.snapshot_sent(to, arrived));
        }
    }

    /// The applied logs are prefixes of one log, with no entry twice.
    fn check(&self) {
        let logs: Vec<(PeerId, Ids)> = self
            .peers
            .iter()
            .flat_map(|(id, p)| {
                let mut v = vec![(*id, ids_of(&p.disk.chosen))];
                if let Some(r) = &p.live {
                    v.push((*id, ids_of(r.chosen())));
                }
                v
            })
            .collect();
        for (a, la) in &logs {
            let distinct: BTreeSet<u64> = la.iter().copied().collect();
            assert_eq!(
                distinct.len(),
                la.len(),
                "peer {a} applied an entry twice: {la:?}"
            );
            for (b, lb) in &logs {
                let n = la.len().min(lb.len());
                assert_eq!(la[..n], lb[..n], "peers {a} and {b} disagree");
            }
        }
    }

    /// One tick of every peer, then every message delivered (none across a cut).
    fn round(&mut self) {
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for id in ids {
            self.pump(id, |r| r.tick());
        }
        while let Some(m) = self.net.pop_front() {
            if self.cut.contains(&m.from) || self.cut.contains(&m.to) {
                self.report_snapshot(&m, false);
            } else {
                self.deliver(m);
            }
        }
    }

    /// Heals everything and runs until every member holds the same log.
    fn settle(&mut self, members: &BTreeSet<PeerId>) {
        self.cut.clear();
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for id in &ids {
            let p = self.peers.get_mut(id).expect("peer");
            if p.live.is_none() {
                p.live = Some(open(*id, p.disk.clone(), &self.log));
            }
        }
        for _ in 0..20_000 {
            for id in &ids {
                self.pump(*id, |r| r.tick());
            }
            while let Some(m) = self.net.pop_front() {
                self.deliver(m);
            }
            // Every voter the leader knows, and every peer in `members`, holds its log.
            let Some(leader) = self.leader() else {
                continue;
            };
            let want = self.peers[&leader]
                .live
                .as_ref()
                .map_or(0, |r| ids_of(r.chosen()).len());
            let voters = &self.peers[&leader]
                .live
                .as_ref()
                .expect("up")
                .durable()
                .voters;
            let behind = voters
                .iter()
                .chain(members.iter().filter(|m| voters.contains(m)))
                .any(|id| {
                    self.peers.get(id).is_some_and(|p| {
                        p.live.as_ref().map_or(0, |r| ids_of(r.chosen()).len()) != want
                    })
                });
            if !behind {
                self.check();
                return;
            }
        }
        let state: Vec<String> = self
            .peers
            .iter()
            .map(|(id, p)| {
                let r = p.live.as_ref().expect("up");
                let d = r.durable();
                format!(
                    "peer {id}: term {} leader {:?} commit {} applied {} log {} chosen {} voters {:?}",
                    r.term(),
                    r.leader(),
                    d.commit,
                    d.applied,
                    d.log.len(),
                    d.chosen.len(),
                    d.voters
                )
            })
            .collect();
        panic!("the peers never settled:\n{}", state.join("\n"));
    }

    /// Proposes a membership change on whatever leader there is until it is applied.
    fn change_members(
        &mut self,
        p: impl Fn(Entry<Ids>) -> Proposal<Ids>,
        members: &BTreeSet<PeerId>,
    ) {
        self.next_id += 1;
        let id = self.next_id;
        for _ in 0..50 {
            self.settle(members);
            let leader = self.leader().expect("a leader once healed");
            self.pump(leader, |r| {
                let _ = r.propose(p(entry(id)));
            });
            self.settle(members);
            if self.applied.contains(&id) {
                return;
            }
        }
        panic!("membership change {id} never applied");
    }
}

fn grow(w: &mut World, members: &mut BTreeSet<PeerId>, id: PeerId) {
    // As a probe does: the new peer starts empty, then the leader makes it a voter.
    w.add(id, Durable::joining(9));
    members.insert(id);
    w.change_members(|e| Proposal::AddPeer(id, e), members);
}

/// Peer 1's cluster, with 2 and 3 joined.
fn three_peers(seed: u64) -> (World, BTreeSet<PeerId>) {
    let mut w = World::new(seed);
    let mut members: BTreeSet<PeerId> = [1].into();
    grow(&mut w, &mut members, 2);
    grow(&mut w, &mut members, 3);
    (w, members)
}

/// Runs one schedule; how many entries were decided.
fn run(seed: u64) -> usize {
    let (mut w, mut members) = three_peers(seed);
    for i in 0..3000 {
        w.step(20);
        w.check();
        if i == 1000 {
            grow(&mut w, &mut members, 4);
        }
        if i == 2000 {
            w.change_members(|e| Proposal::RemovePeer(2, e), &members);
            members.remove(&2);
            w.peers.remove(&2);
        }
    }
    w.settle(&members);
    let reference: Ids = ids_of(w.peers[&1].live.as_ref().expect("up").chosen());
    for id in &members {
        let r = w.peers[id].live.as_ref().expect("up");
        assert_eq!(
            ids_of(r.chosen()),
            reference,
            "seed {seed}: peer {id} did not catch up"
        );
        assert_eq!(
            r.durable().voters.len(),
            members.len(),
            "seed {seed}: peer {id}'s voters"
        );
    }
    let in_log: BTreeSet<u64> = reference.iter().copied().collect();
    let lost: Vec<&u64> = w.applied.difference(&in_log).collect();
    assert!(
        lost.is_empty(),
        "seed {seed}: applied somewhere, then lost: {lost:?}"
    );
    reference.len()
}

#[test]
fn peers_agree_through_loss_crashes_partitions_and_membership_changes() {
    let decided: Vec<usize> = (1..=12).map(run).collect();
    // Progress, not only safety: a log that decides nothing agrees trivially.
    assert!(
        decided.iter().all(|n| *n > 3) && decided.iter().sum::<usize>() > 12 * 20,
        "too little was decided to mean anything: {decided:?}"
    );
}

#[test]
fn a_peer_restarted_from_disk_keeps_its_vote_and_log() {
    let (w, _) = three_peers(77);
    let before = w.peers[&2].disk.clone();
    let reopened = open(2, before.clone(), &w.log);
    assert_eq!(reopened.durable(), &before);
    assert_eq!(
        ids_of(reopened.chosen()).len(),
        3,
        "found + two peers added"
    );
    assert_eq!(before.voters.len(), 3);
}

/// Whether peer `id` grants a vote to `from` at `term`, answering as the daemon would.
fn grants(w: &mut World, id: PeerId, from: PeerId, term: u64) -> bool {
    use raft::prelude::MessageType;
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgRequestVote);
    m.from = from;
    m.to = id;
    m.term = term;
    m.index = 1_000;
    m.log_term = term - 1;
    w.net.clear();
    w.pump(id, |r| r.step(m).expect("step"));
    let answers: Vec<Message> = w.net.drain(..).collect();
    let a = answers
        .iter()
        .find(|m| m.get_msg_type() == MessageType::MsgRequestVoteResponse)
        .expect("an answer to the vote request");
    !a.reject
}

#[test]
fn a_vote_survives_a_crash() {
    let (mut w, _) = three_peers(5);
    // Peer 2 stops hearing from the leader (its lease runs out), then votes for 3.
    for _ in 0..50 {
        w.pump(2, |r| r.tick());
    }
    w.net.clear();
    let term = w.peers[&2].live.as_ref().expect("up").term() + 10;
    assert!(grants(&mut w, 2, 3, term), "peer 2 votes for 3");
    // It crashes and comes back from what it persisted: no second vote in that term.
    let p = w.peers.get_mut(&2).expect("peer");
    p.live = Some(open(2, p.disk.clone(), &w.log));
    assert!(
        !grants(&mut w, 2, 1, term),
        "peer 2 voted twice in term {term} across a crash"
    );
}

#[test]
fn a_peer_away_for_long_is_caught_up_from_a_snapshot() {
    let (mut w, members) = three_peers(11);
    w.cut.insert(3);
    // Far more entries than the leader keeps: the ones peer 3 lacks are compacted away.
    for _ in 0..5 * COMPACT_AFTER {
        w.next_id += 1;
        let e = entry(w.next_id);
        let leader = w.leader().expect("a leader");
        w.pump(leader, |r| r.propose(Proposal::Change(e)).expect("propose"));
        for _ in 0..3 {
            w.round();
        }
    }
    let leader = w.leader().expect("a leader");
    let snap = w.peers[&leader]
        .live
        .as_ref()
        .expect("up")
        .durable()
        .snapshot
        .clone()
        .expect("the leader compacted");
    assert!(snap.index > 3 + COMPACT_AFTER as u64, "{snap:?}");
    w.settle(&members);
    let reference = ids_of(w.peers[&leader].live.as_ref().expect("up").chosen());
    assert!(reference.len() >= 3 + 5 * COMPACT_AFTER, "{reference:?}");
    let three = w.peers[&3].live.as_ref().expect("up");
    assert_eq!(ids_of(three.chosen()), reference);
    assert!(
        three.durable().snapshot.is_some(),
        "peer 3 caught up without a snapshot"
    );
    // Compacted on disk too: the log kept is short, and a restart reads it back.
    let d = w.peers[&3].disk.clone();
    assert!(d.log.len() <= 2 * COMPACT_AFTER, "log of {}", d.log.len());
    let reopened = open(3, d.clone(), &w.log);
    assert_eq!(ids_of(reopened.chosen()), reference);
    assert_eq!(reopened.durable(), &d);
}
