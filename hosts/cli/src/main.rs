//! `xlfs`: the xlfs command line. Creates volume descriptions, generates their volfiles
//! (volgen), starts the bricks of this host, mounts, shows status and stops, the way a
//! GlusterFS user works.

mod cmd;
mod error;
mod procs;
mod sibling;
mod state;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

// Linked so their option schemas are built in (registered through `inventory`).
use xlfs_io_stats as _;
use xlfs_locks as _;
use xlfs_posix as _;
use xlfs_protocol as _;
use xlfs_trace as _;

const AFTER_HELP: &str = "\
Examples:
  xlfs up /srv/demo                          one-command local volume (Ctrl-C stops it)
  xlfs volume create gv0 /data/b1            a single-brick volume
  xlfs volume create gv1 h1:/b h2:/b --replica 2
  xlfs volume set gv0 performance.write-behind.window-size 4MiB
  xlfs volume options                        every settable key
  xlfs volume start gv0 && xlfs mount gv0 /mnt/gv0
  xlfs volume status gv0 --json
  xlfs volume statedump gv0 --client /mnt/gv0 --json
  xlfs volume heal gv1 info                  replica entries pending heal, by path
  xlfs volume heal gv1                       heal them (full: look up every object)
  xlfs volume heal gv1 split-brain bigger-file /f   resolve a split-brain (the larger copy wins)
  xlfs volume set gv0 user.counter \"user/counter above performance.write-behind\"
  xlfs volume add-brick gv0 /data/b2         plain -> distribute 2 (mounts follow)
  xlfs volume rebalance gv0 start            move files to their new bricks; `status` shows progress
  xlfs volume remove-brick gv0 /data/b2 start   move the files off; then `... commit`
  xlfs umount /mnt/gv0 && xlfs volume stop gv0
  xlfs translator list                       every type a volfile can name
  xlfs translator new counter                a translator crate that builds out of tree

Environment:
  XLFS_STATE_DIR     the state directory (--state-dir)
  XLFS_XLATOR_PATH   extra translator plugins: directories or .so files, ':'-separated,
                     searched before the ones next to the xlfs binaries
  XLFS_BIN_DIR       where xlfsd, xlfs-mount and xlfs-rebalance are

Exit codes:
  0 success    1 failure (I/O...)   2 bad command line   3 description/option rejected
  4 no such volume   5 wrong state (exists, started, not started)   6 a brick or mount
  process failed   7 status: some bricks are down   8 heal: entries still pending";

/// The xlfs command line.
#[derive(Parser, Debug)]
#[command(name = "xlfs", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// Where volume descriptions, volfiles, pids and logs are kept.
    #[arg(long, global = true, value_name = "DIR", env = state::STATE_ENV)]
    pub state_dir: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Manage volumes.
    #[command(subcommand)]
    Volume(VolumeCommand),
    /// Print a generated volfile.
    Volfile(cmd::volfile::Args),
    /// Mount a volume with xlfs-mount (runs in the background; `xlfs umount` stops it).
    Mount(cmd::mount::Args),
    /// Unmount a volume mounted with `xlfs mount`.
    Umount(cmd::umount::Args),
    /// Create, start and mount a single-brick volume in DIR; Ctrl-C stops everything.
    Up(cmd::up::Args),
    /// Translator types: list them, show one's options, or start a new one.
    #[command(subcommand)]
    Translator(cmd::translator::Command),
    /// TLS certificates: a volume's CA, and certificates for its bricks and clients.
    #[command(subcommand)]
    Tls(cmd::tls::Command),
    /// The cluster's peers (hosts running xlfs-mgmtd): probe, status, detach.
    #[command(subcommand)]
    Peer(cmd::peer::PeerCommand),
    /// Every peer of the cluster.
    #[command(subcommand)]
    Pool(cmd::peer::PoolCommand),
}

#[derive(Subcommand, Debug)]
pub enum VolumeCommand {
    /// Describe a new volume and generate its volfiles.
    Create(cmd::create::Args),
    /// Write a volume's description as the cluster decided it (run by xlfs-mgmtd).
    #[command(hide = true)]
    Sync(cmd::sync::Args),
    /// Set an option by key (see `xlfs volume options`).
    Set(cmd::set::Args),
    /// Show option values.
    Get(cmd::get::Args),
    /// Return an option to its default.
    Reset(cmd::reset::Args),
    /// List every settable option key with its doc, default, range and liveness.
    Options(cmd::options::Args),
    /// Start the bricks of a volume that live on this host.
    Start(cmd::start::Args),
    /// Show bricks (up/down, ports, pids) and mounts.
    Status(cmd::status::Args),
    /// The live state of running bricks or a mount: the host's, then every translator's.
    Statedump(cmd::statedump::Args),
    /// Stop a volume's mounts and bricks on this host.
    Stop(cmd::stop::Args),
    /// List volumes.
    List(cmd::list::Args),
    /// Show a volume's description.
    Info(cmd::info::Args),
    /// Delete a stopped volume's description (brick data is kept).
    Delete(cmd::delete::Args),
    /// Replicate heal: `info` (pending entries by path), `info split-brain`, heal the index,
    /// `full` (look up everything), or `split-brain bigger-file|latest-mtime|source-brick`.
    Heal(cmd::heal::Args),
    /// Grow a volume: new bricks become new distribute subvolumes; mounts follow, no remount.
    AddBrick(cmd::add_brick::Args),
    /// Shrink a volume: `BRICK... start` moves their files off, `status`, `stop`, `commit`.
    RemoveBrick(cmd::remove_brick::Args),
    /// Move files to the bricks their names hash to: `start` (resumes), `status`, `stop`.
    Rebalance(cmd::rebalance::Args),
}

fn main() -> ExitCode {
    procs::default_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                error::code::USAGE
            } else {
                error::code::OK
            });
        }
    };
    match cmd::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("xlfs: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests;
