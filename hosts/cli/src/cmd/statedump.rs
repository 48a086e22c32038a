//! `xlfs volume statedump NAME [--client MOUNTPOINT | --brick N] [--json]`: the live state of
//! a running brick or mount (the host's own state, then every translator's dump, top-down),
//! asked through its control socket.

use std::path::PathBuf;
use std::time::Duration;

use xlfs_host::control::{self, Request};

use super::{Ctx, XLFSD};
use crate::error::{CliError, Result};
use crate::procs;

/// How long a host may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Without --client or --brick: every brick of the volume running on this host. --socket asks
any host by its control socket (an xlfs-mount started by hand with --control-socket, an
xlfs-nfsd with XLFS_CONTROL_SOCKET).

Examples:
  xlfs volume statedump gv0
  xlfs volume statedump gv0 --client /mnt/gv0
  xlfs volume statedump gv0 --brick 0 --json | jq .xlators
  xlfs volume statedump --socket /run/xlfs-mnt.sock")]
pub struct Args {
    /// The volume (not needed with --socket).
    #[arg(required_unless_present = "socket")]
    pub name: Option<String>,
    /// The control socket of any running xlfs host.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["client", "brick", "name"])]
    pub socket: Option<PathBuf>,
    /// The mount (started by `xlfs mount`) on this directory.
    #[arg(long, value_name = "MOUNTPOINT", conflicts_with = "brick")]
    pub client: Option<PathBuf>,
    /// Brick number N of the volume (on this host).
    #[arg(long, value_name = "N")]
    pub brick: Option<usize>,
    /// Print JSON (one object per host; several hosts: an object keyed `brick-N`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let req = if a.json {
        Request::StatedumpJson
    } else {
        Request::StatedumpText
    };
    if let Some(path) = &a.socket {
        let out = control::ask(path, req, ANSWER_TIMEOUT).map_err(|e| {
            CliError::Process(format!("no xlfs host answers on {}: {e}", path.display()))
        })?;
        print!("{out}");
        if !out.ends_with('\n') {
            println!();
        }
        return Ok(0);
    }
    let name = a.name.clone().unwrap_or_default();
    let (vd, spec) = ctx.state().load(&name)?;
    let run = vd.load_run()?;
    let ask = |path: PathBuf, what: String| -> Result<String> {
        control::ask(&path, req, ANSWER_TIMEOUT).map_err(|e| {
            CliError::Process(format!(
                "{what} does not answer on its control socket {}: {e} (was it started by this \
                 xlfs release? restart it)",
                path.display()
            ))
        })
    };
    if let Some(mp) = &a.client {
        let mp = std::path::absolute(mp).map_err(CliError::io(mp))?;
        let mp = mp.canonicalize().unwrap_or(mp);
        if !run.mounts.iter().any(|m| m.mountpoint == mp) {
            return Err(CliError::State(format!(
                "{} is not a mount of volume {} started by `xlfs mount`",
                mp.display(),
                spec.name
            )));
        }
        let out = ask(
            vd.mount_socket(&mp),
            format!("the mount on {}", mp.display()),
        )?;
        print!("{out}");
        if !out.ends_with('\n') {
            println!();
        }
        return Ok(0);
    }
    let bricks: Vec<usize> = match a.brick {
        Some(i) if spec.position_of(i).is_none() => {
            let ids: Vec<String> = (0..spec.bricks.len())
                .map(|p| spec.brick_id(p).to_string())
                .collect();
            return Err(CliError::Rejected(format!(
                "volume {} has no brick {i}; its bricks are {} (xlfs volume info {})",
                spec.name,
                ids.join(", "),
                spec.name
            )));
        }
        Some(i) => vec![i],
        None => run
            .bricks
            .iter()
            .filter(|b| procs::alive(b.pid, XLFSD))
            .map(|b| b.index)
            .collect(),
    };
    if bricks.is_empty() {
        return Err(CliError::State(format!(
            "no brick of volume {} runs on this host; `xlfs volume start {}` first",
            spec.name, spec.name
        )));
    }
    let mut dumps = Vec::new();
    for i in &bricks {
        dumps.push((*i, ask(vd.brick_socket(*i), format!("brick {i}"))?));
    }
    if a.json && dumps.len() > 1 {
        let body: Vec<String> = dumps
            .iter()
            .map(|(i, d)| format!("\"brick-{i}\":{d}"))
            .collect();
        println!("{{{}}}", body.join(","));
    } else {
        for (_, d) in &dumps {
            print!("{d}");
            if !d.ends_with('\n') {
                println!();
            }
        }
    }
    Ok(0)
}
