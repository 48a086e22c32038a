//! What the xlfs hosts share: where their graph comes from, how it follows changes of its
//! volfile ([`VolfileLoader::follow`]), and the control socket ([`control`]).
//!
//! `xlfs-mount` and `xlfs-nfsd` take the same sources: a volfile (`--volfile`), a local brick
//! directory (`--local`, core's embedded default graph) or a running brick
//! (`HOST[:PORT]:/VOLUME`, the client volfile fetched with protocol's [`fetch_volfile`]).

pub mod control;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use xlfs_core::source::{Source, SourceError};
use xlfs_core::volfile::{OptionDecl, Volfile, VolfileError};
use xlfs_core::volume::{Reload, Volume};
use xlfs_protocol::Credentials;
use xlfs_protocol::fetch::{
    FetchError, VOLFILE_PORT, VolfileServer, fetch_volfile, volfile_version, watch_volfile,
};

/// How long one volfile watch waits at the brick before it is renewed.
const WATCH_HOLD: Duration = Duration::from_secs(30);
/// How often a volfile on disk is checked for changes.
const FILE_POLL: Duration = Duration::from_secs(1);

/// Where a host's graph comes from: a volfile source of the core (a file, a local brick), or a
/// running brick (`HOST:/VOLUME`). Hosts load it at start and again on SIGHUP.
#[allow(clippy::large_enum_variant)] // one per host process
pub enum VolfileLoader {
    Core(Source),
    Fetch {
        server: VolfileServer,
        /// Asked in turn when `server` does not answer (`h1,h2:/VOL`,
        /// `backup-volfile-servers`): the first that answers gives the volfile.
        backups: Vec<VolfileServer>,
        creds: Credentials,
        timeout: Duration,
        /// The file `creds.secret` was read from: the fetched volfile's protocol/clients are
        /// given it (`secret-file`, `secret` dropped), as the file the volfile names is one on
        /// the brick's machine.
        secret_file: Option<PathBuf>,
    },
}

/// Why [`VolfileLoader::load`] failed.
#[derive(thiserror::Error, Debug)]
pub enum LoadError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("volfile fetched from {server}: {source}")]
    Fetched {
        server: String,
        source: Box<VolfileError>,
    },
}

impl VolfileLoader {
    /// Reads (or fetches) and parses the volfile.
    pub async fn load(&self) -> Result<Volfile, LoadError> {
        match self {
            VolfileLoader::Core(s) => Ok(s.load()?),
            VolfileLoader::Fetch {
                server,
                backups,
                creds,
                timeout,
                ..
            } => {
                let (mut first_err, mut no_daemon) = (None, None);
                let all: Vec<&VolfileServer> = std::iter::once(server).chain(backups).collect();
                for (k, s) in all.iter().enumerate() {
                    match fetch_volfile(s, creds, *timeout).await {
                        Ok(text) => return self.parse(&text),
                        Err(e) if all.len() > 1 => {
                            let next = if k + 1 < all.len() {
                                "; asking the next"
                            } else {
                                ""
                            };
                            // A host without a management daemon (one brick, no cluster)
                            // refuses its daemon's port at once: not worth a warning.
                            // Its refusal is not what the user needs to read either.
                            if s.port == VOLFILE_PORT && matches!(e, FetchError::Connect { .. }) {
                                tracing::debug!(error = %e, "no xlfs-mgmtd at {s}{next}");
                                no_daemon.get_or_insert(e);
                            } else {
                                tracing::warn!(error = %e, "volfile server {s} did not answer{next}");
                                first_err.get_or_insert(e);
                            }
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(first_err.or(no_daemon).map_or_else(
                    || unreachable!("at least one server was asked"),
                    LoadError::from,
                ))
            }
        }
    }
}

impl VolfileLoader {
    /// Parses volfile text this loader got (origin: the file or the server).
    fn parse(&self, text: &str) -> Result<Volfile, LoadError> {
        let origin = match self {
            VolfileLoader::Core(Source::File(path)) => path.display().to_string(),
            VolfileLoader::Core(Source::Local(dir)) => format!("<generated for {}>", dir.display()),
            VolfileLoader::Fetch { server, .. } => server.to_string(),
        };
        let mut vf = Volfile::parse(text, &origin).map_err(|e| LoadError::Fetched {
            server: origin.clone(),
            source: Box::new(e),
        })?;
        if let VolfileLoader::Fetch {
            secret_file: Some(file),
            ..
        } = self
        {
            use_secret_file(&mut vf, file);
        }
        Ok(vf)
    }

    /// SIGHUP: reads (or fetches) the volfile again and applies it to `volume`, logging the
    /// outcome (unchanged, reconfigured in place, switched to a new graph, or not applied).
    pub async fn reload(&self, volume: &Volume) {
        let _ = self.reload_report(volume).await;
    }

    /// [`VolfileLoader::reload`], returning the outcome as one line (for the control socket).
    pub async fn reload_report(&self, volume: &Volume) -> String {
        let vf = match self.load().await {
            Ok(vf) => vf,
            Err(e) => {
                tracing::error!(error = %e, "reload: volfile not applied");
                return format!("error: volfile not applied: {e}\n");
            }
        };
        reload_line(reload_when_ready(volume, vf), "")
    }
}

/// [`Volume::reload`], switching to a new graph only once it is ready (at most
/// [`WAIT_UP`]): before, a mount switched at once and fops in the first milliseconds met the
/// new graph's bricks still connecting (ENOTCONN on a create right after an add-brick). On
/// a current-thread runtime, where the wait would block the connections it waits for, it
/// switches at once as before.
pub fn reload_when_ready(
    volume: &Volume,
    vf: Volfile,
) -> Result<Reload, xlfs_core::graph::GraphError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| volume.reload_when_ready(vf, Some(WAIT_UP)))
        }
        Ok(_) => volume.reload(vf),
        Err(_) => volume.reload_when_ready(vf, Some(WAIT_UP)),
    }
}

/// The credentials of a host's `--secret-file` (read and its mode checked now; none without).
pub fn credentials(secret_file: Option<&Path>) -> Result<Credentials, String> {
    let secret = secret_file
        .map(xlfs_protocol::creds::read_secret_file)
        .transpose()?;
    Ok(Credentials::secret(secret.as_deref()))
}

/// Gives every protocol/client of `vf` the secret file `file` (its `secret-file`, replacing a
/// `secret` or another `secret-file`): a fetched volfile names the file on the brick's machine,
/// which this one may not have.
pub fn use_secret_file(vf: &mut Volfile, file: &Path) {
    for v in vf
        .volumes
        .iter_mut()
        .filter(|v| v.type_name == "protocol/client")
    {
        let pos = v
            .options
            .iter()
            .find(|o| o.key == "secret" || o.key == "secret-file")
            .map_or(v.pos, |o| o.pos);
        v.options
            .retain(|o| o.key != "secret" && o.key != "secret-file");
        v.options.push(OptionDecl {
            key: "secret-file".into(),
            value: file.to_string_lossy().into_owned(),
            pos,
        });
    }
}

/// The outcome of a [`Volume::reload`] as one line (for the control socket), logged too;
/// `hint` is added to a refusal (what the host does about it).
pub fn reload_line(r: Result<Reload, xlfs_core::graph::GraphError>, hint: &str) -> String {
    match r {
        Ok(Reload::Unchanged) => {
            tracing::info!("reload: volfile unchanged");
            "unchanged\n".into()
        }
        Ok(Reload::Reconfigured(v)) => {
            tracing::info!(volumes = ?v, "reload: options changed in place");
            format!("reconfigured in place: {}\n", v.join(", "))
        }
        Ok(Reload::Switched {
            old_graph,
            new_graph,
        }) => {
            tracing::info!(old_graph, new_graph, "reload: switched to a new graph");
            format!("switched from graph {old_graph} to graph {new_graph}\n")
        }
        Err(e) => {
            tracing::error!(error = %e, "reload: volfile not applied{hint}");
            format!("error: volfile not applied{hint}: {e}\n")
        }
    }
}

impl VolfileLoader {
    /// Keeps `volume` on the current volfile, forever (spawn it): for `HOST:/VOLUME`, a watch
    /// held at the brick that answers as soon as the volume's client volfile changes (`xlfs
    /// volume set` rewrites it); for a volfile on disk, a check of its text every second.
    /// Each change is applied like a SIGHUP: in place when only live options changed, else
    /// by a graph switch, no remount. An unreachable brick is retried with backoff.
    pub async fn follow(self: Arc<Self>, volume: Arc<Volume>) {
        // 0: the first answer comes at once and is applied (normally unchanged: a change made
        // between the start and this first watch is not lost).
        let mut known = 0;
        let mut backoff = Duration::from_secs(1);
        // Which volfile server is watched: the next one after a failure.
        let mut at = 0usize;
        loop {
            let text = match &*self {
                VolfileLoader::Fetch {
                    server,
                    backups,
                    creds,
                    timeout,
                    ..
                } => {
                    let s = if at == 0 { server } else { &backups[at - 1] };
                    let r = watch_volfile(s, creds, known, WATCH_HOLD, *timeout)
                        .await
                        .map_err(|e| e.to_string());
                    if r.is_err() && !backups.is_empty() {
                        at = (at + 1) % (backups.len() + 1);
                        if at != 0 {
                            // Another server at once; the backoff after a whole round.
                            if let Err(e) = &r {
                                tracing::warn!(error = %e, "volfile watch failed; asking the next server");
                            }
                            continue;
                        }
                    }
                    r
                }
                VolfileLoader::Core(Source::File(path)) => {
                    tokio::time::sleep(FILE_POLL).await;
                    tokio::fs::read_to_string(path)
                        .await
                        .map_err(|e| format!("{}: {e}", path.display()))
                }
                // A generated graph never changes.
                VolfileLoader::Core(_) => return,
            };
            let text = match text {
                Ok(t) => {
                    backoff = Duration::from_secs(1);
                    t
                }
                Err(e) => {
                    tracing::warn!(error = %e, "volfile watch failed; retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            };
            let version = volfile_version(&text);
            if version == known {
                continue;
            }
            known = version;
            match self.parse(&text).map(|vf| reload_when_ready(&volume, vf)) {
                Ok(Ok(Reload::Unchanged)) => tracing::debug!("volfile watch: unchanged"),
                Ok(Ok(Reload::Reconfigured(v))) => {
                    tracing::info!(volumes = ?v, "the volfile changed: options changed in place")
                }
                Ok(Ok(Reload::Switched {
                    old_graph,
                    new_graph,
                })) => tracing::info!(
                    old_graph,
                    new_graph,
                    "the volfile changed: switched to a new graph"
                ),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "the volfile changed but was not applied")
                }
                Err(e) => tracing::error!(error = %e, "the volfile changed but was not applied"),
            }
        }
    }
}

/// How long a host waits, before serving, for its graph to say whether it is up.
pub const WAIT_UP: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a host that exits waits for what its translators still owe the bricks.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Before a host exits: what the translators keep for later (write-behind's data,
/// replicate's eager holds with their post-ops and unlocks) is sent now, waiting up to
/// [`DRAIN`] (see `Graph::drain`). What is still owed then is logged: the bricks give the
/// locks back when the connection goes, and the self-heal daemon finds the pre-ops left.
pub async fn drain(volume: &Volume) {
    let owed = volume.graph().drain(DRAIN).await;
    if owed > 0 {
        tracing::warn!(
            owed,
            "eager holds still open after {DRAIN:?} at exit: their changelogs stay marked \
             until the self-heal daemon visits them"
        );
    }
}

/// Waits (at most [`WAIT_UP`]; blocks the thread) until every network client and cluster
/// translator of the graph has said whether it is up, so the first requests do not meet
/// bricks that are still connecting (a replica set that has heard from one brick only, a
/// stripe missing a child): they would fail with EROFS or ENOTCONN, or go to fewer copies
/// than there are. Logs what it found; serves in every case.
pub fn wait_until_up(volume: &Volume) {
    let start = std::time::Instant::now();
    let silent = volume.graph().wait_ready(WAIT_UP);
    if silent.is_empty() {
        tracing::debug!(waited = ?start.elapsed(), "graph ready");
    } else {
        tracing::warn!(
            "{} not heard from after {WAIT_UP:?} (bricks unreachable?); serving anyway: \
             requests that need them fail with ENOTCONN until they connect",
            silent.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetched_clients_get_the_mounts_secret_file() {
        let text = r#"(
            volumes: [
                (name: "c0", type: "protocol/client",
                 options: {"remote-host": "h", "secret-file": "/brick/side/secret"}),
                (name: "c1", type: "protocol/client", options: {"secret": "inline"}),
                (name: "c2", type: "protocol/client", options: {"remote-host": "h"}),
                (name: "d", type: "cluster/distribute", subvolumes: ["c0", "c1", "c2"],
                 options: {"secret-file": "not a client's"}),
            ],
        )"#;
        let mut vf = Volfile::parse(text, "t").expect("parses");
        use_secret_file(&mut vf, Path::new("/mine/secret"));
        for name in ["c0", "c1", "c2"] {
            let v = vf.get(name).expect("volume");
            assert_eq!(v.option("secret-file"), Some("/mine/secret"), "{name}");
            assert_eq!(v.option("secret"), None, "{name}");
            assert_eq!(
                v.options.iter().filter(|o| o.key == "secret-file").count(),
                1,
                "{name}"
            );
        }
        assert_eq!(vf.get("c0").expect("c0").option("remote-host"), Some("h"));
        assert_eq!(
            vf.get("d").expect("d").option("secret-file"),
            Some("not a client's")
        );
    }
}
