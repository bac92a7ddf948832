//! The helper subprocess that loads an MPI library: the parent's side
//! ([`Helper`]: start it, hand it a request, collect its answers, survive
//! its crash or hang) and the child's ([`serve`]).
//!
//! The helper is our own executable started with [`HELPER_ARG`] as its
//! first argument (`mqs-dump` checks for it before parsing options). It
//! runs in a process group of its own, so a timeout kills whatever the
//! library started too.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::check::{self, CheckReport};
use crate::library::{self, MpiT};
use crate::model::{Family, Listing};
use crate::protocol::{Event, FailureKind, Finding, Op, Request, SetResult};
use crate::{Error, Result};

/// The first argument that makes our executable act as the helper.
pub const HELPER_ARG: &str = "__mqs-cvars-helper";

/// How long a helper may take by default: loading Open MPI's components
/// takes about a second on a quiet machine.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment variable that tells a helper its parent's pid.
const PARENT_ENV: &str = "MQS_CVARS_HELPER_PARENT";

/// Most bytes of the helper's stderr kept for an error message.
const STDERR_KEPT: usize = 16 * 1024;

/// How to start helpers.
#[derive(Debug, Clone)]
pub struct Helper {
    pub program: PathBuf,
    /// Arguments before [`HELPER_ARG`].
    pub args: Vec<OsString>,
    pub timeout: Duration,
    /// Keep the MPIs' own environment variables (OMPI_MCA_*, MPIR_CVAR_*,
    /// ...): values are then those a job started from here would get.
    /// Off by default, so that values are the library's defaults.
    pub keep_environment: bool,
}

/// How a helper ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Signaled(i32),
    TimedOut,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Ending::Exited(code) => write!(f, "exited with status {code}"),
            Ending::Signaled(sig) => {
                let name = nix::sys::signal::Signal::try_from(sig)
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_else(|_| format!("signal {sig}"));
                write!(f, "was killed by {name}")
            }
            Ending::TimedOut => f.write_str("did not answer in time and was killed"),
        }
    }
}

/// Everything one helper said and how it ended.
#[derive(Debug)]
pub struct Outcome {
    pub events: Vec<Event>,
    pub ending: Ending,
    /// The tail of what it (the library) printed.
    pub stderr: String,
    /// Environment variables removed before it started.
    pub cleared: Vec<String>,
}

impl Outcome {
    /// The last step it announced, and what that step does.
    pub fn last_step(&self) -> Option<(&str, Option<&str>)> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Step { what, detail } => Some((what.as_str(), detail.as_deref())),
            _ => None,
        })
    }

    fn failed(&self) -> Option<(FailureKind, &str)> {
        self.events.iter().find_map(|e| match e {
            Event::Failed { kind, message } => Some((*kind, message.as_str())),
            _ => None,
        })
    }

    /// The error for a helper that neither answered nor said why.
    fn broken(&self, library: &Path, timeout: Duration) -> Error {
        let mut detail = match self.ending {
            Ending::TimedOut => format!(
                "did not answer within {} s and was killed",
                timeout.as_secs()
            ),
            other => other.to_string(),
        };
        if let Some((step, what)) = self.last_step() {
            detail.push_str(&format!(" while {}", what.unwrap_or(step)));
        }
        let said: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if let Some(last) = said.last() {
            detail.push_str(&format!("; its last words: {last}"));
        }
        Error::CvarsHelper {
            path: library.to_path_buf(),
            detail,
        }
    }
}

impl Helper {
    /// Helpers run by this very executable.
    pub fn current_exe() -> Result<Helper> {
        let program = std::env::current_exe().map_err(|e| mqs_core::Error::Io {
            path: PathBuf::from("/proc/self/exe"),
            source: e,
        })?;
        Ok(Helper {
            program,
            args: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            keep_environment: false,
        })
    }

    /// Lists every control variable of `library`.
    pub fn list(&self, library: &Path) -> Result<Listing> {
        let outcome = self.run(library, Op::List)?;
        let listing = outcome.events.iter().find_map(|e| match e {
            Event::Listing { listing } => Some(listing.clone()),
            _ => None,
        });
        match (listing, outcome.failed()) {
            (Some(mut listing), _) => {
                listing.environment_cleared = outcome.cleared.clone();
                Ok(listing)
            }
            (None, Some((kind, message))) => Err(failure(library, kind, message)),
            (None, None) => Err(outcome.broken(library, self.timeout)),
        }
    }

    /// Validates assignments with MPI_T_cvar_write in a helper.
    pub fn set(&self, library: &Path, assignments: &[(String, String)]) -> Result<Vec<SetResult>> {
        let outcome = self.run(
            library,
            Op::Set {
                assignments: assignments.to_vec(),
            },
        )?;
        let results = outcome.events.iter().find_map(|e| match e {
            Event::Settings { results } => Some(results.clone()),
            _ => None,
        });
        match (results, outcome.failed()) {
            (Some(results), _) => Ok(results),
            (None, Some((kind, message))) => Err(failure(library, kind, message)),
            (None, None) => Err(outcome.broken(library, self.timeout)),
        }
    }

    /// Runs every conformance rule. A helper that crashes or hangs in a
    /// rule is a finding of that rule; the next helper starts after the
    /// step it died in.
    pub fn check(&self, library: &Path) -> Result<CheckReport> {
        let mut report = CheckReport {
            library: library.display().to_string(),
            family: None,
            findings: Vec::new(),
            rules: check::RULES
                .iter()
                .map(|r| check::RuleStatement {
                    id: r.id.to_owned(),
                    rule: r.rule.split_whitespace().collect::<Vec<_>>().join(" "),
                })
                .collect(),
        };
        let (mut first_rule, mut skip_steps) = (0, 0);
        // Each restart moves past at least one step: bounded.
        while first_rule < check::RULES.len() {
            let outcome = self.run(
                library,
                Op::Check {
                    first_rule,
                    skip_steps,
                },
            )?;
            if let Some((kind, message)) = outcome.failed() {
                return Err(failure(library, kind, message));
            }
            let mut finished = false;
            for event in &outcome.events {
                match event {
                    Event::Loaded { family } => report.family = Some(*family),
                    Event::Finding { finding } => report.findings.push(finding.clone()),
                    Event::Checked { .. } => finished = true,
                    _ => {}
                }
            }
            if finished {
                break;
            }
            // Where it died: `rule` (the rule's unannounced part) or
            // `rule#step`.
            let (step, detail) = outcome.last_step().unwrap_or_default();
            let (id, within) = match step.split_once('#') {
                Some((id, n)) => (id.to_owned(), n.parse::<usize>().ok()),
                None => (step.to_owned(), None),
            };
            let Some(rule) = check::RULES.iter().position(|r| r.id == id) else {
                // It died before it got to the rules (loading the library).
                return Err(outcome.broken(library, self.timeout));
            };
            let how = match outcome.ending {
                Ending::TimedOut => {
                    format!("hangs (no answer within {} s)", self.timeout.as_secs())
                }
                other => format!("crashes (the helper {other})"),
            };
            let message = match (within, detail) {
                (Some(_), Some(what)) => format!("{what} {how}"),
                _ => format!("the library {how} in this rule; its remaining checks were skipped"),
            };
            report.findings.push(Finding {
                rule: id,
                message,
                count: 1,
                examples: Vec::new(),
            });
            let next = match within {
                Some(n) => (rule, n),
                None => (rule + 1, 0),
            };
            // Always forward, even if a rule died outside its steps after
            // announcing one.
            (first_rule, skip_steps) = if next > (first_rule, skip_steps) {
                next
            } else {
                (rule + 1, 0)
            };
        }
        Ok(report)
    }

    /// Starts a helper for `op` on `library` and collects what it says.
    pub fn run(&self, library: &Path, op: Op) -> Result<Outcome> {
        let request = Request {
            library: library.display().to_string(),
            op,
        };
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .arg(HELPER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env(PARENT_ENV, std::process::id().to_string())
            .process_group(0);
        let mut cleared = Vec::new();
        if !self.keep_environment {
            for (key, _) in std::env::vars_os() {
                let Some(name) = key.to_str() else { continue };
                let ours = [Family::OpenMpi, Family::Mpich]
                    .iter()
                    .flat_map(|f| f.env_prefixes())
                    .any(|p| name.starts_with(p));
                if ours {
                    cmd.env_remove(&key);
                    cleared.push(name.to_owned());
                }
            }
        }
        let mut child = cmd.spawn().map_err(|e| mqs_core::Error::Io {
            path: self.program.clone(),
            source: e,
        })?;
        let pid = child.id() as i32;
        if let Some(mut stdin) = child.stdin.take() {
            let text = serde_json::to_string(&request).unwrap_or_default();
            // A helper that died at once is reported by its ending.
            let _ = stdin.write_all(text.as_bytes());
        }
        let (out_tx, out_rx) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut events = Vec::new();
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(event) = serde_json::from_str::<Event>(&line) {
                        events.push(event);
                    }
                }
                let _ = out_tx.send(events);
            });
        }
        let (err_tx, err_rx) = mpsc::channel();
        if let Some(mut stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut kept: Vec<u8> = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    kept.extend_from_slice(&chunk[..n]);
                    if kept.len() > 2 * STDERR_KEPT {
                        kept.drain(..kept.len() - STDERR_KEPT);
                    }
                }
                let _ = err_tx.send(String::from_utf8_lossy(&kept).into_owned());
            });
        }
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(child.wait());
        });
        let ending = match done_rx.recv_timeout(self.timeout) {
            Ok(status) => ending_of(status),
            Err(_) => {
                // Only the helper's own group: it and what the library
                // started.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = done_rx.recv_timeout(Duration::from_secs(10));
                Ending::TimedOut
            }
        };
        // A daemon the library left behind may hold the pipes open: do not
        // wait for it for long.
        let grace = Duration::from_secs(5);
        let events = out_rx.recv_timeout(grace).unwrap_or_default();
        let stderr = err_rx.recv_timeout(grace).unwrap_or_default();
        Ok(Outcome {
            events,
            ending,
            stderr,
            cleared,
        })
    }
}

fn ending_of(status: std::io::Result<std::process::ExitStatus>) -> Ending {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(sig)) => Ending::Signaled(sig),
            (None, None) => Ending::Exited(-1),
        },
        Err(_) => Ending::Exited(-1),
    }
}

fn failure(library: &Path, kind: FailureKind, message: &str) -> Error {
    let path = library.to_path_buf();
    let detail = message.to_owned();
    match kind {
        FailureKind::NotMpi => Error::NotMpiLibrary { path, detail },
        FailureKind::NoMpiT => Error::NoMpiT { path, detail },
    }
}

/// Writes answers as JSON lines on a descriptor of our own, flushed line by
/// line so that a crash loses nothing already said.
struct Answers {
    out: File,
}

impl Answers {
    fn send(&mut self, event: &Event) {
        if let Ok(mut line) = serde_json::to_string(event) {
            line.push('\n');
            let _ = self.out.write_all(line.as_bytes());
            let _ = self.out.flush();
        }
    }
}

/// The helper's main: reads the request on stdin, answers on stdout, and
/// returns the exit status. The library's own printing to stdout is sent to
/// stderr, so it cannot corrupt the answers.
pub fn serve() -> i32 {
    // A library that hangs must not outlive the tool that started it (its
    // own process group keeps it from the terminal's ^C).
    // SAFETY: prctl with an int option and a signal number.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let parent = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    // SAFETY: getppid has no arguments and cannot fail.
    if parent.is_some_and(|p| p != unsafe { libc::getppid() }) {
        // The parent died before the prctl took effect.
        return 1;
    }
    let Some(out) = take_stdout() else {
        return 1;
    };
    let mut answers = Answers { out };
    let mut text = String::new();
    if std::io::stdin().read_to_string(&mut text).is_err() {
        return 1;
    }
    let Ok(request) = serde_json::from_str::<Request>(&text) else {
        eprintln!("{HELPER_ARG}: a JSON request on stdin was expected");
        return 2;
    };
    answers.send(&Event::Step {
        what: "loading the library".into(),
        detail: None,
    });
    let mpi = match MpiT::open(Path::new(&request.library)) {
        Ok(mpi) => mpi,
        Err(e) => {
            answers.send(&Event::Failed {
                kind: e.kind,
                message: e.message,
            });
            return 0;
        }
    };
    answers.send(&Event::Loaded {
        family: mpi.family(),
    });
    match request.op {
        Op::List => {
            answers.send(&Event::Step {
                what: "listing the control variables".into(),
                detail: None,
            });
            let mut step = |what: String| {
                answers.send(&Event::Step {
                    what: "listing".into(),
                    detail: Some(what),
                })
            };
            let listed = library::list(&mpi, &mut step);
            match listed {
                Ok(listing) => answers.send(&Event::Listing { listing }),
                Err(e) => answers.send(&Event::Failed {
                    kind: e.kind,
                    message: e.message,
                }),
            }
        }
        Op::Set { assignments } => {
            answers.send(&Event::Step {
                what: "validating the settings".into(),
                detail: None,
            });
            match library::initialise(&mpi) {
                Ok(()) => {
                    let results = assignments
                        .iter()
                        .map(|(name, value)| library::validate(&mpi, name, value))
                        .collect();
                    answers.send(&Event::Settings { results });
                }
                Err(e) => answers.send(&Event::Failed {
                    kind: e.kind,
                    message: e.message,
                }),
            }
        }
        Op::Check {
            first_rule,
            skip_steps,
        } => {
            check::run(&mpi, first_rule, skip_steps, &mut |event| {
                answers.send(&event)
            });
        }
    }
    // The answers are out; MPI libraries' exit handlers (MPI_T_finalize,
    // atexit) have nothing left to give and may hang or crash: skip them.
    // SAFETY: _exit ends the process at once; nothing is left to flush.
    unsafe { libc::_exit(0) }
}

/// Moves stdout to a private descriptor and points fd 1 at stderr.
fn take_stdout() -> Option<File> {
    // SAFETY: F_DUPFD_CLOEXEC returns a fresh descriptor we own.
    let fd = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is ours alone (see above).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: dup2 onto the standard descriptor, which stays open.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return None;
    }
    Some(File::from(owned))
}
