//! Asking for a volfile (`xlfs-mount HOST:/VOLUME`) in the volfile tests.

use std::time::Duration;

use xlfs_protocol::Credentials;
use xlfs_protocol::fetch::{FetchError, VolfileServer, fetch_volfile};

const T: Duration = Duration::from_secs(5);

/// The volfile server of `volume` at `addr`.
pub fn at(addr: std::net::SocketAddr, volume: &str) -> VolfileServer {
    VolfileServer {
        host: addr.ip().to_string(),
        port: addr.port(),
        volume: volume.into(),
    }
}

pub async fn refusal(s: &VolfileServer, secret: Option<&str>) -> String {
    match fetch_volfile(s, &Credentials::secret(secret), T).await {
        Err(FetchError::Refused { reason, .. }) => reason,
        // Refused by the fetching side: the secret's challenge failed.
        Err(FetchError::Protocol { what, .. }) if what.contains("secret") => what,
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(t) => panic!("expected a refusal, got a volfile: {t}"),
    }
}
