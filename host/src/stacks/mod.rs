//! Call stacks of a process's threads: unwound from each thread's
//! registers while the process is stopped ([`unwind`], through the same
//! [`Target`] as the dump, with the CFI of every mapped object), named
//! afterwards ([`symbolize`], from the symbol tables and DWARF lines), so
//! the process is stopped no longer than the walk over its stack memory.

mod arguments;
mod symbolize;
mod unwind;

pub use symbolize::symbolize;
pub use unwind::{unwind, RawStack, RawStacks};

/// Which frames are the MPI library's: the names of its entry points
/// (`MPI_`/`PMPI_`) and of the layers below them in Open MPI and MPICH.
/// A thread with such a frame is inside MPI.
pub fn is_mpi_function(name: &str) -> bool {
    const PREFIXES: [&str; 15] = [
        "MPI_", "PMPI_", "MPIX_", "PMPIX_", "MPIR_", "MPID_", "MPIDI_", "MPIDU_", "MPIC_", "MPII_",
        "MPIU_", "MPL_", "ompi_", "mca_", "opal_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The MPI entry point a thread is in: its outermost `MPI_`/`PMPI_`
/// frame, named without the profiling `P` (`MPI_Recv`).
pub fn mpi_entry<'a>(outermost_first: impl IntoIterator<Item = &'a str>) -> Option<String> {
    outermost_first.into_iter().find_map(|name| {
        let name = name.strip_prefix('P').unwrap_or(name);
        name.starts_with("MPI_").then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_frames_and_entries() {
        assert!(is_mpi_function("PMPI_Recv"));
        assert!(is_mpi_function("mca_pml_ob1_recv"));
        assert!(is_mpi_function("MPIR_Barrier_impl"));
        assert!(!is_mpi_function("main"));
        assert!(!is_mpi_function("poll"));
        assert_eq!(
            mpi_entry(["main", "PMPI_Recv", "mca_pml_ob1_recv"]),
            Some("MPI_Recv".into())
        );
        assert_eq!(
            mpi_entry(["main", "MPI_Barrier", "PMPI_Barrier"]),
            Some("MPI_Barrier".into())
        );
        assert_eq!(mpi_entry(["main", "usleep", "nanosleep"]), None);
    }
}
