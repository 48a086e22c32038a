//! `xlfs volfile NAME [--client | --server BRICK]`: prints a generated volfile.

use xlfs_volgen::Brick;

use super::Ctx;
use crate::error::{CliError, Result};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volfile gv0                     the client volfile
  xlfs volfile gv0 --server 0          the server volfile of brick 0
  xlfs volfile gv0 --server h2:/export/b")]
pub struct Args {
    pub name: String,
    /// The server volfile of a brick, by index or as written (host:/path).
    #[arg(long, value_name = "BRICK", conflicts_with = "client")]
    pub server: Option<String>,
    /// The client volfile (the default).
    #[arg(long)]
    pub client: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let path = match &a.server {
        None => vd.client_volfile(),
        Some(which) => {
            let index = match which.parse::<usize>() {
                Ok(i) if i < spec.bricks.len() => i,
                Ok(i) => {
                    return Err(CliError::Rejected(format!(
                        "volume {} has {} bricks (0..{}); there is no brick {i}",
                        spec.name,
                        spec.bricks.len(),
                        spec.bricks.len() - 1
                    )));
                }
                Err(_) => {
                    let b = Brick::parse(which)?;
                    spec.bricks
                        .iter()
                        .position(|x| x.same_dir(&b))
                        .ok_or_else(|| {
                            CliError::Rejected(format!("volume {} has no brick {b}", spec.name))
                        })?
                }
            };
            vd.brick_volfile(index)
        }
    };
    let text = std::fs::read_to_string(&path).map_err(CliError::io(&path))?;
    print!("{text}");
    Ok(0)
}
