//! CLI errors and the exit codes scripts can rely on.

use std::path::PathBuf;

use xlfs_volgen::VolgenError;

/// Exit codes (also listed in `xlfs --help`).
pub mod code {
    /// Success.
    pub const OK: u8 = 0;
    /// Anything else: I/O errors, a corrupt state directory.
    pub const FAILURE: u8 = 1;
    /// Bad command line (clap's own code).
    pub const USAGE: u8 = 2;
    /// The volume description, option key or value was rejected; nothing was written.
    pub const REJECTED: u8 = 3;
    /// No such volume.
    pub const NO_VOLUME: u8 = 4;
    /// The volume is in the wrong state (exists already, started, not started, busy).
    pub const STATE: u8 = 5;
    /// A brick or mount process failed to start or stop.
    pub const PROCESS: u8 = 6;
    /// `volume status`: some bricks are down.
    pub const DOWN: u8 = 7;
    /// `volume heal`: the heal ran and entries are still pending.
    pub const HEAL_PENDING: u8 = 8;
}

/// What went wrong, with what to do about it.
#[derive(thiserror::Error, Debug)]
pub enum CliError {
    #[error(transparent)]
    Volgen(#[from] VolgenError),
    #[error("no volume {name:?} in {}; `xlfs volume list` shows the volumes there", .state_dir.display())]
    NoVolume { name: String, state_dir: PathBuf },
    #[error("{0}")]
    State(String),
    #[error("{0}")]
    Process(String),
    #[error("{0}")]
    Rejected(String),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Volgen(e) if e.is_rejection() => code::REJECTED,
            CliError::Volgen(VolgenError::Unavailable { .. }) => code::REJECTED,
            CliError::Volgen(_) => code::FAILURE,
            CliError::NoVolume { .. } => code::NO_VOLUME,
            CliError::State(_) => code::STATE,
            CliError::Process(_) => code::PROCESS,
            CliError::Rejected(_) => code::REJECTED,
            CliError::Io { .. } | CliError::Other(_) => code::FAILURE,
        }
    }

    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> CliError {
        let path = path.into();
        move |source| CliError::Io { path, source }
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;
