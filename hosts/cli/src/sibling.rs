//! Finding the other xlfs binaries (`xlfsd`, `xlfs-mount`, `xlfs-rebalance`): `$XLFS_BIN_DIR`, next to this
//! executable (and its parent, for cargo's `target/<profile>/deps`), then `PATH`.

use std::path::PathBuf;

use crate::error::{CliError, Result};

/// Environment variable naming the directory with `xlfsd` and `xlfs-mount`.
pub const BIN_DIR_ENV: &str = "XLFS_BIN_DIR";

/// The path of binary `name`.
pub fn find(name: &str) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os(BIN_DIR_ENV) {
        dirs.push(d.into());
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        if dir.ends_with("deps") {
            dirs.extend(dir.parent().map(PathBuf::from));
        }
        dirs.push(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            CliError::Process(format!(
                "cannot find `{name}` next to xlfs or on PATH; build it (cargo build --bin {name}) \
             or set {BIN_DIR_ENV} to the directory that has it"
            ))
        })
}
