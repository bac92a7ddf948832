//! The host as a library for debuggers: `libmqs_debugger.so`.
//!
//! gdb's and lldb's `mpi queues` (`debuggers/`) load it with ctypes. They
//! describe their processes and answer what the DLL asks (memory, symbols,
//! types) through a table of C functions ([`Answers`]); the library drives
//! the message-queue DLL through mqs-core's [`Session`](mqs_core::dll::Session),
//! the same session mqs-dump uses, and prints with mqs-analysis's renderer,
//! so the debuggers list exactly what mqs-dump lists. The Python keeps only
//! what is the debugger's: its processes, its answers, its command, and the
//! helper process the DLL runs in by default.
//!
//! Four entry points, every one under `catch_unwind` (nothing unwinds
//! into the debugger). A process is described as `{"pid", "executable",
//! "global_rank", "pointer_size", "local_live"}`.
//! - `mqs_debugger_plan(request, answers, &out)`: the DLL and rank of each
//!   process, as mqs-dump finds them; runs no DLL. `request` is `{"dll":
//!   PATH or null (the one each process names), "trust_dll", "by_default",
//!   "processes": [..]}`; `out` a JSON list with, per process,
//!   `{"global_rank", "dll", "chosen"}` or `{"global_rank", "error",
//!   "exit_code"}`. Returns 0, or 1 with `out` the error.
//! - `mqs_debugger_dump(job, answers, &out)`: reads the processes of `job`
//!   (`{"dll": PATH, "processes": [..]}`, each with its `global_rank` and
//!   `chosen`, how its DLL was chosen, from the plan) through the DLL;
//!   `out` is a line of JSON with, per process, `{"ok": true}` or
//!   `{"error": TEXT, "exit_code": N}`, then each dump (docs/json.md's
//!   process) on a line of its own. Returns 0, or 1 with `out` the one
//!   line saying why the DLL cannot be used at all.
//! - `mqs_debugger_render(listing, json, &out)`: mqs-dump's text (or, with
//!   `json` non-zero, its `--json` document) of `{"processes": [DUMP..],
//!   "failures": [..], "dll_output": [[INDEX, [LINE..]]..]}`. Returns 0, or
//!   1 with `out` the error.
//! - `mqs_debugger_free(out)`: frees a string either one returned.

mod answers;
mod error;
mod job;
mod plan;

use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use answers::Answers;
pub use answers::Described;
pub use error::Error;
pub use job::{answer_lines, dump, render, Job, Listing, Outcome};
pub use plan::{plan, Planned, Request};

/// The request's text.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string that outlives the call.
unsafe fn request_text<'a>(text: *const c_char) -> Result<&'a str, Error> {
    if text.is_null() {
        return Err(Error::Null);
    }
    // SAFETY: a NUL-terminated string, per the caller's contract.
    unsafe { CStr::from_ptr(text) }
        .to_str()
        .map_err(|_| Error::Text)
}

/// Runs `body` and hands its text to the debugger in `out`: 0 with the
/// answer, 1 with the error. Nothing unwinds past here.
///
/// # Safety
/// `out` is NULL or points to a `char *` the debugger owns.
unsafe fn answer(out: *mut *mut c_char, body: impl FnOnce() -> Result<String, Error>) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::Panic(what))
    });
    let (rc, text) = match result {
        Ok(text) => (0, text),
        Err(e) => (1, e.to_string()),
    };
    if out.is_null() {
        return rc;
    }
    // A NUL inside JSON or an error line cannot happen (JSON escapes it);
    // were it there, the text is cut at it rather than lost.
    let text = CString::new(text).unwrap_or_else(|e| {
        let at = e.nul_position();
        let mut bytes = e.into_vec();
        bytes.truncate(at);
        CString::new(bytes).unwrap_or_default()
    });
    // SAFETY: `out` points to a `char *`, per the caller's contract.
    unsafe { *out = text.into_raw() };
    rc
}

/// [`answer`] for an entry point whose request is JSON of shape `R`.
///
/// # Safety
/// `request` is NULL or a NUL-terminated string; `out` as for [`answer`].
unsafe fn answer_request<R: serde::de::DeserializeOwned>(
    request: *const c_char,
    out: *mut *mut c_char,
    body: impl FnOnce(R) -> Result<String, Error>,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { answer(out, || body(serde_json::from_str(request_text(request)?)?)) }
}

/// The DLL and rank of each of the debugger's processes (see the crate's doc).
///
/// # Safety
/// As `mqs_debugger_dump`.
#[no_mangle]
pub unsafe extern "C" fn mqs_debugger_plan(
    request: *const c_char,
    answers: *const Answers,
    out: *mut *mut c_char,
) -> c_int {
    // SAFETY: per this function's contract; `answers` is NULL or valid.
    unsafe {
        answer_request(request, out, |request: Request| {
            let answers = answers.as_ref().copied().ok_or(Error::Null)?;
            Ok(serde_json::to_string(&plan(&request, answers))?)
        })
    }
}

/// Reads the processes of a job through its DLL (see the crate's doc).
///
/// # Safety
/// `job` is a NUL-terminated string; `answers` is NULL or a valid table
/// whose functions may be called until this returns; `out` points to a
/// `char *` that receives a string to pass to `mqs_debugger_free`.
#[no_mangle]
pub unsafe extern "C" fn mqs_debugger_dump(
    job: *const c_char,
    answers: *const Answers,
    out: *mut *mut c_char,
) -> c_int {
    // SAFETY: per this function's contract; `answers` is NULL or valid.
    unsafe {
        answer_request(job, out, |job: Job| {
            let answers = answers.as_ref().copied().ok_or(Error::Null)?;
            Ok(answer_lines(&dump(&job, answers)?)?)
        })
    }
}

/// mqs-dump's listing of a debugger's dumps (see the crate's doc).
///
/// # Safety
/// `listing` is a NUL-terminated string; `out` as for `mqs_debugger_dump`.
#[no_mangle]
pub unsafe extern "C" fn mqs_debugger_render(
    listing: *const c_char,
    json: c_int,
    out: *mut *mut c_char,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer_request(listing, out, |listing: Listing| {
            Ok(render(listing, json != 0))
        })
    }
}

/// Frees a string another entry point returned.
///
/// # Safety
/// `text` is NULL or such a string, not freed before.
#[no_mangle]
pub unsafe extern "C" fn mqs_debugger_free(text: *mut c_char) {
    if text.is_null() {
        return;
    }
    // SAFETY: made by CString::into_raw in `answer`, per the contract.
    drop(unsafe { CString::from_raw(text) });
}

#[cfg(test)]
mod tests;
