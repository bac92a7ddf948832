//! The safe wrapper over the debugger's callbacks: the only place (with
//! `exports`) that touches raw pointers.
//!
//! - The basic table pointer lives in a static: the debugger keeps it valid
//!   for as long as the DLL is loaded, and the DLL is never unloaded.
//! - Image and process tables are kept by the per-image / per-process state
//!   and wrapped here in [`ImageCallbacks`] / [`ProcessCallbacks`], which
//!   implement the [`ImageAccess`] / [`ProcessAccess`] traits that the rest
//!   of the DLL reads the target through (and that tests fake).
//! - Per-image/process/job state: the debugger stores one pointer for us per
//!   object. We hand it a small header allocated with the *debugger's*
//!   malloc (as the interface asks) that owns a Rust `Box<Mutex<T>>` holding
//!   the real state. We keep a registry of the headers we handed out and
//!   on which object: a pointer the debugger gives back is only read if it
//!   is one of them, for that object (debuggers may hand back garbage from
//!   a slot never written), and its magic number says its kind. The mutex
//!   is only ever `try_lock`ed: a concurrent call gets `Busy` instead of
//!   blocking the debugger.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use crate::abi;
use crate::access::{ImageAccess, ProcessAccess, TypeSizes};
use crate::errors::DllError;
use crate::walk::AddrHasher;

// ---------------------------------------------------------------------------
// The basic table.
// ---------------------------------------------------------------------------

static BASIC: AtomicPtr<abi::mqs_basic_callbacks> = AtomicPtr::new(std::ptr::null_mut());

/// Keeps the debugger's basic table (called by `mqs_setup_basic_callbacks`).
pub fn set_basic_callbacks(table: *const abi::mqs_basic_callbacks) {
    BASIC.store(table.cast_mut(), Ordering::Release);
}

/// A copy of the debugger's basic callbacks.
#[derive(Clone, Copy)]
pub struct Basic {
    table: abi::mqs_basic_callbacks,
}

impl std::fmt::Debug for Basic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Basic").finish_non_exhaustive()
    }
}

impl Basic {
    /// The table given to `mqs_setup_basic_callbacks`.
    pub fn get() -> Result<Basic, DllError> {
        let ptr = BASIC.load(Ordering::Acquire);
        if ptr.is_null() {
            return Err(DllError::NoBasicCallbacks);
        }
        if !ptr.is_aligned() {
            return Err(DllError::NoBasicCallbacks);
        }
        // SAFETY: the debugger keeps the table it passed valid for as long as
        // the DLL is loaded (ABI contract); it is non-NULL and aligned, and
        // the struct is plain function pointers (Copy), read without retaining
        // a reference.
        let table = unsafe { std::ptr::read(ptr) };
        Ok(Basic { table })
    }

    /// The debugger's malloc (at least one byte is always asked for).
    fn malloc(&self, size: usize) -> *mut c_void {
        match self.table.mqs_malloc_fp {
            // SAFETY: a C malloc; any size is valid input.
            Some(f) => unsafe { f(size.max(1)) },
            None => std::ptr::null_mut(),
        }
    }

    /// The debugger's free.
    fn free(&self, ptr: *mut c_void) {
        if ptr.is_null() {
            return;
        }
        if let Some(f) = self.table.mqs_free_fp {
            // SAFETY: `ptr` came from this debugger's malloc (see InfoHeader).
            unsafe { f(ptr) }
        }
    }

    /// Prints a line of DLL debugging output through the debugger.
    pub fn dprints(&self, text: &str) {
        let Some(f) = self.table.mqs_dprints_fp else {
            return;
        };
        let mut bytes: Vec<u8> = text.bytes().filter(|&b| b != 0).collect();
        bytes.push(b'\n');
        bytes.push(0);
        // SAFETY: `bytes` is NUL-terminated and outlives the call.
        unsafe { f(bytes.as_ptr().cast::<c_char>()) }
    }

    /// The debugger's text for one of its own codes.
    pub fn errorstring(&self, code: i32) -> Option<String> {
        let f = self.table.mqs_errorstring_fp?;
        // SAFETY: plain call; the result is a static string or NULL.
        let text = unsafe { f(code) };
        if text.is_null() {
            return None;
        }
        // SAFETY: non-NULL result of errorstring is a NUL-terminated static
        // string per the interface; it is copied at once.
        Some(
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    fn put_image_info(&self, image: *mut abi::mqs_image, info: *mut c_void) -> bool {
        match self.table.mqs_put_image_info_fp {
            Some(f) => {
                // SAFETY: passes back the debugger's own handle with our pointer.
                unsafe { f(image, info.cast()) };
                true
            }
            None => false,
        }
    }

    fn get_image_info(&self, image: *mut abi::mqs_image) -> *mut c_void {
        match self.table.mqs_get_image_info_fp {
            // SAFETY: passes back the debugger's own handle.
            Some(f) => unsafe { f(image) }.cast(),
            None => std::ptr::null_mut(),
        }
    }

    fn put_process_info(&self, process: *mut abi::mqs_process, info: *mut c_void) -> bool {
        match self.table.mqs_put_process_info_fp {
            Some(f) => {
                // SAFETY: passes back the debugger's own handle with our pointer.
                unsafe { f(process, info.cast()) };
                true
            }
            None => false,
        }
    }

    fn get_process_info(&self, process: *mut abi::mqs_process) -> *mut c_void {
        match self.table.mqs_get_process_info_fp {
            // SAFETY: passes back the debugger's own handle.
            Some(f) => unsafe { f(process) }.cast(),
            None => std::ptr::null_mut(),
        }
    }

    #[cfg(feature = "mpi2")]
    fn put_job_info(&self, job: *mut abi::mqs_job, info: *mut c_void) -> bool {
        match self.table.mqs_put_job_info_fp {
            Some(f) => {
                // SAFETY: passes back the debugger's own handle with our pointer.
                unsafe { f(job, info.cast()) };
                true
            }
            None => false,
        }
    }

    #[cfg(feature = "mpi2")]
    fn get_job_info(&self, job: *mut abi::mqs_job) -> *mut c_void {
        match self.table.mqs_get_job_info_fp {
            // SAFETY: passes back the debugger's own handle.
            Some(f) => unsafe { f(job) }.cast(),
            None => std::ptr::null_mut(),
        }
    }
}

/// Calls `f` with a private, writable, NUL-terminated copy of `name`: the
/// interface types names as `char *`, so never hand out our constants.
fn with_c_name<R>(name: &str, f: impl FnOnce(*mut c_char) -> R) -> R {
    let mut bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).collect();
    bytes.push(0);
    f(bytes.as_mut_ptr().cast::<c_char>())
}

// ---------------------------------------------------------------------------
// Image callbacks.
// ---------------------------------------------------------------------------

/// One image and the debugger's image table.
#[derive(Clone, Copy, Debug)]
pub struct ImageCallbacks {
    image: *mut abi::mqs_image,
    table: *const abi::mqs_image_callbacks,
}

/// A type handle from the debugger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebuggerType(*mut abi::mqs_type);

impl ImageCallbacks {
    /// Wraps a handle and a table pointer kept since `mqs_setup_image`.
    pub fn new(image: *mut abi::mqs_image, table: *const abi::mqs_image_callbacks) -> Self {
        ImageCallbacks { image, table }
    }

    fn table(&self) -> Option<abi::mqs_image_callbacks> {
        if self.table.is_null() || !self.table.is_aligned() {
            return None;
        }
        // SAFETY: the debugger keeps the image table valid for as long as the
        // DLL is loaded (ABI contract); copied out, never retained.
        Some(unsafe { std::ptr::read(self.table) })
    }
}

impl ImageCallbacks {
    /// The basic type sizes of a process running this image (the callback
    /// lives in the image table but takes a process).
    pub fn type_sizes(&self, process: &ProcessCallbacks) -> Option<TypeSizes> {
        let f = self.table()?.mqs_get_type_sizes_fp?;
        let mut raw = abi::mqs_target_type_sizes::default();
        // SAFETY: the debugger's own process handle and a writable struct.
        unsafe { f(process.process, &mut raw) };
        Some(TypeSizes {
            short: raw.short_size,
            int: raw.int_size,
            long: raw.long_size,
            long_long: raw.long_long_size,
            pointer: raw.pointer_size,
        })
    }
}

impl ImageAccess for ImageCallbacks {
    type Type = DebuggerType;

    fn find_symbol(&self, name: &str) -> Option<u64> {
        let f = self.table()?.mqs_find_symbol_fp?;
        let mut addr: abi::mqs_taddr_t = 0;
        // SAFETY: the debugger's handle, a NUL-terminated name and a valid
        // out-pointer that outlives the call.
        let rc = with_c_name(name, |n| unsafe { f(self.image, n, &mut addr) });
        (rc == abi::mqs_ok as c_int).then_some(addr)
    }

    fn find_function(&self, name: &str) -> Option<u64> {
        let f = self.table()?.mqs_find_function_fp?;
        let mut addr: abi::mqs_taddr_t = 0;
        // SAFETY: as for find_symbol.
        let rc = with_c_name(name, |n| unsafe {
            f(self.image, n, abi::mqs_lang_c, &mut addr)
        });
        (rc == abi::mqs_ok as c_int).then_some(addr)
    }

    fn find_type(&self, name: &str) -> Option<DebuggerType> {
        let f = self.table()?.mqs_find_type_fp?;
        // SAFETY: the debugger's handle and a NUL-terminated name.
        let ty = with_c_name(name, |n| unsafe { f(self.image, n, abi::mqs_lang_c) });
        (!ty.is_null()).then_some(DebuggerType(ty))
    }

    fn field_offset(&self, ty: DebuggerType, field: &str) -> Option<u64> {
        let f = self.table()?.mqs_field_offset_fp?;
        // SAFETY: a type handle this debugger returned and a NUL-terminated name.
        let off = with_c_name(field, |n| unsafe { f(ty.0, n) });
        u64::try_from(off).ok()
    }

    fn size_of(&self, ty: DebuggerType) -> Option<u64> {
        let f = self.table()?.mqs_sizeof_fp?;
        // SAFETY: a type handle this debugger returned.
        let size = unsafe { f(ty.0) };
        u64::try_from(size).ok().filter(|&s| s > 0)
    }
}

// ---------------------------------------------------------------------------
// Process callbacks.
// ---------------------------------------------------------------------------

/// One process and the debugger's process table.
#[derive(Clone, Copy, Debug)]
pub struct ProcessCallbacks {
    process: *mut abi::mqs_process,
    table: *const abi::mqs_process_callbacks,
}

impl ProcessCallbacks {
    /// Wraps a handle and a table pointer kept since `mqs_setup_process`.
    pub fn new(process: *mut abi::mqs_process, table: *const abi::mqs_process_callbacks) -> Self {
        ProcessCallbacks { process, table }
    }

    fn table(&self) -> Option<abi::mqs_process_callbacks> {
        if self.table.is_null() || !self.table.is_aligned() {
            return None;
        }
        // SAFETY: the debugger keeps the process table valid for as long as
        // the DLL is loaded (ABI contract); copied out, never retained.
        Some(unsafe { std::ptr::read(self.table) })
    }

    /// The image this process runs.
    pub fn image(&self) -> Option<*mut abi::mqs_image> {
        let f = self.table()?.mqs_get_image_fp?;
        // SAFETY: the debugger's own process handle.
        let image = unsafe { f(self.process) };
        (!image.is_null()).then_some(image)
    }

    /// The job this process belongs to (MPI-2).
    #[cfg(feature = "mpi2")]
    pub fn job(&self) -> Option<*mut abi::mqs_job> {
        let f = self.table()?.mqs_get_process_job_fp?;
        // SAFETY: the debugger's own process handle.
        let job = unsafe { f(self.process) };
        (!job.is_null()).then_some(job)
    }

    /// The identity the debugger gave this process (MPI-2). The header types
    /// the argument `mqs_job *`; hosts expect the process handle.
    #[cfg(feature = "mpi2")]
    pub fn identity(&self) -> Option<i32> {
        let f = self.table()?.mqs_get_process_identity_fp?;
        // SAFETY: the historical header slip: hosts take the process handle
        // here (see mpi_interface.h); the pointer is only passed back.
        let id = unsafe { f(self.process.cast::<abi::mqs_job>()) };
        (id >= 0).then_some(id)
    }
}

impl ProcessAccess for ProcessCallbacks {
    fn fetch(&self, addr: u64, buf: &mut [u8]) -> bool {
        let Some(f) = self.table().and_then(|t| t.mqs_fetch_data_fp) else {
            return false;
        };
        // Split reads larger than an int can say.
        let mut done = 0usize;
        while done < buf.len() {
            let chunk = (buf.len() - done).min(1 << 30);
            let Some(at) = addr.checked_add(done as u64) else {
                return false;
            };
            let Ok(size) = c_int::try_from(chunk) else {
                return false;
            };
            let Some(out) = buf.get_mut(done..done + chunk) else {
                return false;
            };
            // SAFETY: `out` is a writable buffer of exactly `size` bytes.
            let rc = unsafe { f(self.process, at, size, out.as_mut_ptr().cast()) };
            if rc != abi::mqs_ok as c_int {
                return false;
            }
            done += chunk;
        }
        true
    }

    fn target_to_host(&self, input: &[u8], output: &mut [u8]) {
        let len = input.len().min(output.len());
        let Some(f) = self.table().and_then(|t| t.mqs_target_to_host_fp) else {
            output[..len].copy_from_slice(&input[..len]);
            return;
        };
        let Ok(size) = c_int::try_from(len) else {
            return;
        };
        // SAFETY: both buffers hold at least `size` bytes and do not overlap.
        unsafe {
            f(
                self.process,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                size,
            )
        }
    }

    fn global_rank(&self) -> i32 {
        match self.table().and_then(|t| t.mqs_get_global_rank_fp) {
            // SAFETY: the debugger's own process handle.
            Some(f) => unsafe { f(self.process) },
            None => -1,
        }
    }
}

// ---------------------------------------------------------------------------
// Job callbacks (MPI-2).
// ---------------------------------------------------------------------------

/// One job and the debugger's job table.
#[cfg(feature = "mpi2")]
#[derive(Clone, Copy, Debug)]
pub struct JobCallbacks {
    job: *mut abi::mqs_job,
    table: *const abi::mqs_job_callbacks,
}

#[cfg(feature = "mpi2")]
impl JobCallbacks {
    pub fn new(job: *mut abi::mqs_job, table: *const abi::mqs_job_callbacks) -> Self {
        JobCallbacks { job, table }
    }

    /// Whether the debugger knows a process with this identity in the job.
    pub fn has_process(&self, identity: i32) -> bool {
        if self.table.is_null() || !self.table.is_aligned() {
            return false;
        }
        // SAFETY: the debugger keeps the job table valid while the DLL is
        // loaded (ABI contract); copied out, never retained.
        let table = unsafe { std::ptr::read(self.table) };
        let Some(f) = table.mqs_get_process_fp else {
            return false;
        };
        // SAFETY: the debugger's own job handle.
        !unsafe { f(self.job, identity) }.is_null()
    }
}

// ---------------------------------------------------------------------------
// Per-object state owned through the debugger.
// ---------------------------------------------------------------------------

/// What we give the debugger to keep for an image, process or job.
#[repr(C)]
struct InfoHeader {
    magic: u64,
    /// 1 when the header came from the debugger's malloc, 0 from Rust's.
    from_debugger: u64,
    /// `Box<Mutex<T>>::into_raw`.
    state: *mut c_void,
}

/// A kind of per-object state, told apart by its magic number.
pub trait InfoKind: Sized {
    const MAGIC: u64;
    const MISSING: DllError;
}

/// The headers we handed out and have not freed: debugger object (image,
/// process or job handle) -> the header put on it.
///
/// Debuggers return whatever is in their info slot, and not all of them
/// clear it first (padb keeps its objects on the stack, uninitialised): the
/// slot of an object is only asked for once we put a header on it, and
/// what comes back is only dereferenced if it is that header. Garbage, a
/// stale pointer or another object's info never makes the DLL read memory
/// it did not allocate.
static LIVE: Mutex<Option<LiveMap>> = Mutex::new(None);

/// Owner to header; asked twice per call of the debugger, so with the
/// cheap address hash.
type LiveMap = HashMap<usize, usize, BuildHasherDefault<AddrHasher>>;

fn live() -> MutexGuard<'static, Option<LiveMap>> {
    // A panic cannot leave the map half-updated: keep using it.
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Allocates the header for `state` (through the debugger's malloc when it
/// offers one and returns aligned memory) and returns the pointer to give
/// the debugger. Not yet registered: see [`register`].
fn new_info<T: InfoKind>(basic: &Basic, state: T) -> Result<*mut c_void, DllError> {
    let boxed: *mut Mutex<T> = Box::into_raw(Box::new(Mutex::new(state)));
    let header = InfoHeader {
        magic: T::MAGIC,
        from_debugger: 1,
        state: boxed.cast(),
    };
    let raw = basic.malloc(std::mem::size_of::<InfoHeader>());
    let ptr = raw.cast::<InfoHeader>();
    if !raw.is_null() && ptr.is_aligned() {
        // SAFETY: fresh, aligned allocation of size_of::<InfoHeader>() bytes.
        unsafe { ptr.write(header) };
        return Ok(raw);
    }
    if !raw.is_null() {
        basic.free(raw);
    }
    if basic.table.mqs_malloc_fp.is_some() && raw.is_null() {
        // SAFETY: `boxed` came from Box::into_raw above and was never shared.
        drop(unsafe { Box::from_raw(boxed) });
        return Err(DllError::OutOfMemory);
    }
    // No usable debugger malloc: a Rust allocation, marked as such.
    let header = Box::new(InfoHeader {
        from_debugger: 0,
        ..header
    });
    Ok(Box::into_raw(header).cast())
}

/// Records that `info` was put on the debugger object `owner`. A header
/// put on it before (set up again after the debugger lost our pointer) is
/// forgotten, not freed: the debugger may still hand it to destroy.
fn register(info: *mut c_void, owner: *mut c_void) {
    live()
        .get_or_insert_with(LiveMap::default)
        .insert(owner as usize, info as usize);
}

/// Whether we put a header on the debugger object `owner` and have not
/// freed it: only then is its info slot worth asking for (a slot we never
/// wrote may hold anything, even uninitialised memory).
pub fn was_put_on(owner: *mut c_void) -> bool {
    live()
        .as_ref()
        .is_some_and(|m| m.contains_key(&(owner as usize)))
}

/// Runs `f` on the state of the debugger object `owner`, whose info slot
/// `get` reads: only if we put a header on it, and the slot still holds it.
fn with_info<T: InfoKind, R>(
    owner: *mut c_void,
    get: impl FnOnce() -> *mut c_void,
    f: impl FnOnce(&mut T) -> R,
) -> Result<R, DllError> {
    if !was_put_on(owner) {
        return Err(T::MISSING);
    }
    let info = get();
    let state = {
        let live = live();
        if live.as_ref().and_then(|m| m.get(&(owner as usize))) != Some(&(info as usize)) {
            return Err(T::MISSING);
        }
        // SAFETY: a registered header: allocated by new_info, aligned, and
        // not freed (destroy_info unregisters it first, under this lock).
        let (magic, state) = unsafe {
            let header = info.cast::<InfoHeader>();
            ((*header).magic, (*header).state)
        };
        if magic != T::MAGIC || state.is_null() {
            return Err(T::MISSING);
        }
        state
    };
    // SAFETY: a live header with our magic owns a live Box<Mutex<T>> of this
    // kind; only mqs_destroy_*, after the debugger's last use, frees it.
    let mutex: &Mutex<T> = unsafe { &*state.cast::<Mutex<T>>() };
    let mut guard = match mutex.try_lock() {
        Ok(guard) => guard,
        // A panic was caught while the state was in use: it is still memory
        // safe, and iterators are re-set-up by the debugger anyway.
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return Err(DllError::Busy),
    };
    Ok(f(&mut guard))
}

/// Frees the state and header behind a pointer the debugger gave back; a
/// pointer that is not a live header of ours (garbage, or destroyed
/// already) is left alone.
fn destroy_info<T: InfoKind>(basic: Option<&Basic>, info: *mut c_void) {
    let (state, from_debugger) = {
        let mut live = live();
        let Some(map) = live.as_mut() else {
            return;
        };
        let Some(owner) = map
            .iter()
            .find_map(|(&o, &i)| (i == info as usize).then_some(o))
        else {
            return;
        };
        // SAFETY: registered, so allocated by new_info and not yet freed.
        let (magic, state, from_debugger) = unsafe {
            let header = info.cast::<InfoHeader>();
            ((*header).magic, (*header).state, (*header).from_debugger)
        };
        if magic != T::MAGIC {
            return;
        }
        map.remove(&owner);
        (state, from_debugger)
    };
    if !state.is_null() {
        // SAFETY: `state` came from Box::into_raw in new_info and is dropped
        // once: the header is unregistered, so no one reaches it again.
        drop(unsafe { Box::from_raw(state.cast::<Mutex<T>>()) });
    }
    if from_debugger == 1 {
        if let Some(basic) = basic {
            basic.free(info);
        }
    } else {
        // SAFETY: a header with from_debugger == 0 came from Box::into_raw.
        drop(unsafe { Box::from_raw(info.cast::<InfoHeader>()) });
    }
}

/// Puts a fresh header for `state` on a debugger object through `put`,
/// and registers it.
fn put_state<T: InfoKind>(
    owner: *mut c_void,
    state: T,
    put: impl FnOnce(&Basic, *mut c_void) -> bool,
) -> Result<(), DllError> {
    let basic = Basic::get()?;
    let info = new_info(&basic, state)?;
    register(info, owner);
    if !put(&basic, info) {
        destroy_info::<T>(Some(&basic), info);
        return Err(DllError::NoBasicCallbacks);
    }
    Ok(())
}

// Typed entry points for each kind of object.

/// Attaches new image state to a debugger image.
pub fn put_image_state<T: InfoKind>(image: *mut abi::mqs_image, state: T) -> Result<(), DllError> {
    put_state(image.cast(), state, |b, info| b.put_image_info(image, info))
}

/// Runs `f` on an image's state.
pub fn with_image_state<T: InfoKind, R>(
    image: *mut abi::mqs_image,
    f: impl FnOnce(&mut T) -> R,
) -> Result<R, DllError> {
    if image.is_null() {
        return Err(DllError::NullArgument);
    }
    let basic = Basic::get()?;
    with_info(image.cast(), || basic.get_image_info(image), f)
}

/// Frees an image's state.
pub fn destroy_image_state<T: InfoKind>(info: *mut abi::mqs_image_info) {
    destroy_info::<T>(Basic::get().ok().as_ref(), info.cast());
}

/// Attaches new process state to a debugger process.
pub fn put_process_state<T: InfoKind>(
    process: *mut abi::mqs_process,
    state: T,
) -> Result<(), DllError> {
    put_state(process.cast(), state, |b, info| {
        b.put_process_info(process, info)
    })
}

/// Runs `f` on a process's state.
pub fn with_process_state<T: InfoKind, R>(
    process: *mut abi::mqs_process,
    f: impl FnOnce(&mut T) -> R,
) -> Result<R, DllError> {
    if process.is_null() {
        return Err(DllError::NullArgument);
    }
    let basic = Basic::get()?;
    with_info(process.cast(), || basic.get_process_info(process), f)
}

/// Frees a process's state.
pub fn destroy_process_state<T: InfoKind>(info: *mut abi::mqs_process_info) {
    destroy_info::<T>(Basic::get().ok().as_ref(), info.cast());
}

/// Attaches new job state to a debugger job.
#[cfg(feature = "mpi2")]
pub fn put_job_state<T: InfoKind>(job: *mut abi::mqs_job, state: T) -> Result<(), DllError> {
    put_state(job.cast(), state, |b, info| b.put_job_info(job, info))
}

/// Runs `f` on a job's state.
#[cfg(feature = "mpi2")]
pub fn with_job_state<T: InfoKind, R>(
    job: *mut abi::mqs_job,
    f: impl FnOnce(&mut T) -> R,
) -> Result<R, DllError> {
    if job.is_null() {
        return Err(DllError::NullArgument);
    }
    let basic = Basic::get()?;
    with_info(job.cast(), || basic.get_job_info(job), f)
}

/// Frees a job's state.
#[cfg(feature = "mpi2")]
pub fn destroy_job_state<T: InfoKind>(info: *mut abi::mqs_job_info) -> Result<(), DllError> {
    if info.is_null() {
        return Err(DllError::NullArgument);
    }
    destroy_info::<T>(Basic::get().ok().as_ref(), info.cast());
    Ok(())
}
