//! Running a program under our control: a starter (`mpirun`, `mpiexec`)
//! launched by the tool, with breakpoints, for MPIR launch mode.
//!
//! The program is started stopped (it raises SIGSTOP before exec), seized
//! with PTRACE_SEIZE, and continued into its exec. Every thread it creates
//! is traced too (PTRACE_O_TRACECLONE): a breakpoint hit by a thread we did
//! not trace would kill the process with SIGTRAP.
//!
//! Breakpoints are `int3` bytes written through /proc/PID/mem (which
//! writes read-only code the way a debugger must, copy-on-write, without
//! needing a stopped thread). A process the starter forks inherits a copy
//! of them: the child is traced from its birth (PTRACE_O_TRACEFORK), its
//! copy is restored at once and it is let go; a child that shares the
//! starter's memory (vfork, `posix_spawn`) cannot be restored without
//! restoring the starter, so it stays traced until it execs or exits, and a
//! breakpoint it hits is stepped over.
//!
//! [`Tracer::release`] (also on drop) restores every original byte and
//! detaches every thread: the starter runs on as if never traced. Should
//! the tracing process die instead, the kernel detaches the threads but
//! leaves the bytes; the caller (see `crate::launch`) runs the tracer in a
//! process of its own for that reason.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::ffi::{CString, OsStr, OsString};
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
/// How long a thread may take to stop for detaching, or to finish a step.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Something the traced starter did that its user must know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    /// A thread stopped at one of our breakpoints; it stays stopped until
    /// [`Tracer::resume`].
    Breakpoint { tid: i32, addr: u64 },
    /// The starter executed a new program: its breakpoints are gone and its
    /// symbols must be read again.
    Exec,
    /// The starter exited: its exit code, or the signal that ended it.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Why a thread of the starter is held stopped for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// At the breakpoint at this address (its instruction pointer is one
    /// past it).
    Breakpoint(u64),
    /// Right after exec.
    Exec,
}

/// A traced process that is not the starter (one it forked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChildState {
    /// Reported by its fork event, initial stop not seen yet.
    Born,
    /// Shares the starter's memory: traced until it execs or exits.
    SharesMemory,
}

/// The starter, traced.
#[derive(Debug)]
pub struct Tracer {
    pid: i32,
    mem: File,
    /// Its threads (tids) that we trace.
    threads: HashSet<i32>,
    /// Threads announced by a clone event whose first stop is still due.
    newborn: HashSet<i32>,
    /// Other processes we trace, and why.
    children: HashMap<i32, ChildState>,
    /// Address -> the byte the int3 replaced.
    breakpoints: HashMap<u64, u8>,
    /// Threads stopped for the caller, reported and not yet resumed.
    held: HashMap<i32, Hold>,
    /// New tracees whose first stop came before the event announcing them.
    early: HashSet<i32>,
    exited: bool,
}

impl Tracer {
    /// Starts `command` traced and stopped at its first instruction after
    /// exec (the dynamic loader's entry: only the program and the loader
    /// are mapped).
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
        let mem = OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|source| Error::Io {
                path: format!("/proc/{pid}/mem").into(),
                source,
            })?;
        let mut tracer = Self {
            pid,
            mem,
            threads: HashSet::from([pid]),
            newborn: HashSet::new(),
            children: HashMap::new(),
            breakpoints: HashMap::new(),
            held: HashMap::new(),
            early: HashSet::new(),
            exited: false,
        };
        // Run it to its exec: the first event we report.
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match tracer.next_event(Duration::from_millis(20))? {
                Some(TraceEvent::Exec) => return Ok(tracer),
                Some(TraceEvent::Exited { code, signal }) => {
                    return Err(launch(match (code, signal) {
                        // execvp failed in the child.
                        (Some(127), _) => "no such program (or it cannot be run)".into(),
                        _ => format!("exited at once (exit code {code:?}, signal {signal:?})"),
                    }));
                }
                Some(TraceEvent::Breakpoint { .. }) | None => {}
            }
            if Instant::now() > deadline {
                return Err(launch("did not start within 10 s".into()));
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Writes `bytes` into the starter's memory (an MPIR variable the tool
    /// may set, or a breakpoint).
    pub fn write(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        self.mem.write_all_at(bytes, addr).map_err(|e| Error::Read {
            pid: self.pid,
            addr,
            len: bytes.len(),
            detail: format!("cannot write: {e}"),
        })
    }

    fn read_byte(&self, addr: u64) -> Result<u8> {
        let mut b = [0u8];
        self.mem
            .read_exact_at(&mut b, addr)
            .map_err(|e| Error::Read {
                pid: self.pid,
                addr,
                len: 1,
                detail: e.to_string(),
            })?;
        Ok(b[0])
    }

    /// Plants a breakpoint at `addr` (idempotent).
    pub fn insert_breakpoint(&mut self, addr: u64) -> Result<()> {
        if self.breakpoints.contains_key(&addr) {
            return Ok(());
        }
        let original = self.read_byte(addr)?;
        self.write(addr, &[INT3])?;
        self.breakpoints.insert(addr, original);
        Ok(())
    }

    /// Removes the breakpoint at `addr`, if there is one.
    pub fn remove_breakpoint(&mut self, addr: u64) -> Result<()> {
        match self.breakpoints.remove(&addr) {
            Some(original) if !self.exited => self.write(addr, &[original]),
            _ => Ok(()),
        }
    }

    /// The breakpoints planted now.
    pub fn breakpoints(&self) -> Vec<u64> {
        self.breakpoints.keys().copied().collect()
    }

    /// Sends `signal` to the starter (it is passed on to it by the tracing
    /// loop like any signal).
    pub fn signal(&self, signal: i32) {
        if !self.exited {
            // SAFETY: kill(2) on our own child, still unreaped.
            unsafe { libc::kill(self.pid, signal) };
        }
    }

    /// Lets a thread stopped at a breakpoint go on: the original
    /// instruction is executed (one step with the byte restored), the
    /// breakpoint put back if it is still wanted, the thread continued.
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

    /// The next event, waiting at most `timeout`; None when nothing
    /// happened meanwhile. Every other stop (signals, new threads, forks,
    /// children's execs) is handled here.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<TraceEvent>> {
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

    fn handle(&mut self, tid: i32, status: i32) -> Result<Option<TraceEvent>> {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            self.threads.remove(&tid);
            self.children.remove(&tid);
            self.held.remove(&tid);
            self.early.remove(&tid);
            if tid == self.pid {
                self.exited = true;
                // Reaped by waitpid above: the Child must not wait again.
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
        let is_starter = self.threads.contains(&tid) || tid == self.pid;
        match event {
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                let new = ptrace::getevent(Pid::from_raw(tid)).unwrap_or(0) as i32;
                if new > 0 {
                    let thread = event == libc::PTRACE_EVENT_CLONE
                        && procfs::tgid(new).is_some_and(|g| g == self.pid);
                    if thread && is_starter {
                        self.threads.insert(new);
                        self.newborn.insert(new);
                    } else if event == libc::PTRACE_EVENT_FORK {
                        self.children.insert(new, ChildState::Born);
                    } else {
                        // vfork, or a clone sharing memory (posix_spawn).
                        self.children.insert(new, ChildState::SharesMemory);
                    }
                    if self.early.remove(&new) {
                        self.first_stop(new);
                    }
                }
                self.cont(tid, 0);
            }
            libc::PTRACE_EVENT_EXEC => {
                if is_starter {
                    // Every other thread is gone; the leader carries on.
                    self.threads.retain(|&t| t == self.pid);
                    self.newborn.clear();
                    self.held.clear();
                    self.breakpoints.clear();
                    // The exec is reported by the thread that made it.
                    self.threads.insert(tid);
                    // A new image: the reopened mem file sees it.
                    if let Ok(mem) = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(format!("/proc/{}/mem", self.pid))
                    {
                        self.mem = mem;
                    }
                    // Reported stopped; the caller resumes it.
                    self.held.insert(tid, Hold::Exec);
                    return Ok(Some(TraceEvent::Exec));
                }
                // A child started its own program: no breakpoint of ours
                // left in it.
                self.children.remove(&tid);
                let _ = ptrace::detach(Pid::from_raw(tid), None);
            }
            libc::PTRACE_EVENT_STOP => {
                if self.newborn.contains(&tid) || self.children.get(&tid) == Some(&ChildState::Born)
                {
                    self.first_stop(tid);
                } else if !is_starter && !self.children.contains_key(&tid) {
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
                    self.cont(tid, 0);
                }
            }
            0 if sig == libc::SIGTRAP => {
                let at = ptrace::getregs(Pid::from_raw(tid))
                    .map(|r| r.rip.wrapping_sub(1))
                    .unwrap_or(0);
                if self.breakpoints.contains_key(&at) {
                    if is_starter {
                        self.held.insert(tid, Hold::Breakpoint(at));
                        return Ok(Some(TraceEvent::Breakpoint { tid, addr: at }));
                    }
                    // A child sharing the starter's memory ran into one.
                    self.step_over(tid)?;
                } else {
                    // Not ours: deliver it.
                    self.cont(tid, sig);
                }
            }
            _ => {
                // A signal for the process: pass it on.
                self.cont(tid, sig);
            }
        }
        Ok(None)
    }

    /// The first stop of a new tracee: a thread of the starter goes on; a
    /// forked child with its own copy of our bytes gets them back and is
    /// let go; a child sharing the starter's memory stays traced.
    fn first_stop(&mut self, tid: i32) {
        if self.newborn.remove(&tid) {
            self.cont(tid, 0);
            return;
        }
        match self.children.get(&tid) {
            Some(ChildState::Born) => {
                self.restore_in(tid);
                self.children.remove(&tid);
                let _ = ptrace::detach(Pid::from_raw(tid), None);
            }
            _ => self.cont(tid, 0),
        }
    }

    fn cont(&self, tid: i32, sig: i32) {
        let data = sig as usize as *mut c_void;
        // SAFETY: PTRACE_CONT dereferences no pointer; data is the signal.
        unsafe { libc::ptrace(libc::PTRACE_CONT, tid, std::ptr::null_mut::<c_void>(), data) };
    }

    /// Writes the original bytes of every breakpoint into the memory of
    /// process `pid` (a forked child's own copy).
    fn restore_in(&self, pid: i32) {
        if let Ok(mem) = OpenOptions::new()
            .write(true)
            .open(format!("/proc/{pid}/mem"))
        {
            for (&addr, &original) in &self.breakpoints {
                let _ = mem.write_all_at(&[original], addr);
            }
        }
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
        let addr = regs.rip.wrapping_sub(1);
        let Some(&original) = self.breakpoints.get(&addr) else {
            // Removed while it was held: just go on from the address.
            regs.rip = addr;
            let _ = ptrace::setregs(p, regs);
            self.cont(tid, 0);
            return Ok(());
        };
        regs.rip = addr;
        ptrace::setregs(p, regs).map_err(|e| ptrace_err("PTRACE_SETREGS", e))?;
        self.write(addr, &[original])?;
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
                // Gone, or stuck: the byte still goes back below.
                _ => {
                    self.write(addr, &[INT3])?;
                    return Ok(());
                }
            }
        }
        if self.breakpoints.contains_key(&addr) {
            self.write(addr, &[INT3])?;
        }
        self.cont(tid, pending);
        Ok(())
    }

    /// Removes every breakpoint (from the starter and from children still
    /// traced) and detaches every thread and child. Idempotent.
    pub fn release(&mut self) -> Result<()> {
        if self.exited {
            self.breakpoints.clear();
            return Ok(());
        }
        let mut first = None;
        for addr in self.breakpoints() {
            if let Err(e) = self.remove_breakpoint(addr) {
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
        let tracees: Vec<i32> = self
            .threads
            .iter()
            .copied()
            .chain(self.children.keys().copied())
            .collect();
        for tid in tracees {
            detach_running(tid);
        }
        self.threads.clear();
        self.children.clear();
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
