//! The host's one error type. Each variant is a category a user can act on;
//! `mqs-dump` turns them into one line with the fix and a distinct exit code.

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

    /// A PMIx launcher (Open MPI 5's prterun) that did not give its job's
    /// process table.
    #[error("pid {pid} is not an MPI process and did not answer as a PMIx launcher: {detail}")]
    Pmix { pid: i32, detail: String },

    /// The process has no `MPIR_dll_name` (and no --dll was given).
    #[error("pid {pid} is not an MPI process: {detail}")]
    NotMpi { pid: i32, detail: String },

    #[error("message-queue DLL {}: {detail}", path.display())]
    DllMissing { path: PathBuf, detail: String },

    #[error("message-queue DLL {}: not loadable: {detail}", path.display())]
    DllLoad { path: PathBuf, detail: String },

    #[error("message-queue DLL {}: incompatible: {detail}", path.display())]
    DllIncompatible { path: PathBuf, detail: String },

    #[error("message-queue DLL {}: untrusted: {detail}", path.display())]
    DllUntrusted { path: PathBuf, detail: String },

    /// The DLL says the MPI lacks what it needs to read the queues.
    #[error("{detail}")]
    NoDebugInfo { detail: String },

    /// A type pack that does not read the running process right.
    #[error("{0}")]
    TypePackRefused(Box<PackRefusal>),

    /// The MPI library has no type information anywhere mqs looked.
    #[error("{0}")]
    MissingTypes(Box<MissingTypes>),

    /// The DLL returned an error code where the host needed success.
    #[error("the DLL failed in {call}: {detail}")]
    Dll { call: &'static str, detail: String },

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

    /// A program to run under mqs-dump could not be started or traced.
    #[error("launch: {0}")]
    Launch(String),

    /// A core file or snapshot that cannot be read as one.
    #[error("{}: {detail}", path.display())]
    BadInput { path: PathBuf, detail: String },
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

    #[error("{0}")]
    Usage(String),
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
                "it is already traced by pid {tracer_pid} ({tracer_name}); detach that debugger first"
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
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        use exit_code::*;
        match self {
            Self::NoSuchProcess { .. } => NO_SUCH_PROCESS,
            Self::PermissionDenied { .. } => PERMISSION_DENIED,
            Self::ProcessGone { .. } => PROCESS_GONE,
            Self::NotMpi { .. } => NOT_MPI,
            Self::NoDebugInfo { .. }
            | Self::QueuesNotImplemented { .. }
            | Self::TypePackRefused(_)
            | Self::MissingTypes(_)
            | Self::NoQueueSupport { .. } => NO_DEBUG_INFO,
            Self::DllMissing { .. } => DLL_MISSING,
            Self::DllLoad { .. } => DLL_NOT_LOADABLE,
            Self::DllIncompatible { .. } => DLL_INCOMPATIBLE,
            Self::DllUntrusted { .. } => DLL_UNTRUSTED,
            Self::NotMpiLibrary { .. } => NOT_MPI_LIBRARY,
            Self::NoMpiT { .. } => NO_MPI_T,
            Self::CvarsHelper { .. } => HELPER_FAILED,
            Self::Usage(_) => USAGE,
            Self::BadInput { .. } => BAD_INPUT,
            Self::Collect(_) => COLLECT,
            Self::Pmix { .. } => PMIX,
            // Codes outside the table are not believed.
            Self::OnHost { code, .. } if (1..=COLLECT).contains(code) => *code,
            Self::OnHost { .. } => OTHER,
            Self::Read { .. }
            | Self::Remote { .. }
            | Self::Unreachable { .. }
            | Self::Launch(_)
            | Self::Ptrace { .. }
            | Self::StopTimeout { .. }
            | Self::ObjectFile { .. }
            | Self::Io { .. }
            | Self::Dll { .. } => OTHER,
        }
    }
}
