//! What the front end and the tracer of launch mode say to each other over
//! their socket pair: one JSON object a line, reports one way and commands
//! the other.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

/// The subcommand that runs the tracer process (hidden from users): the
/// front end starts its own executable with it.
pub const TRACER_COMMAND: &str = "__trace-starter";

/// The tracer's reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(super) enum Report {
    /// The starter runs, with this pid.
    Started { pid: i32 },
    /// Its MPIR symbols are mapped and MPIR_being_debugged is set.
    Armed,
    /// The job-spawn event (MPIR's, or MPI2DD's start and spawn events):
    /// the starter waits for `Continue`.
    Spawned { partial_attach_ok: bool },
    /// The abort event (of the starter, or a rank calling MPI_Abort): the
    /// job waits for `Continue`.
    Aborting { message: String },
    /// Every traced process is stopped (answer to `Freeze`).
    Frozen,
    /// The starter exited.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The tracer could not go on.
    Failed { message: String },
}

/// The front end's commands.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub(super) enum Command {
    /// Let the job go on after an event that holds it.
    Continue,
    /// Stop every traced process for a dump (answered by `Frozen`).
    Freeze,
    /// Let them go on after the dump.
    Thaw,
}

/// Sends one message, a line of JSON; a peer that is gone is noticed by
/// the reader, not here.
pub(super) fn send<T: Serialize>(mut socket: &UnixStream, message: &T) {
    let mut line = serde_json::to_string(message).unwrap_or_default();
    line.push('\n');
    let _ = socket.write_all(line.as_bytes());
}

/// Lines from the front end, read without blocking.
pub(super) struct LineReader {
    fd: i32,
    buffer: Vec<u8>,
    pub(super) closed: bool,
}

impl LineReader {
    pub(super) fn new(socket: &UnixStream) -> Self {
        Self {
            fd: socket.as_raw_fd(),
            buffer: Vec::new(),
            closed: false,
        }
    }

    /// The next whole line, waiting up to `timeout` for one; None when
    /// there is none yet (or the front end is gone: see `closed`).
    pub(super) fn next(&mut self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(String::from_utf8_lossy(&line).trim().to_string());
            }
            if self.closed {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let mut fds = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: poll on one descriptor we own.
            let n = unsafe { libc::poll(&mut fds, 1, ms) };
            if n <= 0 {
                return None;
            }
            let mut chunk = [0u8; 512];
            // SAFETY: read into a buffer we own, of its size.
            let r = unsafe { libc::read(self.fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            match r {
                0 => self.closed = true,
                r if r > 0 => self.buffer.extend_from_slice(&chunk[..r as usize]),
                // EINTR and the like: look again.
                _ if Errno::last() == Errno::EINTR => {}
                _ => self.closed = true,
            }
        }
    }
}
