//! `xlfs volume reset NAME KEY`: back to the default (`user.NAME`: the user translator goes
//! out, with its options). Running mounts follow the regenerated client volfile.

use xlfs_volgen::{Catalog, user};

use super::{Ctx, generate_and_write, registry};
use crate::error::Result;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  xlfs volume reset gv0 performance.write-behind.window-size\n  \
    xlfs volume reset gv0 user.counter"
)]
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
        let run = vd.load_run()?;
        super::set::notify_mounts(&run, user::split_key(&key).is_none());
        if user::split_key(&key).is_none() && super::started(&spec, &run) {
            super::set::reload_bricks(&vd, &run);
        }
    } else {
        println!("{}: {key} was not set", spec.name);
    }
    Ok(0)
}
