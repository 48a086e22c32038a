//! `xlfs volume sync NAME --spec FILE [--secret-file FILE]` (hidden): writes a volume's
//! description as the cluster decided it into this host's state directory, the way xlfs-mgmtd
//! applies a create, set or reset made on another peer. The volfiles are regenerated; running
//! bricks reread theirs and mounts started here reload (the others follow by themselves);
//! bricks that run here but left the description (a remove-brick commit) are stopped.

use std::path::{Path, PathBuf};

use xlfs_volgen::VolumeSpec;

use super::{Ctx, generate_and_write};
use crate::error::{CliError, Result};
use crate::procs;
use crate::state::write_atomic;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub name: String,
    /// The description (volume.ron) to take.
    #[arg(long, value_name = "FILE")]
    pub spec: PathBuf,
    /// The volume's secret, copied into the state directory.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let mut spec = VolumeSpec::load(&a.spec)?;
    if spec.name != a.name {
        return Err(CliError::Rejected(format!(
            "{} describes volume {}, not {}",
            a.spec.display(),
            spec.name,
            a.name
        )));
    }
    let vd = ctx.state().volume_dir(&a.name);
    std::fs::create_dir_all(&vd.dir).map_err(CliError::io(&vd.dir))?;
    if let Some(f) = &a.secret_file {
        let secret = xlfs_protocol::creds::read_secret_file(f)
            .map_err(|e| CliError::Rejected(format!("--secret-file: {e}")))?;
        let file = vd.secret_file();
        write_atomic(&file, &format!("{secret}\n"))?;
        spec.secret = None;
        spec.secret_file = Some(std::path::absolute(&file).map_err(CliError::io(&file))?);
    }
    let names = procs::local_host_names();
    for b in spec.bricks.iter().filter(|b| b.is_on(&names)) {
        super::create::check_local_dir(Path::new(b.path()))?;
        std::fs::create_dir_all(b.path()).map_err(CliError::io(b.path()))?;
    }
    generate_and_write(&vd, &spec)?;
    let run = vd.load_run()?;
    if super::started(&spec, &run) {
        super::set::reload_bricks(&vd, &run);
    }
    if !run.mounts.is_empty() {
        super::set::notify_mounts(&run, false);
    }
    println!("{}: description written", spec.name);
    // A remove-brick committed anywhere: this host's removed bricks go.
    for line in super::remove_brick::stop_removed(&vd, &spec)? {
        println!("{line}");
    }
    Ok(0)
}
