//! Helpers: a protocol/server over an in-memory leaf and protocol/clients pointing at it,
//! all in this process over 127.0.0.1 (instances come from `xlfs_testkit::build`).
#![allow(dead_code)]

pub mod fetching;
pub mod probe;
pub mod raw;

use std::net::SocketAddr;
use std::time::Duration;

use xlator_api::{Ctx, Errno, Subvol};
use xlfs_protocol::{Client, Server};
use xlfs_testkit::build::try_build;

/// `overrides` with `root-squash off` unless they set it: these tests' clients act as root
/// over TCP without the secret, which `auto` would squash (the squash tests set it).
fn unsquashed<'a>(overrides: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut o = overrides.to_vec();
    if !o.iter().any(|(k, _)| *k == "root-squash") {
        o.push(("root-squash", "off"));
    }
    o
}

/// A protocol/server over `leaf` on 127.0.0.1 (port 0 unless given). Each gets its own
/// instance name: tests of one binary run side by side, and `listen_addr` tells servers apart
/// by name.
pub fn server(leaf: &Subvol, overrides: &[(&str, &str)]) -> (Subvol, SocketAddr) {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "server-{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let server = try_build::<Server>(&name, &unsquashed(overrides), vec![leaf.clone()])
        .expect("server init");
    let addr = xlfs_protocol::server::listen_addr(&server).expect("listen address");
    (server, addr)
}

/// A protocol/server on a port that may still be held by a server being dropped.
pub async fn server_on(leaf: &Subvol, port: u16, overrides: &[(&str, &str)]) -> Subvol {
    let port = port.to_string();
    let mut o: Vec<(&str, &str)> = vec![("listen-port", port.as_str())];
    o.extend_from_slice(&unsquashed(overrides));
    for _ in 0..100 {
        match try_build::<Server>("server", &o, vec![leaf.clone()]) {
            Ok(s) => return s,
            Err(e) if e.contains("in use") => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("port {port} stayed busy");
}

/// A protocol/client for the volume `memory` at `addr`.
pub fn client(addr: SocketAddr, overrides: &[(&str, &str)]) -> Subvol {
    let host = addr.to_string();
    let mut o: Vec<(&str, &str)> = vec![
        ("remote-host", host.as_str()),
        ("remote-subvolume", "memory"),
    ];
    o.extend_from_slice(overrides);
    try_build::<Client>("client", &o, Vec::new()).expect("client init")
}

/// Waits until `top` answers a stat of the root (the client connected).
pub async fn wait_up(top: &Subvol) {
    for _ in 0..500 {
        match top.stat(&Ctx::root(), xlator_api::Gfid::ROOT).await {
            Ok(_) => return,
            Err(Errno::ENOTCONN) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => panic!("stat of root: {e}"),
        }
    }
    panic!("client never connected: {}", top.dump().to_text(0));
}

pub fn json_field(v: &Subvol, key: &str) -> serde_json::Value {
    let dump: serde_json::Value = serde_json::from_str(&v.dump().to_json()).expect("json dump");
    dump.get(key).cloned().unwrap_or(serde_json::Value::Null)
}

/// A storage/posix brick named `brick` on a new temporary directory (kept alive by the
/// returned guard).
pub fn posix() -> (Subvol, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_str().expect("utf-8 path").to_owned();
    let leaf = try_build::<xlfs_posix::Posix>("brick", &[("directory", path.as_str())], Vec::new())
        .expect("posix init");
    (leaf, dir)
}
