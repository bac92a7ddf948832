//! Loading a message-queue DLL: resolve its entry points, check that it
//! speaks our interface, hand it the callback tables. A DLL is never
//! unloaded (the interface promises that), so each is loaded once per host
//! process and kept for good.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use libloading::os::unix::{Library, Symbol, RTLD_LOCAL, RTLD_NOW};

use super::callbacks;
use crate::{Error, Result};

type FnVoid = unsafe extern "C" fn(*const c_void);
type FnStr = unsafe extern "C" fn() -> *mut c_char;
type FnInt = unsafe extern "C" fn() -> c_int;
type FnCodeStr = unsafe extern "C" fn(c_int) -> *mut c_char;
type FnHandleTable = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
type FnHandleMessage = unsafe extern "C" fn(*mut c_void, *mut *mut c_char) -> c_int;
type FnDestroy = unsafe extern "C" fn(*mut c_void);
type FnDestroyInt = unsafe extern "C" fn(*mut c_void) -> c_int;
type FnProcess = unsafe extern "C" fn(*mut c_void) -> c_int;
type FnProcessPtr = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type FnProcessInt = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type FnProcessBuf = unsafe extern "C" fn(*mut c_void, *mut c_char, c_int) -> c_int;

/// The DLL's entry points. Required ones are plain function pointers;
/// `mqs_get_comm_group` and the MPI-2 ones are optional.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryPoints {
    pub setup_basic_callbacks: FnVoid,
    pub version_string: FnStr,
    pub version_compatibility: FnInt,
    pub dll_taddr_width: Option<FnInt>,
    pub dll_error_string: FnCodeStr,
    pub setup_image: FnHandleTable,
    pub image_has_queues: FnHandleMessage,
    pub destroy_image_info: FnDestroy,
    pub setup_process: FnHandleTable,
    pub process_has_queues: FnHandleMessage,
    pub destroy_process_info: FnDestroy,
    pub update_communicator_list: FnProcess,
    pub setup_communicator_iterator: FnProcess,
    pub get_communicator: FnProcessPtr,
    pub get_comm_group: Option<FnProcessPtr>,
    pub next_communicator: FnProcess,
    pub setup_operation_iterator: FnProcessInt,
    pub next_operation: FnProcessPtr,
    pub mpi2: Option<Mpi2EntryPoints>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Mpi2EntryPoints {
    pub setup_job: FnHandleTable,
    pub destroy_job_info: FnDestroyInt,
    pub set_process_identity: FnProcessInt,
    pub setup_new_process_iterator: Option<FnProcess>,
    pub next_new_process: Option<FnProcessPtr>,
    pub spawn_breakpoint_name: Option<FnProcessBuf>,
}

/// A loaded, checked DLL with the callbacks installed.
#[derive(Debug)]
pub struct Dll {
    pub path: PathBuf,
    pub version: String,
    /// 2 (MPI-1 interface) or 3 (MPI-2).
    pub compatibility: i32,
    pub(crate) entry: EntryPoints,
    _library: Library,
}

static LOADED: Mutex<Vec<&'static Dll>> = Mutex::new(Vec::new());

impl Dll {
    /// Loads the DLL at `path` (once per host process), checks it and
    /// installs the callback tables. Trust checks are the caller's job
    /// (see `locate`): this runs the DLL's code.
    pub fn load(path: &Path) -> Result<&'static Dll> {
        let canonical = path.canonicalize().map_err(|e| Error::DllMissing {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dll) = loaded.iter().find(|d| d.path == canonical) {
            return Ok(dll);
        }
        let dll: &'static Dll = Box::leak(Box::new(Self::open(&canonical)?));
        loaded.push(dll);
        Ok(dll)
    }

    fn open(path: &Path) -> Result<Dll> {
        let load_err = |detail: String| Error::DllLoad {
            path: path.to_path_buf(),
            detail,
        };
        // RTLD_NOW: an unresolved symbol is an error now, not a crash later.
        // SAFETY: loading runs the library's initialisers; the caller has
        // decided to trust this file.
        let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| load_err(error_chain(&e)))?;
        let entry = resolve_entry_points(&library).map_err(load_err)?;
        let incompatible = |detail: String| Error::DllIncompatible {
            path: path.to_path_buf(),
            detail,
        };

        // SAFETY: resolved with the interface's signature; takes no arguments.
        let compatibility = unsafe { (entry.version_compatibility)() };
        let table: *const c_void = match compatibility {
            2 => (&raw const callbacks::mpi1::BASIC).cast(),
            3 => (&raw const callbacks::mpi2::BASIC).cast(),
            other => {
                return Err(incompatible(format!(
                    "interface compatibility {other}; this host speaks 2 (MPI-1) and 3 (MPI-2)"
                )))
            }
        };
        if compatibility == 3 && entry.mpi2.is_none() {
            return Err(incompatible(
                "claims compatibility 3 but lacks the MPI-2 entry points \
                 mqs_setup_job, mqs_destroy_job_info, mqs_set_process_identity"
                    .into(),
            ));
        }
        // A DLL without mqs_dll_taddr_width predates it and uses the
        // platform's unsigned long, which is ours.
        let width = match entry.dll_taddr_width {
            // SAFETY: resolved with the interface's signature.
            Some(f) => unsafe { f() },
            None => size_of::<std::ffi::c_ulong>() as c_int,
        };
        if width != size_of::<mqs_abi::ffi::mpi1::mqs_taddr_t>() as c_int {
            return Err(incompatible(format!(
                "its target addresses are {width} bytes wide, this host's are {}",
                size_of::<mqs_abi::ffi::mpi1::mqs_taddr_t>()
            )));
        }
        // SAFETY: the table is a static with the layout the DLL's level expects.
        unsafe { (entry.setup_basic_callbacks)(table) };
        // SAFETY: returns a static string or NULL.
        let version = unsafe { static_str((entry.version_string)()) }
            .unwrap_or_else(|| "(no version string)".into());
        Ok(Dll {
            path: path.to_path_buf(),
            version,
            compatibility,
            entry,
            _library: library,
        })
    }

    pub fn is_mpi2(&self) -> bool {
        self.compatibility == 3
    }

    pub fn has_comm_group(&self) -> bool {
        self.entry.get_comm_group.is_some()
    }

    /// The version string as the DLL gives it now: a DLL may name the MPI it
    /// detected once it has seen an image (ours does).
    pub fn current_version(&self) -> String {
        // SAFETY: takes nothing, returns a static string or NULL.
        unsafe { static_str((self.entry.version_string)()) }.unwrap_or_else(|| self.version.clone())
    }

    /// The DLL's own text for a code, if it has one. For mqs_no_information
    /// this is where a DLL can say *why* it knows nothing.
    pub fn code_text(&self, code: i32) -> Option<String> {
        // SAFETY: takes an int, returns a static string or NULL.
        unsafe { static_str((self.entry.dll_error_string)(code)) }.filter(|t| !t.is_empty())
    }

    /// Text for one of the DLL's own codes.
    pub fn error_string(&self, code: i32) -> String {
        // SAFETY: takes an int, returns a static string or NULL.
        let text = unsafe { static_str((self.entry.dll_error_string)(code)) };
        match text {
            Some(t) if !t.is_empty() => format!("{t} (code {code})"),
            _ => format!("error code {code}"),
        }
    }
}

/// An error with its causes: libloading keeps dlerror()'s text in the source.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Copies a static C string the DLL returned.
///
/// # Safety
/// `ptr` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn static_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

fn resolve_entry_points(lib: &Library) -> std::result::Result<EntryPoints, String> {
    fn get<T: Copy>(lib: &Library, name: &str) -> Option<T> {
        // SAFETY: the symbol is used with the signature the interface gives
        // it; the library is never unloaded, so the pointer stays valid.
        let symbol: Option<Symbol<T>> = unsafe { lib.get(name.as_bytes()) }.ok();
        symbol.map(|s| *s)
    }
    // Each entry point is named once: required ones must all resolve (the
    // error lists every one missing), optional ones may be absent.
    macro_rules! entry_points {
        (required { $($field:ident = $name:literal,)* }
         optional { $($opt:ident = $opt_name:literal,)* }
         mpi2 = $mpi2:expr) => {{
            $(let $field = get(lib, $name);)*
            let missing: Vec<&str> = [$(($name, $field.is_some()),)*]
                .iter()
                .filter(|(_, found)| !found)
                .map(|(name, _)| *name)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "not a message-queue DLL: missing entry points {}",
                    missing.join(", ")
                ));
            }
            EntryPoints {
                $($field: $field.ok_or_else(String::new)?,)*
                $($opt: get(lib, $opt_name),)*
                mpi2: $mpi2,
            }
        }};
    }

    let mpi2 = match (
        get(lib, "mqs_setup_job"),
        get(lib, "mqs_destroy_job_info"),
        get(lib, "mqs_set_process_identity"),
    ) {
        (Some(setup_job), Some(destroy_job_info), Some(set_process_identity)) => {
            Some(Mpi2EntryPoints {
                setup_job,
                destroy_job_info,
                set_process_identity,
                setup_new_process_iterator: get(lib, "mqs_setup_new_process_iterator"),
                next_new_process: get(lib, "mqs_next_new_process"),
                spawn_breakpoint_name: get(lib, "mqs_spawn_breakpoint_name"),
            })
        }
        _ => None,
    };

    Ok(entry_points! {
        required {
            setup_basic_callbacks = "mqs_setup_basic_callbacks",
            version_string = "mqs_version_string",
            version_compatibility = "mqs_version_compatibility",
            dll_error_string = "mqs_dll_error_string",
            setup_image = "mqs_setup_image",
            image_has_queues = "mqs_image_has_queues",
            destroy_image_info = "mqs_destroy_image_info",
            setup_process = "mqs_setup_process",
            process_has_queues = "mqs_process_has_queues",
            destroy_process_info = "mqs_destroy_process_info",
            update_communicator_list = "mqs_update_communicator_list",
            setup_communicator_iterator = "mqs_setup_communicator_iterator",
            get_communicator = "mqs_get_communicator",
            next_communicator = "mqs_next_communicator",
            setup_operation_iterator = "mqs_setup_operation_iterator",
            next_operation = "mqs_next_operation",
        }
        optional {
            dll_taddr_width = "mqs_dll_taddr_width",
            get_comm_group = "mqs_get_comm_group",
        }
        mpi2 = mpi2
    })
}
