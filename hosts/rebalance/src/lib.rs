//! The rebalance runner of xlfs (`xlfs-rebalance`): after bricks are added (or before some
//! leave), it visits every directory of a distribute volume through the volume's own client
//! graph, has cluster/distribute rewrite each layout over the current bricks and move each
//! file whose name now hashes to another brick, and records its progress in a status file it
//! can resume from after a stop or a crash.
//!
//! The binary builds the graph ([`target::VolumeTarget`]); [`run`] is the whole job over any
//! [`Target`], so tests drive it with a fake top.
//!
//! ```no_run
//! # async fn f(top: xlator_api::Subvol) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use xlfs_rebalance::{Config, Stop, run, status};
//!
//! let cfg = Config::new("/var/lib/xlfs/volumes/gv0/rebalance.json".into());
//! let prev = status::load(&cfg.status_path)?;
//! let (start, _how) = status::begin(prev, status::Mode::Rebalance, false, None,
//!                                   std::process::id(), status::now_s());
//! let end = run(Arc::new(top), start, &cfg, Stop::new()).await?;
//! println!("{:?}: {} files moved", end.state, end.files_moved);
//! # Ok(()) }
//! ```

pub mod crawl;
pub mod dht;
pub mod progress;
pub mod status;
pub mod target;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crawl::{Outcome, Stop};
pub use status::{Mode, State, Status, StatusError};
pub use target::Target;
use xlator_api::{Ctx, Gfid};

use crate::progress::{Book, Writer};

/// How a run goes.
#[derive(Clone, Debug)]
pub struct Config {
    pub status_path: PathBuf,
    /// Files migrated at once (at least 1).
    pub parallel: usize,
    /// How often the status file is rewritten.
    pub status_every: Duration,
    /// How often a progress line is logged.
    pub log_every: Duration,
    /// Retries of files skipped for a transient reason.
    pub retry: crawl::Retry,
}

impl Config {
    /// Defaults: 4 files at once, the status file every second, a log line every 10 s,
    /// transient skips retried 3 times, 10 s apart. (Seen with the current distribute: the
    /// first migrate of a file whose move a kill -9 interrupted answers `busy`, the next one
    /// moves it; files being written or locked need the pause.)
    pub fn new(status_path: PathBuf) -> Config {
        Config {
            status_path,
            parallel: 4,
            status_every: Duration::from_secs(1),
            log_every: Duration::from_secs(10),
            retry: crawl::Retry {
                rounds: 3,
                delay: Duration::from_secs(10),
            },
        }
    }
}

/// Files in use on the volume (`files - ffree` of its statfs): the ETA's total. `None` when
/// the volume reports no inode counts or statfs fails.
pub async fn estimate_files(target: &dyn Target) -> Option<u64> {
    match target.top().statfs(&Ctx::root(), Gfid::ROOT).await {
        Ok(s) if s.files > 0 => Some(s.files.saturating_sub(s.ffree)),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("statfs of the volume failed with {e}: no ETA");
            None
        }
    }
}

/// Runs the job from `start` (see [`status::begin`]) until it completes, fails or `stop` is
/// requested, keeping the status file current. Returns the final status, also written to
/// the file. Errs only when the status file cannot be written at the start or the end.
pub async fn run(
    target: Arc<dyn Target>,
    mut start: Status,
    cfg: &Config,
    stop: Stop,
) -> Result<Status, StatusError> {
    start.files_total_estimate = estimate_files(&*target).await;
    // Written before any work: the CLI sees the run began (and the path is writable).
    status::store(&cfg.status_path, &start)?;
    let book = Arc::new(Mutex::new(Book::new(start)));
    let lock = |b: &Arc<Mutex<Book>>| {
        // A panic elsewhere leaves counters that are still counters.
        let b = b.clone();
        move || -> Vec<u8> { b.lock().unwrap_or_else(|p| p.into_inner()).snapshot() }
    };
    let writer = Writer::start(cfg.status_path.clone())?;
    let ticker = {
        let (tx, book, snap) = (writer.sender(), book.clone(), lock(&book));
        let (every, log_every) = (cfg.status_every, cfg.log_every);
        tokio::spawn(async move {
            let mut last_log = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(every).await;
                if let Some(tx) = &tx {
                    let _ = tx.send(snap());
                }
                if last_log.elapsed() >= log_every {
                    last_log = tokio::time::Instant::now();
                    let line = book.lock().unwrap_or_else(|p| p.into_inner()).line();
                    tracing::info!("progress: {line}");
                }
            }
        })
    };
    let crawler = crawl::Crawler::new(target, book.clone(), stop, cfg.parallel, cfg.retry);
    let outcome = crawler.run().await;
    ticker.abort();
    let _ = ticker.await;
    let last = {
        let mut b = book.lock().unwrap_or_else(|p| p.into_inner());
        let state = match &outcome {
            Outcome::Finished if b.session_failures == 0 => State::Completed,
            Outcome::Finished | Outcome::Fatal(_) => State::Failed,
            Outcome::Stopped => State::Stopped,
        };
        b.status.state = state;
        b.refresh();
        b.status.finished = Some(b.status.updated);
        b.status.eta_s = match state {
            State::Completed => Some(0.0),
            _ => None,
        };
        let line = b.line();
        match state {
            State::Completed => tracing::info!("rebalance completed: {line}"),
            State::Stopped => tracing::info!("rebalance stopped: {line}"),
            _ => tracing::error!(
                "rebalance failed: {line}; last error: {}",
                b.status.last_error.as_deref().unwrap_or("?")
            ),
        }
        b.status.clone()
    };
    // The ticker and its sender are gone: this is the last write.
    writer.finish(status::render(&last))?;
    Ok(last)
}
