//! The callbacks the host offers a DLL: `extern "C"` trampolines that
//! resolve the handle, catch any panic, and call safe host code.
//!
//! The tables are statics: a DLL keeps the pointers for as long as it is
//! loaded (forever), and all per-process state is reached through handles.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::handles::{resolve, ImageHandle, JobHandle, ProcessHandle, TypeHandle};

/// The host's own error codes, private to this side of the interface.
pub mod codes {
    pub const BAD_HANDLE: i32 = 100;
    pub const BAD_ARGUMENT: i32 = 101;
    pub const NOT_FOUND: i32 = 102;
    pub const READ_FAILED: i32 = 103;
    pub const INTERNAL: i32 = 104;
}

const OK: c_int = 0;

fn error_text(code: c_int) -> &'static CStr {
    match code {
        0 => c"mqs_ok",
        1 => c"mqs_no_information",
        2 => c"mqs_end_of_list",
        codes::BAD_HANDLE => c"mqs host: unknown or stale handle passed to a callback",
        codes::BAD_ARGUMENT => c"mqs host: NULL or out-of-range argument",
        codes::NOT_FOUND => c"mqs host: no such symbol in the image",
        codes::READ_FAILED => c"mqs host: target memory could not be read",
        codes::INTERNAL => c"mqs host: internal error in a callback",
        _ => c"mqs host: unknown error code",
    }
}

/// Whether `dprints` output goes to stderr (mqs-dump --verbose).
static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_verbose(on: bool) {
    VERBOSE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// What starts each line of the DLL's own output shown with `--verbose`.
pub const VERBOSE_PREFIX: &str = "mqs-dll: ";

pub fn is_verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs a callback body, turning a panic into `fallback`: nothing may
/// unwind into the DLL's C frames.
fn guarded<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Reads a name the DLL passed; None for NULL.
///
/// # Safety
/// `name` must be NULL or point to a NUL-terminated string.
unsafe fn name_arg<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

// ---- The bodies, shared by both interface levels ---------------------------

fn malloc(size: usize) -> *mut c_void {
    // SAFETY: plain libc allocation; malloc(0) may legally return NULL, which
    // DLLs take as failure, so always ask for at least one byte.
    unsafe { libc::malloc(size.max(1)) }
}

unsafe fn free(ptr: *mut c_void) {
    // SAFETY: the DLL frees only what our malloc returned (or NULL).
    unsafe { libc::free(ptr) }
}

unsafe fn dprints(text: *const c_char) {
    if VERBOSE.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: the DLL passes a NUL-terminated string or NULL.
        if let Some(text) = unsafe { name_arg(text) } {
            eprintln!("{VERBOSE_PREFIX}{}", text.trim_end());
        }
    }
}

fn errorstring(code: c_int) -> *mut c_char {
    // The DLL only reads it; the interface's type just lacks the const.
    error_text(code).as_ptr().cast_mut()
}

fn put_image_info(image: *mut c_void, info: *mut c_void) {
    if let Some(image) = resolve::<ImageHandle>(image) {
        image.calls.count(|c| &mut c.info);
        image.info.set(info);
    }
}

fn get_image_info(image: *mut c_void) -> *mut c_void {
    resolve::<ImageHandle>(image).map_or(std::ptr::null_mut(), |i| {
        i.calls.count(|c| &mut c.info);
        i.info.get()
    })
}

fn put_process_info(process: *mut c_void, info: *mut c_void) {
    if let Some(process) = resolve::<ProcessHandle>(process) {
        process.calls.count(|c| &mut c.info);
        process.info.set(info);
    }
}

fn get_process_info(process: *mut c_void) -> *mut c_void {
    resolve::<ProcessHandle>(process).map_or(std::ptr::null_mut(), |p| {
        p.calls.count(|c| &mut c.info);
        p.info.get()
    })
}

fn put_job_info(job: *mut c_void, info: *mut c_void) {
    if let Some(job) = resolve::<JobHandle>(job) {
        job.info.set(info);
    }
}

fn get_job_info(job: *mut c_void) -> *mut c_void {
    resolve::<JobHandle>(job).map_or(std::ptr::null_mut(), |j| j.info.get())
}

unsafe fn get_type_sizes(process: *mut c_void, sizes: *mut c_int) {
    let Some(process) = resolve::<ProcessHandle>(process) else {
        return;
    };
    // The callback is in the image table, but takes the process.
    process.calls.count(|c| &mut c.get_type_sizes);
    if sizes.is_null() {
        return;
    }
    let long = process.pointer_size;
    // Exactly the five ints of mqs_target_type_sizes; DLLs with a longer
    // private copy must not rely on more.
    let values = [2, 4, long, 8, process.pointer_size];
    for (i, v) in values.into_iter().enumerate() {
        // SAFETY: the DLL passes a mqs_target_type_sizes, five ints.
        unsafe { sizes.add(i).write_unaligned(v) };
    }
}

unsafe fn find_symbol(
    image: *mut c_void,
    name: *const c_char,
    addr: *mut u64,
    function: bool,
) -> c_int {
    let Some(image) = resolve::<ImageHandle>(image) else {
        return codes::BAD_HANDLE;
    };
    image.calls.count(|c| {
        if function {
            &mut c.find_function
        } else {
            &mut c.find_symbol
        }
    });
    // SAFETY: the DLL passes a C string or NULL.
    let Some(name) = (unsafe { name_arg(name) }) else {
        return codes::BAD_ARGUMENT;
    };
    let found = if function {
        image.symbols.find_function(name)
    } else {
        image.symbols.find_symbol(name)
    };
    match found {
        Some(value) => {
            // A NULL out-pointer only asks whether the name exists.
            if !addr.is_null() {
                // SAFETY: non-NULL out-pointer to a mqs_taddr_t.
                unsafe { addr.write_unaligned(value) };
            }
            OK
        }
        None => {
            let what = if function { "function" } else { "symbol" };
            image.note_missing(format!("{what} '{name}'"));
            codes::NOT_FOUND
        }
    }
}

unsafe fn find_type(image: *mut c_void, name: *const c_char) -> *mut c_void {
    let Some(image) = resolve::<ImageHandle>(image) else {
        return std::ptr::null_mut();
    };
    image.calls.count(|c| &mut c.find_type);
    // SAFETY: the DLL passes a C string or NULL.
    match unsafe { name_arg(name) } {
        Some(name) => image.find_type(name).cast_mut(),
        None => std::ptr::null_mut(),
    }
}

unsafe fn field_offset(ty: *mut c_void, field: *const c_char) -> c_int {
    let Some(ty) = resolve::<TypeHandle>(ty) else {
        return -1;
    };
    let image = resolve::<ImageHandle>(ty.image);
    if let Some(image) = image {
        image.calls.count(|c| &mut c.field_offset);
    }
    // SAFETY: the DLL passes a C string or NULL.
    let Some(field) = (unsafe { name_arg(field) }) else {
        return -1;
    };
    match image {
        Some(image) => image.symbols.field_offset(&ty.layout, field),
        None => ty.layout.field_offset(field),
    }
    .and_then(|off| c_int::try_from(off).ok())
    .unwrap_or(-1)
}

fn sizeof(ty: *mut c_void) -> c_int {
    let Some(ty) = resolve::<TypeHandle>(ty) else {
        return -1;
    };
    let image = resolve::<ImageHandle>(ty.image);
    if let Some(image) = image {
        image.calls.count(|c| &mut c.sizeof);
    }
    match image {
        Some(image) => image.symbols.type_size(&ty.layout),
        None => ty.layout.size,
    }
    .and_then(|s| c_int::try_from(s).ok())
    .unwrap_or(-1)
}

fn get_global_rank(process: *mut c_void) -> c_int {
    resolve::<ProcessHandle>(process).map_or(-1, |p| {
        p.calls.count(|c| &mut c.get_global_rank);
        p.global_rank
    })
}

fn get_image(process: *mut c_void) -> *mut c_void {
    resolve::<ProcessHandle>(process).map_or(std::ptr::null_mut(), |p| {
        p.calls.count(|c| &mut c.get_image);
        p.image.cast_mut().cast()
    })
}

unsafe fn fetch_data(process: *mut c_void, addr: u64, size: c_int, buf: *mut u8) -> c_int {
    let Some(process) = resolve::<ProcessHandle>(process) else {
        return codes::BAD_HANDLE;
    };
    process.calls.count(|c| &mut c.fetch);
    let Ok(len) = usize::try_from(size) else {
        return codes::BAD_ARGUMENT;
    };
    process.fetches.set(process.fetches.get() + 1);
    if len == 0 {
        return OK;
    }
    if addr != 0 {
        let pieces = (len as u64).div_ceil(crate::model::FETCH_PIECE);
        process.calls.add(|c| &mut c.fetch_pieces, pieces);
    }
    if buf.is_null() {
        return codes::BAD_ARGUMENT;
    }
    // SAFETY: the DLL gives a buffer of `size` bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, len) };
    match process.target.read(addr, out) {
        Ok(()) => {
            process
                .fetched_bytes
                .set(process.fetched_bytes.get() + len as u64);
            OK
        }
        Err(e) => {
            process.note_unreadable(addr, len, &e);
            codes::READ_FAILED
        }
    }
}

unsafe fn target_to_host(process: *mut c_void, input: *const u8, output: *mut u8, size: c_int) {
    let Some(handle) = resolve::<ProcessHandle>(process) else {
        return;
    };
    handle.calls.count(|c| &mut c.target_to_host);
    if input.is_null() || output.is_null() {
        return;
    }
    let Ok(len) = usize::try_from(size) else {
        return;
    };
    // Live targets are this machine's processes: same byte order, so the
    // conversion is a copy. (A core file of another architecture would swap.)
    // SAFETY: both buffers hold `size` bytes per the interface; copy() allows overlap.
    unsafe { std::ptr::copy(input, output, len) };
}

fn get_process_job(process: *mut c_void) -> *mut c_void {
    resolve::<ProcessHandle>(process).map_or(std::ptr::null_mut(), |p| {
        p.calls.count(|c| &mut c.job);
        p.job.cast_mut().cast()
    })
}

/// The header types this callback's argument as `mqs_job*`, but what it
/// asks for is a process's identity; accept a process handle (what DLLs
/// pass) and answer MQS_INVALID_PROCESS for anything else.
fn get_process_identity(handle: *mut c_void) -> c_int {
    resolve::<ProcessHandle>(handle).map_or(-1, |p| {
        p.calls.count(|c| &mut c.job);
        p.identity.get()
    })
}

fn get_process(job: *mut c_void, identity: c_int) -> *mut c_void {
    let Some(job) = resolve::<JobHandle>(job) else {
        return std::ptr::null_mut();
    };
    let Ok(index) = usize::try_from(identity) else {
        return std::ptr::null_mut();
    };
    job.processes
        .borrow()
        .get(index)
        .map_or(std::ptr::null_mut(), |&p| p.cast_mut())
}

// ---- The trampolines and tables, once per interface level ------------------

macro_rules! common_trampolines {
    ($abi:ident) => {
        use crate::dll::callbacks::*;
        use mqs_abi::ffi::$abi as c;

        unsafe extern "C" fn t_malloc(size: usize) -> *mut c_void {
            guarded(std::ptr::null_mut(), || malloc(size))
        }
        unsafe extern "C" fn t_free(ptr: *mut c_void) {
            // SAFETY: forwarded unchanged from the DLL.
            guarded((), || unsafe { free(ptr) })
        }
        unsafe extern "C" fn t_dprints(text: *const c_char) {
            // SAFETY: forwarded unchanged from the DLL.
            guarded((), || unsafe { dprints(text) })
        }
        unsafe extern "C" fn t_errorstring(code: c_int) -> *mut c_char {
            guarded(std::ptr::null_mut(), || errorstring(code))
        }
        unsafe extern "C" fn t_put_image_info(
            image: *mut c::mqs_image,
            info: *mut c::mqs_image_info,
        ) {
            guarded((), || put_image_info(image.cast(), info.cast()))
        }
        unsafe extern "C" fn t_get_image_info(image: *mut c::mqs_image) -> *mut c::mqs_image_info {
            guarded(std::ptr::null_mut(), || get_image_info(image.cast()).cast())
        }
        unsafe extern "C" fn t_put_process_info(
            process: *mut c::mqs_process,
            info: *mut c::mqs_process_info,
        ) {
            guarded((), || put_process_info(process.cast(), info.cast()))
        }
        unsafe extern "C" fn t_get_process_info(
            process: *mut c::mqs_process,
        ) -> *mut c::mqs_process_info {
            guarded(std::ptr::null_mut(), || {
                get_process_info(process.cast()).cast()
            })
        }
        unsafe extern "C" fn t_get_type_sizes(
            process: *mut c::mqs_process,
            sizes: *mut c::mqs_target_type_sizes,
        ) {
            // SAFETY: forwarded unchanged from the DLL.
            guarded((), || unsafe {
                get_type_sizes(process.cast(), sizes.cast())
            })
        }
        unsafe extern "C" fn t_find_function(
            image: *mut c::mqs_image,
            name: *mut c_char,
            _lang: c::mqs_lang_code,
            addr: *mut c::mqs_taddr_t,
        ) -> c_int {
            // SAFETY: forwarded unchanged from the DLL.
            guarded(codes::INTERNAL, || unsafe {
                find_symbol(image.cast(), name, addr.cast(), true)
            })
        }
        unsafe extern "C" fn t_find_symbol(
            image: *mut c::mqs_image,
            name: *mut c_char,
            addr: *mut c::mqs_taddr_t,
        ) -> c_int {
            // SAFETY: forwarded unchanged from the DLL.
            guarded(codes::INTERNAL, || unsafe {
                find_symbol(image.cast(), name, addr.cast(), false)
            })
        }
        unsafe extern "C" fn t_find_type(
            image: *mut c::mqs_image,
            name: *mut c_char,
            _lang: c::mqs_lang_code,
        ) -> *mut c::mqs_type {
            guarded(std::ptr::null_mut(), || {
                // SAFETY: forwarded unchanged from the DLL.
                let ty = unsafe { find_type(image.cast(), name) };
                ty.cast()
            })
        }
        unsafe extern "C" fn t_field_offset(ty: *mut c::mqs_type, field: *mut c_char) -> c_int {
            // SAFETY: forwarded unchanged from the DLL.
            guarded(-1, || unsafe { field_offset(ty.cast(), field) })
        }
        unsafe extern "C" fn t_sizeof(ty: *mut c::mqs_type) -> c_int {
            guarded(-1, || sizeof(ty.cast()))
        }
        unsafe extern "C" fn t_get_global_rank(process: *mut c::mqs_process) -> c_int {
            guarded(-1, || get_global_rank(process.cast()))
        }
        unsafe extern "C" fn t_get_image(process: *mut c::mqs_process) -> *mut c::mqs_image {
            guarded(std::ptr::null_mut(), || get_image(process.cast()).cast())
        }
        unsafe extern "C" fn t_fetch_data(
            process: *mut c::mqs_process,
            addr: c::mqs_taddr_t,
            size: c_int,
            buf: *mut c_void,
        ) -> c_int {
            // SAFETY: forwarded unchanged from the DLL.
            guarded(codes::INTERNAL, || unsafe {
                fetch_data(process.cast(), addr, size, buf.cast())
            })
        }
        unsafe extern "C" fn t_target_to_host(
            process: *mut c::mqs_process,
            input: *const c_void,
            output: *mut c_void,
            size: c_int,
        ) {
            // SAFETY: forwarded unchanged from the DLL.
            guarded((), || unsafe {
                target_to_host(process.cast(), input.cast(), output.cast(), size)
            })
        }

        pub static IMAGE: c::mqs_image_callbacks = c::mqs_image_callbacks {
            mqs_get_type_sizes_fp: Some(t_get_type_sizes),
            mqs_find_function_fp: Some(t_find_function),
            mqs_find_symbol_fp: Some(t_find_symbol),
            mqs_find_type_fp: Some(t_find_type),
            mqs_field_offset_fp: Some(t_field_offset),
            mqs_sizeof_fp: Some(t_sizeof),
        };
    };
}

/// Tables for a compatibility-2 (MPI-1) DLL.
pub mod mpi1 {
    common_trampolines!(mpi1);

    pub static BASIC: c::mqs_basic_callbacks = c::mqs_basic_callbacks {
        mqs_malloc_fp: Some(t_malloc),
        mqs_free_fp: Some(t_free),
        mqs_dprints_fp: Some(t_dprints),
        mqs_errorstring_fp: Some(t_errorstring),
        mqs_put_image_info_fp: Some(t_put_image_info),
        mqs_get_image_info_fp: Some(t_get_image_info),
        mqs_put_process_info_fp: Some(t_put_process_info),
        mqs_get_process_info_fp: Some(t_get_process_info),
    };

    pub static PROCESS: c::mqs_process_callbacks = c::mqs_process_callbacks {
        mqs_get_global_rank_fp: Some(t_get_global_rank),
        mqs_get_image_fp: Some(t_get_image),
        mqs_fetch_data_fp: Some(t_fetch_data),
        mqs_target_to_host_fp: Some(t_target_to_host),
    };
}

/// Tables for a compatibility-3 (MPI-2) DLL.
pub mod mpi2 {
    common_trampolines!(mpi2);

    unsafe extern "C" fn t_put_job_info(job: *mut c::mqs_job, info: *mut c::mqs_job_info) {
        guarded((), || put_job_info(job.cast(), info.cast()))
    }
    unsafe extern "C" fn t_get_job_info(job: *mut c::mqs_job) -> *mut c::mqs_job_info {
        guarded(std::ptr::null_mut(), || get_job_info(job.cast()).cast())
    }
    unsafe extern "C" fn t_get_process_job(process: *mut c::mqs_process) -> *mut c::mqs_job {
        guarded(std::ptr::null_mut(), || {
            get_process_job(process.cast()).cast()
        })
    }
    unsafe extern "C" fn t_get_process_identity(handle: *mut c::mqs_job) -> c_int {
        guarded(-1, || get_process_identity(handle.cast()))
    }
    unsafe extern "C" fn t_get_process(
        job: *mut c::mqs_job,
        identity: c_int,
    ) -> *mut c::mqs_process {
        guarded(std::ptr::null_mut(), || {
            get_process(job.cast(), identity).cast()
        })
    }

    pub static BASIC: c::mqs_basic_callbacks = c::mqs_basic_callbacks {
        mqs_malloc_fp: Some(t_malloc),
        mqs_free_fp: Some(t_free),
        mqs_dprints_fp: Some(t_dprints),
        mqs_errorstring_fp: Some(t_errorstring),
        mqs_put_image_info_fp: Some(t_put_image_info),
        mqs_get_image_info_fp: Some(t_get_image_info),
        mqs_put_process_info_fp: Some(t_put_process_info),
        mqs_get_process_info_fp: Some(t_get_process_info),
        mqs_put_job_info_fp: Some(t_put_job_info),
        mqs_get_job_info_fp: Some(t_get_job_info),
    };

    pub static PROCESS: c::mqs_process_callbacks = c::mqs_process_callbacks {
        mqs_get_global_rank_fp: Some(t_get_global_rank),
        mqs_get_image_fp: Some(t_get_image),
        mqs_fetch_data_fp: Some(t_fetch_data),
        mqs_target_to_host_fp: Some(t_target_to_host),
        mqs_get_process_job_fp: Some(t_get_process_job),
        mqs_get_process_identity_fp: Some(t_get_process_identity),
    };

    pub static JOB: c::mqs_job_callbacks = c::mqs_job_callbacks {
        mqs_get_process_fp: Some(t_get_process),
    };
}
