//! `mqs-dll`: a message-queue debugging DLL (the `mpi_interface.h` ABI) for
//! Open MPI 4.1 with the ob1 PML and for MPICH 4.0 (ch3; ch4 and the
//! device-independent queues of 4.1+ are read from their definitions, not
//! yet tested on live jobs), a drop-in replacement for Open MPI's
//! `libompi_dbg_msgq.so` and MPICH's `libtvmpich.so` that also shows
//! unexpected messages, posted receives in matching order, global ranks of
//! every group, lengths in bytes and datatypes, and never crashes or hangs
//! on corrupt memory. The MPI is recognised per image ([`backend`]).
//!
//! Two builds from one source: the default is the MPI-1 interface
//! (compatibility 2); the `mpi2` feature builds the MPI-2 interface
//! (compatibility 3, the `FOR_MPI2` entry points and larger callback tables).
//!
//! Layers, outside in:
//! - [`exports`]: the `extern "C"` entry points; they catch panics, convert
//!   pointers and map errors to codes, nothing else;
//! - [`api`]: the safe implementation of each entry point;
//! - [`callbacks`]: the only way to the debugger (and so to the target),
//!   plus the per-image/process/job state the debugger keeps for us;
//! - [`backend`]: which MPI an image runs, and the process state it gets;
//!   `job`: MPI-2 identities (the `mpi2` build);
//! - [`openmpi`] and [`mpich`]: what each MPI's data means, its types and
//!   offsets resolved once per image (`openmpi::layout`, `mpich::layout`);
//! - [`iteration`]: the iteration the interface asks of every backend,
//!   kept once (communicator list, current communicator, queue being
//!   taken), and the trait each backend answers it through
//!   ([`iteration::MpiBackend`]);
//! - [`names`] (MPI-2 identities by process name), [`types`] (type lookups
//!   and what was missing), [`walk`] (bounded walks), [`by_key`],
//!   [`cursor`], [`target`] (typed, bounded reads): what every backend
//!   uses, nothing MPI-specific.

#[cfg(not(feature = "mpi2"))]
pub(crate) use mqs_abi::ffi::mpi1 as abi;
#[cfg(feature = "mpi2")]
pub(crate) use mqs_abi::ffi::mpi2 as abi;

pub mod access;
pub mod api;
pub mod backend;
pub mod by_key;
pub mod callbacks;
pub mod cursor;
pub mod errors;
pub mod exports;
pub mod grid;
pub mod iteration;
pub mod messages;
#[cfg(feature = "mpi2")]
pub mod mpi2_job;
pub mod mpich;
pub mod names;
pub mod openmpi;
mod process;
pub mod target;
pub mod transit;
pub mod types;
pub mod ucx;
pub mod walk;

/// In-memory fakes of an image and a process, for this crate's unit tests
/// and, through the `testing` feature, its integration tests; never in the
/// DLL a debugger loads.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

/// The interface level this build implements.
pub const COMPATIBILITY: i32 = abi::MQS_INTERFACE_COMPATIBILITY as i32;
