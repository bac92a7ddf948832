//! Job acquisition: from a pid, a core file, a snapshot, a launch command or
//! a host list to the processes of a job, each dumped through the core's
//! DLL driver into the owned model.
//!
//! - finding a job's processes: [`mpir`] (a starter's `MPIR_proctable`, the
//!   tool-daemon extension's variables), [`mpi2dd`] (the MPI-2 debugger
//!   interface's directories), [`pmix`] (Open MPI 5's `prterun`), and
//!   [`members`] (the processes of a job, spawned ones included, and their
//!   identities), [`slurm`] (Slurm jobs and steps, and the overlapping step
//!   collectors run in);
//! - what each process needs before a DLL reads it: [`locate`] (the DLL it
//!   names, and whether to trust it), [`typepack`] (type packs: made,
//!   checked, guarded at run time), [`debuginfod`] (debug files fetched by
//!   build-id);
//! - [`inspect`]: one dump from any source (prepare each process, choose
//!   its source, run the DLL session over the job, let the processes go);
//! - [`snapshot`]: what a dump read, saved and replayed;
//! - [`collect`]: ranks on other hosts, read by collectors there;
//! - [`launch`]: MPIR launch mode (`mqs-dump launch`).

pub mod collect;
pub mod debuginfod;
pub mod error;
pub mod hosts;
pub mod inspect;
pub mod launch;
pub mod locate;
pub mod members;
pub mod mpi2dd;
pub mod mpir;
pub mod pmix;
pub mod slurm;
pub mod snapshot;
pub mod typepack;

pub use error::{Error, MissingTypes, PackRefusal, Result, SlurmRefusal};
