//! The TCP side: accepts connections, reads RPC records, serves each call as its own task
//! (many calls of one connection run concurrently) and writes replies as they complete.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nfs3_types::rpc::{RPC_VERSION_2, accept_stat_data, auth_stat};
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};

use crate::export::ExportPolicy;
use crate::mount::{
    MOUNT_PROGRAM, MOUNT_VERSION, Mountd, NFS_PROGRAM, NFS_VERSION, PORTMAP_PROGRAM,
    PORTMAP_VERSION, portmap,
};
use crate::nfs::Nfs;
use crate::rpc::{self, Call};

/// Calls one connection may have in flight; reading pauses beyond it (gNFS's
/// `outstanding-rpc-limit` in spirit, but higher: calls here are cheap tasks).
const MAX_INFLIGHT_PER_CONNECTION: usize = 128;
/// Read buffer per connection: a few 4 KiB writes per syscall, or a good part of a large one.
const READ_BUFFER: usize = 256 << 10;

/// Everything a call needs.
pub struct Server {
    pub nfs: Nfs,
    pub mountd: Mountd,
    pub policy: ExportPolicy,
    /// The port clients reach us on (for portmap GETPORT).
    pub port: u16,
    inflight: AtomicUsize,
}

impl Server {
    pub fn new(nfs: Nfs, mountd: Mountd, policy: ExportPolicy, port: u16) -> Server {
        Server {
            nfs,
            mountd,
            policy,
            port,
            inflight: AtomicUsize::new(0),
        }
    }

    /// Calls being served right now.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Relaxed)
    }

    /// Accepts connections until the future is dropped.
    pub async fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let srv = self.clone();
                    tokio::spawn(async move { srv.connection(stream, peer).await });
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let allowed = self.policy.allows(peer.ip());
        if allowed {
            tracing::debug!(%peer, "connection");
        } else {
            tracing::warn!(%peer, "connection from a client not in the allow-list: calls refused");
        }
        let (rd, wr) = stream.into_split();
        let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(MAX_INFLIGHT_PER_CONNECTION);
        let writer = tokio::spawn(async move {
            let mut w = BufWriter::new(wr);
            while let Some(reply) = rx.recv().await {
                w.write_all(&reply).await?;
                // Gather whatever else is ready into the same flush.
                while let Ok(more) = rx.try_recv() {
                    w.write_all(&more).await?;
                }
                w.flush().await?;
            }
            w.shutdown().await
        });
        let slots = Arc::new(Semaphore::new(MAX_INFLIGHT_PER_CONNECTION));
        loop {
            let record = match rpc::read_record(&mut rd).await {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "connection closed");
                    break;
                }
            };
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            let (srv, tx) = (self.clone(), tx.clone());
            self.inflight.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let reply = srv.call(&record, peer.ip(), allowed).await;
                srv.inflight.fetch_sub(1, Ordering::Relaxed);
                if let Some(reply) = reply {
                    let _ = tx.send(reply).await;
                }
                drop(slot);
            });
        }
        drop(tx);
        match writer.await {
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "reply write failed"),
            Err(e) => tracing::warn!(%peer, error = %e, "reply writer failed"),
            Ok(Ok(())) => {}
        }
    }

    /// Serves one record; `None` when no reply is due (not an RPC call).
    async fn call(&self, record: &[u8], peer: IpAddr, allowed: bool) -> Option<Vec<u8>> {
        let Ok(call) = rpc::decode_call(record) else {
            tracing::debug!(%peer, "undecodable RPC record dropped");
            return None;
        };
        let xid = call.xid;
        if call.rpcvers != RPC_VERSION_2 {
            return Some(rpc::rpc_mismatch(xid));
        }
        let expected = match call.prog {
            NFS_PROGRAM => NFS_VERSION,
            MOUNT_PROGRAM => MOUNT_VERSION,
            PORTMAP_PROGRAM => PORTMAP_VERSION,
            _ => return Some(rpc::accept_error(xid, accept_stat_data::PROG_UNAVAIL)),
        };
        if call.vers != expected {
            return Some(rpc::prog_mismatch(xid, expected));
        }
        if call.prog == PORTMAP_PROGRAM {
            return Some(portmap(&call, record, self.port));
        }
        // NULL procedures answer whatever the credential, as pings.
        if call.proc != 0 && call.bad_auth {
            return Some(rpc::auth_error(xid, auth_stat::AUTH_TOOWEAK));
        }
        let cx = self.policy.ctx(call.auth.as_ref(), u64::from(xid));
        Some(match call.prog {
            MOUNT_PROGRAM => {
                let peer = peer.to_string();
                self.mountd
                    .dispatch(&self.nfs, &call, record, &cx, &peer, allowed)
                    .await
            }
            _ => {
                if !allowed && call.proc != 0 {
                    return Some(rpc::auth_error(xid, auth_stat::AUTH_TOOWEAK));
                }
                self.nfs_call(&call, record, &cx).await
            }
        })
    }

    async fn nfs_call(&self, call: &Call, record: &[u8], cx: &xlator_api::Ctx) -> Vec<u8> {
        tracing::trace!(xid = call.xid, proc = call.proc, uid = cx.uid(), "nfs call");
        self.nfs.dispatch(call, record, cx).await
    }
}
