//! The entry points, with C linkage and the header's exact signatures.
//!
//! Each one only catches panics (nothing may unwind into the debugger),
//! converts pointers, calls [`crate::api`] and maps errors to codes. The
//! signatures are checked at compile time against the function types
//! `mqs-abi` generates from `include/mpi_interface.h` itself.

use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use mqs_abi::ReturnCode;

use crate::abi;
use crate::api;
use crate::callbacks;
use crate::errors::DllError;
use crate::messages;

/// Runs `f`, turning a panic into `DllError::Internal`.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(DllError::Internal.code())
}

fn code(r: Result<ReturnCode, DllError>) -> c_int {
    match r {
        Ok(rc) => rc.to_raw(),
        Err(e) => e.code(),
    }
}

fn unit(r: Result<(), DllError>) -> c_int {
    code(r.map(|()| ReturnCode::Ok))
}

/// Stores `text` (a static string or NULL) through a `char **` out-pointer.
///
/// # Safety
/// `out` must be NULL or valid for writing one pointer.
unsafe fn set_message(out: *mut *mut c_char, text: Option<&'static std::ffi::CStr>) {
    if out.is_null() || !out.is_aligned() {
        return;
    }
    let ptr = text.map_or(std::ptr::null_mut(), |t| t.as_ptr().cast_mut());
    // SAFETY: non-NULL and aligned; the caller passes a writable `char *`.
    // The string is static and never written by debuggers (ABI contract).
    unsafe { out.write(ptr) };
}

/// Answers `mqs_image_has_queues` or `mqs_process_has_queues`: `*message`
/// cleared, then, when `check` fails, set to its static printf format
/// (or NULL) with the failure's code returned.
///
/// # Safety
/// `message` must be NULL or valid for writing one pointer.
unsafe fn has_queues(
    message: *mut *mut c_char,
    check: impl FnOnce() -> Result<(), messages::Failure>,
) -> c_int {
    // SAFETY: the caller passes NULL or a writable `char *`.
    unsafe { set_message(message, None) };
    guard(|| match check() {
        Ok(()) => ReturnCode::Ok.to_raw(),
        Err(f) => {
            // SAFETY: as above.
            unsafe { set_message(message, f.message) };
            f.code.code()
        }
    })
}

/// Keeps the debugger's basic callback table.
///
/// # Safety
/// `cb` must be NULL or a table that stays valid while the DLL is loaded.
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_basic_callbacks(cb: *const abi::mqs_basic_callbacks) {
    let _ = catch_unwind(AssertUnwindSafe(|| callbacks::set_basic_callbacks(cb)));
}

/// Our name and version, and the MPI detected (a static string).
///
/// # Safety
/// None; `unsafe` only for the C interface's uniformity.
#[no_mangle]
pub unsafe extern "C" fn mqs_version_string() -> *mut c_char {
    catch_unwind(messages::version_string)
        .unwrap_or(c"mqs message-queue DLL")
        .as_ptr()
        .cast_mut()
}

/// The interface level: 2, or 3 for the MPI-2 build.
///
/// # Safety
/// None; `unsafe` only for the C interface's uniformity.
#[no_mangle]
pub unsafe extern "C" fn mqs_version_compatibility() -> c_int {
    crate::COMPATIBILITY
}

/// `sizeof(mqs_taddr_t)` in the DLL.
///
/// # Safety
/// None; `unsafe` only for the C interface's uniformity.
#[no_mangle]
pub unsafe extern "C" fn mqs_dll_taddr_width() -> c_int {
    std::mem::size_of::<abi::mqs_taddr_t>() as c_int
}

/// Text for one of our codes (a static string).
///
/// # Safety
/// None; `unsafe` only for the C interface's uniformity.
#[no_mangle]
pub unsafe extern "C" fn mqs_dll_error_string(code: c_int) -> *mut c_char {
    catch_unwind(|| messages::error_string(code))
        .unwrap_or(c"mqs DLL: unknown error code")
        .as_ptr()
        .cast_mut()
}

/// Attaches our state to an image.
///
/// # Safety
/// `image` is the debugger's handle; `icb` a table valid while the DLL is
/// loaded.
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_image(
    image: *mut abi::mqs_image,
    icb: *const abi::mqs_image_callbacks,
) -> c_int {
    guard(|| unit(api::setup_image(image, icb)))
}

/// Whether the image can show queues; on failure `*message` is a static
/// printf format with one `%s` (or NULL).
///
/// # Safety
/// `image` is the debugger's handle; `message` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn mqs_image_has_queues(
    image: *mut abi::mqs_image,
    message: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller passes NULL or a writable `char *`.
    unsafe { has_queues(message, || api::image_has_queues(image)) }
}

/// Frees our image state.
///
/// # Safety
/// `info` is what `mqs_setup_image` attached, destroyed once.
#[no_mangle]
pub unsafe extern "C" fn mqs_destroy_image_info(info: *mut abi::mqs_image_info) {
    let _ = catch_unwind(AssertUnwindSafe(|| api::destroy_image_info(info)));
}

/// Attaches our state to a process.
///
/// # Safety
/// `process` is the debugger's handle; `pcb` a table valid while the DLL is
/// loaded.
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_process(
    process: *mut abi::mqs_process,
    pcb: *const abi::mqs_process_callbacks,
) -> c_int {
    guard(|| unit(api::setup_process(process, pcb)))
}

/// Whether this process can show queues; `*msg` as for images.
///
/// # Safety
/// `process` is the debugger's handle; `msg` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn mqs_process_has_queues(
    process: *mut abi::mqs_process,
    msg: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller passes NULL or a writable `char *`.
    unsafe { has_queues(msg, || api::process_has_queues(process)) }
}

/// Frees our process state.
///
/// # Safety
/// `info` is what `mqs_setup_process` attached, destroyed once.
#[no_mangle]
pub unsafe extern "C" fn mqs_destroy_process_info(info: *mut abi::mqs_process_info) {
    let _ = catch_unwind(AssertUnwindSafe(|| api::destroy_process_info(info)));
}

/// Brings the communicator list up to date.
///
/// # Safety
/// `process` is the debugger's handle.
#[no_mangle]
pub unsafe extern "C" fn mqs_update_communicator_list(process: *mut abi::mqs_process) -> c_int {
    guard(|| unit(api::update_communicator_list(process)))
}

/// Starts iterating over communicators.
///
/// # Safety
/// `process` is the debugger's handle.
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_communicator_iterator(process: *mut abi::mqs_process) -> c_int {
    guard(|| code(api::setup_communicator_iterator(process)))
}

// The model's writers take the MPI-1 structures; the MPI-2 ones are the
// same C structs (the header defines them once).
type Mpi1Comm = mqs_abi::ffi::mpi1::mqs_communicator;
type Mpi1Op = mqs_abi::ffi::mpi1::mqs_pending_operation;
const _: () = {
    assert!(std::mem::size_of::<abi::mqs_communicator>() == std::mem::size_of::<Mpi1Comm>());
    assert!(std::mem::align_of::<abi::mqs_communicator>() == std::mem::align_of::<Mpi1Comm>());
    assert!(std::mem::size_of::<abi::mqs_pending_operation>() == std::mem::size_of::<Mpi1Op>());
    assert!(std::mem::align_of::<abi::mqs_pending_operation>() == std::mem::align_of::<Mpi1Op>());
};

/// Describes the current communicator.
///
/// # Safety
/// `process` is the debugger's handle; `comm` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn mqs_get_communicator(
    process: *mut abi::mqs_process,
    comm: *mut abi::mqs_communicator,
) -> c_int {
    let out = comm.cast::<Mpi1Comm>();
    if out.is_null() || !out.is_aligned() {
        return DllError::NullArgument.code();
    }
    guard(|| match api::get_communicator(process) {
        Ok(c) => {
            // SAFETY: non-NULL, aligned, and the debugger's writable
            // mqs_communicator (same layout at both levels, checked above).
            c.write_raw(unsafe { &mut *out });
            ReturnCode::Ok.to_raw()
        }
        Err(e) => e.code(),
    })
}

/// The global ranks of the current communicator's members.
///
/// # Safety
/// `process` is the debugger's handle; `group_members` NULL or an array of
/// as many ints as the size `mqs_get_communicator` reported.
#[no_mangle]
pub unsafe extern "C" fn mqs_get_comm_group(
    process: *mut abi::mqs_process,
    group_members: *mut c_int,
) -> c_int {
    if group_members.is_null() || !group_members.is_aligned() {
        return DllError::NullArgument.code();
    }
    guard(|| match api::get_comm_group(process) {
        Ok(ranks) => {
            // SAFETY: the debugger allocated `size` ints, and `ranks` has
            // exactly the size we reported for this communicator.
            let out = unsafe { std::slice::from_raw_parts_mut(group_members, ranks.len()) };
            out.copy_from_slice(&ranks);
            ReturnCode::Ok.to_raw()
        }
        Err(e) => e.code(),
    })
}

/// The current communicator's Cartesian grid (an mqs extension; the
/// header says what it writes).
///
/// # Safety
/// `process` is the debugger's handle; `dims` and `periods` NULL or arrays
/// of `max_dims` ints; `ndims` NULL or an int.
#[no_mangle]
pub unsafe extern "C" fn mqs_get_comm_cartesian(
    process: *mut abi::mqs_process,
    max_dims: c_int,
    ndims: *mut c_int,
    dims: *mut c_int,
    periods: *mut c_int,
) -> c_int {
    let Ok(max) = usize::try_from(max_dims) else {
        return DllError::NullArgument.code();
    };
    if [ndims, dims, periods]
        .iter()
        .any(|p| p.is_null() || !p.is_aligned())
    {
        return DllError::NullArgument.code();
    }
    guard(|| match api::get_comm_cartesian(process) {
        Ok(Some(cart)) => {
            let n = cart.dims.len();
            // SAFETY: non-NULL and aligned, checked above: the debugger's int.
            unsafe { *ndims = c_int::try_from(n).unwrap_or(c_int::MAX) };
            if n <= max {
                // SAFETY: the debugger allocated `max_dims` ints in each,
                // and `n` is at most that.
                let (d, p) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(dims, n),
                        std::slice::from_raw_parts_mut(periods, n),
                    )
                };
                for (slot, v) in d.iter_mut().zip(&cart.dims) {
                    *slot = c_int::try_from(*v).unwrap_or(-1);
                }
                for (slot, v) in p.iter_mut().zip(&cart.periods) {
                    *slot = c_int::from(*v);
                }
            }
            ReturnCode::Ok.to_raw()
        }
        Ok(None) => ReturnCode::NoInformation.to_raw(),
        Err(e) => e.code(),
    })
}

/// Steps to the next communicator.
///
/// # Safety
/// `process` is the debugger's handle.
#[no_mangle]
pub unsafe extern "C" fn mqs_next_communicator(process: *mut abi::mqs_process) -> c_int {
    guard(|| code(api::next_communicator(process)))
}

/// Starts iterating over one queue of the current communicator.
///
/// # Safety
/// `process` is the debugger's handle.
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_operation_iterator(
    process: *mut abi::mqs_process,
    op: c_int,
) -> c_int {
    guard(|| code(api::setup_operation_iterator(process, op)))
}

/// The next operation of that queue.
///
/// # Safety
/// `process` is the debugger's handle; `op` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn mqs_next_operation(
    process: *mut abi::mqs_process,
    op: *mut abi::mqs_pending_operation,
) -> c_int {
    let out = op.cast::<Mpi1Op>();
    if out.is_null() || !out.is_aligned() {
        return DllError::NullArgument.code();
    }
    guard(|| match api::next_operation(process) {
        Ok(Some(o)) => {
            // SAFETY: non-NULL, aligned, the debugger's writable
            // mqs_pending_operation (same layout at both levels).
            o.write_raw(unsafe { &mut *out });
            ReturnCode::Ok.to_raw()
        }
        Ok(None) => ReturnCode::EndOfList.to_raw(),
        Err(e) => e.code(),
    })
}

/// Attaches our state to a job (MPI-2).
///
/// # Safety
/// `job` is the debugger's handle; `jcb` a table valid while the DLL is
/// loaded.
#[cfg(feature = "mpi2")]
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_job(
    job: *mut abi::mqs_job,
    jcb: *const abi::mqs_job_callbacks,
) -> c_int {
    guard(|| unit(api::setup_job(job, jcb)))
}

/// Frees our job state (MPI-2).
///
/// # Safety
/// `info` is what `mqs_setup_job` attached, destroyed once.
#[cfg(feature = "mpi2")]
#[no_mangle]
pub unsafe extern "C" fn mqs_destroy_job_info(info: *mut abi::mqs_job_info) -> c_int {
    guard(|| unit(api::destroy_job_info(info)))
}

/// Records the identity the debugger gave a process (MPI-2).
///
/// # Safety
/// `process` is the debugger's handle.
#[cfg(feature = "mpi2")]
#[no_mangle]
pub unsafe extern "C" fn mqs_set_process_identity(
    process: *mut abi::mqs_process,
    identity: c_int,
) -> c_int {
    guard(|| unit(api::set_process_identity(process, identity)))
}

/// Starts iterating over processes the MPI created or connected to (MPI-2).
///
/// # Safety
/// `process` is the debugger's handle.
#[cfg(feature = "mpi2")]
#[no_mangle]
pub unsafe extern "C" fn mqs_setup_new_process_iterator(process: *mut abi::mqs_process) -> c_int {
    guard(|| code(api::setup_new_process_iterator(process)))
}

/// The next such process (MPI-2).
///
/// # Safety
/// `process` is the debugger's handle; `loc` NULL or writable.
#[cfg(feature = "mpi2")]
#[no_mangle]
pub unsafe extern "C" fn mqs_next_new_process(
    process: *mut abi::mqs_process,
    loc: *mut abi::mqs_process_location,
) -> c_int {
    if loc.is_null() || !loc.is_aligned() {
        return DllError::NullArgument.code();
    }
    guard(|| match api::next_new_process(process) {
        Ok(Some(l)) => {
            // SAFETY: non-NULL, aligned, the debugger's writable location.
            l.write_raw(unsafe { &mut *loc });
            ReturnCode::Ok.to_raw()
        }
        Ok(None) => ReturnCode::EndOfList.to_raw(),
        Err(e) => e.code(),
    })
}

/// The function to break on to learn about new processes (MPI-2).
///
/// # Safety
/// `process` is the debugger's handle; `buf` NULL or `buflen` writable bytes.
#[cfg(feature = "mpi2")]
#[no_mangle]
pub unsafe extern "C" fn mqs_spawn_breakpoint_name(
    process: *mut abi::mqs_process,
    buf: *mut c_char,
    buflen: c_int,
) -> c_int {
    let Ok(len) = usize::try_from(buflen) else {
        return DllError::BufferTooSmall.code();
    };
    if buf.is_null() || len == 0 {
        return DllError::NullArgument.code();
    }
    guard(|| {
        // SAFETY: the debugger gives `buflen` writable bytes at `buf`.
        let out = unsafe { std::slice::from_raw_parts_mut(buf, len) };
        out[0] = 0;
        match api::spawn_breakpoint_name(process) {
            Ok(name) if name.len() < len => {
                mqs_abi::encode_c_chars(&name, out);
                ReturnCode::Ok.to_raw()
            }
            Ok(_) => DllError::BufferTooSmall.code(),
            Err(e) => e.code(),
        }
    })
}

// Every export has exactly the type the header declares (the list and the
// types come from mqs-abi, generated from include/mpi_interface.h).
#[cfg(not(feature = "mpi2"))]
mqs_abi::check_exports_mpi1!();
#[cfg(feature = "mpi2")]
mqs_abi::check_exports_mpi2!();
