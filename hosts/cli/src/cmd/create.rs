//! `xlfs volume create NAME BRICK...`: checks the description, generates the volfiles and
//! writes them to the state directory. Nothing is written when anything is rejected.

use std::path::{Path, PathBuf};

use xlfs_volgen::{Brick, DEFAULT_BASE_PORT, VolumeSpec, check_auth_entry, check_name};

use super::Ctx;
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::{State, write_atomic};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume create gv0 /data/gv0/brick
  xlfs volume create gv1 server1:/export/b server2:/export/b --replica 2
  xlfs volume create gv3 h1:/d/b h2:/d/b h3:/d/arb --replica 3 --arbiter 1
  xlfs volume create gv2 /d/b0 /d/b1 /d/b2 --port 24010 --auth-allow 10.0.0.0/8,127.0.0.1

Every volume gets a random secret in <state>/volumes/NAME/secret (mode 0600); bricks let in
only clients that prove they hold it (it never crosses the wire). Mount from another machine
with a copy of it: xlfs-mount HOST:/NAME MOUNTPOINT --secret-file FILE.")]
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
    /// 1 (with --replica 3): the last brick of each replica set is an arbiter — it keeps
    /// names, metadata and replication counters but no file data, so two copies of the data
    /// get replica 3's quorum and split-brain protection. Fixed for the life of the volume.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub arbiter: u32,
    /// Port of the first brick (brick i uses PORT+i); default: the first free range from 49152.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Address the bricks listen on (default 127.0.0.1 for local bricks, the brick's host as
    /// written for HOST:/path; 0.0.0.0 listens on every address).
    #[arg(long, value_name = "ADDR")]
    pub listen_host: Option<String>,
    /// Client addresses the bricks accept: `*`, addresses, networks, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub auth_allow: Vec<String>,
    /// Use this file's first line as the volume's secret (copied into the state directory)
    /// instead of a generated one. It must be readable by its owner only (chmod 600).
    #[arg(long, value_name = "FILE", conflicts_with = "no_secret")]
    pub secret_file: Option<PathBuf>,
    /// No secret: INSECURE, every peer that can reach a brick (and passes --auth-allow) is let
    /// in, root-squashed. By default every volume gets a generated secret, which mounts,
    /// self-heal and rebalance prove they hold.
    #[arg(long)]
    pub no_secret: bool,
    /// Refused: a secret on the command line is seen by every user (ps); use --secret-file.
    #[arg(long, value_name = "SECRET", hide = true)]
    pub secret: Option<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    if a.secret.is_some() {
        return Err(CliError::Rejected(
            "--secret is gone (a secret on the command line is visible to every user): put \
             it in a file (chmod 600) and give --secret-file FILE, or leave both out for a \
             generated one"
                .into(),
        ));
    }
    let state = ctx.state();
    let mut spec = build(&state, &a)?;
    let vd = state.volume_dir(&spec.name);
    if vd.spec_path().exists() {
        return Err(CliError::State(format!(
            "volume {:?} already exists in {}; pick another name or `xlfs volume delete` it",
            spec.name,
            state.root.display()
        )));
    }
    let secret = match (&a.secret_file, a.no_secret) {
        (_, true) => NewSecret::None,
        (Some(f), false) => NewSecret::From(f.clone()),
        (None, false) => NewSecret::Generate,
    };
    create(&state, &mut spec, secret)?;
    let layout = spec.layout();
    let n = spec.bricks.len();
    println!(
        "created volume {} ({layout}, {n} brick{})",
        spec.name,
        if n == 1 { "" } else { "s" }
    );
    for (i, b) in spec.bricks.iter().enumerate() {
        println!(
            "  brick {}  {b}  port {}{}",
            spec.brick_id(i),
            spec.brick_port(i),
            if spec.is_arbiter(i) {
                "  (arbiter)"
            } else {
                ""
            }
        );
    }
    println!("  volfiles in {}", vd.dir.display());
    match &spec.secret_file {
        Some(f) => println!(
            "  secret in {} (copy it to mount from elsewhere)",
            f.display()
        ),
        None => println!("  no secret: any peer that reaches a brick is let in (root-squashed)"),
    }
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
    spec.arbiter = a.arbiter;
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

/// Where a new volume's secret comes from.
#[derive(Clone, Debug)]
pub enum NewSecret {
    /// A random one (the default).
    Generate,
    /// The first line of this file (its mode checked as the hosts check it).
    From(PathBuf),
    /// None (`--no-secret`).
    None,
}

/// Validates everything, creates the local brick directories, then writes the state: the
/// secret file first (`spec.secret_file` is set to it), then the description and volfiles.
pub fn create(state: &State, spec: &mut VolumeSpec, secret: NewSecret) -> Result<()> {
    let vd = state.volume_dir(&spec.name);
    let secret = match secret {
        NewSecret::Generate => Some(xlfs_protocol::creds::generate_secret()),
        NewSecret::From(f) => Some(
            xlfs_protocol::creds::read_secret_file(&f)
                .map_err(|e| CliError::Rejected(format!("--secret-file: {e}")))?,
        ),
        NewSecret::None => None,
    };
    if secret.is_some() {
        // Absolute: the bricks and mounts read it from wherever they run.
        let file = vd.secret_file();
        spec.secret = None;
        spec.secret_file = Some(std::path::absolute(&file).map_err(CliError::io(&file))?);
    }
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
    std::fs::create_dir_all(&vd.dir).map_err(CliError::io(&vd.dir))?;
    if let Some(secret) = secret {
        write_atomic(&vd.secret_file(), &format!("{secret}\n"))?;
    }
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
