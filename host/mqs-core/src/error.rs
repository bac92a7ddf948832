//! The core's error type, and the exit codes of every mqs tool. Each variant
//! is a category a user can act on; the crates above wrap it in their own
//! error enums, and `mqs-dump` turns each into one line with the fix and a
//! distinct exit code.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no process with pid {pid}")]
    NoSuchProcess { pid: i32 },

    #[error("permission denied for pid {pid}: {reason}")]
    PermissionDenied { pid: i32, reason: PermissionReason },

    #[error("process {pid} exited while it was being read")]
    ProcessGone { pid: i32 },

    /// A read of target memory failed or came back short.
    #[error("cannot read {len} bytes at {addr:#x} in pid {pid}: {detail}")]
    Read {
        pid: i32,
        addr: u64,
        len: usize,
        detail: String,
    },

    #[error("ptrace {op} on thread {tid} failed: {errno}")]
    Ptrace {
        op: &'static str,
        tid: i32,
        errno: nix::errno::Errno,
    },

    /// A thread that would not stop (stuck in the kernel, say): the process
    /// is released untouched.
    #[error(
        "thread {tid} of pid {pid} did not stop within {seconds} s (state {state}); \
         try again, or read it without stopping (--no-stop)"
    )]
    StopTimeout {
        pid: i32,
        tid: i32,
        seconds: u64,
        state: String,
    },

    /// An ELF or DWARF file that could not be parsed.
    #[error("{}: {detail}", path.display())]
    ObjectFile { path: PathBuf, detail: String },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("message-queue DLL {}: {detail}", path.display())]
    DllMissing { path: PathBuf, detail: String },

    #[error("message-queue DLL {}: not loadable: {detail}", path.display())]
    DllLoad { path: PathBuf, detail: String },

    #[error("message-queue DLL {}: incompatible: {detail}", path.display())]
    DllIncompatible { path: PathBuf, detail: String },

    /// A DLL someone other than root or the user could have written.
    #[error("message-queue DLL {}: untrusted: {detail}", path.display())]
    DllUntrusted { path: PathBuf, detail: String },

    /// The DLL says the MPI lacks what it needs to read the queues.
    #[error("{detail}")]
    NoDebugInfo { detail: String },

    /// The DLL returned an error code where the host needed success.
    #[error("the DLL failed in {call}: {detail}")]
    Dll { call: &'static str, detail: String },

    /// A program to run under mqs-dump could not be started or traced.
    #[error("launch: {0}")]
    Launch(String),

    /// A core file or snapshot that cannot be read as one.
    #[error("{}: {detail}", path.display())]
    BadInput { path: PathBuf, detail: String },
}

/// Why the kernel refused us access to a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionReason {
    /// The process belongs to another user and we are not root.
    NotRoot {
        target_uid: u32,
    },
    /// Yama's ptrace_scope setting forbids the attach.
    PtraceScope(u32),
    /// We are root in name but lack CAP_SYS_PTRACE (a container, say).
    NoCapSysPtrace,
    /// Another debugger already traces the process.
    AlreadyTraced {
        tracer_pid: i32,
        tracer_name: String,
    },
    Other(String),
}

impl fmt::Display for PermissionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRoot { target_uid } => write!(
                f,
                "it belongs to uid {target_uid}; run as that user or as root (sudo)"
            ),
            Self::PtraceScope(level) => write!(
                f,
                "Yama ptrace_scope is {level}; run as root, or set it to 0 with \
                 'sysctl kernel.yama.ptrace_scope=0'"
            ),
            Self::NoCapSysPtrace => f.write_str(
                "CAP_SYS_PTRACE is missing; add it (e.g. docker run --cap-add=SYS_PTRACE)",
            ),
            Self::AlreadyTraced {
                tracer_pid,
                tracer_name,
            } => write!(
                f,
                "it is already traced by pid {tracer_pid} ({tracer_name}); stop it in that \
                 debugger (mqs-dump then reads it as the debugger holds it), detach that \
                 debugger, or read it as it runs with --no-stop"
            ),
            Self::Other(detail) => f.write_str(detail),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit codes of the tools, one per category a user or script acts on.
pub mod exit_code {
    pub const OTHER: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const NO_SUCH_PROCESS: i32 = 3;
    pub const PERMISSION_DENIED: i32 = 4;
    pub const NOT_MPI: i32 = 5;
    pub const NO_DEBUG_INFO: i32 = 6;
    pub const DLL_MISSING: i32 = 7;
    pub const DLL_NOT_LOADABLE: i32 = 8;
    pub const DLL_INCOMPATIBLE: i32 = 9;
    pub const DLL_UNTRUSTED: i32 = 10;
    pub const PROCESS_GONE: i32 = 11;
    /// Given by `--deadlock` when it finds a cycle of waiting ranks.
    pub const DEADLOCK: i32 = 12;
    pub const BAD_INPUT: i32 = 13;
    // `cvars` (20 on, clear of the dump's codes).
    /// The library is not an MPI library mqs can load.
    pub const NOT_MPI_LIBRARY: i32 = 20;
    /// The MPI library has no usable MPI_T.
    pub const NO_MPI_T: i32 = 21;
    /// The helper that loads the library crashed or hung.
    pub const HELPER_FAILED: i32 = 22;
    /// `--set`: a value was rejected.
    pub const CVAR_REJECTED: i32 = 23;
    /// `--check`: the library deviates from the standard.
    pub const NOT_CONFORMANT: i32 = 24;
    /// Ranks on other hosts could not be read: no collector started there
    /// or called back in time.
    pub const COLLECT: i32 = 14;
    /// A call into the message-queue DLL passed mqs-dump's limit
    /// (`--dll-timeout`): the DLL is stuck.
    pub const DLL_HUNG: i32 = 15;
    /// A PMIx launcher could not be asked for its job.
    pub const PMIX: i32 = 16;
    /// Given by `--deadlock` and `watch` when no deadlock was found among
    /// the ranks that could be judged but some could not: not "no
    /// deadlock".
    pub const CANNOT_TELL: i32 = 17;
    /// `--slurm`: Slurm knows no such job, or the job no such step.
    pub const SLURM_NO_JOB: i32 = 18;
    /// `--slurm`: the job is not running (pending, suspended, or ended).
    pub const SLURM_NOT_RUNNING: i32 = 19;
    /// Slurm's commands (`srun`, `scontrol`) are not on PATH where mqs-dump
    /// runs (past `cvars`' codes: the dump's own ran out below 20).
    pub const NO_SLURM: i32 = 25;
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        use exit_code::*;
        match self {
            Self::NoSuchProcess { .. } => NO_SUCH_PROCESS,
            Self::PermissionDenied { .. } => PERMISSION_DENIED,
            Self::ProcessGone { .. } => PROCESS_GONE,
            Self::NoDebugInfo { .. } => NO_DEBUG_INFO,
            Self::DllMissing { .. } => DLL_MISSING,
            Self::DllLoad { .. } => DLL_NOT_LOADABLE,
            Self::DllIncompatible { .. } => DLL_INCOMPATIBLE,
            Self::DllUntrusted { .. } => DLL_UNTRUSTED,
            Self::BadInput { .. } => BAD_INPUT,
            Self::Read { .. }
            | Self::Launch(_)
            | Self::Ptrace { .. }
            | Self::StopTimeout { .. }
            | Self::ObjectFile { .. }
            | Self::Io { .. }
            | Self::Dll { .. } => OTHER,
        }
    }
}
