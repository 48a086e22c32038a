//! Fetching a client volfile from a running brick, the way GlusterFS clients mount
//! `server:/volume`: `xlfs-mount HOST:/VOLUME MOUNTPOINT` and `xlfs-nfsd HOST:/VOLUME` both use
//! [`fetch_volfile`].
//!
//! The request is a connection that starts with [`ClientMsg::GetVolfile`] instead of a hello.
//! The brick checks it like a client connection (address allow-list, protocol version, fop
//! table, shared secret), answers with the client volfile it serves under that name
//! (`protocol/server` `client-volfile` / `client-volfile-name`, set by
//! `xlfsd --client-volfile`) or with a refusal for the user, and closes the connection.
//!
//! ```
//! use xlfs_protocol::fetch::{DEFAULT_PORT, VolfileServer};
//!
//! let s: VolfileServer = "server1:/gv0".parse()?;
//! assert_eq!((s.host.as_str(), s.port, s.volume.as_str()), ("server1", DEFAULT_PORT, "gv0"));
//! let s: VolfileServer = "[::1]:24010:/gv0".parse()?;
//! assert_eq!((s.host.as_str(), s.port), ("::1", 24010));
//! assert_eq!(s.to_string(), "[::1]:24010:/gv0");
//! # Ok::<(), String>(())
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::creds::Credentials;
use tokio::net::TcpStream;

use crate::wire::{
    self, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, MAGIC, PROTOCOL_VERSION, SCHEMA, ServerMsg,
    VOLFILE_MAX_FRAME, VolfileRequest, VolfileWatch, WireError,
};

/// The version of a volfile's text that [`watch_volfile`] compares (FNV-1a 64 of the bytes):
/// the same text, the same version, on every host.
pub fn volfile_version(text: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
    h
}

/// The port of `HOST:/VOLUME` without one: brick 0 of a volume created with the default
/// `--port` (volgen's `DEFAULT_BASE_PORT`).
pub const DEFAULT_PORT: u16 = 49152;

/// Where xlfs-mgmtd serves the client volfile of every volume of its cluster
/// ([`crate::server::volfiles`]). A server list without ports ([`parse_servers`]) asks it
/// first on each host, then brick 0's [`DEFAULT_PORT`].
pub const VOLFILE_PORT: u16 = 24018;

/// How long a fetch may take by default (connect, request, answer).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where to fetch a client volfile: `HOST:/VOLUME` or `HOST:PORT:/VOLUME` (IPv6 addresses in
/// brackets: `[::1]:/gv0`, `[::1]:49152:/gv0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolfileServer {
    pub host: String,
    pub port: u16,
    pub volume: String,
}

const FORMS: &str = "HOST:/VOLUME or HOST:PORT:/VOLUME (e.g. server1:/gv0, 127.0.0.1:49152:/gv0, \
                     [::1]:/gv0)";

impl VolfileServer {
    /// Parses `HOST:/VOLUME` or `HOST:PORT:/VOLUME`.
    pub fn parse(text: &str) -> Result<VolfileServer, String> {
        VolfileServer::parse_port(text).map(|(s, _)| s)
    }

    /// [`VolfileServer::parse`], and whether the text gave the port.
    fn parse_port(text: &str) -> Result<(VolfileServer, bool), String> {
        let bad = |why: &str| format!("{text:?} is not {FORMS}: {why}");
        let Some((server, volume)) = text.rsplit_once(":/") else {
            return Err(bad("no \":/\" before the volume name"));
        };
        let volume = volume.trim_end_matches('/');
        if volume.is_empty() {
            return Err(bad("the volume name is empty"));
        }
        if volume.contains('/') {
            return Err(bad("a volume name has no '/'"));
        }
        let (host, port) = if let Some(rest) = server.strip_prefix('[') {
            let Some((host, after)) = rest.split_once(']') else {
                return Err(bad("no ']' after the IPv6 address"));
            };
            match after {
                "" => (host, None),
                p => match p.strip_prefix(':') {
                    Some(p) => (host, Some(p)),
                    None => return Err(bad("expected ':' after ']'")),
                },
            }
        } else {
            match server.split_once(':') {
                None => (server, None),
                Some((_, p)) if p.contains(':') => {
                    return Err(bad("write an IPv6 address in brackets, e.g. [::1]:/gv0"));
                }
                Some((h, p)) => (h, Some(p)),
            }
        };
        if host.is_empty() {
            return Err(bad("the host is empty"));
        }
        let given = port.is_some();
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(bad(&format!("{p:?} is not a port number"))),
            },
        };
        let server = VolfileServer {
            host: host.to_owned(),
            port,
            volume: volume.to_owned(),
        };
        Ok((server, given))
    }

    /// `host:port` (brackets around IPv6 addresses), for messages.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Parses a list of volfile servers: `H1[:P1],H2[:P2],...:/VOLUME` (each written as
/// [`VolfileServer::parse`] takes it, one volume for all), and GlusterFS's
/// `backup-volfile-servers` value: `H2:H3:...`, hosts only, each with the port of the first
/// (IPv6 addresses in brackets). The first server, then the others in order. A host written
/// without a port stands for two servers: its xlfs-mgmtd ([`VOLFILE_PORT`]), then its brick
/// 0 ([`DEFAULT_PORT`]); backups then take no port either.
pub fn parse_servers(text: &str, backups: Option<&str>) -> Result<Vec<VolfileServer>, String> {
    let (list, volume) = text
        .rsplit_once(":/")
        .ok_or_else(|| format!("{text:?} is not {FORMS}: no \":/\" before the volume name"))?;
    let mut out = Vec::new();
    // A host without a port: its xlfs-mgmtd first, then its brick 0's default port.
    let mut push = |(s, given): (VolfileServer, bool)| {
        if !given {
            out.push(VolfileServer {
                port: VOLFILE_PORT,
                ..s.clone()
            });
        }
        out.push(s);
    };
    let mut first_given = None;
    for one in list.split(',') {
        let parsed = VolfileServer::parse_port(&format!("{one}:/{volume}"))?;
        first_given.get_or_insert((parsed.0.port, parsed.1));
        push(parsed);
    }
    let (port, given) = first_given.unwrap_or((DEFAULT_PORT, false));
    for host in backups.into_iter().flat_map(split_hosts) {
        let text = if given {
            format!("{host}:{port}:/{volume}")
        } else {
            format!("{host}:/{volume}")
        };
        let parsed = VolfileServer::parse_port(&text)
            .map_err(|e| format!("backup-volfile-servers {host:?}: {e}"))?;
        push(parsed);
    }
    Ok(out)
}

/// `h2:h3:[::1]`: the hosts of a `backup-volfile-servers` value.
fn split_hosts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_brackets = false;
    for c in text.chars() {
        match c {
            '[' => in_brackets = true,
            ']' => in_brackets = false,
            ':' if !in_brackets => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl FromStr for VolfileServer {
    type Err = String;
    fn from_str(s: &str) -> Result<VolfileServer, String> {
        VolfileServer::parse(s)
    }
}

impl fmt::Display for VolfileServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:/{}", self.addr(), self.volume)
    }
}

/// Why a volfile could not be fetched. The messages are meant for the user of the mount.
#[derive(thiserror::Error, Debug)]
pub enum FetchError {
    #[error("cannot reach {addr} to fetch the volfile of volume {volume:?}: {source}")]
    Connect {
        addr: String,
        volume: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr} refused to give the volfile of volume {volume:?}: {reason}")]
    Refused {
        addr: String,
        volume: String,
        reason: String,
    },
    #[error("refused the volfile of volume {volume:?} that {addr} sent: {reason}")]
    Forbidden {
        addr: String,
        volume: String,
        reason: String,
    },
    #[error("fetching the volfile of volume {volume:?} from {addr} failed: {what}")]
    Protocol {
        addr: String,
        volume: String,
        what: String,
    },
    #[error("{addr} did not answer the volfile request for volume {volume:?} within {timeout:?}")]
    Timeout {
        addr: String,
        volume: String,
        timeout: Duration,
    },
}

/// Fetches the client volfile (RON text) of `server.volume` from the brick at
/// `server.host:server.port`, presenting `creds`, all within `timeout`.
pub async fn fetch_volfile(
    server: &VolfileServer,
    creds: &Credentials,
    timeout: Duration,
) -> Result<String, FetchError> {
    match tokio::time::timeout(timeout, fetch_inner(server, creds, timeout, None)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout {
            addr: server.addr(),
            volume: server.volume.clone(),
            timeout,
        }),
    }
}

/// Waits until the client volfile of `server.volume` differs from the text whose
/// [`volfile_version`] is `known`, and returns the new text; after `hold` (the brick caps it
/// at a minute) returns the same text. `timeout` bounds connecting and the answer beyond the
/// hold. The brick rereads its volfile while it holds the watch, so a change made there
/// (`xlfs volume set`) reaches the watcher within a fraction of a second.
pub async fn watch_volfile(
    server: &VolfileServer,
    creds: &Credentials,
    known: u64,
    hold: Duration,
    timeout: Duration,
) -> Result<String, FetchError> {
    let total = hold + timeout;
    let watch = Some((known, hold));
    match tokio::time::timeout(total, fetch_inner(server, creds, total, watch)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout {
            addr: server.addr(),
            volume: server.volume.clone(),
            timeout: total,
        }),
    }
}

/// Translator types a fetched volfile may contain: what runs on a client. A brick (or whoever
/// answers on its port) hands its volfile to `xlfs-mount` and `xlfs-nfsd`, which run as
/// root: a graph with storage/posix on `/` under a protocol/server listening on 0.0.0.0 would
/// export the client's whole disk, so anything that serves, or touches local files, is
/// refused. A graph you trust with those runs from a local file (`--volfile FILE`).
/// `user/*` is the category of translators made with `xlfs translator new` and placed with
/// `xlfs volume set VOL user.NAME`: they load from this machine's own plugin path.
pub const REMOTE_TYPES: &[&str] = &[
    "protocol/client",
    "cluster/*",
    "performance/*",
    "features/*",
    "debug/*",
    "user/*",
];

/// `features/*` types that are refused all the same: they need a local directory (none of
/// this build's do; the list is where a future one goes).
const LOCAL_FEATURES: &[&str] = &[];

/// Where a fetched volfile's debug/io-stats may write its dumps (`dump-path`): the mount
/// writes `<path>.tmp` as root and renames it over `<path>`, so a path the sender chose
/// freely would replace any file of this machine.
pub const REMOTE_DUMP_DIR: &str = "/var/log/xlfs/";

/// Checks a fetched volfile: every volume's type must match [`REMOTE_TYPES`], and a
/// debug/io-stats `dump-path` must be under [`REMOTE_DUMP_DIR`]. The error is one line naming
/// the volume and its type. Text that is not a volfile passes: the caller's parse refuses it
/// with its own message.
pub fn check_remote_volfile(text: &str) -> Result<(), String> {
    let Ok(vf) = xlfs_core::volfile::Volfile::parse(text, "<fetched>") else {
        return Ok(());
    };
    for v in &vf.volumes {
        let t = v.type_name.as_str();
        let allowed = REMOTE_TYPES.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => t.starts_with(prefix) && t.len() > prefix.len(),
            None => t == *p,
        }) && !LOCAL_FEATURES.contains(&t);
        if !allowed {
            return Err(format!(
                "volume {:?} has type {t}, which a fetched volfile may not contain (only {}); \
                 to run such a graph, mount a volfile you trust with --volfile FILE",
                v.name,
                REMOTE_TYPES.join(", ")
            ));
        }
        let dump = v.option("dump-path").map(str::trim).unwrap_or("");
        let safe = |p: &str| {
            p.strip_prefix(REMOTE_DUMP_DIR)
                .is_some_and(|rest| !rest.is_empty() && !rest.split('/').any(|c| c == ".."))
        };
        if t == "debug/io-stats" && !dump.is_empty() && !safe(dump) {
            return Err(format!(
                "volume {:?} (debug/io-stats) has dump-path {dump:?}, a file this machine \
                 would replace: a fetched volfile may only dump under {REMOTE_DUMP_DIR}; use \
                 --volfile FILE otherwise",
                v.name
            ));
        }
    }
    Ok(())
}

fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}:volfile-fetch", std::process::id())
}

async fn fetch_inner(
    server: &VolfileServer,
    creds: &Credentials,
    timeout: Duration,
    watch: Option<(u64, Duration)>,
) -> Result<String, FetchError> {
    let addr = server.addr();
    let volume = server.volume.clone();
    let proto = |what: String| FetchError::Protocol {
        addr: addr.clone(),
        volume: volume.clone(),
        what,
    };
    let sock = TcpStream::connect((server.host.as_str(), server.port))
        .await
        .map_err(|source| FetchError::Connect {
            addr: addr.clone(),
            volume: volume.clone(),
            source,
        })?;
    let _ = sock.set_nodelay(true);
    let sock = match &creds.tls {
        None => crate::wire::Stream::Tcp(sock),
        Some(files) => {
            let name = creds.tls_server_name.as_deref().unwrap_or("");
            let tls = crate::creds::ClientTls::new(files, name).map_err(&proto)?;
            let s = tls
                .connector
                .connect(tls.server_name.clone(), sock)
                .await
                .map_err(|e| proto(format!("TLS handshake failed: {e}")))?;
            let (sock, conn) = s.into_inner();
            crate::wire::Stream::Tls(crate::wire::tls::TlsIo::new(sock, conn))
        }
    };
    let (r, mut w) = sock.into_split().map_err(|e| proto(e.to_string()))?;
    let nonce = crate::creds::nonce();
    let req = VolfileRequest {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: server.volume.clone(),
        client: identity(),
        nonce: nonce.to_vec(),
    };
    let msg = match watch {
        None => ClientMsg::GetVolfile(req),
        Some((known, hold)) => ClientMsg::WatchVolfile(VolfileWatch {
            request: req,
            known,
            hold_ms: u32::try_from(hold.as_millis()).unwrap_or(u32::MAX),
        }),
    };
    let frame =
        wire::encode(&msg, Vec::new(), HANDSHAKE_MAX_FRAME).map_err(|e| proto(e.to_string()))?;
    wire::write_frames(&mut w, std::slice::from_ref(&frame))
        .await
        .map_err(|e| proto(format!("cannot send the request: {e}")))?;
    let mut reader = FrameReader::new(r, VOLFILE_MAX_FRAME);
    let body = match reader.next(timeout).await {
        Ok(Some(b)) => b,
        Ok(None) | Err(WireError::Truncated) => {
            return Err(proto(
                "the server closed the connection without answering (is it an xlfs brick of \
                 this release?)"
                    .into(),
            ));
        }
        Err(e) => return Err(proto(e.to_string())),
    };
    let first = wire::decode::<ServerMsg>(body)
        .map_err(|e| proto(format!("bad answer: {e}")))?
        .0;
    let answer = wire::answer_challenge(
        &mut reader,
        &mut w,
        first,
        creds.secret.as_deref(),
        &server.volume,
        &nonce,
        timeout,
        "--secret-file",
    )
    .await
    .map_err(proto)?;
    match answer {
        ServerMsg::Volfile(v) if v.volume == server.volume => match check_remote_volfile(&v.text) {
            Ok(()) => Ok(v.text),
            Err(reason) => Err(FetchError::Forbidden {
                addr,
                volume,
                reason,
            }),
        },
        ServerMsg::Volfile(v) => Err(proto(format!(
            "the server answered with the volfile of another volume ({:?})",
            v.volume
        ))),
        ServerMsg::Refused(reason) => Err(FetchError::Refused {
            addr,
            volume,
            reason,
        }),
        ServerMsg::Welcome(_)
        | ServerMsg::Pong(_)
        | ServerMsg::Reply(_)
        | ServerMsg::Upcall(_)
        | ServerMsg::Challenge(_) => Err(proto(
            "the server answered with something other than a volfile".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_lists_and_backups() {
        let addrs =
            |v: Vec<VolfileServer>| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
        assert_eq!(
            addrs(parse_servers("h1,h2:24010,[::1]:/gv0", None).expect("list")),
            [
                "h1:24018:/gv0",
                "h1:49152:/gv0",
                "h2:24010:/gv0",
                "[::1]:24018:/gv0",
                "[::1]:49152:/gv0"
            ]
        );
        assert_eq!(
            addrs(parse_servers("h1:/gv0", Some("h2")).expect("no ports")),
            [
                "h1:24018:/gv0",
                "h1:49152:/gv0",
                "h2:24018:/gv0",
                "h2:49152:/gv0"
            ]
        );
        assert_eq!(
            addrs(parse_servers("h1:24010:/gv0", Some("h2:[fd00::2]:h3")).expect("backups")),
            [
                "h1:24010:/gv0",
                "h2:24010:/gv0",
                "[fd00::2]:24010:/gv0",
                "h3:24010:/gv0"
            ]
        );
        assert_eq!(parse_servers("h1:7:/v", Some("")).expect("empty").len(), 1);
        for bad in ["h1,,h2:/v", "h1,h2:x:/v", "h1,h2"] {
            assert!(parse_servers(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn server_forms() {
        let p = |s: &str| VolfileServer::parse(s);
        let s = p("h:/gv0").expect("plain");
        assert_eq!(
            (s.host.as_str(), s.port, s.volume.as_str()),
            ("h", DEFAULT_PORT, "gv0")
        );
        let s = p("10.0.0.1:24010:/gv0/").expect("port, trailing slash");
        assert_eq!(
            (s.host.as_str(), s.port, s.volume.as_str()),
            ("10.0.0.1", 24010, "gv0")
        );
        let s = p("[fd00::1]:/v").expect("v6");
        assert_eq!((s.host.as_str(), s.port), ("fd00::1", DEFAULT_PORT));
        let s = p("[::1]:7:/v").expect("v6 port");
        assert_eq!(
            (s.host.as_str(), s.port, s.addr()),
            ("::1", 7, "[::1]:7".into())
        );
        assert_eq!(s.to_string(), "[::1]:7:/v");
        assert_eq!(p(&s.to_string()), Ok(s));
        for bad in [
            "gv0",
            "/mnt/x",
            "h:gv0",
            ":/gv0",
            "h:/",
            "h:/a/b",
            "h:x:/gv0",
            "h:0:/gv0",
            "::1:/gv0",
            "[::1:/gv0",
            "[::1]x:/gv0",
        ] {
            let e = p(bad).expect_err(bad);
            assert!(e.contains("HOST:/VOLUME"), "{bad}: {e}");
        }
    }
}

#[cfg(test)]
mod remote_tests {
    use super::check_remote_volfile;

    fn graph(types: &[(&str, &str)]) -> String {
        let mut s = String::from("(volumes: [\n");
        let mut below: Option<String> = None;
        for (i, (t, opts)) in types.iter().enumerate() {
            let name = format!("v{i}");
            let subs = below
                .as_ref()
                .map(|b| format!(", subvolumes: [{b:?}]"))
                .unwrap_or_default();
            s.push_str(&format!(
                "    (name: {name:?}, type: {t:?}, options: {{ {opts} }}{subs}),\n"
            ));
            below = Some(name);
        }
        s.push_str("])");
        // The check passes what does not parse: these must parse to test anything.
        xlfs_core::volfile::Volfile::parse(&s, "<test>").expect("a volfile");
        s
    }

    #[test]
    fn a_fetched_volfile_holds_only_client_side_types() {
        let ok = graph(&[
            ("protocol/client", r#""remote-host": "h""#),
            ("cluster/replicate", ""),
            ("performance/write-behind", ""),
            ("features/locks", ""),
            ("debug/io-stats", r#""dump-path": """#),
            ("user/counter", ""),
        ]);
        assert_eq!(check_remote_volfile(&ok), Ok(()), "{ok}");
        for (t, opts) in [
            ("storage/posix", r#""directory": "/""#),
            ("protocol/server", r#""listen-host": "0.0.0.0""#),
            ("storage/memory", ""),
            ("test/recorder", ""),
            ("mine/counter", ""),
            ("cluster", ""),
        ] {
            let vf = graph(&[(t, opts), ("performance/io-cache", "")]);
            let e = check_remote_volfile(&vf).expect_err(t);
            assert!(e.contains(&format!("type {t},")), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        let vf = graph(&[
            ("protocol/client", ""),
            ("debug/io-stats", r#""dump-path": "/etc/cron.d/x""#),
        ]);
        let e = check_remote_volfile(&vf).expect_err("dump-path");
        assert!(e.contains("dump-path"), "{e}");
        let vf = graph(&[
            ("protocol/client", ""),
            (
                "debug/io-stats",
                r#""dump-path": "/var/log/xlfs/../../etc/x""#,
            ),
        ]);
        check_remote_volfile(&vf).expect_err("dump-path with ..");
        let vf = graph(&[
            ("protocol/client", ""),
            (
                "debug/io-stats",
                r#""dump-path": "/var/log/xlfs/stats.json""#,
            ),
        ]);
        assert_eq!(check_remote_volfile(&vf), Ok(()));
        // Not a volfile: left to the caller's parse.
        assert_eq!(check_remote_volfile("nonsense ("), Ok(()));
    }
}
