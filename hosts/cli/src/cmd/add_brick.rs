//! `xlfs volume add-brick VOL BRICK...`: grows the volume by whole distribute subvolumes
//! (one per `replica x stripe` bricks; a plain volume becomes distribute 2 with the old
//! brick first). The existing bricks keep their ids, so every translator name in the client
//! volfile stays (cluster/distribute's link files and layouts name them).
//!
//! Order, so that no mount meets a brick that is not there: the new bricks' volfiles are
//! written and, when the volume is started, the new bricks started and listening; only then
//! are the description and the client volfile replaced. Mounts follow the client volfile by
//! themselves (a graph switch, no remount); the ones started here get a SIGHUP too. Files
//! stay where they are until `xlfs volume rebalance VOL start`.

use xlfs_volgen::{Brick, VolumeSpec, generate};

use super::{Ctx, registry};
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::write_atomic;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume add-brick gv0 /data/b2               plain -> distribute 2
  xlfs volume add-brick gv1 h3:/b h4:/b            replica 2: one new replica set
  xlfs volume rebalance gv0 start                  then spread the files over the new bricks")]
pub struct Args {
    pub name: String,
    /// New bricks, as `create` takes them; a multiple of replica x stripe.
    #[arg(required = true, value_name = "BRICK")]
    pub bricks: Vec<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let state = ctx.state();
    let (vd, spec) = state.load(&a.name)?;
    let new_bricks = a
        .bricks
        .iter()
        .map(|b| Brick::parse(b))
        .collect::<Result<Vec<_>, _>>()?;
    let grown = grow(&spec, new_bricks)?;
    let others = state.others(&spec.name)?;
    super::create::check_against_others(&grown, &others)?;
    if let Some((s, _)) = super::rebalance::read_status(&vd)?
        && s.alive()
    {
        return Err(CliError::State(format!(
            "a {} of volume {} is running (pid {}); stop it first (`xlfs volume rebalance {} \
             stop`), add the bricks, then start it again",
            s.mode, spec.name, s.pid, spec.name
        )));
    }
    let names = procs::local_host_names();
    let added: Vec<usize> = (spec.bricks.len()..grown.bricks.len()).collect();
    for &p in &added {
        let b = &grown.bricks[p];
        if b.is_on(&names) {
            super::create::check_local_dir(std::path::Path::new(b.path()))?;
        }
    }
    // Generate (and so validate) before touching anything.
    let generated = generate(&grown, &registry())?;
    for &p in &added {
        let b = &grown.bricks[p];
        if b.is_on(&names) {
            std::fs::create_dir_all(b.path()).map_err(CliError::io(b.path()))?;
        }
    }
    let mut run = vd.load_run()?;
    let started = super::started(&spec, &run);
    let new_ids: Vec<usize> = added.iter().map(|p| grown.brick_id(*p)).collect();
    for s in generated
        .servers
        .iter()
        .filter(|s| new_ids.contains(&s.index))
    {
        write_atomic(&vd.brick_volfile(s.index), &s.volfile.to_ron())?;
    }
    if started && let Err(e) = super::start::start_bricks(&vd, &grown, &mut run) {
        for id in &new_ids {
            let _ = std::fs::remove_file(vd.brick_volfile(*id));
        }
        return Err(CliError::Process(format!(
            "{e}\nvolume {} is unchanged; fix that and run add-brick again",
            spec.name
        )));
    }
    vd.write(&grown, &generated)?;
    println!(
        "volume {}: {} -> {} ({} brick{} added)",
        spec.name,
        spec.layout(),
        grown.layout(),
        added.len(),
        if added.len() == 1 { "" } else { "s" }
    );
    for &p in &added {
        let id = grown.brick_id(p);
        let pid = run
            .bricks
            .iter()
            .find(|r| r.index == id)
            .map_or_else(String::new, |r| format!("  pid {}", r.pid));
        let remote = if grown.bricks[p].is_on(&names) {
            ""
        } else {
            "  (on another host: start it there, `xlfs volume start` starts what is missing)"
        };
        println!(
            "  brick {id}  {}  port {}{pid}{remote}",
            grown.bricks[p],
            grown.brick_port(p)
        );
    }
    if started {
        super::set::notify_mounts(&run, false);
    } else {
        println!(
            "  the volume is not started: `xlfs volume start {}` starts the new bricks too",
            spec.name
        );
    }
    println!(
        "  existing files stay on the old bricks until a rebalance moves those whose name now \
         hashes to a new brick"
    );
    println!("next: xlfs volume rebalance {} start", spec.name);
    Ok(0)
}

/// `spec` with `bricks` appended as new distribute subvolumes, checked.
fn grow(spec: &VolumeSpec, bricks: Vec<Brick>) -> Result<VolumeSpec> {
    let set = spec.layout().set_size().max(1);
    if !bricks.len().is_multiple_of(set) {
        return Err(CliError::Rejected(format!(
            "volume {} is {}: bricks are added {set} at a time (replica {} x stripe {}), each \
             {set} becoming one new distribute subvolume; got {}",
            spec.name,
            spec.layout(),
            spec.replica,
            spec.stripe,
            bricks.len()
        )));
    }
    for b in &bricks {
        for (p, old) in spec.bricks.iter().enumerate() {
            if old.same_dir(b) || old.contains(b) || b.contains(old) {
                return Err(CliError::Rejected(format!(
                    "brick {b} is already used: it is or overlaps brick {} ({old}) of volume {}",
                    spec.brick_id(p),
                    spec.name
                )));
            }
        }
    }
    let mut grown = spec.clone();
    grown.add_bricks(bricks);
    grown.check()?;
    Ok(grown)
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

    fn bricks(list: &[&str]) -> Vec<Brick> {
        list.iter()
            .map(|b| Brick::parse(b).expect("brick"))
            .collect()
    }

    #[test]
    fn whole_subvolumes_only() {
        let s = spec(&["/r/a", "/r/b"], 2);
        let e = grow(&s, bricks(&["/r/c"])).expect_err("one brick to replica 2");
        assert!(e.to_string().contains("added 2 at a time"), "{e}");
        let g = grow(&s, bricks(&["/r/c", "/r/d"])).expect("a new set");
        assert_eq!(g.layout().to_string(), "distribute 2 x replica 2");
    }

    #[test]
    fn a_brick_already_in_the_volume_is_refused() {
        let s = spec(&["/d/a", "/d/b"], 1);
        for b in ["/d/a", "/d/a/sub", "/d"] {
            let e = grow(&s, bricks(&[b])).expect_err("overlap");
            assert!(e.to_string().contains("already used"), "{b}: {e}");
        }
        let e = grow(&s, bricks(&["/d/c", "/d/c"])).expect_err("given twice");
        assert!(e.to_string().contains("given twice"), "{e}");
    }
}
