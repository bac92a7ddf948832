//! MPIR launch mode: `mqs-dump launch -- mpirun ...` starts the job under
//! the tool, learns its processes at the starter's job-spawn event, lets it
//! run, and dumps it on a timer, on SIGUSR1 or when it aborts.
//!
//! Two processes. The *tracer* (a child of mqs-dump: `mqs-dump
//! __trace-starter`) starts the starter and is its only tracer: it sets
//! `MPIR_being_debugged` once the starter's MPIR symbols are mapped (a
//! breakpoint on the dynamic loader's `_dl_debug_state`, which it calls
//! after every change of the link map, says when), plants the breakpoint on
//! `MPIR_Breakpoint`, and reports each event to the *front end* (mqs-dump
//! itself) over a socket, holding the starter at the breakpoint until the
//! front end answers. The front end dumps the ranks (attaching them itself),
//! forwards signals, and exits with the job's status.
//!
//! Why two: a process that dies while it traces another leaves behind every
//! breakpoint byte it planted, and the next hit of one kills the starter
//! with SIGTRAP. Killing mqs-dump (even with SIGKILL) closes the socket; the
//! tracer then restores every byte and detaches before it exits, so the job
//! runs on untouched. Only if the tracer itself is killed with SIGKILL can
//! a breakpoint outlive it, and then only until the starter calls
//! `MPIR_Breakpoint` again: the tracer keeps that breakpoint only while it
//! is needed (until the spawn event, or for the whole run with
//! `--dump-on-abort`).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::collect::{self, CollectOptions};
use crate::dump::JobDump;
use crate::inspect;
use crate::mpi2dd;
use crate::mpir::{self, StarterSymbols};
use crate::process::{LiveProcess, Mode, Target, TraceEvent, Tracer};
use crate::symbols::{SymbolCache, SymbolIndex};
use crate::{Error, Result};

/// What `mqs-dump launch` does besides running the job.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Dump the whole job once, this long after its processes were spawned.
    pub dump_after: Option<Duration>,
    /// Dump the job each time mqs-dump gets SIGUSR1.
    pub dump_on_signal: bool,
    /// Dump the job when the starter says it is aborting, before it is torn
    /// down.
    pub dump_on_abort: bool,
    /// Dumps as JSON, one document per line.
    pub json: bool,
    /// Snapshot the job this often and stop (exit 12) once a deadlock, or
    /// a wait chain ending outside MPI, is in two snapshots in a row.
    pub watch: Option<Duration>,
    /// With `watch`: report each new finding and go on until the job ends.
    pub keep_going: bool,
    /// Append dumps here instead of writing them to stderr.
    pub output: Option<PathBuf>,
    /// How ranks on other hosts (all, with `all_hosts`) are read.
    pub collect: CollectOptions,
    /// How to dump.
    pub dump: inspect::Options,
}

/// The tracer's reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Report {
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
enum Command2 {
    /// Let the job go on after an event that holds it.
    Continue,
    /// Stop every traced process for a dump (answered by `Frozen`).
    Freeze,
    /// Let them go on after the dump.
    Thaw,
}

/// What the front end waits for.
enum Input {
    Report(Report),
    /// The tracer's socket closed.
    TracerGone,
    Signal {
        signal: i32,
        from_terminal: bool,
    },
}

/// Runs `command` (a starter and its arguments) under the tool as the
/// options say; returns the exit code mqs-dump should give: the job's.
pub fn launch(command: &[OsString], options: &LaunchOptions) -> Result<i32> {
    let Some(program) = command.first() else {
        return Err(Error::Usage(
            "give the job's command after --, e.g. -- mpirun -np 4 ./app".into(),
        ));
    };
    let (front, back) = UnixStream::pair().map_err(|e| io_err("socketpair", e))?;
    let exe = std::env::current_exe().map_err(|e| io_err("current_exe", e))?;
    let fd = back.as_raw_fd();
    let mut tracer = Command::new(exe);
    tracer
        .arg("__trace-starter")
        .arg("--control-fd")
        .arg(fd.to_string());
    if options.dump_on_abort {
        tracer.arg("--watch-ranks");
    }
    tracer.arg("--").arg(program).args(&command[1..]);
    // SAFETY: between fork and exec the child only clears FD_CLOEXEC on the
    // socket it inherits: fcntl is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        tracer.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut tracer_child = tracer.spawn().map_err(|e| io_err("the tracer", e))?;
    drop(back);

    let (tx, rx) = mpsc::channel();
    let reader = front.try_clone().map_err(|e| io_err("socket", e))?;
    let reports = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<Report>(&line) {
                Ok(report) => {
                    if reports.send(Input::Report(report)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = reports.send(Input::TracerGone);
    });
    watch_signals(tx)?;

    let mut front = Front {
        socket: front,
        deferred: Vec::new(),
        options,
        out: Output::open(options)?,
        starter: None,
        armed: false,
        spawned: false,
        previous: None,
        reported: None,
    };
    // The timer runs from the job-spawn event: a job whose starter takes its
    // time is dumped once its processes ran for that long.
    let mut dump_due: Option<Instant> = None;
    let mut watch_due: Option<Instant> = None;
    let mut timer_set = false;
    let code = loop {
        if !timer_set && front.spawned {
            timer_set = true;
            dump_due = options.dump_after.map(|d| Instant::now() + d);
            watch_due = options.watch.map(|d| Instant::now() + d);
        }
        let next_due = [dump_due, watch_due].into_iter().flatten().min();
        let wait = next_due.map_or(Duration::from_secs(3600), |due| {
            due.saturating_duration_since(Instant::now())
        });
        let next = match front.deferred.pop() {
            Some(input) => Ok(input),
            None => rx.recv_timeout(wait),
        };
        match next {
            Ok(Input::Report(report)) => {
                if let Some(code) = front.on_report(report, &rx)? {
                    break code;
                }
            }
            Ok(Input::TracerGone) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                break front.tracer_gone(&mut tracer_child);
            }
            Ok(Input::Signal {
                signal,
                from_terminal,
            }) => front.on_signal(signal, from_terminal, &rx),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if dump_due.is_some_and(|d| d <= now) {
                    dump_due = None;
                    front.dump_now("--dump-after", &rx);
                }
                if watch_due.is_some_and(|d| d <= now) {
                    watch_due = options.watch.map(|d| Instant::now() + d);
                    if front.watch_once(&rx) && !options.keep_going {
                        break crate::exit_code::DEADLOCK;
                    }
                }
            }
        }
    };
    let found = front.reported.is_some();
    // Closing the socket (for the reader thread's copy too) tells the
    // tracer to let the job go, if it still runs (a watch that found a
    // deadlock leaves it for the user to see).
    let _ = front.socket.shutdown(std::net::Shutdown::Both);
    drop(front);
    let _ = tracer_child.wait();
    Ok(if found {
        crate::exit_code::DEADLOCK
    } else {
        code
    })
}

fn io_err(what: &str, source: std::io::Error) -> Error {
    Error::Io {
        path: what.into(),
        source,
    }
}

/// Signals mqs-dump takes care of: those the user sends it are forwarded to
/// the starter; those the terminal sends the whole process group reach the
/// starter by themselves.
fn watch_signals(tx: mpsc::Sender<Input>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    use signal_hook::iterator::exfiltrator::WithRawSiginfo;
    use signal_hook::iterator::SignalsInfo;
    let mut signals = SignalsInfo::<WithRawSiginfo>::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1])
        .map_err(|e| io_err("signal handlers", e))?;
    std::thread::spawn(move || {
        for info in signals.forever() {
            // A terminal's signals come from the kernel (SI_KERNEL), for
            // every process of the foreground group.
            let from_terminal = info.si_code == libc::SI_KERNEL;
            if tx
                .send(Input::Signal {
                    signal: info.si_signo,
                    from_terminal,
                })
                .is_err()
            {
                return;
            }
        }
    });
    Ok(())
}

/// Where dumps and notes go.
enum Output {
    Stderr,
    File(std::fs::File),
}

impl Output {
    fn open(options: &LaunchOptions) -> Result<Self> {
        match &options.output {
            None => Ok(Output::Stderr),
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map(Output::File)
                .map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                }),
        }
    }

    fn write(&mut self, text: &str) {
        let _ = match self {
            Output::Stderr => std::io::stderr().write_all(text.as_bytes()),
            Output::File(f) => f.write_all(text.as_bytes()).and_then(|()| f.flush()),
        };
    }
}

/// The front end's state.
struct Front<'a> {
    socket: UnixStream,
    /// Inputs that arrived while a dump waited for the tracer.
    deferred: Vec<Input>,
    options: &'a LaunchOptions,
    out: Output,
    starter: Option<i32>,
    /// The starter's MPIR symbols were found and armed.
    armed: bool,
    /// The job-spawn event came: the starter lists its processes.
    spawned: bool,
    /// `--watch`: the snapshot before, and the finding reported last.
    previous: Option<JobDump>,
    reported: Option<String>,
}

impl Front<'_> {
    fn note(&mut self, text: &str) {
        eprintln!("mqs-dump: {text}");
        if matches!(self.out, Output::File(_)) && !self.options.json {
            self.out.write(&format!("mqs-dump: {text}\n"));
        }
    }

    fn send(&mut self, command: &Command2) {
        let mut line = serde_json::to_string(command).unwrap_or_default();
        line.push('\n');
        let _ = self.socket.write_all(line.as_bytes());
    }

    fn answer(&mut self) {
        self.send(&Command2::Continue);
    }

    /// Handles a report; the exit code once the job has ended.
    fn on_report(&mut self, report: Report, rx: &mpsc::Receiver<Input>) -> Result<Option<i32>> {
        match report {
            Report::Started { pid } => self.starter = Some(pid),
            Report::Armed => self.armed = true,
            Report::Spawned { partial_attach_ok } => {
                if !partial_attach_ok {
                    if let Some(starter) = self.starter {
                        open_gates(starter, &self.options.dump, &mut |t| self.note(t));
                    }
                }
                self.spawned = true;
                self.answer();
            }
            Report::Aborting { message } => {
                let message = if message.is_empty() {
                    "(no reason given)".to_string()
                } else {
                    message
                };
                self.note(&format!("the job is aborting: {message}"));
                if self.options.dump_on_abort {
                    self.dump_now("--dump-on-abort", rx);
                }
                self.answer();
            }
            // Answers dump_now waits for itself.
            Report::Frozen => {}
            Report::Exited { code, signal } => {
                if !self.armed {
                    self.note(
                        "the program ended without ever mapping the MPIR symbols \
                         (MPIR_Breakpoint): not an MPI starter?",
                    );
                }
                return Ok(Some(match (code, signal) {
                    (Some(code), _) => code,
                    (None, Some(signal)) => 128 + signal,
                    (None, None) => 1,
                }));
            }
            Report::Failed { message } => return Err(Error::Launch(message)),
        }
        Ok(None)
    }

    fn on_signal(&mut self, signal: i32, from_terminal: bool, rx: &mpsc::Receiver<Input>) {
        if signal == signal_hook::consts::SIGUSR1 {
            if self.options.dump_on_signal {
                self.dump_now("SIGUSR1", rx);
            } else {
                self.note("SIGUSR1 ignored (dumps on SIGUSR1 need --dump-on-signal)");
            }
            return;
        }
        if from_terminal {
            return;
        }
        if !self.spawned && self.starter.is_none() {
            // Nothing started yet: the signal is for mqs-dump itself.
            std::process::exit(128 + signal);
        }
        if let Some(pid) = self.starter {
            // SAFETY: kill(2) on the starter, which our tracer holds as its
            // child: the pid cannot be reused before the tracer reaps it.
            unsafe { libc::kill(pid, signal) };
        }
    }

    fn tracer_gone(&mut self, tracer: &mut std::process::Child) -> i32 {
        match tracer.wait() {
            Ok(status) if status.success() => 0,
            Ok(status) => {
                self.note(&format!("the tracer ended unexpectedly ({status})"));
                1
            }
            Err(_) => 1,
        }
    }

    /// A snapshot of the whole job (stopped for the read), or why none.
    fn snapshot(&mut self, why: &str, stacks: bool, rx: &mpsc::Receiver<Input>) -> Option<JobDump> {
        let (Some(starter), true) = (self.starter, self.spawned) else {
            self.note(&format!(
                "{why}: the job has not started its processes yet; nothing to dump"
            ));
            return None;
        };
        // With --dump-on-abort the tracer traces the ranks too: it stops
        // them all for the dump, which reads them without stopping them
        // again.
        let traced = self.options.dump_on_abort;
        let mut options = self.options.dump.clone();
        options.stacks = stacks;
        if traced {
            self.send(&Command2::Freeze);
            if !self.await_frozen(rx) {
                self.note(&format!(
                    "{why}: the tracer did not stop the job; not dumped"
                ));
                return None;
            }
            options.no_stop = true;
        }
        // Ranks on other hosts are read by collectors the starter starts
        // there, which it cannot do while the tracer holds it stopped.
        let dumped = if traced {
            inspect::dump_running_starter(starter, &options, &mut inspect::Nowhere)
        } else {
            let mut front = collect::Front::new(&options, self.options.collect.clone());
            inspect::dump_running_starter(starter, &options, &mut front)
        };
        if traced {
            self.send(&Command2::Thaw);
        }
        match dumped {
            Ok(job) => Some(job),
            Err(e) => {
                self.note(&format!("{why}: the dump failed: {e}"));
                None
            }
        }
    }

    fn dump_now(&mut self, why: &str, rx: &mpsc::Receiver<Input>) {
        if let Some(job) = self.snapshot(why, self.options.dump.stacks, rx) {
            self.write_dump(&job);
        }
    }

    fn write_dump(&mut self, job: &JobDump) {
        let text = if self.options.json {
            let mut line = serde_json::to_string(job).unwrap_or_default();
            line.push('\n');
            line
        } else {
            crate::view::job_view(job, &crate::view::ViewOptions::default())
        };
        self.out.write(&text);
    }

    /// One `--watch` snapshot; whether it reported a new finding.
    fn watch_once(&mut self, rx: &mpsc::Receiver<Input>) -> bool {
        let Some(job) = self.snapshot("--watch", true, rx) else {
            return false;
        };
        let finding = self
            .previous
            .as_ref()
            .and_then(|previous| crate::analysis::confirm::persistent_finding(previous, &job));
        self.previous = Some(job);
        match finding {
            Some(words) if self.reported.as_deref() != Some(words.as_str()) => {
                self.note("--watch: two snapshots in a row agree:");
                self.out.write(&format!("{words}\n"));
                if let Some(job) = self.previous.take() {
                    self.write_dump(&job);
                    self.previous = Some(job);
                }
                self.reported = Some(words);
                true
            }
            _ => false,
        }
    }

    /// Waits for the tracer's `Frozen`, keeping whatever else arrives.
    fn await_frozen(&mut self, rx: &mpsc::Receiver<Input>) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Input::Report(Report::Frozen)) => return true,
                Ok(Input::TracerGone) | Err(_) => {
                    self.deferred.push(Input::TracerGone);
                    return false;
                }
                Ok(other) => self.deferred.insert(0, other),
            }
        }
    }
}

/// Opens the gate of every local process of the job: a starter that does
/// not say its processes may be attached partially (MPIR_partial_attach_ok,
/// MPI2DD's PARTIAL_ATTACH_OK) expects the tool to release each one, by
/// setting `MPIR_debug_gate` or MPI2DD's GATE flag.
fn open_gates(starter: i32, options: &inspect::Options, note: &mut dyn FnMut(&str)) {
    let cache = Arc::new(SymbolCache::new(options.debug_dirs.clone()));
    let job = LiveProcess::attach(starter, Mode::NoStop).and_then(|target| {
        let symbols =
            SymbolIndex::from_mapped_with_cache(cache.clone(), &target.mapped_objects()?)?;
        inspect::find_job(&target, &symbols, options)
    });
    let members = match job {
        Ok(Some(job)) => job.members,
        Ok(None) => return,
        Err(e) => {
            note(&format!(
                "cannot read the job's processes to release them: {e}"
            ));
            return;
        }
    };
    for m in members {
        if m.pid <= 0 || !mpir::is_local_host(&m.host) {
            continue;
        }
        let opened = LiveProcess::attach(m.pid, Mode::NoStop).and_then(|rank| {
            let index =
                SymbolIndex::from_mapped_with_cache(cache.clone(), &rank.mapped_objects()?)?;
            if let Some(info) = mpi2dd::info_address(&index) {
                let flags = mpi2dd::read_info(&rank, info)?.debugger_flags | mpi2dd::FLAG_GATE;
                return rank.write_mpir_variable(
                    info + mpi2dd::DEBUGGER_FLAGS_OFFSET,
                    &flags.to_le_bytes(),
                );
            }
            match index.find_symbol("MPIR_debug_gate") {
                Some(addr) => rank.write_mpir_variable(addr, &1i32.to_ne_bytes()),
                None => Ok(()),
            }
        });
        if let Err(e) = opened {
            note(&format!(
                "rank {} (pid {}): cannot open its gate: {e}",
                m.rank, m.pid
            ));
        }
    }
}

// ---- The tracer process ---------------------------------------------------

/// The tracer: runs `command` traced, reports to the front end over the
/// socket `control`, and exits once the starter exits or the front end is
/// gone. With `watch_ranks` it also traces the processes the starter
/// starts, and reports a rank's call of MPI_Abort as an abort event (the
/// MPIs we know never raise MPIR_DEBUG_ABORTING), before anyone else
/// learns of it. Returns the process's exit code.
///
/// # Safety
/// `control` must be an open socket file descriptor this process owns.
pub unsafe fn run_tracer(control: i32, command: &[OsString], watch_ranks: bool) -> i32 {
    // SAFETY: the caller hands over an open socket it owns.
    let socket = unsafe { UnixStream::from_raw_fd(control) };
    // The front end's signals are its own to forward: a terminal's reach
    // the starter directly, and the tracer must outlive them to clean up.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1] {
        // SAFETY: SIG_IGN installs no handler code.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let Some(program) = command.first() else {
        report(
            &socket,
            &Report::Failed {
                message: "no command to run".into(),
            },
        );
        return 1;
    };
    let mut tracer = match Tracer::spawn(program, &command[1..]) {
        Ok(t) => t,
        Err(e) => {
            report(
                &socket,
                &Report::Failed {
                    message: e.to_string(),
                },
            );
            return 1;
        }
    };
    tracer.keep_descendants(watch_ranks);
    report(&socket, &Report::Started { pid: tracer.pid() });
    let mut session = TracerSession {
        commands: LineReader::new(&socket),
        socket,
        tracer,
        cache: Arc::new(SymbolCache::new(Vec::new())),
        watched: std::collections::HashMap::new(),
        starter: None,
        watch_ranks,
    };
    let result = session.run();
    if let Err(e) = &result {
        report(
            &session.socket,
            &Report::Failed {
                message: e.to_string(),
            },
        );
    }
    // Whatever happened: every byte back, every thread free.
    let _ = session.tracer.release();
    i32::from(result.is_err())
}

fn report(mut socket: &UnixStream, report: &Report) {
    let mut line = serde_json::to_string(report).unwrap_or_default();
    line.push('\n');
    let _ = socket.write_all(line.as_bytes());
}

/// Lines from the front end, read without blocking.
struct LineReader {
    fd: i32,
    buffer: Vec<u8>,
    closed: bool,
}

impl LineReader {
    fn new(socket: &UnixStream) -> Self {
        Self {
            fd: socket.as_raw_fd(),
            buffer: Vec::new(),
            closed: false,
        }
    }

    /// The next whole line, waiting up to `timeout` for one; None when
    /// there is none yet (or the front end is gone: see `closed`).
    fn next(&mut self, timeout: Duration) -> Option<String> {
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

use nix::errno::Errno;

/// Where a process waits for its MPI library to be mapped, or the abort
/// breakpoints planted in it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Watch {
    /// The dynamic loader's breakpoint: check again at each stop there.
    Loader(u64),
    /// MPI_Abort's (and PMPI_Abort's) addresses.
    Abort(Vec<u64>),
    /// Nothing to watch (no loader breakpoint either).
    Nothing,
}

/// The tracer's state.
struct TracerSession {
    socket: UnixStream,
    commands: LineReader,
    tracer: Tracer,
    cache: Arc<SymbolCache>,
    /// Per traced process: what is planted in it.
    watched: std::collections::HashMap<i32, Watch>,
    /// The starter's MPIR symbols, once mapped.
    starter: Option<Starter>,
    watch_ranks: bool,
}

/// How the starter announces events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Starter {
    /// MPIR: `MPIR_Breakpoint` and `MPIR_debug_state`.
    Mpir(StarterSymbols),
    /// MPI2DD: `MPI2DD_breakpoint` and `MPI2DD_info.debug_state`.
    Mpi2dd { info: u64, breakpoint: u64 },
}

impl Starter {
    fn breakpoint(&self) -> u64 {
        match self {
            Starter::Mpir(m) => m.breakpoint,
            Starter::Mpi2dd { breakpoint, .. } => *breakpoint,
        }
    }
}

impl TracerSession {
    /// A process's symbols as mapped now.
    fn symbols(&self, pid: i32) -> Result<SymbolIndex> {
        let target = LiveProcess::attach(pid, Mode::NoStop)?;
        SymbolIndex::from_mapped_with_cache(self.cache.clone(), &target.mapped_objects()?)
    }

    /// A process started a new program (it is held): find what to watch in
    /// it now, or plant the loader's breakpoint to look again later.
    fn after_exec(&mut self, pid: i32) -> Result<()> {
        if pid == self.tracer.pid() {
            self.starter = None;
        }
        self.watched.remove(&pid);
        let symbols = self.symbols(pid)?;
        if !self.arm(pid, &symbols)? {
            match symbols.find_function("_dl_debug_state") {
                Some(loader) => {
                    self.tracer.insert_breakpoint(pid, loader)?;
                    self.watched.insert(pid, Watch::Loader(loader));
                }
                None if pid == self.tracer.pid() => {
                    return Err(Error::Launch(
                        "the starter has no MPIR_Breakpoint and its dynamic loader no \
                         _dl_debug_state to wait for one: is it an MPI starter?"
                            .into(),
                    ))
                }
                // A static program without MPI: nothing to watch.
                None => {
                    self.watched.insert(pid, Watch::Nothing);
                }
            }
        }
        self.tracer.resume(pid)
    }

    /// Plants what process `pid` needs once its symbols are there: in the
    /// starter, MPIR_being_debugged and the event breakpoint; in another
    /// process, breakpoints on MPI_Abort. Whether it found them.
    fn arm(&mut self, pid: i32, symbols: &SymbolIndex) -> Result<bool> {
        let watch = if pid == self.tracer.pid() {
            let mpi2dd =
                mpi2dd::info_address(symbols).zip(symbols.find_function("MPI2DD_breakpoint"));
            let starter = if let Some((info, breakpoint)) = mpi2dd {
                // A debugger is here: its flag, in the MPI2DD way. The rest
                // of the structure is filled in by the starter as it runs
                // (it is checked at its events), this field is the tool's.
                let target = LiveProcess::attach(pid, Mode::NoStop)?;
                let mut raw = [0u8; 4];
                target.read(info + mpi2dd::DEBUGGER_FLAGS_OFFSET, &mut raw)?;
                let flags = u32::from_le_bytes(raw) | mpi2dd::FLAG_BEING_DEBUGGED;
                self.tracer.write(
                    pid,
                    info + mpi2dd::DEBUGGER_FLAGS_OFFSET,
                    &flags.to_le_bytes(),
                )?;
                Starter::Mpi2dd { info, breakpoint }
            } else {
                let Some(mpir) = StarterSymbols::find(symbols) else {
                    return Ok(false);
                };
                if let Some(addr) = mpir.being_debugged {
                    self.tracer.write(pid, addr, &1i32.to_ne_bytes())?;
                }
                Starter::Mpir(mpir)
            };
            self.tracer.insert_breakpoint(pid, starter.breakpoint())?;
            self.starter = Some(starter);
            report(&self.socket, &Report::Armed);
            Watch::Abort(Vec::new())
        } else {
            let mut addrs: Vec<u64> = ["PMPI_Abort", "MPI_Abort"]
                .iter()
                .filter_map(|name| symbols.find_function(name))
                .collect();
            addrs.sort_unstable();
            addrs.dedup();
            if addrs.is_empty() {
                return Ok(false);
            }
            for &addr in &addrs {
                self.tracer.insert_breakpoint(pid, addr)?;
            }
            Watch::Abort(addrs)
        };
        if let Some(Watch::Loader(loader)) = self.watched.insert(pid, watch) {
            self.tracer.remove_breakpoint(pid, loader)?;
        }
        Ok(true)
    }

    /// Handles the front end's commands until `Continue` (when `holding`,
    /// the job waits for it) or until none is waiting. False once the front
    /// end is gone.
    fn serve(&mut self, holding: bool) -> Result<bool> {
        loop {
            let wait = if holding {
                Duration::from_millis(200)
            } else {
                Duration::ZERO
            };
            let Some(line) = self.commands.next(wait) else {
                if self.commands.closed {
                    return Ok(false);
                }
                if holding {
                    continue;
                }
                return Ok(true);
            };
            match serde_json::from_str::<Command2>(&line) {
                Ok(Command2::Continue) if holding => return Ok(true),
                Ok(Command2::Continue) => {}
                Ok(Command2::Freeze) => {
                    self.tracer.freeze()?;
                    report(&self.socket, &Report::Frozen);
                }
                Ok(Command2::Thaw) => self.tracer.thaw(),
                Err(_) => {}
            }
        }
    }

    fn run(&mut self) -> Result<()> {
        // Held right after its exec.
        self.after_exec(self.tracer.pid())?;
        loop {
            if !self.serve(false)? {
                return Ok(());
            }
            let Some(event) = self.tracer.next_event(Duration::from_millis(20))? else {
                continue;
            };
            match event {
                TraceEvent::Exited { code, signal } => {
                    report(&self.socket, &Report::Exited { code, signal });
                    return Ok(());
                }
                TraceEvent::Exec { pid } => self.after_exec(pid)?,
                TraceEvent::Breakpoint { pid, tid, addr } => {
                    let watch = self.watched.get(&pid).cloned();
                    let went_on = match watch {
                        Some(Watch::Loader(loader)) if loader == addr => {
                            let symbols = self.symbols(pid)?;
                            self.arm(pid, &symbols)?;
                            true
                        }
                        _ if pid == self.tracer.pid() => match self.starter {
                            Some(starter) if starter.breakpoint() == addr => {
                                self.starter_event(starter)?
                            }
                            _ => true,
                        },
                        Some(Watch::Abort(addrs)) if addrs.contains(&addr) => {
                            self.abort_event(pid, tid)?
                        }
                        _ => true,
                    };
                    self.tracer.resume(tid)?;
                    if !went_on {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// An event of the starter; false if the front end went away.
    fn starter_event(&mut self, starter: Starter) -> Result<bool> {
        let pid = self.tracer.pid();
        let target = LiveProcess::attach(pid, Mode::NoStop)?;
        enum Kind {
            Spawned { partial_attach_ok: bool },
            Aborting(String),
            Other,
        }
        let kind = match starter {
            Starter::Mpir(mpir) => match mpir::debug_state(&target, &mpir)? {
                mpir::MPIR_DEBUG_SPAWNED => Kind::Spawned {
                    partial_attach_ok: mpir.partial_attach_ok,
                },
                mpir::MPIR_DEBUG_ABORTING => Kind::Aborting(mpir::abort_string(&target, &mpir)),
                _ => Kind::Other,
            },
            Starter::Mpi2dd { info, .. } => {
                let info = mpi2dd::read_info(&target, info)?;
                match info.debug_state {
                    mpi2dd::DEBUG_START | mpi2dd::DEBUG_SPAWN => Kind::Spawned {
                        partial_attach_ok: info.mpi_flags & mpi2dd::MPIFLAG_PARTIAL_ATTACH_OK != 0,
                    },
                    mpi2dd::DEBUG_ABORT => Kind::Aborting(mpi2dd::abort_string(&target, &info)),
                    _ => Kind::Other,
                }
            }
        };
        match kind {
            Kind::Spawned { partial_attach_ok } => {
                report(&self.socket, &Report::Spawned { partial_attach_ok });
                let answered = self.serve(true)?;
                if !self.watch_ranks {
                    // Its only other event is the abort, not watched: the
                    // fewer breakpoints, the safer.
                    self.tracer.remove_breakpoint(pid, starter.breakpoint())?;
                }
                Ok(answered)
            }
            Kind::Aborting(message) => {
                report(&self.socket, &Report::Aborting { message });
                self.serve(true)
            }
            Kind::Other => Ok(true),
        }
    }

    /// A rank stopped at MPI_Abort, before anyone else knows: the message
    /// names it and its error code; false if the front end went away.
    fn abort_event(&mut self, pid: i32, tid: i32) -> Result<bool> {
        let rank = LiveProcess::attach(pid, Mode::NoStop)
            .ok()
            .and_then(|p| crate::inspect::rank_from_environment(&p));
        // MPI_Abort(comm, errorcode): the second argument, in rsi.
        let code = nix::sys::ptrace::getregs(nix::unistd::Pid::from_raw(tid))
            .map(|r| r.rsi as i32)
            .ok();
        let who = match rank {
            Some(rank) => format!("rank {rank} (pid {pid})"),
            None => format!("pid {pid}"),
        };
        let message = match code {
            Some(code) => format!("{who} called MPI_Abort with error code {code}"),
            None => format!("{who} called MPI_Abort"),
        };
        report(&self.socket, &Report::Aborting { message });
        self.serve(true)
    }
}
