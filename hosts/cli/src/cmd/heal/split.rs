//! `xlfs volume heal VOL split-brain bigger-file PATH | latest-mtime PATH | source-brick
//! HOST:BRICK [PATH]`: resolves a split-brain by choosing the good copy (GlusterFS's commands
//! of the same names).
//!
//! Every copy is read and written through its own brick's protocol/client in the volume's
//! client graph, built in this process (as `heal` does), so the bricks of a replica set may
//! be on any hosts the command reaches; every brick of the set must answer. For PATH it reads
//! each copy (GFID, size, mtime, the set's pending counters `trusted.afr.<vol>-client-<j>`),
//! refuses with "not in split-brain" unless two copies accuse each other in some lane, picks
//! the source by the policy (a tie is an error), then changes the counters (by `xattrop`, so
//! each brick keeps its heal index) so that the source is the only good copy:
//! - on the source: every sink's key gets a non-zero accusation in the split lanes, its own
//!   key (the dirty count) zero;
//! - on every sink: the source's key zero (the sink accuses nobody it could win against).
//!
//! The GFID and every other xattr are left as they are. It then looks PATH up through the
//! replicate of the graph (which heals inline, see [`super::run`]) and checks the result
//! through the bricks: every copy present with one GFID, regular files of equal size and
//! checksum, every counter of the set zero. Only then does it say `Healed`.
//!
//! GFID split-brain (one name, different GFIDs): only with `source-brick`, which unlinks the
//! sinks' name (the brick drops its handle with the last link), makes the source's parent
//! accuse the sinks in the entry lane, and heals (the entry heal makes the name again with
//! the source's GFID). Directories with different GFIDs are refused.
//!
//! `source-brick` without PATH lists the entries in split-brain from the source brick's heal
//! index: read from disk when the brick is on this host, else from its host's daemon in
//! cluster mode (as `heal info` does).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use xlator_api::{Ctx as FopCtx, Errno, FileType, Gfid, Loc, Subvol, Xattr, XattropOp, Xattrs};
use xlfs_volgen::VolumeSpec;

use super::info::{key_of, lanes, replica_set};
use super::run::{HealGraph, new_fd, walk};
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

/// One copy of PATH, read through its brick.
#[derive(Clone, Debug)]
struct Copy {
    index: usize,
    brick: String,
    /// The parent directory's GFID on that brick.
    parent: Gfid,
    name: String,
    gfid: Option<[u8; 16]>,
    is_dir: bool,
    is_reg: bool,
    size: u64,
    mtime: (i64, i64),
    /// Key of brick k → lanes, for the bricks of the set.
    counters: BTreeMap<usize, [u32; 3]>,
}

/// The bricks of the volume, each through its protocol/client in the heal graph.
struct Bricks<'a> {
    spec: &'a VolumeSpec,
    g: &'a HealGraph,
}

impl Bricks<'_> {
    fn brick(&self, k: usize) -> String {
        self.spec.bricks[k].to_string()
    }

    fn client(&self, k: usize) -> Result<Subvol> {
        let name = format!("{}-client-{}", self.spec.name, self.spec.brick_id(k));
        self.g
            .volume
            .graph()
            .get(&name)
            .cloned()
            .ok_or_else(|| CliError::Other(format!("the client volfile has no translator {name}")))
    }

    /// An error of brick `k` as the command says it.
    fn err(&self, k: usize, what: &str, e: Errno) -> CliError {
        if matches!(e, Errno::ENOTCONN | Errno::ETIMEDOUT) {
            return CliError::State(format!(
                "brick {} does not answer ({what}: {e}): every brick of the replica set must \
                 be running and reachable from here (`xlfs volume status {}`)",
                self.brick(k),
                self.spec.name
            ));
        }
        CliError::Other(format!("brick {}: {what}: {e}", self.brick(k)))
    }

    fn block<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.g.rt.block_on(f)
    }

    /// Brick `k`'s copy of `path` (`None`: no such name there).
    fn copy(&self, k: usize, path: &str) -> Result<Option<Copy>> {
        let c = self.client(k)?;
        let cx = FopCtx::root();
        let mut parent = Gfid::ROOT;
        // The root is looked up as "." in itself (as `walk` does).
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let (last, dirs) = comps.split_last().unwrap_or((&".", &[]));
        for d in dirs {
            match self.block(c.lookup(&cx, Loc::new(parent, *d))) {
                Ok(e) => parent = e.attr.gfid,
                Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
                Err(e) => return Err(self.err(k, &format!("lookup of {d}"), e)),
            }
        }
        let e = match self.block(c.lookup(&cx, Loc::new(parent, *last))) {
            Ok(e) => e,
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
            Err(e) => return Err(self.err(k, &format!("lookup of {path}"), e)),
        };
        let gfid = e.attr.gfid;
        let counters = self.counters(k, gfid, replica_set(self.spec, k))?;
        Ok(Some(Copy {
            index: k,
            brick: self.brick(k),
            parent,
            name: (*last).to_owned(),
            gfid: (!gfid.is_null()).then_some(gfid.0),
            is_dir: e.attr.is_dir(),
            is_reg: e.attr.kind == FileType::Regular,
            size: e.attr.size,
            mtime: (e.attr.mtime.sec, i64::from(e.attr.mtime.nsec)),
            counters,
        }))
    }

    /// The counters of `gfid` on brick `k` under the keys of `set` (absent: zero).
    fn counters(
        &self,
        k: usize,
        gfid: Gfid,
        set: std::ops::Range<usize>,
    ) -> Result<BTreeMap<usize, [u32; 3]>> {
        let c = self.client(k)?;
        let mut out = BTreeMap::new();
        for j in set {
            let key = key_of(self.spec, j);
            let v = match self.block(c.getxattr(&FopCtx::root(), gfid, key.as_str().into())) {
                Ok(v) => lanes(v.as_slice()).unwrap_or([0; 3]),
                Err(Errno::ENODATA) => [0; 3],
                Err(e) => return Err(self.err(k, &format!("reading {key}"), e)),
            };
            out.insert(j, v);
        }
        Ok(out)
    }

    /// Makes brick `k`'s counter of `gfid` under brick `j`'s key `want`, by adding the
    /// difference (xattrop: the brick lists the object in its heal index when non-zero).
    fn set_counter(&self, k: usize, gfid: Gfid, j: usize, want: [u32; 3]) -> Result<()> {
        let cur = self.counters(k, gfid, j..j + 1)?[&j];
        if cur == want {
            return Ok(());
        }
        let delta: Vec<u8> = (0..3)
            .flat_map(|l| want[l].wrapping_sub(cur[l]).to_be_bytes())
            .collect();
        let key = key_of(self.spec, j);
        let xs: Xattrs = vec![Xattr {
            name: key.as_str().into(),
            value: delta.into(),
        }]
        .into();
        self.block(
            self.client(k)?
                .xattrop(&FopCtx::root(), gfid, XattropOp::AddArray32, xs),
        )
        .map(|_| ())
        .map_err(|e| self.err(k, &format!("writing {key}"), e))
    }

    /// A stable 64-bit checksum (FNV-1a) of brick `k`'s copy of regular file `gfid`.
    fn checksum(&self, k: usize, gfid: Gfid) -> Result<u64> {
        let c = self.client(k)?;
        let cx = FopCtx::root();
        let fd = new_fd(gfid, libc::O_RDONLY);
        self.block(c.open(&cx, fd))
            .map_err(|e| self.err(k, "open", e))?;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut off = 0u64;
        let r = loop {
            match self.block(c.readv(&cx, fd, off, 1 << 20)) {
                Ok(r) if r.data.is_empty() => break Ok(h),
                Ok(r) => {
                    for b in r.data.as_slice() {
                        h ^= u64::from(*b);
                        h = h.wrapping_mul(0x0100_0000_01b3);
                    }
                    off += r.data.len() as u64;
                }
                Err(e) => break Err(self.err(k, "read", e)),
            }
        };
        let _ = self.block(c.release(&cx, fd));
        r
    }

    /// The names in brick `k`'s copy of directory `dir`.
    fn names(&self, k: usize, dir: Gfid) -> Result<Vec<String>> {
        let c = self.client(k)?;
        let cx = FopCtx::root();
        let fd = new_fd(dir, libc::O_RDONLY | libc::O_DIRECTORY);
        self.block(c.opendir(&cx, fd))
            .map_err(|e| self.err(k, "opendir", e))?;
        let mut out = Vec::new();
        let mut offset = 0;
        let r = loop {
            match self.block(c.readdirp(&cx, fd, offset, 64 * 1024)) {
                Ok(page) if page.is_empty() => break Ok(()),
                Ok(page) => {
                    for e in page.iter() {
                        offset = e.next_offset;
                        if e.name.as_str() != "." && e.name.as_str() != ".." {
                            out.push(e.name.to_string());
                        }
                    }
                }
                Err(e) => break Err(self.err(k, "readdir", e)),
            }
        };
        let _ = self.block(c.releasedir(&cx, fd));
        r.map(|()| out)
    }
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

/// The brick index named by `HOST:PATH` or `PATH` (a bare path: a brick of this host, or
/// the only brick with that path).
fn find_brick(spec: &VolumeSpec, name: &str) -> Result<usize> {
    let names = procs::local_host_names();
    let (host, path) = match name.rsplit_once(':') {
        Some((h, p)) if p.starts_with('/') => (Some(h.trim_matches(['[', ']'])), p),
        _ => (None, name),
    };
    let path = path.trim_end_matches('/');
    let mut found: Vec<usize> = Vec::new();
    for (i, b) in spec.bricks.iter().enumerate() {
        if b.to_string() == name || b.path().trim_end_matches('/') == path {
            let host_ok = match (host, b.host()) {
                (None, _) => true,
                (Some(h), Some(bh)) => h.eq_ignore_ascii_case(bh),
                (Some(h), None) => names.iter().any(|n| n.eq_ignore_ascii_case(h)),
            };
            if host_ok {
                found.push(i);
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(CliError::Rejected(format!(
            "volume {} has no brick {name}; `xlfs volume info {}` lists them",
            spec.name, spec.name
        ))),
        many => match many.iter().find(|i| spec.bricks[**i].is_on(&names)) {
            Some(i) => Ok(*i),
            None => Err(CliError::Rejected(format!(
                "{name} names several bricks of volume {}; say HOST:PATH",
                spec.name
            ))),
        },
    }
}

/// Why the set's copies of `path` are not (yet) one healed copy, or `None` when they are.
fn not_healed(b: &Bricks, set: std::ops::Range<usize>, path: &str) -> Result<Option<String>> {
    let mut first: Option<(Copy, Option<u64>)> = None;
    for k in set {
        let Some(c) = b.copy(k, path)? else {
            return Ok(Some(format!("no copy on brick {}", b.brick(k))));
        };
        if let Some((k2, l)) = c.counters.iter().find(|(_, l)| **l != [0; 3]) {
            return Ok(Some(format!(
                "brick {} still has counter {} = {:?}",
                c.brick,
                key_of(b.spec, *k2),
                l
            )));
        }
        let sum = match (c.is_reg, c.gfid) {
            (true, Some(g)) => Some(b.checksum(k, Gfid(g))?),
            _ => None,
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
fn rewrite_counters(b: &Bricks, copies: &[Copy], source: usize, split: [bool; 3]) -> Result<()> {
    let Some(src) = copies.iter().find(|c| c.index == source) else {
        return Err(CliError::Other(
            "internal: the source copy is missing".into(),
        ));
    };
    let Some(sg) = src.gfid.map(Gfid) else {
        return Err(CliError::Other(format!(
            "brick {}: the source copy has no GFID",
            src.brick
        )));
    };
    for sink in copies.iter().filter(|c| c.index != source) {
        let mut v = src.counters.get(&sink.index).copied().unwrap_or([0; 3]);
        for l in 0..3 {
            if split[l] && v[l] == 0 {
                v[l] = 1;
            }
        }
        b.set_counter(source, sg, sink.index, v)?;
        if let Some(g) = sink.gfid {
            b.set_counter(sink.index, Gfid(g), source, [0; 3])?;
        }
    }
    b.set_counter(source, sg, source, [0; 3])
}

/// GFID split-brain with a chosen source: unlinks every sink's name, makes the source's
/// parent accuse the sinks in the entry lane.
fn drop_gfid_sinks(b: &Bricks, path: &str, copies: &[Copy], source: usize) -> Result<()> {
    let Some(src) = copies.iter().find(|c| c.index == source) else {
        return Err(CliError::Other(
            "internal: the source copy is missing".into(),
        ));
    };
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
        let c = b.client(sink.index)?;
        b.block(c.unlink(&FopCtx::root(), Loc::new(sink.parent, sink.name.as_str())))
            .map_err(|e| b.err(sink.index, &format!("unlink of {path}"), e))?;
        let mut v = b.counters(source, src.parent, sink.index..sink.index + 1)?[&sink.index];
        v[2] = v[2].max(1);
        b.set_counter(source, src.parent, sink.index, v)?;
    }
    Ok(())
}

/// What resolving one path did.
struct Resolved {
    path: String,
    source: String,
}

/// Resolves `path` in every replica set where it is in split-brain.
fn resolve_path(b: &Bricks, req: &Policy, path: &str) -> Result<Vec<Resolved>> {
    let spec = b.spec;
    let r = spec.replica.max(1) as usize;
    let sets: Vec<std::ops::Range<usize>> = match req {
        Policy::SourceBrick(name) => vec![replica_set(spec, find_brick(spec, name)?)],
        _ => (0..spec.bricks.len())
            .step_by(r)
            .map(|s| replica_set(spec, s))
            .collect(),
    };
    let mut out = Vec::new();
    let mut seen = false;
    let mut not_split = Vec::new();
    for set in sets {
        let mut copies = Vec::new();
        for k in set.clone() {
            if let Some(c) = b.copy(k, path)? {
                copies.push(c);
            }
        }
        if copies.is_empty() {
            continue;
        }
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
            drop_gfid_sinks(b, path, &copies, s)?;
            let sg = copies.iter().find(|x| x.index == s).and_then(|x| x.gfid);
            let kept: Vec<Copy> = copies.iter().filter(|c| c.gfid == sg).cloned().collect();
            let lanes_left = split_lanes(&kept);
            if lanes_left != [false; 3] {
                rewrite_counters(b, &kept, s, lanes_left)?;
            }
            s
        } else {
            let s = pick(req, spec, path, &copies)?;
            rewrite_counters(b, &copies, s, split)?;
            s
        };
        heal(b, path, set.clone())?;
        heal_children(b, source, path);
        out.push(Resolved {
            path: path.to_owned(),
            source: spec.bricks[source].to_string(),
        });
    }
    if !seen {
        return Err(CliError::Rejected(format!(
            "{path}: no brick of volume {} has it",
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
fn heal(b: &Bricks, path: &str, set: std::ops::Range<usize>) -> Result<()> {
    let top = b.g.volume.graph().top().clone();
    let mut why = None;
    let mut last_err = None;
    for _ in 0..4 {
        if let Err(e) = b.block(walk(&top, path)) {
            last_err = Some(e.to_string());
        }
        why = not_healed(b, set.clone(), path)?;
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
        b.spec.name,
        b.spec.name
    )))
}

/// After a directory's entry heal, looks up each of its names on the source brick once, so
/// that names the entry heal made on the sinks get their data and metadata now rather than
/// at their next lookup. Failures are left to `heal` (they stay indexed).
fn heal_children(b: &Bricks, source: usize, path: &str) {
    let Ok(Some(dir)) = b.copy(source, path) else {
        return;
    };
    let (true, Some(g)) = (dir.is_dir, dir.gfid) else {
        return;
    };
    let Ok(names) = b.names(source, Gfid(g)) else {
        return;
    };
    let top = b.g.volume.graph().top().clone();
    for name in names {
        if path == "/" && name == xlfs_posix::META_DIR {
            continue;
        }
        let child = format!("{}/{name}", path.trim_end_matches('/'));
        let _ = b.block(walk(&top, &child));
    }
}

/// Every path the source brick's heal index lists in split-brain with another copy of its
/// set: the index read from disk on this host, else as its host's daemon reports it (cluster
/// mode, see [`super::info`]).
fn split_paths(ctx: &Ctx, b: &Bricks, source: usize) -> Result<Vec<String>> {
    let spec = b.spec;
    let mut out = Vec::new();
    if spec.bricks[source].is_on(&procs::local_host_names()) {
        let root = PathBuf::from(spec.bricks[source].path());
        let gfids = xlfs_posix::index_entries(&root).map_err(|e| {
            CliError::Other(format!(
                "cannot read the heal index of brick {}: {e}",
                spec.bricks[source]
            ))
        })?;
        for l in xlfs_posix::locate(&root, &gfids) {
            let Some(p) = l.path else { continue };
            let mut copies = Vec::new();
            for k in replica_set(spec, source) {
                if let Some(c) = b.copy(k, &p)? {
                    copies.push(c);
                }
            }
            if split_lanes(&copies) != [false; 3] {
                out.push(p);
            }
        }
    } else {
        match super::info::reported_split_paths(ctx, spec, source)? {
            Some(v) => out = v,
            None => {
                return Err(CliError::State(format!(
                    "brick {} is on another host and no xlfs-mgmtd here can ask it for its \
                     heal index: name the PATH (`... source-brick {} PATH`), or run this on \
                     that host",
                    spec.bricks[source], spec.bricks[source]
                )));
            }
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
    if let (None, Policy::BiggerFile | Policy::LatestMtime) = (&req.path, &req.policy) {
        return Err(CliError::Rejected(
            "split-brain: bigger-file and latest-mtime need a PATH".into(),
        ));
    }
    if let Policy::SourceBrick(b) = &req.policy {
        find_brick(&spec, b)?;
    }
    let g = HealGraph::build(&vd, name)?;
    g.rt.block_on(g.connect(&spec, &vd, Duration::from_secs(10)));
    let b = Bricks { spec: &spec, g: &g };
    let result = (|| -> Result<u8> {
        let paths = match (&req.path, &req.policy) {
            (Some(p), _) => vec![p.clone()],
            (None, Policy::SourceBrick(name)) => {
                let i = find_brick(&spec, name)?;
                let v = split_paths(ctx, &b, i)?;
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
            match resolve_path(&b, &req.policy, p) {
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
    g.close();
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
            parent: Gfid::ROOT,
            name: "f".into(),
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
