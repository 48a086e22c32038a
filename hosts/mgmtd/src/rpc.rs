//! The management wire: TCP, frames of a 4-byte big-endian length and a JSON body, requests
//! and their answers in turn (the `xlfs` command sends one; peers keep a connection open for
//! the log's messages).
//!
//! Every connection starts with a mutual proof of the cluster secret, so neither side learns
//! anything from the other without it, and a peer of another version is refused before any
//! request with a message naming both versions:
//!
//! ```text
//! client -> Hello  { protocol, version, nonce_c }
//! server -> Hello  { protocol, version, nonce_s, mac_s = HMAC(secret, "s" nonce_c nonce_s) }
//!        or Refused(why)
//! client -> Proof  { mac_c = HMAC(secret, "c" nonce_c nonce_s) }
//! server -> Ready, or Refused(why)
//! client -> request; server -> answer; (more requests and answers); close
//! ```

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use ring::hmac;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::proto::{Request, Response};

/// The management protocol; a change to [`Request`], [`Response`] or the log's entries bumps it.
pub const PROTOCOL: u32 = 3;
/// This build's version, compared with every peer's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The largest frame either side accepts (a whole log, with volume descriptions).
const MAX_FRAME: usize = 32 << 20;
/// The port of `HOST` without one.
pub const DEFAULT_PORT: u16 = 24017;

#[derive(Serialize, Deserialize, Debug)]
struct ClientHello {
    protocol: u32,
    version: String,
    nonce: String,
}

#[derive(Serialize, Deserialize, Debug)]
enum ServerHello {
    Hello {
        protocol: u32,
        version: String,
        nonce: String,
        mac: String,
    },
    Refused(String),
}

#[derive(Serialize, Deserialize, Debug)]
struct Proof {
    mac: String,
}

#[derive(Serialize, Deserialize, Debug)]
enum Ready {
    Ready,
    Refused(String),
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("cannot reach the xlfs-mgmtd at {addr}: {why}")]
    Unreachable { addr: String, why: String },
    #[error("the xlfs-mgmtd at {addr} refused: {why}")]
    Refused { addr: String, why: String },
    #[error("the xlfs-mgmtd at {addr} does not prove it holds this cluster's secret")]
    WrongSecret { addr: String },
}

/// Reads one frame.
pub fn read_frame<T: DeserializeOwned>(s: &mut impl Read) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "a frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}

/// Writes one frame.
pub fn write_frame<T: Serialize>(s: &mut impl Write, v: &T) -> std::io::Result<()> {
    let body = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    s.write_all(&out)?;
    s.flush()
}

fn nonce() -> String {
    let mut b = [0u8; 16];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    hex(&b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn mac(secret: &[u8], side: &str, nc: &str, ns: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let msg = format!("xlfs-mgmt {side} {nc} {ns}");
    hex(hmac::sign(&key, msg.as_bytes()).as_ref())
}

/// Constant-time comparison of two MACs.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// `HOST` or `HOST:PORT` (IPv6 in brackets) as `host:port`.
pub fn with_port(addr: &str) -> String {
    let has_port = match addr.rsplit_once(':') {
        Some((h, p)) => p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']')),
        None => false,
    };
    if has_port {
        addr.to_owned()
    } else if addr.contains(':') && !addr.starts_with('[') {
        format!("[{addr}]:{DEFAULT_PORT}")
    } else {
        format!("{addr}:{DEFAULT_PORT}")
    }
}

/// Sends `req` to the daemon at `addr` and returns its answer; `timeout` bounds the connect
/// and each read and write.
pub fn call(
    addr: &str,
    secret: &[u8],
    req: &Request,
    timeout: Duration,
) -> Result<Response, RpcError> {
    call_as(addr, secret, req, timeout, VERSION)
}

/// [`call`], claiming `version` (tests of the version check).
pub fn call_as(
    addr: &str,
    secret: &[u8],
    req: &Request,
    timeout: Duration,
    version: &str,
) -> Result<Response, RpcError> {
    Conn::open_as(addr, secret, timeout, version)?.call(req)
}

/// An authenticated connection to a daemon, for any number of requests in turn.
pub struct Conn {
    s: TcpStream,
    addr: String,
}

impl Conn {
    /// Connects and proves the secret both ways; `timeout` bounds the connect and each read
    /// and write.
    pub fn open(addr: &str, secret: &[u8], timeout: Duration) -> Result<Conn, RpcError> {
        Conn::open_as(addr, secret, timeout, VERSION)
    }

    fn open_as(
        addr: &str,
        secret: &[u8],
        timeout: Duration,
        version: &str,
    ) -> Result<Conn, RpcError> {
        let unreachable = |why: String| RpcError::Unreachable {
            addr: addr.to_owned(),
            why,
        };
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| unreachable(e.to_string()))?
            .next()
            .ok_or_else(|| unreachable("no address".into()))?;
        let mut s =
            TcpStream::connect_timeout(&sock, timeout).map_err(|e| unreachable(e.to_string()))?;
        let io = |e: std::io::Error| unreachable(e.to_string());
        s.set_read_timeout(Some(timeout)).map_err(io)?;
        s.set_write_timeout(Some(timeout)).map_err(io)?;
        let _ = s.set_nodelay(true);
        let nc = nonce();
        write_frame(
            &mut s,
            &ClientHello {
                protocol: PROTOCOL,
                version: version.to_owned(),
                nonce: nc.clone(),
            },
        )
        .map_err(io)?;
        let ns = match read_frame::<ServerHello>(&mut s).map_err(io)? {
            ServerHello::Refused(why) => {
                return Err(RpcError::Refused {
                    addr: addr.to_owned(),
                    why,
                });
            }
            ServerHello::Hello {
                nonce, mac: theirs, ..
            } => {
                if !same(&theirs, &mac(secret, "s", &nc, &nonce)) {
                    return Err(RpcError::WrongSecret {
                        addr: addr.to_owned(),
                    });
                }
                nonce
            }
        };
        write_frame(
            &mut s,
            &Proof {
                mac: mac(secret, "c", &nc, &ns),
            },
        )
        .map_err(io)?;
        match read_frame::<Ready>(&mut s).map_err(io)? {
            Ready::Ready => {}
            Ready::Refused(why) => {
                return Err(RpcError::Refused {
                    addr: addr.to_owned(),
                    why,
                });
            }
        }
        Ok(Conn {
            s,
            addr: addr.to_owned(),
        })
    }

    /// Where it goes.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `req` and returns the answer.
    pub fn call(&mut self, req: &Request) -> Result<Response, RpcError> {
        let io = |e: std::io::Error| RpcError::Unreachable {
            addr: self.addr.clone(),
            why: e.to_string(),
        };
        write_frame(&mut self.s, req).map_err(io)?;
        read_frame::<Response>(&mut self.s).map_err(io)
    }
}

/// The server side of the handshake on an accepted connection: `Ok` once the client proved
/// the secret and runs this version. A refusal has been sent to the client when it errs.
pub fn accept(s: &mut TcpStream, secret: &[u8], timeout: Duration) -> Result<(), String> {
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    let hello: ClientHello = read_frame(s).map_err(|e| format!("no hello: {e}"))?;
    if hello.protocol != PROTOCOL || hello.version != VERSION {
        let why = format!(
            "mixed versions: this daemon runs xlfs {VERSION} (management protocol {PROTOCOL}), \
             the caller xlfs {} (protocol {}); run one version on every peer",
            hello.version, hello.protocol
        );
        let _ = write_frame(s, &ServerHello::Refused(why.clone()));
        return Err(why);
    }
    let ns = nonce();
    write_frame(
        s,
        &ServerHello::Hello {
            protocol: PROTOCOL,
            version: VERSION.to_owned(),
            nonce: ns.clone(),
            mac: mac(secret, "s", &hello.nonce, &ns),
        },
    )
    .map_err(|e| e.to_string())?;
    let proof: Proof = read_frame(s).map_err(|e| format!("no proof: {e}"))?;
    if !same(&proof.mac, &mac(secret, "c", &hello.nonce, &ns)) {
        let why = "the caller does not hold this cluster's secret".to_owned();
        let _ = write_frame(s, &Ready::Refused(why.clone()));
        return Err(why);
    }
    write_frame(s, &Ready::Ready).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers one connection with `Done` once the handshake passes; what
    /// `accept` said.
    fn serve_one(secret: &'static [u8]) -> (String, std::thread::JoinHandle<Result<(), String>>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            accept(&mut s, secret, Duration::from_secs(5))?;
            let _: Request = read_frame(&mut s).map_err(|e| e.to_string())?;
            write_frame(&mut s, &Response::Done).map_err(|e| e.to_string())
        });
        (addr, h)
    }

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_call_with_the_secret_is_answered() {
        let (addr, h) = serve_one(SECRET);
        let r = call(&addr, SECRET, &Request::Status, T).expect("call");
        assert!(matches!(r, Response::Done));
        h.join().expect("server").expect("handshake");
    }

    #[test]
    fn another_version_is_refused_naming_both() {
        let (addr, h) = serve_one(SECRET);
        match call_as(&addr, SECRET, &Request::Status, T, "0.0.1") {
            Err(RpcError::Refused { why, .. }) => {
                assert!(why.contains(VERSION) && why.contains("0.0.1"), "{why}");
            }
            other => panic!("not refused: {other:?}"),
        }
        assert!(h.join().expect("server").is_err());
    }

    #[test]
    fn another_secret_is_refused_both_ways() {
        let (addr, h) = serve_one(SECRET);
        let other = b"another secret, 32 characters at least";
        assert!(matches!(
            call(&addr, other, &Request::Status, T),
            Err(RpcError::WrongSecret { .. })
        ));
        // The server never answered a request either.
        assert!(h.join().expect("server").is_err());
    }

    #[test]
    fn addresses_get_the_default_port() {
        assert_eq!(with_port("10.0.0.1"), "10.0.0.1:24017");
        assert_eq!(with_port("10.0.0.1:7"), "10.0.0.1:7");
        assert_eq!(with_port("h1"), "h1:24017");
        assert_eq!(with_port("::1"), "[::1]:24017");
        assert_eq!(with_port("[::1]:9"), "[::1]:9");
    }
}
