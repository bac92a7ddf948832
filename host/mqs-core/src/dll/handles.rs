//! The objects the host hands to a DLL as `mqs_image*`, `mqs_process*`,
//! `mqs_job*` and `mqs_type*`.
//!
//! Each is a boxed Rust value whose address is the handle. Every live
//! handle is recorded in a registry, and callbacks look a pointer up there
//! before touching it: a DLL that passes a stale or made-up pointer gets an
//! error code instead of crashing the host.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

use crate::interface::{ImageSymbols, Target, TypeLayout};
use crate::model::CallbackCounts;

/// Callbacks made through one handle, by kind.
#[derive(Debug, Default)]
pub(crate) struct Calls(Cell<CallbackCounts>);

impl Calls {
    /// Counts one callback of the kind `kind` picks.
    pub(crate) fn count(&self, kind: impl FnOnce(&mut CallbackCounts) -> &mut u64) {
        self.add(kind, 1);
    }

    /// Adds `n` to the count `kind` picks.
    pub(crate) fn add(&self, kind: impl FnOnce(&mut CallbackCounts) -> &mut u64, n: u64) {
        let mut counts = self.0.get();
        let count = kind(&mut counts);
        *count = count.saturating_add(n);
        self.0.set(counts);
    }

    pub(crate) fn get(&self) -> CallbackCounts {
        self.0.get()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Image,
    Process,
    Job,
    Type,
}

static LIVE: Mutex<Option<HashMap<usize, Kind>>> = Mutex::new(None);

thread_local! {
    /// The last handle found in the registry: a DLL walking a queue passes
    /// the same process handle to every fetch, and this spares the lock.
    /// Cleared when that handle is unregistered; handles are not Send, so
    /// they are unregistered on the thread that uses them.
    static LAST_HIT: Cell<Option<(usize, Kind)>> = const { Cell::new(None) };
}

fn live() -> MutexGuard<'static, Option<HashMap<usize, Kind>>> {
    // A panic elsewhere cannot leave the map half-updated: keep using it.
    crate::sync::lock(&LIVE)
}

pub(crate) fn register(ptr: *const c_void, kind: Kind) {
    live()
        .get_or_insert_with(HashMap::new)
        .insert(ptr as usize, kind);
}

pub(crate) fn unregister(ptr: *const c_void) {
    LAST_HIT.with(|last| {
        if last.get().is_some_and(|(p, _)| p == ptr as usize) {
            last.set(None);
        }
    });
    if let Some(map) = live().as_mut() {
        map.remove(&(ptr as usize));
    }
}

pub(crate) fn kind_of(ptr: *const c_void) -> Option<Kind> {
    let key = ptr as usize;
    if let Some((p, kind)) = LAST_HIT.with(Cell::get) {
        if p == key {
            return Some(kind);
        }
    }
    let kind = live().as_ref()?.get(&key).copied()?;
    LAST_HIT.with(|last| last.set(Some((key, kind))));
    Some(kind)
}

/// Resolves a handle pointer the DLL gave back, if it names a live handle
/// of the expected kind.
///
/// The lifetime is unbounded: callers use the reference only for the
/// duration of one callback, while the owning session keeps it alive.
pub(crate) fn resolve<'a, T: Handle>(ptr: *const c_void) -> Option<&'a T> {
    if ptr.is_null() || kind_of(ptr) != Some(T::KIND) {
        return None;
    }
    // SAFETY: the registry holds only addresses of boxed handles of that
    // kind that are still alive (they unregister in Drop), and the session
    // that owns them outlives every call into the DLL.
    Some(unsafe { &*ptr.cast::<T>() })
}

pub(crate) trait Handle {
    const KIND: Kind;
}

/// A resolved type, as the DLL's `mqs_type*`.
#[derive(Debug)]
pub(crate) struct TypeHandle {
    pub(crate) layout: TypeLayout,
    /// The image it belongs to (which counts its callbacks); the image
    /// owns the type handle, so it outlives it.
    pub(crate) image: *const c_void,
}

impl Handle for TypeHandle {
    const KIND: Kind = Kind::Type;
}

/// An executable image (the program and its shared objects), `mqs_image*`.
pub(crate) struct ImageHandle {
    pub(crate) name: String,
    pub(crate) symbols: Box<dyn ImageSymbols>,
    /// The DLL's `mqs_image_info`, set by put_image_info.
    pub(crate) info: Cell<*mut c_void>,
    /// Types handed out, by name (None: known not to exist). Boxed so the
    /// handle addresses stay put while the map grows.
    pub(crate) types: RefCell<HashMap<String, Option<Box<TypeHandle>>>>,
    /// Names the DLL asked for and did not get, for error messages.
    pub(crate) missing: RefCell<Vec<String>>,
    /// Callbacks on this image and its types.
    pub(crate) calls: Calls,
}

impl Handle for ImageHandle {
    const KIND: Kind = Kind::Image;
}

impl std::fmt::Debug for ImageHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageHandle")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ImageHandle {
    pub(crate) fn new(name: String, symbols: Box<dyn ImageSymbols>) -> Box<Self> {
        let image = Box::new(Self {
            name,
            symbols,
            info: Cell::new(std::ptr::null_mut()),
            types: RefCell::new(HashMap::new()),
            missing: RefCell::new(Vec::new()),
            calls: Calls::default(),
        });
        register(image.as_ptr(), Kind::Image);
        image
    }

    pub(crate) fn as_ptr(&self) -> *const c_void {
        (self as *const Self).cast()
    }

    pub(crate) fn note_missing(&self, what: String) {
        let mut missing = self.missing.borrow_mut();
        if !missing.contains(&what) {
            missing.push(what);
        }
    }

    /// The handle for a named type, created and registered on first use.
    pub(crate) fn find_type(&self, name: &str) -> *const c_void {
        let mut types = self.types.borrow_mut();
        let entry = types.entry(name.to_string()).or_insert_with(|| {
            self.symbols.find_type(name).map(|layout| {
                let handle = Box::new(TypeHandle {
                    layout,
                    image: self.as_ptr(),
                });
                register((&*handle as *const TypeHandle).cast(), Kind::Type);
                handle
            })
        });
        match entry {
            Some(handle) => (&**handle as *const TypeHandle).cast(),
            None => {
                drop(types);
                self.note_missing(format!("type '{name}'"));
                std::ptr::null()
            }
        }
    }
}

impl Drop for ImageHandle {
    fn drop(&mut self) {
        for handle in self.types.get_mut().values().flatten() {
            unregister((&**handle as *const TypeHandle).cast());
        }
        unregister(self.as_ptr());
    }
}

/// One process, `mqs_process*`. It borrows its target for the session's
/// lifetime `'t`.
pub(crate) struct ProcessHandle<'t> {
    pub(crate) target: Box<dyn Target + 't>,
    pub(crate) image: *const ImageHandle,
    pub(crate) job: *const JobHandle,
    pub(crate) global_rank: i32,
    /// MPI-2: the identity the host gave it (its index in the job).
    pub(crate) identity: Cell<i32>,
    pub(crate) info: Cell<*mut c_void>,
    pub(crate) pointer_size: i32,
    pub(crate) fetches: Cell<u64>,
    pub(crate) fetched_bytes: Cell<u64>,
    /// Fetches that failed, as `LEN bytes at ADDR: why` (the first few).
    pub(crate) unreadable: RefCell<Vec<String>>,
    /// Callbacks on this process.
    pub(crate) calls: Calls,
}

impl Handle for ProcessHandle<'_> {
    const KIND: Kind = Kind::Process;
}

impl std::fmt::Debug for ProcessHandle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("pid", &self.target.pid())
            .field("global_rank", &self.global_rank)
            .finish_non_exhaustive()
    }
}

impl<'t> ProcessHandle<'t> {
    pub(crate) fn new(
        target: Box<dyn Target + 't>,
        image: &ImageHandle,
        job: Option<&JobHandle>,
        global_rank: i32,
        pointer_size: i32,
    ) -> Box<Self> {
        let process = Box::new(Self {
            target,
            image,
            job: job.map_or(std::ptr::null(), |j| j),
            global_rank,
            identity: Cell::new(global_rank),
            info: Cell::new(std::ptr::null_mut()),
            pointer_size,
            fetches: Cell::new(0),
            fetched_bytes: Cell::new(0),
            unreadable: RefCell::new(Vec::new()),
            calls: Calls::default(),
        });
        register(process.as_ptr(), Kind::Process);
        process
    }

    pub(crate) fn as_ptr(&self) -> *const c_void {
        (self as *const Self).cast()
    }

    /// The callbacks made for this process: its own and its image's.
    pub(crate) fn callbacks(&self) -> CallbackCounts {
        let own = self.calls.get();
        match resolve::<ImageHandle>(self.image.cast()) {
            Some(image) => own.plus(&image.calls.get()),
            None => own,
        }
    }

    /// Notes a failed fetch; a DLL probing many bad addresses keeps only
    /// the first few.
    pub(crate) fn note_unreadable(&self, addr: u64, len: usize, error: &crate::Error) {
        const KEEP: usize = 16;
        let mut list = self.unreadable.borrow_mut();
        if list.len() < KEEP {
            let why = match error {
                crate::Error::Read { detail, .. } => detail.clone(),
                other => other.to_string(),
            };
            list.push(format!("{len} bytes at {addr:#x}: {why}"));
        }
    }
}

impl Drop for ProcessHandle<'_> {
    fn drop(&mut self) {
        unregister(self.as_ptr());
    }
}

/// MPI-2: the job, `mqs_job*`, with its processes indexed by identity.
#[derive(Debug)]
pub(crate) struct JobHandle {
    pub(crate) info: Cell<*mut c_void>,
    pub(crate) processes: RefCell<Vec<*const c_void>>,
}

impl Handle for JobHandle {
    const KIND: Kind = Kind::Job;
}

impl JobHandle {
    pub(crate) fn new() -> Box<Self> {
        let job = Box::new(Self {
            info: Cell::new(std::ptr::null_mut()),
            processes: RefCell::new(Vec::new()),
        });
        register(job.as_ptr(), Kind::Job);
        job
    }

    pub(crate) fn as_ptr(&self) -> *const c_void {
        (self as *const Self).cast()
    }
}

impl Drop for JobHandle {
    fn drop(&mut self) {
        unregister(self.as_ptr());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_rejects_unknown_and_wrong_kind() {
        let job = JobHandle::new();
        let ptr = job.as_ptr();
        assert!(resolve::<JobHandle>(ptr).is_some());
        assert!(resolve::<ProcessHandle>(ptr).is_none());
        assert!(resolve::<JobHandle>(std::ptr::null()).is_none());
        assert!(resolve::<JobHandle>(0x1234 as *const c_void).is_none());
        drop(job);
        assert!(resolve::<JobHandle>(ptr).is_none());
    }
}
