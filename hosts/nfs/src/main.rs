//! `xlfs-nfsd`: serves an xlfs volume over NFSv3 (RFC 1813) with MOUNT and a minimal
//! portmapper on one TCP port.
//!
//! ```text
//! xlfs-nfsd --local /srv/vol --port 0          # storage/posix + features/locks + io-stats
//! xlfs-nfsd --volfile client.vol --allow 10.0.0.0/8 --address 0.0.0.0
//! xlfs-nfsd server1:/gv0 --port 0              # client volfile fetched from a brick
//! nfs-ls 'nfs://127.0.0.1/?version=3&nfsport=2049&mountport=2049'
//! ```
//!
//! Runs in the foreground; SIGINT/SIGTERM stop it (exit 0); SIGHUP reloads the volfile.
//! The wire protocol (RPC record marking, call headers, MOUNT, portmap, the NFS procedures) is
//! served here on top of `nfs3_types`' XDR types; see README.md for why not `nfs3_server`.

mod export;
mod handle;
mod mount;
mod nfs;
mod options;
mod rpc;
mod server;
mod volid;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use xlator_api::{DumpFormat, Gfid};
use xlfs_core::registry::Registry;
use xlfs_core::volume::Volume;
// Linked in for their built-in translator types (registered through `inventory`).
use xlfs_io_stats as _;
use xlfs_locks as _;
use xlfs_posix as _;
use xlfs_protocol as _;

use crate::export::ExportPolicy;
use crate::handle::{HandleCodec, VolumeId};
use crate::mount::Mountd;
use crate::nfs::Nfs;
use crate::options::Cli;
use crate::server::Server;
use xlfs_core::source::Source;
use xlfs_host::{LoadError, VolfileLoader};

/// The control socket (statedump, reload) of this server, when set: see
/// `xlfs_host::control`.
const CONTROL_SOCKET_ENV: &str = "XLFS_CONTROL_SOCKET";

/// How long calls in flight may take to finish after SIGINT/SIGTERM.
const DRAIN: Duration = Duration::from_secs(5);
/// How long the runtime may take to stop its blocking jobs at exit.
const RUNTIME_STOP: Duration = Duration::from_secs(2);

#[derive(thiserror::Error, Debug)]
enum Error {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Graph(Box<xlfs_core::graph::GraphError>),
    /// `--secret` given, or an unusable `--secret-file`.
    #[error("{0}")]
    Secret(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<xlfs_core::graph::GraphError> for Error {
    fn from(e: xlfs_core::graph::GraphError) -> Error {
        Error::Graph(Box::new(e))
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

fn main() -> ExitCode {
    // Before any thread starts: payload buffers then stay in the heap (see the module).
    xlfs_core::malloc::tune();
    let cli = parse_cli();
    if let Err(e) = xlfs_core::logging::init(&cli.log_level) {
        eprintln!("xlfs-nfsd: {e}");
        return ExitCode::from(2);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlfs-nfsd: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Error> {
    if cli.secret.is_some() {
        return Err(Error::Secret(
            "--secret is gone (a secret on the command line is visible to every user): put it \
             in a file (chmod 600) and give --secret-file FILE"
                .into(),
        ));
    }
    let source = match (&cli.server, &cli.volfile, &cli.local) {
        (Some(s), _, _) => VolfileLoader::Fetch {
            server: s.0[0].clone(),
            backups: s.0[1..].to_vec(),
            creds: xlfs_host::credentials(cli.secret_file.as_deref())
                .map_err(|e| Error::Secret(format!("--secret-file: {e}")))?,
            timeout: cli.fetch_timeout,
            secret_file: cli.secret_file.clone(),
        },
        (None, _, _) if cli.secret_file.is_some() => {
            return Err(Error::Secret(
                "--secret-file is for HOST:/VOLUME: a volfile on disk names its clients' secret \
                 file itself (their `secret-file` option)"
                    .into(),
            ));
        }
        (None, Some(f), _) => VolfileLoader::Core(Source::File(f.clone())),
        (None, None, Some(d)) => VolfileLoader::Core(Source::Local(d.clone())),
        // clap's required group guarantees one of them.
        (None, None, None) => VolfileLoader::Core(Source::Local(".".into())),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("xlfs-nfsd")
        .build()
        .map_err(io_err("cannot start the async runtime"))?;
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    let volfile = rt.block_on(source.load())?;
    let id = volid::volume_id(&volfile, cli.fsid.as_deref());
    let origin = volfile.origin.clone();
    let volume = {
        // Translators may spawn from `init`: build the graph inside the runtime.
        let _guard = rt.enter();
        Arc::new(Volume::new(volfile, Arc::new(Registry::new()))?)
    };
    xlfs_host::wait_until_up(&volume);
    let source = Arc::new(source);
    // The graph follows its volfile (watch at the brick, or the file reread).
    rt.spawn(source.clone().follow(volume.clone()));
    let _control = match std::env::var_os(CONTROL_SOCKET_ENV) {
        Some(path) => Some(control_socket(path.as_ref(), &volume, &source, &rt)?),
        None => None,
    };
    let r = rt.block_on(serve(&cli, &source, volume, id, &origin));
    rt.shutdown_timeout(RUNTIME_STOP);
    r
}

/// Opens the control socket: statedumps of every translator and reloads of the volfile.
fn control_socket(
    path: &std::path::Path,
    volume: &Arc<Volume>,
    source: &Arc<VolfileLoader>,
    rt: &tokio::runtime::Runtime,
) -> Result<xlfs_host::control::ControlSocket, Error> {
    use xlfs_host::control::{self, Request};
    let (volume, source) = (volume.clone(), source.clone());
    let handle = rt.handle().clone();
    control::ControlSocket::open(
        path,
        Arc::new(move |req| match req {
            Request::StatedumpText => {
                control::statedump("xlfs-nfsd", &volume, "", DumpFormat::Text)
            }
            Request::StatedumpJson => {
                control::statedump("xlfs-nfsd", &volume, "", DumpFormat::Json)
            }
            Request::Reload => handle.block_on(source.reload_report(&volume)),
        }),
    )
    .map_err(io_err("cannot open the control socket"))
}

async fn serve(
    cli: &Cli,
    source: &VolfileLoader,
    volume: Arc<Volume>,
    id: VolumeId,
    origin: &str,
) -> Result<(), Error> {
    // Signals first, so one arriving right after the ready line is handled.
    let mut term = signal(SignalKind::terminate()).map_err(io_err("cannot watch SIGTERM"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("cannot watch SIGINT"))?;
    let mut hup = signal(SignalKind::hangup()).map_err(io_err("cannot watch SIGHUP"))?;

    let addr = SocketAddr::new(cli.address, cli.port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(io_err(format!("cannot listen on {addr}")))?;
    let local = listener
        .local_addr()
        .map_err(io_err("cannot read the listening address"))?;
    let top = volume.graph().top().name().to_string();
    let policy = ExportPolicy {
        allow: cli.allow.clone(),
        root_squash: cli.root_squash(),
        all_squash: cli.all_squash,
    };
    let allow: Vec<String> = policy.allow.iter().map(ToString::to_string).collect();
    tracing::info!(
        volume = %top,
        volume_id = %id,
        allow = %allow.join(","),
        root_squash = policy.root_squash,
        all_squash = policy.all_squash,
        "exporting"
    );
    // A fresh write verifier per start: clients resend UNSTABLE writes not yet committed.
    let mut boot = [0u8; 8];
    boot.copy_from_slice(&Gfid::random().0[..8]);
    let nfs = Nfs::new(volume.clone(), HandleCodec::new(id), boot);
    let server = Arc::new(Server::new(
        nfs,
        Mountd::new(top.clone(), allow),
        policy,
        local.port(),
    ));
    let accept = tokio::spawn(server.clone().accept_loop(listener));

    // Reports go to stdout for whoever started us; a closed stdout must not stop the server.
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "xlfs-nfsd: serving volume {top:?} ({origin}) on {local} [pid {}]",
        std::process::id()
    );
    let _ = writeln!(
        out,
        "xlfs-nfsd: try: nfs-ls 'nfs://{}/?version=3&nfsport={p}&mountport={p}'",
        url_host(local),
        p = local.port()
    );
    let _ = std::io::stdout().flush();

    let sig = loop {
        tokio::select! {
            _ = term.recv() => break "SIGTERM",
            _ = int.recv() => break "SIGINT",
            // The volume id stays that of the first load: handles stay valid.
            _ = hup.recv() => source.reload(&volume).await,
        }
    };
    tracing::info!(signal = sig, "stopping");
    accept.abort();
    let start = Instant::now();
    while server.inflight() > 0 && start.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if server.inflight() > 0 {
        tracing::warn!(calls = server.inflight(), "calls still in flight at exit");
    }
    // Let write-behind and friends send what they hold. UNSTABLE writes that do not make it
    // are resent by clients: the next instance has another write verifier.
    xlfs_host::drain(&volume).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    if cli.dump_on_exit {
        let _ = writeln!(out, "{}", volume.graph().dump(DumpFormat::Text));
    }
    let _ = writeln!(out, "xlfs-nfsd: stopped");
    let _ = out.flush();
    Ok(())
}

/// The host part of an `nfs://` URL for `addr`.
fn url_host(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
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
        .after_help(format!(
            "{after}{}\n\nControl:\n  {CONTROL_SOCKET_ENV}  a Unix socket path: statedumps \
             (`xlfs volume statedump`) and reloads while it runs\n\nThe volfile is followed: a \
             HOST:/VOLUME server keeps a watch at the brick, a --volfile server rereads its file.",
            xlfs_core::registry::PATH_HELP
        ))
        .get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}
