//! `xlfs volume remove-brick VOL BRICK... start|status|stop|commit`: moves the data off
//! whole distribute subvolumes, then takes them out of the volume.
//!
//! - `start` names the subvolumes in the distribute option `decommissioned` (reconfigurable:
//!   mounts apply it in place; those children get no new files and no hash range), then runs
//!   `xlfs-rebalance --mode remove-brick`, which fixes every layout without them and moves
//!   their files to the others. A start after a crash of the runner resumes it.
//! - `status` is the runner's status, as for rebalance.
//! - `stop` stops the runner and cancels the removal (the option is cleared; the bricks stay
//!   full members; files already moved stay moved: `rebalance start` spreads them again).
//! - `commit` only after a run that completed with nothing skipped or failed (`--force`
//!   overrides, with a warning: files left on the removed bricks are no longer seen through
//!   the volume). It regenerates the volfiles without those children (the others keep their
//!   names), waits for the mounts to switch, stops the removed bricks and keeps their
//!   directories.
//!
//! In cluster mode (an xlfs-mgmtd runs for the state directory) each description change
//! (start, stop, commit) is a cluster change: the daemon makes it with a majority of the peers
//! (on its copy of the volume, with the hidden `--describe-only`, which changes the
//! description and nothing else) and every peer applies it; a commit's removed bricks are
//! stopped by the daemon of the host they run on. The runner, its status and the checks
//! before a commit stay on the host the command runs on, as for rebalance: run status and
//! commit where start ran.

use std::time::{Duration, Instant};

use xlfs_volgen::{Brick, Catalog, VolumeSpec};

use super::rebalance::{
    DECOMMISSIONED, decommissioned, human, read_status, set_aside, start_runner, stop_runner,
};
use super::{Ctx, XLFSD, generate_and_write, print_json, registry};
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::{BrickRun, VolumeDir};

/// How long commit waits for mounts to follow the client volfile before it stops the
/// removed bricks (mounts reread a volfile on disk every second).
const SWITCH_WAIT: Duration = Duration::from_secs(3);
/// How long start waits for mounts to apply `decommissioned` before the runner starts.
const APPLY_WAIT: Duration = Duration::from_secs(2);
/// How long this host may take to apply a change the cluster made (cluster mode).
const APPLIED_WAIT: Duration = Duration::from_secs(20);
/// How long a removed brick may take to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(10);

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Start,
    Status,
    Stop,
    Commit,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume remove-brick gv0 /data/b2 start       move the files off /data/b2
  xlfs volume remove-brick gv0 /data/b2 status      progress (as rebalance status)
  xlfs volume remove-brick gv0 /data/b2 commit      when completed: take it out
  xlfs volume remove-brick gv1 h3:/b h4:/b start    replica 2: a whole replica set
  xlfs volume remove-brick gv0 /data/b2 stop        cancel: the brick stays

Whole distribute subvolumes only (every brick of a replica set / stripe). The removed
bricks' directories are kept, with whatever the run could not move. See docs/rebalance.md.")]
pub struct Args {
    pub name: String,
    /// The bricks to remove, then the action: start, status, stop or commit (status and stop
    /// may leave the bricks out).
    #[arg(required = true, value_name = "BRICK... ACTION", num_args = 1..)]
    pub words: Vec<String>,
    /// commit even though the run did not complete cleanly (files may be left behind).
    #[arg(long)]
    pub force: bool,
    /// status: print the runner's status file.
    #[arg(long)]
    pub json: bool,
    /// Change the description only (no runner, no checks of a run, no brick stopped): how
    /// xlfs-mgmtd makes the cluster's copy of a start, stop or commit.
    #[arg(long, hide = true)]
    pub describe_only: bool,
}

/// Where remove-brick writes a changed description: this host's state directory, or the
/// cluster (through this host's xlfs-mgmtd, which every peer follows).
struct Writer<'a> {
    ctx: &'a Ctx,
    /// The command the daemon runs on its copy of the volume; `None` when not in cluster mode.
    cluster: Option<Vec<String>>,
}

impl Writer<'_> {
    /// Makes `spec` the volume's description; `live`: mounts apply it in place.
    fn write(&self, vd: &VolumeDir, spec: &VolumeSpec, live: bool) -> Result<()> {
        let Some(args) = &self.cluster else {
            generate_and_write(vd, spec)?;
            super::set::notify_mounts(&vd.load_run()?, live);
            return Ok(());
        };
        super::peer::change_volume(self.ctx, args.clone())?;
        // The daemon answers once the change is decided; this host applies it in its own
        // time (its runner and checks read the description here).
        let deadline = Instant::now() + APPLIED_WAIT;
        loop {
            let (_, here) = self.ctx.state().load(&spec.name)?;
            if here.bricks == spec.bricks && decommissioned(&here) == decommissioned(spec) {
                break;
            }
            if Instant::now() > deadline {
                return Err(CliError::State(format!(
                    "the cluster made the change to volume {}, but this host has not applied                      it within {}s (see xlfs-mgmtd's log); run the command again once `xlfs                      volume info {}` shows it",
                    spec.name,
                    APPLIED_WAIT.as_secs(),
                    spec.name
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!(
            "  decided by a majority of the peers; each applies it (mounts follow by themselves)"
        );
        Ok(())
    }
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let (action, bricks) = split_words(&a.words)?;
    let pending = decommissioned(&spec);
    if a.describe_only {
        let positions = resolve(&spec, &bricks)?;
        let children = children_of(&spec, &positions);
        describe_only(&vd, spec, action, &positions, &children, &pending)?;
        return Ok(0);
    }
    let writer = Writer {
        ctx,
        cluster: super::peer::daemon(ctx).map(|_| {
            let mut args = vec!["remove-brick".to_owned(), a.name.clone()];
            args.extend(a.words.iter().cloned());
            args.push("--describe-only".into());
            args
        }),
    };
    let positions = if bricks.is_empty() {
        match action {
            Action::Status | Action::Stop => positions_of_children(&spec, &pending),
            _ => {
                return Err(CliError::Rejected(
                    "name the bricks to remove before the action: remove-brick VOL BRICK... \
                     start|commit"
                        .into(),
                ));
            }
        }
    } else {
        resolve(&spec, &bricks)?
    };
    let children = children_of(&spec, &positions);
    match action {
        Action::Start => start(&writer, &vd, spec, &children, &pending),
        Action::Status => {
            let Some((s, raw)) = read_status(&vd)? else {
                return Err(CliError::State(format!(
                    "no remove-brick has run on volume {}",
                    spec.name
                )));
            };
            if a.json {
                print_json(&raw)?;
                return Ok(0);
            }
            println!("{}", human(&spec.name, &s));
            if s.mode != "remove-brick" {
                println!("  (that was a rebalance; no remove-brick ran since)");
            } else if pending.is_empty() {
                println!("  no removal is pending (committed or stopped)");
            } else {
                println!("  removing: {}", pending.join(", "));
                if s.clean() {
                    println!(
                        "  next: xlfs volume remove-brick {} BRICK... commit",
                        spec.name
                    );
                }
            }
            Ok(0)
        }
        Action::Stop => {
            if pending.is_empty() {
                return Err(CliError::State(format!(
                    "no removal is pending on volume {}",
                    spec.name
                )));
            }
            if !bricks.is_empty() && children != pending {
                return Err(CliError::State(format!(
                    "volume {} is removing {}, not {}; name those bricks (or none) to stop it",
                    spec.name,
                    pending.join(", "),
                    children.join(", ")
                )));
            }
            let stopped = stop_runner(&vd)?;
            writer.write(&vd, &cancelled(spec.clone())?, true)?;
            if let Some(s) = stopped {
                println!("remove-brick runner stopped ({})", s.state);
            }
            println!(
                "removal of {} cancelled: the bricks stay in volume {}; files already moved \
                 stay on the other bricks (`xlfs volume rebalance {} start` spreads them again)",
                pending.join(", "),
                spec.name,
                spec.name
            );
            Ok(0)
        }
        Action::Commit => commit(&writer, &vd, spec, &positions, &children, &pending, a.force),
    }
}

/// The description change alone of a start, stop or commit (see [`Args::describe_only`]).
fn describe_only(
    vd: &VolumeDir,
    spec: VolumeSpec,
    action: Action,
    positions: &[usize],
    children: &[String],
    pending: &[String],
) -> Result<()> {
    let changed = match action {
        Action::Start if pending.is_empty() => decommission(spec, children)?,
        Action::Start if pending == children => spec,
        Action::Stop if pending == children => cancelled(spec)?,
        Action::Commit if pending == children => shrunk(&spec, positions),
        Action::Status => {
            return Err(CliError::Rejected("status changes no description".into()));
        }
        _ => {
            return Err(CliError::State(format!(
                "volume {} is removing {}, not {}",
                spec.name,
                if pending.is_empty() {
                    "nothing".to_owned()
                } else {
                    pending.join(", ")
                },
                children.join(", ")
            )));
        }
    };
    generate_and_write(vd, &changed)?;
    println!("{}: description written", changed.name);
    Ok(())
}

/// `spec` with the children named in `decommissioned`.
fn decommission(mut spec: VolumeSpec, children: &[String]) -> Result<VolumeSpec> {
    Catalog::new(&registry()).set(&mut spec, DECOMMISSIONED, &children.join(","))?;
    Ok(spec)
}

/// `spec` with no removal pending.
fn cancelled(mut spec: VolumeSpec) -> Result<VolumeSpec> {
    Catalog::new(&registry()).reset(&mut spec, DECOMMISSIONED)?;
    Ok(spec)
}

/// `spec` without the bricks at `positions` (and the removal done).
fn shrunk(spec: &VolumeSpec, positions: &[usize]) -> VolumeSpec {
    let mut shrunk = spec.clone();
    shrunk.remove_bricks(positions);
    shrunk.options.remove(DECOMMISSIONED);
    shrunk
}

/// Stops the bricks that run here but are no longer in `spec` (after a remove-brick commit,
/// here or on another peer), once mounts had time to switch to the graph without them;
/// they leave `run.json`. Says what was stopped.
pub fn stop_removed(vd: &VolumeDir, spec: &VolumeSpec) -> Result<Vec<String>> {
    let ids: Vec<usize> = (0..spec.bricks.len()).map(|p| spec.brick_id(p)).collect();
    let gone: Vec<BrickRun> = vd
        .load_run()?
        .bricks
        .into_iter()
        .filter(|b| !ids.contains(&b.index))
        .collect();
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    // Mounts elsewhere reread the client volfile within a second: give them time before
    // the bricks go.
    if gone.iter().any(|b| procs::alive(b.pid, XLFSD)) {
        std::thread::sleep(SWITCH_WAIT);
    }
    let mut lines = Vec::new();
    for b in &gone {
        if procs::alive(b.pid, XLFSD) {
            procs::terminate(b.pid, XLFSD, GRACE);
            lines.push(format!("  stopped brick {} (pid {})", b.index, b.pid));
        }
    }
    let mut run = vd.load_run()?;
    run.bricks.retain(|b| ids.contains(&b.index));
    vd.save_run(&run)?;
    Ok(lines)
}

/// The action (last word) and the bricks before it.
fn split_words(words: &[String]) -> Result<(Action, Vec<String>)> {
    let Some((last, bricks)) = words.split_last() else {
        return Err(CliError::Rejected(
            "give the bricks, then start, status, stop or commit".into(),
        ));
    };
    let action = match last.as_str() {
        "start" => Action::Start,
        "status" => Action::Status,
        "stop" => Action::Stop,
        "commit" => Action::Commit,
        other => {
            return Err(CliError::Rejected(format!(
                "{other:?} is not an action: the last word is start, status, stop or commit \
                 (remove-brick VOL BRICK... ACTION)"
            )));
        }
    };
    Ok((action, bricks.to_vec()))
}

/// Positions of `bricks` in the volume; whole subvolumes, not all of them.
fn resolve(spec: &VolumeSpec, bricks: &[String]) -> Result<Vec<usize>> {
    let mut positions = Vec::new();
    for text in bricks {
        let b = Brick::parse(text)?;
        let Some(p) = spec.bricks.iter().position(|x| x.same_dir(&b)) else {
            let list: Vec<String> = spec.bricks.iter().map(ToString::to_string).collect();
            return Err(CliError::Rejected(format!(
                "{b} is not a brick of volume {} (its bricks: {})",
                spec.name,
                list.join(" ")
            )));
        };
        if !positions.contains(&p) {
            positions.push(p);
        }
    }
    let subs = spec.subvolumes();
    for sub in &subs {
        let given = sub.bricks.clone().filter(|p| positions.contains(p)).count();
        if given != 0 && given != sub.bricks.len() {
            let all: Vec<String> = spec.bricks[sub.bricks.clone()]
                .iter()
                .map(ToString::to_string)
                .collect();
            return Err(CliError::Rejected(format!(
                "{} is made of bricks {}: remove all of them or none (whole replica sets / \
                 stripes only)",
                sub.name,
                all.join(" ")
            )));
        }
    }
    if positions.len() == spec.bricks.len() {
        return Err(CliError::Rejected(format!(
            "that is every brick of volume {}: keep at least one subvolume (or `xlfs volume \
             delete` the volume)",
            spec.name
        )));
    }
    positions.sort_unstable();
    Ok(positions)
}

/// The distribute children the bricks at `positions` make up.
fn children_of(spec: &VolumeSpec, positions: &[usize]) -> Vec<String> {
    spec.subvolumes()
        .into_iter()
        .filter(|s| s.bricks.clone().all(|p| positions.contains(&p)))
        .map(|s| s.name)
        .collect()
}

fn positions_of_children(spec: &VolumeSpec, children: &[String]) -> Vec<usize> {
    spec.subvolumes()
        .into_iter()
        .filter(|s| children.contains(&s.name))
        .flat_map(|s| s.bricks)
        .collect()
}

fn start(
    writer: &Writer,
    vd: &VolumeDir,
    mut spec: VolumeSpec,
    children: &[String],
    pending: &[String],
) -> Result<u8> {
    let resumed = if pending.is_empty() {
        if let Some((s, _)) = read_status(vd)?
            && s.alive()
        {
            return Err(CliError::State(format!(
                "a {} of volume {} is running (pid {}); stop it first",
                s.mode, spec.name, s.pid
            )));
        }
        super::peer::no_runner_elsewhere(writer.ctx, &spec.name, false)?;
        // A new removal: nothing of an earlier run may be resumed.
        set_aside(vd)?;
        spec = decommission(spec, children)?;
        writer.write(vd, &spec, true)?;
        std::thread::sleep(APPLY_WAIT);
        false
    } else if pending == children {
        true
    } else {
        return Err(CliError::State(format!(
            "volume {} is already removing {}; commit or stop that first",
            spec.name,
            pending.join(", ")
        )));
    };
    let s = start_runner(vd, &spec, "remove-brick")?;
    let how = if resumed { "resumed" } else { "started" };
    println!(
        "remove-brick of {} from volume {} {how} (runner pid {})",
        children.join(", "),
        spec.name,
        s.pid
    );
    println!(
        "  they get no new files; their files move to the other bricks; progress: xlfs volume \
         remove-brick {} status",
        spec.name
    );
    println!(
        "  when completed: xlfs volume remove-brick {} BRICK... commit",
        spec.name
    );
    Ok(0)
}

fn commit(
    writer: &Writer,
    vd: &VolumeDir,
    spec: VolumeSpec,
    positions: &[usize],
    children: &[String],
    pending: &[String],
    force: bool,
) -> Result<u8> {
    let status = read_status(vd)?.map(|(s, _)| s);
    if status.as_ref().is_some_and(|s| s.alive()) {
        if !force {
            return Err(CliError::State(format!(
                "the remove-brick run is still going; wait until `xlfs volume remove-brick {} \
                 status` says completed",
                spec.name
            )));
        }
        stop_runner(vd)?;
    }
    let status = read_status(vd)?.map(|(s, _)| s);
    let mut problems = Vec::new();
    if pending != children {
        problems.push(if pending.is_empty() {
            "no removal was started for them (`remove-brick ... start` first)".to_owned()
        } else {
            format!("the removal in progress is of {}", pending.join(", "))
        });
    }
    match &status {
        None => problems.push(
            "no remove-brick run left a status here (run commit on the host where start ran)"
                .into(),
        ),
        Some(s) if s.mode != "remove-brick" => {
            problems.push("the last run was a rebalance, not a remove-brick".into())
        }
        Some(s) => {
            if s.state != "completed" {
                problems.push(format!("the run is {}, not completed", s.state));
            }
            if s.files_skipped > 0 {
                problems.push(format!("{} files were skipped", s.files_skipped));
            }
            if s.failures > 0 {
                problems.push(format!("{} files failed to move", s.failures));
            }
        }
    }
    if !problems.is_empty() {
        if !force {
            return Err(CliError::State(format!(
                "not committing the removal of {} from volume {}: {}. Files still on those \
                 bricks would no longer be seen through the volume. Run `remove-brick ... \
                 start` (again) until status says completed with nothing skipped or failed, \
                 or commit with --force",
                children.join(", "),
                spec.name,
                problems.join("; ")
            )));
        }
        eprintln!(
            "xlfs: warning: committing anyway (--force): {}; files left on the removed bricks \
             are no longer seen through the volume (they stay in the brick directories)",
            problems.join("; ")
        );
    }
    let removed: Vec<Brick> = positions.iter().map(|p| spec.bricks[*p].clone()).collect();
    let shrunk = shrunk(&spec, positions);
    writer.write(vd, &shrunk, false)?;
    let lines = if writer.cluster.is_some() {
        vec!["  each peer stops its removed bricks once mounts had time to switch".to_owned()]
    } else {
        stop_removed(vd, &shrunk)?
    };
    println!(
        "volume {}: {} -> {} ({} removed)",
        spec.name,
        spec.layout(),
        shrunk.layout(),
        children.join(", ")
    );
    for l in lines {
        println!("{l}");
    }
    println!("  the removed bricks' directories are kept (delete them when you are sure):");
    for b in &removed {
        println!("    {b}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(bricks: &[&str], replica: u32) -> VolumeSpec {
        let bricks = bricks
            .iter()
            .map(|b| Brick::parse(b).expect("brick"))
            .collect();
        let mut s = VolumeSpec::new("v", bricks);
        s.replica = replica;
        s
    }

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_action_is_the_last_word() {
        let (a, b) = split_words(&words(&["/d/b", "/d/c", "commit"])).expect("ok");
        assert_eq!(a, Action::Commit);
        assert_eq!(b, ["/d/b", "/d/c"]);
        let e = split_words(&words(&["/d/b"])).expect_err("no action");
        assert!(e.to_string().contains("not an action"), "{e}");
    }

    #[test]
    fn whole_replica_sets_only_and_not_all() {
        let s = spec(&["/r/a", "/r/b", "/r/c", "/r/d"], 2);
        let e = resolve(&s, &words(&["/r/c"])).expect_err("half a set");
        assert!(
            e.to_string()
                .contains("v-replicate-1 is made of bricks /r/c /r/d"),
            "{e}"
        );
        let p = resolve(&s, &words(&["/r/d", "/r/c"])).expect("a set");
        assert_eq!(p, [2, 3]);
        assert_eq!(children_of(&s, &p), ["v-replicate-1"]);
        let e = resolve(&s, &words(&["/r/a", "/r/b", "/r/c", "/r/d"])).expect_err("all");
        assert!(e.to_string().contains("every brick"), "{e}");
        let e = resolve(&s, &words(&["/r/x"])).expect_err("unknown");
        assert!(e.to_string().contains("not a brick of volume v"), "{e}");
    }

    #[test]
    fn children_keep_their_names_after_an_earlier_removal() {
        let mut s = spec(&["/d/0", "/d/1", "/d/2"], 1);
        s.remove_bricks(&[0]);
        let p = resolve(&s, &words(&["/d/2"])).expect("ok");
        assert_eq!(children_of(&s, &p), ["v-client-2"]);
        assert_eq!(positions_of_children(&s, &["v-client-2".into()]), [1]);
    }
}
