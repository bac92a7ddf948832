//! The DLL's private error codes (>= `mqs_first_user_code`) and their text.
//!
//! Codes are stable: hosts may log them, and only `messages::error_string` (exported
//! as `mqs_dll_error_string`) turns them into words.

use std::ffi::CStr;
use std::fmt;

/// Everything that can go wrong inside the DLL, one code each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DllError {
    /// `mqs_setup_basic_callbacks` was not called (or with NULL).
    NoBasicCallbacks = 100,
    /// The debugger passed a NULL pointer where one was required.
    NullArgument = 101,
    /// The image carries no DLL data: `mqs_setup_image` was not called.
    NoImageInfo = 102,
    /// The process carries no DLL data: `mqs_setup_process` was not called.
    NoProcessInfo = 103,
    /// The debugger's malloc returned NULL.
    OutOfMemory = 104,
    /// The image asks for no queue display (`MPIR_Ignore_queues`).
    SilentFailure = 105,
    /// The image does not look like a program of any MPI this DLL reads
    /// (the name is historical: Open MPI was the first).
    NotOpenMpi = 106,
    /// A symbol the DLL needs is missing.
    MissingSymbol = 107,
    /// A type the DLL needs has no debug information.
    MissingType = 108,
    /// A type lacks a field the DLL needs (unsupported version).
    MissingField = 109,
    /// The image's queues are not usable (`mqs_image_has_queues` failed).
    ImageHasNoQueues = 110,
    /// Target memory could not be read.
    ReadFailed = 111,
    /// Target memory holds values that cannot be right.
    Corrupt = 112,
    /// No current communicator (iterator not set up, or past its end).
    NoCurrentCommunicator = 113,
    /// `mqs_setup_operation_iterator` got an unknown queue class.
    BadOpClass = 114,
    /// `mqs_next_operation` without a successful setup.
    NoOperationIterator = 115,
    /// A call re-entered the DLL for the same object from another thread.
    Busy = 116,
    /// An internal error was caught at the boundary.
    Internal = 117,
    /// A safety limit (elements, reads) stopped the work.
    LimitReached = 118,
    /// The process belongs to no job the DLL knows (MPI-2).
    NoJobInfo = 119,
    /// A caller's buffer is too small.
    BufferTooSmall = 120,
    /// An identity outside the valid range (MPI-2).
    BadIdentity = 121,
    /// The current communicator vanished from the process.
    CommunicatorGone = 122,
    /// The target's basic type sizes are unusable.
    BadTypeSizes = 123,
}

impl DllError {
    /// Every code, for tests and documentation.
    pub const ALL: [DllError; 24] = [
        DllError::NoBasicCallbacks,
        DllError::NullArgument,
        DllError::NoImageInfo,
        DllError::NoProcessInfo,
        DllError::OutOfMemory,
        DllError::SilentFailure,
        DllError::NotOpenMpi,
        DllError::MissingSymbol,
        DllError::MissingType,
        DllError::MissingField,
        DllError::ImageHasNoQueues,
        DllError::ReadFailed,
        DllError::Corrupt,
        DllError::NoCurrentCommunicator,
        DllError::BadOpClass,
        DllError::NoOperationIterator,
        DllError::Busy,
        DllError::Internal,
        DllError::LimitReached,
        DllError::NoJobInfo,
        DllError::BufferTooSmall,
        DllError::BadIdentity,
        DllError::CommunicatorGone,
        DllError::BadTypeSizes,
    ];

    /// The number returned through the ABI.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The error for a code, if it is one of ours.
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| e.code() == code)
    }

    /// Static, NUL-terminated text (the DLL never frees what it returns).
    pub fn text(self) -> &'static CStr {
        match self {
            DllError::NoBasicCallbacks => {
                c"mqs DLL: the debugger did not call mqs_setup_basic_callbacks"
            }
            DllError::NullArgument => c"mqs DLL: a required pointer argument was NULL",
            DllError::NoImageInfo => {
                c"mqs DLL: the image has no DLL data (mqs_setup_image was not called)"
            }
            DllError::NoProcessInfo => {
                c"mqs DLL: the process has no DLL data (mqs_setup_process was not called)"
            }
            DllError::OutOfMemory => c"mqs DLL: the debugger could not allocate memory",
            DllError::SilentFailure => {
                c"mqs DLL: the MPI set MPIR_Ignore_queues: its message queues are not shown"
            }
            DllError::NotOpenMpi => {
                c"mqs DLL: this program uses no MPI this DLL reads (Open MPI 4.1, MPICH 4.0)"
            }
            DllError::MissingSymbol => {
                c"mqs DLL: a symbol the DLL needs is missing (unsupported MPI version, or built without debugger support?)"
            }
            DllError::MissingType => {
                c"mqs DLL: a type the DLL needs has no debug information (MPI built without -g, or stripped)"
            }
            DllError::MissingField => {
                c"mqs DLL: an MPI type lacks a field the DLL needs (unsupported MPI version?)"
            }
            DllError::ImageHasNoQueues => {
                c"mqs DLL: this image cannot show message queues (see mqs_image_has_queues)"
            }
            DllError::ReadFailed => c"mqs DLL: the process's memory could not be read",
            DllError::Corrupt => {
                c"mqs DLL: the MPI's data in the process is inconsistent (corrupt or changing)"
            }
            DllError::NoCurrentCommunicator => {
                c"mqs DLL: no current communicator in the communicator iterator"
            }
            DllError::BadOpClass => c"mqs DLL: unknown queue class (not 0, 1 or 2)",
            DllError::NoOperationIterator => {
                c"mqs DLL: mqs_next_operation called without a set-up operation iterator"
            }
            DllError::Busy => {
                c"mqs DLL: the DLL is already working on this object in another thread"
            }
            DllError::Internal => c"mqs DLL: internal error (caught; the DLL is still usable)",
            DllError::LimitReached => {
                c"mqs DLL: a safety limit on elements or memory reads was reached"
            }
            DllError::NoJobInfo => c"mqs DLL: the process's job has no DLL data",
            DllError::BufferTooSmall => c"mqs DLL: the buffer is too small for the answer",
            DllError::BadIdentity => c"mqs DLL: invalid process identity",
            DllError::CommunicatorGone => {
                c"mqs DLL: the current communicator no longer exists in the process"
            }
            DllError::BadTypeSizes => {
                c"mqs DLL: the target's basic type sizes are unusable (pointer or int size not 1, 2, 4 or 8)"
            }
        }
    }
}

impl fmt::Display for DllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.text().to_string_lossy(), self.code())
    }
}

impl std::error::Error for DllError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_user_codes_with_text() {
        let mut seen = std::collections::HashSet::new();
        for e in DllError::ALL {
            assert!(e.code() >= 100);
            assert!(seen.insert(e.code()));
            assert_eq!(DllError::from_code(e.code()), Some(e));
            assert_eq!(crate::messages::error_string(e.code()), e.text());
            assert!(!e.text().to_bytes().is_empty());
        }
        assert_eq!(
            crate::messages::error_string(99_999).to_str().ok(),
            Some("mqs DLL: unknown error code")
        );
        assert_eq!(DllError::from_code(-5), None);
    }
}
