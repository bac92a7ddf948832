//! Helpers for the end-to-end tests: find the real MPIs that `scripts/setup-mpis`
//! built, compile the C fixtures in `tests/fixtures/` with them, and run a
//! fixture as a real MPI job that hangs in a known state until it is torn down.
//!
//! A test that needs an MPI fails (never skips) when that MPI is missing, with a
//! message that says how to build it.

mod artifacts;
pub mod contents;
pub mod debian13;
mod error;
mod job;
mod limit;
mod mpi;
mod nodes;
mod procfs;
#[cfg(feature = "scale")]
pub mod scale;
mod shared_dir;
mod slurm;

pub use artifacts::{core_example, dll_beside_test_binary, mqs_dump_binary, our_dll};
pub use error::{Error, NotReady, Result};
pub use job::{
    launcher_command, pml_ucx_env, Job, LaunchOptions, JOB_ENV, MPICH_UCX_ENV, PML_UCX_ENV,
};
pub use limit::{within, DUMP_LIMIT};
pub use mpi::{
    build_fixture, fixture_source, fixtures_dir, pypi_env, target_dir, workspace_root, Family, Mpi,
};
pub use nodes::Nodes;
pub use procfs::{
    descendants, namespace_processes, parent_pid, process_alive, process_cmdline,
    processes_with_env, record, ProcessRecord,
};
pub use shared_dir::shared_dir;
pub use slurm::{Slurm, SLURM_CPUS, SLURM_NODES};
