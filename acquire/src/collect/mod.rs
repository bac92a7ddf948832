//! Collectors: reading the ranks of a job that run on other hosts.
//!
//! ptrace reaches only processes of this machine (and a starter's table
//! names node-local pids), so a rank on another host is read by a
//! *collector* there: this same program, run as `mqs-dump __collector`,
//! which dumps the ranks of its own host with the usual pipeline
//! ([`inspect::dump_share`]) and streams the owned model ([`mqs_core::model`])
//! back over TCP, never raw memory. The front end ([`Front`], plugged into
//! [`inspect::dump_with`] as its [`Elsewhere`]) merges those dumps with the
//! ranks it read itself into one job, rank by rank.
//!
//! Collectors are started by the job's own starter through the MPIR
//! tool-daemon launch extension ([`start::through_starter`]), or by a
//! command template the user gives ([`start::Template`]). Each is
//! authenticated by a one-time token passed in its arguments
//! ([`protocol::Token`]); a wrong token is refused and logged. All hosts'
//! ranks are stopped before any is read (a barrier: every collector reports
//! `Stopped`, then the front end says `Go`), so the job is seen at one
//! moment. Every wait is bounded: ranks whose collector never calls back, or
//! stops answering, are reported with the reason and the rest is shown.

mod collector;
mod front;
pub mod protocol;
pub mod start;

use crate::inspect::{self, Elsewhere, Options, Progress};
use crate::Result;
use mqs_core::model::JobDump;

pub use collector::{run as run_collector, CollectorArgs};
pub use front::{CollectOptions, Front};
pub use start::COLLECTOR_COMMAND;

/// Dumps `pid` as [`inspect::dump`] does, with the ranks on other hosts
/// (every rank, with [`CollectOptions::all_hosts`]) read by collectors.
pub fn dump(
    pid: i32,
    options: &Options,
    collect: &CollectOptions,
    progress: Progress<'_>,
) -> Result<JobDump> {
    let mut front = Front::new(options, collect.clone());
    inspect::dump_with(pid, options, progress, &mut front)
}

/// [`inspect::dump_pids`] (several processes named, stopped together),
/// with each named starter's ranks on other hosts (all of them, with
/// [`CollectOptions::all_hosts`]) read by collectors, a front end per
/// starter.
pub fn dump_pids(
    pids: &[i32],
    options: &Options,
    collect: &CollectOptions,
    progress: Progress<'_>,
) -> Result<JobDump> {
    inspect::dump_pids_with(pids, options, progress, &mut || {
        Some(Box::new(Front::new(options, collect.clone())) as Box<dyn Elsewhere>)
    })
}
