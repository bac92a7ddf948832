//! MPI-2 identities by process name, for every backend: the debugger
//! numbers every process of a job (`mqs_set_process_identity`), the job
//! keeps which name each number has, and global ranks of any group's
//! members are then those numbers.

use std::collections::HashMap;

/// A process's name in its MPI: its job and its number there (Open MPI's
/// jobid and vpid; MPICH, which has no job ids, names its own job's
/// processes by world rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcName {
    pub jobid: u32,
    pub vpid: u32,
}

/// Identities the debugger gave processes (MPI-2), by process name.
pub type NameMap = HashMap<ProcName, i64>;

/// The identity of a process name: the one the debugger gave it, else
/// inferred from another process of the same job, since debuggers number
/// a job's processes contiguously in vpid order (COMM_WORLD first, then
/// each spawned or connected job).
pub fn identity_of(names: &NameMap, name: ProcName) -> Option<i64> {
    if let Some(&id) = names.get(&name) {
        return Some(id);
    }
    names
        .iter()
        .filter(|(n, _)| n.jobid == name.jobid)
        .min_by_key(|(n, _)| **n)
        .map(|(n, &id)| id - i64::from(n.vpid) + i64::from(name.vpid))
        .filter(|&id| id >= 0)
}

/// The identities a communicator list was built with, in one order, so
/// that a list built with others is told apart.
pub type Sorted = Vec<(ProcName, i64)>;

pub fn sorted(names: &NameMap) -> Sorted {
    let mut v: Vec<(ProcName, i64)> = names.iter().map(|(k, v)| (*k, *v)).collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_given_or_inferred_within_a_job() {
        let mut names = NameMap::new();
        names.insert(ProcName { jobid: 7, vpid: 0 }, 4);
        names.insert(ProcName { jobid: 9, vpid: 1 }, 1);
        assert_eq!(identity_of(&names, ProcName { jobid: 7, vpid: 0 }), Some(4));
        assert_eq!(identity_of(&names, ProcName { jobid: 7, vpid: 2 }), Some(6));
        assert_eq!(identity_of(&names, ProcName { jobid: 9, vpid: 0 }), Some(0));
        assert_eq!(identity_of(&names, ProcName { jobid: 8, vpid: 0 }), None);
    }
}
