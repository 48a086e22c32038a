//! `xlfs volume heal VOL split-brain bigger-file PATH | latest-mtime PATH | source-brick
//! HOST:BRICK [PATH]`: resolves a split-brain by choosing the good copy (GlusterFS's commands
//! of the same names).
//!
//! Works on the brick files of this host only (as `heal info` does): every brick of the
//! replica set holding PATH must be local, or the command refuses and says where to run it.
//! For PATH it reads each copy (GFID, size, mtime, the set's pending counters
//! `trusted.afr.<vol>-client-<j>`), refuses with "not in split-brain" unless two copies
//! accuse each other in some lane, picks the source by the policy (a tie is an error), then
//! rewrites the counters so that the source is the only good copy:
//! - on the source: every sink's key gets a non-zero accusation in the split lanes, its own
//!   key (the dirty count) zero;
//! - on every sink: the source's key zero (the sink accuses nobody it could win against).
//!
//! The GFID and every other xattr are left as they are. It then looks PATH up through the
//! volume's client graph built in this process (replicate heals inline, see [`super::run`])
//! and checks the result on the bricks: every copy present with one GFID, regular files of
//! equal size and checksum, every counter of the set zero. Only then does it say `Healed`.
//!
//! GFID split-brain (one name, different GFIDs): only with `source-brick`, which removes the
//! sinks' name and its handle hard link, makes the source's parent accuse the sinks in the
//! entry lane, and heals (the entry heal makes the name again with the source's GFID).
//! Directories with different GFIDs are refused.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use xlator_api::Gfid;
use xlfs_volgen::VolumeSpec;

use super::info::{key_of, lanes, replica_set};
use super::run::{HealGraph, walk};
use crate::cmd::Ctx;
use crate::error::{CliError, Result, code};
use crate::procs;

/// How the source copy is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    BiggerFile,
    LatestMtime,
    /// `HOST:PATH` (or `PATH`) of the brick.
    SourceBrick(String),
}

/// What `split-brain ...` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub policy: Policy,
    /// The path in the volume; `None` only with `source-brick` (every split-brain entry).
    pub path: Option<String>,
}

/// Parses the words after `split-brain`.
pub fn parse(words: &[&str]) -> Result<Request> {
    let p = |s: &str| Some(format!("/{}", s.trim_matches('/')));
    match words {
        ["bigger-file", path] => Ok(Request {
            policy: Policy::BiggerFile,
            path: p(path),
        }),
        ["latest-mtime", path] => Ok(Request {
            policy: Policy::LatestMtime,
            path: p(path),
        }),
        ["source-brick", brick] => Ok(Request {
            policy: Policy::SourceBrick((*brick).into()),
            path: None,
        }),
        ["source-brick", brick, path] => Ok(Request {
            policy: Policy::SourceBrick((*brick).into()),
            path: p(path),
        }),
        _ => Err(CliError::Rejected(format!(
            "volume heal: unknown `split-brain {}`; say `split-brain bigger-file PATH`, \
             `split-brain latest-mtime PATH` or `split-brain source-brick HOST:BRICK [PATH]`",
            words.join(" ")
        ))),
    }
}

/// One copy of PATH on a local brick.
#[derive(Clone, Debug)]
struct Copy {
    index: usize,
    brick: String,
    root: PathBuf,
    file: PathBuf,
    gfid: Option<[u8; 16]>,
    is_dir: bool,
    is_reg: bool,
    size: u64,
    mtime: (i64, i64),
    /// Key of brick k → lanes, for the bricks of the set.
    counters: BTreeMap<usize, [u32; 3]>,
}

fn cstr(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| CliError::Other(format!("{}: a NUL byte in the path", p.display())))
}

fn get_xattr(p: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    let cp = cstr(p)?;
    let cn = CString::new(name).map_err(|_| CliError::Other("NUL in an xattr name".into()))?;
    let mut buf = vec![0u8; 256];
    // SAFETY: NUL-terminated strings and a writable buffer of `buf.len()` bytes.
    let n =
        unsafe { libc::lgetxattr(cp.as_ptr(), cn.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODATA) {
            return Ok(None);
        }
        return Err(CliError::Other(format!(
            "cannot read {name} of {}: {e}",
            p.display()
        )));
    }
    buf.truncate(n as usize);
    Ok(Some(buf))
}

fn set_xattr(p: &Path, name: &str, v: &[u8]) -> Result<()> {
    let cp = cstr(p)?;
    let cn = CString::new(name).map_err(|_| CliError::Other("NUL in an xattr name".into()))?;
    // SAFETY: NUL-terminated strings and a buffer of `v.len()` readable bytes.
    let r = unsafe { libc::lsetxattr(cp.as_ptr(), cn.as_ptr(), v.as_ptr().cast(), v.len(), 0) };
    if r != 0 {
        return Err(CliError::Other(format!(
            "cannot write {name} on {} (run as root on the brick's host): {}",
            p.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn encode(l: [u32; 3]) -> Vec<u8> {
    l.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn read_copy(spec: &VolumeSpec, index: usize, path: &str) -> Result<Option<Copy>> {
    let b = &spec.bricks[index];
    let root = PathBuf::from(b.path());
    let file = root.join(path.trim_start_matches('/'));
    let md = match std::fs::symlink_metadata(&file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::io(&file)(e)),
    };
    let gfid = get_xattr(&file, "trusted.gfid")?.and_then(|v| <[u8; 16]>::try_from(v).ok());
    let mut counters = BTreeMap::new();
    for k in replica_set(spec, index) {
        let v = get_xattr(&file, &key_of(spec, k))?;
        counters.insert(k, v.as_deref().and_then(lanes).unwrap_or([0; 3]));
    }
    Ok(Some(Copy {
        index,
        brick: b.to_string(),
        root,
        file,
        gfid,
        is_dir: md.is_dir(),
        is_reg: md.is_file(),
        size: md.len(),
        mtime: (md.mtime(), md.mtime_nsec()),
        counters,
    }))
}

/// The lanes in which two copies accuse each other.
fn split_lanes(copies: &[Copy]) -> [bool; 3] {
    let mut out = [false; 3];
    for a in copies {
        for b in copies.iter().filter(|b| b.index != a.index) {
            let ab = a.counters.get(&b.index).copied().unwrap_or([0; 3]);
            let ba = b.counters.get(&a.index).copied().unwrap_or([0; 3]);
            for l in 0..3 {
                out[l] |= ab[l] != 0 && ba[l] != 0;
            }
        }
    }
    out
}

/// Refuses a replica set with a brick on another host.
fn all_local(spec: &VolumeSpec, set: std::ops::Range<usize>) -> Result<()> {
    let names = procs::local_host_names();
    for k in set {
        let b = &spec.bricks[k];
        if !b.is_on(&names) {
            return Err(CliError::State(format!(
                "brick {b} is on another host: split-brain resolution reads and writes brick \
                 files directly, so it needs every copy of the replica set on this host"
            )));
        }
    }
    Ok(())
}

/// The brick index named by `HOST:PATH` or `PATH`.
fn find_brick(spec: &VolumeSpec, name: &str) -> Result<usize> {
    let names = procs::local_host_names();
    let (host, path) = match name.rsplit_once(':') {
        Some((h, p)) if p.starts_with('/') => (Some(h.trim_matches(['[', ']'])), p),
        _ => (None, name),
    };
    let path = path.trim_end_matches('/');
    for (i, b) in spec.bricks.iter().enumerate() {
        if b.to_string() == name || b.path().trim_end_matches('/') == path {
            let host_ok = match (host, b.host()) {
                (None, _) => true,
                (Some(h), Some(bh)) => h.eq_ignore_ascii_case(bh),
                (Some(h), None) => names.iter().any(|n| n.eq_ignore_ascii_case(h)),
            };
            if !host_ok {
                continue;
            }
            if !b.is_on(&names) {
                return Err(CliError::State(format!(
                    "brick {b} is on another host: run `xlfs volume heal {} split-brain \
                     source-brick {b} ...` there (the command reads brick files directly)",
                    spec.name
                )));
            }
            return Ok(i);
        }
    }
    Err(CliError::Rejected(format!(
        "volume {} has no brick {name}; `xlfs volume info {}` lists them",
        spec.name, spec.name
    )))
}

/// A stable 64-bit checksum (FNV-1a) of a file's content.
fn checksum(p: &Path) -> Result<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(p).map_err(CliError::io(p))?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(CliError::io(p))?;
        if n == 0 {
            return Ok(h);
        }
        for b in &buf[..n] {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Why the set's copies of `path` are not (yet) one healed copy, or `None` when they are.
fn not_healed(
    spec: &VolumeSpec,
    set: std::ops::Range<usize>,
    path: &str,
) -> Result<Option<String>> {
    let mut first: Option<(Copy, Option<u64>)> = None;
    for k in set {
        let Some(c) = read_copy(spec, k, path)? else {
            return Ok(Some(format!("no copy on brick {}", spec.bricks[k])));
        };
        if let Some((k2, l)) = c.counters.iter().find(|(_, l)| **l != [0; 3]) {
            return Ok(Some(format!(
                "brick {} still has counter {} = {:?}",
                c.brick,
                key_of(spec, *k2),
                l
            )));
        }
        let sum = if c.is_reg {
            Some(checksum(&c.file)?)
        } else {
            None
        };
        match &first {
            None => first = Some((c, sum)),
            Some((f, fsum)) => {
                if f.gfid != c.gfid {
                    return Ok(Some(format!(
                        "bricks {} and {} differ in GFID",
                        f.brick, c.brick
                    )));
                }
                if f.is_reg && (f.size != c.size || *fsum != sum) {
                    return Ok(Some(format!(
                        "bricks {} ({} bytes) and {} ({} bytes) differ in content",
                        f.brick, f.size, c.brick, c.size
                    )));
                }
            }
        }
    }
    Ok(None)
}

/// Picks the source among `copies` by `policy`.
fn pick(policy: &Policy, spec: &VolumeSpec, path: &str, copies: &[Copy]) -> Result<usize> {
    let best = |key: &dyn Fn(&Copy) -> (i64, i64), what: &str, other: &str| -> Result<usize> {
        let max = copies.iter().map(key).max().unwrap_or((0, 0));
        let top: Vec<&Copy> = copies.iter().filter(|c| key(c) == max).collect();
        match top.as_slice() {
            [one] => Ok(one.index),
            many => Err(CliError::Rejected(format!(
                "{path}: the copies on bricks {} have the same {what}; cannot choose, use {other}",
                many.iter()
                    .map(|c| c.brick.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))),
        }
    };
    match policy {
        Policy::BiggerFile if copies.iter().any(|c| !c.is_reg) => Err(CliError::Rejected(format!(
            "{path} is not a regular file on every brick: bigger-file compares file sizes; \
             use latest-mtime or source-brick"
        ))),
        Policy::BiggerFile => best(
            &|c| (c.size as i64, 0),
            "size",
            "latest-mtime or source-brick",
        ),
        Policy::LatestMtime => best(&|c| c.mtime, "mtime", "bigger-file or source-brick"),
        Policy::SourceBrick(name) => {
            let i = find_brick(spec, name)?;
            if copies.iter().any(|c| c.index == i) {
                Ok(i)
            } else {
                Err(CliError::Rejected(format!(
                    "{path}: brick {} has no copy of it; choose a brick that has",
                    spec.bricks[i]
                )))
            }
        }
    }
}

/// Makes `source` the only good copy of the split lanes (see the module doc).
fn rewrite_counters(
    spec: &VolumeSpec,
    copies: &[Copy],
    source: usize,
    split: [bool; 3],
) -> Result<()> {
    let Some(src) = copies.iter().find(|c| c.index == source) else {
        return Err(CliError::Other(
            "internal: the source copy is missing".into(),
        ));
    };
    for sink in copies.iter().filter(|c| c.index != source) {
        let mut v = src.counters.get(&sink.index).copied().unwrap_or([0; 3]);
        for l in 0..3 {
            if split[l] && v[l] == 0 {
                v[l] = 1;
            }
        }
        set_xattr(&src.file, &key_of(spec, sink.index), &encode(v))?;
        set_xattr(&sink.file, &key_of(spec, source), &encode([0; 3]))?;
    }
    set_xattr(&src.file, &key_of(spec, source), &encode([0; 3]))?;
    if let Some(g) = src.gfid {
        index_entry(&src.root, Gfid(g))?;
    }
    Ok(())
}

/// Makes sure the brick's heal index lists `g` (the brick keeps that promise for counters
/// written through it; these were written beside it).
fn index_entry(root: &Path, g: Gfid) -> Result<()> {
    let dir = xlfs_posix::index_path(root);
    if dir.is_dir() {
        let p = dir.join(g.to_string());
        std::fs::write(&p, b"").map_err(CliError::io(&p))?;
    }
    Ok(())
}

/// GFID split-brain with a chosen source: removes every sink's name and handle, makes the
/// source's parent accuse the sinks in the entry lane.
fn drop_gfid_sinks(spec: &VolumeSpec, path: &str, copies: &[Copy], source: usize) -> Result<()> {
    let Some(src) = copies.iter().find(|c| c.index == source) else {
        return Err(CliError::Other(
            "internal: the source copy is missing".into(),
        ));
    };
    let parent = match path.rsplit_once('/') {
        Some((p, _)) if !p.is_empty() => p.to_owned(),
        _ => "/".to_owned(),
    };
    let src_parent = src.root.join(parent.trim_start_matches('/'));
    for sink in copies
        .iter()
        .filter(|c| c.index != source && c.gfid != src.gfid)
    {
        if sink.is_dir || src.is_dir {
            return Err(CliError::Rejected(format!(
                "{path}: GFID split-brain of a directory is not supported; move the \
                 directory aside on brick {} by hand",
                sink.brick
            )));
        }
        std::fs::remove_file(&sink.file).map_err(CliError::io(&sink.file))?;
        if let Some(g) = sink.gfid {
            let h = handle_of(&sink.root, Gfid(g));
            match std::fs::remove_file(&h) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CliError::io(&h)(e)),
            }
        }
        let key = key_of(spec, sink.index);
        let mut v = get_xattr(&src_parent, &key)?
            .as_deref()
            .and_then(lanes)
            .unwrap_or([0; 3]);
        v[2] = v[2].max(1);
        set_xattr(&src_parent, &key, &encode(v))?;
    }
    if let Some(g) =
        get_xattr(&src_parent, "trusted.gfid")?.and_then(|v| <[u8; 16]>::try_from(v).ok())
    {
        index_entry(&src.root, Gfid(g))?;
    } else if parent == "/" {
        index_entry(&src.root, Gfid::ROOT)?;
    }
    Ok(())
}

fn handle_of(root: &Path, g: Gfid) -> PathBuf {
    let meta = root.join(xlfs_posix::META_DIR);
    let layout = if meta.join(xlfs_posix::Layout::Nested.dir_name()).exists() {
        xlfs_posix::Layout::Nested
    } else {
        xlfs_posix::Layout::Flat
    };
    meta.join(layout.dir_name()).join(layout.rel(g))
}

/// What resolving one path did.
struct Resolved {
    path: String,
    source: String,
}

/// Resolves `path` in every replica set where it is in split-brain.
fn resolve_path(
    spec: &VolumeSpec,
    req: &Policy,
    path: &str,
    graph: &mut Option<HealGraph>,
    vd: &crate::state::VolumeDir,
) -> Result<Vec<Resolved>> {
    let r = spec.replica.max(1) as usize;
    let sets: Vec<std::ops::Range<usize>> = match req {
        Policy::SourceBrick(name) => vec![replica_set(spec, find_brick(spec, name)?)],
        _ => (0..spec.bricks.len())
            .step_by(r)
            .map(|s| replica_set(spec, s))
            .collect(),
    };
    let names = procs::local_host_names();
    let mut out = Vec::new();
    let mut seen = false;
    let mut not_split = Vec::new();
    for set in sets {
        // Sets with no local copy are another host's business (unless one is remote: then
        // the copy may be there, say so).
        let mut copies = Vec::new();
        for k in set.clone() {
            if spec.bricks[k].is_on(&names)
                && let Some(c) = read_copy(spec, k, path)?
            {
                copies.push(c);
            }
        }
        if copies.is_empty() {
            continue;
        }
        all_local(spec, set.clone())?;
        seen = true;
        if copies.len() < 2 {
            not_split.push(format!("only brick {} has it", copies[0].brick));
            continue;
        }
        let gfid_split = copies.iter().any(|c| c.gfid != copies[0].gfid);
        let split = split_lanes(&copies);
        if !gfid_split && split == [false; 3] {
            continue;
        }
        let source = if gfid_split {
            let Policy::SourceBrick(_) = req else {
                return Err(CliError::Rejected(format!(
                    "{path} is in GFID split-brain (its copies have different GFIDs): only \
                     `split-brain source-brick HOST:BRICK {path}` resolves that"
                )));
            };
            let s = pick(req, spec, path, &copies)?;
            drop_gfid_sinks(spec, path, &copies, s)?;
            let kept: Vec<Copy> = copies
                .iter()
                .filter(|c| c.gfid == copies.iter().find(|x| x.index == s).and_then(|x| x.gfid))
                .cloned()
                .collect();
            let lanes_left = split_lanes(&kept);
            if lanes_left != [false; 3] {
                rewrite_counters(spec, &kept, s, lanes_left)?;
            }
            s
        } else {
            let s = pick(req, spec, path, &copies)?;
            rewrite_counters(spec, &copies, s, split)?;
            s
        };
        heal(spec, vd, graph, path, set.clone())?;
        heal_children(spec, source, path, graph);
        out.push(Resolved {
            path: path.to_owned(),
            source: spec.bricks[source].to_string(),
        });
    }
    if !seen {
        return Err(CliError::Rejected(format!(
            "{path}: no copy on this host's bricks of volume {}",
            spec.name
        )));
    }
    if out.is_empty() {
        let why = if not_split.is_empty() {
            String::new()
        } else {
            format!(" ({})", not_split.join("; "))
        };
        return Err(CliError::Rejected(format!(
            "{path} is not in split-brain{why}"
        )));
    }
    Ok(out)
}

/// Looks `path` up through the graph until the set's copies are one (at most 4 lookups: an
/// entry heal's new name gets its data at the next).
fn heal(
    spec: &VolumeSpec,
    vd: &crate::state::VolumeDir,
    graph: &mut Option<HealGraph>,
    path: &str,
    set: std::ops::Range<usize>,
) -> Result<()> {
    if graph.is_none() {
        let g = HealGraph::build(vd, &spec.name)?;
        g.rt.block_on(g.connect(spec, vd, Duration::from_secs(10)));
        *graph = Some(g);
    }
    let Some(g) = graph.as_ref() else {
        return Err(CliError::Other("internal: no heal graph".into()));
    };
    let top = g.volume.graph().top().clone();
    let mut why = None;
    let mut last_err = None;
    for _ in 0..4 {
        if let Err(e) = g.rt.block_on(walk(&top, path)) {
            last_err = Some(e.to_string());
        }
        why = not_healed(spec, set.clone(), path)?;
        if why.is_none() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(CliError::Other(format!(
        "{path}: the counters now name the source but the heal did not finish: {}{} \
         (are all bricks of the set running? `xlfs volume status {}`; then `xlfs volume heal {}`)",
        why.unwrap_or_default(),
        last_err
            .map(|e| format!("; lookup: {e}"))
            .unwrap_or_default(),
        spec.name,
        spec.name
    )))
}

/// After a directory's entry heal, looks up each of its names on the source brick once, so
/// that names the entry heal made on the sinks get their data and metadata now rather than
/// at their next lookup. Failures are left to `heal` (they stay indexed).
fn heal_children(spec: &VolumeSpec, source: usize, path: &str, graph: &Option<HealGraph>) {
    let dir = PathBuf::from(spec.bricks[source].path()).join(path.trim_start_matches('/'));
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let (Some(g), Ok(rd)) = (graph.as_ref(), std::fs::read_dir(&dir)) else {
        return;
    };
    let top = g.volume.graph().top().clone();
    for e in rd.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if path == "/" && name == xlfs_posix::META_DIR {
            continue;
        }
        let child = format!("{}/{name}", path.trim_end_matches('/'));
        let _ = g.rt.block_on(walk(&top, &child));
    }
}

/// Every path the source brick's index lists in split-brain with another copy of its set.
fn split_paths(spec: &VolumeSpec, source: usize) -> Result<Vec<String>> {
    let root = PathBuf::from(spec.bricks[source].path());
    let gfids = xlfs_posix::index_entries(&root).map_err(|e| {
        CliError::Other(format!(
            "cannot read the heal index of brick {}: {e}",
            spec.bricks[source]
        ))
    })?;
    let mut out = Vec::new();
    for l in xlfs_posix::locate(&root, &gfids) {
        let Some(p) = l.path else { continue };
        let mut copies = Vec::new();
        for k in replica_set(spec, source) {
            if let Some(c) = read_copy(spec, k, &p)? {
                copies.push(c);
            }
        }
        if split_lanes(&copies) != [false; 3] {
            out.push(p);
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

pub fn run(ctx: &Ctx, name: &str, req: &Request) -> Result<u8> {
    let (vd, spec) = ctx.state().load(name)?;
    if spec.replica <= 1 {
        return Err(CliError::State(format!(
            "volume {name} has no replicas: there is no split-brain to resolve"
        )));
    }
    let mut graph = None;
    let result = (|| -> Result<u8> {
        let paths = match (&req.path, &req.policy) {
            (Some(p), _) => vec![p.clone()],
            (None, Policy::SourceBrick(b)) => {
                let i = find_brick(&spec, b)?;
                all_local(&spec, replica_set(&spec, i))?;
                let v = split_paths(&spec, i)?;
                if v.is_empty() {
                    println!(
                        "No split-brain entries on brick {} and its replicas",
                        spec.bricks[i]
                    );
                    return Ok(code::OK);
                }
                v
            }
            (None, _) => {
                return Err(CliError::Rejected(
                    "split-brain: bigger-file and latest-mtime need a PATH".into(),
                ));
            }
        };
        let many = paths.len() > 1;
        let mut failed = Vec::new();
        for p in &paths {
            match resolve_path(&spec, &req.policy, p, &mut graph, &vd) {
                Ok(done) => {
                    for r in done {
                        println!("Healed {} from brick {}", r.path, r.source);
                    }
                }
                Err(e) if many => {
                    println!("Failed {p}: {e}");
                    failed.push(p.clone());
                }
                Err(e) => return Err(e),
            }
        }
        if failed.is_empty() {
            Ok(code::OK)
        } else {
            Err(CliError::Other(format!(
                "{} of {} split-brain entries not resolved: {}",
                failed.len(),
                paths.len(),
                failed.join(", ")
            )))
        }
    })();
    if let Some(g) = graph {
        g.close();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_brain_words_parse() {
        assert_eq!(
            parse(&["bigger-file", "dir/f"]).ok(),
            Some(Request {
                policy: Policy::BiggerFile,
                path: Some("/dir/f".into())
            })
        );
        assert_eq!(
            parse(&["source-brick", "h:/b"]).ok(),
            Some(Request {
                policy: Policy::SourceBrick("h:/b".into()),
                path: None
            })
        );
        assert!(parse(&["latest-mtime"]).is_err());
        assert!(parse(&["bigger-file", "a", "b"]).is_err());
        assert!(parse(&["biggest", "a"]).is_err());
    }

    fn copy(index: usize, size: u64, mtime: i64, counters: [[u32; 3]; 2]) -> Copy {
        Copy {
            index,
            brick: format!("/b{index}"),
            root: PathBuf::from(format!("/b{index}")),
            file: PathBuf::from(format!("/b{index}/f")),
            gfid: Some([1; 16]),
            is_dir: false,
            is_reg: true,
            size,
            mtime: (mtime, 0),
            counters: [(0, counters[0]), (1, counters[1])].into_iter().collect(),
        }
    }

    #[test]
    fn split_lanes_need_mutual_accusation_in_one_lane() {
        // 0 accuses 1 in data, 1 accuses 0 in data and metadata: data only.
        let a = copy(0, 1, 1, [[0; 3], [2, 0, 0]]);
        let b = copy(1, 1, 1, [[1, 1, 0], [0; 3]]);
        assert_eq!(split_lanes(&[a.clone(), b.clone()]), [true, false, false]);
        // One-sided blame (a stale copy) and dirty counts are not split-brain.
        let c = copy(1, 1, 1, [[0; 3], [5, 5, 5]]);
        assert_eq!(split_lanes(&[a, c]), [false; 3]);
    }

    #[test]
    fn policies_pick_the_bigger_and_the_newer_and_refuse_ties() {
        let bricks = ["/b0", "/b1"]
            .iter()
            .map(|b| xlfs_volgen::Brick::parse(b).expect("brick"))
            .collect();
        let mut spec = VolumeSpec::new("v", bricks);
        spec.replica = 2;
        let z = [[0; 3]; 2];
        let v = [copy(0, 5000, 10, z), copy(1, 3000, 20, z)];
        assert_eq!(pick(&Policy::BiggerFile, &spec, "/f", &v).ok(), Some(0));
        assert_eq!(pick(&Policy::LatestMtime, &spec, "/f", &v).ok(), Some(1));
        let tie = [copy(0, 4000, 10, z), copy(1, 4000, 10, z)];
        assert!(pick(&Policy::BiggerFile, &spec, "/f", &tie).is_err());
        assert!(pick(&Policy::LatestMtime, &spec, "/f", &tie).is_err());
    }
}
