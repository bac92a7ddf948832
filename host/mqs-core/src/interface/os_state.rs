//! What the operating system said a process was doing when mqs came to
//! it, before mqs stopped it: the one fact a user needs about a rank that
//! another tool, a signal or the kernel holds still.

use serde::{Deserialize, Serialize};

/// A process's state as found (the state letter of `/proc/PID/stat`, or a
/// core's `pr_sname`), and for a process stopped by a signal, the signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsState {
    /// The kernel's letter: `R` running, `S` sleeping, `D` disk wait,
    /// `T` stopped by a signal, `t` stopped by a tracer, `Z` zombie, ...
    pub code: String,
    /// For `T`: the signal that stopped it (`SIGSTOP`, `SIGTSTP`,
    /// `SIGTTIN`, `SIGTTOU`), where it could be learnt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl OsState {
    pub fn new(code: char, signal: Option<i32>) -> Self {
        OsState {
            code: code.to_string(),
            signal: signal.and_then(signal_name).map(str::to_owned),
        }
    }

    /// Stopped by a signal (job control: `kill -STOP`, Ctrl-Z), not by a
    /// tracer: it runs again on `SIGCONT`.
    pub fn stopped_by_signal(&self) -> bool {
        self.code == "T"
    }

    /// Held in a tracing stop by a debugger or another tool.
    pub fn held_by_tracer(&self) -> bool {
        self.code == "t"
    }

    /// Stopped, one way or the other: it makes no progress until someone
    /// lets it go, so it never takes part in a deadlock of its own.
    pub fn is_stopped(&self) -> bool {
        self.stopped_by_signal() || self.held_by_tracer()
    }

    /// Dead or exiting: it will never make progress again.
    pub fn is_dead(&self) -> bool {
        matches!(self.code.as_str(), "Z" | "X" | "x")
    }

    /// The state in words: `stopped by a signal (SIGSTOP)`, `sleeping`.
    pub fn words(&self) -> String {
        let what = match self.code.as_str() {
            "R" => "running",
            "S" => "sleeping",
            "D" => "in uninterruptible sleep (waiting in the kernel, for I/O or a driver)",
            "T" => "stopped by a signal",
            "t" => "stopped by a tracer",
            "Z" => "a zombie (exited, not yet reaped)",
            "X" | "x" => "dead",
            "I" => "idle",
            "W" | "P" | "K" => "waking or parked",
            _ => "in an unknown state",
        };
        match &self.signal {
            Some(signal) => format!("{what} ({signal})"),
            None => what.to_owned(),
        }
    }
}

/// The job-control signals a process can be stopped by, by number (the
/// same on every Linux architecture mqs reads).
fn signal_name(signal: i32) -> Option<&'static str> {
    match signal {
        libc::SIGSTOP => Some("SIGSTOP"),
        libc::SIGTSTP => Some("SIGTSTP"),
        libc::SIGTTIN => Some("SIGTTIN"),
        libc::SIGTTOU => Some("SIGTTOU"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_says_by_what() {
        let s = OsState::new('T', Some(libc::SIGSTOP));
        assert!(s.stopped_by_signal() && s.is_stopped() && !s.held_by_tracer());
        assert_eq!(s.words(), "stopped by a signal (SIGSTOP)");
        let t = OsState::new('t', None);
        assert!(t.held_by_tracer() && t.is_stopped());
        assert_eq!(t.words(), "stopped by a tracer");
        // A signal that cannot stop a process is not named.
        assert_eq!(OsState::new('T', Some(libc::SIGTRAP)).signal, None);
        assert!(!OsState::new('S', None).is_stopped());
        assert!(OsState::new('Z', None).is_dead());
        assert_eq!(
            OsState::new('D', None).words(),
            "in uninterruptible sleep (waiting in the kernel, for I/O or a driver)"
        );
    }

    #[test]
    fn json_leaves_out_an_unknown_signal() {
        let json = serde_json::to_string(&OsState::new('S', None)).unwrap();
        assert_eq!(json, r#"{"code":"S"}"#);
        let json = serde_json::to_string(&OsState::new('T', Some(libc::SIGTSTP))).unwrap();
        assert_eq!(json, r#"{"code":"T","signal":"SIGTSTP"}"#);
    }
}
