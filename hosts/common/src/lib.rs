//! What the xlfs hosts share: where their graph comes from.
//!
//! `xlfs-mount` and `xlfs-nfsd` take the same sources: a volfile (`--volfile`), a local brick
//! directory (`--local`, core's embedded default graph) or a running brick
//! (`HOST[:PORT]:/VOLUME`, the client volfile fetched with protocol's [`fetch_volfile`]).

use std::time::Duration;

use xlfs_core::source::{Source, SourceError};
use xlfs_core::volfile::{Volfile, VolfileError};
use xlfs_core::volume::{Reload, Volume};
use xlfs_protocol::fetch::{FetchError, VolfileServer, fetch_volfile};

/// Where a host's graph comes from: a volfile source of the core (a file, a local brick), or a
/// running brick (`HOST:/VOLUME`). Hosts load it at start and again on SIGHUP.
pub enum VolfileLoader {
    Core(Source),
    Fetch {
        server: VolfileServer,
        secret: Option<String>,
        timeout: Duration,
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
                secret,
                timeout,
            } => {
                let text = fetch_volfile(server, secret.as_deref(), *timeout).await?;
                let origin = server.to_string();
                Volfile::parse(&text, &origin).map_err(|e| LoadError::Fetched {
                    server: origin,
                    source: Box::new(e),
                })
            }
        }
    }
}

impl VolfileLoader {
    /// SIGHUP: reads (or fetches) the volfile again and applies it to `volume`, logging the
    /// outcome (unchanged, reconfigured in place, switched to a new graph, or not applied).
    pub async fn reload(&self, volume: &Volume) {
        let vf = match self.load().await {
            Ok(vf) => vf,
            Err(e) => return tracing::error!(error = %e, "reload: volfile not applied"),
        };
        match volume.reload(vf) {
            Ok(Reload::Unchanged) => tracing::info!("reload: volfile unchanged"),
            Ok(Reload::Reconfigured(v)) => {
                tracing::info!(volumes = ?v, "reload: options changed in place")
            }
            Ok(Reload::Switched {
                old_graph,
                new_graph,
            }) => tracing::info!(old_graph, new_graph, "reload: switched to a new graph"),
            Err(e) => tracing::error!(error = %e, "reload: volfile not applied"),
        }
    }
}
