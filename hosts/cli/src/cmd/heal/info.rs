//! `xlfs volume heal VOL info [split-brain]`: the heal index of each brick of the volume on
//! this host, by path.
//!
//! An entry is listed when one of its pending counters (`trusted.afr.<vol>-client-<j>`,
//! three big-endian u32 lanes data/metadata/entry) is non-zero on that brick: brick `i`'s
//! value under brick `j`'s key says `i` holds changes `j` missed (under its own key: a write
//! in flight or one whose post-op never came). Index entries whose counters are all zero or
//! whose object is gone are crash leftovers the brick drops itself; they are not listed.
//!
//! Split-brain: two copies of one replica set, both on this host, each blaming the other in
//! the same lane. (GFID split-brain, one name with two GFIDs, is not seen from the index.)

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use xlator_api::Gfid;
use xlfs_posix::{Found, Located};
use xlfs_volgen::VolumeSpec;

use super::super::{Ctx, brick_states, print_json};
use crate::error::{CliError, Result, code};
use crate::procs;

/// One local brick and what its index lists.
pub struct BrickIndex {
    pub index: usize,
    /// `HOST:PATH` as in the volume description.
    pub brick: String,
    pub path: PathBuf,
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
            path,
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

/// The lanes in which copies `i` and `j` (bricks of one set) accuse each other.
fn accuse_each_other(
    spec: &VolumeSpec,
    i: usize,
    li: &Located,
    j: usize,
    lj: &Located,
) -> Vec<&'static str> {
    let blame = |l: &Located, k: usize| l.counters.get(&key_of(spec, k)).and_then(|v| lanes(v));
    let (Some(a), Some(b)) = (blame(li, j), blame(lj, i)) else {
        return Vec::new();
    };
    ["data", "metadata", "entry"]
        .into_iter()
        .enumerate()
        .filter(|(n, _)| a[*n] != 0 && b[*n] != 0)
        .map(|(_, lane)| lane)
        .collect()
}

#[derive(Serialize)]
struct JsonEntry {
    gfid: String,
    path: Option<String>,
    kind: &'static str,
    /// Key → [data, metadata, entry] (or the raw bytes' length when not 12 bytes).
    counters: BTreeMap<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    split_brain: Vec<String>,
}

#[derive(Serialize)]
struct JsonBrick {
    index: usize,
    brick: String,
    online: bool,
    count: usize,
    entries: Vec<JsonEntry>,
}

#[derive(Serialize)]
struct JsonInfo {
    volume: String,
    split_brain_only: bool,
    bricks: Vec<JsonBrick>,
}

fn kind(f: Found) -> &'static str {
    match f {
        Found::Directory => "directory",
        Found::Other => "file",
        Found::Nameless => "unlinked",
        Found::Gone => "gone",
    }
}

pub fn run(ctx: &Ctx, name: &str, split_only: bool, json: bool) -> Result<u8> {
    let (vd, spec) = ctx.state().load(name)?;
    let run = vd.load_run()?;
    let online: Vec<bool> = brick_states(&spec, &run).iter().map(|b| b.online).collect();
    let bricks = local_indexes(&spec, &online)?;
    if bricks.is_empty() {
        return Err(CliError::State(format!(
            "volume {name} has no brick on this host; run `xlfs volume heal {name} info` on its servers"
        )));
    }
    // Split-brain needs both copies: the other local bricks of the set, located by GFID.
    let mut out = Vec::new();
    for b in &bricks {
        let mut entries = Vec::new();
        for l in &b.entries {
            let mut split = Vec::new();
            for other in bricks
                .iter()
                .filter(|o| o.index != b.index && replica_set(&spec, b.index).contains(&o.index))
            {
                let theirs = xlfs_posix::locate(&other.path, &[l.gfid]);
                if let Some(lo) = theirs.first().filter(|lo| lo.what != Found::Gone) {
                    for lane in accuse_each_other(&spec, b.index, l, other.index, lo) {
                        split.push(format!("{lane} with brick {}", other.brick));
                    }
                }
            }
            if split_only && split.is_empty() {
                continue;
            }
            entries.push((l, split));
        }
        out.push((b, entries));
    }
    if json {
        let info = JsonInfo {
            volume: spec.name.clone(),
            split_brain_only: split_only,
            bricks: out
                .iter()
                .map(|(b, entries)| JsonBrick {
                    index: b.index,
                    brick: b.brick.clone(),
                    online: b.online,
                    count: entries.len(),
                    entries: entries
                        .iter()
                        .map(|(l, split)| JsonEntry {
                            gfid: l.gfid.to_string(),
                            path: l.path.clone(),
                            kind: kind(l.what),
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
                            split_brain: split.clone(),
                        })
                        .collect(),
                })
                .collect(),
        };
        print_json(&info)?;
    } else {
        for (b, entries) in &out {
            println!("Brick {}", b.brick);
            for (l, split) in entries {
                if split.is_empty() {
                    println!("{}", shown(l));
                } else {
                    println!("{} - Is in split-brain ({})", shown(l), split.join(", "));
                }
            }
            println!(
                "Status: {}",
                if b.online {
                    "Connected"
                } else {
                    "Brick not running"
                }
            );
            if split_only {
                println!("Number of entries in split-brain: {}", entries.len());
            } else {
                println!("Number of entries: {}", entries.len());
            }
            println!();
        }
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
