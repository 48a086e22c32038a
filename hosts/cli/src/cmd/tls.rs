//! `xlfs tls ca DIR` and `xlfs tls issue DIR NAME...`: a volume's certificate authority and the
//! certificates it signs, for protocol/server's and protocol/client's `tls` options.

use std::path::PathBuf;

use crate::error::{CliError, Result};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Make a certificate authority in DIR (ca.pem, and its key ca.key, mode 0600).
    #[command(after_help = "\
Keep ca.key on the machine that issues certificates; copy only ca.pem to bricks and clients.
An existing CA is never replaced (every certificate it signed would stop working).

Example:
  xlfs tls ca /etc/xlfs/gv0 --name gv0
  xlfs tls issue /etc/xlfs/gv0 brick1.gv0 brick2.gv0 client.gv0")]
    Ca {
        /// Directory of the CA (created if missing).
        dir: PathBuf,
        /// A name for the CA's subject (default: the directory's name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Issue certificates signed by the CA in DIR: DIR/NAME.pem and DIR/NAME.key (0600).
    #[command(after_help = "\
NAME is the certificate's common and DNS name, what protocol/server's tls-allow and
protocol/client's tls-server-name match. A certificate serves either end. Give a brick
NAME.pem, NAME.key and ca.pem as tls-cert, tls-key and tls-ca (likewise a client):
  xlfs volume set gv0 protocol.server.tls on
  xlfs volume set gv0 protocol.server.tls-cert /etc/xlfs/gv0/brick1.gv0.pem
  ...")]
    Issue {
        /// Directory of the CA (`xlfs tls ca`).
        dir: PathBuf,
        /// Names to issue certificates for.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

pub fn run(c: Command) -> Result<u8> {
    let fail = CliError::Rejected;
    match c {
        Command::Ca { dir, name } => {
            let name = name.unwrap_or_else(|| {
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "xlfs".into())
            });
            let pem = xlfs_protocol::creds::make_ca(&dir, &name).map_err(fail)?;
            println!(
                "made CA {name:?}: {} (key {})",
                pem.display(),
                dir.join("ca.key").display()
            );
        }
        Command::Issue { dir, names } => {
            for n in names {
                let f = xlfs_protocol::creds::issue(&dir, &n).map_err(fail)?;
                println!(
                    "issued {n}: {} (key {}, CA {})",
                    f.cert.display(),
                    f.key.display(),
                    f.ca.display()
                );
            }
        }
    }
    Ok(0)
}
