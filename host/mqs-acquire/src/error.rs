//! Acquisition's errors: finding a job's processes (MPIR, MPI2DD, PMIx),
//! reading ranks on other hosts, type packs and the DLL a process names;
//! what goes wrong below (reading a process, its symbols, the DLL) is the
//! core's [`mqs_core::Error`], carried whole.

use std::fmt;
use std::path::PathBuf;

use mqs_core::exit_code;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a process, its symbols or driving the DLL failed.
    #[error(transparent)]
    Core(#[from] mqs_core::Error),

    /// A PMIx launcher (Open MPI 5's prterun) that did not give its job's
    /// process table.
    #[error("pid {pid} is not an MPI process and did not answer as a PMIx launcher: {detail}")]
    Pmix { pid: i32, detail: String },

    /// The process has no `MPIR_dll_name` (and no --dll was given).
    #[error("pid {pid} is not an MPI process: {detail}")]
    NotMpi { pid: i32, detail: String },

    /// A type pack that does not read the running process right.
    #[error("{0}")]
    TypePackRefused(Box<PackRefusal>),

    /// The MPI library has no type information anywhere mqs looked.
    #[error("{0}")]
    MissingTypes(Box<MissingTypes>),

    /// A rank of the job runs on another host, out of reach of ptrace.
    #[error("rank {rank} runs on host '{host}' (pid {pid}): only local processes can be read")]
    Remote { rank: usize, host: String, pid: i32 },

    /// An MPI library built without message-queue debugging support.
    #[error("pid {pid}: {detail}")]
    NoQueueSupport { pid: i32, detail: String },

    /// The MPI says it keeps no message queues for debuggers.
    #[error(
        "pid {pid}: its MPI says it does not implement message-queue debugging \
         (MPI2DD_MPIFLAG_IGNORE_QUEUE): no DLL can show its queues"
    )]
    QueuesNotImplemented { pid: i32 },

    /// A process a job's tables name that cannot be read.
    #[error("pid {pid}: {detail}")]
    Unreachable { pid: i32, detail: String },

    /// A rank the starter listed that ended before it was read: the job
    /// is ending (`watch` takes it so).
    #[error("pid {pid}: rank {rank} has exited (no process with pid {pid} any more)")]
    RankExited { pid: i32, rank: usize },

    /// Ranks on other hosts could not be read through collectors there: none
    /// could be started, or none called back in time.
    #[error("{0}")]
    Collect(String),

    /// What a collector on another host reported for one of its ranks; the
    /// exit code is the one that error gave there.
    #[error("on host '{host}': {message}")]
    OnHost {
        host: String,
        message: String,
        code: i32,
    },

    /// Options that do not fit together.
    #[error("{0}")]
    Usage(String),

    /// `--slurm`: a Slurm job or step that cannot be read, and why.
    #[error("{message}")]
    Slurm { why: SlurmRefusal, message: String },
}

/// Why a Slurm job or step cannot be read; each is acted on differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmRefusal {
    /// Slurm knows no such job, or the job no such step.
    NoSuchJob,
    /// The job is pending, suspended or has ended.
    NotRunning,
    /// Another user's job.
    NotYours,
    /// Slurm's commands (`srun`, `scontrol`) are not here.
    NoSlurm,
    /// The job runs, but no MPI process of it was found on its nodes.
    NoMpi,
    /// Slurm did not answer, or answered what we cannot read.
    Unanswered,
}

impl Error {
    pub(crate) fn slurm(why: SlurmRefusal, message: impl Into<String>) -> Self {
        Self::Slurm {
            why,
            message: message.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn exit_code(&self) -> i32 {
        use exit_code::*;
        match self {
            Self::Core(e) => e.exit_code(),
            Self::NotMpi { .. } => NOT_MPI,
            Self::QueuesNotImplemented { .. }
            | Self::TypePackRefused(_)
            | Self::MissingTypes(_)
            | Self::NoQueueSupport { .. } => NO_DEBUG_INFO,
            Self::Usage(_) => USAGE,
            Self::Collect(_) => COLLECT,
            Self::Pmix { .. } => PMIX,
            Self::Slurm { why, .. } => match why {
                SlurmRefusal::NoSuchJob => SLURM_NO_JOB,
                SlurmRefusal::NotRunning => SLURM_NOT_RUNNING,
                SlurmRefusal::NotYours => PERMISSION_DENIED,
                SlurmRefusal::NoSlurm => NO_SLURM,
                SlurmRefusal::NoMpi => NOT_MPI,
                SlurmRefusal::Unanswered => OTHER,
            },
            // Codes outside the table are not believed.
            Self::OnHost { code, .. } if (1..=COLLECT).contains(code) => *code,
            Self::OnHost { .. } => OTHER,
            Self::Remote { .. } | Self::Unreachable { .. } => OTHER,
            Self::RankExited { .. } => NO_SUCH_PROCESS,
        }
    }

    /// Whether this says that a process's queues cannot be read (no debug
    /// information or type pack, no DLL that loads, one not trusted), not
    /// that the process itself cannot be read: its stacks still can.
    pub fn queues_unreadable(&self) -> bool {
        use exit_code::*;
        matches!(
            self.exit_code(),
            NO_DEBUG_INFO | DLL_MISSING | DLL_NOT_LOADABLE | DLL_INCOMPATIBLE | DLL_UNTRUSTED
        ) && !matches!(self, Self::OnHost { .. } | Self::Remote { .. })
    }

    /// The core's error, if this is one.
    pub fn core(&self) -> Option<&mqs_core::Error> {
        match self {
            Self::Core(e) => Some(e),
            _ => None,
        }
    }
}

/// A type pack the runtime invariants refused.
#[derive(Debug)]
pub struct PackRefusal {
    pub pack: PathBuf,
    pub library: PathBuf,
    pub build_id: String,
    pub detail: String,
}

impl fmt::Display for PackRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "type pack {} for {} (build-id {}) refused: {}; it does not describe the running \
             library: remove it, or make it again from the library's debug file \
             (mqs-dump typepack extract)",
            self.pack.display(),
            self.library.display(),
            self.build_id,
            self.detail
        )
    }
}

/// An MPI library without DWARF, pack or debuginfod answer.
#[derive(Debug)]
pub struct MissingTypes {
    pub library: PathBuf,
    pub build_id: String,
    /// What was looked at.
    pub tried: String,
    /// What the DLL said.
    pub detail: String,
}

impl fmt::Display for MissingTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Without a build-id, neither a pack nor debuginfod can name it
        // (both are keyed by it): only debug information of its own helps.
        if self.build_id == "none" {
            return write!(
                f,
                "{}: {} has no debug information here ({}), and no build-id, so no type pack or \
                 debuginfod server can stand for it: only a build of it with -g (or with its \
                 debugger support) shows its queues",
                self.detail,
                self.library.display(),
                self.tried
            );
        }
        write!(
            f,
            "{}: {} (build-id {}) has no debug information here ({}); fix it one of three ways: \
             install its debug file (Debian: its -dbgsym package; or --debug-dir DIR), add a type \
             pack for build-id {} (--typepack DIR; make one with mqs-dump typepack extract where \
             its debug file is), or set DEBUGINFOD_URLS to a debuginfod server that has it \
             (without --offline)",
            self.detail,
            self.library.display(),
            self.build_id,
            self.tried,
            self.build_id
        )
    }
}
