//! `xlfs volume reset NAME KEY`: back to the default.

use xlfs_volgen::Catalog;

use super::{Ctx, generate_and_write, registry};
use crate::error::Result;

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  xlfs volume reset gv0 performance.write-behind.window-size")]
pub struct Args {
    pub name: String,
    pub key: String,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, mut spec) = ctx.state().load(&a.name)?;
    let catalog = Catalog::new(&registry());
    let (key, was_set) = catalog.reset(&mut spec, &a.key)?;
    if was_set {
        generate_and_write(&vd, &spec)?;
        println!("{}: {key} reset to its default", spec.name);
    } else {
        println!("{}: {key} was not set", spec.name);
    }
    Ok(0)
}
