//! `xlfs volume set NAME KEY VALUE`: an option by key, checked against the translators'
//! schemas; the volfiles are regenerated and running mounts reload theirs.

use xlfs_volgen::{Catalog, Target, stack::Side};

use super::{Ctx, XLFS_MOUNT, generate_and_write, registry};
use crate::error::Result;
use crate::procs;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume set gv0 performance.write-behind.window-size 4MiB
  xlfs volume set gv0 window-size 4MiB           (a bare key, when only one translator has it)
  xlfs volume set gv0 performance.io-cache off   (leave a translator out)
  xlfs volume set gv0 auth.allow 10.0.0.0/8,127.0.0.1")]
pub struct Args {
    pub name: String,
    /// `category.translator.option`, a bare option, or `category.translator` (on/off).
    pub key: String,
    pub value: String,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let state = ctx.state();
    let (vd, mut spec) = state.load(&a.name)?;
    let catalog = Catalog::new(&registry());
    let key = catalog.set(&mut spec, &a.key, &a.value)?;
    generate_and_write(&vd, &spec)?;
    let info = catalog.resolve(&key)?;
    println!("{}: {key} = {}", spec.name, a.value.trim());
    let run = vd.load_run()?;
    let client_side = matches!(info.side(), Side::Client | Side::Both);
    let mut reloaded = 0;
    if client_side {
        for m in &run.mounts {
            if procs::alive(m.pid, XLFS_MOUNT) && procs::signal(m.pid, libc::SIGHUP) {
                reloaded += 1;
            }
        }
    }
    let live = info.live() && !matches!(info.target, Target::Switch { .. });
    if reloaded > 0 {
        let how = if live {
            "applied in place"
        } else {
            "through a new graph, no remount"
        };
        println!("  {reloaded} mount(s) reload the client volfile now ({how})");
    }
    if matches!(info.side(), Side::Server | Side::Both) && super::started(&spec, &run) {
        println!(
            "  bricks take it when restarted: xlfs volume stop/start {}",
            spec.name
        );
    }
    Ok(0)
}
