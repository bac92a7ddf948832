//! Generated bindings, one module per interface level.
//!
//! The structures common to both levels (`mqs_communicator`,
//! `mqs_pending_operation`, `mqs_target_type_sizes`, `mqs_image_callbacks`)
//! have the same layout in both modules; the callback tables
//! `mqs_basic_callbacks` and `mqs_process_callbacks` grow at level 3, and
//! `mqs_job_callbacks`, `mqs_process_location` exist only there.

/// MPI-1 interface: `MQS_INTERFACE_COMPATIBILITY == 2`.
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod mpi1 {
    include!(concat!(env!("OUT_DIR"), "/mpi1.rs"));

    /// The DLL entry points at this level: their types, a table for hosts.
    pub mod entry {
        use super::*;
        include!(concat!(env!("OUT_DIR"), "/entry_mpi1.rs"));
    }
}

/// MPI-2 interface (`FOR_MPI2`): `MQS_INTERFACE_COMPATIBILITY == 3`.
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod mpi2 {
    include!(concat!(env!("OUT_DIR"), "/mpi2.rs"));

    /// The DLL entry points at this level: their types, tables for hosts.
    pub mod entry {
        use super::*;
        include!(concat!(env!("OUT_DIR"), "/entry_mpi2.rs"));
    }
}

/// The function type inside bindgen's `Option<fn>` typedefs.
pub trait FnOf {
    type Fn: Copy;
}

impl<F: Copy> FnOf for Option<F> {
    type Fn = F;
}
