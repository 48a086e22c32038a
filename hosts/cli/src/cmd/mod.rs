//! One module per verb; this one dispatches and holds what several verbs share.

pub mod add_brick;
pub mod create;
pub mod delete;
pub mod get;
pub mod heal;
pub mod info;
pub mod list;
pub mod mount;
pub mod options;
pub mod peer;
pub mod rebalance;
pub mod remove_brick;
pub mod reset;
pub mod set;
pub mod start;
pub mod statedump;
pub mod status;
pub mod stop;
pub mod sync;
pub mod tls;
pub mod translator;
pub mod umount;
pub mod up;
pub mod volfile;

use std::path::PathBuf;

use serde::Serialize;
use xlfs_core::registry::Registry;
use xlfs_volgen::{Generated, VolumeSpec, generate};

use crate::error::{CliError, Result};
use crate::procs;
use crate::state::{DEFAULT_STATE_DIR, Run, State, VolumeDir};
use crate::{Cli, Command, VolumeCommand};

/// Name of the brick server binary.
pub const XLFSD: &str = "xlfsd";
/// Name of the FUSE mount binary.
pub const XLFS_MOUNT: &str = "xlfs-mount";

/// What every verb gets.
pub struct Ctx {
    /// `--state-dir` / `$XLFS_STATE_DIR`, if given.
    pub state_dir: Option<PathBuf>,
}

impl Ctx {
    pub fn state(&self) -> State {
        State::new(
            self.state_dir
                .clone()
                .unwrap_or_else(|| DEFAULT_STATE_DIR.into()),
        )
    }
}

/// Runs the command; the `Ok` value is the exit code.
pub fn run(cli: Cli) -> Result<u8> {
    let ctx = Ctx {
        state_dir: cli.state_dir,
    };
    if matches!(cli.command, Command::Volume(_))
        && let Some(code) = peer::forward_volume(&ctx)
    {
        return code;
    }
    match cli.command {
        Command::Volume(v) => match v {
            VolumeCommand::Create(a) => create::run(&ctx, a),
            VolumeCommand::Sync(a) => sync::run(&ctx, a),
            VolumeCommand::Set(a) => set::run(&ctx, a),
            VolumeCommand::Get(a) => get::run(&ctx, a),
            VolumeCommand::Reset(a) => reset::run(&ctx, a),
            VolumeCommand::Options(a) => options::run(&ctx, a),
            VolumeCommand::Start(a) => start::run(&ctx, a),
            VolumeCommand::Status(a) => status::run(&ctx, a),
            VolumeCommand::Statedump(a) => statedump::run(&ctx, a),
            VolumeCommand::Stop(a) => stop::run(&ctx, a),
            VolumeCommand::List(a) => list::run(&ctx, a),
            VolumeCommand::Info(a) => info::run(&ctx, a),
            VolumeCommand::Delete(a) => delete::run(&ctx, a),
            VolumeCommand::Heal(a) => heal::run(&ctx, a),
            VolumeCommand::AddBrick(a) => add_brick::run(&ctx, a),
            VolumeCommand::RemoveBrick(a) => remove_brick::run(&ctx, a),
            VolumeCommand::Rebalance(a) => rebalance::run(&ctx, a),
        },
        Command::Volfile(a) => volfile::run(&ctx, a),
        Command::Mount(a) => mount::run(&ctx, a),
        Command::Umount(a) => umount::run(&ctx, a),
        Command::Up(a) => up::run(&ctx, a),
        Command::Translator(c) => translator::run(&ctx, c),
        Command::Tls(c) => tls::run(c),
        Command::Peer(c) => peer::run(&ctx, c),
        Command::Pool(c) => peer::pool(&ctx, c),
    }
}

/// The translator types of this build: built in, then the plugin search path.
pub fn registry() -> Registry {
    Registry::new()
}

/// Generates `spec`'s volfiles (validated) and writes them with the description; nothing is
/// written if generation fails.
pub fn generate_and_write(vd: &VolumeDir, spec: &VolumeSpec) -> Result<Generated> {
    let generated = generate(spec, &registry())?;
    vd.write(spec, &generated)?;
    Ok(generated)
}

/// The file holding the volume's secret, for hosts' `--secret-file`: the one the description
/// names, or (volumes made with an inline secret) the state's copy, rewritten from it.
pub fn secret_file(vd: &VolumeDir, spec: &VolumeSpec) -> Result<Option<PathBuf>> {
    match (&spec.secret_file, &spec.secret) {
        (Some(f), _) => Ok(Some(f.clone())),
        (None, Some(secret)) => {
            let file = vd.secret_file();
            crate::state::write_atomic(&file, &format!("{secret}\n"))?;
            Ok(Some(
                std::path::absolute(&file).map_err(CliError::io(&file))?,
            ))
        }
        (None, None) => Ok(None),
    }
}

/// Prints `value` as pretty JSON.
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Other(e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// One brick as `status` sees it.
#[derive(Clone, Debug, Serialize)]
pub struct BrickState {
    /// The brick's id (its position unless bricks were removed): names its volfile, log,
    /// socket and port.
    pub index: usize,
    pub brick: String,
    pub port: u16,
    /// On this host (xlfs starts and stops it here).
    pub local: bool,
    pub pid: Option<u32>,
    pub online: bool,
}

/// The bricks of `spec`: local ones by their recorded pid and port, remote ones by port.
pub fn brick_states(spec: &VolumeSpec, run: &Run) -> Vec<BrickState> {
    let names = procs::local_host_names();
    spec.bricks
        .iter()
        .enumerate()
        .map(|(pos, b)| {
            let index = spec.brick_id(pos);
            let port = spec.brick_port(pos);
            let local = b.is_on(&names);
            let pid = run
                .bricks
                .iter()
                .find(|r| r.index == index)
                .map(|r| r.pid)
                .filter(|pid| procs::alive(*pid, XLFSD));
            let reachable = procs::port_open(b.connect_host(), port);
            let online = reachable && (!local || pid.is_some());
            BrickState {
                index,
                brick: b.to_string(),
                port,
                local,
                pid,
                online,
            }
        })
        .collect()
}

/// Whether any local brick of the volume runs.
pub fn started(spec: &VolumeSpec, run: &Run) -> bool {
    brick_states(spec, run)
        .iter()
        .any(|b| b.local && b.pid.is_some())
}
