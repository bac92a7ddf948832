use std::io;
use std::path::PathBuf;

/// What can go wrong while preparing or running a fixture job.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The MPI is not installed where we look; the tests must fail, not skip.
    #[error(
        "{mpi} is not available: {reason}. Build it with scripts/setup-mpis \
         (or point {env_var} at an installed prefix)"
    )]
    MpiMissing {
        mpi: &'static str,
        env_var: &'static str,
        reason: String,
    },

    /// A distribution's MPI package is not installed.
    #[error("{mpi} is not available: {reason}. Install it with scripts/setup-mpis (it installs Debian's packages)")]
    StockMissing { mpi: &'static str, reason: String },

    /// A fixture does not exist in `tests/fixtures/`.
    #[error("no such fixture: {0} (looked for {0}.c in tests/fixtures)")]
    NoFixture(String),

    /// The MPI compiler wrapper failed on a fixture.
    #[error("compiling {source_file} with {mpicc} failed ({status}):\n{output}")]
    Build {
        source_file: PathBuf,
        mpicc: PathBuf,
        status: String,
        output: String,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    /// The job never printed READY for every rank (boxed: it is large).
    #[error("{0}")]
    NotReady(Box<NotReady>),

    /// A job expected to end by itself was still running.
    #[error("{fixture} was still running after {waited:?}")]
    StillRunning {
        fixture: String,
        waited: std::time::Duration,
    },

    /// Teardown left processes of the job alive.
    #[error("processes of the job survived teardown: {0:?}")]
    Survivors(Vec<u32>),

    /// The scale harness was asked something it cannot do.
    #[error("the scale harness: {0}")]
    Scale(String),
}

/// Why a job did not get ready, with what it printed. The job has been torn
/// down already; `pids` are the processes it had, for checking that.
#[derive(Debug, thiserror::Error)]
#[error(
    "{fixture} under {mpi} did not get ready: {reason}\n\
     --- stdout ---\n{stdout}--- stderr ---\n{stderr}--- end ---"
)]
pub struct NotReady {
    pub mpi: &'static str,
    pub fixture: String,
    pub reason: String,
    pub stdout: String,
    pub stderr: String,
    pub pids: Vec<u32>,
    /// The job's id (see `JOB_ENV`).
    pub job_id: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
