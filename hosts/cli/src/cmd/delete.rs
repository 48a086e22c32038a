//! `xlfs volume delete NAME`: removes a stopped volume's state (never the brick data).

use super::Ctx;
use crate::error::{CliError, Result};

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  xlfs volume stop gv0; xlfs volume delete gv0")]
pub struct Args {
    pub name: String,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let run = vd.load_run()?;
    if super::started(&spec, &run) || !run.mounts.is_empty() {
        return Err(CliError::State(format!(
            "volume {} is started; `xlfs volume stop {}` first",
            spec.name, spec.name
        )));
    }
    std::fs::remove_dir_all(&vd.dir).map_err(CliError::io(&vd.dir))?;
    println!("deleted volume {} (brick directories are kept)", spec.name);
    Ok(0)
}
