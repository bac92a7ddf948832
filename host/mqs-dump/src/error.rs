//! What can go wrong in any command, as one type: each crate's error carried
//! whole (each knows its exit code), and the command line's own mistakes.

use std::path::PathBuf;

use mqs_core::exit_code;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] mqs_core::Error),
    #[error(transparent)]
    Acquire(#[from] mqs_acquire::Error),
    #[error(transparent)]
    Cvars(#[from] mqs_cvars::Error),
    /// Options that do not fit together, or a value that is not one.
    #[error("{0}")]
    Usage(String),
    /// A file the user named that cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A core file or snapshot that cannot be read as one.
    #[error("{}: {detail}", path.display())]
    BadInput { path: PathBuf, detail: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Core(e) => e.exit_code(),
            Self::Acquire(e) => e.exit_code(),
            Self::Cvars(e) => e.exit_code(),
            Self::Usage(_) => exit_code::USAGE,
            Self::Io { .. } => exit_code::OTHER,
            Self::BadInput { .. } => exit_code::BAD_INPUT,
        }
    }

    /// The core's error at the bottom of this one, if that is what it is.
    pub fn core(&self) -> Option<&mqs_core::Error> {
        match self {
            Self::Core(e) => Some(e),
            Self::Acquire(e) => e.core(),
            Self::Cvars(mqs_cvars::Error::Core(e)) => Some(e),
            Self::Cvars(mqs_cvars::Error::Acquire(e)) => e.core(),
            _ => None,
        }
    }

    /// Acquisition's error at the bottom of this one, if that is what it is.
    pub fn acquire(&self) -> Option<&mqs_acquire::Error> {
        match self {
            Self::Acquire(e) | Self::Cvars(mqs_cvars::Error::Acquire(e)) => Some(e),
            _ => None,
        }
    }
}
