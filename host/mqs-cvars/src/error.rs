//! MPI_T's errors: a library that is not an MPI one mqs can load, one
//! without a usable MPI_T, a helper that crashed or hung; reading a job's
//! processes fails with acquisition's and the core's errors, carried whole.

use std::path::PathBuf;

use mqs_core::exit_code;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a process or its symbols failed.
    #[error(transparent)]
    Core(#[from] mqs_core::Error),

    /// Finding a job's processes failed.
    #[error(transparent)]
    Acquire(#[from] mqs_acquire::Error),

    /// A library that is not an MPI library mqs can load (not loadable,
    /// no MPI symbols, an unknown ABI).
    #[error("{}: {detail}", path.display())]
    NotMpiLibrary { path: PathBuf, detail: String },

    /// An MPI library whose tool interface (MPI_T) is missing or unusable.
    #[error("{}: {detail}", path.display())]
    NoMpiT { path: PathBuf, detail: String },

    /// The subprocess that loads an MPI library crashed, exited early or
    /// hung.
    #[error("{}: the helper process that loads it {detail}", path.display())]
    CvarsHelper { path: PathBuf, detail: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn exit_code(&self) -> i32 {
        use exit_code::*;
        match self {
            Self::Core(e) => e.exit_code(),
            Self::Acquire(e) => e.exit_code(),
            Self::NotMpiLibrary { .. } => NOT_MPI_LIBRARY,
            Self::NoMpiT { .. } => NO_MPI_T,
            Self::CvarsHelper { .. } => HELPER_FAILED,
        }
    }
}
