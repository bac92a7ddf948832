//! Keeping a DLL's own printing out of our output.
//!
//! Shipped DLLs print warnings with printf (Open MPI's prints one to stdout
//! when a type is missing), which would corrupt `--json` on stdout and the
//! one-line error on stderr. While a DLL runs, stdout and stderr point at an
//! anonymous file; what it printed is handed back as text.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Redirection of fds 1 and 2 into a memory file, undone on drop.
#[derive(Debug)]
pub struct OutputCapture {
    file: File,
    saved_out: OwnedFd,
    saved_err: OwnedFd,
}

impl OutputCapture {
    /// Starts capturing; None if the redirection cannot be set up (then the
    /// DLL simply prints where it would have).
    pub fn start() -> Option<Self> {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: memfd_create takes a NUL-terminated name and flags; the
        // returned fd (if any) is ours alone.
        let fd = unsafe { libc::memfd_create(c"mqs-dll-output".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd is a fresh descriptor we own.
        let file = unsafe { File::from_raw_fd(fd) };
        let saved_out = dup(1)?;
        let saved_err = dup(2)?;
        flush_c_stdio();
        // SAFETY: dup2 onto the standard descriptors, which stay open.
        let ok =
            unsafe { libc::dup2(file.as_raw_fd(), 1) >= 0 && libc::dup2(file.as_raw_fd(), 2) >= 0 };
        let capture = Self {
            file,
            saved_out,
            saved_err,
        };
        // Dropping restores whatever was redirected.
        ok.then_some(capture)
    }

    /// Stops capturing and returns what was printed, line by line.
    pub fn finish(mut self) -> Vec<String> {
        self.restore();
        let mut text = String::new();
        if self.file.seek(SeekFrom::Start(0)).is_ok() {
            let _ = (&self.file).take(1 << 20).read_to_string(&mut text);
        }
        text.lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    }

    fn restore(&mut self) {
        flush_c_stdio();
        // SAFETY: the saved descriptors are open duplicates of the originals.
        unsafe {
            libc::dup2(self.saved_out.as_raw_fd(), 1);
            libc::dup2(self.saved_err.as_raw_fd(), 2);
        }
    }
}

impl Drop for OutputCapture {
    fn drop(&mut self) {
        self.restore();
    }
}

fn dup(fd: i32) -> Option<OwnedFd> {
    // SAFETY: duplicating a standard descriptor; the copy is ours.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    // SAFETY: a fresh descriptor we own, if the call succeeded.
    (copy >= 0).then(|| unsafe { OwnedFd::from_raw_fd(copy) })
}

/// C's stdout is buffered inside libc: what the DLL printed must reach the
/// descriptor it was printed to before that descriptor changes.
fn flush_c_stdio() {
    // SAFETY: fflush(NULL) flushes every C stream; no pointers are kept.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}
