//! `xlfs volume set NAME KEY VALUE`: an option by key, checked against the translators'
//! schemas; the volfiles are regenerated, running mounts reload theirs (graph switch when
//! needed, no remount) and running bricks reread theirs. `user.NAME` keys place a user
//! translator (a plugin) above or below a slot of the client graph.

use std::time::Duration;

use xlfs_host::control::{self, Request};
use xlfs_volgen::{Catalog, Target, stack::Side, user};

use super::{Ctx, XLFS_MOUNT, XLFSD, generate_and_write, registry};
use crate::error::Result;
use crate::procs;
use crate::state::{Run, VolumeDir};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume set gv0 performance.write-behind.window-size 4MiB
  xlfs volume set gv0 window-size 4MiB           (a bare key, when only one translator has it)
  xlfs volume set gv0 performance.io-cache off   (leave a translator out)
  xlfs volume set gv0 auth.allow 10.0.0.0/8,127.0.0.1
  xlfs volume set gv0 user.counter \"user/counter above performance.write-behind\"
  xlfs volume set gv0 user.counter.count off     (an option of that translator)
  xlfs volume reset gv0 user.counter             (takes it out again)

A user translator's library is found like every plugin: XLFS_XLATOR_PATH, then next to the
xlfs binaries (set XLFS_XLATOR_PATH for xlfs, the bricks and the mounts alike).")]
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
    // The type of a user translator is checked here: generation validates the client volfile
    // against the registry (plugins from the search path); nothing is written on error.
    generate_and_write(&vd, &spec)?;
    println!("{}: {key} = {}", spec.name, a.value.trim());
    let run = vd.load_run()?;
    let (client_side, server_side, live) = if user::split_key(&key).is_some() {
        // A user translator is placed in (or its options change) the client graph.
        (true, false, false)
    } else {
        let info = catalog.resolve(&key)?;
        let live = info.live() && !matches!(info.target, Target::Switch { .. });
        (
            matches!(info.side(), Side::Client | Side::Both),
            matches!(info.side(), Side::Server | Side::Both),
            live,
        )
    };
    if client_side {
        notify_mounts(&run, live);
    }
    if server_side && super::started(&spec, &run) {
        reload_bricks(&vd, &run);
    }
    Ok(0)
}

/// Mounts started here reload at once (SIGHUP); every other mount of the volume follows its
/// volfile by itself (a watch at the brick or the file reread) within a second.
pub fn notify_mounts(run: &Run, live: bool) {
    let mut reloaded = 0;
    for m in &run.mounts {
        if procs::alive(m.pid, XLFS_MOUNT) && procs::signal(m.pid, libc::SIGHUP) {
            reloaded += 1;
        }
    }
    let how = if live {
        "applied in place"
    } else {
        "through a new graph, no remount"
    };
    if reloaded > 0 {
        println!("  {reloaded} mount(s) reload the client volfile now ({how})");
    }
    println!("  mounts elsewhere follow the client volfile by themselves ({how})");
}

/// Asks every running brick to reread its volfile; says what each did.
pub fn reload_bricks(vd: &VolumeDir, run: &Run) {
    for b in run.bricks.iter().filter(|b| procs::alive(b.pid, XLFSD)) {
        let sock = vd.brick_socket(b.index);
        match control::ask(&sock, Request::Reload, Duration::from_secs(30)) {
            Ok(answer) => println!("  brick {}: {}", b.index, answer.trim()),
            Err(_) => println!(
                "  brick {}: no control socket (started by an older xlfs); it takes the change \
                 when restarted: xlfs volume stop/start",
                b.index
            ),
        }
    }
}
