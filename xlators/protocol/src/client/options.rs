//! Options of protocol/client.

use std::time::Duration;

xlator_api::options! {
    /// Options of a protocol/client instance (one per brick).
    pub struct ClientOptions {
        /// Host name or address of the brick server, or `host:port`.
        pub remote_host: String = OptionSpec::string("remote-host", "127.0.0.1"),
        /// TCP port of the brick server; 0 takes it from `remote-host` (`host:port`).
        pub remote_port: u32 = OptionSpec::int("remote-port", "0").range(0, 65535),
        /// The volume to attach to on the server: its `volume-name`, or the name of the
        /// translator directly below protocol/server. Required.
        pub remote_subvolume: String = OptionSpec::string("remote-subvolume", ""),
        /// A brick that sends nothing (not even a ping reply) for this long is declared down:
        /// the connection is closed, calls in flight fail with ENOTCONN and reconnection
        /// starts. Also bounds connect + handshake, and how long the first fops wait for the
        /// first connection attempt.
        pub ping_timeout: Duration = OptionSpec::duration("ping-timeout", "10s")
            .range(100, 1_013_000)
            .reconfigurable(),
        /// A single call that gets no reply for this long fails with ETIMEDOUT while the
        /// connection stays up (0: never). Keep it above the longest blocking lock wait.
        pub frame_timeout: Duration = OptionSpec::duration("frame-timeout", "1800s")
            .range(0, 86_400_000)
            .reconfigurable(),
        /// The volume's secret, when its bricks have one (their `secret`); empty: none. It
        /// never crosses the wire (a challenge-response both ways), and a brick that cannot
        /// prove it holds the same secret is refused. Prefer `secret-file`.
        pub secret: String = OptionSpec::string("secret", ""),
        /// A file whose first line is the secret (mode 0600: a file others may read is
        /// refused). Not with `secret`.
        pub secret_file: String = OptionSpec::string("secret-file", ""),
        /// TLS to the brick (TCP only; the Unix socket of a local brick needs none): this
        /// client's certificate, and the brick's checked against `tls-ca`.
        pub tls: bool = OptionSpec::bool("tls", "off"),
        /// This client's certificate chain (PEM).
        pub tls_cert: String = OptionSpec::string("tls-cert", ""),
        /// Its private key (PEM).
        pub tls_key: String = OptionSpec::string("tls-key", ""),
        /// The CA certificates (PEM) the brick's certificate must chain to.
        pub tls_ca: String = OptionSpec::string("tls-ca", ""),
        /// The name the brick's certificate must carry; empty: any name the CA signed.
        pub tls_server_name: String = OptionSpec::string("tls-server-name", ""),
        /// Largest read or write payload; frames are at most this plus 64 KiB. Larger
        /// `readv`/`writev` calls fail with EINVAL.
        pub max_write: u64 = OptionSpec::size("max-write", "1MiB").range(65_536, 67_108_864),
        /// Drop O_DIRECT from opens and writes sent to the brick (GlusterFS
        /// `network.remote-dio`): the client side still bypasses its caches for O_DIRECT fds
        /// (the kernel, io-cache, read-ahead), and the brick serves them from its page cache,
        /// as a kernel NFS server does for an O_DIRECT NFS client. O_DIRECT promises no
        /// durability (fsync, O_SYNC and O_DSYNC still go through). Off: the brick opens with
        /// O_DIRECT too, and every small O_DIRECT read or write waits for its disk.
        pub filter_o_direct: bool = OptionSpec::bool("filter-o-direct", "on").reconfigurable(),
        /// Where bricks on this machine keep their Unix sockets (their `unix-socket-dir`).
        /// When `remote-host` is a loopback address or `localhost` and the brick has a socket
        /// there, the connection uses it instead of TCP (same protocol and checks, no TCP/IP
        /// stack: cheaper per call and per byte); otherwise TCP. Empty: always TCP.
        pub unix_socket_dir: String = OptionSpec::string("unix-socket-dir", "/run/xlfs"),
        /// How long a host thread that polled a request first (the FUSE reader) reads the
        /// socket itself for the reply of the only call in flight on this connection, before
        /// handing the request to the runtime (0: never). It spins after the host's first poll
        /// of the whole request, when every call of a fan-out is already on the wire, so N
        /// bricks still cost one round trip. A reply within the window is read and delivered
        /// on that thread and the request goes on there, saving two thread wakeups per round
        /// trip (tens of microseconds each on a virtual machine). Never on the runtime's
        /// workers; a call class whose replies keep missing the window backs off
        /// exponentially. Costs up to this much CPU per call on an otherwise idle connection.
        pub reply_spin: Duration = OptionSpec::duration("reply-spin", "50us")
            .range(0, 10)
            .reconfigurable(),
    }
}

/// Whether `host` names this machine's loopback interface.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Where to connect, from the options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub volume: String,
    pub secret: Option<String>,
    /// TLS to the brick (over TCP), when on.
    pub tls: Option<crate::creds::ClientTls>,
    pub max_frame: usize,
    /// The brick's Unix socket, tried before TCP (a local brick with `unix-socket-dir`).
    pub unix_socket: Option<std::path::PathBuf>,
}

impl Target {
    pub fn from_options(o: &ClientOptions) -> Result<Target, String> {
        let (host, port) = match (o.remote_host.rsplit_once(':'), o.remote_port) {
            // An IPv6 literal without a port ("::1") must not be split.
            (Some((h, p)), 0) if !h.contains(':') || h.ends_with(']') => {
                let port = p.parse::<u16>().map_err(|_| {
                    format!(
                        "remote-host {:?}: {p:?} is not a port number",
                        o.remote_host
                    )
                })?;
                (
                    h.trim_start_matches('[').trim_end_matches(']').to_owned(),
                    port,
                )
            }
            (_, 0) => {
                return Err(format!(
                    "no port for brick {:?}: set remote-port or write remote-host as host:port",
                    o.remote_host
                ));
            }
            (_, p) => (o.remote_host.clone(), p as u16),
        };
        if o.remote_subvolume.trim().is_empty() {
            return Err(
                "remote-subvolume is required: the volume name the brick serves \
                        (xlfsd --volume-name, or the name of the server's child volume)"
                    .into(),
            );
        }
        Ok(Target {
            port,
            volume: o.remote_subvolume.clone(),
            secret: crate::creds::secret_of(&o.secret, &o.secret_file)?,
            tls: crate::creds::tls_files_of(o.tls, &o.tls_cert, &o.tls_key, &o.tls_ca)?
                .map(|f| crate::creds::ClientTls::new(&f, &o.tls_server_name))
                .transpose()?,
            max_frame: o.max_write as usize + crate::wire::HEADER_ROOM,
            unix_socket: (!o.unix_socket_dir.is_empty() && is_loopback(&host)).then(|| {
                crate::wire::unix_socket_path(std::path::Path::new(&o.unix_socket_dir), port)
            }),
            host,
        })
    }

    /// `host:port` for messages.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(host: &str, port: u32, vol: &str) -> ClientOptions {
        ClientOptions {
            remote_host: host.into(),
            remote_port: port,
            remote_subvolume: vol.into(),
            ping_timeout: Duration::from_secs(10),
            frame_timeout: Duration::from_secs(1800),
            secret: String::new(),
            secret_file: String::new(),
            tls: false,
            tls_cert: String::new(),
            tls_key: String::new(),
            tls_ca: String::new(),
            tls_server_name: String::new(),
            max_write: 1 << 20,
            filter_o_direct: true,
            reply_spin: Duration::from_micros(50),
            unix_socket_dir: "/run/xlfs".into(),
        }
    }

    #[test]
    fn host_port_forms() {
        let t = Target::from_options(&opts("h:24010", 0, "v")).expect("ok");
        assert_eq!((t.host.as_str(), t.port), ("h", 24010));
        let t = Target::from_options(&opts("10.0.0.1", 5, "v")).expect("ok");
        assert_eq!((t.host.as_str(), t.port), ("10.0.0.1", 5));
        let t = Target::from_options(&opts("[::1]:7", 0, "v")).expect("ok");
        assert_eq!(
            (t.host.as_str(), t.port, t.addr()),
            ("::1", 7, "[::1]:7".to_owned())
        );
        assert!(
            Target::from_options(&opts("h", 0, "v"))
                .expect_err("must fail")
                .contains("no port")
        );
        assert!(Target::from_options(&opts("h:x", 0, "v")).is_err());
        let t = Target::from_options(&opts("127.0.0.2:9", 0, "v")).expect("ok");
        assert_eq!(
            t.unix_socket.as_deref(),
            Some(std::path::Path::new("/run/xlfs/brick-9.sock"))
        );
        let t = Target::from_options(&opts("localhost", 9, "v")).expect("ok");
        assert!(t.unix_socket.is_some());
        let t = Target::from_options(&opts("10.0.0.1", 9, "v")).expect("ok");
        assert!(t.unix_socket.is_none(), "a remote brick is reached by TCP");
        let mut o = opts("127.0.0.1", 9, "v");
        o.unix_socket_dir = String::new();
        assert!(Target::from_options(&o).expect("ok").unix_socket.is_none());
        let e = Target::from_options(&opts("h", 1, " ")).expect_err("must fail");
        assert!(e.contains("remote-subvolume"));
    }
}
