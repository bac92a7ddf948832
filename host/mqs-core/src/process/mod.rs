//! The host's own sources of a process's memory and state, each a
//! [`Target`](crate::interface::Target): a live process ([`LiveProcess`],
//! ptrace and /proc, the only code that touches either), an ELF core file
//! ([`CoreFile`]) and a saved snapshot ([`SnapshotProcess`]).
//! [`PageCache`] wraps any of them for one stopped snapshot so that the
//! many small reads a message-queue DLL makes cost few system calls.
//! [`Tracer`] holds breakpoints in a process it started (MPIR launch mode).

mod cache;
mod core;
mod diagnose;
mod live;
mod maps;
mod procfs;
mod ptrace;
mod snapshot;
mod tracer;

pub use self::core::{CoreFile, CoreOptions};
pub use cache::{CacheStats, PageCache};
pub use live::{environment_of, LiveProcess, Mode, ProcessIdentity};
pub(crate) use maps::canonical;
pub use maps::in_process_root;
pub use ptrace::install_signal_cleanup;
pub use snapshot::{SnapshotPage, SnapshotProcess};
pub use tracer::{TraceEvent, Tracer};
