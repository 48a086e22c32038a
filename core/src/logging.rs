//! Logging for host binaries: `RUST_LOG` when set, else the `--log-level` filter, to stderr,
//! with colours only on a terminal. Plugin libraries' events reach this subscriber through the
//! loader's log bridge. A panic logs one line (`xlfs::panic` target) instead of Rust's default
//! three-line message: the host's hook is installed here, each library's by the loader.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. The error names the bad filter and why.
pub fn init(level: &str) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => EnvFilter::try_new(&v),
        _ => EnvFilter::try_new(level),
    }
    .map_err(|e| format!("invalid --log-level {level:?}: {e}"))?;
    xlator_api::panics::install_hook();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| format!("cannot install the logger: {e}"))
}
