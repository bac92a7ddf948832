//! What launch mode does besides running the job, and what it needs from
//! the analyses above it.

use std::path::PathBuf;
use std::time::Duration;

use mqs_core::model::JobDump;

use crate::collect::CollectOptions;
use crate::inspect;

/// What `mqs-dump launch` does besides running the job.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Dump the whole job once, this long after its processes were spawned.
    pub dump_after: Option<Duration>,
    /// Dump the job each time mqs-dump gets SIGUSR1.
    pub dump_on_signal: bool,
    /// Dump the job when the starter says it is aborting, before it is torn
    /// down.
    pub dump_on_abort: bool,
    /// Dumps as JSON, one document per line.
    pub json: bool,
    /// Snapshot the job this often and stop (exit 12) once a deadlock, or
    /// a wait chain ending outside MPI, is in two snapshots in a row.
    pub watch: Option<Duration>,
    /// With `watch`: report each new finding and go on until the job ends.
    pub keep_going: bool,
    /// Append dumps here instead of writing them to stderr.
    pub output: Option<PathBuf>,
    /// How ranks on other hosts (all, with `all_hosts`) are read.
    pub collect: CollectOptions,
    /// How to dump.
    pub dump: inspect::Options,
}

/// What launch mode shows of a dump and what `--watch` looks for. The
/// analyses live above acquisition (`mqs-analysis`): the caller gives them.
pub trait Analyst {
    /// A dump as text for the user (the job view).
    fn view(&self, job: &JobDump) -> String;
    /// A deadlock, or a wait chain ending outside MPI, found in both of two
    /// snapshots in a row (or ranks that could not be judged in both): in
    /// words, with the exit code it ends a watch with.
    fn persistent_finding(&self, before: &JobDump, now: &JobDump) -> Option<(String, i32)>;
}
