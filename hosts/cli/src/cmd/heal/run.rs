//! `xlfs volume heal VOL [full] [--every D]`: heals through the volume's own client graph,
//! built in this process from `client.vol` as xlfs-mount builds it, with replicate's heals
//! made inline (`background-self-heal-count 0`, `self-heal on`): a lookup that returns has
//! healed what it found.
//!
//! Index heal: every GFID the local bricks' indexes list with a non-zero counter is looked up
//! by its path, one component at a time from the root (so parents heal before their
//! children: a name missing on a stale copy is made by the parent's entry heal, and the
//! object's own data or metadata heal comes with the lookup of the next pass). Passes repeat
//! while the index shrinks (at most [`MAX_PASSES`]). `full` looks up every object of the
//! volume (readdirp from the root) instead. Either way the local indexes are read again at
//! the end and what is still listed is reported (exit 8).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use serde::Serialize;
use xlator_api::{Ctx as FopCtx, Errno, Fd, FdId, FileType, Gfid, Loc, Subvol};
use xlfs_core::registry::Registry;
use xlfs_core::volfile::{OptionDecl, Volfile};
use xlfs_core::volume::Volume;
use xlfs_volgen::VolumeSpec;

use super::Args;
use super::info::{self, BrickIndex};
use crate::cmd::{Ctx, brick_states, print_json};
use crate::error::{CliError, Result, code};

/// Index passes per heal at most (each may uncover work for the next: a name made by an
/// entry heal is data-healed by the next lookup).
pub const MAX_PASSES: usize = 4;
const REPLICATE_TYPES: [&str; 2] = ["cluster/replicate", "cluster/afr"];

#[derive(Serialize, Default)]
struct Report {
    volume: String,
    mode: &'static str,
    /// Objects looked up through the graph.
    looked_up: u64,
    /// Lookups of the last pass that failed (path, error).
    failed: Vec<(String, String)>,
    /// Indexed paths of the last pass that are no longer in the volume (a lookup on the way
    /// answered ENOENT or ESTALE): removed while a brick was down, or since they were indexed.
    gone: usize,
    /// Index entries this host's bricks have no path for (skipped).
    no_path: usize,
    passes: usize,
    /// Children up per replica set when the heal started (set name, up, of).
    connected: Vec<(String, u64, usize)>,
    /// Per local brick: entries still pending.
    pending: Vec<(String, usize)>,
}

/// The volume's client graph built in this process with replicate's heals inline, and the
/// runtime it runs on (drop the volume before shutting the runtime down).
pub struct HealGraph {
    pub rt: tokio::runtime::Runtime,
    pub volume: Arc<Volume>,
    /// Replicate names and child counts.
    pub sets: Vec<(String, usize)>,
}

impl HealGraph {
    /// Builds the graph of `vd`'s `client.vol`; refused for a volume without replicas.
    pub fn build(vd: &crate::state::VolumeDir, name: &str) -> Result<HealGraph> {
        let path = vd.client_volfile();
        let text = std::fs::read_to_string(&path).map_err(CliError::io(&path))?;
        let mut vf = Volfile::parse(&text, &path.display().to_string())
            .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?;
        let sets = inline_heals(&mut vf);
        if sets.is_empty() {
            return Err(CliError::State(format!(
                "volume {name} has no replicas (no cluster/replicate in its client volfile): nothing heals"
            )));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("xlfs-heal")
            .build()
            .map_err(|e| CliError::Other(format!("cannot start the async runtime: {e}")))?;
        xlfs_core::services::set_fallback_runtime(rt.handle().clone());
        let volume = {
            let _guard = rt.enter();
            Arc::new(
                Volume::new(vf, Arc::new(Registry::new()))
                    .map_err(|e| CliError::Other(format!("cannot build the client graph: {e}")))?,
            )
        };
        Ok(HealGraph { rt, volume, sets })
    }

    /// Waits for the bricks that answer to connect (see [`wait_connected`]).
    pub async fn connect(
        &self,
        spec: &VolumeSpec,
        vd: &crate::state::VolumeDir,
        timeout: Duration,
    ) -> Vec<(String, u64, usize)> {
        wait_connected(&self.volume, spec, vd, &self.sets, timeout).await
    }

    /// Drops the graph, then the runtime.
    pub fn close(self) {
        drop(self.volume);
        self.rt.shutdown_timeout(Duration::from_secs(2));
    }
}

pub fn run(ctx: &Ctx, a: &Args, full: bool) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let g = HealGraph::build(&vd, &a.name)?;
    let result = g.rt.block_on(async {
        let connected = g.connect(&spec, &vd, a.connect_timeout).await;
        loop {
            let none = BTreeSet::new();
            let pass = Pass {
                full,
                json: a.json,
                parallel: a.parallel.into(),
            };
            let code = round(&g.volume, &spec, &vd, pass, &connected, &none).await?;
            let Some(every) = a.every else {
                return Ok(code);
            };
            tokio::time::sleep(every).await;
        }
    });
    g.close();
    result
}

/// How often the self-heal daemon reads the local indexes and the children up.
const TICK: Duration = Duration::from_secs(2);
/// The daemon's longest delay between heals while nothing heals (no `--every`).
const DAEMON_MAX_DELAY: Duration = Duration::from_secs(60);
/// How long a new daemon waits for `volume start` to record it before taking its absence
/// as a stop.
const RECORD_WAIT: Duration = Duration::from_secs(10);

fn shd_log(msg: &str) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("[shd {t}] {msg}");
}

/// How a daemon's graph ended.
enum DaemonEnd {
    /// Stopped: exit.
    Stop,
    /// The client volfile changed (add-brick, remove-brick, volume set): build it again.
    Reload,
}

/// The self-heal daemon (`volume heal VOL --daemon`): see [`Args::daemon`]. It ends when
/// run.json no longer names it (the volume was stopped, or another daemon took over), and
/// builds its graph again when the volume's client volfile changes.
pub fn daemon(ctx: &Ctx, a: &Args) -> Result<u8> {
    let me = std::process::id();
    let max = a.every.unwrap_or(DAEMON_MAX_DELAY).max(TICK);
    let born = Instant::now();
    let (vd, spec) = ctx.state().load(&a.name)?;
    if !crate::cmd::start::shd_wanted(&spec) {
        shd_log(&format!(
            "{} is off for volume {} (or it has no replicas): exiting",
            crate::cmd::start::SHD_OPTION,
            spec.name
        ));
        return Ok(code::OK);
    }
    let volfile = std::fs::read(vd.client_volfile()).unwrap_or_default();
    let g = HealGraph::build(&vd, &a.name)?;
    shd_log(&format!(
        "self-heal daemon of volume {} ({}; pid {me}): heals the local indexes, at most \
         {max:?} apart while nothing heals",
        spec.name,
        spec.layout()
    ));
    let end = g.rt.block_on(async {
        let mut connected = g.connect(&spec, &vd, a.connect_timeout).await;
        let mut delay = TICK;
        let mut last: Option<Instant> = None;
        let mut settling = Settling::default();
        loop {
            let ours = vd
                .load_run()
                .is_ok_and(|run| run.shd.as_ref().is_some_and(|s| s.pid == me));
            if !ours && born.elapsed() > RECORD_WAIT {
                shd_log("no longer the volume's self-heal daemon (volume stopped): exiting");
                return DaemonEnd::Stop;
            }
            if std::fs::read(vd.client_volfile()).unwrap_or_default() != volfile {
                shd_log("the volume's client volfile changed: building the graph again");
                return DaemonEnd::Reload;
            }
            let now = children_up(&g.volume, &g.sets).await;
            let total = |v: &[(String, u64, usize)]| v.iter().map(|(_, u, _)| *u).sum::<u64>();
            let came_up = total(&now) > total(&connected);
            connected = now;
            let (pending, fresh) = match pending_now(&spec, &vd) {
                Ok((all, in_flight)) => (all, settling.fresh(in_flight, SystemTime::now())),
                Err(e) => {
                    shd_log(&format!("cannot read the local indexes: {e}"));
                    (0, BTreeSet::new())
                }
            };
            let due = last.is_none_or(|t| t.elapsed() >= delay);
            if pending > fresh.len() && (came_up || due) {
                if came_up {
                    shd_log("a brick came back: healing now");
                }
                let pass = Pass {
                    full: false,
                    json: false,
                    parallel: a.parallel.into(),
                };
                let r = round(&g.volume, &spec, &vd, pass, &connected, &fresh).await;
                if let Err(e) = r {
                    shd_log(&format!("heal failed: {e}"));
                }
                let left = pending_now(&spec, &vd).map_or(pending, |(all, _)| all);
                shd_log(&format!("{pending} entries pending before, {left} after"));
                delay = if left < pending {
                    TICK
                } else {
                    (delay * 2).min(max)
                };
                last = Some(Instant::now());
            }
            tokio::time::sleep(TICK).await;
        }
    });
    g.close();
    match end {
        DaemonEnd::Stop => Ok(code::OK),
        DaemonEnd::Reload => {
            // The same process (pid, record) again, with a fresh graph and runtime: the
            // host services keep their first runtime as the fallback for good.
            use std::os::unix::process::CommandExt as _;
            let exe = std::env::current_exe()
                .map_err(|e| CliError::Process(format!("cannot find this program: {e}")))?;
            let e = std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .exec();
            Err(CliError::Process(format!(
                "self-heal daemon: cannot run itself again: {e}"
            )))
        }
    }
}

/// Entries the local bricks' indexes list now, and those of them that look like writes in
/// flight ([`info::in_flight`]).
fn pending_now(spec: &VolumeSpec, vd: &crate::state::VolumeDir) -> Result<(usize, info::InFlight)> {
    let run = vd.load_run()?;
    let online: Vec<bool> = brick_states(spec, &run).iter().map(|b| b.online).collect();
    let bricks = info::local_indexes(spec, &online)?;
    Ok((info::pending(&bricks).len(), info::in_flight(spec, &bricks)))
}

/// How long the daemon leaves an entry that looks like a write in flight (only "dirty"
/// marks, nobody accused) before healing it, counted from when it first saw the entry or from
/// the object's last change on a local brick, whichever is later. A client's eager hold
/// keeps such marks for up to `post-op-delay` (3 s by default) after its last write, and up
/// to 10 of those while it keeps writing; every write moves the object's ctime. Healing them
/// would take the file's locks and end every hold at once (a heal per file `tar x` writes).
/// Marks on an object that stopped changing belong to a client that died.
const SETTLE: Duration = Duration::from_secs(10);

/// When the daemon first saw each entry that looks like a write in flight.
#[derive(Default)]
struct Settling {
    since: HashMap<[u8; 16], Instant>,
}

impl Settling {
    /// Of the entries in flight now (each with when its object last changed), those first
    /// seen or changed less than [`SETTLE`] ago (not healed yet); entries no longer in
    /// flight are forgotten.
    fn fresh(&mut self, in_flight: info::InFlight, wall: SystemTime) -> BTreeSet<[u8; 16]> {
        let now = Instant::now();
        self.since.retain(|g, _| in_flight.contains_key(g));
        in_flight
            .into_iter()
            .filter(|(g, changed)| {
                let seen = now.duration_since(*self.since.entry(*g).or_insert(now));
                // A change time in the future (another clock) counts as now.
                let still = changed
                    .is_some_and(|c| wall.duration_since(c).unwrap_or(Duration::ZERO) < SETTLE);
                seen < SETTLE || still
            })
            .map(|(g, _)| g)
            .collect()
    }
}

/// Makes every replicate of the graph heal inline and on lookup; returns their names and
/// child counts.
fn inline_heals(vf: &mut Volfile) -> Vec<(String, usize)> {
    let mut sets = Vec::new();
    for v in &mut vf.volumes {
        if !REPLICATE_TYPES.contains(&v.type_name.as_str()) {
            continue;
        }
        for (k, val) in [("background-self-heal-count", "0"), ("self-heal", "on")] {
            v.options.retain(|o| o.key != k);
            v.options.push(OptionDecl {
                key: k.into(),
                value: val.into(),
                pos: Default::default(),
            });
        }
        sets.push((v.name.clone(), v.subvolumes.len()));
    }
    sets
}

/// Waits until every replicate has as many children up as its bricks that answer (or
/// `timeout`); returns (set, up, children) per set.
async fn wait_connected(
    volume: &Volume,
    spec: &VolumeSpec,
    vd: &crate::state::VolumeDir,
    sets: &[(String, usize)],
    timeout: Duration,
) -> Vec<(String, u64, usize)> {
    let online = vd
        .load_run()
        .map(|run| brick_states(spec, &run).iter().filter(|b| b.online).count())
        .unwrap_or(spec.bricks.len());
    let deadline = Instant::now() + timeout;
    loop {
        let ups = children_up(volume, sets).await;
        let total: u64 = ups.iter().map(|(_, u, _)| u).sum();
        let all = ups.iter().all(|(_, u, c)| *u as usize >= *c);
        if all || total as usize >= online || Instant::now() >= deadline {
            return ups;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// (set, children up, children) per replicate, after a stat of the root (a fop makes the
/// clients connect: they may wait for the first one).
async fn children_up(volume: &Volume, sets: &[(String, usize)]) -> Vec<(String, u64, usize)> {
    let g = volume.graph();
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        g.top().stat(&FopCtx::root(), Gfid::ROOT),
    )
    .await;
    sets.iter()
        .map(|(n, c)| {
            let up = g
                .node(n)
                .and_then(|node| node.control.dump().find_u64("up"))
                .unwrap_or(0);
            (n.clone(), up, *c)
        })
        .collect()
}

/// What one heal round does.
#[derive(Clone, Copy)]
struct Pass {
    /// Look up every object (a crawl) instead of the indexed ones.
    full: bool,
    json: bool,
    /// Indexed objects healed at once.
    parallel: usize,
}

/// One heal: index passes (or a full crawl), then the report. Returns the exit code. Index
/// passes leave the entries in `skip` alone (clients' writes in flight, see [`SETTLE`]).
async fn round(
    volume: &Volume,
    spec: &VolumeSpec,
    vd: &crate::state::VolumeDir,
    pass: Pass,
    connected: &[(String, u64, usize)],
    skip: &BTreeSet<[u8; 16]>,
) -> Result<u8> {
    let Pass { full, json, .. } = pass;
    let mut report = Report {
        volume: spec.name.clone(),
        mode: if full { "full" } else { "index" },
        connected: connected.to_vec(),
        ..Default::default()
    };
    let top = volume.graph().top().clone();
    let progress = Progress::new(!json && std::io::stderr().is_terminal());
    let online = |vd: &crate::state::VolumeDir| -> Result<Vec<bool>> {
        let run = vd.load_run()?;
        Ok(brick_states(spec, &run).iter().map(|b| b.online).collect())
    };
    if full {
        crawl(&top, &mut report, &progress).await;
    } else {
        let mut last = usize::MAX;
        for n_pass in 1..=MAX_PASSES {
            let bricks = info::local_indexes(spec, &online(vd)?)?;
            let mut todo = info::pending(&bricks);
            todo.retain(|g, _| !skip.contains(g));
            if todo.is_empty() || todo.len() >= last {
                break;
            }
            last = todo.len();
            report.passes = n_pass;
            report.no_path = 0;
            report.gone = 0;
            report.failed.clear();
            let total = todo.len();
            progress.show(&format!("healed 0/{total} (pass {n_pass})"));
            // Objects heal independently (each heal takes its own locks; two walks meeting on
            // a parent find its entry heal done by the first), so several go at once.
            let mut heals = futures::stream::iter(todo.values())
                .map(|(gfid, path)| {
                    let top = &top;
                    async move {
                        // No path: nothing to look up by (the index names a GFID only).
                        let looked = match path {
                            Some(path) => Some((path, walk(top, path).await)),
                            None => None,
                        };
                        (gfid, looked)
                    }
                })
                .buffer_unordered(pass.parallel.max(1));
            let mut n = 0;
            while let Some((gfid, looked)) = heals.next().await {
                n += 1;
                progress.show(&format!("healed {n}/{total} (pass {n_pass})"));
                match looked {
                    Some((path, r)) => {
                        report.looked_up += 1;
                        match r {
                            Ok(()) => {}
                            Err(Errno::ENOENT | Errno::ESTALE) => report.gone += 1,
                            Err(e) => report
                                .failed
                                .push((format!("{path} ({gfid})"), e.to_string())),
                        }
                    }
                    None => report.no_path += 1,
                }
            }
        }
    }
    progress.done();
    let bricks: Vec<BrickIndex> = info::local_indexes(spec, &online(vd)?)?;
    report.pending = bricks
        .iter()
        .map(|b| (b.brick.clone(), b.entries.len()))
        .collect();
    let left: usize = report.pending.iter().map(|(_, n)| n).sum();
    if json {
        print_json(&report)?;
    } else {
        print_human(&report, &bricks);
    }
    Ok(if left == 0 {
        code::OK
    } else {
        code::HEAL_PENDING
    })
}

fn print_human(r: &Report, bricks: &[BrickIndex]) {
    for (set, up, of) in &r.connected {
        if (*up as usize) < *of {
            println!("{set}: {up} of {of} bricks connected; the others heal when they return");
        }
    }
    match r.mode {
        "full" => println!("Looked up {} objects (full crawl)", r.looked_up),
        _ => println!(
            "Looked up {} indexed objects in {} pass(es)",
            r.looked_up, r.passes
        ),
    }
    for (what, e) in &r.failed {
        println!("  failed: {what}: {e}");
    }
    if r.gone > 0 {
        println!(
            "  {} indexed paths are no longer in the volume (removed while a brick was down, or since): their stale copies go with their parents' entry heal, their index entries when the objects go (after storage/posix's unlinked-grace)",
            r.gone
        );
    }
    if r.no_path > 0 {
        println!(
            "  {} indexed objects have no name on this host's bricks: removed (storage/posix drops them and their index entries `unlinked-grace`, 5 s by default, after their last name went), or named only on another brick (`heal {} full` finds them)",
            r.no_path, r.volume
        );
    }
    for b in bricks {
        println!("Brick {}: {} entries pending", b.brick, b.entries.len());
        for l in b.entries.iter().take(20) {
            println!("  {}", info::shown(l));
        }
        if b.entries.len() > 20 {
            println!(
                "  ... ({} more: xlfs volume heal {} info)",
                b.entries.len() - 20,
                r.volume
            );
        }
    }
}

/// Looks `path` up from the root, one component at a time.
pub async fn walk(top: &Subvol, path: &str) -> std::result::Result<(), Errno> {
    let cx = FopCtx::root();
    let mut parent = Gfid::ROOT;
    let mut any = false;
    for name in path.split('/').filter(|c| !c.is_empty()) {
        let e = top.lookup(&cx, Loc::new(parent, name)).await?;
        parent = e.attr.gfid;
        any = true;
    }
    if !any {
        top.lookup(&cx, Loc::new(Gfid::ROOT, ".")).await?;
    }
    Ok(())
}

static NEXT_FD: AtomicU64 = AtomicU64::new(1 << 40);

/// An fd of this process's heal graph on `gfid` (ids no other fd of the graph uses).
pub(super) fn new_fd(gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(NEXT_FD.fetch_add(1, Ordering::Relaxed)),
        gfid,
        flags,
    }
}

/// Looks up every object of the volume: the root, then breadth first every directory's
/// entries (readdirp).
async fn crawl(top: &Subvol, report: &mut Report, progress: &Progress) {
    let cx = FopCtx::root();
    if let Err(e) = top.lookup(&cx, Loc::new(Gfid::ROOT, ".")).await {
        report.failed.push(("/".into(), e.to_string()));
        return;
    }
    report.looked_up = 1;
    let mut dirs = VecDeque::from([(Gfid::ROOT, String::new())]);
    while let Some((dir, path)) = dirs.pop_front() {
        let fd = new_fd(dir, libc::O_RDONLY | libc::O_DIRECTORY);
        if let Err(e) = top.opendir(&cx, fd).await {
            report.failed.push((format!("{path}/"), e.to_string()));
            continue;
        }
        let mut offset = 0;
        loop {
            let page = match top.readdirp(&cx, fd, offset, 64 * 1024).await {
                Ok(p) => p,
                Err(e) => {
                    report.failed.push((format!("{path}/"), e.to_string()));
                    break;
                }
            };
            let Some(last) = page.last() else { break };
            offset = last.next_offset;
            for de in page.iter() {
                let name = de.name.as_str();
                if name == "." || name == ".." {
                    continue;
                }
                let p = format!("{path}/{name}");
                report.looked_up += 1;
                progress.show(&format!("looked up {}", report.looked_up));
                match top.lookup(&cx, Loc::new(dir, name)).await {
                    Ok(e) if e.attr.kind == FileType::Directory => {
                        dirs.push_back((e.attr.gfid, p));
                    }
                    Ok(_) => {}
                    Err(e) => report.failed.push((p, e.to_string())),
                }
            }
        }
        let _ = top.releasedir(&cx, fd).await;
    }
}

/// A progress line on stderr (`healed 120/300`), redrawn at most 10 times a second, only on a
/// terminal.
struct Progress {
    on: bool,
    last: std::sync::Mutex<Option<Instant>>,
}

impl Progress {
    fn new(on: bool) -> Progress {
        Progress {
            on,
            last: std::sync::Mutex::new(None),
        }
    }

    fn show(&self, line: &str) {
        if !self.on {
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        *last = Some(Instant::now());
        let mut e = std::io::stderr();
        let _ = write!(e, "\r\x1b[K{line}");
        let _ = e.flush();
    }

    fn done(&self) {
        if self.on {
            let mut e = std::io::stderr();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry in flight is left alone while it is new or its object keeps changing, and
    /// healed once it is old and its object stopped changing (a client that died).
    #[test]
    fn in_flight_entries_settle_until_old_and_unchanged() {
        let (a, b, c) = ([1u8; 16], [2u8; 16], [3u8; 16]);
        let wall = SystemTime::now();
        let mut s = Settling::default();
        let old = Instant::now() - SETTLE - Duration::from_secs(1);
        s.since.insert(a, old);
        s.since.insert(b, old);
        s.since.insert(c, old);
        let flight: info::InFlight = [
            (a, Some(wall - Duration::from_secs(1))),
            (b, Some(wall - SETTLE - Duration::from_secs(5))),
            (c, None),
        ]
        .into_iter()
        .collect();
        let fresh = s.fresh(flight, wall);
        assert_eq!(
            fresh,
            [a].into_iter().collect(),
            "only the one changing now"
        );
        // A new entry is fresh whatever its change time; one gone is forgotten.
        let d = [4u8; 16];
        let flight = [(d, Some(wall - SETTLE * 3))].into_iter().collect();
        assert_eq!(s.fresh(flight, wall), [d].into_iter().collect());
        assert!(!s.since.contains_key(&a));
    }
}
