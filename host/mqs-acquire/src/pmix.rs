//! A PMIx launcher's job, through the PMIx tool interface. Open MPI 5's
//! `prterun` (and `mpirun`, which becomes it) has no MPIR symbols: it
//! serves its process table to tools that connect to it instead.
//!
//! We load the PMIx library the launcher itself maps (so the client speaks
//! the server's version, and mqs builds and runs without PMIx installed),
//! connect to the launcher as a tool by its pid, ask for the namespaces of
//! its jobs and for the first one's process table, and disconnect. The
//! launcher must be running: a stopped one cannot answer, so callers ask
//! before they stop anything. The query runs in a thread of its own with a
//! time limit, since a launcher that does not answer would otherwise hold
//! mqs-dump forever.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use crate::mpir::ProcDesc;
use crate::{Error, Result};
use mqs_core::interface::{ImageSymbols, Target};

/// How long connecting and both queries may take together. prterun answers
/// in milliseconds; a launcher that is stopped or wedged never does.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The file name every PMIx library's starts with.
const LIBRARY_PREFIX: &str = "libpmix.so";

/// The PMIx library `target` maps, if it looks like a PMIx launcher: it
/// maps libpmix but is neither an MPI process (no `MPIR_dll_name`) nor an
/// MPIR starter. Ranks of an Open MPI 5 job map libpmix as clients; they
/// have `MPIR_dll_name`.
pub fn launcher_library(target: &dyn Target, symbols: &dyn ImageSymbols) -> Option<PathBuf> {
    if symbols.find_symbol("MPIR_dll_name").is_some() || crate::mpir::is_starter(symbols) {
        return None;
    }
    let objects = target.mapped_objects().ok()?;
    objects
        .into_iter()
        .find(|o| {
            o.path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(LIBRARY_PREFIX))
        })
        .map(|o| o.contents.unwrap_or(o.path))
}

/// The process table of the first job the PMIx launcher `pid` runs, in rank
/// order, asked through `library` within `timeout`. An empty table: the
/// launcher runs no job (yet).
pub fn proc_table(pid: i32, library: &Path, timeout: Duration) -> Result<Vec<ProcDesc>> {
    let fail = |detail: String| Error::Pmix { pid, detail };
    let (tx, rx) = mpsc::channel();
    let path = library.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("mqs-pmix".into())
        .spawn(move || {
            // A receiver that gave up is no reason to fail here.
            let _ = tx.send(query(pid, &path));
        });
    if let Err(e) = spawned {
        return Err(fail(format!("cannot start the thread that asks it: {e}")));
    }
    match rx.recv_timeout(timeout) {
        Ok(answer) => answer.map_err(fail),
        Err(_) => Err(fail(format!(
            "it did not answer within {} s (is it stopped?); give the pid of its ranks instead",
            timeout.as_secs()
        ))),
    }
}

// The PMIx ABI (pmix_common.h, PMIx v4 and v5): only what the queries use.
// The sizes are checked below and against the real header by the
// end-to-end tests, which run prterun.

const PMIX_SUCCESS: i32 = 0;
const PMIX_STRING: u16 = 3;
const PMIX_PID: u16 = 5;
const PMIX_UINT32: u16 = 14;
const PMIX_PROC_INFO: u16 = 38;
const PMIX_DATA_ARRAY: u16 = 39;
const KEY_SERVER_PIDINFO: &str = "pmix.srvr.pidinfo";
const KEY_CONNECT_MAX_RETRIES: &str = "pmix.tool.mretries";
const KEY_QUERY_NAMESPACES: &str = "pmix.qry.ns";
const KEY_QUERY_PROC_TABLE: &str = "pmix.qry.ptable";
const KEY_NSPACE: &str = "pmix.nspace";
/// PMIX_MAX_KEYLEN + 1.
const KEY_BYTES: usize = 512;
/// PMIX_MAX_NSLEN + 1.
const NSPACE_BYTES: usize = 256;

#[repr(C)]
struct PmixProc {
    nspace: [c_char; NSPACE_BYTES],
    rank: u32,
}

/// `pmix_value_t`: a type tag and a union whose largest member is three
/// words.
#[repr(C)]
#[derive(Clone, Copy)]
struct PmixValue {
    kind: u16,
    data: [u64; 3],
}

#[repr(C)]
struct PmixInfo {
    key: [c_char; KEY_BYTES],
    flags: u32,
    value: PmixValue,
}

#[repr(C)]
struct PmixQuery {
    keys: *mut *mut c_char,
    qualifiers: *mut PmixInfo,
    nqual: usize,
}

#[repr(C)]
struct PmixProcInfo {
    proc_: PmixProc,
    hostname: *const c_char,
    executable_name: *const c_char,
    pid: i32,
    exit_code: i32,
    state: u8,
}

#[repr(C)]
struct PmixDataArray {
    kind: u16,
    size: usize,
    array: *const c_void,
}

const _: () = {
    assert!(std::mem::size_of::<PmixProc>() == 260);
    assert!(std::mem::size_of::<PmixValue>() == 32);
    assert!(std::mem::size_of::<PmixInfo>() == 552);
    assert!(std::mem::offset_of!(PmixInfo, value) == 520);
    assert!(std::mem::size_of::<PmixQuery>() == 24);
    assert!(std::mem::size_of::<PmixProcInfo>() == 296);
    assert!(std::mem::offset_of!(PmixProcInfo, pid) == 280);
    assert!(std::mem::size_of::<PmixDataArray>() == 24);
};

impl PmixInfo {
    fn new(key: &str, value: PmixValue) -> Self {
        let mut info = PmixInfo {
            key: [0; KEY_BYTES],
            flags: 0,
            value,
        };
        for (dst, &b) in info.key.iter_mut().zip(key.as_bytes()) {
            *dst = b as c_char;
        }
        info
    }

    fn key(&self) -> String {
        let bytes: Vec<u8> = self
            .key
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl PmixValue {
    fn word(kind: u16, word: u64) -> Self {
        PmixValue {
            kind,
            data: [word, 0, 0],
        }
    }
}

type ToolInit = unsafe extern "C" fn(*mut PmixProc, *mut PmixInfo, usize) -> i32;
type ToolFinalize = unsafe extern "C" fn() -> i32;
type QueryInfo = unsafe extern "C" fn(*mut PmixQuery, usize, *mut *mut PmixInfo, *mut usize) -> i32;
type InfoFree = unsafe extern "C" fn(*mut PmixInfo, usize);
type ErrorString = unsafe extern "C" fn(i32) -> *const c_char;

/// One tool connection at a time per process: PMIx keeps it in globals.
static CONNECTION: Mutex<()> = Mutex::new(());

/// The entry points of a loaded PMIx library. The library is never
/// unloaded: its progress thread may outlive a query that timed out.
struct Pmix {
    tool_init: ToolInit,
    tool_finalize: ToolFinalize,
    query_info: QueryInfo,
    info_free: Option<InfoFree>,
    error_string: Option<ErrorString>,
}

impl Pmix {
    fn load(path: &Path) -> std::result::Result<Self, String> {
        // SAFETY: loading the PMIx library the launcher itself runs; its
        // initialisers are those every PMIx tool runs.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load its PMIx library {}: {e}", path.display()))?;
        let library: &'static libloading::Library = Box::leak(Box::new(library));
        let missing =
            |name: &str, e: libloading::Error| format!("{} has no {name}: {e}", path.display());
        // SAFETY: each symbol is looked up with the C signature pmix.h
        // declares for it.
        unsafe {
            Ok(Pmix {
                tool_init: *library
                    .get::<ToolInit>(b"PMIx_tool_init\0")
                    .map_err(|e| missing("PMIx_tool_init", e))?,
                tool_finalize: *library
                    .get::<ToolFinalize>(b"PMIx_tool_finalize\0")
                    .map_err(|e| missing("PMIx_tool_finalize", e))?,
                query_info: *library
                    .get::<QueryInfo>(b"PMIx_Query_info\0")
                    .map_err(|e| missing("PMIx_Query_info", e))?,
                info_free: library
                    .get::<InfoFree>(b"PMIx_Info_free\0")
                    .ok()
                    .map(|s| *s),
                error_string: library
                    .get::<ErrorString>(b"PMIx_Error_string\0")
                    .ok()
                    .map(|s| *s),
            })
        }
    }

    fn status(&self, rc: i32) -> String {
        let name = self.error_string.and_then(|f| {
            // SAFETY: PMIx_Error_string returns a static string for any code.
            let s = unsafe { f(rc) };
            // SAFETY: non-null, NUL-terminated and static, as above.
            (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
        });
        match name {
            Some(name) => format!("{name} ({rc})"),
            None => format!("status {rc}"),
        }
    }

    /// Runs one query with `key` and the qualifier `nspace` (if any) and
    /// hands the results to `read`, then frees them.
    fn query<T>(
        &self,
        key: &str,
        nspace: Option<&CStr>,
        read: impl FnOnce(&[PmixInfo]) -> std::result::Result<T, String>,
    ) -> std::result::Result<T, String> {
        let key_c = CString::new(key).expect("a key without NUL");
        let mut keys = [key_c.as_ptr() as *mut c_char, std::ptr::null_mut()];
        let mut qualifiers: Vec<PmixInfo> = nspace
            .map(|ns| PmixInfo::new(KEY_NSPACE, PmixValue::word(PMIX_STRING, ns.as_ptr() as u64)))
            .into_iter()
            .collect();
        let mut query = PmixQuery {
            keys: keys.as_mut_ptr(),
            qualifiers: if qualifiers.is_empty() {
                std::ptr::null_mut()
            } else {
                qualifiers.as_mut_ptr()
            },
            nqual: qualifiers.len(),
        };
        let mut results: *mut PmixInfo = std::ptr::null_mut();
        let mut count = 0usize;
        // SAFETY: the query, its NULL-terminated key list and its
        // qualifiers live until the call returns (it blocks until the
        // answer is in); results and count are ours to receive.
        let rc = unsafe { (self.query_info)(&mut query, 1, &mut results, &mut count) };
        if rc != PMIX_SUCCESS {
            return Err(format!("its answer to {key} was {}", self.status(rc)));
        }
        let answer = if results.is_null() {
            read(&[])
        } else {
            // SAFETY: PMIx returned `count` initialised infos at `results`.
            read(unsafe { std::slice::from_raw_parts(results, count) })
        };
        if let (Some(free), false) = (self.info_free, results.is_null()) {
            // SAFETY: the array PMIx allocated, freed once, unused after.
            unsafe { free(results, count) };
        }
        answer
    }
}

/// Connects, asks and disconnects; an error says what failed.
fn query(pid: i32, library: &Path) -> std::result::Result<Vec<ProcDesc>, String> {
    let pmix = Pmix::load(library)?;
    let _one = CONNECTION.lock().unwrap_or_else(|p| p.into_inner());
    let mut me = PmixProc {
        nspace: [0; NSPACE_BYTES],
        rank: 0,
    };
    let mut init = [
        PmixInfo::new(
            KEY_SERVER_PIDINFO,
            PmixValue::word(PMIX_PID, pid as u32 as u64),
        ),
        // Fail soon rather than retry for long when it does not listen.
        PmixInfo::new(KEY_CONNECT_MAX_RETRIES, PmixValue::word(PMIX_UINT32, 2)),
    ];
    // SAFETY: `me` receives our identity; the infos are read during the call.
    let rc = unsafe { (pmix.tool_init)(&mut me, init.as_mut_ptr(), init.len()) };
    if rc != PMIX_SUCCESS {
        return Err(format!(
            "PMIx_tool_init ({}) could not connect to it: {}; give the pid of the \
             job's prterun or mpirun (one of this user's, running), or of its ranks",
            library.display(),
            pmix.status(rc)
        ));
    }
    let answer = ask(&pmix);
    // SAFETY: pairs the successful PMIx_tool_init above.
    unsafe { (pmix.tool_finalize)() };
    answer
}

fn ask(pmix: &Pmix) -> std::result::Result<Vec<ProcDesc>, String> {
    let namespaces = pmix.query(KEY_QUERY_NAMESPACES, None, |results| {
        let list = results
            .iter()
            .find(|i| i.key() == KEY_QUERY_NAMESPACES && i.value.kind == PMIX_STRING)
            .map(|i| {
                // SAFETY: a PMIX_STRING value holds a NUL-terminated string.
                unsafe { string_at(i.value.data[0]) }
            })
            .unwrap_or_default();
        Ok(split_namespaces(&list))
    })?;
    let Some(first) = namespaces.first() else {
        return Ok(Vec::new());
    };
    let nspace = CString::new(first.as_str()).map_err(|e| e.to_string())?;
    pmix.query(KEY_QUERY_PROC_TABLE, Some(&nspace), |results| {
        let table = results
            .iter()
            .find(|i| i.key() == KEY_QUERY_PROC_TABLE)
            .ok_or_else(|| "no process table in its answer".to_owned())?;
        if table.value.kind != PMIX_DATA_ARRAY || table.value.data[0] == 0 {
            return Err(format!(
                "its process table has PMIx type {}, not an array",
                table.value.kind
            ));
        }
        // SAFETY: a PMIX_DATA_ARRAY value points to a pmix_data_array_t.
        let array = unsafe { &*(table.value.data[0] as *const PmixDataArray) };
        if array.kind != PMIX_PROC_INFO || (array.array.is_null() && array.size > 0) {
            return Err(format!(
                "its process table holds PMIx type {}, not process infos",
                array.kind
            ));
        }
        let infos: &[PmixProcInfo] = if array.size == 0 {
            &[]
        } else {
            // SAFETY: `size` process infos at `array`, as its type says.
            unsafe { std::slice::from_raw_parts(array.array.cast(), array.size) }
        };
        let mut table: Vec<ProcDesc> = infos
            .iter()
            .map(|p| ProcDesc {
                rank: p.proc_.rank as usize,
                // SAFETY: PMIx fills both with NUL-terminated strings or NULL.
                host: unsafe { string_at(p.hostname as u64) },
                // SAFETY: as above.
                executable: unsafe { string_at(p.executable_name as u64) },
                pid: p.pid,
            })
            .collect();
        table.sort_by_key(|p| p.rank);
        Ok(table)
    })
}

/// The string at `addr` (empty for NULL).
///
/// # Safety
/// `addr` is 0 or the address of a NUL-terminated string.
unsafe fn string_at(addr: u64) -> String {
    if addr == 0 {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(addr as *const c_char) }
        .to_string_lossy()
        .into_owned()
}

/// The namespaces of a "pmix.qry.ns" answer: comma-separated, in the order
/// the jobs were started.
fn split_namespaces(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_split_in_order_without_empties() {
        assert_eq!(
            split_namespaces("prterun-vm-12421@1,prterun-vm-12421@2"),
            ["prterun-vm-12421@1", "prterun-vm-12421@2"]
        );
        assert_eq!(split_namespaces(""), Vec::<String>::new());
        assert_eq!(split_namespaces(" a@1 ,,"), ["a@1"]);
    }

    #[test]
    fn keys_are_written_and_read_back_nul_terminated() {
        let info = PmixInfo::new(KEY_QUERY_PROC_TABLE, PmixValue::word(PMIX_STRING, 0));
        assert_eq!(info.key(), KEY_QUERY_PROC_TABLE);
        assert_eq!(info.key[KEY_QUERY_PROC_TABLE.len()], 0);
    }

    #[test]
    fn a_library_that_is_not_pmix_is_a_clear_error() {
        let err = proc_table(1, Path::new("/nonexistent/libpmix.so.2"), TIMEOUT).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cannot load its PMIx library"), "{text}");
        assert!(matches!(err, Error::Pmix { pid: 1, .. }));
    }
}
