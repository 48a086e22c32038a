//! Client volfiles served outside a brick: xlfs-mgmtd answers `xlfs-mount HOST:/VOLUME` for
//! every volume of its cluster on one well-known port ([`crate::fetch::VOLFILE_PORT`]), so a
//! client needs no brick's port, and any peer can hand out any volume.
//!
//! A connection here is what a brick's port sees from [`crate::fetch`]: one volfile request
//! or watch, answered and closed. The checks are a brick's, per volume: the address
//! allow-list first (a refused address learns nothing else), then protocol version and fop
//! table, then the volume's secret (challenge-response, [`crate::creds`]). A watch is held
//! until the volume's volfile differs from the client's, as a brick holds it. TLS is not
//! spoken here: a volume whose clients use TLS is fetched from a brick's port.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::conn::{Challenged, challenge, refuse};
use super::{AllowList, same_release};
use crate::fetch::volfile_version;
use crate::wire::{
    self, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, MAGIC, ServerMsg, VOLFILE_MAX_FRAME,
    VolfileReply, VolfileRequest,
};

/// What a lookup finds for a volume name.
pub struct Served {
    /// The client volfile (RON text).
    pub text: String,
    /// The volume's secret, which the client must prove it holds; `None`: no secret.
    pub secret: Option<String>,
    /// The volume's address allow-list; `None`: every address.
    pub allow: Option<AllowList>,
}

/// Finds a volume by name: what to serve, or why not (told to the client).
pub type Lookup = dyn Fn(&str) -> Result<Served, String> + Send + Sync;

/// This server, in refusal messages.
const WHAT: &str = "volfile server";

/// How long a connection may take to send its request, answer the challenge, or read the
/// answer.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// The longest a watch is held before it is answered with the same text.
const WATCH_HOLD_MAX: Duration = Duration::from_secs(60);
/// How often a held watch looks the volume up again.
const WATCH_POLL: Duration = Duration::from_millis(200);

/// Accepts connections on `listener` and answers each on its own task; returns only when
/// accepting fails for good.
pub async fn serve(listener: TcpListener, lookup: Arc<Lookup>) {
    loop {
        match listener.accept().await {
            Ok((sock, peer)) => {
                let lookup = lookup.clone();
                tokio::spawn(async move {
                    let _ = sock.set_nodelay(true);
                    connection(wire::Stream::Tcp(sock), peer, &*lookup).await;
                });
            }
            Err(e) => {
                // Out of descriptors and the like: the listener itself is fine.
                tracing::warn!("volfile server: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One request or watch, answered (or refused) and closed.
async fn connection(sock: wire::Stream, peer: SocketAddr, lookup: &Lookup) {
    let (r, mut w) = match sock.into_split() {
        Ok(halves) => halves,
        Err(e) => return tracing::debug!("volfile server: {peer}: {e}"),
    };
    let mut reader = FrameReader::new(r, HANDSHAKE_MAX_FRAME);
    let Ok(Ok(Some(body))) = tokio::time::timeout(HANDSHAKE, reader.next(HANDSHAKE)).await else {
        return;
    };
    if let Some(v) = wire::claimed_version(&body)
        && let Err(reason) = same_release(v, wire::SCHEMA, WHAT)
    {
        return refuse(&mut w, reason).await;
    }
    let (req, watch) = match wire::decode::<ClientMsg>(body).map(|m| m.0) {
        Ok(ClientMsg::GetVolfile(r)) => (r, None),
        Ok(ClientMsg::WatchVolfile(w)) => {
            let hold = Duration::from_millis(u64::from(w.hold_ms)).min(WATCH_HOLD_MAX);
            (w.request, Some((w.known, hold)))
        }
        _ => {
            let reason = "this port only serves client volfiles (xlfs-mgmtd); a client's I/O \
                          goes to the bricks' ports"
                .to_owned();
            return refuse(&mut w, reason).await;
        }
    };
    let mut served = match check(&req, peer, lookup) {
        Ok(s) => s,
        Err(reason) => {
            tracing::info!(
                "refused the volfile of {:?} to {peer}: {reason}",
                req.volume
            );
            return refuse(&mut w, reason).await;
        }
    };
    if let Some(secret) = served.secret.clone() {
        let exchange = challenge(
            &mut reader,
            &mut w,
            &secret,
            &req.volume,
            &req.nonce,
            super::FETCH_SECRET,
        );
        match tokio::time::timeout(HANDSHAKE, exchange).await {
            Ok(Ok(())) => {}
            Ok(Err(Challenged::Refuse(reason))) => {
                tracing::info!(
                    "refused the volfile of {:?} to {peer}: {reason}",
                    req.volume
                );
                return refuse(&mut w, reason).await;
            }
            Ok(Err(Challenged::Gone(_))) | Err(_) => return,
        }
    }
    if let Some((known, hold)) = watch {
        let deadline = tokio::time::Instant::now() + hold;
        while volfile_version(&served.text) == known && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(WATCH_POLL).await;
            served = match check(&req, peer, lookup) {
                Ok(s) => s,
                Err(reason) => return refuse(&mut w, reason).await,
            };
        }
    }
    let reply = ServerMsg::Volfile(VolfileReply {
        volume: req.volume.clone(),
        text: served.text,
    });
    if let Ok(f) = wire::encode(&reply, Vec::new(), VOLFILE_MAX_FRAME) {
        let write = wire::write_frames(&mut w, std::slice::from_ref(&f));
        if tokio::time::timeout(HANDSHAKE, write).await.is_err() {
            return;
        }
    }
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
}

/// A brick's checks of a volfile request, for the volume `lookup` finds.
fn check(req: &VolfileRequest, peer: SocketAddr, lookup: &Lookup) -> Result<Served, String> {
    if req.magic != MAGIC {
        return Err("not an xlfs client (bad magic)".into());
    }
    let served = lookup(&req.volume)?;
    if let Some(allow) = &served.allow
        && !allow.allows(peer.ip())
    {
        return Err(format!(
            "address {} is not allowed by volume {:?}'s auth.allow",
            peer.ip(),
            req.volume
        ));
    }
    same_release(req.version, req.schema, WHAT)?;
    if served.text.len() > VOLFILE_MAX_FRAME - 1024 {
        return Err(format!(
            "the client volfile of {:?} is {} bytes, more than the {} a volfile answer carries",
            req.volume,
            served.text.len(),
            VOLFILE_MAX_FRAME - 1024
        ));
    }
    Ok(served)
}
