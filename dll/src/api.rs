//! The safe implementation of each entry point. Handles (`mqs_image *`,
//! `mqs_process *`, ...) are opaque here: they are only passed back to the
//! debugger through [`crate::callbacks`].

use mqs_abi::{Communicator, OpClass, PendingOperation, ReturnCode};

use crate::abi;
use crate::backend::{self, Failure, ImageState};
use crate::callbacks::{self, ImageCallbacks, ProcessCallbacks};
use crate::errors::DllError;
use crate::iteration::ProcessState;
use crate::names::NameMap;
use crate::process::{ensure_checked, image_of, with_process};

/// `mqs_setup_image`: attach fresh image state (or refresh the table of an
/// image set up before), with the MPI its symbols name.
pub fn setup_image(
    image: *mut abi::mqs_image,
    table: *const abi::mqs_image_callbacks,
) -> Result<(), DllError> {
    if image.is_null() || table.is_null() {
        return Err(DllError::NullArgument);
    }
    let mut fresh = ImageState::new(table);
    fresh.mpi = backend::recognise(&ImageCallbacks::new(image, table));
    // Set up again (a debugger re-attaching): replace, do not leak. The
    // debugger's info slot is only asked for if we wrote it.
    if callbacks::was_put_on(image.cast())
        && callbacks::with_image_state::<ImageState, _>(image, |_| ()).is_ok()
    {
        return callbacks::with_image_state::<ImageState, _>(image, |st| *st = fresh);
    }
    callbacks::put_image_state(image, fresh)
}

/// `mqs_image_has_queues`.
pub fn image_has_queues(image: *mut abi::mqs_image) -> Result<(), Failure> {
    let plain = Failure::plain;
    callbacks::with_image_state::<ImageState, _>(image, |st| {
        let ic = ImageCallbacks::new(image, st.table);
        st.check(&ic).map(|_| ())
    })
    .map_err(plain)?
}

/// `mqs_setup_process`.
pub fn setup_process(
    process: *mut abi::mqs_process,
    table: *const abi::mqs_process_callbacks,
) -> Result<(), DllError> {
    if process.is_null() || table.is_null() {
        return Err(DllError::NullArgument);
    }
    let pc = ProcessCallbacks::new(process, table);
    let (ic, image_backend) = image_of(&pc)?;
    let image_backend = image_backend.ok_or(DllError::ImageHasNoQueues)?;
    let fresh = image_backend.process(table, &ic, &pc)?;
    // Set up again (a debugger re-attaching): replace, do not leak. The
    // debugger's info slot is only asked for if we wrote it.
    if callbacks::was_put_on(process.cast())
        && callbacks::with_process_state::<ProcessState, _>(process, |_| ()).is_ok()
    {
        return callbacks::with_process_state::<ProcessState, _>(process, |st| *st = fresh);
    }
    callbacks::put_process_state(process, fresh)
}

/// `mqs_process_has_queues`.
pub fn process_has_queues(process: *mut abi::mqs_process) -> Result<(), Failure> {
    let plain = Failure::plain;
    with_process(process, |st, pc| {
        let (ic, _) = image_of(pc).map_err(plain)?;
        st.check(&ic, pc)
    })
    .map_err(plain)?
}

/// MPI-2 identities of the process's job, if any were set.
#[cfg(feature = "mpi2")]
fn names(pc: &ProcessCallbacks) -> Option<NameMap> {
    let job = pc.job()?;
    callbacks::with_job_state::<crate::mpi2_job::JobState, _>(job, |js| js.names.clone()).ok()
}

#[cfg(not(feature = "mpi2"))]
fn names(_pc: &ProcessCallbacks) -> Option<NameMap> {
    None
}

/// `mqs_update_communicator_list`.
pub fn update_communicator_list(process: *mut abi::mqs_process) -> Result<(), DllError> {
    with_process(process, |st, pc| {
        ensure_checked(st, pc)?;
        let names = names(pc);
        st.update_communicators(pc, names.as_ref())
    })?
}

/// `mqs_setup_communicator_iterator`.
pub fn setup_communicator_iterator(process: *mut abi::mqs_process) -> Result<ReturnCode, DllError> {
    with_process(process, |st, pc| {
        if !st.has_list() {
            // The debugger did not ask for an update first.
            ensure_checked(st, pc)?;
            let names = names(pc);
            st.update_communicators(pc, names.as_ref())?;
        }
        Ok(st.setup_communicators())
    })?
}

/// `mqs_get_communicator`.
pub fn get_communicator(process: *mut abi::mqs_process) -> Result<Communicator, DllError> {
    with_process(process, |st, _| st.current_comm())?
}

/// `mqs_get_comm_group`: the global ranks to write (as many as the size
/// `mqs_get_communicator` reported).
pub fn get_comm_group(process: *mut abi::mqs_process) -> Result<Vec<i32>, DllError> {
    with_process(process, |st, _| st.comm_group())?
}

/// `mqs_get_comm_cartesian`: the grid to write, None for
/// `mqs_no_information`.
pub fn get_comm_cartesian(
    process: *mut abi::mqs_process,
) -> Result<Option<mqs_abi::Cartesian>, DllError> {
    with_process(process, |st, _| st.comm_cartesian())?
}

/// `mqs_next_communicator`.
pub fn next_communicator(process: *mut abi::mqs_process) -> Result<ReturnCode, DllError> {
    with_process(process, |st, _| st.next_communicator())?
}

/// `mqs_setup_operation_iterator`.
pub fn setup_operation_iterator(
    process: *mut abi::mqs_process,
    op: i32,
) -> Result<ReturnCode, DllError> {
    let class = OpClass::from_raw(op).ok_or(DllError::BadOpClass)?;
    with_process(process, |st, pc| st.setup_operations(pc, class))?
}

/// `mqs_next_operation`: Some(op) to write, or None at the end.
pub fn next_operation(
    process: *mut abi::mqs_process,
) -> Result<Option<PendingOperation>, DllError> {
    with_process(process, |st, _| st.next_operation())?
}

/// `mqs_destroy_image_info`.
pub fn destroy_image_info(info: *mut abi::mqs_image_info) {
    callbacks::destroy_image_state::<ImageState>(info);
}

/// `mqs_destroy_process_info`.
pub fn destroy_process_info(info: *mut abi::mqs_process_info) {
    callbacks::destroy_process_state::<ProcessState>(info);
}

#[cfg(feature = "mpi2")]
pub use crate::mpi2_job::{
    destroy_job_info, next_new_process, set_process_identity, setup_job,
    setup_new_process_iterator, spawn_breakpoint_name,
};
