//! Options of protocol/server.

use std::time::Duration;

xlator_api::options! {
    /// Options of a protocol/server instance (the top of a brick graph).
    pub struct ServerOptions {
        /// Address to listen on. `0.0.0.0` or `::` to accept remote clients (then set
        /// `auth-allow`).
        pub listen_host: String = OptionSpec::string("listen-host", "127.0.0.1"),
        /// TCP port to listen on; 0 picks a free port (the brick host prints it).
        pub listen_port: u32 = OptionSpec::int("listen-port", "0").range(0, 65535),
        /// The name clients give as `remote-subvolume`. Empty: the name of the translator
        /// below protocol/server. Either name is accepted.
        pub volume_name: String = OptionSpec::string("volume-name", ""),
        /// Client addresses allowed to connect: a comma-separated list of `*`, addresses
        /// (`10.0.0.7`, `::1`) and networks (`10.0.0.0/8`, `fd00::/8`). Others are refused
        /// at handshake with a message naming their address.
        pub auth_allow: String = OptionSpec::string("auth-allow", "*").reconfigurable(),
        /// Shared secret clients must prove they hold (their `secret` or `secret-file`);
        /// empty: none. It never crosses the wire: client and brick each prove they hold it
        /// by a challenge-response, so a client also knows it reached the real brick. Prefer
        /// `secret-file`, which keeps it out of the volfile.
        pub secret: String = OptionSpec::string("secret", "").reconfigurable(),
        /// A file whose first line is the secret (see `secret`); it must be readable by its
        /// owner only (mode 0600). Read at start and at each reconfigure. Not with `secret`.
        pub secret_file: String = OptionSpec::string("secret-file", "").reconfigurable(),
        /// Requests of one connection running at once; the server stops reading from a
        /// connection at this limit (back-pressure), as GlusterFS's outstanding-rpc-limit.
        pub max_inflight_per_connection: u32 =
            OptionSpec::int("max-inflight-per-connection", "256").range(1, 65536),
        /// Bytes of `readv` and `readdirp` replies one connection may have reserved at once:
        /// a request reserves its reply's size before it runs and keeps it until the reply
        /// is written to the socket; at the limit the server stops reading that connection.
        /// A client that stops reading holds at most this much of the brick's memory (with
        /// 256 requests of 1 MiB in flight it could hold 256 MiB until `send-timeout`).
        pub max_reply_bytes_per_connection: u64 =
            OptionSpec::size("max-reply-bytes-per-connection", "64MiB")
                .range(1_048_576, 17_179_869_184),
        /// Largest read or write payload; frames are at most this plus 64 KiB. Bigger
        /// frames close the connection.
        pub max_write: u64 = OptionSpec::size("max-write", "1MiB").range(65_536, 67_108_864),
        /// Largest `readv` and `rchecksum` a client may ask for, and the most a `readdirp` is
        /// answered with, checked before anything is allocated for the answer: a bigger
        /// `readv` or `rchecksum` fails with EINVAL (a short read would mean end of file), a
        /// bigger `readdirp` is answered with a shorter listing (callers continue from its
        /// last cookie). Never more than fits a reply frame (`max-write` and the client's own
        /// maximum).
        pub max_read: u64 = OptionSpec::size("max-read", "1MiB").range(4096, 67_108_864),
        /// Connections the server holds at once (clients, volfile requests and watches,
        /// connections still in their handshake). One over it is closed as soon as it is
        /// accepted, before anything is read from it.
        pub max_connections: u32 =
            OptionSpec::int("max-connections", "1024").range(1, 1_000_000),
        /// Connections from one TCP address at once (each mount keeps one per brick, plus
        /// one volfile watch); more are closed as soon as they are accepted. Unix-socket
        /// clients are not counted here (they all count as 127.0.0.1).
        pub max_connections_per_address: u32 =
            OptionSpec::int("max-connections-per-address", "64").range(1, 1_000_000),
        /// Connections that have not sent their first frame yet (each may hold up to 64 KiB of
        /// buffer for `handshake-timeout`); more are closed as soon as they are accepted.
        pub max_pending_handshakes: u32 =
            OptionSpec::int("max-pending-handshakes", "64").range(1, 1_000_000),
        /// fds one connection may hold open at once (files and directories); an open,
        /// create or opendir beyond answers EMFILE.
        pub max_fds_per_client: u32 =
            OptionSpec::int("max-fds-per-client", "65536").range(1, 16_777_216),
        /// A connection that has not completed the handshake within this time is closed.
        pub handshake_timeout: Duration =
            OptionSpec::duration("handshake-timeout", "10s").range(100, 600_000),
        /// A client that sends nothing (clients ping at least every 10 s) and none of whose
        /// requests finishes for this long is disconnected and its fds and locks released:
        /// it crashed or the network is gone. Holds whatever the server is doing for the
        /// connection (reading, waiting for a free request slot, sending).
        pub client_idle_timeout: Duration =
            OptionSpec::duration("client-idle-timeout", "60s").range(5_000, 3_600_000),
        /// A reply (or a batch of replies, at most 4 MiB) the client has not taken within
        /// this time closes the connection, releasing its fds and locks like any disconnect:
        /// a client that stops reading cannot keep them.
        pub send_timeout: Duration =
            OptionSpec::duration("send-timeout", "30s").range(100, 3_600_000),
        /// Once a frame has started, all of it must arrive within this time, else the
        /// connection is closed (slow or stalled senders).
        pub frame_receive_timeout: Duration =
            OptionSpec::duration("frame-receive-timeout", "30s").range(100, 3_600_000),
        /// A client volfile (RON) this brick hands out to `xlfs-mount HOST:/NAME` and
        /// `xlfs-nfsd HOST:/NAME` (NAME is `client-volfile-name`), after the same checks as a
        /// client connection (auth-allow, secret). Read at every request, so a regenerated
        /// file is served at once. Empty: none. `xlfsd --client-volfile` sets it.
        pub client_volfile: String =
            OptionSpec::string("client-volfile", "").reconfigurable(),
        /// Directory of the brick's Unix socket, `brick-<listen-port>.sock`: a client on
        /// this machine (its `remote-host` a loopback address, its `unix-socket-dir` the
        /// same) connects there instead of TCP, with the same handshake and checks (it
        /// counts as 127.0.0.1 for `auth-allow`). Created if missing; if the socket cannot
        /// be made, the brick serves TCP only and says so. Empty: no Unix socket.
        pub unix_socket_dir: String = OptionSpec::string("unix-socket-dir", "/run/xlfs"),
        /// After answering a client that had nothing else in flight (one waiting for each
        /// reply, as `tar x` or `rm -r` through a mount does), the connection's reader polls
        /// the socket this long for that client's next request before sleeping (0: never).
        /// A request that comes within it is read at once, without waking a sleeping CPU
        /// (tens of microseconds on a virtual machine). The reader yields the CPU between
        /// polls; a connection whose next request keeps missing the window skips polling for
        /// exponentially more requests (up to 63).
        pub request_spin: Duration = OptionSpec::duration("request-spin", "50us")
            .range(0, 10)
            .reconfigurable(),
        /// Buffered writes up to this size run right on the connection's reader instead of
        /// a pool thread, one at a time per brick (others go to the pool): such a write
        /// usually only copies into the page cache, and the handoff would cost more. While
        /// one runs (or waits, when the kernel throttles dirty pages), that connection's
        /// next requests wait. 0: every write goes to the pool. O_SYNC/O_DSYNC/O_DIRECT
        /// writes always do.
        pub inline_write_max: u64 = OptionSpec::size("inline-write-max", "64KiB")
            .range(0, 67_108_864)
            .reconfigurable(),
        /// Reads of this size and up on an open file whose data is not cached are answered
        /// without copying it through the brick's memory: the leaf (storage/posix) splices it
        /// from the disk into a pipe and the reply is spliced from that into the socket.
        /// Cached data and smaller reads are copied. 0 (the default): never. Off by default
        /// because the gain did not show beyond this machine's noise in whole benchmark runs
        /// (+6% on concurrent cold reads in alternating pairs, and sequential 1 MiB reads
        /// came out slower in some runs); 64KiB is the value to try.
        pub splice_read_min: u64 = OptionSpec::size("splice-read-min", "0")
            .range(0, 67_108_864)
            .reconfigurable(),
        /// Send buffer of each Unix-socket connection (local clients), as the kernel counts
        /// it. Replies to large reads fill the default (about 208 KiB) at once, so a 512 KiB
        /// reply went out in three writes with waits between them while its client drained
        /// the socket. Set with SO_SNDBUFFORCE when the brick may (root), else SO_SNDBUF,
        /// which the kernel caps at net.core.wmem_max. TCP connections keep the kernel's
        /// autotuning. 0: the kernel's default. Applies to connections accepted after a
        /// change.
        pub unix_send_buffer: u64 = OptionSpec::size("unix-send-buffer", "4MiB")
            .range(0, 67_108_864)
            .reconfigurable(),
        /// TLS on every TCP connection (fops and volfile fetches), with mutual certificate
        /// authentication: a client must present a certificate `tls-ca` signed, and one of the
        /// names in `tls-allow`. Such a client is trusted (not root-squashed). Unix-socket
        /// clients need none (the kernel vouches for them).
        pub tls: bool = OptionSpec::bool("tls", "off"),
        /// The brick's certificate chain (PEM).
        pub tls_cert: String = OptionSpec::string("tls-cert", ""),
        /// The brick's private key (PEM).
        pub tls_key: String = OptionSpec::string("tls-key", ""),
        /// The CA certificates (PEM) client certificates must chain to.
        pub tls_ca: String = OptionSpec::string("tls-ca", ""),
        /// Certificate (DNS) names, comma-separated, one of which a client's certificate must
        /// carry; `*`: any certificate the CA signed.
        pub tls_allow: String = OptionSpec::string("tls-allow", "*"),
        /// What the brick's boot id (sent to clients at handshake) follows. `host`: the
        /// kernel's boot id, so it changes when the brick's machine reboots, the only time
        /// writes the brick acknowledged but did not sync are lost (a restarted brick process
        /// finds them in the page cache). `process`: a new id at every start, for leaves
        /// whose data lives in the brick process itself. Clients fail the next fsync and flush
        /// of an fd with such writes with EIO when the boot id changed.
        pub boot_id: String =
            OptionSpec::enumeration("boot-id", "host", &["host", "process"]),
        /// The volume name `client-volfile` is served under; required with it.
        pub client_volfile_name: String =
            OptionSpec::string("client-volfile-name", "").reconfigurable(),
        /// Run calls a client makes as uid 0 as `anonuid` instead (and gid 0, or group 0, as
        /// `anongid`), as NFS's root_squash. `auto` (the default): squash the TCP clients that
        /// did not prove they hold the brick's secret (so every TCP client of a brick without
        /// one), and non-root peers of the Unix socket; believe clients that proved it (mounts,
        /// self-heal and rebalance of the volume need root on the brick). `on`: squash every
        /// client but root on this machine. `off`: squash nobody. Root on this machine,
        /// through the Unix socket, is never squashed (it could read the brick directory
        /// anyway).
        pub root_squash: String =
            OptionSpec::enumeration("root-squash", "auto", &["auto", "on", "off"])
                .reconfigurable(),
        /// Run every call (of the same clients as `root-squash`) as `anonuid`/`anongid` with
        /// no supplementary groups, whoever the client says it is.
        pub all_squash: bool = OptionSpec::bool("all-squash", "off").reconfigurable(),
        /// The uid squashed callers run as (`root-squash`, `all-squash`); 65534 is nobody.
        pub anonuid: u32 = OptionSpec::int("anonuid", "65534")
            .range(0, 4_294_967_294)
            .reconfigurable(),
        /// Tell clients when another client changes an inode or a directory entry they looked
        /// at, so their caches (FUSE's attribute and entry caches, io-cache) drop it at once
        /// instead of when their timeouts run out. Advisory: see `docs/consistency.md`.
        pub upcall: bool = OptionSpec::bool("upcall", "on").reconfigurable(),
        /// How long a client's look at an inode keeps it told of changes; set it above the
        /// longest cache timeout of the volume's clients.
        pub upcall_timeout: Duration = OptionSpec::duration("upcall-timeout", "120s")
            .range(1_000, 86_400_000)
            .reconfigurable(),
        /// Most inodes whose lookers the brick remembers (about 100 bytes each); past it,
        /// newly seen inodes go unwatched until older interest lapses.
        pub upcall_max_inodes: u32 = OptionSpec::int("upcall-max-inodes", "262144")
            .range(1024, 67_108_864)
            .reconfigurable(),
        /// The gid squashed callers run as; 65534 is nogroup.
        pub anongid: u32 = OptionSpec::int("anongid", "65534")
            .range(0, 4_294_967_294)
            .reconfigurable(),
    }
}
