//! The processes of a job and the identities the host gives them.
//!
//! An MPIR starter lists the ranks of MPI_COMM_WORLD. Processes started
//! later with MPI_Comm_spawn are not in that table (Open MPI 4.1's mpirun
//! keeps the first job's only), so they are found on this machine as the
//! starter's descendants that carry an MPI rank in their environment and
//! belong to another MPI job. Identities, which MPI-2 DLLs report as global
//! ranks: COMM_WORLD ranks first, then each spawned job in turn, its ranks in
//! order.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::hosts::local_host_name;
use crate::mpir::ProcDesc;
use mqs_core::interface::{Environment, Target};

/// Most descendants of a starter looked at.
const MAX_DESCENDANTS: usize = 1 << 16;

/// Environment variables that hold a process's rank in its own job.
const RANK_VARS: [&str; 3] = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"];
/// Environment variables that name the job a process belongs to.
const JOB_VARS: [&str; 2] = ["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"];
/// Environment variables that give the size of MPI_COMM_WORLD.
const SIZE_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"];

/// What a process's environment says about its place in an MPI job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MpiEnvironment {
    /// Rank in its own MPI_COMM_WORLD.
    pub rank: Option<i32>,
    /// The launcher's name for its job.
    pub job: Option<String>,
    /// The size of its MPI_COMM_WORLD.
    pub size: Option<i32>,
}

impl MpiEnvironment {
    /// What a process's environment says.
    pub fn of(env: &Environment) -> Self {
        Self {
            rank: RANK_VARS
                .iter()
                .find_map(|k| env.get(k).and_then(|v| v.parse().ok())),
            job: JOB_VARS
                .iter()
                .find_map(|k| env.get(k).filter(|v| !v.is_empty()).map(str::to_string)),
            size: SIZE_VARS
                .iter()
                .find_map(|k| env.get(k).and_then(|v| v.parse().ok())),
        }
    }
}

/// A process of the job, as the host will dump it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub pid: i32,
    pub host: String,
    /// Rank in its own MPI_COMM_WORLD.
    pub rank: usize,
    /// The host's number for it in the whole job.
    pub identity: i32,
    /// For a process spawned after the job started: its job's name.
    pub spawned_job: Option<String>,
    /// And who spawned it, where the tables say.
    #[serde(default)]
    pub spawned_by: Option<mqs_core::model::SpawnParent>,
}

impl Member {
    /// A process dumped on its own: a job of one, on this host.
    pub fn single(pid: i32, rank: i32) -> Self {
        Self {
            pid,
            host: String::new(),
            rank: usize::try_from(rank).unwrap_or(0),
            identity: rank,
            spawned_job: None,
            spawned_by: None,
        }
    }
}

/// A candidate process found below the starter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pid: i32,
    pub ppid: i32,
    pub env: MpiEnvironment,
}

/// The ranks a launcher that keeps no process table started on this host
/// (Debian's hydra `mpiexec`, through its proxy): its descendants that
/// carry an MPI rank in their environment, ordered by rank.
pub fn ranks_below(launcher: &dyn Target) -> Vec<i32> {
    outermost_ranks(&found_below_here(launcher))
}

/// The ranks of the job a launcher that keeps no process table started
/// that are not below it on this host: every rank its ranks' environment
/// counts in MPI_COMM_WORLD but none of them holds (they run on other
/// hosts, under the launcher's proxies there). Empty where the size is
/// not told.
pub fn ranks_elsewhere(launcher: &dyn Target) -> Vec<i32> {
    missing_ranks(&found_below_here(launcher))
}

fn missing_ranks(found: &[Found]) -> Vec<i32> {
    let outermost = outermost_ranks(found);
    let here: HashSet<i32> = found
        .iter()
        .filter(|f| outermost.contains(&f.pid))
        .filter_map(|f| f.env.rank)
        .collect();
    // The size every rank here agrees on, and no more than a job can have.
    let sizes: HashSet<i32> = found
        .iter()
        .filter(|f| outermost.contains(&f.pid))
        .filter_map(|f| f.env.size)
        .collect();
    let size = match sizes.into_iter().collect::<Vec<_>>()[..] {
        [size] if (1..=1 << 24).contains(&size) => size,
        _ => return Vec::new(),
    };
    (0..size).filter(|r| !here.contains(r)).collect()
}

/// The processes below `root` (at most [`MAX_DESCENDANTS`]), with what
/// their environment says.
fn found_below(root: &dyn Target) -> Vec<Found> {
    found(root, |_| true)
}

/// [`found_below`], less processes in another PID namespace: a launcher
/// that reaches other hosts through a remote shell that enters a container
/// or node has their processes below it too, but they are another host's.
fn found_below_here(root: &dyn Target) -> Vec<Found> {
    found(root, |r| r.same_pid_namespace)
}

fn found(root: &dyn Target, keep: impl Fn(&mqs_core::interface::Relative) -> bool) -> Vec<Found> {
    let relatives = root.descendants(MAX_DESCENDANTS).unwrap_or_default();
    relatives
        .iter()
        .filter(|r| keep(r))
        .map(|r| Found {
            pid: r.pid,
            ppid: r.ppid,
            env: MpiEnvironment::of(&r.environment),
        })
        .collect()
}

/// The pids of the processes with a rank whose parent has none, ordered by
/// rank: a rank's own children inherit its environment, rank included.
fn outermost_ranks(found: &[Found]) -> Vec<i32> {
    let ranked: HashSet<i32> = found
        .iter()
        .filter(|f| f.env.rank.is_some())
        .map(|f| f.pid)
        .collect();
    let mut ranks: Vec<(i32, i32)> = found
        .iter()
        .filter(|f| !ranked.contains(&f.ppid))
        .filter_map(|f| Some((f.env.rank?, f.pid)))
        .collect();
    ranks.sort_unstable();
    ranks.into_iter().map(|(_, pid)| pid).collect()
}

/// The job's members: the table's ranks, then the spawned processes found
/// below the starter, numbered as the module says.
pub fn members(starter: &dyn Target, table: &[ProcDesc]) -> Vec<Member> {
    let found = found_below(starter);
    let initial_jobs: HashSet<String> = table
        .iter()
        .filter(|e| e.pid > 0 && crate::hosts::is_local_host(&e.host))
        .filter_map(|e| found.iter().find(|f| f.pid == e.pid)?.env.job.clone())
        .collect();
    number(table, &found, &initial_jobs, &local_host_name())
}

/// The numbering itself, apart from how processes were found.
pub fn number(
    table: &[ProcDesc],
    found: &[Found],
    initial_jobs: &HashSet<String>,
    host: &str,
) -> Vec<Member> {
    let mut members: Vec<Member> = table
        .iter()
        .map(|e| Member {
            pid: e.pid,
            host: e.host.clone(),
            rank: e.rank,
            identity: i32::try_from(e.rank).unwrap_or(-1),
            spawned_job: None,
            spawned_by: None,
        })
        .collect();
    let known: HashSet<i32> = table.iter().map(|e| e.pid).collect();
    let candidates: HashSet<i32> = found.iter().map(|f| f.pid).collect();
    let mut spawned: Vec<(String, usize, i32)> = found
        .iter()
        .filter(|f| !known.contains(&f.pid))
        // A rank's own child (a helper it forked) inherits its environment:
        // only the process the launcher started counts.
        .filter(|f| !known.contains(&f.ppid) && !candidates.contains(&f.ppid))
        .filter_map(|f| {
            let job = f.env.job.clone()?;
            let rank = usize::try_from(f.env.rank?).ok()?;
            (!initial_jobs.contains(&job)).then_some((job, rank, f.pid))
        })
        .collect();
    // Jobs in the order the launcher numbered them (numeric names compare
    // as numbers), ranks in order within each.
    spawned.sort_by(|a, b| {
        let key = |s: &str| (s.parse::<u64>().ok(), s.to_string());
        key(&a.0).cmp(&key(&b.0)).then(a.1.cmp(&b.1))
    });
    spawned.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    let first = table.iter().map(|e| e.rank + 1).max().unwrap_or(0);
    for (i, (job, rank, pid)) in spawned.into_iter().enumerate() {
        members.push(Member {
            pid,
            host: host.to_string(),
            rank,
            identity: i32::try_from(first + i).unwrap_or(-1),
            spawned_job: Some(job),
            spawned_by: None,
        });
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(rank: usize, pid: i32) -> ProcDesc {
        ProcDesc {
            rank,
            host: "vm".into(),
            executable: "a".into(),
            pid,
        }
    }

    fn found(pid: i32, ppid: i32, job: &str, rank: i32) -> Found {
        Found {
            pid,
            ppid,
            env: MpiEnvironment {
                rank: Some(rank),
                job: Some(job.into()),
                size: None,
            },
        }
    }

    #[test]
    fn the_ranks_below_a_launcher_are_the_outermost_ones_in_rank_order() {
        // mpiexec 10 -> proxy 11 -> ranks 13 (rank 1) and 12 (rank 0); rank
        // 1 forked a helper 14 that inherited its environment; 15 is the
        // proxy's other child, no rank.
        let proxy = Found {
            pid: 11,
            ppid: 10,
            env: MpiEnvironment::default(),
        };
        let other = Found {
            pid: 15,
            ..proxy.clone()
        };
        let found = [
            proxy,
            found(13, 11, "", 1),
            found(12, 11, "", 0),
            found(14, 13, "", 1),
            Found { ppid: 11, ..other },
        ];
        assert_eq!(outermost_ranks(&found), [12, 13]);
        assert_eq!(outermost_ranks(&found[..1]), Vec::<i32>::new());
    }

    #[test]
    fn the_ranks_a_launcher_started_elsewhere_are_those_its_size_counts_and_none_here_holds() {
        // hydra's proxy 11 holds ranks 0 and 2 of 5 here (12, 13); rank 2's
        // helper 14 says rank 2 as well.
        let sized = |pid, ppid, rank, size| Found {
            env: MpiEnvironment {
                size,
                ..found(pid, ppid, "", rank).env
            },
            ..found(pid, ppid, "", rank)
        };
        let here = [
            sized(12, 11, 0, Some(5)),
            sized(13, 11, 2, Some(5)),
            sized(14, 13, 2, Some(5)),
        ];
        assert_eq!(missing_ranks(&here), [1, 3, 4]);
        // Every rank here: none elsewhere.
        let all = [sized(12, 11, 0, Some(2)), sized(13, 11, 1, Some(2))];
        assert_eq!(missing_ranks(&all), Vec::<i32>::new());
        // A size not told, or told two ways: nothing is claimed.
        let untold = [sized(12, 11, 0, None)];
        assert_eq!(missing_ranks(&untold), Vec::<i32>::new());
        let torn = [sized(12, 11, 0, Some(4)), sized(13, 11, 1, Some(8))];
        assert_eq!(missing_ranks(&torn), Vec::<i32>::new());
    }

    #[test]
    fn environment_names_rank_and_job() {
        let env = MpiEnvironment::of(&Environment::parse(
            b"A=1\0OMPI_COMM_WORLD_RANK=3\0PMIX_NAMESPACE=77\0OMPI_MCA_ess_base_jobid=12\0",
        ));
        assert_eq!(env.rank, Some(3));
        assert_eq!(env.job.as_deref(), Some("12"));
        assert_eq!(
            MpiEnvironment::of(&Environment::parse(b"PMI_RANK=x\0")),
            MpiEnvironment::default()
        );
    }

    #[test]
    fn spawned_jobs_follow_the_world_in_job_then_rank_order() {
        let table = [desc(0, 10), desc(1, 11)];
        let initial: HashSet<String> = ["100".to_string()].into();
        let found = [
            found(10, 9, "100", 0),
            found(11, 9, "100", 1),
            // Two spawned jobs; "1000" comes after "101" only as a number.
            found(31, 9, "1000", 0),
            found(21, 9, "101", 1),
            found(20, 9, "101", 0),
            // A helper rank 0 of the world forked: not a process of its own.
            found(40, 10, "100", 0),
            // A spawned rank's own child.
            found(41, 20, "101", 0),
            // Not MPI.
            Found {
                pid: 50,
                ppid: 9,
                env: MpiEnvironment::default(),
            },
        ];
        let members = number(&table, &found, &initial, "vm");
        let summary: Vec<(i32, usize, i32, Option<&str>)> = members
            .iter()
            .map(|m| (m.pid, m.rank, m.identity, m.spawned_job.as_deref()))
            .collect();
        assert_eq!(
            summary,
            [
                (10, 0, 0, None),
                (11, 1, 1, None),
                (20, 0, 2, Some("101")),
                (21, 1, 3, Some("101")),
                (31, 0, 4, Some("1000")),
            ]
        );
    }
}

/// Why a process a starter's table names cannot be dumped, before trying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// Another host: only a collector there can read it.
    Remote,
    /// pid 0 (or negative): the starter has not started it yet.
    NotStarted,
    /// The same pid as an earlier entry (this rank).
    Duplicate { of_rank: usize },
}

impl Unusable {
    pub fn describe(&self, member: &Member) -> String {
        match self {
            Unusable::Remote => format!(
                "rank {} runs on host '{}' (pid {}): only local processes can be read",
                member.rank, member.host, member.pid
            ),
            Unusable::NotStarted => format!(
                "rank {} has no process yet (pid {} in the starter's table): not started",
                member.rank, member.pid
            ),
            Unusable::Duplicate { of_rank } => format!(
                "rank {} has the pid {} of rank {of_rank} too: the starter's table is \
                 inconsistent, the process is dumped once, as rank {of_rank}",
                member.rank, member.pid
            ),
        }
    }
}

/// Sorts a job's members into those to dump and those that cannot be, with
/// the reason: other hosts (a starter may name this machine `localhost`,
/// an address of its loopback, or its own name, short or qualified), pids
/// not yet known, pids listed twice. Executable names in a table are not
/// relied on (launchers have listed relative paths): a process's own is
/// read from it.
pub fn screen(members: Vec<Member>) -> (Vec<Member>, Vec<(Member, Unusable)>) {
    let mut usable: Vec<Member> = Vec::new();
    let mut unusable = Vec::new();
    for m in members {
        let problem = if !crate::hosts::is_local_host(&m.host) {
            Some(Unusable::Remote)
        } else if m.pid <= 0 {
            Some(Unusable::NotStarted)
        } else {
            usable
                .iter()
                .find(|u| u.pid == m.pid)
                .map(|u| Unusable::Duplicate { of_rank: u.rank })
        };
        match problem {
            Some(p) => unusable.push((m, p)),
            None => usable.push(m),
        }
    }
    (usable, unusable)
}

#[cfg(test)]
mod screen_tests {
    use super::*;

    fn m(rank: usize, host: &str, pid: i32) -> Member {
        Member {
            pid,
            host: host.into(),
            rank,
            identity: rank as i32,
            spawned_job: None,
            spawned_by: None,
        }
    }

    #[test]
    fn a_table_with_every_known_defect() {
        let own = local_host_name();
        let table = vec![
            m(0, "localhost", 100),
            m(1, &own, 101),
            m(2, "127.0.0.1", 0),
            m(3, "localhost", 100),
            m(4, "node-elsewhere.example", 102),
            m(5, "", 103),
        ];
        let (usable, unusable) = screen(table);
        assert_eq!(usable.iter().map(|m| m.rank).collect::<Vec<_>>(), [0, 1, 5]);
        let problems: Vec<(usize, Unusable)> =
            unusable.into_iter().map(|(m, u)| (m.rank, u)).collect();
        assert_eq!(
            problems,
            [
                (2, Unusable::NotStarted),
                (3, Unusable::Duplicate { of_rank: 0 }),
                (4, Unusable::Remote),
            ]
        );
    }
}
