//! `xlfs-rebalance`: the rebalance runner. Loads the volume's client graph in this process
//! (like xlfs-mount, without FUSE), waits for its bricks, then crawls the volume (see the
//! library). Runs in the foreground; `xlfs volume rebalance VOL start` detaches it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use xlfs_core::registry::Registry;
use xlfs_core::source::Source;
use xlfs_core::volume::Volume;
use xlfs_host::VolfileLoader;
use xlfs_protocol::fetch::VolfileServer;
use xlfs_rebalance::status::{self, Begin, Mode, State, Status};
use xlfs_rebalance::target::{self, VolumeTarget};
use xlfs_rebalance::{Config, Stop};
// Linked in for its built-in translator type: protocol/client owns sockets on this runtime.
use xlfs_protocol as _;

/// Rebalances an xlfs distribute volume: rewrites every directory's layout over the current
/// bricks and moves each file whose name now hashes to another brick there, through the
/// volume's own client graph (cluster/distribute does the moves, safely for clients that
/// have the files open). Progress goes to a status file; a stopped or crashed run resumes.
#[derive(Parser, Debug)]
#[command(name = "xlfs-rebalance", version, about, long_about)]
#[command(
    override_usage = "xlfs-rebalance --server HOST[:PORT] --volume VOL --status FILE [OPTIONS]
       xlfs-rebalance --volfile FILE --status FILE [OPTIONS]"
)]
#[command(
    after_help = "What it does, directory by directory, breadth-first from the root:
  1. getxattr(dir, \"xlfs.dht.fix-layout\"): the layout is rewritten over the bricks that are
     not decommissioned (untrusted: files may still sit on their old brick);
  2. for every entry that is not a directory, getxattr(file, \"xlfs.dht.migrate:PARENT/NAME\"):
     distribute moves it to the brick its name hashes to (in-place, moved N bytes, or skipped
     with a reason: hard-links, no-devices, locked, busy, changing, no-space); --parallel at
     once;
  3. when no file was skipped or failed, getxattr(dir, \"xlfs.dht.commit-layout\"): the layout
     is trusted again (lookups of missing names cost one round trip);
  4. the directory's GFID goes into done_dirs.
  Files skipped as busy, locked or changing are retried after the crawl (--retries rounds,
  --retry-delay apart); their directory is done, and committed, once they settle.
  A file with hard links on a brick being removed is moved after the crawl with all its
  names at once (getxattr \"xlfs.dht.migrate-links:P1/N1/P2/N2...\"), once the crawl found
  as many names as its link count; until then each name counts as skipped (hard-links).

Status file (--status, JSON, rewritten atomically every second and at the end):
  version, mode, state (running|completed|stopped|failed), pid, started, updated,
  finished (UNIX seconds or null), dirs_done, files_scanned, files_moved, bytes_moved,
  files_skipped, files_vanished (gone before their turn), failures, files_total_estimate
  (inodes in use on the volume, or null), rate_files_per_s and rate_bytes_per_s (this
  process's run), eta_s (or null), last_error, topology (the bricks the done directories
  were fixed for), done_dirs (GFIDs).

Resume: a status file left running (a crash: kill -9, a reboot), stopped or failed is
  resumed: counters kept, directories in done_dirs not redone (only listed, to find their
  subdirectories). Everything is idempotent on distribute's side, so the unfinished
  directories are simply done again. A completed file, another --mode, or bricks changed
  since (add-brick, remove-brick) start a new run; so does --restart. A status file that is
  not valid JSON of this format is refused (it names the file) unless --restart is given.
  A running file whose pid is a live xlfs-rebalance is refused.

Stop: SIGTERM or SIGINT: the files being moved finish, state \"stopped\", exit 0.

Exit status: 0 completed or stopped; 1 failed (state \"failed\", last_error set: a failure
  on a file or directory, which the next start retries, or a volume that cannot rebalance:
  no cluster/distribute, or one that does not know these xattrs), or could not start (bad
  volfile or server, unusable status file, another runner); 2 usage error.

Examples:
  xlfs-rebalance --server 127.0.0.1:49152 --volume gv0 --status /var/lib/xlfs/volumes/gv0/rebalance.json
  xlfs-rebalance --volfile client.vol --status rb.json --mode remove-brick"
)]
struct Cli {
    /// A brick of the volume to fetch the client volfile from: HOST or HOST:PORT (PORT
    /// defaults to 49152; IPv6 in brackets).
    #[arg(
        long,
        value_name = "HOST[:PORT]",
        requires = "volume",
        conflicts_with = "volfile"
    )]
    server: Option<String>,

    /// The volume's name (with --server).
    #[arg(long, value_name = "VOL", requires = "server")]
    volume: Option<String>,

    /// A client volfile on disk instead of --server/--volume.
    #[arg(long, value_name = "FILE", required_unless_present = "server")]
    volfile: Option<PathBuf>,

    /// A file holding the shared secret presented to the brick when fetching the volfile
    /// (first line; mode 0600) and used by the fetched graph's protocol/clients. XLFS_SECRET
    /// in the environment is used when no file is given.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,

    /// The status file (JSON), read at start to resume and rewritten every second.
    #[arg(long, value_name = "FILE")]
    status: PathBuf,

    /// rebalance (after add-brick) or remove-brick (move files off the children the
    /// volfile's cluster/distribute `decommissioned` option names; refused when it names
    /// none).
    #[arg(long, value_enum, default_value_t = Mode::Rebalance)]
    mode: Mode,

    /// Files moved at once.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    parallel: u16,

    /// Files skipped for a reason that may pass (busy, locked, changing) are retried after
    /// the crawl, up to this many rounds; their directories are committed once they settle.
    #[arg(long, value_name = "N", default_value_t = 3)]
    retries: u32,

    /// The pause before each retry round.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = xlator_api::parse_duration)]
    retry_delay: Duration,

    /// Start a new run even if the status file holds an unfinished one (or cannot be read).
    #[arg(long)]
    restart: bool,

    /// How long fetching the volfile may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = xlator_api::parse_duration)]
    fetch_timeout: Duration,

    /// Log filter (error, warn, info, debug, trace or a tracing directive); RUST_LOG wins.
    /// Logs go to stderr; a progress line every 10 s at info.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    log_level: String,
}

fn main() -> ExitCode {
    let cli = parse_cli();
    if let Err(e) = xlfs_core::logging::init(&cli.log_level) {
        eprintln!("xlfs-rebalance: {e}");
        return ExitCode::from(2);
    }
    match run(cli) {
        Ok(State::Completed | State::Stopped) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xlfs-rebalance: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `Cli::parse()`, with the plugin search path explained at the end of `--help`.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let cmd = Cli::command();
    let after = cmd
        .get_after_help()
        .map(|h| format!("{h}\n\n"))
        .unwrap_or_default();
    let matches = cmd
        .after_help(format!("{after}{}", xlfs_core::registry::PATH_HELP))
        .get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn read_secret(cli: &Cli) -> Result<Option<String>, String> {
    match &cli.secret_file {
        Some(f) => xlfs_protocol::creds::read_secret_file(f).map(Some),
        None => Ok(std::env::var("XLFS_SECRET").ok().filter(|s| !s.is_empty())),
    }
}

fn loader(cli: &Cli) -> Result<VolfileLoader, String> {
    match (&cli.server, &cli.volume, &cli.volfile) {
        (Some(server), Some(volume), None) => {
            let server = VolfileServer::parse(&format!("{server}:/{volume}"))
                .map_err(|e| format!("--server {server:?} --volume {volume:?}: {e}"))?;
            Ok(VolfileLoader::Fetch {
                server,
                backups: Vec::new(),
                creds: xlfs_protocol::Credentials::secret(read_secret(cli)?.as_deref()),
                timeout: cli.fetch_timeout,
                secret_file: cli.secret_file.clone(),
            })
        }
        (None, None, Some(f)) => Ok(VolfileLoader::Core(Source::File(f.clone()))),
        _ => Err("give --server HOST[:PORT] with --volume VOL, or --volfile FILE".into()),
    }
}

/// Records a failure to start in the status file (counters of a resumable run kept), so
/// `xlfs volume rebalance status` shows why; returns the message.
fn fail_to_start(cli: &Cli, prev: Option<Status>, msg: String) -> String {
    let (mut s, _) = status::begin(
        prev,
        cli.mode,
        cli.restart,
        None,
        std::process::id(),
        status::now_s(),
    );
    s.state = State::Failed;
    s.finished = Some(s.updated);
    s.last_error = Some(msg.clone());
    if let Err(e) = status::store(&cli.status, &s) {
        return format!("{msg} (and {e})");
    }
    msg
}

fn run(cli: Cli) -> Result<State, String> {
    let pid = std::process::id();
    let prev = match status::load(&cli.status) {
        Ok(p) => p,
        Err(e @ status::StatusError::Corrupt { .. }) if cli.restart => {
            tracing::warn!("{e}; --restart: a new run replaces it");
            None
        }
        Err(e) => return Err(e.to_string()),
    };
    status::check_not_running(&cli.status, prev.as_ref(), pid).map_err(|e| e.to_string())?;
    let source = match loader(&cli) {
        Ok(s) => s,
        Err(e) => return Err(fail_to_start(&cli, prev, e)),
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("xlfs-worker")
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    let volfile = match rt.block_on(source.load()) {
        Ok(v) => v,
        Err(e) => {
            return Err(fail_to_start(
                &cli,
                prev,
                format!("cannot load the volfile: {e}"),
            ));
        }
    };
    let volume = {
        // Translators may spawn from `init`: build the graph inside the runtime.
        let _guard = rt.enter();
        match Volume::new(volfile, Arc::new(Registry::new())) {
            Ok(v) => Arc::new(v),
            Err(e) => {
                return Err(fail_to_start(
                    &cli,
                    prev,
                    format!("cannot build the graph: {e}"),
                ));
            }
        }
    };
    let graph = volume.graph();
    let dists = target::distributes(&graph);
    if dists.is_empty() {
        let msg = format!(
            "the client graph of {} has no cluster/distribute translator: there is nothing to \
             rebalance",
            graph.volfile().origin
        );
        return Err(fail_to_start(&cli, prev, msg));
    }
    if cli.mode == Mode::RemoveBrick && dists.iter().all(|(_, d)| d.is_empty()) {
        let msg = format!(
            "--mode remove-brick, but no cluster/distribute of {} has its `decommissioned` option \
             set: no brick would be emptied (xlfs volume remove-brick VOL BRICK start sets it)",
            graph.volfile().origin
        );
        return Err(fail_to_start(&cli, prev, msg));
    }
    for (name, d) in &dists {
        if !d.is_empty() {
            tracing::info!("{name}: moving files off {d}");
        }
    }
    drop(graph);
    xlfs_host::wait_until_up(&volume);

    let target = VolumeTarget(volume.clone());
    let topology = xlfs_rebalance::Target::topology(&target);
    let (start, how) = status::begin(prev, cli.mode, cli.restart, topology, pid, status::now_s());
    match how {
        Begin::Fresh(None) => tracing::info!("{} started", cli.mode.name()),
        Begin::Fresh(Some(why)) => tracing::info!("{} started afresh: {why}", cli.mode.name()),
        Begin::Resumed { from, done_dirs } => tracing::info!(
            "{} resumed (it was {from:?}): {done_dirs} directories already done, counters kept",
            cli.mode.name()
        ),
    }
    let source = Arc::new(source);
    // The graph follows its volfile (a watch at the brick, or the file reread): an add-brick
    // during the run switches it, and the crawl starts again from the root on the new one.
    rt.spawn(source.follow(volume.clone()));

    let cfg = Config {
        parallel: usize::from(cli.parallel),
        retry: xlfs_rebalance::crawl::Retry {
            rounds: cli.retries,
            delay: cli.retry_delay,
        },
        ..Config::new(cli.status.clone())
    };
    let stop = Stop::new();
    let drained = volume.clone();
    rt.block_on(async move {
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
        let mut int =
            signal(SignalKind::interrupt()).map_err(|e| format!("cannot watch SIGINT: {e}"))?;
        let s = stop.clone();
        tokio::spawn(async move {
            loop {
                let sig = tokio::select! {
                    _ = term.recv() => "SIGTERM",
                    _ = int.recv() => "SIGINT",
                };
                if s.request() {
                    tracing::warn!("{sig}: already stopping (waiting for the files in flight)");
                } else {
                    tracing::info!("{sig}: stopping after the files in flight");
                }
            }
        });
        let end = xlfs_rebalance::run(Arc::new(target), start, &cfg, stop).await;
        // What the translators still owe the bricks (replicate's eager holds) goes before
        // the process does.
        xlfs_host::drain(&drained).await;
        Ok(end.map_err(|e| e.to_string())?.state)
    })
}
