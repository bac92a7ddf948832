//! Launch mode's front end (mqs-dump itself): starts the tracer, waits
//! for its reports, the timers and signals, dumps the job when asked (ranks
//! on other hosts through collectors), forwards signals to the starter and
//! ends with the job's exit status.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use mqs_core::interface::Target;
use mqs_core::model::JobDump;
use mqs_core::process::{LiveProcess, Mode};
use mqs_core::symbols::{SymbolCache, SymbolIndex};
use mqs_core::Error as CoreError;

use super::options::{Analyst, LaunchOptions};
use super::protocol::{self, Command as TracerCommand, Report};
use crate::{collect, inspect, mpi2dd, Error, Result};

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
pub fn launch(command: &[OsString], options: &LaunchOptions, analyst: &dyn Analyst) -> Result<i32> {
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
        .arg(protocol::TRACER_COMMAND)
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

    let mut front = Monitor {
        socket: front,
        deferred: Vec::new(),
        options,
        analyst,
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
                        break front.reported.as_ref().map_or(1, |r| r.1);
                    }
                }
            }
        }
    };
    let found = front.reported.as_ref().map(|r| r.1);
    // Closing the socket (for the reader thread's copy too) tells the
    // tracer to let the job go, if it still runs (a watch that found a
    // deadlock leaves it for the user to see).
    let _ = front.socket.shutdown(std::net::Shutdown::Both);
    drop(front);
    let _ = tracer_child.wait();
    Ok(found.unwrap_or(code))
}

fn io_err(what: &str, source: std::io::Error) -> Error {
    Error::from(CoreError::Io {
        path: what.into(),
        source,
    })
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
                .map_err(|source| {
                    Error::from(CoreError::Io {
                        path: path.clone(),
                        source,
                    })
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

/// The front end's state while the job runs.
struct Monitor<'a> {
    socket: UnixStream,
    /// Inputs that arrived while a dump waited for the tracer.
    deferred: Vec<Input>,
    options: &'a LaunchOptions,
    analyst: &'a dyn Analyst,
    out: Output,
    starter: Option<i32>,
    /// The starter's MPIR symbols were found and armed.
    armed: bool,
    /// The job-spawn event came: the starter lists its processes.
    spawned: bool,
    /// `--watch`: the snapshot before, and the finding reported last.
    previous: Option<JobDump>,
    /// With the exit code it ends the watch with.
    reported: Option<(String, i32)>,
}

impl Monitor<'_> {
    fn note(&mut self, text: &str) {
        eprintln!("mqs-dump: {text}");
        if matches!(self.out, Output::File(_)) && !self.options.json {
            self.out.write(&format!("mqs-dump: {text}\n"));
        }
    }

    fn send(&mut self, command: &TracerCommand) {
        protocol::send(&self.socket, command);
    }

    fn answer(&mut self) {
        self.send(&TracerCommand::Continue);
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
            Report::Failed { message } => return Err(Error::from(CoreError::Launch(message))),
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
            self.send(&TracerCommand::Freeze);
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
            self.send(&TracerCommand::Thaw);
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
            self.analyst.view(job)
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
            .and_then(|previous| self.analyst.persistent_finding(previous, &job));
        self.previous = Some(job);
        match finding {
            Some((words, code)) if self.reported.as_ref().map(|r| &r.0) != Some(&words) => {
                self.note("--watch: two snapshots in a row agree:");
                self.out.write(&format!("{words}\n"));
                if let Some(job) = self.previous.take() {
                    self.write_dump(&job);
                    self.previous = Some(job);
                }
                self.reported = Some((words, code));
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
    let job = (|| -> Result<_> {
        let target = LiveProcess::attach(starter, Mode::NoStop)?;
        let symbols =
            SymbolIndex::from_mapped_with_cache(cache.clone(), &target.mapped_objects()?)?;
        inspect::find_job(&target, &symbols, options)
    })();
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
        if m.pid <= 0 || !crate::hosts::is_local_host(&m.host) {
            continue;
        }
        let opened = (|| -> Result<()> {
            let rank = LiveProcess::attach(m.pid, Mode::NoStop)?;
            let index =
                SymbolIndex::from_mapped_with_cache(cache.clone(), &rank.mapped_objects()?)?;
            if let Some(info) = mpi2dd::info_address(&index) {
                let flags = mpi2dd::read_info(&rank, info)?.debugger_flags | mpi2dd::FLAG_GATE;
                rank.write_mpir_variable(
                    info + mpi2dd::DEBUGGER_FLAGS_OFFSET,
                    &flags.to_le_bytes(),
                )?;
                return Ok(());
            }
            if let Some(addr) = index.find_symbol("MPIR_debug_gate") {
                rank.write_mpir_variable(addr, &1i32.to_ne_bytes())?;
            }
            Ok(())
        })();
        if let Err(e) = opened {
            note(&format!(
                "rank {} (pid {}): cannot open its gate: {e}",
                m.rank, m.pid
            ));
        }
    }
}
