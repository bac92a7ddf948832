// The DLL entry points of `include/mpi_interface.h`: the one list of their
// names and of who must export them. `build.rs` includes this file too, to
// generate the typed tables (`ffi::mpi1::entry`, `ffi::mpi2::entry`) from
// the header's own declarations, so hosts resolve and DLLs are checked
// against the same list.

/// Whether a DLL must export an entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Every DLL.
    Required,
    /// May be absent (a host copes without it).
    Optional,
    /// Every MPI-2 (compatibility 3) DLL; declared only with `FOR_MPI2`.
    RequiredForMpi2,
    /// May be absent from an MPI-2 DLL; declared only with `FOR_MPI2`.
    OptionalForMpi2,
}

impl Need {
    /// Declared only in the MPI-2 interface.
    pub const fn mpi2_only(self) -> bool {
        matches!(self, Need::RequiredForMpi2 | Need::OptionalForMpi2)
    }

    /// Must be present at its level.
    pub const fn required(self) -> bool {
        matches!(self, Need::Required | Need::RequiredForMpi2)
    }
}

/// One entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryPoint {
    pub name: &'static str,
    pub need: Need,
}

const fn entry(name: &'static str, need: Need) -> EntryPoint {
    EntryPoint { name, need }
}

/// Every entry point, in the header's order.
pub const ENTRY_POINTS: &[EntryPoint] = &[
    entry("mqs_setup_basic_callbacks", Need::Required),
    entry("mqs_version_string", Need::Required),
    entry("mqs_version_compatibility", Need::Required),
    // Older DLLs lack it: their target addresses are the platform's long.
    entry("mqs_dll_taddr_width", Need::Optional),
    entry("mqs_dll_error_string", Need::Required),
    entry("mqs_setup_image", Need::Required),
    entry("mqs_image_has_queues", Need::Required),
    entry("mqs_destroy_image_info", Need::Required),
    entry("mqs_setup_process", Need::Required),
    entry("mqs_process_has_queues", Need::Required),
    entry("mqs_destroy_process_info", Need::Required),
    entry("mqs_update_communicator_list", Need::Required),
    entry("mqs_setup_communicator_iterator", Need::Required),
    entry("mqs_get_communicator", Need::Required),
    // MPICH's DLL does not export it.
    entry("mqs_get_comm_group", Need::Optional),
    // mqs's own extension (the header says what it writes).
    entry("mqs_get_comm_cartesian", Need::Optional),
    entry("mqs_next_communicator", Need::Required),
    entry("mqs_setup_operation_iterator", Need::Required),
    entry("mqs_next_operation", Need::Required),
    entry("mqs_setup_job", Need::RequiredForMpi2),
    entry("mqs_destroy_job_info", Need::RequiredForMpi2),
    entry("mqs_set_process_identity", Need::RequiredForMpi2),
    entry("mqs_setup_new_process_iterator", Need::OptionalForMpi2),
    entry("mqs_next_new_process", Need::OptionalForMpi2),
    // In the design note "MPI Message Queue Dumping" 1.06, in no shipped header.
    entry("mqs_spawn_breakpoint_name", Need::OptionalForMpi2),
];
