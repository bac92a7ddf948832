//! Loading a message-queue DLL: resolve its entry points, check that it
//! speaks our interface, hand it the callback tables. A DLL is never
//! unloaded (the interface promises that), so each is loaded once per host
//! process and kept for good.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use mqs_abi::ffi::{mpi1, mpi2};

use super::callbacks;
use crate::{Error, Result};

/// The DLL's entry points, resolved by the tables `mqs-abi` generates from
/// the header: the common ones, and the MPI-2 ones of a DLL that has them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryPoints {
    pub common: mpi1::entry::EntryPoints,
    pub mpi2: Option<mpi2::entry::Mpi2EntryPoints>,
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
        let canonical = crate::process::canonical(path);
        let canonical = canonical.map_err(|e| Error::DllMissing {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let mut loaded = crate::sync::lock(&LOADED);
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
        let compatibility = unsafe { (entry.common.mqs_version_compatibility)() };
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
            let required: Vec<&str> = mqs_abi::ENTRY_POINTS
                .iter()
                .filter(|e| e.need == mqs_abi::Need::RequiredForMpi2)
                .map(|e| e.name)
                .collect();
            return Err(incompatible(format!(
                "claims compatibility 3 but lacks the MPI-2 entry points {}",
                required.join(", ")
            )));
        }
        // A DLL without mqs_dll_taddr_width predates it and uses the
        // platform's unsigned long, which is ours.
        let width = match entry.common.mqs_dll_taddr_width {
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
        unsafe { (entry.common.mqs_setup_basic_callbacks)(table.cast()) };
        // SAFETY: returns a static string or NULL.
        let version = unsafe { static_str((entry.common.mqs_version_string)()) }
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
        self.entry.common.mqs_get_comm_group.is_some()
    }

    /// The version string as the DLL gives it now: a DLL may name the MPI it
    /// detected once it has seen an image (ours does).
    pub fn current_version(&self) -> String {
        // SAFETY: takes nothing, returns a static string or NULL.
        unsafe { static_str((self.entry.common.mqs_version_string)()) }
            .unwrap_or_else(|| self.version.clone())
    }

    /// The DLL's own text for a code, if it has one. For mqs_no_information
    /// this is where a DLL can say *why* it knows nothing.
    pub fn code_text(&self, code: i32) -> Option<String> {
        // SAFETY: takes an int, returns a static string or NULL.
        unsafe { static_str((self.entry.common.mqs_dll_error_string)(code)) }
            .filter(|t| !t.is_empty())
    }

    /// Text for one of the DLL's own codes.
    pub fn error_string(&self, code: i32) -> String {
        // SAFETY: takes an int, returns a static string or NULL.
        let text = unsafe { static_str((self.entry.common.mqs_dll_error_string)(code)) };
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
    let lookup = |name: &'static CStr| {
        // SAFETY: dlsym only; the address is used with the signature the
        // header gives the name, and the library is never unloaded.
        let symbol = unsafe { lib.get::<*mut c_void>(name.to_bytes()) }.ok()?;
        std::ptr::NonNull::new(symbol.into_raw().cast::<c_void>())
    };
    // SAFETY: `lookup` gives the addresses of the DLL's functions of these
    // names, which have the header's signatures (that is the interface).
    let common = unsafe { mpi1::entry::EntryPoints::resolve(lookup) }.map_err(|missing| {
        format!(
            "not a message-queue DLL: missing entry points {}",
            missing.join(", ")
        )
    })?;
    // SAFETY: as above.
    let mpi2 = unsafe { mpi2::entry::Mpi2EntryPoints::resolve(lookup) }.ok();
    Ok(EntryPoints { common, mpi2 })
}
