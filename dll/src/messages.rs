//! Static strings built at run time.
//!
//! The interface says strings the DLL returns are never freed, so a message
//! that names what is missing (or the MPI that was detected) must live for
//! ever: each distinct text is leaked once and reused, and the number of
//! distinct texts is capped so that a debugger looping over odd images
//! cannot grow the DLL without bound. Past the cap a fixed message is used.

use std::ffi::{CStr, CString};
use std::sync::Mutex;

use crate::errors::DllError;
use crate::types::Missing;

/// Most distinct texts ever leaked.
pub const MAX_TEXTS: usize = 64;

static TEXTS: Mutex<Vec<&'static CStr>> = Mutex::new(Vec::new());

/// A static copy of `text` (NUL bytes dropped), or `fallback` once the cap
/// is reached or another thread holds the table (never blocks).
pub fn intern(text: &str, fallback: &'static CStr) -> &'static CStr {
    let Ok(c) = CString::new(text.replace('\0', "")) else {
        return fallback;
    };
    let mut texts = match TEXTS.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return fallback,
    };
    intern_into(&mut texts, c, fallback)
}

fn intern_into(
    texts: &mut Vec<&'static CStr>,
    c: CString,
    fallback: &'static CStr,
) -> &'static CStr {
    if let Some(found) = texts.iter().find(|t| **t == c.as_c_str()) {
        return found;
    }
    if texts.len() >= MAX_TEXTS {
        return fallback;
    }
    let leaked: &'static CStr = Box::leak(c.into_boxed_c_str());
    texts.push(leaked);
    leaked
}

/// Escapes `%` so that a name can sit in a printf format.
fn escape(s: &str) -> String {
    s.replace('%', "%%")
}

const GENERIC_IMAGE: &CStr = c"The Open MPI message queues of %s cannot be shown: the debug information or symbols they need are missing (Open MPI built without -g for ompi/debuggers, stripped, or an unsupported version).";

/// The has_queues message for a missing type, field or symbol: a printf
/// format with exactly one `%s` (the image name).
pub fn missing_message(m: Missing) -> &'static CStr {
    let text = match m {
        Missing::Type(t) => format!(
            "Open MPI message queues of %s cannot be shown: type {} has no debug information. Open MPI was built without -g for ompi/debuggers, or its libraries were stripped.",
            escape(t)
        ),
        Missing::Field(t, f) => format!(
            "Open MPI message queues of %s cannot be shown: type {} has no field {}. This Open MPI version is not supported by this DLL.",
            escape(t),
            escape(f)
        ),
        Missing::Symbol(s) => format!(
            "Open MPI message queues of %s cannot be shown: symbol {} was not found (not an Open MPI program, a static link without symbols, or an unsupported version).",
            escape(s)
        ),
    };
    intern(&text, GENERIC_IMAGE)
}

/// Why an image or process cannot show queues: a code and a static printf
/// format with one `%s` (or none, to fail silently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub code: DllError,
    pub message: Option<&'static CStr>,
}

impl Failure {
    /// A failure with the has_queues message naming what is missing.
    pub fn missing(m: Missing) -> Failure {
        Failure {
            code: m.error(),
            message: Some(missing_message(m)),
        }
    }

    /// A failure without a message.
    pub fn plain(code: DllError) -> Failure {
        Failure {
            code,
            message: None,
        }
    }
}

const GENERIC_MPICH: &CStr = c"The MPICH message queues of %s cannot be shown: the debug information or symbols they need are missing (MPICH configured without --enable-debuginfo, stripped, or an unsupported version).";

/// [`missing_message`] for MPICH.
pub fn mpich_missing_message(m: Missing) -> &'static CStr {
    let text = match m {
        Missing::Type(t) => format!(
            "MPICH message queues of %s cannot be shown: type {} has no debug information. MPICH was configured without --enable-debuginfo, or its libraries were stripped.",
            escape(t)
        ),
        Missing::Field(t, f) => format!(
            "MPICH message queues of %s cannot be shown: type {} has no field {}. This MPICH version or device is not supported by this DLL.",
            escape(t),
            escape(f)
        ),
        Missing::Symbol(s) => format!(
            "MPICH message queues of %s cannot be shown: symbol {} was not found (MPICH configured without --enable-debuginfo, or an unsupported version or device).",
            escape(s)
        ),
    };
    intern(&text, GENERIC_MPICH)
}

/// The image does not use Open MPI at all.
pub const NOT_OPEN_MPI: &CStr = c"%s does not use Open MPI (no symbol ompi_mpi_communicators): this DLL shows Open MPI message queues only.";

/// The image uses no MPI this DLL reads.
pub const NOT_AN_MPI: &CStr = c"%s uses no MPI this DLL reads: neither Open MPI (no symbol ompi_mpi_communicators, no opal_list_item_t type) nor MPICH built with --enable-debuginfo (no symbol MPIR_All_communicators, no MPIR_Comm_list type).";

/// The process's communicator table cannot be read.
pub const TABLE_UNREADABLE: &CStr = c"The Open MPI communicator table of %s cannot be read (corrupt memory, or the process is exiting).";

/// The process's MPICH communicator list cannot be read.
pub const MPICH_LIST_UNREADABLE: &CStr = c"The MPICH communicator list of %s cannot be read (corrupt memory, or the process is exiting).";

/// MPICH built without debugger support (Debian's): what is found
/// elsewhere, and what stays unknown.
pub const MPICH_NO_DEBUGGER_SUPPORT: &str = "MPICH built without debugger support: communicators are found among MPICH's communicator objects in use (MPIR_Comm_builtin, MPIR_Comm_mem), in order of context id, their names as MPICH keeps them; MPICH keeps no send queue, so sends are not listed (those that completed locally are not known at all)";

/// What the DLL detected, for the version string.
static DETECTED: Mutex<Option<&'static CStr>> = Mutex::new(None);

/// What the DLL reads, as its version string says it (a macro: `concat!`
/// takes only literals).
macro_rules! supported {
    () => {
        "for Open MPI 4.1 and 5.0 (ob1, pml ucx) and MPICH 4.0 (ch3, ch4)"
    };
}

/// The version string before any MPI was detected: the crate's version,
/// the interface level.
const VERSION_NONE: &CStr = {
    const TEXT: &str = if cfg!(feature = "mpi2") {
        concat!(
            "mqs message-queue DLL ",
            env!("CARGO_PKG_VERSION"),
            " (MPI-2 interface, compatibility 3) ",
            supported!(),
            "; no MPI detected yet\0"
        )
    } else {
        concat!(
            "mqs message-queue DLL ",
            env!("CARGO_PKG_VERSION"),
            " (MPI-1 interface, compatibility 2) ",
            supported!(),
            "; no MPI detected yet\0"
        )
    };
    match CStr::from_bytes_with_nul(TEXT.as_bytes()) {
        Ok(text) => text,
        Err(_) => c"mqs message-queue DLL",
    }
};

/// Records the MPI found in an image or process (`what`, e.g. "Open MPI
/// 4.1.4, PML ob1, ob1 debug info: yes") and the backend reading it
/// (`openmpi`, `mpich-ch3`, ...): the version string ends `detected: WHAT;
/// backend: NAME`, which hosts may show.
pub fn set_detected(what: &str, backend: &str) {
    let level = if cfg!(feature = "mpi2") {
        "MPI-2 interface, compatibility 3"
    } else {
        "MPI-1 interface, compatibility 2"
    };
    let text = format!(
        "mqs message-queue DLL {} ({level}) {}; detected: {}; backend: {backend}",
        env!("CARGO_PKG_VERSION"),
        supported!(),
        what.replace(';', ",")
    );
    let s = intern(&text, VERSION_NONE);
    if let Ok(mut d) = DETECTED.try_lock() {
        *d = Some(s);
    }
}

static NO_INFORMATION: std::sync::Mutex<Option<&'static CStr>> = std::sync::Mutex::new(None);

/// The generic text for mqs_no_information, when no reason was recorded.
const NO_INFORMATION_NONE: &CStr = c"mqs_no_information: nothing is known";

/// Records why the DLL is about to answer mqs_no_information. The
/// interface has no other channel for it: hosts that want the reason ask
/// mqs_dll_error_string(mqs_no_information) right after the call.
pub fn set_no_information_reason(why: &str) {
    let text = format!("mqs_no_information: {why}");
    let s = intern(&text, NO_INFORMATION_NONE);
    if let Ok(mut r) = NO_INFORMATION.try_lock() {
        *r = Some(s);
    }
}

/// The text for mqs_no_information: the latest reason, or the generic one.
pub fn no_information_text() -> &'static CStr {
    match NO_INFORMATION.try_lock() {
        Ok(r) => r.unwrap_or(NO_INFORMATION_NONE),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().unwrap_or(NO_INFORMATION_NONE),
        Err(std::sync::TryLockError::WouldBlock) => NO_INFORMATION_NONE,
    }
}

/// The text for one of the interface's or our codes (a static string); for
/// mqs_no_information, the latest reason the DLL recorded.
pub fn error_string(code: i32) -> &'static CStr {
    match code {
        0 => c"mqs_ok",
        1 => no_information_text(),
        2 => c"mqs_end_of_list",
        _ => match crate::errors::DllError::from_code(code) {
            Some(e) => e.text(),
            None => c"mqs DLL: unknown error code",
        },
    }
}

/// The version string: ours, and the MPI most recently detected.
pub fn version_string() -> &'static CStr {
    match DETECTED.try_lock() {
        Ok(d) => d.unwrap_or(VERSION_NONE),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().unwrap_or(VERSION_NONE),
        Err(std::sync::TryLockError::WouldBlock) => VERSION_NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent_s_count(c: &CStr) -> usize {
        let s = c.to_str().unwrap_or("");
        let mut n = 0;
        let mut chars = s.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch == '%' {
                let next = chars.next();
                assert!(matches!(next, Some('s' | '%')), "stray conversion in {s}");
                if next == Some('s') {
                    n += 1;
                }
            }
        }
        n
    }

    #[test]
    fn messages_have_exactly_one_percent_s() {
        for m in [
            Missing::Type("ompi_group_t"),
            Missing::Field("ompi_communicator_t", "c_name"),
            Missing::Symbol("ompi_mpi_communicators"),
            Missing::Type("weird%type"),
        ] {
            let msg = missing_message(m);
            assert_eq!(percent_s_count(msg), 1, "{msg:?}");
            let msg = mpich_missing_message(m);
            assert_eq!(percent_s_count(msg), 1, "{msg:?}");
        }
        for c in [
            NOT_OPEN_MPI,
            NOT_AN_MPI,
            TABLE_UNREADABLE,
            GENERIC_IMAGE,
            GENERIC_MPICH,
            MPICH_LIST_UNREADABLE,
        ] {
            assert_eq!(percent_s_count(c), 1);
        }
    }

    #[test]
    fn interning_reuses_and_caps() {
        // The shared table may be busy with another test's text (intern
        // then gives the fallback rather than wait): reuse is checked on a
        // table of this test's own.
        let a = intern("same text", c"fallback");
        assert!(a == c"same text" || a == c"fallback", "{a:?}");
        let mut table = Vec::new();
        let cs = |s: &str| CString::new(s).unwrap_or_default();
        let a = intern_into(&mut table, cs("same text"), c"fallback");
        let b = intern_into(&mut table, cs("same text"), c"fallback");
        assert!(std::ptr::eq(a, b));
        table.clear();
        for i in 0..MAX_TEXTS {
            let s = intern_into(&mut table, cs(&format!("text {i}")), c"fallback");
            assert_eq!(s.to_str().ok(), Some(format!("text {i}").as_str()));
        }
        assert_eq!(
            intern_into(&mut table, cs("one too many"), c"fallback"),
            c"fallback"
        );
        assert_eq!(
            intern_into(&mut table, cs("text 3"), c"fallback")
                .to_str()
                .ok(),
            Some("text 3")
        );
    }

    #[test]
    fn version_string_names_us() {
        let v = version_string().to_str().unwrap_or("");
        assert!(v.starts_with("mqs message-queue DLL"));
    }
}
