//! Ranks inside collective calls, from their stacks: which collective each
//! rank is in, and the members of its communicator that are not in it
//! (the mismatched-collective hang).

use super::ranks::RankSet;
use crate::global::{Job, Rank};

/// The blocking collectives of MPI, by the name of their entry point.
const COLLECTIVES: [&str; 27] = [
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Alltoallv",
    "MPI_Alltoallw",
    "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
    "MPI_Scan",
    "MPI_Exscan",
    "MPI_Comm_split",
    "MPI_Comm_split_type",
    "MPI_Comm_dup",
    "MPI_Comm_create",
    "MPI_Comm_free",
    "MPI_Win_fence",
    "MPI_Win_create",
    "MPI_File_open",
    "MPI_Finalize",
    "MPI_Init",
];

/// The words of the collectives in the internal names Open MPI
/// (`ompi_coll_base_barrier_intra_*`, `mca_coll_*_allreduce_*`) and MPICH
/// (`MPIR_Barrier_impl`, `MPIR_Allreduce_intra_*`) use below the entry
/// point, longest first so that `allreduce` is not taken for `reduce`.
const INTERNAL: [(&str, &str); 13] = [
    ("reduce_scatter_block", "MPI_Reduce_scatter_block"),
    ("reduce_scatter", "MPI_Reduce_scatter"),
    ("allgatherv", "MPI_Allgatherv"),
    ("allgather", "MPI_Allgather"),
    ("allreduce", "MPI_Allreduce"),
    ("alltoallv", "MPI_Alltoallv"),
    ("alltoall", "MPI_Alltoall"),
    ("barrier", "MPI_Barrier"),
    ("scatter", "MPI_Scatter"),
    ("gather", "MPI_Gather"),
    ("reduce", "MPI_Reduce"),
    ("bcast", "MPI_Bcast"),
    ("exscan", "MPI_Exscan"),
];

/// The collective a rank's main thread is in, by its entry point, else by
/// the MPI's internal names.
pub fn collective_of(rank: &Rank<'_>) -> Option<String> {
    if let Some(entry) = &rank.entry {
        return COLLECTIVES.contains(&entry.as_str()).then(|| entry.clone());
    }
    let main = rank.main?;
    main.call_path()
        .filter(|f| mqs_core::model::is_mpi_function(f))
        .find_map(|f| {
            let lower = f.to_ascii_lowercase();
            INTERNAL
                .iter()
                .find(|(word, _)| lower.contains(word))
                .map(|(_, name)| (*name).to_owned())
        })
}

/// Where a rank stands, in words: `in MPI_Recv`, `not inside MPI (in
/// main > compute)`, `stack unknown`.
pub fn whereabouts(rank: &Rank<'_>) -> String {
    match (&rank.entry, rank.inside_mpi, rank.main) {
        (Some(entry), _, _) => format!("in {entry}"),
        (None, Some(true), _) => "inside MPI".into(),
        (None, Some(false), Some(main)) => {
            let path: Vec<&str> = main.call_path().collect();
            let shown = path.iter().rev().take(3).rev().copied().collect::<Vec<_>>();
            format!("not inside MPI (in {})", shown.join(" > "))
        }
        _ => "stack unknown".into(),
    }
}

/// Ranks in one collective, and the ranks that should be and are not.
#[derive(Debug, Clone)]
pub struct Collective {
    pub name: String,
    pub ranks: RankSet,
    /// The communicator (index into `Job::comms`), read from the frames'
    /// `comm` arguments.
    pub comm: Option<usize>,
    /// The communicator taken for it when its own is unknown (the
    /// MPI has no debug info for the call's arguments): MPI_COMM_WORLD.
    pub assumed: Option<usize>,
    /// Members of that communicator not in this collective.
    pub missing: RankSet,
}

/// Groups the ranks by the collective they are in and its communicator
/// (from the frames' arguments where debug info has them); for each, the
/// members of that communicator (MPI_COMM_WORLD, assumed, when unknown)
/// that are elsewhere.
pub fn collectives(job: &Job<'_>) -> Vec<Collective> {
    let mut groups: Vec<(String, Option<usize>, RankSet)> = Vec::new();
    for rank in &job.ranks {
        let Some(name) = collective_of(rank) else {
            continue;
        };
        let comm = rank.comm_arg.and_then(|c| job.frame_comm(rank.rank, &c));
        match groups.iter_mut().find(|(n, c, _)| *n == name && *c == comm) {
            Some((_, _, set)) => {
                set.insert(rank.rank);
            }
            None => groups.push((name, comm, std::iter::once(rank.rank).collect())),
        }
    }
    let world = job.comms.iter().position(|c| c.name == "MPI_COMM_WORLD");
    groups
        .into_iter()
        .map(|(name, comm, ranks)| {
            let assumed = if comm.is_some() { None } else { world };
            let expected = match comm.or(assumed) {
                Some(c) => job.comms[c].global_members(),
                None => job.all_ranks(),
            };
            let missing = expected.iter().filter(|r| !ranks.contains(*r)).collect();
            Collective {
                name,
                ranks,
                comm,
                assumed,
                missing,
            }
        })
        .collect()
}
