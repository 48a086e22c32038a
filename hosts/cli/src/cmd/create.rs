//! `xlfs volume create NAME BRICK...`: checks the description, generates the volfiles and
//! writes them to the state directory. Nothing is written when anything is rejected.

use std::path::Path;

use xlfs_volgen::{Brick, DEFAULT_BASE_PORT, VolumeSpec, check_auth_entry, check_name};

use super::Ctx;
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::State;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume create gv0 /data/gv0/brick
  xlfs volume create gv1 server1:/export/b server2:/export/b --replica 2
  xlfs volume create gv2 /d/b0 /d/b1 /d/b2 --port 24010 --auth-allow 10.0.0.0/8,127.0.0.1")]
pub struct Args {
    /// Volume name: letters, digits, `-` and `_`.
    pub name: String,
    /// Bricks: a local directory (/data/b1) or host:/path; created if missing on this host.
    #[arg(required = true, value_name = "BRICK")]
    pub bricks: Vec<String>,
    /// Copies of every file (consecutive bricks form a replica set).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub replica: u32,
    /// Bricks (replica sets) each file is striped over.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub stripe: u32,
    /// Port of the first brick (brick i uses PORT+i); default: the first free range from 49152.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Address the bricks listen on (default 127.0.0.1 for local bricks, 0.0.0.0 otherwise).
    #[arg(long, value_name = "ADDR")]
    pub listen_host: Option<String>,
    /// Client addresses the bricks accept: `*`, addresses, networks, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub auth_allow: Vec<String>,
    /// Shared secret clients must present.
    #[arg(long, value_name = "SECRET")]
    pub secret: Option<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let state = ctx.state();
    let spec = build(&state, &a)?;
    let vd = state.volume_dir(&spec.name);
    if vd.spec_path().exists() {
        return Err(CliError::State(format!(
            "volume {:?} already exists in {}; pick another name or `xlfs volume delete` it",
            spec.name,
            state.root.display()
        )));
    }
    create(&state, &spec)?;
    let layout = spec.layout();
    let n = spec.bricks.len();
    println!(
        "created volume {} ({layout}, {n} brick{})",
        spec.name,
        if n == 1 { "" } else { "s" }
    );
    for (i, b) in spec.bricks.iter().enumerate() {
        println!(
            "  brick {}  {b}  port {}",
            spec.brick_id(i),
            spec.brick_port(i)
        );
    }
    println!("  volfiles in {}", vd.dir.display());
    println!("next: xlfs volume start {}", spec.name);
    Ok(0)
}

/// The description the arguments give (checked, ports picked).
fn build(state: &State, a: &Args) -> Result<VolumeSpec> {
    check_name(&a.name)?;
    let bricks = a
        .bricks
        .iter()
        .map(|b| Brick::parse(b))
        .collect::<Result<Vec<_>, _>>()?;
    let mut spec = VolumeSpec::new(&a.name, bricks);
    spec.replica = a.replica;
    spec.stripe = a.stripe;
    spec.transport.listen_host = a.listen_host.clone();
    for entry in &a.auth_allow {
        check_auth_entry(entry.trim())?;
    }
    spec.auth_allow = a.auth_allow.iter().map(|e| e.trim().to_owned()).collect();
    spec.secret = a.secret.clone();
    spec.check()?;
    let others = state.others(&spec.name)?;
    spec.transport.base_port = match a.port {
        Some(p) => p,
        None => pick_base_port(&spec, &others),
    };
    spec.check()?;
    check_against_others(&spec, &others)?;
    Ok(spec)
}

/// Validates everything, creates the local brick directories, then writes the state.
pub fn create(state: &State, spec: &VolumeSpec) -> Result<()> {
    let names = procs::local_host_names();
    let local: Vec<&Brick> = spec.bricks.iter().filter(|b| b.is_on(&names)).collect();
    for b in &local {
        check_local_dir(Path::new(b.path()))?;
    }
    // Generate (and so validate) before touching the disk.
    let generated = xlfs_volgen::generate(spec, &super::registry())?;
    for b in &local {
        std::fs::create_dir_all(b.path()).map_err(CliError::io(b.path()))?;
    }
    let vd = state.volume_dir(&spec.name);
    vd.write(spec, &generated)?;
    Ok(())
}

/// A brick directory must be a directory, or creatable under an existing directory.
pub fn check_local_dir(path: &Path) -> Result<()> {
    let bad = |why: String| {
        Err(CliError::Rejected(format!(
            "brick {}: {why}",
            path.display()
        )))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => return bad("exists and is not a directory".into()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return bad(e.to_string()),
        Err(_) => {}
    }
    let mut anc = path.parent();
    while let Some(a) = anc {
        match std::fs::metadata(a) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => return bad(format!("{} is not a directory", a.display())),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return bad(format!("{}: {e}", a.display()));
            }
            Err(_) => anc = a.parent(),
        }
    }
    bad("no existing parent directory".into())
}

/// Rejects bricks or ports another volume of the state directory already uses.
pub fn check_against_others(spec: &VolumeSpec, others: &[VolumeSpec]) -> Result<()> {
    for o in others {
        for b in &spec.bricks {
            if let Some(ob) = o
                .bricks
                .iter()
                .find(|ob| ob.same_dir(b) || ob.contains(b) || b.contains(ob))
            {
                return Err(CliError::Rejected(format!(
                    "brick {b} overlaps brick {ob} of volume {:?}; use another directory",
                    o.name
                )));
            }
        }
        let (a, b) = (spec.ports(), o.ports());
        if a.start() <= b.end() && b.start() <= a.end() {
            return Err(CliError::Rejected(format!(
                "ports {}..{} overlap those of volume {:?} ({}..{}); pick another --port",
                a.start(),
                a.end(),
                o.name,
                b.start(),
                b.end()
            )));
        }
    }
    Ok(())
}

/// The lowest base port from 49152 whose range no other volume uses and, for local bricks,
/// nothing listens on.
pub fn pick_base_port(spec: &VolumeSpec, others: &[VolumeSpec]) -> u16 {
    let n = spec.bricks.len() as u32;
    let names = procs::local_host_names();
    let host = spec
        .transport
        .listen_host
        .clone()
        .unwrap_or_else(|| "127.0.0.1".into());
    let local: Vec<usize> = (0..spec.bricks.len())
        .filter(|i| spec.bricks[*i].is_on(&names))
        .collect();
    let mut base = u32::from(DEFAULT_BASE_PORT);
    while base + n <= 65535 {
        let clash = others.iter().find(|o| {
            let r = o.ports();
            base <= *r.end() && *r.start() < base + n
        });
        if let Some(o) = clash {
            base = o.ports().end() + 1;
            continue;
        }
        let busy = local
            .iter()
            .find(|i| !procs::port_free(&host, (base + **i as u32) as u16));
        match busy {
            Some(i) => base += *i as u32 + 1,
            None => return base as u16,
        }
    }
    DEFAULT_BASE_PORT
}
