//! `xlfs volume list`: the volumes of the state directory.

use super::{Ctx, print_json};
use crate::error::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let names = ctx.state().list()?;
    if a.json {
        print_json(&names)?;
    } else if names.is_empty() {
        println!("no volumes in {}", ctx.state().root.display());
    } else {
        for n in names {
            println!("{n}");
        }
    }
    Ok(0)
}
