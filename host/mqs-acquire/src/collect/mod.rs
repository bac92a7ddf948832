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
//! tool-daemon launch extension ([`start::through_starter`]), as a step of
//! the Slurm job the starter runs in ([`start::through_slurm`]: srun,
//! hydra, prterun in an allocation), with the remote shell PRRTE's
//! `prterun` reaches its nodes with ([`agent`]), or by a command template
//! the user gives ([`start::Template`]). [`dump_slurm`] needs no starter: one
//! collector per node of a Slurm job finds the job's MPI processes there. Each is
//! authenticated by a one-time token passed in its arguments
//! ([`protocol::Token`]); a wrong token is refused and logged. All hosts'
//! ranks are stopped before any is read (a barrier: every collector reports
//! `Stopped`, then the front end says `Go`), so the job is seen at one
//! moment. Every wait is bounded ([`Limits`], all made from the one
//! `--timeout`): ranks whose collector never calls back, or stops
//! answering, are reported with the reason and the rest is shown.
//!
//! Harnesses that exercise all this without a job (the scale harness in
//! `mqs-tests`) start collectors with a template alone
//! ([`Front::start_with_launcher`]) and have them send dumps they make
//! ([`serve`]).

mod agent;
mod collector;
mod front;
pub mod limits;
pub mod protocol;
pub mod start;
pub mod states;
pub mod tree;

use std::collections::{BTreeMap, HashMap};

use crate::inspect::{self, Elsewhere, Options, Progress};
use crate::slurm::{self, StepSpec};
use crate::{Error, Result};
use mqs_core::model::{JobDump, Section, SCHEMA_VERSION};

pub use collector::{run as run_collector, serve, CollectorArgs, Dumps};
pub use front::{CollectOptions, Front, DEFAULT_FANOUT};
pub use limits::Limits;
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

/// Dumps the MPI processes of a running Slurm job (or of one step of it),
/// wherever they run: a collector on every node of the job, started as a
/// step of the job, finds them there as the node's slurmd lists them and
/// dumps them; all are stopped together. Numbered as [`number_found`] says.
pub fn dump_slurm(spec: &StepSpec, options: &Options, collect: &CollectOptions) -> Result<JobDump> {
    let tools = slurm::Tools::find()?;
    let target = slurm::resolve(&tools, spec)?;
    let mut front = Front::new(options, collect.clone());
    front.discover(&target, &tools);
    let groups = front.found_groups();
    let mut job = JobDump {
        schema_version: SCHEMA_VERSION,
        launcher: None,
        processes: Vec::new(),
        failures: Vec::new(),
    };
    let mut first_error = None;
    for result in front.finish() {
        match result {
            Ok(process) => job.processes.push(process),
            Err((failure, error)) => {
                first_error.get_or_insert(error);
                job.failures.push(failure);
            }
        }
    }
    number_found(&mut job, &groups);
    if job.processes.is_empty() {
        return Err(first_error.unwrap_or_else(|| {
            Error::slurm(
                crate::error::SlurmRefusal::NoMpi,
                format!(
                    "Slurm job {} runs no MPI processes on its nodes ({}): none of the processes \
                 its slurmds list has an MPI rank in its environment or an MPI library mapped",
                    spec.text(),
                    target.nodes.join(", ")
                ),
            )
        }));
    }
    Ok(job)
}

/// Numbers what collectors found, as for core files: by the rank each
/// process's environment gives, else by its MPI_COMM_WORLD rank as its DLL
/// reads it. Processes of different MPI jobs (`groups`, by host and pid)
/// are numbered one job after the other, and the nodes whose processes
/// are unknown after all of them; then the job is in rank order.
pub fn number_found(job: &mut JobDump, groups: &HashMap<(String, i32), String>) {
    // Jobs are told apart by each process's pid.
    job.expand();
    for p in &mut job.processes {
        if p.global_rank >= 0 {
            continue;
        }
        if let Section::Ok { value } = &p.communicators {
            if let Some(world) = value.list.iter().find(|c| c.name == "MPI_COMM_WORLD") {
                p.global_rank = i32::try_from(world.local_rank).unwrap_or(-1);
            }
        }
    }
    let group_of = |host: &Option<String>, pid: i32| {
        groups
            .get(&(host.clone().unwrap_or_default(), pid))
            .cloned()
            .unwrap_or_default()
    };
    // Jobs in the order their names sort (numbers as numbers).
    let mut order: BTreeMap<(Option<u64>, String), i32> = BTreeMap::new();
    for p in &job.processes {
        let group = group_of(&p.host, p.pid);
        let top = order.entry((group.parse().ok(), group)).or_insert(-1);
        *top = (*top).max(p.global_rank);
    }
    let mut offsets: HashMap<String, i32> = HashMap::new();
    let mut next = 0;
    for ((_, group), top) in order {
        offsets.insert(group, next);
        next += top + 1;
    }
    for p in &mut job.processes {
        if p.global_rank >= 0 {
            p.global_rank += offsets.get(&group_of(&p.host, p.pid)).copied().unwrap_or(0);
        }
    }
    let mut unknown = usize::try_from(next).unwrap_or(0);
    for f in &mut job.failures {
        if f.rank == front::UNKNOWN_RANK {
            f.rank = unknown;
            unknown += 1;
        }
    }
    job.processes
        .sort_by_key(|p| (p.global_rank < 0, p.global_rank));
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqs_core::model::{CommunicatorDump, CommunicatorList, ProcessDump, RankFailure};

    /// A process read on `host`: its rank from its environment
    /// (`global_rank`, -1 if none), its MPI_COMM_WORLD rank as its DLL
    /// reads it.
    fn process(host: &str, pid: i32, global_rank: i32, world_rank: i64) -> ProcessDump {
        let mut job: JobDump = serde_json::from_str(
            r#"{"schema_version":1,"launcher":null,"failures":[],"processes":[{"pid":0,
            "global_rank":0,"executable":"a","dll":{"path":"d","version":"v",
            "compatibility":2},"communicators":{"status":"ok","list":[]},
            "stats":{"fetches":0,"fetched_bytes":0,"syscalls":0,"elapsed_ms":0.0}}]}"#,
        )
        .unwrap();
        let mut p = job.processes.remove(0);
        p.pid = pid;
        p.host = Some(host.into());
        p.global_rank = global_rank;
        let empty = || Section::NotAvailable {
            reason: "test".into(),
        };
        p.communicators = Section::Ok {
            value: CommunicatorList {
                list: vec![CommunicatorDump {
                    unique_id: 0,
                    name: "MPI_COMM_WORLD".into(),
                    size: 4,
                    local_rank: world_rank,
                    group: None,
                    cartesian: None,
                    sends: empty(),
                    receives: empty(),
                    unexpected: empty(),
                }],
            },
        };
        p
    }

    /// Two MPI jobs in one Slurm job (steps 0 and 1, the second's one rank
    /// on nodeb), the same pids on two nodes, one node whose processes are
    /// unknown: ranks come from the
    /// environment or MPI_COMM_WORLD, the second job's after the first's,
    /// the unknown node's after all, and the job is in rank order.
    #[test]
    fn what_collectors_found_is_numbered_job_after_job() {
        let mut job = JobDump {
            schema_version: SCHEMA_VERSION,
            launcher: None,
            processes: vec![
                process("nodeb", 30, -1, 0),
                process("nodea", 18, 1, 1),
                process("nodea", 17, -1, 0),
                process("nodeb", 18, 3, 3),
                process("nodeb", 17, -1, 2),
            ],
            failures: vec![RankFailure {
                rank: front::UNKNOWN_RANK,
                pid: 0,
                host: "nodec".into(),
                message: "unknown".into(),
                exit_code: 14,
            }],
        };
        let groups: HashMap<(String, i32), String> = [
            (("nodea".to_string(), 17), "5.0".to_string()),
            (("nodea".to_string(), 18), "5.0".to_string()),
            (("nodeb".to_string(), 17), "5.0".to_string()),
            (("nodeb".to_string(), 18), "5.0".to_string()),
            (("nodeb".to_string(), 30), "5.1".to_string()),
        ]
        .into_iter()
        .collect();
        number_found(&mut job, &groups);
        let order: Vec<(String, i32, i32)> = job
            .processes
            .iter()
            .map(|p| (p.host.clone().unwrap_or_default(), p.pid, p.global_rank))
            .collect();
        assert_eq!(
            order,
            [
                ("nodea".to_string(), 17, 0),
                ("nodea".to_string(), 18, 1),
                ("nodeb".to_string(), 17, 2),
                ("nodeb".to_string(), 18, 3),
                ("nodeb".to_string(), 30, 4),
            ]
        );
        assert_eq!(job.failures[0].rank, 5);
    }
}
