//! Running a program under our control: a starter (`mpirun`, `mpiexec`)
//! launched by the tool, with breakpoints, for MPIR launch mode; and, when
//! asked, the processes it starts.
//!
//! The program is started stopped (it raises SIGSTOP before exec), seized
//! with PTRACE_SEIZE, and continued into its exec. Every thread it creates
//! is traced too (PTRACE_O_TRACECLONE): a breakpoint hit by a thread we did
//! not trace would kill the process with SIGTRAP. So is every process it
//! forks (PTRACE_O_TRACEFORK/VFORK), from its birth: a forked process
//! inherits a copy of our breakpoint bytes, which is restored at once. A
//! process that shares its parent's memory (vfork, `posix_spawn`) cannot be
//! restored without restoring the parent, so it stays traced until it execs
//! or exits, and a breakpoint it hits is stepped over. After its exec a
//! process has no byte of ours: it is let go, or, with
//! [`Tracer::keep_descendants`], kept (the launch mode's abort watch plants
//! breakpoints in the ranks).
//!
//! Breakpoints are `int3` bytes written through /proc/PID/mem (which writes
//! read-only code the way a debugger must, copy-on-write, without needing a
//! stopped thread).
//!
//! [`Tracer::release`] (also on drop) restores every original byte and
//! detaches every thread: the processes run on as if never traced. Should
//! the tracing process die instead, the kernel detaches the threads but
//! leaves the bytes; the caller (see `crate::launch`) runs the tracer in a
//! process of its own for that reason.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{c_void, CString, OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::procfs;
use crate::{Error, Result};

const INT3: u8 = 0xcc;
/// How long a thread may take to stop for detaching, freezing, or to
/// finish a step.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Something a traced process did that the tracer's user must know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    /// A thread of process `pid` stopped at one of our breakpoints; it
    /// stays stopped until [`Tracer::resume`].
    Breakpoint { pid: i32, tid: i32, addr: u64 },
    /// Process `pid` (the starter, or a kept descendant) executed a new
    /// program: it has none of our breakpoints, and is held until
    /// [`Tracer::resume`].
    Exec { pid: i32 },
    /// The starter exited: its exit code, or the signal that ended it.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Why a thread is held stopped for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// At the breakpoint at this address (its instruction pointer is one
    /// past it).
    Breakpoint(u64),
    /// Right after exec.
    Exec,
}

/// One traced process.
#[derive(Debug)]
struct Proc {
    mem: Option<File>,
    /// Address -> the byte the int3 replaced.
    breakpoints: HashMap<u64, u8>,
    /// Until it execs, it shares this process's memory (vfork).
    shares_memory_of: Option<i32>,
    /// Forked, its first stop not seen yet: it holds a copy of its
    /// parent's bytes, restored then.
    forked_from: Option<i32>,
}

impl Proc {
    fn open(pid: i32) -> Proc {
        Proc {
            mem: open_mem(pid),
            breakpoints: HashMap::new(),
            shares_memory_of: None,
            forked_from: None,
        }
    }
}

fn open_mem(pid: i32) -> Option<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .ok()
}

/// The starter and whatever else we trace.
#[derive(Debug)]
pub struct Tracer {
    /// The starter: our child.
    pid: i32,
    procs: HashMap<i32, Proc>,
    /// Every traced thread, with its process.
    threads: HashMap<i32, i32>,
    /// Tracees announced by an event whose first stop is still due.
    newborn: HashSet<i32>,
    /// Tracees whose first stop came before the event announcing them.
    early: HashSet<i32>,
    /// Threads stopped for the caller, reported and not yet resumed.
    held: HashMap<i32, Hold>,
    /// Threads stopped by [`Tracer::freeze`].
    frozen: HashSet<i32>,
    /// Events seen while freezing, reported next.
    pending: VecDeque<TraceEvent>,
    keep_descendants: bool,
    exited: bool,
}

impl Tracer {
    /// Starts `program args...` traced and stopped right after its exec
    /// (at the dynamic loader's entry: only the program and the loader are
    /// mapped); reported by the first [`TraceEvent::Exec`], which this
    /// consumes: the caller resumes the starter with [`Tracer::resume`].
    pub fn spawn(program: &OsStr, args: &[OsString]) -> Result<Self> {
        let program_name = program.to_string_lossy().into_owned();
        let launch = |detail: String| Error::Launch(format!("{program_name}: {detail}"));
        // Everything the child needs is made before fork: after it, only
        // async-signal-safe calls.
        let c_string = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| launch("a NUL byte in the command".into()))
        };
        let file = c_string(program)?;
        let mut argv_owned = vec![file.clone()];
        for a in args {
            argv_owned.push(c_string(a)?);
        }
        let mut argv: Vec<*const libc::c_char> = argv_owned.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: fork(2); the child below makes only async-signal-safe
        // calls (raise, execvp, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(launch(format!("fork: {}", std::io::Error::last_os_error())));
        }
        if pid == 0 {
            // SAFETY: in the child: stop until the tracer has seized us, then
            // become the program; argv is NULL-terminated.
            unsafe {
                libc::raise(libc::SIGSTOP);
                libc::execvp(file.as_ptr(), argv.as_ptr());
                libc::_exit(127);
            }
        }
        let ptrace_err = |op, errno| Error::Ptrace {
            op,
            tid: pid,
            errno,
        };
        // Its SIGSTOP, before exec.
        wait_stopped(pid).map_err(|e| ptrace_err("waitpid", e))?;
        let options = ptrace::Options::PTRACE_O_TRACECLONE
            | ptrace::Options::PTRACE_O_TRACEFORK
            | ptrace::Options::PTRACE_O_TRACEVFORK
            | ptrace::Options::PTRACE_O_TRACEEXEC;
        ptrace::seize(Pid::from_raw(pid), options).map_err(|e| ptrace_err("PTRACE_SEIZE", e))?;
        nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGCONT)
            .map_err(|e| ptrace_err("kill(SIGCONT)", e))?;
        let mut tracer = Self {
            pid,
            procs: HashMap::from([(pid, Proc::open(pid))]),
            threads: HashMap::from([(pid, pid)]),
            newborn: HashSet::new(),
            early: HashSet::new(),
            held: HashMap::new(),
            frozen: HashSet::new(),
            pending: VecDeque::new(),
            keep_descendants: false,
            exited: false,
        };
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match tracer.next_event(Duration::from_millis(20))? {
                Some(TraceEvent::Exec { pid: p }) if p == pid => return Ok(tracer),
                Some(TraceEvent::Exited { code, signal }) => {
                    return Err(launch(match (code, signal) {
                        // execvp failed in the child.
                        (Some(127), _) => "no such program (or it cannot be run)".into(),
                        _ => format!("exited at once (exit code {code:?}, signal {signal:?})"),
                    }));
                }
                _ => {}
            }
            if Instant::now() > deadline {
                return Err(launch("did not start within 10 s".into()));
            }
        }
    }

    /// The starter's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Keep tracing the processes the starter (and they) start, past their
    /// exec, reporting each exec; by default they are let go at exec.
    pub fn keep_descendants(&mut self, keep: bool) {
        self.keep_descendants = keep;
    }

    /// The processes traced now, the starter first.
    pub fn processes(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self.procs.keys().copied().collect();
        pids.sort_by_key(|&p| (p != self.pid, p));
        pids
    }

    /// Writes `bytes` into process `pid` (an MPIR variable the tool may set,
    /// or a breakpoint).
    pub fn write(&self, pid: i32, addr: u64, bytes: &[u8]) -> Result<()> {
        let mem = self.procs.get(&pid).and_then(|p| p.mem.as_ref());
        let result = match mem {
            Some(mem) => mem.write_all_at(bytes, addr),
            None => Err(std::io::Error::from_raw_os_error(libc::ESRCH)),
        };
        result.map_err(|e| Error::Read {
            pid,
            addr,
            len: bytes.len(),
            detail: format!("cannot write: {e}"),
        })
    }

    fn read_byte(&self, pid: i32, addr: u64) -> Result<u8> {
        let mut b = [0u8];
        let mem = self.procs.get(&pid).and_then(|p| p.mem.as_ref());
        let result = match mem {
            Some(mem) => mem.read_exact_at(&mut b, addr),
            None => Err(std::io::Error::from_raw_os_error(libc::ESRCH)),
        };
        result.map_err(|e| Error::Read {
            pid,
            addr,
            len: 1,
            detail: e.to_string(),
        })?;
        Ok(b[0])
    }

    /// Plants a breakpoint at `addr` in process `pid` (idempotent).
    pub fn insert_breakpoint(&mut self, pid: i32, addr: u64) -> Result<()> {
        if self
            .procs
            .get(&pid)
            .is_some_and(|p| p.breakpoints.contains_key(&addr))
        {
            return Ok(());
        }
        let original = self.read_byte(pid, addr)?;
        self.write(pid, addr, &[INT3])?;
        if let Some(p) = self.procs.get_mut(&pid) {
            p.breakpoints.insert(addr, original);
        }
        Ok(())
    }

    /// Removes the breakpoint at `addr` of process `pid`, if there is one.
    pub fn remove_breakpoint(&mut self, pid: i32, addr: u64) -> Result<()> {
        let original = self
            .procs
            .get_mut(&pid)
            .and_then(|p| p.breakpoints.remove(&addr));
        match original {
            Some(original) => self.write(pid, addr, &[original]),
            None => Ok(()),
        }
    }

    /// Sends `signal` to the starter (passed on to it by the tracing loop
    /// like any signal).
    pub fn signal(&self, signal: i32) {
        if !self.exited {
            // SAFETY: kill(2) on our own child, still unreaped.
            unsafe { libc::kill(self.pid, signal) };
        }
    }

    /// Lets a held thread go on. At a breakpoint, the original instruction
    /// is executed (one step with the byte restored) and the breakpoint put
    /// back if it is still wanted.
    pub fn resume(&mut self, tid: i32) -> Result<()> {
        match self.held.remove(&tid) {
            Some(Hold::Breakpoint(_)) => self.step_over(tid),
            Some(Hold::Exec) => {
                self.cont(tid, 0);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Stops every traced thread that runs (PTRACE_INTERRUPT) and waits for
    /// them: every traced process is still until [`Tracer::thaw`].
    pub fn freeze(&mut self) -> Result<()> {
        let running: Vec<i32> = self
            .threads
            .keys()
            .copied()
            .filter(|t| !self.held.contains_key(t) && !self.frozen.contains(t))
            .collect();
        let mut waiting: HashSet<i32> = HashSet::new();
        for tid in running {
            if ptrace::interrupt(Pid::from_raw(tid)).is_ok() {
                waiting.insert(tid);
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while !waiting.is_empty() && Instant::now() < deadline {
            let mut status = 0;
            // SAFETY: waitpid writes only the status integer.
            let tid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
            if tid <= 0 {
                if tid < 0 && Errno::last() == Errno::ECHILD {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            let our_stop = libc::WIFSTOPPED(status)
                && status >> 16 == libc::PTRACE_EVENT_STOP
                && libc::WSTOPSIG(status) == libc::SIGTRAP
                && waiting.contains(&tid);
            if our_stop {
                waiting.remove(&tid);
                self.frozen.insert(tid);
                continue;
            }
            // Anything else is handled as usual, its event kept for later;
            // a thread that stopped otherwise is not waited for any more.
            if libc::WIFSTOPPED(status) || !self.threads.contains_key(&tid) {
                waiting.remove(&tid);
            }
            if let Some(event) = self.handle(tid, status)? {
                self.pending.push_back(event);
            }
            // A thread handled above and left stopped counts as frozen.
            if self.held.contains_key(&tid) {
                waiting.remove(&tid);
            }
        }
        Ok(())
    }

    /// Lets the threads [`Tracer::freeze`] stopped go on.
    pub fn thaw(&mut self) {
        for tid in std::mem::take(&mut self.frozen) {
            self.cont(tid, 0);
        }
    }

    /// The next event, waiting at most `timeout`; None when nothing
    /// happened meanwhile. Every other stop (signals, new threads, forks,
    /// execs of processes let go) is handled here.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<TraceEvent>> {
        if let Some(event) = self.pending.pop_front() {
            return Ok(Some(event));
        }
        let deadline = Instant::now() + timeout;
        loop {
            if self.exited {
                return Ok(None);
            }
            let mut status = 0;
            // SAFETY: waitpid writes only the status integer.
            let tid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
            if tid < 0 {
                match Errno::last() {
                    Errno::EINTR => continue,
                    // Nothing traced and no child left.
                    Errno::ECHILD => {
                        self.exited = true;
                        return Ok(Some(TraceEvent::Exited {
                            code: None,
                            signal: None,
                        }));
                    }
                    errno => {
                        return Err(Error::Ptrace {
                            op: "waitpid",
                            tid: -1,
                            errno,
                        })
                    }
                }
            }
            if tid == 0 {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            if let Some(event) = self.handle(tid, status)? {
                return Ok(Some(event));
            }
        }
    }

    /// Forgets a thread (and its process, if it was the last of it).
    fn gone(&mut self, tid: i32) {
        self.held.remove(&tid);
        self.frozen.remove(&tid);
        self.early.remove(&tid);
        self.newborn.remove(&tid);
        if let Some(pid) = self.threads.remove(&tid) {
            if !self.threads.values().any(|&p| p == pid) {
                self.procs.remove(&pid);
            }
        }
    }

    fn handle(&mut self, tid: i32, status: i32) -> Result<Option<TraceEvent>> {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            self.gone(tid);
            if tid == self.pid {
                self.exited = true;
                let (code, signal) = if libc::WIFEXITED(status) {
                    (Some(libc::WEXITSTATUS(status)), None)
                } else {
                    (None, Some(libc::WTERMSIG(status)))
                };
                return Ok(Some(TraceEvent::Exited { code, signal }));
            }
            return Ok(None);
        }
        if !libc::WIFSTOPPED(status) {
            return Ok(None);
        }
        let sig = libc::WSTOPSIG(status);
        let event = status >> 16;
        let known = self.threads.get(&tid).copied();
        match event {
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                let new = ptrace::getevent(Pid::from_raw(tid)).unwrap_or(0) as i32;
                if let (true, Some(parent)) = (new > 0, known) {
                    self.born(parent, new, event);
                }
                self.cont(tid, 0);
            }
            libc::PTRACE_EVENT_EXEC => {
                // The exec is reported by the thread that made it, which
                // now carries the process's pid; every other thread is gone.
                let pid = known.unwrap_or(tid);
                self.threads.retain(|_, p| *p != pid);
                self.threads.insert(tid, pid);
                self.held.retain(|t, _| self.threads.contains_key(t));
                let mut fresh = Proc::open(pid);
                if pid != self.pid && !self.keep_descendants {
                    // No byte of ours in the new image: let it go.
                    self.procs.remove(&pid);
                    self.threads.remove(&tid);
                    let _ = ptrace::detach(Pid::from_raw(tid), None);
                    return Ok(None);
                }
                fresh.shares_memory_of = None;
                self.procs.insert(pid, fresh);
                self.held.insert(tid, Hold::Exec);
                return Ok(Some(TraceEvent::Exec { pid }));
            }
            libc::PTRACE_EVENT_STOP => {
                if self.newborn.remove(&tid) {
                    self.first_stop(tid);
                } else if known.is_none() {
                    // Its parent's event is still to come.
                    self.early.insert(tid);
                } else if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) {
                    // A group-stop: stay stopped until SIGCONT, as untraced.
                    // SAFETY: PTRACE_LISTEN dereferences no pointer.
                    unsafe {
                        libc::ptrace(
                            libc::PTRACE_LISTEN,
                            tid,
                            std::ptr::null_mut::<c_void>(),
                            std::ptr::null_mut::<c_void>(),
                        )
                    };
                } else {
                    // A stop of an interrupt we no longer wait for.
                    self.cont(tid, 0);
                }
            }
            0 if sig == libc::SIGTRAP => {
                let Some(pid) = known else {
                    self.cont(tid, sig);
                    return Ok(None);
                };
                let at = ptrace::getregs(Pid::from_raw(tid))
                    .map(|r| r.rip.wrapping_sub(1))
                    .unwrap_or(0);
                let owner = self.memory_owner(pid);
                let ours = self
                    .procs
                    .get(&owner)
                    .is_some_and(|p| p.breakpoints.contains_key(&at));
                if !ours {
                    // Not ours: deliver it.
                    self.cont(tid, sig);
                } else if owner == pid {
                    self.held.insert(tid, Hold::Breakpoint(at));
                    return Ok(Some(TraceEvent::Breakpoint { pid, tid, addr: at }));
                } else {
                    // A child sharing its parent's memory ran into one.
                    self.held.insert(tid, Hold::Breakpoint(at));
                    self.step_over(tid)?;
                }
            }
            _ => {
                // A signal for the process: pass it on.
                self.cont(tid, sig);
            }
        }
        Ok(None)
    }

    /// The process whose memory (and breakpoints) `pid` uses.
    fn memory_owner(&self, pid: i32) -> i32 {
        self.procs
            .get(&pid)
            .and_then(|p| p.shares_memory_of)
            .unwrap_or(pid)
    }

    /// A clone, fork or vfork by a thread of process `parent` made `new`.
    fn born(&mut self, parent: i32, new: i32, event: i32) {
        let thread =
            event == libc::PTRACE_EVENT_CLONE && procfs::tgid(new).is_some_and(|g| g == parent);
        if thread {
            self.threads.insert(new, parent);
        } else {
            let mut proc = Proc::open(new);
            if event == libc::PTRACE_EVENT_FORK {
                proc.forked_from = Some(self.memory_owner(parent));
            } else {
                // vfork, or a clone sharing memory (posix_spawn).
                proc.shares_memory_of = Some(self.memory_owner(parent));
            }
            self.procs.insert(new, proc);
            self.threads.insert(new, new);
        }
        if self.early.remove(&new) {
            self.first_stop(new);
        } else {
            self.newborn.insert(new);
        }
    }

    /// The first stop of a new tracee: a forked process gets its parent's
    /// original bytes back in its own copy of memory, and is let go unless
    /// descendants are kept; anything else just goes on.
    fn first_stop(&mut self, tid: i32) {
        let Some(pid) = self.threads.get(&tid).copied() else {
            self.cont(tid, 0);
            return;
        };
        let from = self.procs.get_mut(&pid).and_then(|p| p.forked_from.take());
        if let Some(parent) = from {
            if let (Some(parent), Some(child)) = (self.procs.get(&parent), self.procs.get(&pid)) {
                if let Some(mem) = &child.mem {
                    for (&addr, &original) in &parent.breakpoints {
                        let _ = mem.write_all_at(&[original], addr);
                    }
                }
            }
            if !self.keep_descendants {
                self.procs.remove(&pid);
                self.threads.remove(&tid);
                let _ = ptrace::detach(Pid::from_raw(tid), None);
                return;
            }
        }
        self.cont(tid, 0);
    }

    fn cont(&self, tid: i32, sig: i32) {
        let data = sig as usize as *mut c_void;
        // SAFETY: PTRACE_CONT dereferences no pointer; data is the signal.
        unsafe { libc::ptrace(libc::PTRACE_CONT, tid, std::ptr::null_mut::<c_void>(), data) };
    }

    /// Executes the original instruction under a breakpoint at which `tid`
    /// is stopped, then continues the thread.
    fn step_over(&mut self, tid: i32) -> Result<()> {
        let p = Pid::from_raw(tid);
        let ptrace_err = |op, errno| Error::Ptrace { op, tid, errno };
        let mut regs = match ptrace::getregs(p) {
            Ok(r) => r,
            // It exited meanwhile.
            Err(Errno::ESRCH) => return Ok(()),
            Err(e) => return Err(ptrace_err("PTRACE_GETREGS", e)),
        };
        let pid = self.threads.get(&tid).copied().unwrap_or(tid);
        let owner = self.memory_owner(pid);
        let addr = regs.rip.wrapping_sub(1);
        regs.rip = addr;
        ptrace::setregs(p, regs).map_err(|e| ptrace_err("PTRACE_SETREGS", e))?;
        let original = self
            .procs
            .get(&owner)
            .and_then(|p| p.breakpoints.get(&addr).copied());
        let Some(original) = original else {
            // Removed while it was held: the original byte is back.
            self.cont(tid, 0);
            return Ok(());
        };
        self.write(owner, addr, &[original])?;
        let mut pending = 0;
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            ptrace::step(p, None).map_err(|e| ptrace_err("PTRACE_SINGLESTEP", e))?;
            match wait_tid(tid, deadline) {
                Ok(status) if libc::WIFSTOPPED(status) => {
                    let sig = libc::WSTOPSIG(status);
                    if sig == libc::SIGTRAP && status >> 16 == 0 {
                        break;
                    }
                    // A signal arrived first: keep it for after the step.
                    if status >> 16 == 0 {
                        pending = sig;
                    }
                }
                // Gone, or stuck: the byte goes back all the same.
                _ => {
                    self.write(owner, addr, &[INT3])?;
                    return Ok(());
                }
            }
        }
        self.write(owner, addr, &[INT3])?;
        self.cont(tid, pending);
        Ok(())
    }

    /// Removes every breakpoint and detaches every traced thread.
    /// Idempotent.
    pub fn release(&mut self) -> Result<()> {
        if self.exited && self.procs.is_empty() {
            return Ok(());
        }
        let mut first = None;
        let planted: Vec<(i32, u64)> = self
            .procs
            .iter()
            .flat_map(|(&pid, p)| p.breakpoints.keys().map(move |&a| (pid, a)))
            .collect();
        for (pid, addr) in planted {
            if let Err(e) = self.remove_breakpoint(pid, addr) {
                first.get_or_insert(e);
            }
        }
        // Threads at a breakpoint go back to its address: the byte there
        // is the original now.
        for (tid, hold) in std::mem::take(&mut self.held) {
            if let Hold::Breakpoint(addr) = hold {
                if let Ok(mut regs) = ptrace::getregs(Pid::from_raw(tid)) {
                    regs.rip = addr;
                    let _ = ptrace::setregs(Pid::from_raw(tid), regs);
                }
            }
        }
        for tid in std::mem::take(&mut self.threads).into_keys() {
            detach_running(tid);
        }
        self.procs.clear();
        self.frozen.clear();
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Stops a running tracee (or takes one already stopped) and detaches it.
fn detach_running(tid: i32) {
    let p = Pid::from_raw(tid);
    // Detaching needs a stopped tracee; a stopped one detaches at once.
    if ptrace::detach(p, None).is_ok() {
        return;
    }
    if ptrace::interrupt(p).is_err() {
        return;
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        match wait_tid(tid, deadline) {
            Ok(status) if libc::WIFSTOPPED(status) => {
                let sig = libc::WSTOPSIG(status);
                let event = status >> 16;
                // A signal that arrived meanwhile is handed back on detach.
                let pass = if event == 0 && sig != libc::SIGTRAP {
                    Signal::try_from(sig).ok()
                } else {
                    None
                };
                if ptrace::detach(p, pass).is_ok() || Instant::now() > deadline {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Waits for the child's own stop (its SIGSTOP before exec).
fn wait_stopped(pid: i32) -> std::result::Result<(), Errno> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes only the status integer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if r < 0 {
            match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(e),
            }
        }
        if libc::WIFSTOPPED(status) {
            return Ok(());
        }
        return Err(Errno::ESRCH);
    }
}

/// Waits for a state change of one tracee, up to `deadline`.
fn wait_tid(tid: i32, deadline: Instant) -> std::result::Result<i32, Errno> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only the status integer.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::WNOHANG | libc::__WALL) };
        if r < 0 {
            match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(e),
            }
        }
        if r > 0 {
            return Ok(status);
        }
        if Instant::now() > deadline {
            return Err(Errno::ETIMEDOUT);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
