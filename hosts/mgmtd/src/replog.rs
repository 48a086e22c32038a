//! The replicated log: TiKV's Raft implementation (the `raft` crate's [`RawNode`]) with this
//! daemon's storage and wire around it. Nothing of the consensus itself is written here.
//!
//! A [`Replica`] is one peer's copy. The caller drives it ([`Replica::tick`],
//! [`Replica::step`], [`Replica::propose`]) and after each call takes its [`Output`] from
//! [`Replica::advance`]: the changes now applied in log order, the messages to send to other
//! peers, and whether [`Durable`] changed. **The caller persists [`Durable`] before it sends
//! any of those messages** (Raft's rule: a vote or an acknowledged entry survives a crash).
//!
//! What is kept ([`Durable`]): Raft's hard state (term, vote, commit), the voters, the Raft
//! log after the last snapshot, how far it is applied, and the applied changes themselves
//! ([`Durable::chosen`]), from which the cluster's configuration is built.
//!
//! Compaction ([`Replica::compacting`]): once more than a limit of applied entries are in the
//! log, the applied changes are squashed by the caller's function into one entry that builds
//! the same configuration, and the log before the applied index is dropped; that point is the
//! snapshot ([`Durable::snapshot`]). A peer that lacks entries a leader no longer has (away
//! for long, or new) is sent the snapshot (Raft's MsgSnapshot, its data the squashed
//! changes) and goes on from there. A snapshot that does not list the peer it would go to
//! (taken before that peer was added) is not sent: the leader takes a new one first.
//!
//! Membership: adding or removing a peer is a Raft configuration change (one voter at a time)
//! whose context carries the [`Entry`] that records it, so the change and the entry are applied
//! together. Every peer starts with no voters and learns them from the log alone, so a peer
//! that joins learns the founder too: a new cluster of one starts with its first entry (the
//! change that makes the founder a voter) already committed at term 1, index 1, so it needs no
//! election to exist; a peer that joins starts empty and never campaigns until the leader's
//! log makes it a voter.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use protobuf::Message as _;
use raft::prelude::{
    ConfChange, ConfChangeType, ConfState, EntryType, HardState, Message, Snapshot,
};
use raft::storage::MemStorage;
use raft::{RawNode, StateRole};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A peer of the cluster (a Raft node id: never 0).
pub type PeerId = u64;

/// One entry of the cluster's log: a change, and a unique id so the peer that proposed it
/// knows when it is applied.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Entry<V> {
    pub id: u64,
    pub value: V,
}

/// One entry of the Raft log as stored (bytes in hex).
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct LogEntry {
    pub index: u64,
    pub term: u64,
    /// A configuration change (its data is a Raft `ConfChange`).
    #[serde(default)]
    pub conf: bool,
    pub data: String,
    #[serde(default)]
    pub context: String,
}

/// Everything a peer must not forget across a crash.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(bound = "V: Serialize + DeserializeOwned")]
pub struct Durable<V> {
    /// The cluster this log belongs to; requests of another cluster are refused.
    pub cluster: u64,
    pub term: u64,
    pub vote: PeerId,
    pub commit: u64,
    pub voters: Vec<PeerId>,
    /// The Raft log from index 1.
    pub log: Vec<LogEntry>,
    /// The last Raft index applied.
    pub applied: u64,
    /// The changes applied so far, in order.
    pub chosen: Vec<Entry<V>>,
    /// Set (seconds since the epoch) when this peer was asked to join a cluster, until it is
    /// a member: a join that never completes is given up after a while.
    #[serde(default)]
    pub joining_since: Option<u64>,
    /// Where the log was last compacted: [`Durable::log`] starts after it, and the first
    /// `chosen` entries of [`Durable::chosen`] are the configuration up to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Snap>,
}

/// A compaction point (see [`Durable::snapshot`]).
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Snap {
    /// The last Raft index it covers, and that entry's term.
    pub index: u64,
    pub term: u64,
    /// The voters after that entry.
    pub voters: Vec<PeerId>,
    /// How many of the first [`Durable::chosen`] entries make it.
    pub chosen: usize,
}

impl<V> Durable<V> {
    /// A new cluster of one, `me`, whose first entry (`first`, which makes `me` a voter) is
    /// already committed.
    pub fn found(cluster: u64, me: PeerId, first: Entry<V>) -> Durable<V>
    where
        V: Serialize,
    {
        Durable {
            cluster,
            term: 1,
            vote: me,
            commit: 1,
            voters: Vec::new(),
            log: vec![LogEntry {
                index: 1,
                term: 1,
                conf: true,
                data: hex(&conf_bytes(ConfChangeType::AddNode, me)),
                context: hex(&serde_json::to_vec(&first).unwrap_or_default()),
            }],
            applied: 0,
            chosen: Vec::new(),
            joining_since: None,
            snapshot: None,
        }
    }

    /// A peer about to join cluster `cluster`: nothing yet, not a voter.
    pub fn joining(cluster: u64) -> Durable<V> {
        Durable {
            cluster,
            term: 0,
            vote: 0,
            commit: 0,
            voters: Vec::new(),
            log: Vec::new(),
            applied: 0,
            chosen: Vec::new(),
            joining_since: Some(now_secs()),
            snapshot: None,
        }
    }

    /// A log whose entries are `chosen`, all committed at term 1 and applied again when it is
    /// opened (for a log kept in another form before, whose prefixes agree across peers: the
    /// Raft logs built from them agree too). `member` says which entries add or remove a
    /// voter; they become configuration changes.
    pub fn seeded(
        cluster: u64,
        chosen: &[Entry<V>],
        member: impl Fn(&V) -> Option<Member>,
    ) -> Durable<V>
    where
        V: Serialize,
    {
        let log: Vec<LogEntry> = chosen
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let json = hex(&serde_json::to_vec(e).unwrap_or_default());
                let (conf, data, context) = match member(&e.value) {
                    Some(Member::Add(p)) => {
                        (true, hex(&conf_bytes(ConfChangeType::AddNode, p)), json)
                    }
                    Some(Member::Remove(p)) => {
                        (true, hex(&conf_bytes(ConfChangeType::RemoveNode, p)), json)
                    }
                    None => (false, json, String::new()),
                };
                LogEntry {
                    index: i as u64 + 1,
                    term: 1,
                    conf,
                    data,
                    context,
                }
            })
            .collect();
        Durable {
            cluster,
            term: 1,
            vote: 0,
            commit: log.len() as u64,
            voters: Vec::new(),
            log,
            applied: 0,
            chosen: Vec::new(),
            joining_since: None,
            snapshot: None,
        }
    }
}

/// An entry that changes the voters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    Add(PeerId),
    Remove(PeerId),
}

/// What a proposal asks of the log.
#[derive(Clone, Debug)]
pub enum Proposal<V> {
    /// An entry.
    Change(Entry<V>),
    /// Make `peer` a voter, recording `entry` with it.
    AddPeer(PeerId, Entry<V>),
    /// Take `peer` out of the voters, recording `entry` with it.
    RemovePeer(PeerId, Entry<V>),
}

/// Why a proposal was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error(
        "no majority: no leader elected by a majority of the peers is known here; a change \
         needs a majority of the peers up and reachable"
    )]
    NoLeader,
    #[error("the log refused the proposal: {0}")]
    Refused(String),
}

/// What one [`Replica::advance`] produced.
#[derive(Debug)]
pub struct Output<V> {
    /// To send, once [`Durable`] is persisted if `changed`.
    pub messages: Vec<Message>,
    /// Entries applied by this call, in log order.
    pub applied: Vec<Entry<V>>,
    /// [`Durable`] changed and must be persisted before the messages go out.
    pub changed: bool,
}

/// One peer's copy of the log.
pub struct Replica<V> {
    pub me: PeerId,
    node: RawNode<Store>,
    d: Durable<V>,
    /// When to compact, and how (see [`Replica::compacting`]).
    compaction: Option<(usize, Squash<V>)>,
}

/// Builds, from applied changes, one entry that builds the same configuration.
pub type Squash<V> = fn(&[Entry<V>]) -> Entry<V>;

/// Raft's storage: the log in memory, and the snapshot a leader sends to a peer that lacks
/// compacted entries.
#[derive(Clone)]
struct Store {
    mem: MemStorage,
    /// The last snapshot (its data: the squashed changes, JSON); index 0 when none.
    snap: Arc<Mutex<Snapshot>>,
    /// Set when a peer needed a snapshot that does not list it: the next
    /// [`Replica::advance`] takes a new one.
    wanted: Arc<AtomicBool>,
}

impl raft::Storage for Store {
    fn initial_state(&self) -> raft::Result<raft::RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<raft::prelude::Entry>> {
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.mem.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let snap = self.snap.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let meta = snap.get_metadata();
        let lists = meta.get_conf_state().voters.contains(&to)
            || meta.get_conf_state().learners.contains(&to);
        if meta.index == 0 || meta.index < request_index || !lists {
            self.wanted.store(true, Ordering::Relaxed);
            return Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(snap)
    }
}

/// Raft's timing, in ticks: the caller ticks every [`TICK`].
pub const TICK: std::time::Duration = std::time::Duration::from_millis(100);
const ELECTION_TICKS: usize = 10;
const HEARTBEAT_TICKS: usize = 2;

impl<V: Serialize + DeserializeOwned + Clone> Replica<V> {
    /// Opens peer `me`'s copy from its durable state.
    pub fn open(me: PeerId, d: Durable<V>, logger: &slog::Logger) -> Result<Replica<V>, String> {
        let store = Store {
            mem: MemStorage::new(),
            snap: Arc::default(),
            wanted: Arc::default(),
        };
        {
            let mut w = store.mem.wl();
            if let Some(s) = &d.snapshot {
                let snap = snapshot_of(s, d.chosen.get(..s.chosen).unwrap_or_default())?;
                w.apply_snapshot(snap.clone())
                    .map_err(|e| format!("the stored snapshot: {e}"))?;
                *store.snap.lock().unwrap_or_else(|e| e.into_inner()) = snap;
            }
            if !d.voters.is_empty() {
                w.set_conf_state(ConfState::from((d.voters.clone(), Vec::<u64>::new())));
            }
            let ents: Vec<raft::prelude::Entry> =
                d.log.iter().map(to_raft).collect::<Result<_, _>>()?;
            w.append(&ents)
                .map_err(|e| format!("the stored log: {e}"))?;
            w.set_hardstate(HardState {
                term: d.term,
                vote: d.vote,
                commit: d.commit,
                ..Default::default()
            });
        }
        let cfg = raft::Config {
            id: me,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied: d.applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            pre_vote: true,
            check_quorum: true,
            ..Default::default()
        };
        cfg.validate().map_err(|e| e.to_string())?;
        let node = RawNode::new(&cfg, store, logger).map_err(|e| e.to_string())?;
        Ok(Replica {
            me,
            node,
            d,
            compaction: None,
        })
    }

    /// Compacts the log once more than `limit` applied entries are in it, squashing the
    /// applied changes with `squash` (see the module doc).
    pub fn compacting(mut self, limit: usize, squash: Squash<V>) -> Replica<V> {
        self.compaction = Some((limit.max(1), squash));
        self
    }

    /// Compacts the log at the applied index if it holds more than the limit of applied
    /// entries, or a peer wants a snapshot that lists it.
    fn maybe_compact(&mut self) {
        let Some((limit, squash)) = self.compaction else {
            return;
        };
        let store = self.node.store().clone();
        let wanted = store.wanted.swap(false, Ordering::Relaxed);
        let since = self.d.snapshot.as_ref().map_or(0, |s| s.index);
        let applied = self.d.applied;
        if applied <= since || (!wanted && applied - since <= limit as u64) {
            return;
        }
        use raft::Storage as _;
        let Ok(term) = store.mem.term(applied) else {
            return;
        };
        let squashed = squash(&self.d.chosen);
        let snap = Snap {
            index: applied,
            term,
            voters: self.d.voters.clone(),
            chosen: 1,
        };
        let Ok(raft_snap) = snapshot_of(&snap, std::slice::from_ref(&squashed)) else {
            return;
        };
        // The storage's snapshot point moves to `applied`; the entries after it stay.
        let (Ok(state), Ok(last)) = (store.mem.initial_state(), store.mem.last_index()) else {
            return;
        };
        let tail = if applied < last {
            let all = raft::GetEntriesContext::empty(false);
            match store.mem.entries(applied + 1, last + 1, None, all) {
                Ok(t) => t,
                Err(_) => return,
            }
        } else {
            Vec::new()
        };
        {
            let mut w = store.mem.wl();
            if let Err(e) = w.apply_snapshot(raft_snap.clone()) {
                crate::daemon::log(format_args!("log compaction failed: {e}"));
                return;
            }
            if let Err(e) = w.append(&tail) {
                crate::daemon::log(format_args!("log compaction failed: {e}"));
            }
            w.set_hardstate(state.hard_state);
            w.set_conf_state(state.conf_state);
        }
        *store.snap.lock().unwrap_or_else(|e| e.into_inner()) = raft_snap;
        self.d.chosen = vec![squashed];
        self.d.log.retain(|e| e.index > applied);
        self.d.snapshot = Some(snap);
    }

    /// A snapshot the leader sent: the log restarts from it.
    fn restore(&mut self, snap: &Snapshot) -> bool {
        let meta = snap.get_metadata();
        let chosen: Vec<Entry<V>> = match serde_json::from_slice(&snap.data) {
            Ok(c) => c,
            Err(e) => {
                crate::daemon::log(format_args!("a snapshot this peer cannot read: {e}"));
                return false;
            }
        };
        let store = self.node.store().clone();
        if let Err(e) = store.mem.wl().apply_snapshot(snap.clone()) {
            crate::daemon::log(format_args!("snapshot not applied: {e}"));
            return false;
        }
        *store.snap.lock().unwrap_or_else(|e| e.into_inner()) = snap.clone();
        self.d.snapshot = Some(Snap {
            index: meta.index,
            term: meta.term,
            voters: meta.get_conf_state().voters.clone(),
            chosen: chosen.len(),
        });
        self.d.voters = meta.get_conf_state().voters.clone();
        self.d.chosen = chosen;
        self.d.applied = meta.index;
        self.d.commit = self.d.commit.max(meta.index);
        self.d.term = self.d.term.max(meta.term);
        self.d.log.clear();
        crate::daemon::log(format_args!(
            "caught up from a snapshot of the log at index {} ({} changes squashed)",
            meta.index,
            self.d.chosen.len()
        ));
        true
    }

    pub fn durable(&self) -> &Durable<V> {
        &self.d
    }

    /// The changes applied so far.
    pub fn chosen(&self) -> &[Entry<V>] {
        &self.d.chosen
    }

    pub fn cluster(&self) -> u64 {
        self.d.cluster
    }

    /// Ends the join wait (this peer is a member).
    pub fn joined(&mut self) -> bool {
        self.d.joining_since.take().is_some()
    }

    /// The leader this peer knows of.
    pub fn leader(&self) -> Option<PeerId> {
        let l = self.node.raft.leader_id;
        (l != raft::INVALID_ID).then_some(l)
    }

    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// One [`TICK`] passed. A peer that is the only voter campaigns at once rather than
    /// after an election timeout (it wins alone): a new cluster of one takes changes at once.
    pub fn tick(&mut self) {
        if self.d.voters == [self.me] && !self.is_leader() {
            let _ = self.node.campaign();
        } else {
            self.node.tick();
        }
    }

    /// A message from another peer.
    pub fn step(&mut self, m: Message) -> Result<(), String> {
        self.node.step(m).map_err(|e| e.to_string())
    }

    /// Another peer could not be reached (Raft slows down what it sends there).
    pub fn unreachable(&mut self, peer: PeerId) {
        self.node.report_unreachable(peer);
    }

    /// Proposes; the entry is applied (see [`Output::applied`]) once a majority took it. A
    /// follower hands the proposal to the leader, which may still drop it (a leader that
    /// lost its majority): the caller waits for the entry with a time limit.
    pub fn propose(&mut self, p: Proposal<V>) -> Result<(), ProposeError> {
        if self.leader().is_none() {
            return Err(ProposeError::NoLeader);
        }
        let json =
            |e: &Entry<V>| serde_json::to_vec(e).map_err(|e| ProposeError::Refused(e.to_string()));
        let res = match p {
            Proposal::Change(e) => self.node.propose(Vec::new(), json(&e)?),
            Proposal::AddPeer(peer, e) => self
                .node
                .propose_conf_change(json(&e)?, conf_change(ConfChangeType::AddNode, peer)),
            Proposal::RemovePeer(peer, e) => self
                .node
                .propose_conf_change(json(&e)?, conf_change(ConfChangeType::RemoveNode, peer)),
        };
        res.map_err(|e| match e {
            raft::Error::ProposalDropped => ProposeError::NoLeader,
            e => ProposeError::Refused(e.to_string()),
        })
    }

    /// Takes what the last calls produced (see the module doc).
    pub fn advance(&mut self) -> Output<V> {
        let mut out = Output {
            messages: Vec::new(),
            applied: Vec::new(),
            changed: false,
        };
        if !self.node.has_ready() {
            return out;
        }
        let mut rd = self.node.ready();
        out.messages.extend(rd.take_messages());
        if !rd.snapshot().is_empty() && self.restore(rd.snapshot()) {
            out.changed = true;
        }
        let committed = rd.take_committed_entries();
        self.apply(committed, &mut out);
        if let Some(first) = rd.entries().first().map(|e| e.index) {
            if let Err(e) = self.node.mut_store().mem.wl().append(rd.entries()) {
                crate::daemon::log(format_args!("the log refused entries: {e}"));
            }
            self.d.log.retain(|e| e.index < first);
            self.d.log.extend(rd.entries().iter().map(from_raft));
            out.changed = true;
        }
        if let Some(hs) = rd.hs() {
            let hs = hs.clone();
            self.d.term = hs.term;
            self.d.vote = hs.vote;
            self.d.commit = hs.commit;
            self.node.mut_store().mem.wl().set_hardstate(hs);
            out.changed = true;
        }
        out.messages.extend(rd.take_persisted_messages());
        let mut light = self.node.advance(rd);
        if let Some(commit) = light.commit_index() {
            self.node
                .mut_store()
                .mem
                .wl()
                .mut_hard_state()
                .set_commit(commit);
            self.d.commit = commit;
            out.changed = true;
        }
        out.messages.extend(light.take_messages());
        let committed = light.take_committed_entries();
        self.apply(committed, &mut out);
        self.node.advance_apply();
        let before = self.d.snapshot.as_ref().map(|s| s.index);
        self.maybe_compact();
        if self.d.snapshot.as_ref().map(|s| s.index) != before {
            out.changed = true;
        }
        out
    }

    /// Tells Raft whether a snapshot sent to `peer` arrived: until told, it sends that peer
    /// nothing more (the peer's answer alone may be lost).
    pub fn snapshot_sent(&mut self, peer: PeerId, arrived: bool) {
        let status = if arrived {
            raft::SnapshotStatus::Finish
        } else {
            raft::SnapshotStatus::Failure
        };
        self.node.report_snapshot(peer, status);
    }

    fn apply(&mut self, entries: Vec<raft::prelude::Entry>, out: &mut Output<V>) {
        for e in entries {
            self.d.applied = e.index;
            out.changed = true;
            match e.get_entry_type() {
                EntryType::EntryConfChange => {
                    let mut cc = ConfChange::default();
                    if let Err(err) = cc.merge_from_bytes(&e.data) {
                        crate::daemon::log(format_args!("a damaged configuration change: {err}"));
                        continue;
                    }
                    match self.node.apply_conf_change(&cc) {
                        Ok(cs) => {
                            self.d.voters = cs.voters.clone();
                            self.node.mut_store().mem.wl().set_conf_state(cs);
                        }
                        Err(err) => crate::daemon::log(format_args!(
                            "configuration change not applied: {err}"
                        )),
                    }
                    self.record(&e.context, out);
                }
                EntryType::EntryNormal => self.record(&e.data, out),
                EntryType::EntryConfChangeV2 => {}
            }
        }
    }

    fn record(&mut self, bytes: &[u8], out: &mut Output<V>) {
        if bytes.is_empty() {
            // A new leader's empty entry.
            return;
        }
        match serde_json::from_slice::<Entry<V>>(bytes) {
            Ok(entry) => {
                self.d.chosen.push(entry.clone());
                out.applied.push(entry);
            }
            Err(err) => crate::daemon::log(format_args!("an entry this peer cannot read: {err}")),
        }
    }
}

fn conf_change(kind: ConfChangeType, peer: PeerId) -> ConfChange {
    let mut cc = ConfChange::default();
    cc.set_change_type(kind);
    cc.node_id = peer;
    cc
}

fn conf_bytes(kind: ConfChangeType, peer: PeerId) -> Vec<u8> {
    conf_change(kind, peer).write_to_bytes().unwrap_or_default()
}

/// The Raft snapshot of compaction point `s`, whose configuration `chosen` builds.
fn snapshot_of<V: Serialize>(s: &Snap, chosen: &[Entry<V>]) -> Result<Snapshot, String> {
    let mut snap = Snapshot {
        data: serde_json::to_vec(chosen)
            .map_err(|e| e.to_string())?
            .into(),
        ..Default::default()
    };
    let meta = snap.mut_metadata();
    meta.index = s.index;
    meta.term = s.term;
    meta.set_conf_state(ConfState::from((s.voters.clone(), Vec::<u64>::new())));
    Ok(snap)
}

fn to_raft(e: &LogEntry) -> Result<raft::prelude::Entry, String> {
    let mut r = raft::prelude::Entry {
        index: e.index,
        term: e.term,
        ..Default::default()
    };
    r.set_entry_type(if e.conf {
        EntryType::EntryConfChange
    } else {
        EntryType::EntryNormal
    });
    r.data = unhex(&e.data).ok_or("a stored entry is damaged")?.into();
    r.context = unhex(&e.context).ok_or("a stored entry is damaged")?.into();
    Ok(r)
}

fn from_raft(e: &raft::prelude::Entry) -> LogEntry {
    LogEntry {
        index: e.index,
        term: e.term,
        conf: e.get_entry_type() == EntryType::EntryConfChange,
        data: hex(&e.data),
        context: hex(&e.context),
    }
}

/// A Raft message as it crosses the wire.
pub fn encode(m: &Message) -> String {
    hex(&m.write_to_bytes().unwrap_or_default())
}

pub fn decode(s: &str) -> Option<Message> {
    Message::parse_from_bytes(&unhex(s)?).ok()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// A logger that drops everything (tests, and Raft's chatter unless asked for).
pub fn quiet_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let b = vec![0u8, 1, 0xab, 0xff];
        assert_eq!(unhex(&hex(&b)), Some(b));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_founded_cluster_applies_its_first_entry_without_an_election() {
        let d = Durable::found(
            7,
            3,
            Entry {
                id: 1,
                value: 42u32,
            },
        );
        let mut r = Replica::open(3, d, &quiet_logger()).expect("open");
        let out = r.advance();
        assert_eq!(out.applied, vec![Entry { id: 1, value: 42 }]);
        assert!(out.changed);
        assert_eq!(r.durable().applied, 1);
        // It elects itself and takes proposals alone.
        for _ in 0..3 * ELECTION_TICKS {
            r.tick();
            r.advance();
        }
        assert!(r.is_leader());
        r.propose(Proposal::Change(Entry { id: 2, value: 43 }))
            .expect("propose");
        let out = r.advance();
        let mut applied = out.applied;
        applied.extend(r.advance().applied);
        assert_eq!(applied, vec![Entry { id: 2, value: 43 }]);
    }
}
