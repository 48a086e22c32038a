//! `xlfs volume heal VOL [info [split-brain] | full | split-brain POLICY ...] [--json] [--every D]`: what
//! replicate still has to heal, and healing it (GlusterFS's `gluster volume heal`).
//!
//! - `info` reads the heal index of every brick of the volume on this host
//!   (`<brick>/.xlfs/indices/xattrop`, kept by storage/posix: one entry per object with a
//!   non-zero `trusted.afr.*` counter), and in cluster mode asks every other peer's daemon
//!   for its bricks' indexes, and prints the entries by path; `info split-brain` only those
//!   whose copies accuse each other (see [`info`]).
//! - no sub-command heals what is indexed: it builds the volume's client graph in this
//!   process and looks up every indexed object by path, which makes replicate heal it (inline:
//!   the heal client runs with `background-self-heal-count 0`), then says what is left;
//!   `full` looks up every object of the volume instead (readdirp crawl from the root).
//! - `split-brain bigger-file|latest-mtime PATH`, `split-brain source-brick BRICK [PATH]`
//!   resolve a split-brain, each copy read and written through its brick (see [`split`]).
//!
//! Healing reads the indexes of this host's bricks only (in cluster mode each host's
//! self-heal daemon heals its own bricks' indexes); `info` lists every brick in cluster
//! mode, outside it only this host's: run it on every server then.

pub mod info;
pub mod run;
pub mod split;

use std::time::Duration;

use super::Ctx;
use crate::error::{CliError, Result};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume heal gv0 info                   entries pending heal, per brick (in cluster
                                              mode every peer's bricks, else this host's)
  xlfs volume heal gv0 info split-brain       entries whose copies accuse each other
  xlfs volume heal gv0                        heal what the local bricks' indexes list
  xlfs volume heal gv0 full                   look up every object of the volume
  xlfs volume heal gv0 --every 10s            heal the index again every 10 s (Ctrl-C stops)
  xlfs volume heal gv0 --daemon               the self-heal daemon (volume start runs it)
  xlfs volume heal gv0 split-brain bigger-file /dir/f       resolve: the larger copy wins
  xlfs volume heal gv0 split-brain latest-mtime /dir/f      resolve: the newest copy wins
  xlfs volume heal gv0 split-brain source-brick host:/b1 [/dir/f]
                                              resolve: brick host:/b1's copy wins (without a
                                              path: every split-brain entry of its set)

Exit codes: 0 nothing left to heal (info: always 0 unless the volume is unknown), 8 heal
finished with entries still pending (a brick down, split-brain, or writes in flight).")]
pub struct Args {
    /// The volume.
    pub name: String,
    /// `info`, `info split-brain`, `full`, `split-brain POLICY ...`, or nothing (heal the
    /// index).
    #[arg(value_name = "WHAT", num_args = 0..=4)]
    pub what: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Heal again every DURATION (e.g. 10s, 2m) until interrupted: a heal daemon in the
    /// foreground.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub every: Option<Duration>,
    /// Run as the volume's self-heal daemon, which `xlfs volume start` starts for a
    /// replicated volume (log: <state>/volumes/VOL/log/shd.log): it reads the local bricks'
    /// indexes every 2 s and heals when they list entries — at once when a brick comes back,
    /// else after a delay that doubles from 2 s up to --every (default 60s) while nothing
    /// heals — until `volume stop`. Failures are logged, never fatal.
    #[arg(long, conflicts_with = "json")]
    pub daemon: bool,
    /// Objects healed at once (each is looked up by its path; a file's data heal keeps
    /// `data-self-heal-window-size` chunks in flight of its own).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: u16,
    /// How long to wait for the bricks to connect before healing with those that did.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub connect_timeout: Duration,
}

/// What the words after the volume name ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    Info,
    SplitBrain,
    Index,
    Full,
}

impl What {
    pub fn parse(words: &[String]) -> Result<What> {
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        match w.as_slice() {
            [] => Ok(What::Index),
            ["full"] => Ok(What::Full),
            ["info"] => Ok(What::Info),
            ["info", "split-brain"] => Ok(What::SplitBrain),
            _ => Err(CliError::Rejected(format!(
                "volume heal: unknown {:?}; say `info`, `info split-brain`, `full`, `split-brain ...` or nothing",
                w.join(" ")
            ))),
        }
    }
}

/// `10s`, `2m`, `500ms`, `1h`, or plain seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 10s, 2m, 500ms)"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    }
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    if a.what.first().map(String::as_str) == Some("split-brain") {
        let words: Vec<&str> = a.what[1..].iter().map(String::as_str).collect();
        let req = split::parse(&words)?;
        if a.every.is_some() || a.json {
            return Err(CliError::Rejected(
                "volume heal: split-brain takes neither --every nor --json".into(),
            ));
        }
        return split::run(ctx, &a.name, &req);
    }
    let what = What::parse(&a.what)?;
    match what {
        What::Info | What::SplitBrain => {
            if a.every.is_some() || a.daemon {
                return Err(CliError::Rejected(
                    "volume heal: --every and --daemon go with a heal, not with info".into(),
                ));
            }
            info::run(ctx, &a.name, what == What::SplitBrain, a.json)
        }
        What::Index if a.daemon => run::daemon(ctx, &a),
        What::Full if a.daemon => Err(CliError::Rejected(
            "volume heal: --daemon heals the index, not a full crawl".into(),
        )),
        What::Index | What::Full => run::run(ctx, &a, what == What::Full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_durations_parse() {
        let w = |v: &[&str]| What::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&[]).ok(), Some(What::Index));
        assert_eq!(w(&["full"]).ok(), Some(What::Full));
        assert_eq!(w(&["info"]).ok(), Some(What::Info));
        assert_eq!(w(&["info", "split-brain"]).ok(), Some(What::SplitBrain));
        assert!(w(&["infos"]).is_err() && w(&["full", "x"]).is_err());
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("10x").is_err() && parse_duration("s").is_err());
    }
}
