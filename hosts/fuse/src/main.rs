//! `xlfs-mount`: mounts an xlfs volume through FUSE (fuser's pure-Rust mount, no libfuse).
//!
//! ```text
//! xlfs-mount server1:/gv0 /mnt/gv0              # client volfile fetched from a brick
//! xlfs-mount 127.0.0.1:24010:/gv0 /mnt/gv0      # ... on another port than 49152
//! xlfs-mount --local /srv/vol /mnt/vol          # storage/posix + features/locks + io-stats
//! xlfs-mount --volfile client.vol /mnt/vol      # any graph
//! ```
//!
//! Runs in the foreground; SIGINT/SIGTERM unmount and exit 0; SIGHUP reloads the volfile
//! (fetching it again for HOST:/VOLUME).

mod atime;
mod attr;
mod capcache;
mod creds;
mod dir;
mod fds;
mod fresh;
mod fs;
mod helper;
mod inodes;
mod lkwait;
mod migrate;
mod mount;
mod notify;
mod options;
mod passthrough;
mod upcall;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use xlator_api::DumpFormat;
use xlfs_core::registry::Registry;
use xlfs_core::volume::Volume;
// Linked in for their built-in translator types (registered through `inventory`).
use xlfs_io_stats as _;
use xlfs_locks as _;
use xlfs_posix as _;
use xlfs_protocol as _;

use crate::fs::{Shared, XlfsFs};
use crate::mount::{MountConfig, MountError};
use crate::options::{Cli, GraphSource};
use xlfs_core::source::Source;
use xlfs_host::{LoadError, VolfileLoader};

/// How long to wait for the FUSE loops to end after unmounting before exiting anyway (the
/// kernel aborts the connection when the process exits).
const SESSION_END_GRACE: Duration = Duration::from_secs(5);

#[derive(thiserror::Error, Debug)]
enum Error {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Graph(Box<xlfs_core::graph::GraphError>),
    #[error(transparent)]
    Mount(#[from] MountError),
    /// An unusable `--secret-file`.
    #[error("--secret-file: {0}")]
    Secret(String),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl From<xlfs_core::graph::GraphError> for Error {
    fn from(e: xlfs_core::graph::GraphError) -> Error {
        Error::Graph(Box::new(e))
    }
}

fn io_err(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

fn main() -> ExitCode {
    // Before any thread starts: payload buffers then stay in the heap (see the module).
    xlfs_core::malloc::tune();
    // Run as `mount.fuse.xlfs` / `mount.xlfs` by mount(8).
    if let Some(code) = helper::run_if_named() {
        return code;
    }
    let cli = parse_cli();
    // A missing or doubled source is a usage error (clap's message, exit status 2).
    let (source, mountpoint) = match cli.source() {
        Ok(s) => s,
        Err(e) => {
            use clap::CommandFactory;
            Cli::command()
                .error(clap::error::ErrorKind::MissingRequiredArgument, e)
                .exit()
        }
    };
    if let Err(e) = xlfs_core::logging::init(&cli.log_level) {
        eprintln!("xlfs-mount: {e}");
        return ExitCode::from(2);
    }
    match run(cli, source, mountpoint) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlfs-mount: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, source: GraphSource, mountpoint: PathBuf) -> Result<(), Error> {
    let source = match source {
        GraphSource::File(f) => VolfileLoader::Core(Source::File(f)),
        GraphSource::Local(d) => VolfileLoader::Core(Source::Local(d)),
        GraphSource::Fetch(server, backups) => VolfileLoader::Fetch {
            server,
            backups,
            creds: xlfs_host::credentials(cli.secret_file.as_deref()).map_err(Error::Secret)?,
            timeout: cli.fetch_timeout,
            secret_file: cli.secret_file.clone(),
        },
    };
    let mountpoint = mount::preflight(&mountpoint, cli.force_unmount_stale)?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("xlfs-worker")
        .build()
        .map_err(io_err("cannot start the async runtime"))?;
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    let volfile = rt.block_on(source.load())?;
    let origin = volfile.origin.clone();
    let volume = {
        // Translators may spawn from `init`: build the graph inside the runtime.
        let _guard = rt.enter();
        Arc::new(Volume::new(volfile, Arc::new(Registry::new()))?)
    };
    xlfs_host::wait_until_up(&volume);
    let top = volume.graph().top().name().to_string();

    let is_root = effective_uid() == 0;
    let cfg = MountConfig {
        fsname: cli.fsname.clone().unwrap_or_else(|| format!("xlfs:{top}")),
        allow_other: cli.allow_other(is_root),
        default_permissions: !cli.no_default_permissions,
        threads: usize::from(cli.threads),
        dev: cli.dev,
        read_only: cli.read_only,
        read_ahead_kb: cli.read_ahead / 1024,
    };
    let shared = Shared::new(volume.clone(), cli.fs_options(), rt.handle().clone());
    upcall::start(&shared, &volume);
    let source = Arc::new(source);
    // The graph follows its volfile (watch at the brick, or the file reread).
    rt.spawn(source.clone().follow(volume.clone()));
    let _control = match &cli.control_socket {
        Some(path) => Some(control_socket(
            path,
            &volume,
            &shared,
            &source,
            &rt,
            &mountpoint,
        )?),
        None => None,
    };
    rt.block_on(serve(
        &cli,
        source,
        volume,
        shared,
        &mountpoint,
        &cfg,
        &origin,
        &top,
    ))
}

/// Opens the `--control-socket`: statedumps of the mount (host state, then every
/// translator) and reloads of the volfile, answered on the control thread.
fn control_socket(
    path: &std::path::Path,
    volume: &Arc<Volume>,
    shared: &Arc<Shared>,
    source: &Arc<VolfileLoader>,
    rt: &tokio::runtime::Runtime,
    mountpoint: &std::path::Path,
) -> Result<xlfs_host::control::ControlSocket, Error> {
    use xlfs_host::control::{self, Request};
    let (volume, shared, source) = (volume.clone(), shared.clone(), source.clone());
    let handle = rt.handle().clone();
    let host = format!("xlfs-mount {}", mountpoint.display());
    control::ControlSocket::open(
        path,
        Arc::new(move |req| match req {
            Request::StatedumpText => {
                control::statedump(&host, &volume, &shared.dump(), DumpFormat::Text)
            }
            Request::StatedumpJson => {
                control::statedump(&host, &volume, &shared.dump(), DumpFormat::Json)
            }
            Request::Reload => handle.block_on(source.reload_report(&volume)),
        }),
    )
    .map_err(io_err("cannot open the control socket"))
}

/// The effective uid, from /proc (keeps `unsafe` out of this module).
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|u| u.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// How the session ended.
enum End {
    Signal(&'static str),
    External,
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    cli: &Cli,
    source: Arc<VolfileLoader>,
    volume: Arc<Volume>,
    shared: Arc<Shared>,
    mountpoint: &std::path::Path,
    cfg: &MountConfig,
    origin: &str,
    top: &str,
) -> Result<(), Error> {
    // Signals first, so one arriving right after the mount line is printed is handled.
    let mut term = signal(SignalKind::terminate()).map_err(io_err("cannot watch SIGTERM"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("cannot watch SIGINT"))?;
    let mut hup = signal(SignalKind::hangup()).map_err(io_err("cannot watch SIGHUP"))?;

    let mut session = mount::mount(XlfsFs::new(shared.clone()), mountpoint, cfg)?;
    // Before `run`: no request is served yet.
    shared.kernel.set(session.notifier());
    let mut unmounter = session.unmount_callable();
    let (tx, mut done) = tokio::sync::oneshot::channel();
    // If this fails the session is dropped, which unmounts.
    std::thread::Builder::new()
        .name("fuser-session".into())
        .spawn(move || {
            let _ = tx.send(session.run());
        })
        .map_err(io_err("cannot start the FUSE session thread"))?;

    println!(
        "xlfs-mount: mounted volume {top:?} ({origin}) at {} [pid {}]",
        mountpoint.display(),
        std::process::id()
    );
    let _ = std::io::stdout().flush();

    let end = loop {
        tokio::select! {
            r = &mut done => {
                if let Ok(Err(e)) = r {
                    tracing::error!(error = %e, "FUSE session failed");
                }
                break End::External;
            }
            _ = term.recv() => break End::Signal("SIGTERM"),
            _ = int.recv() => break End::Signal("SIGINT"),
            _ = hup.recv() => source.reload(&volume).await,
        }
    };

    match end {
        End::External => {
            tracing::info!(path = %mountpoint.display(), "unmounted from outside; exiting");
        }
        End::Signal(sig) => {
            tracing::info!(signal = sig, path = %mountpoint.display(), "unmounting");
            let mp = mountpoint.to_path_buf();
            let r =
                tokio::task::spawn_blocking(move || mount::unmount(&mp, || unmounter.unmount()))
                    .await
                    .map_err(|e| Error::Io {
                        what: "unmount task failed",
                        source: std::io::Error::other(e),
                    })?;
            let lazy = r.map_err(io_err("unmount failed"))?;
            if !lazy {
                match tokio::time::timeout(SESSION_END_GRACE, &mut done).await {
                    Ok(Ok(Err(e))) => {
                        tracing::warn!(error = %e, "FUSE session ended with an error")
                    }
                    Ok(_) => {}
                    Err(_) => tracing::warn!("FUSE loops did not stop in time; exiting anyway"),
                }
            }
        }
    }
    let host_dump = shared.dump();
    shared.release_all().await;
    xlfs_host::drain(&volume).await;
    println!("xlfs-mount: unmounted {}", mountpoint.display());
    if cli.dump_on_exit {
        println!("{host_dump}{}", volume.graph().dump(DumpFormat::Text));
    }
    let _ = std::io::stdout().flush();
    Ok(())
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
