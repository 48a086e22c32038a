//! The replicated log against its model: several proposers on several peers at once, over a
//! switch that loses requests and answers at random, with a peer added and one removed while
//! they run. After every run the peers' chosen logs must be prefixes of one log, every
//! proposal reported chosen must be in it at the slot reported, and no proposal is in it
//! twice. Each seed is one reproducible schedule of losses (thread timing still varies).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use xlfs_mgmt::paxos::{
    Acceptor, Durable, Entry, Local, PeerId, ProposeError, Reply, Request, Transport, propose,
};

#[derive(Clone, PartialEq, Eq, Debug)]
enum V {
    Val,
    Add(PeerId),
    Remove(PeerId),
}

/// The members of `slot`: the founders, changed by the log before it.
fn members(log: &[Entry<V>], slot: u64, founders: &[PeerId]) -> Vec<PeerId> {
    let mut m: BTreeSet<PeerId> = founders.iter().copied().collect();
    for e in log.iter().take(slot as usize) {
        match e.value {
            V::Add(p) => {
                m.insert(p);
            }
            V::Remove(p) => {
                m.remove(&p);
            }
            V::Val => {}
        }
    }
    m.into_iter().collect()
}

struct Rng(Mutex<u64>);
impl Rng {
    fn below(&self, n: u64) -> u64 {
        let mut s = self.0.lock().expect("rng");
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s % n
    }
}

struct World {
    nodes: BTreeMap<PeerId, Mutex<Durable<V>>>,
    founders: Vec<PeerId>,
    rng: Rng,
    /// Percent of requests, and of answers, lost.
    loss: u64,
}

struct Peer<'a> {
    w: &'a World,
    me: PeerId,
}

impl Transport<V> for Peer<'_> {
    fn call_all(&self, to: &[PeerId], req: &Request<V>) -> Vec<(PeerId, Reply<V>)> {
        let mut out = Vec::new();
        for p in to {
            if self.w.rng.below(100) < self.w.loss {
                continue;
            }
            let mut d = self.w.nodes[p].lock().expect("node");
            let (r, _) = Acceptor { d: &mut d }.handle(req.clone());
            drop(d);
            if self.w.rng.below(100) < self.w.loss {
                continue;
            }
            out.push((*p, r));
        }
        out
    }
}

impl Local<V> for Peer<'_> {
    fn me(&self) -> PeerId {
        self.me
    }
    fn next_slot(&self) -> u64 {
        self.w.nodes[&self.me].lock().expect("node").chosen.len() as u64
    }
    fn members(&self, slot: u64) -> Vec<PeerId> {
        let d = self.w.nodes[&self.me].lock().expect("node");
        members(&d.chosen, slot, &self.w.founders)
    }
    fn next_round(&self) -> u64 {
        let mut d = self.w.nodes[&self.me].lock().expect("node");
        d.max_round += 1;
        d.max_round
    }
    fn saw_round(&self, round: u64) {
        let mut d = self.w.nodes[&self.me].lock().expect("node");
        d.max_round = d.max_round.max(round);
    }
    fn chosen_id(&self, slot: u64) -> Option<u64> {
        let d = self.w.nodes[&self.me].lock().expect("node");
        d.chosen.get(slot as usize).map(|e| e.id)
    }
    fn chosen(&self, slot: u64, entry: Entry<V>) {
        let mut d = self.w.nodes[&self.me].lock().expect("node");
        Acceptor { d: &mut d }
            .learn(slot, entry.clone())
            .expect("two values chosen for one slot");
        drop(d);
        // Tell the others (lossy); the ones that miss it learn it from the final catch-up.
        for (p, n) in &self.w.nodes {
            if *p != self.me && self.w.rng.below(100) >= self.w.loss {
                let mut d = n.lock().expect("node");
                Acceptor { d: &mut d }
                    .learn(slot, entry.clone())
                    .expect("two values chosen for one slot");
            }
        }
    }
}

fn run(seed: u64, loss: u64) {
    let founders = vec![1, 2, 3];
    let w = World {
        nodes: (1..=4)
            .map(|p| (p, Mutex::new(Durable::default())))
            .collect(),
        founders: founders.clone(),
        rng: Rng(Mutex::new(seed | 1)),
        loss,
    };
    let ids = AtomicU64::new(1);
    let reported: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
    let w = Arc::new(w);
    std::thread::scope(|s| {
        for me in [1u64, 2, 3] {
            let (w, ids, reported) = (&w, &ids, &reported);
            s.spawn(move || {
                let peer = Peer { w, me };
                for i in 0..12 {
                    let value = match (me, i) {
                        (1, 3) => V::Add(4),
                        (2, 9) => V::Remove(3),
                        _ => V::Val,
                    };
                    let id = ids.fetch_add(1, Ordering::Relaxed);
                    match propose(&peer, &peer, Entry { id, value }) {
                        Ok(slot) => reported.lock().expect("r").push((id, slot)),
                        Err(ProposeError::NoQuorum { .. } | ProposeError::NotMember) => {}
                    }
                }
            });
        }
    });
    // Catch up: every peer copies the longest log's entries after its own, which must agree
    // with what it has.
    let logs: Vec<Vec<Entry<V>>> = w
        .nodes
        .values()
        .map(|n| n.lock().expect("node").chosen.clone())
        .collect();
    let longest = logs.iter().max_by_key(|l| l.len()).expect("logs").clone();
    for (p, l) in w.nodes.keys().zip(&logs) {
        assert_eq!(
            l[..],
            longest[..l.len()],
            "seed {seed}: peer {p}'s log is not a prefix of the longest"
        );
    }
    for (id, slot) in reported.lock().expect("r").iter() {
        assert_eq!(
            longest.get(*slot as usize).map(|e| e.id),
            Some(*id),
            "seed {seed}: proposal {id} reported chosen at slot {slot}"
        );
    }
    let mut seen = BTreeSet::new();
    for e in &longest {
        assert!(
            seen.insert(e.id),
            "seed {seed}: proposal {} chosen twice",
            e.id
        );
    }
    let m = members(&longest, longest.len() as u64, &founders);
    assert!(!m.is_empty());
}

#[test]
fn logs_agree_with_no_loss() {
    for seed in 1..=5 {
        run(seed * 7919, 0);
    }
}

#[test]
fn logs_agree_when_messages_are_lost() {
    for seed in 1..=40 {
        run(seed * 104_729, 25);
    }
}

#[test]
fn logs_agree_when_most_messages_are_lost() {
    for seed in 1..=20 {
        run(seed * 15_485_863, 60);
    }
}
