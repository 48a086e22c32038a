//! The command line.

use std::net::IpAddr;
use std::path::PathBuf;

use std::time::Duration;

use clap::{ArgGroup, Parser};
use xlfs_protocol::fetch::VolfileServer;

use crate::export::Allow;

/// Serves an xlfs volume (the translator graph of a client volfile) over NFSv3, with the MOUNT
/// protocol and a minimal portmapper on the same TCP port. Clients that skip rpcbind name the
/// port twice, e.g. `nfs-ls 'nfs://127.0.0.1/?version=3&nfsport=P&mountport=P'`.
///
/// File handles carry the object's GFID and the volume id, so they stay valid across restarts.
/// Each call runs with the caller's AUTH_UNIX uid, gid and groups (after squashing), so the
/// bricks check permissions as for a local user. Runs in the foreground until SIGINT/SIGTERM.
///
/// The graph comes from `HOST[:PORT]:/VOLUME` (the client volfile fetched from a running
/// brick or xlfs-mgmtd, as xlfs-mount does; without PORT the host's xlfs-mgmtd, then 49152;
/// IPv6: `[::1]:/gv0`), `--volfile FILE` or `--local DIR`.
/// The volfile servers of `HOST:/VOLUME`, in the order they are asked (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Servers(pub Vec<VolfileServer>);

fn servers(text: &str) -> Result<Servers, String> {
    xlfs_protocol::fetch::parse_servers(text, None).map(Servers)
}

#[derive(Parser, Debug, Clone)]
#[command(name = "xlfs-nfsd", version, about, long_about)]
#[command(group(ArgGroup::new("source").required(true).args(["volfile", "local", "server"])))]
#[command(after_help = "Examples:
  xlfs-nfsd server1:/gv0 --address 0.0.0.0 --allow 10.0.0.0/8
  xlfs-nfsd 127.0.0.1:24010:/gv0 --secret-file /etc/xlfs/gv0.secret --port 0
  xlfs-nfsd --volfile /var/lib/xlfs/volumes/gv0/client.vol")]
pub struct Cli {
    /// `HOST[:PORT]:/VOLUME`: fetch the client volfile of VOLUME from the brick there (one
    /// started by `xlfs volume start`, or xlfsd --client-volfile), or from the host's
    /// xlfs-mgmtd; several hosts as `h1,h2:/VOLUME` (the first that answers). Without PORT,
    /// each host is asked at its xlfs-mgmtd (24018), then at 49152, as xlfs-mount does.
    #[arg(value_name = "HOST:/VOLUME", value_parser = servers)]
    pub server: Option<Servers>,

    /// A file whose first line is the volume's secret (mode 0600; `xlfs volume create` makes
    /// `<state>/volumes/VOLUME/secret`): proven to the brick when fetching the volfile
    /// (HOST:/VOLUME) and used by every protocol/client of the fetched graph.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,

    /// Refused: a secret on the command line is seen by every user (ps); use --secret-file.
    #[arg(long, value_name = "SECRET", hide = true)]
    pub secret: Option<String>,

    /// How long fetching the volfile may take (connect, checks, answer).
    #[arg(long, value_name = "DURATION", default_value = "10s",
          value_parser = xlator_api::parse_duration)]
    pub fetch_timeout: Duration,

    /// The client volfile (RON) describing the graph to export; its top volume receives the
    /// fops.
    #[arg(long, value_name = "FILE")]
    pub volfile: Option<PathBuf>,

    /// Export a local volume instead of a volfile: storage/posix on DIR/brick (created if
    /// missing) with features/locks and debug/io-stats on top.
    #[arg(long, value_name = "DIR", conflicts_with = "volfile")]
    pub local: Option<PathBuf>,

    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub address: IpAddr,

    /// TCP port for NFS, MOUNT and portmap; 0 picks a free port (printed on stdout).
    #[arg(long, value_name = "PORT", default_value_t = 2049)]
    pub port: u16,

    /// Clients allowed to mount and call: comma-separated addresses, CIDR blocks
    /// (10.0.0.0/8, fd00::/8) or `*` for everyone. Others get MNT3ERR_ACCES and AUTH_TOOWEAK.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "127.0.0.0/8,::1"
    )]
    pub allow: Vec<Allow>,

    /// Serve uid 0 (and gid 0) as root instead of mapping them to nobody (65534).
    #[arg(long)]
    pub no_root_squash: bool,

    /// Map every caller to nobody (65534), whatever its credential.
    #[arg(long)]
    pub all_squash: bool,

    /// Pin the volume id (in file handles and the `fsid` attribute) to this name. By default
    /// it is derived from the top volume's name and the options of the graph's leaves (brick
    /// directories, remote bricks), so it stays the same across restarts with the same
    /// volfile; set it to keep handles valid when those change.
    #[arg(long, value_name = "NAME")]
    pub fsid: Option<String>,

    /// Log filter: error, warn, info, debug, trace, or a tracing directive such as
    /// `xlfs_nfsd=debug,info`. RUST_LOG, when set, takes precedence.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,

    /// Print the graph's statedump (io-stats counters included) to stdout on exit.
    #[arg(long)]
    pub dump_on_exit: bool,
}

impl Cli {
    pub fn root_squash(&self) -> bool {
        !self.no_root_squash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xlfs-nfsd").chain(args.iter().copied()))
    }

    #[test]
    fn defaults() {
        let cli = parse(&["--local", "/d"]).expect("parse");
        assert_eq!(cli.address, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(cli.port, 2049);
        assert!(cli.root_squash() && !cli.all_squash);
        assert!(
            cli.allow
                .iter()
                .any(|a| a.matches("127.0.0.1".parse().expect("ip")))
        );
        assert!(
            !cli.allow
                .iter()
                .any(|a| a.matches("10.0.0.1".parse().expect("ip")))
        );
    }

    #[test]
    fn flags() {
        let cli = parse(&[
            "--volfile",
            "v.ron",
            "--port",
            "0",
            "--allow",
            "127.0.0.1,10.0.0.0/8",
            "--no-root-squash",
            "--address",
            "::1",
        ])
        .expect("parse");
        assert_eq!(cli.port, 0);
        assert_eq!(cli.allow.len(), 2);
        assert!(!cli.root_squash());
        assert!(cli.address.is_ipv6());
        assert!(parse(&[]).is_err());
        assert!(parse(&["--local", "/d", "--volfile", "v"]).is_err());
        assert!(parse(&["h:/gv0", "--local", "/d"]).is_err());
        assert!(parse(&["not-a-volume"]).is_err());
        let cli = parse(&["127.0.0.1:24010:/gv0", "--secret-file", "/f"]).expect("parse");
        let s = cli.server.expect("server");
        assert_eq!((s.0[0].port, s.0[0].volume.as_str()), (24010, "gv0"));
        assert_eq!(s.0.len(), 1);
        let s = parse(&["h1,h2:/gv0"])
            .expect("list")
            .server
            .expect("server");
        let ports: Vec<u16> = s.0.iter().map(|v| v.port).collect();
        assert_eq!(ports, [24018, 49152, 24018, 49152]);
        assert_eq!(cli.secret_file, Some(PathBuf::from("/f")));
        assert!(parse(&["--local", "/d", "--allow", "nope"]).is_err());
    }
}
