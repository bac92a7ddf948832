//! Launch mode's tracer process (`mqs-dump __trace-starter`): starts the
//! starter as its only tracer, arms MPIR (or MPI2DD) once the starter's
//! symbols are mapped, holds it at each event until the front end answers,
//! and puts every byte back when the front end goes away.

use std::ffi::OsString;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use mqs_core::interface::Target;
use mqs_core::process::{LiveProcess, Mode, TraceEvent, Tracer};
use mqs_core::symbols::{SymbolCache, SymbolIndex};
use mqs_core::Error as CoreError;

use super::protocol::{self, Command, LineReader, Report};
use crate::mpir::{self, StarterSymbols};
use crate::{mpi2dd, Error, Result};

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
        protocol::send(
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
            protocol::send(
                &socket,
                &Report::Failed {
                    message: e.to_string(),
                },
            );
            return 1;
        }
    };
    tracer.keep_descendants(watch_ranks);
    protocol::send(&socket, &Report::Started { pid: tracer.pid() });
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
        protocol::send(
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
    starter: Option<EventHooks>,
    watch_ranks: bool,
}

/// How the starter announces events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventHooks {
    /// MPIR: `MPIR_Breakpoint` and `MPIR_debug_state`.
    Mpir(StarterSymbols),
    /// MPI2DD: `MPI2DD_breakpoint` and `MPI2DD_info.debug_state`.
    Mpi2dd { info: u64, breakpoint: u64 },
}

impl EventHooks {
    fn breakpoint(&self) -> u64 {
        match self {
            EventHooks::Mpir(m) => m.breakpoint,
            EventHooks::Mpi2dd { breakpoint, .. } => *breakpoint,
        }
    }
}

impl TracerSession {
    /// A process's symbols as mapped now.
    fn symbols(&self, pid: i32) -> Result<SymbolIndex> {
        let target = LiveProcess::attach(pid, Mode::NoStop)?;
        Ok(SymbolIndex::from_mapped_with_cache(
            self.cache.clone(),
            &target.mapped_objects()?,
        )?)
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
                    return Err(Error::from(CoreError::Launch(
                        "the starter has no MPIR_Breakpoint and its dynamic loader no \
                         _dl_debug_state to wait for one: is it an MPI starter?"
                            .into(),
                    )))
                }
                // A static program without MPI: nothing to watch.
                None => {
                    self.watched.insert(pid, Watch::Nothing);
                }
            }
        }
        Ok(self.tracer.resume(pid)?)
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
                EventHooks::Mpi2dd { info, breakpoint }
            } else {
                let Some(mpir) = StarterSymbols::find(symbols) else {
                    return Ok(false);
                };
                if let Some(addr) = mpir.being_debugged {
                    self.tracer.write(pid, addr, &1i32.to_ne_bytes())?;
                }
                EventHooks::Mpir(mpir)
            };
            self.tracer.insert_breakpoint(pid, starter.breakpoint())?;
            self.starter = Some(starter);
            protocol::send(&self.socket, &Report::Armed);
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
            match serde_json::from_str::<Command>(&line) {
                Ok(Command::Continue) if holding => return Ok(true),
                Ok(Command::Continue) => {}
                Ok(Command::Freeze) => {
                    self.tracer.freeze()?;
                    protocol::send(&self.socket, &Report::Frozen);
                }
                Ok(Command::Thaw) => self.tracer.thaw(),
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
                    protocol::send(&self.socket, &Report::Exited { code, signal });
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
    fn starter_event(&mut self, starter: EventHooks) -> Result<bool> {
        let pid = self.tracer.pid();
        let target = LiveProcess::attach(pid, Mode::NoStop)?;
        enum Kind {
            Spawned { partial_attach_ok: bool },
            Aborting(String),
            Other,
        }
        let kind = match starter {
            EventHooks::Mpir(mpir) => match mpir::debug_state(&target, &mpir)? {
                mpir::MPIR_DEBUG_SPAWNED => Kind::Spawned {
                    partial_attach_ok: mpir.partial_attach_ok,
                },
                mpir::MPIR_DEBUG_ABORTING => Kind::Aborting(mpir::abort_string(&target, &mpir)),
                _ => Kind::Other,
            },
            EventHooks::Mpi2dd { info, .. } => {
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
                protocol::send(&self.socket, &Report::Spawned { partial_attach_ok });
                let answered = self.serve(true)?;
                if !self.watch_ranks {
                    // Its only other event is the abort, not watched: the
                    // fewer breakpoints, the safer.
                    self.tracer.remove_breakpoint(pid, starter.breakpoint())?;
                }
                Ok(answered)
            }
            Kind::Aborting(message) => {
                protocol::send(&self.socket, &Report::Aborting { message });
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
        protocol::send(&self.socket, &Report::Aborting { message });
        self.serve(true)
    }
}
