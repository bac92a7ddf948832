//! Stopping a rank of a job with a signal, as a user's job has one stopped
//! (by a debugger, a job-control key, or the scheduler), and seeing it stop
//! and go on.

use std::time::{Duration, Instant};

/// The state letter of `/proc/PID/stat`.
pub fn state(pid: u32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Waits (bounded) until `pid`'s state is, or is not, `T`.
pub fn until_stopped(pid: u32, stopped: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while (state(pid) == Some('T')) != stopped {
        assert!(
            Instant::now() < deadline,
            "pid {pid} did not become {} (state {:?})",
            if stopped { "stopped" } else { "running" },
            state(pid)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill takes no pointers; the pid is a rank of our own job.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Sends SIGCONT to a rank stopped by the test, whatever happens, so that
/// the job can be taken down.
pub struct Resume(pub Option<u32>);

impl Drop for Resume {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            // SAFETY: as in `signal`.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    }
}
