//! Holding every thread of a process in a ptrace-stop, and letting go.
//!
//! Stop: PTRACE_SEIZE each thread listed in /proc/PID/task, PTRACE_INTERRUPT
//! it, wait until it reports a stop, and rescan until no new thread appears (a
//! thread can create others until it is stopped). SEIZE, unlike
//! PTRACE_ATTACH, sends no SIGSTOP, so a detach, ours or the kernel's when the
//! tracing thread exits, leaves nothing stopped behind.
//!
//! A thread may report a signal-delivery-stop before the interrupt stop (a
//! signal arrived after SEIZE). We pass the signal straight on (PTRACE_CONT
//! with it: the original siginfo is kept) and wait on; the pending interrupt
//! stops the thread before it runs any more code. Holding it in that stop
//! instead would lose the signal if we died: the kernel's detach on tracer
//! exit does not re-deliver a signal whose stop the tracer has collected.
//! So we look at a stop with WNOWAIT first and collect only interrupt stops.
//!
//! The kernel accepts ptrace requests only from the thread that attached, so
//! [`StoppedThreads`] is neither `Send` nor `Sync`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::{signal, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use super::{diagnose, maps, procfs};
use crate::{Error, Result};

/// How long a thread may take to reach the stop. Only a thread stuck in
/// uninterruptible sleep (a hung NFS read, say) takes more than microseconds.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Every thread of one process, held in a ptrace-stop until dropped.
#[derive(Debug)]
pub(crate) struct StoppedThreads {
    pid: i32,
    stopped: Vec<i32>,
    /// Seized and interrupted, stop not yet seen.
    stopping: Vec<i32>,
    /// A stop already timed out: resuming does not wait for it again.
    gave_up: bool,
    /// The signal that held the main thread in a group-stop when we came
    /// (`kill -STOP`): a seized thread already stopped reports it as it
    /// stops for us. It stays stopped when we let go.
    group_stop: Option<i32>,
    _not_send: PhantomData<*const ()>,
}

impl StoppedThreads {
    pub(crate) fn stop(pid: i32) -> Result<Self> {
        release_stragglers();
        let mut this = Self {
            pid,
            stopped: Vec::new(),
            stopping: Vec::new(),
            gave_up: false,
            group_stop: None,
            _not_send: PhantomData,
        };
        // Every tid ever seen, so that a zombie leader still listed in
        // /proc/PID/task is not retried forever. On error, drop releases
        // what was seized.
        let mut seen = HashSet::new();
        loop {
            let tids = procfs::tasks(pid).map_err(|e| maps::proc_error(pid, e, true))?;
            let mut fresh = false;
            for tid in tids {
                if seen.insert(tid) {
                    fresh = true;
                    this.seize(tid)?;
                }
            }
            if !fresh {
                break;
            }
            this.await_stops()?;
        }
        if this.stopped.is_empty() {
            return Err(Error::ProcessGone { pid });
        }
        Ok(this)
    }

    pub(crate) fn threads(&self) -> &[i32] {
        &self.stopped
    }

    /// The job-control signal the process was stopped by before we came,
    /// if it was group-stopped.
    pub(crate) fn group_stop(&self) -> Option<i32> {
        self.group_stop
    }

    fn seize(&mut self, tid: i32) -> Result<()> {
        match ptrace::seize(Pid::from_raw(tid), ptrace::Options::empty()) {
            Ok(()) => {}
            Err(Errno::ESRCH) => return Ok(()),
            // The kernel refuses to trace a zombie with EPERM too.
            Err(Errno::EPERM) if procfs::thread_is_dead(self.pid, tid) => return Ok(()),
            Err(errno @ (Errno::EPERM | Errno::EACCES)) => {
                return Err(diagnose::permission_error(self.pid, errno))
            }
            Err(errno) => {
                return Err(Error::Ptrace {
                    op: "PTRACE_SEIZE",
                    tid,
                    errno,
                })
            }
        }
        self.stopping.push(tid);
        match ptrace::interrupt(Pid::from_raw(tid)) {
            // ESRCH: it just exited; await_stops collects the exit.
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(errno) => Err(Error::Ptrace {
                op: "PTRACE_INTERRUPT",
                tid,
                errno,
            }),
        }
    }

    /// Waits until every thread in `stopping` has stopped or exited.
    fn await_stops(&mut self) -> Result<()> {
        let deadline = Instant::now() + STOP_TIMEOUT;
        let mut nap = Duration::from_micros(10);
        loop {
            let mut i = 0;
            while i < self.stopping.len() {
                let tid = self.stopping[i];
                match poll(tid) {
                    Ok(Poll::Running) => i += 1,
                    Ok(Poll::Stopped(signal)) => {
                        self.stopping.swap_remove(i);
                        self.stopped.push(tid);
                        // An interrupt stop reports SIGTRAP; a group-stop
                        // the stopping signal.
                        if tid == self.pid && signal != libc::SIGTRAP {
                            self.group_stop = Some(signal);
                        }
                    }
                    Ok(Poll::Exited) => {
                        self.stopping.swap_remove(i);
                    }
                    Err(errno) => {
                        return Err(Error::Ptrace {
                            op: "waitpid",
                            tid,
                            errno,
                        })
                    }
                }
            }
            let Some(&late) = self.stopping.first() else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                self.gave_up = true;
                let state = procfs::thread_stat(self.pid, late)
                    .map(|s| s.state)
                    .unwrap_or('?');
                return Err(Error::StopTimeout {
                    pid: self.pid,
                    tid: late,
                    seconds: STOP_TIMEOUT.as_secs(),
                    state: state_name(state),
                });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(5));
        }
    }

    /// Detaches every thread. Idempotent.
    pub(crate) fn resume(&mut self) -> Result<()> {
        // PTRACE_DETACH needs a stopped tracee, so first let the interrupted
        // threads reach their stop.
        let mut first_error = if self.stopping.is_empty() || self.gave_up {
            None
        } else {
            self.await_stops().err()
        };
        // Killed while stopped (ESRCH), a thread is exiting and we must reap it.
        let mut parked = std::mem::take(&mut self.stopping);
        for tid in std::mem::take(&mut self.stopped) {
            if let Err(errno) = ptrace::detach(Pid::from_raw(tid), None) {
                parked.push(tid);
                if errno != Errno::ESRCH {
                    first_error.get_or_insert(Error::Ptrace {
                        op: "PTRACE_DETACH",
                        tid,
                        errno,
                    });
                }
            }
        }
        if !parked.is_empty() {
            parked.into_iter().for_each(park);
            settle_stragglers();
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for StoppedThreads {
    fn drop(&mut self) {
        let _ = self.resume();
    }
}

enum Poll {
    Running,
    /// In a ptrace-stop (PTRACE_EVENT_STOP), with its signal: SIGTRAP for
    /// the interrupt's stop, the stopping signal for a group-stop.
    Stopped(i32),
    Exited,
}

/// Collects a thread's state change without blocking, passing on the signal
/// of a signal-delivery-stop.
///
/// libc, not nix: nix's wait calls fail with EINVAL on a stop by a real-time
/// signal (after the kernel has consumed the status), and its ptrace calls
/// take only the classic signals; glibc itself uses real-time signals.
fn poll(tid: i32) -> Result<Poll, Errno> {
    loop {
        // SAFETY: siginfo_t is plain data, valid when zeroed.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WSTOPPED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL;
        // SAFETY: waitid writes only the siginfo, which outlives the call.
        let r = unsafe { libc::waitid(libc::P_PID, tid as libc::id_t, &mut info, flags) };
        if r < 0 {
            match Errno::last() {
                Errno::EINTR => continue,
                // Not (or no longer) our tracee.
                Errno::ECHILD => return Ok(Poll::Exited),
                errno => return Err(errno),
            }
        }
        // SAFETY: waitid filled in a SIGCHLD siginfo, whose pid and status
        // fields these read; si_pid is 0 when there was nothing to report.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Ok(Poll::Running);
        }
        // A ptrace stop without a PTRACE_EVENT in the high bits is a
        // signal-delivery-stop: pass the signal on, uncollected.
        if info.si_code == libc::CLD_TRAPPED && status >> 8 == 0 {
            match restart_with(tid, status) {
                Ok(()) | Err(Errno::ESRCH) => return Ok(Poll::Running),
                Err(errno) => return Err(errno),
            }
        }
        // Collect it: the interrupt stop (or a group-stop), or an exit.
        let mut status = 0;
        // SAFETY: waitpid writes only the status integer, which outlives the call.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::WNOHANG | libc::__WALL) };
        if r < 0 {
            match Errno::last() {
                Errno::EINTR => continue,
                Errno::ECHILD => return Ok(Poll::Exited),
                errno => return Err(errno),
            }
        }
        if r > 0 && libc::WIFSTOPPED(status) && status >> 16 != 0 {
            return Ok(Poll::Stopped(libc::WSTOPSIG(status)));
        }
        if r > 0 && (libc::WIFEXITED(status) || libc::WIFSIGNALED(status)) {
            return Ok(Poll::Exited);
        }
        // Anything else changed in between; look again.
    }
}

/// PTRACE_CONT delivering `signal`.
fn restart_with(tid: i32, signal: i32) -> Result<(), Errno> {
    let data = signal as usize as *mut c_void;
    // SAFETY: PTRACE_CONT dereferences no pointer: addr is ignored and data
    // carries the signal number.
    let r = unsafe { libc::ptrace(libc::PTRACE_CONT, tid, std::ptr::null_mut::<c_void>(), data) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

thread_local! {
    /// Threads this thread still traces but could not detach yet: killed
    /// ones still exiting (to reap) and ones that never reached the stop.
    /// Retried on every stop and resume; the kernel releases any left when
    /// this thread exits.
    static STRAGGLERS: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

fn park(tid: i32) {
    let _ = STRAGGLERS.try_with(|s| s.borrow_mut().push(tid));
}

/// Keeps releasing stragglers for a while: a killed tracee is a zombie only
/// its tracer can reap, and until its threads are reaped nobody, not even its
/// parent, can reap the process. Killed threads die in microseconds.
fn settle_stragglers() {
    let deadline = Instant::now() + Duration::from_secs(2);
    while release_stragglers() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One pass over the stragglers; whether any remain.
fn release_stragglers() -> bool {
    STRAGGLERS
        .try_with(|s| {
            let mut s = s.borrow_mut();
            s.retain(|&tid| match poll(tid) {
                Ok(Poll::Running) => true,
                Ok(Poll::Stopped(_)) => ptrace::detach(Pid::from_raw(tid), None).is_err(),
                Ok(Poll::Exited) | Err(_) => false,
            });
            !s.is_empty()
        })
        .unwrap_or(false)
}

/// Makes SIGINT, SIGTERM and SIGHUP terminate this process promptly (default
/// action, unblocked on the calling thread), overriding handlers that would
/// keep it alive.
///
/// That is all a clean exit needs: when a tracing thread exits, for any
/// reason, even SIGKILL, the kernel detaches its tracees, and a SEIZEd tracee
/// resumes (a process that was group-stopped before we came stays stopped). Nothing has to run in the signal handler,
/// which could not safely reach our state anyway. A signal that is ignored
/// (nohup, a background job) stays ignored: it cannot end us, so it cannot
/// interrupt a detach either.
pub fn install_signal_cleanup() {
    let mut unblock = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: SIG_DFL installs no code of ours to run in signal context.
        let old = unsafe { signal(sig, SigHandler::SigDfl) };
        if let Ok(SigHandler::SigIgn) = old {
            // SAFETY: SIG_IGN installs no code either; this restores it.
            let _ = unsafe { signal(sig, SigHandler::SigIgn) };
        }
        unblock.add(sig);
    }
    let _ = unblock.thread_unblock();
}

/// A thread state letter of /proc/PID/stat, in words.
fn state_name(state: char) -> String {
    let what = match state {
        'D' => "uninterruptible sleep: waiting in the kernel, for I/O or a driver",
        'R' => "running",
        'S' => "sleeping",
        'T' | 't' => "stopped by another signal or tracer",
        'Z' => "a zombie",
        _ => "unknown",
    };
    format!("{state} ({what})")
}
