//! xlfsd: the xlfs brick server. Loads a server volfile (or generates the default one for a
//! brick directory) and serves it through protocol/server until SIGINT or SIGTERM.
//!
//! ```text
//! xlfsd --brick /data/brick1 --port 24010 --volume-name vol0
//! xlfsd --volfile /etc/xlfs/brick1.vol --log-level debug
//! xlfsd --volfile brick-0.vol --client-volfile client.vol   # mountable as HOST:PORT:/<top>
//! ```

mod lock;
mod volfile;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use xlfs_core::graph::GraphError;
use xlfs_core::registry::Registry;
use xlfs_core::volfile::{OptionDecl, Pos, Volfile, VolfileError};
use xlfs_core::volume::Volume;

// Linked for their translator types (registered statically through `inventory`).
use xlfs_io_stats as _;
use xlfs_locks as _;
use xlfs_posix as _;
use xlfs_protocol as _;

/// The xlfs brick server.
#[derive(Parser, Debug, Clone)]
#[command(name = "xlfsd", version, about, after_help = xlfs_core::registry::PATH_HELP)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["volfile", "brick"])))]
struct Args {
    /// Server volfile to serve (RON). Its top (or some volume) must be a protocol/server.
    #[arg(long, value_name = "FILE", conflicts_with = "brick")]
    volfile: Option<PathBuf>,
    /// Brick directory to serve with the default stack (protocol/server, debug/io-stats,
    /// features/locks, storage/posix).
    #[arg(long, value_name = "DIR")]
    brick: Option<PathBuf>,
    /// TCP port for --brick; 0 picks a free one (printed at startup).
    #[arg(long, default_value_t = 0, requires = "brick")]
    port: u16,
    /// Address to listen on for --brick.
    #[arg(long, default_value = "127.0.0.1", requires = "brick")]
    host: String,
    /// Volume name clients give as remote-subvolume, for --brick.
    #[arg(long, default_value = "brick", requires = "brick")]
    volume_name: String,
    /// Client addresses allowed for --brick: `*`, addresses and networks, comma-separated.
    #[arg(long, default_value = "*", requires = "brick")]
    auth_allow: String,
    /// For --brick: a file whose first line is the secret clients must prove they hold
    /// (mode 0600); it never crosses the wire. Without it, TCP clients are root-squashed.
    #[arg(long, value_name = "FILE", requires = "brick")]
    secret_file: Option<PathBuf>,
    /// Refused: a secret on the command line is seen by every user (ps); use --secret-file.
    #[arg(long, value_name = "SECRET", hide = true)]
    secret: Option<String>,
    /// A client volfile to hand out to `xlfs-mount HOST[:PORT]:/NAME` and
    /// `xlfs-nfsd HOST[:PORT]:/NAME` (after the same address and secret checks as clients).
    /// Re-read at every request. `xlfs volume start` passes the volume's client volfile.
    #[arg(long, value_name = "FILE")]
    client_volfile: Option<PathBuf>,
    /// The NAME the client volfile is served under; default: its top volume's name (volgen
    /// names it after the volume).
    #[arg(long, value_name = "NAME", requires = "client_volfile")]
    client_volfile_name: Option<String>,
    /// Print the generated volfile and exit (with --brick).
    #[arg(long, requires = "brick")]
    print_volfile: bool,
    /// Print only the bound port on stdout (one line per protocol/server), for scripts.
    #[arg(long)]
    print_port: bool,
    /// Log filter: error, warn, info, debug, trace, or a tracing directive list.
    #[arg(long, default_value = "info", env = "XLFSD_LOG")]
    log_level: String,
    /// A Unix socket on which this brick answers while it runs: `xlfs volume statedump`
    /// (every translator's dump, text or JSON) and `xlfs volume set` (reread the volfile and
    /// apply it, as SIGHUP does). `xlfs volume start` sets it.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
}

#[derive(thiserror::Error, Debug)]
enum Error {
    #[error("cannot read volfile {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("brick directory {0} is not usable: {1}")]
    Brick(String, std::io::Error),
    // Boxed: both carry every name the user needs (~170 bytes).
    #[error(transparent)]
    Volfile(Box<VolfileError>),
    #[error(transparent)]
    Graph(Box<GraphError>),
    #[error("{0}: no protocol/server volume, so nothing would be served; add one on top")]
    NoServer(String),
    #[error("--client-volfile {path}: {why}")]
    ClientVolfile { path: String, why: String },
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
    /// `--secret` given, or an unusable `--secret-file`.
    #[error("{0}")]
    Secret(String),
    #[error(transparent)]
    Lock(#[from] lock::LockError),
}

impl From<VolfileError> for Error {
    fn from(e: VolfileError) -> Error {
        Error::Volfile(Box::new(e))
    }
}

impl From<GraphError> for Error {
    fn from(e: GraphError) -> Error {
        Error::Graph(Box::new(e))
    }
}

fn load(args: &Args) -> Result<(String, String), Error> {
    if let Some(path) = &args.volfile {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: origin.clone(),
            source,
        })?;
        return Ok((text, origin));
    }
    let dir = args.brick.as_deref().unwrap_or(std::path::Path::new("."));
    let dir = dir
        .canonicalize()
        .map_err(|e| Error::Brick(dir.display().to_string(), e))?;
    let dir = dir.display().to_string();
    if args.secret.is_some() {
        return Err(Error::Secret(
            "--secret is gone (a secret on the command line is visible to every user): put it \
             in a file (chmod 600) and give --secret-file FILE"
                .into(),
        ));
    }
    let secret_file = match &args.secret_file {
        Some(f) => {
            // Checked now, so a bad file stops the start with its reason; the server reads
            // it again itself (and at each reconfigure).
            xlfs_protocol::creds::read_secret_file(f)
                .map_err(|e| Error::Secret(format!("--secret-file: {e}")))?;
            let abs = std::path::absolute(f)
                .map_err(|e| Error::Secret(format!("--secret-file {}: {e}", f.display())))?;
            Some(abs.display().to_string())
        }
        None => None,
    };
    let text = volfile::generate(&volfile::BrickSpec {
        volume_name: &args.volume_name,
        directory: &dir,
        host: &args.host,
        port: args.port,
        auth_allow: &args.auth_allow,
        secret_file: secret_file.as_deref(),
    });
    Ok((text, format!("<generated for brick {dir}>")))
}

/// Serves until SIGINT or SIGTERM; SIGHUP rereads the volfile and applies it.
async fn wait_for_signal(args: &Args, volume: &Volume) -> Result<&'static str, Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(Error::Runtime)?;
    let mut int = signal(SignalKind::interrupt()).map_err(Error::Runtime)?;
    let mut hup = signal(SignalKind::hangup()).map_err(Error::Runtime)?;
    loop {
        tokio::select! {
            _ = term.recv() => return Ok("SIGTERM"),
            _ = int.recv() => return Ok("SIGINT"),
            _ = hup.recv() => {
                let _ = reload(args, volume);
            }
        }
    }
}

/// Rereads the volfile (and the client volfile it serves) and applies it: options that
/// change live in place; anything else through a new graph. Returns what happened, in one
/// line. A change that needs a new protocol/server on the same port fails here (the old
/// graph holds the port): the brick then keeps its graph and says to restart it.
fn reload(args: &Args, volume: &Volume) -> String {
    let vf = match load(args).and_then(|(text, origin)| {
        let mut vf = Volfile::parse(&text, &origin)?;
        attach_client_volfile(&mut vf, args)?;
        Ok(vf)
    }) {
        Ok(vf) => vf,
        Err(e) => {
            tracing::error!(error = %e, "reload: volfile not applied");
            return format!("error: volfile not applied: {e}\n");
        }
    };
    xlfs_host::reload_line(
        volume.reload(vf),
        ", the brick keeps its graph (a change that needs a new listener on the same port \
         takes a restart)",
    )
}

/// Makes every protocol/server of `volfile` serve the `--client-volfile` (options
/// `client-volfile`, `client-volfile-name`). Returns the name it is served under.
fn attach_client_volfile(volfile: &mut Volfile, args: &Args) -> Result<Option<String>, Error> {
    let Some(path) = &args.client_volfile else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    let bad = |why: String| Error::ClientVolfile {
        path: shown.clone(),
        why,
    };
    let abs = std::path::absolute(path).map_err(|e| bad(e.to_string()))?;
    let text = std::fs::read_to_string(&abs).map_err(|e| bad(e.to_string()))?;
    let client = Volfile::parse(&text, &shown).map_err(|e| bad(e.to_string()))?;
    let name = match &args.client_volfile_name {
        Some(n) if !n.trim().is_empty() => n.trim().to_owned(),
        Some(_) => return Err(bad("--client-volfile-name is empty".into())),
        None if client.top_name().is_empty() => {
            return Err(bad("it has no volumes; give --client-volfile-name".into()));
        }
        None => client.top_name().to_owned(),
    };
    let path = abs
        .to_str()
        .ok_or_else(|| bad("the path is not valid UTF-8".into()))?
        .to_owned();
    for v in volfile
        .volumes
        .iter_mut()
        .filter(|v| v.type_name == xlfs_protocol::server::TYPE)
    {
        for (key, value) in [("client-volfile", &path), ("client-volfile-name", &name)] {
            match v.options.iter_mut().find(|o| o.key == key) {
                Some(o) => o.value = value.clone(),
                None => v.options.push(OptionDecl {
                    key: key.into(),
                    value: value.clone(),
                    pos: Pos::default(),
                }),
            }
        }
    }
    Ok(Some(name))
}

async fn serve(args: Args) -> Result<(), Error> {
    let (text, origin) = load(&args)?;
    let mut volfile = Volfile::parse(&text, &origin)?;
    let served = attach_client_volfile(&mut volfile, &args)?;
    // Before anything touches the brick or its sockets: one xlfsd per brick directory.
    let _locks = lock::lock_bricks(&volfile)?;
    let volume = Volume::new(volfile, Arc::new(Registry::new()))?;
    // Before the listening lines: whoever reads them may ask the control socket at once.
    let volume = Arc::new(volume);
    let _control = match &args.control_socket {
        Some(path) => {
            use xlfs_host::control::{self, ControlSocket, Request};
            let (volume, args2) = (volume.clone(), args.clone());
            let sock = ControlSocket::open(
                path,
                Arc::new(move |req| match req {
                    Request::StatedumpText => {
                        control::statedump("xlfsd", &volume, "", xlator_api::DumpFormat::Text)
                    }
                    Request::StatedumpJson => {
                        control::statedump("xlfsd", &volume, "", xlator_api::DumpFormat::Json)
                    }
                    Request::Reload => reload(&args2, &volume),
                }),
            )
            .map_err(Error::Runtime)?;
            Some(sock)
        }
        None => None,
    };
    let graph = volume.graph();
    let servers: Vec<_> = graph
        .nodes()
        .filter(|(_, n)| n.info.name.as_str() == xlfs_protocol::server::TYPE)
        .map(|(name, n)| {
            (
                name.to_owned(),
                xlfs_protocol::server::listen_addr(&n.control),
            )
        })
        .collect();
    if servers.is_empty() {
        return Err(Error::NoServer(origin));
    }
    {
        let mut out = std::io::stdout().lock();
        for (name, addr) in &servers {
            let addr = addr.map(|a| a.to_string()).unwrap_or_else(|| "?".into());
            let _ = if args.print_port {
                writeln!(out, "{}", addr.rsplit(':').next().unwrap_or("?"))
            } else {
                writeln!(out, "xlfsd: {name} listening on {addr}")
            };
        }
        if let Some(v) = &served
            && !args.print_port
        {
            let _ = writeln!(out, "xlfsd: serving the client volfile of volume {v:?}");
        }
        let _ = out.flush();
    }
    let sig = wait_for_signal(&args, &volume).await?;
    tracing::info!("{sig}: shutting down");
    // Dropping the graph stops the listeners and closes every client connection (the
    // servers release the clients' fds and locks on the way out).
    drop(graph);
    drop(volume);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    Ok(())
}

fn main() -> ExitCode {
    // Before any thread starts: payload buffers then stay in the heap (see the module).
    xlfs_core::malloc::tune();
    let args = Args::parse();
    if let Err(e) = xlfs_core::logging::init(&args.log_level) {
        eprintln!("xlfsd: {e}");
        return ExitCode::from(2);
    }
    if args.print_volfile {
        match load(&args) {
            Ok((text, _)) => {
                print!("{text}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("xlfsd: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("xlfsd: {}", Error::Runtime(e));
            return ExitCode::FAILURE;
        }
    };
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    match rt.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlfsd: {e}");
            ExitCode::FAILURE
        }
    }
}
