//! `xlfs volume heal VOL info [split-brain]`: the heal index of each brick of the volume, by
//! path.
//!
//! An entry is listed when one of its pending counters (`trusted.afr.<vol>-client-<j>`,
//! three big-endian u32 lanes data/metadata/entry) is non-zero on that brick: brick `i`'s
//! value under brick `j`'s key says `i` holds changes `j` missed (under its own key: a write
//! in flight or one whose post-op never came). Index entries whose counters are all zero or
//! whose object is gone are crash leftovers the brick drops itself; they are not listed.
//!
//! This host's bricks are read directly. In cluster mode (an `xlfs-mgmtd` runs here) every
//! other peer's daemon reports its own host's bricks the same way
//! ([`xlfs_mgmt::proto::Request::LocalHealInfo`]), so one command lists every brick of the
//! volume; a brick whose peer does not answer is listed as not reached.
//!
//! Split-brain: two copies of one replica set, each blaming the other in the same lane, found
//! by GFID among the reported entries (both copies are indexed: each holds a non-zero
//! counter). GFID split-brain, one name with two GFIDs, is not seen from the index.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use xlator_api::Gfid;
use xlfs_posix::{Found, Located};
use xlfs_volgen::VolumeSpec;

use super::super::{Ctx, brick_states, peer, print_json};
use crate::error::{CliError, Result, code};
use crate::procs;

/// One local brick and what its index lists.
pub struct BrickIndex {
    pub index: usize,
    /// `HOST:PATH` as in the volume description.
    pub brick: String,
    pub online: bool,
    /// Entries with a non-zero counter, sorted by path.
    pub entries: Vec<Located>,
}

/// The pending-counter key of the brick at position `i` (named by the brick's id, which stays
/// when other bricks are removed).
pub fn key_of(spec: &VolumeSpec, i: usize) -> String {
    let id = spec.brick_id(i);
    format!("{}{}-client-{id}", xlfs_posix::PENDING_PREFIX, spec.name)
}

/// The bricks of `i`'s replica set.
pub fn replica_set(spec: &VolumeSpec, i: usize) -> std::ops::Range<usize> {
    let r = (spec.replica.max(1)) as usize;
    let start = i / r * r;
    start..(start + r).min(spec.bricks.len())
}

/// The three lanes of a counter value (`None` for a value of another shape).
pub fn lanes(v: &[u8]) -> Option<[u32; 3]> {
    if v.len() != 12 {
        return None;
    }
    let l = |k: usize| u32::from_be_bytes([v[k], v[k + 1], v[k + 2], v[k + 3]]);
    Some([l(0), l(4), l(8)])
}

fn nonzero(l: &Located) -> bool {
    l.counters.values().any(|v| v.iter().any(|b| *b != 0))
}

/// Reads the index of every brick of `spec` on this host.
pub fn local_indexes(spec: &VolumeSpec, online: &[bool]) -> Result<Vec<BrickIndex>> {
    let names = procs::local_host_names();
    let mut out = Vec::new();
    for (i, b) in spec.bricks.iter().enumerate() {
        if !b.is_on(&names) {
            continue;
        }
        let path = PathBuf::from(b.path());
        let gfids = xlfs_posix::index_entries(&path).map_err(|e| {
            CliError::Other(format!(
                "cannot read the heal index of brick {b} ({}): {e}",
                xlfs_posix::index_path(&path).display()
            ))
        })?;
        let mut entries: Vec<Located> = xlfs_posix::locate(&path, &gfids)
            .into_iter()
            .filter(|l| l.what != Found::Gone && nonzero(l))
            .collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path).then(a.gfid.0.cmp(&b.gfid.0)));
        out.push(BrickIndex {
            index: i,
            brick: b.to_string(),
            online: online.get(i).copied().unwrap_or(false),
            entries,
        });
    }
    Ok(out)
}

/// How an entry is shown: its path, or `<gfid:...>` when this brick has no name for it.
pub fn shown(l: &Located) -> String {
    match (&l.path, l.what) {
        (Some(p), _) => p.clone(),
        (None, Found::Nameless) => format!("<gfid:{}> (unlinked)", l.gfid),
        (None, _) => format!("<gfid:{}>", l.gfid),
    }
}

/// An entry's pending counters as shown: key → `[data, metadata, entry]` (or
/// `{"bytes": N}` for a value of another shape).
type Counters = BTreeMap<String, serde_json::Value>;

/// The three lanes of a counter as shown in [`Counters`].
fn shown_lanes(v: &serde_json::Value) -> Option<[u32; 3]> {
    let a = v.as_array().filter(|a| a.len() == 3)?;
    let l = |k: usize| a[k].as_u64().and_then(|x| u32::try_from(x).ok());
    Some([l(0)?, l(1)?, l(2)?])
}

/// The lanes in which copies `i` and `j` (bricks of one set) accuse each other.
fn accuse_each_other(
    spec: &VolumeSpec,
    i: usize,
    ci: &Counters,
    j: usize,
    cj: &Counters,
) -> Vec<&'static str> {
    let blame = |c: &Counters, k: usize| c.get(&key_of(spec, k)).and_then(shown_lanes);
    let (Some(a), Some(b)) = (blame(ci, j), blame(cj, i)) else {
        return Vec::new();
    };
    ["data", "metadata", "entry"]
        .into_iter()
        .enumerate()
        .filter(|(n, _)| a[*n] != 0 && b[*n] != 0)
        .map(|(_, lane)| lane)
        .collect()
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct JsonEntry {
    gfid: String,
    path: Option<String>,
    kind: String,
    counters: Counters,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    split_brain: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct JsonBrick {
    /// The brick's position in the volume description.
    index: usize,
    brick: String,
    online: bool,
    /// False for a brick on a peer that did not answer: nothing is known of its index.
    #[serde(default = "reached")]
    reached: bool,
    /// `null` when not reached.
    count: Option<usize>,
    entries: Vec<JsonEntry>,
}

fn reached() -> bool {
    true
}

#[derive(Serialize, Deserialize, Debug)]
struct JsonInfo {
    volume: String,
    split_brain_only: bool,
    bricks: Vec<JsonBrick>,
    /// Peers (cluster mode) that did not answer; their bricks are listed as not reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unreached_peers: Vec<String>,
}

fn kind(f: Found) -> &'static str {
    match f {
        Found::Directory => "directory",
        Found::Other => "file",
        Found::Nameless => "unlinked",
        Found::Gone => "gone",
    }
}

/// A local brick's index as reported.
fn reported(b: &BrickIndex) -> JsonBrick {
    JsonBrick {
        index: b.index,
        brick: b.brick.clone(),
        online: b.online,
        reached: true,
        count: Some(b.entries.len()),
        entries: b
            .entries
            .iter()
            .map(|l| JsonEntry {
                gfid: l.gfid.to_string(),
                path: l.path.clone(),
                kind: kind(l.what).to_owned(),
                counters: l
                    .counters
                    .iter()
                    .map(|(k, v)| {
                        let val = match lanes(v) {
                            Some(ls) => serde_json::json!(ls),
                            None => serde_json::json!({ "bytes": v.len() }),
                        };
                        (k.clone(), val)
                    })
                    .collect(),
                split_brain: Vec::new(),
            })
            .collect(),
    }
}

/// Marks each entry with the lanes in which its copy and another reported copy of its
/// replica set (same GFID) accuse each other. Both copies of a split-brain are listed by
/// their bricks' indexes (each holds a non-zero counter), so the reported entries suffice.
fn mark_split_brain(spec: &VolumeSpec, bricks: &mut [JsonBrick]) {
    let copies: BTreeMap<(String, usize), Counters> = bricks
        .iter()
        .flat_map(|b| {
            b.entries
                .iter()
                .map(move |e| ((e.gfid.clone(), b.index), e.counters.clone()))
        })
        .collect();
    let names: BTreeMap<usize, String> =
        bricks.iter().map(|b| (b.index, b.brick.clone())).collect();
    for b in bricks.iter_mut() {
        for e in &mut b.entries {
            e.split_brain.clear();
            for j in replica_set(spec, b.index).filter(|j| *j != b.index) {
                let Some(theirs) = copies.get(&(e.gfid.clone(), j)) else {
                    continue;
                };
                for lane in accuse_each_other(spec, b.index, &e.counters, j, theirs) {
                    let other = names.get(&j).cloned().unwrap_or_else(|| j.to_string());
                    e.split_brain.push(format!("{lane} with brick {other}"));
                }
            }
        }
    }
}

/// How an entry of [`JsonEntry`] is shown: its path, or `<gfid:...>`.
fn shown_entry(e: &JsonEntry) -> String {
    match (&e.path, e.kind.as_str()) {
        (Some(p), _) => p.clone(),
        (None, "unlinked") => format!("<gfid:{}> (unlinked)", e.gfid),
        (None, _) => format!("<gfid:{}>", e.gfid),
    }
}

/// In cluster mode (an `xlfs-mgmtd` runs here), what every other peer reports of its own
/// bricks, for the bricks not in `bricks` yet; then every brick of the volume nobody
/// reported, as not reached. Returns the peers that did not answer.
fn add_peers(ctx: &Ctx, spec: &VolumeSpec, bricks: &mut Vec<JsonBrick>) -> Vec<String> {
    let Some((_, secret)) = peer::daemon(ctx) else {
        return Vec::new();
    };
    let mut unreached = Vec::new();
    match peer::peers(ctx) {
        Ok(peers) => {
            let others: Vec<_> = peers.iter().filter(|p| !p.me).collect();
            let answers: Vec<Result<JsonInfo>> = peer::ask_each(&others, |p| {
                peer::local_heal_info(&p.addr, &secret, &spec.name).and_then(|t| {
                    serde_json::from_str::<JsonInfo>(&t)
                        .map_err(|e| CliError::Other(format!("peer {}: {e}", p.addr)))
                })
            });
            for (p, answer) in others.iter().zip(answers) {
                match answer {
                    Ok(info) => {
                        for b in info.bricks {
                            if !bricks.iter().any(|o| o.index == b.index) {
                                bricks.push(b);
                            }
                        }
                    }
                    Err(e) => {
                        eprintln!(
                            "xlfs: peer {} did not answer ({e}): its bricks' entries are not listed",
                            p.addr
                        );
                        unreached.push(p.addr.clone());
                    }
                }
            }
        }
        Err(e) => eprintln!("xlfs: the other peers' bricks are not listed: {e}"),
    }
    for (i, b) in spec.bricks.iter().enumerate() {
        if !bricks.iter().any(|o| o.index == i) {
            bricks.push(JsonBrick {
                index: i,
                brick: b.to_string(),
                online: false,
                reached: false,
                count: None,
                entries: Vec::new(),
            });
        }
    }
    unreached
}

/// In cluster mode, the paths brick `source`'s host reports in split-brain on it (its copies
/// compared with every reported copy of its set); `None` outside cluster mode.
pub fn reported_split_paths(
    ctx: &Ctx,
    spec: &VolumeSpec,
    source: usize,
) -> Result<Option<Vec<String>>> {
    if peer::daemon(ctx).is_none() {
        return Ok(None);
    }
    let (bricks, _) = gather(ctx, spec, &ctx.state().volume_dir(&spec.name))?;
    let Some(b) = bricks.iter().find(|b| b.index == source) else {
        return Ok(Some(Vec::new()));
    };
    if !b.reached {
        return Err(CliError::State(format!(
            "the host of brick {} did not answer: its heal index is unknown; name the PATH",
            b.brick
        )));
    }
    Ok(Some(
        b.entries
            .iter()
            .filter(|e| !e.split_brain.is_empty())
            .filter_map(|e| e.path.clone())
            .collect(),
    ))
}

/// This host's bricks and (cluster mode) every other peer's, in brick order, split-brain
/// marked; with the peers that did not answer.
fn gather(
    ctx: &Ctx,
    spec: &VolumeSpec,
    vd: &crate::state::VolumeDir,
) -> Result<(Vec<JsonBrick>, Vec<String>)> {
    let run = vd.load_run()?;
    let online: Vec<bool> = brick_states(spec, &run).iter().map(|b| b.online).collect();
    let mut bricks: Vec<JsonBrick> = local_indexes(spec, &online)?.iter().map(reported).collect();
    let unreached = add_peers(ctx, spec, &mut bricks);
    bricks.sort_by_key(|b| b.index);
    mark_split_brain(spec, &mut bricks);
    Ok((bricks, unreached))
}

pub fn run(ctx: &Ctx, name: &str, split_only: bool, json: bool) -> Result<u8> {
    let (vd, spec) = ctx.state().load(name)?;
    let (mut bricks, unreached_peers) = gather(ctx, &spec, &vd)?;
    // Asked by a peer's daemon for this host's part: an empty list is an answer.
    if bricks.is_empty() && !peer::run_by_daemon() {
        return Err(CliError::State(format!(
            "volume {name} has no brick on this host; run `xlfs volume heal {name} info` on its servers"
        )));
    }
    if split_only {
        for b in &mut bricks {
            b.entries.retain(|e| !e.split_brain.is_empty());
            b.count = b.reached.then_some(b.entries.len());
        }
    }
    if json {
        return print_json(&JsonInfo {
            volume: spec.name.clone(),
            split_brain_only: split_only,
            bricks,
            unreached_peers,
        })
        .map(|()| code::OK);
    }
    for b in &bricks {
        println!("Brick {}", b.brick);
        for e in &b.entries {
            if e.split_brain.is_empty() {
                println!("{}", shown_entry(e));
            } else {
                println!(
                    "{} - Is in split-brain ({})",
                    shown_entry(e),
                    e.split_brain.join(", ")
                );
            }
        }
        println!(
            "Status: {}",
            match (b.reached, b.online) {
                (false, _) => "Not reached (its host's xlfs-mgmtd did not answer)",
                (true, true) => "Connected",
                (true, false) => "Brick not running",
            }
        );
        let count = b.count.map_or_else(|| "-".to_owned(), |n| n.to_string());
        if split_only {
            println!("Number of entries in split-brain: {count}");
        } else {
            println!("Number of entries: {count}");
        }
        println!();
    }
    Ok(code::OK)
}

/// Every GFID listed with a non-zero counter on some local brick, with a path when one of the
/// bricks has one.
/// Entries in flight by GFID, with when their object last changed ([`in_flight`]).
pub type InFlight = BTreeMap<[u8; 16], Option<std::time::SystemTime>>;

/// The entries that look like a write in flight: on every local brick listing them, only
/// the brick's own counter (its "dirty" mark, set by a pre-op and cleared by the post-op) is
/// non-zero, and no copy is accused. A client's eager hold keeps such marks for up to
/// `post-op-delay` after its writes; a client that died mid-transaction leaves them for good.
/// Each with the latest time a local brick's copy changed (see [`Located::changed`]).
pub fn in_flight(spec: &VolumeSpec, bricks: &[BrickIndex]) -> InFlight {
    let mut only_dirty: BTreeMap<[u8; 16], (bool, Option<std::time::SystemTime>)> = BTreeMap::new();
    for b in bricks {
        let own = key_of(spec, b.index);
        for l in &b.entries {
            let dirty_only = l
                .counters
                .iter()
                .all(|(k, v)| *k == own || v.iter().all(|x| *x == 0));
            let e = only_dirty.entry(l.gfid.0).or_insert((true, None));
            e.0 &= dirty_only;
            e.1 = e.1.max(l.changed);
        }
    }
    only_dirty
        .into_iter()
        .filter_map(|(g, (d, changed))| d.then_some((g, changed)))
        .collect()
}

pub fn pending(bricks: &[BrickIndex]) -> BTreeMap<[u8; 16], (Gfid, Option<String>)> {
    let mut all: BTreeMap<[u8; 16], (Gfid, Option<String>)> = BTreeMap::new();
    for b in bricks {
        for l in &b.entries {
            let e = all.entry(l.gfid.0).or_insert((l.gfid, None));
            if e.1.is_none() {
                e.1 = l.path.clone();
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VolumeSpec {
        let bricks = ["h0:/b0", "h1:/b1", "h0:/b2", "h1:/b3"]
            .iter()
            .map(|b| xlfs_volgen::Brick::parse(b).expect("brick"))
            .collect();
        let mut spec = VolumeSpec::new("v", bricks);
        spec.replica = 2;
        spec
    }

    /// One reported entry of `gfid` with counters `(brick, lanes)`.
    fn entry(spec: &VolumeSpec, gfid: &str, counters: &[(usize, [u32; 3])]) -> JsonEntry {
        JsonEntry {
            gfid: gfid.into(),
            path: Some(format!("/{gfid}")),
            kind: "file".into(),
            counters: counters
                .iter()
                .map(|(b, l)| (key_of(spec, *b), serde_json::json!(l)))
                .collect(),
            split_brain: Vec::new(),
        }
    }

    fn brick(index: usize, entries: Vec<JsonEntry>) -> JsonBrick {
        JsonBrick {
            index,
            brick: format!("h{}:/b{index}", index % 2),
            online: true,
            reached: true,
            count: Some(entries.len()),
            entries,
        }
    }

    #[test]
    fn split_brain_is_found_between_copies_reported_by_different_hosts() {
        let s = spec();
        // Bricks 0 and 1 (one set, on two hosts) accuse each other's copy of "a" in data;
        // "b" is only a stale copy on 1 (one-sided blame). In the second set, brick 3 blames
        // brick 2 about "c" while brick 2 blames brick 1, which is not in its set.
        let mut bricks = vec![
            brick(
                0,
                vec![
                    entry(&s, "a", &[(1, [3, 0, 0])]),
                    entry(&s, "b", &[(1, [1, 0, 0])]),
                ],
            ),
            brick(1, vec![entry(&s, "a", &[(0, [1, 1, 0])])]),
            brick(2, vec![entry(&s, "c", &[(1, [1, 0, 0])])]),
            brick(3, vec![entry(&s, "c", &[(2, [1, 0, 0])])]),
        ];
        mark_split_brain(&s, &mut bricks);
        let split = |b: usize, g: &str| {
            bricks[b]
                .entries
                .iter()
                .find(|e| e.gfid == g)
                .map(|e| e.split_brain.clone())
                .expect("entry")
        };
        assert_eq!(split(0, "a"), ["data with brick h1:/b1"]);
        assert_eq!(split(1, "a"), ["data with brick h0:/b0"]);
        assert!(split(0, "b").is_empty());
        assert!(split(2, "c").is_empty() && split(3, "c").is_empty());
    }

    #[test]
    fn a_peer_s_answer_round_trips_and_an_old_answer_reads_as_reached() {
        let s = spec();
        let info = JsonInfo {
            volume: "v".into(),
            split_brain_only: false,
            bricks: vec![brick(1, vec![entry(&s, "a", &[(0, [1, 0, 0])])])],
            unreached_peers: Vec::new(),
        };
        let text = serde_json::to_string(&info).expect("json");
        let back: JsonInfo = serde_json::from_str(&text).expect("parse");
        assert_eq!(
            back.bricks[0].entries[0].counters,
            info.bricks[0].entries[0].counters
        );
        let old = r#"{"volume":"v","split_brain_only":false,"bricks":[{"index":1,
            "brick":"h1:/b1","online":true,"count":0,"entries":[]}]}"#;
        let back: JsonInfo = serde_json::from_str(old).expect("an older peer's answer");
        assert!(back.bricks[0].reached);
    }
}
