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

use crate::dump::{JobDump, Launcher};
use crate::inspect;
use crate::mpir::{self, ProcDesc, StarterSymbols};
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
    /// Append dumps here instead of writing them to stderr.
    pub output: Option<PathBuf>,
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
    /// The job-spawn event: the starter waits for `Continue`.
    Spawned {
        table: Vec<ProcDesc>,
        partial_attach_ok: bool,
    },
    /// The abort event: the starter waits for `Continue`.
    Aborting { message: String },
    /// The starter exited.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The tracer could not go on.
    Failed { message: String },
}

/// The front end's answer to an event that holds the starter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
enum Command2 {
    Continue,
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
        tracer.arg("--keep-breakpoint");
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
        options,
        out: Output::open(options)?,
        starter: None,
        table: None,
    };
    // The timer runs from the job-spawn event: a job whose starter takes its
    // time is dumped once its processes ran for that long.
    let mut dump_due: Option<Instant> = None;
    let mut timer_set = false;
    let code = loop {
        if !timer_set && front.table.is_some() {
            timer_set = true;
            dump_due = options.dump_after.map(|d| Instant::now() + d);
        }
        let wait = dump_due.map_or(Duration::from_secs(3600), |due| {
            due.saturating_duration_since(Instant::now())
        });
        match rx.recv_timeout(wait) {
            Ok(Input::Report(report)) => {
                if let Some(code) = front.on_report(report)? {
                    break code;
                }
            }
            Ok(Input::TracerGone) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                break front.tracer_gone(&mut tracer_child);
            }
            Ok(Input::Signal {
                signal,
                from_terminal,
            }) => front.on_signal(signal, from_terminal),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                dump_due = None;
                front.dump_now("--dump-after");
            }
        }
    };
    let _ = tracer_child.wait();
    Ok(code)
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
    options: &'a LaunchOptions,
    out: Output,
    starter: Option<i32>,
    /// The job's process table, from the spawn event.
    table: Option<Vec<ProcDesc>>,
}

impl Front<'_> {
    fn note(&mut self, text: &str) {
        eprintln!("mqs-dump: {text}");
        if matches!(self.out, Output::File(_)) && !self.options.json {
            self.out.write(&format!("mqs-dump: {text}\n"));
        }
    }

    fn answer(&mut self) {
        let mut line = serde_json::to_string(&Command2::Continue).unwrap_or_default();
        line.push('\n');
        let _ = self.socket.write_all(line.as_bytes());
    }

    /// Handles a report; the exit code once the job has ended.
    fn on_report(&mut self, report: Report) -> Result<Option<i32>> {
        match report {
            Report::Started { pid } => self.starter = Some(pid),
            Report::Armed => {}
            Report::Spawned {
                table,
                partial_attach_ok,
            } => {
                if !partial_attach_ok {
                    open_gates(&table, &mut |t| self.note(t));
                }
                self.table = Some(table);
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
                    self.dump_now("--dump-on-abort");
                }
                self.answer();
            }
            Report::Exited { code, signal } => {
                return Ok(Some(match (code, signal) {
                    (Some(code), _) => code,
                    (None, Some(signal)) => 128 + signal,
                    (None, None) => 1,
                }))
            }
            Report::Failed { message } => return Err(Error::Launch(message)),
        }
        Ok(None)
    }

    fn on_signal(&mut self, signal: i32, from_terminal: bool) {
        if signal == signal_hook::consts::SIGUSR1 {
            if self.options.dump_on_signal {
                self.dump_now("SIGUSR1");
            } else {
                self.note("SIGUSR1 ignored (dumps on SIGUSR1 need --dump-on-signal)");
            }
            return;
        }
        if from_terminal {
            return;
        }
        if self.table.is_none() && self.starter.is_none() {
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

    fn dump_now(&mut self, why: &str) {
        let (Some(starter), Some(table)) = (self.starter, self.table.clone()) else {
            self.note(&format!(
                "{why}: the job has not started its processes yet; nothing to dump"
            ));
            return;
        };
        match dump_job(starter, &table, &self.options.dump) {
            Ok(job) => {
                let text = if self.options.json {
                    let mut line = serde_json::to_string(&job).unwrap_or_default();
                    line.push('\n');
                    line
                } else {
                    crate::render::text(&job)
                };
                self.out.write(&text);
            }
            Err(e) => self.note(&format!("{why}: the dump failed: {e}")),
        }
    }
}

/// Dumps the job of a starter we launched: its table is known, the starter
/// itself (traced by our tracer) is only looked at.
fn dump_job(starter: i32, table: &[ProcDesc], options: &inspect::Options) -> Result<JobDump> {
    let target = LiveProcess::attach(starter, Mode::NoStop)?;
    let launcher = Launcher {
        pid: starter,
        executable: target
            .executable()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    inspect::dump_table(launcher, &target, table, options, &mut |_, _| {})
}

/// Sets `MPIR_debug_gate` in every local rank: a starter without
/// `MPIR_partial_attach_ok` expects the tool to release each process.
fn open_gates(table: &[ProcDesc], note: &mut dyn FnMut(&str)) {
    let cache = Arc::new(SymbolCache::new(Vec::new()));
    for entry in table {
        if entry.pid <= 0 || !mpir::is_local_host(&entry.host) {
            continue;
        }
        let gate = LiveProcess::attach(entry.pid, Mode::NoStop).and_then(|rank| {
            let index =
                SymbolIndex::from_mapped_with_cache(cache.clone(), &rank.mapped_objects()?)?;
            match index.find_symbol("MPIR_debug_gate") {
                Some(addr) => rank.write_mpir_variable(addr, &1i32.to_ne_bytes()),
                None => Ok(()),
            }
        });
        if let Err(e) = gate {
            note(&format!(
                "rank {} (pid {}): cannot open its MPIR_debug_gate: {e}",
                entry.rank, entry.pid
            ));
        }
    }
}

// ---- The tracer process ---------------------------------------------------

/// The tracer: runs `command` traced, reports to the front end over the
/// socket `control`, and exits once the starter exits or the front end is
/// gone. Returns the process's exit code.
///
/// # Safety
/// `control` must be an open socket file descriptor this process owns.
pub unsafe fn run_tracer(control: i32, command: &[OsString], keep_breakpoint: bool) -> i32 {
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
    let tracer = match Tracer::spawn(program, &command[1..]) {
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
    report(&socket, &Report::Started { pid: tracer.pid() });
    let mut session = TracerSession {
        socket,
        tracer,
        cache: Arc::new(SymbolCache::new(Vec::new())),
        loader: None,
        mpir: None,
        keep_breakpoint,
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

/// The tracer's state.
struct TracerSession {
    socket: UnixStream,
    tracer: Tracer,
    cache: Arc<SymbolCache>,
    /// The loader's breakpoint, while the MPIR symbols are not mapped yet.
    loader: Option<u64>,
    mpir: Option<StarterSymbols>,
    keep_breakpoint: bool,
}

impl TracerSession {
    /// The starter's symbols as mapped now.
    fn symbols(&self) -> Result<SymbolIndex> {
        let target = LiveProcess::attach(self.tracer.pid(), Mode::NoStop)?;
        SymbolIndex::from_mapped_with_cache(self.cache.clone(), &target.mapped_objects()?)
    }

    /// A new program image: find the MPIR symbols, or wait for the loader
    /// to map them. The starter is held; it is resumed here.
    fn after_exec(&mut self) -> Result<()> {
        self.mpir = None;
        self.loader = None;
        let symbols = self.symbols()?;
        if !self.arm(&symbols)? {
            let loader = symbols.find_function("_dl_debug_state").ok_or_else(|| {
                Error::Launch(
                    "the starter has no MPIR_Breakpoint and its dynamic loader no \
                     _dl_debug_state to wait for one: is it an MPI starter?"
                        .into(),
                )
            })?;
            self.tracer.insert_breakpoint(loader)?;
            self.loader = Some(loader);
        }
        self.tracer.resume(self.tracer.pid())
    }

    /// Once the MPIR symbols are mapped: tell the starter a tool is here and
    /// plant the event breakpoint. Whether they were found.
    fn arm(&mut self, symbols: &SymbolIndex) -> Result<bool> {
        let Some(mpir) = StarterSymbols::find(symbols) else {
            return Ok(false);
        };
        if let Some(addr) = mpir.being_debugged {
            self.tracer.write(addr, &1i32.to_ne_bytes())?;
        }
        self.tracer.insert_breakpoint(mpir.breakpoint)?;
        if let Some(loader) = self.loader.take() {
            self.tracer.remove_breakpoint(loader)?;
        }
        self.mpir = Some(mpir);
        report(&self.socket, &Report::Armed);
        Ok(true)
    }

    /// Waits for the front end's answer; false if it is gone.
    fn await_continue(&self) -> bool {
        let mut line = String::new();
        let mut reader = BufReader::new(&self.socket);
        matches!(reader.read_line(&mut line), Ok(n) if n > 0)
    }

    /// Whether the front end closed its end (without waiting).
    fn front_end_gone(&self) -> bool {
        let mut fds = libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid descriptor, no wait.
        let n = unsafe { libc::poll(&mut fds, 1, 0) };
        n > 0 && fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLIN) != 0 && {
            // Readable: EOF (gone) or unexpected data (ignored).
            let mut byte = [0u8; 1];
            // SAFETY: recv into a one-byte buffer we own, not blocking.
            let r = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    byte.as_mut_ptr().cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            r == 0
        }
    }

    fn run(&mut self) -> Result<()> {
        // Held right after its exec.
        self.after_exec()?;
        loop {
            if self.front_end_gone() {
                return Ok(());
            }
            let Some(event) = self.tracer.next_event(Duration::from_millis(50))? else {
                continue;
            };
            match event {
                TraceEvent::Exited { code, signal } => {
                    report(&self.socket, &Report::Exited { code, signal });
                    return Ok(());
                }
                TraceEvent::Exec => self.after_exec()?,
                TraceEvent::Breakpoint { tid, addr } if Some(addr) == self.loader => {
                    let symbols = self.symbols()?;
                    self.arm(&symbols)?;
                    self.tracer.resume(tid)?;
                }
                TraceEvent::Breakpoint { tid, addr } => {
                    let gone = match self.mpir.filter(|m| m.breakpoint == addr) {
                        Some(mpir) => self.mpir_event(&mpir)?,
                        None => false,
                    };
                    self.tracer.resume(tid)?;
                    if gone {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// An MPIR event; true if the front end went away meanwhile.
    fn mpir_event(&mut self, mpir: &StarterSymbols) -> Result<bool> {
        let target = LiveProcess::attach(self.tracer.pid(), Mode::NoStop)?;
        match mpir::debug_state(&target, mpir)? {
            mpir::MPIR_DEBUG_SPAWNED => {
                let symbols = self.symbols()?;
                let table = mpir::read_proctable(&target, &symbols)?;
                report(
                    &self.socket,
                    &Report::Spawned {
                        table,
                        partial_attach_ok: mpir.partial_attach_ok,
                    },
                );
                let answered = self.await_continue();
                if !self.keep_breakpoint {
                    self.tracer.remove_breakpoint(mpir.breakpoint)?;
                }
                Ok(!answered)
            }
            mpir::MPIR_DEBUG_ABORTING => {
                report(
                    &self.socket,
                    &Report::Aborting {
                        message: mpir::abort_string(&target, mpir),
                    },
                );
                Ok(!self.await_continue())
            }
            _ => Ok(false),
        }
    }
}
