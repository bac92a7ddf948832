//! A live Linux process as a [`Target`].
//!
//! Memory comes from `process_vm_readv`, one remote iovec per page so that
//! the returned count says exactly where readable memory ends (the call
//! returns short, without an error, at an unmapped page). Where it is not
//! available or not permitted we fall back to `pread` on /proc/PID/mem, which
//! also stops at the first unreadable page.

use std::cell::{Cell, OnceCell};
use std::fs::File;
use std::io::{self, IoSliceMut};
use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use std::path::{Path, PathBuf};

use super::ptrace::StoppedThreads;
use super::{maps, procfs};
use crate::interface::{
    Environment, HeldBy, Liveness, MappedObject, OsState, Registers, Relative, Target, Thread,
    PAGE_SIZE,
};
use crate::{Error, PermissionReason, Result};

/// The most iovecs one `process_vm_readv` accepts (IOV_MAX).
const IOV_MAX: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stop every thread (PTRACE_SEIZE + PTRACE_INTERRUPT) for a consistent
    /// snapshot; resume them on detach or drop. A process that a debugger
    /// (gdb, lldb) already holds stopped is read as it holds it instead,
    /// without tracing: see [`LiveProcess::held_by`].
    Stop,
    /// Read the running process: no ptrace, the process never pauses, but
    /// what is read may change between reads.
    NoStop,
}

/// A live process, read in place.
///
/// In [`Mode::Stop`] it traces the process, and the kernel takes ptrace
/// requests only from the thread that attached: `LiveProcess` is therefore
/// neither `Send` nor `Sync`, and detaches (on [`LiveProcess::detach`] or
/// drop) from the thread that attached. Should that thread exit first, the
/// kernel detaches and the process runs on.
///
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<mqs_core::process::LiveProcess>();
/// ```
#[derive(Debug)]
pub struct LiveProcess {
    pid: i32,
    start_time: u64,
    mode: Mode,
    stopped: Option<StoppedThreads>,
    /// In [`Mode::Stop`], the debugger that already held the process
    /// stopped: then nothing is stopped by us, and nothing let go.
    held_by: Option<HeldBy>,
    /// The process's state before we stopped it.
    os_state: OsState,
    /// /proc/PID/mem, opened when first needed.
    mem: OnceCell<File>,
    /// process_vm_readv failed with ENOSYS or EPERM: use `mem` from now on.
    use_mem: Cell<bool>,
    syscalls: Cell<u64>,
}

impl LiveProcess {
    /// Opens process `pid`, stopping it in [`Mode::Stop`].
    pub fn attach(pid: i32, mode: Mode) -> Result<Self> {
        if pid <= 0 {
            return Err(Error::NoSuchProcess { pid });
        }
        let stat = procfs::stat(pid).map_err(|e| maps::proc_error(pid, e, false))?;
        if !procfs::is_alive(pid, stat.start_time) {
            return Err(Error::ProcessGone { pid });
        }
        let mut this = Self {
            pid,
            start_time: stat.start_time,
            mode,
            stopped: None,
            held_by: None,
            os_state: OsState::new(stat.state, None),
            mem: OnceCell::new(),
            use_mem: Cell::new(false),
            syscalls: Cell::new(0),
        };
        match mode {
            Mode::Stop => match held_by_debugger(pid)? {
                // Memory needs no tracing (process_vm_readv and
                // /proc/PID/mem ask for the same access as attaching);
                // the process stays exactly as its debugger holds it.
                Some(held) => {
                    this.mem_file()?;
                    this.held_by = Some(held);
                }
                None => {
                    let stopped = StoppedThreads::stop(pid)?;
                    // The signal of a stop found in place; a process that
                    // was stopped as we came is named so even when /proc
                    // was read a moment before.
                    if let Some(signal) = stopped.group_stop() {
                        this.os_state = OsState::new('T', Some(signal));
                    }
                    this.stopped = Some(stopped);
                }
            },
            // Nothing else checks access up front: opening /proc/PID/mem
            // takes the same permission as reading, and we keep it.
            Mode::NoStop => {
                this.mem_file()?;
            }
        }
        Ok(this)
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The debugger that held the process stopped when it was opened in
    /// [`Mode::Stop`]: it is read without being traced, never resumed or
    /// let go by us, and its threads' registers are the tracer's alone.
    pub fn held_by(&self) -> Option<&HeldBy> {
        self.held_by.as_ref()
    }

    /// The ids of the stopped threads (none in [`Mode::NoStop`]).
    pub fn stopped_threads(&self) -> &[i32] {
        self.stopped.as_ref().map_or(&[], |s| s.threads())
    }

    /// Resumes every thread and stops tracing them. Dropping does the same,
    /// silently.
    pub fn detach(mut self) -> Result<()> {
        self.release()
    }

    /// Whether the process still exists (and is not a zombie, nor a later
    /// process with the same pid).
    pub fn is_alive(&self) -> bool {
        self.identity().is_alive()
    }

    /// Writes one of the variables the MPIR protocol lets a tool set
    /// (`MPIR_being_debugged`, `MPIR_debug_gate`, the tool-daemon ones):
    /// the only writes mqs ever makes into a process it did not start.
    pub fn write_mpir_variable(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        let path = procfs::mem_path(self.pid);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.write_all_at(bytes, addr))
            .map_err(|e| maps::proc_error(self.pid, e, true))
    }

    /// Writes `byte` into the MPIR attach FIFO at `path` (the starter's own
    /// name for it, read from `MPIR_attach_fifo`), to make the starter look
    /// at `MPIR_being_debugged` now. The path is taken as the process sees
    /// it (through its root, so a starter in another mount namespace is
    /// reached too). Nothing is written unless it is a FIFO owned by the
    /// process's user, as the MPIR specification has it: the path comes
    /// from the target's memory and must not make us write elsewhere.
    pub fn write_attach_fifo(&self, path: &str, byte: u8) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};

        let relative = path.trim_start_matches('/');
        let through_root = PathBuf::from(format!("/proc/{}/root", self.pid)).join(relative);
        let owner = std::fs::metadata(format!("/proc/{}", self.pid))
            .map_err(|e| maps::proc_error(self.pid, e, true))?
            .uid();
        let refuse = |detail: String| {
            Error::Launch(format!(
                "the MPIR attach FIFO {path:?} of pid {}: {detail}",
                self.pid
            ))
        };
        let fifo = [through_root, PathBuf::from(path)]
            .into_iter()
            .find(|p| std::fs::metadata(p).is_ok())
            .ok_or_else(|| refuse("no such file".into()))?;
        let check = |meta: std::fs::Metadata| {
            if !meta.file_type().is_fifo() {
                return Err(refuse("not a FIFO".into()));
            }
            if meta.uid() != owner {
                return Err(refuse(format!(
                    "owned by uid {}, not by the starter's uid {owner}",
                    meta.uid()
                )));
            }
            Ok(())
        };
        check(std::fs::metadata(&fifo).map_err(|e| refuse(e.to_string()))?)?;
        // Without a reader (the starter stopped listening) the open fails
        // at once with ENXIO rather than waiting for one.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .map_err(|e| refuse(format!("cannot open it: {e}")))?;
        // The same file that was checked, not one put there since.
        check(file.metadata().map_err(|e| refuse(e.to_string()))?)?;
        file.write_all(&[byte])
            .map_err(|e| refuse(format!("cannot write it: {e}")))
    }

    /// Its parent's pid, if it still has one we can see.
    pub fn parent_pid(&self) -> Option<i32> {
        procfs::stat(self.pid).ok().map(|s| s.ppid)
    }

    /// The process as pid and start time, which outlives this handle.
    pub fn identity(&self) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    fn count_syscall(&self) {
        self.syscalls.set(self.syscalls.get() + 1);
    }

    fn mem_file(&self) -> Result<&File> {
        if let Some(file) = self.mem.get() {
            return Ok(file);
        }
        let file = File::open(procfs::mem_path(self.pid))
            .map_err(|e| maps::proc_error(self.pid, e, true))?;
        Ok(self.mem.get_or_init(|| file))
    }

    /// process_vm_readv over `addr..addr + buf.len()`: the readable prefix.
    fn read_vm(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut done = 0;
        let mut iovs = Vec::new();
        while done < buf.len() {
            // Up to IOV_MAX page-sized pieces per call.
            iovs.clear();
            let mut at = addr + done as u64;
            let mut chunk = 0;
            while done + chunk < buf.len() && iovs.len() < IOV_MAX {
                let len = ((PAGE_SIZE - at % PAGE_SIZE) as usize).min(buf.len() - done - chunk);
                iovs.push(RemoteIoVec {
                    base: at as usize,
                    len,
                });
                at += len as u64;
                chunk += len;
            }
            self.count_syscall();
            let local = &mut buf[done..done + chunk];
            let n = match process_vm_readv(
                Pid::from_raw(self.pid),
                &mut [IoSliceMut::new(local)],
                &iovs,
            ) {
                Ok(n) => n,
                // Nothing at all was readable.
                Err(Errno::EFAULT) => 0,
                Err(errno) => return Err(errno),
            };
            done += n;
            if n < chunk {
                break;
            }
        }
        Ok(done)
    }

    /// pread on /proc/PID/mem: the readable prefix.
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        let file = self.mem_file()?;
        let mut done = 0;
        while done < buf.len() {
            self.count_syscall();
            match file.read_at(&mut buf[done..], addr + done as u64) {
                // 0: the address space is gone (the process exited).
                Ok(0) => break,
                Ok(n) => done += n,
                // EIO: the first page asked for is unreadable.
                Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if procfs::is_gone(&e) => return Err(Error::ProcessGone { pid: self.pid }),
                Err(e) => return Err(self.read_error(addr, buf.len(), e.to_string())),
            }
        }
        Ok(done)
    }

    fn read_error(&self, addr: u64, len: usize, detail: String) -> Error {
        Error::Read {
            pid: self.pid,
            addr,
            len,
            detail,
        }
    }
}

impl LiveProcess {
    /// The arguments the process was started with (/proc/PID/cmdline).
    pub fn arguments(&self) -> Result<Vec<String>> {
        let path = format!("/proc/{}/cmdline", self.pid);
        std::fs::read(&path)
            .map(|raw| {
                raw.split(|&b| b == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            })
            .map_err(|e| maps::proc_error(self.pid, e, true))
    }
}

impl Target for LiveProcess {
    fn pid(&self) -> i32 {
        self.pid
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let n = self.read_prefix(addr, buf)?;
        if n == buf.len() {
            return Ok(());
        }
        // A short read of a process that has just exited is not about the
        // address.
        if !self.is_alive() {
            return Err(Error::ProcessGone { pid: self.pid });
        }
        Err(self.read_error(
            addr,
            buf.len(),
            format!("no readable memory at {:#x}", addr + n as u64),
        ))
    }

    fn read_prefix(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if addr.checked_add(buf.len() as u64).is_none() {
            return Err(self.read_error(addr, buf.len(), "range wraps around".into()));
        }
        if !self.use_mem.get() {
            match self.read_vm(addr, buf) {
                Ok(n) => return Ok(n),
                Err(Errno::ENOSYS | Errno::EPERM) => self.use_mem.set(true),
                Err(Errno::ESRCH) => return Err(Error::ProcessGone { pid: self.pid }),
                Err(errno) => return Err(self.read_error(addr, buf.len(), errno.to_string())),
            }
        }
        self.read_mem(addr, buf)
    }

    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        maps::mapped_objects(self.pid)
    }

    fn vdso(&self) -> Option<std::ops::Range<u64>> {
        maps::vdso(self.pid)
    }

    fn executable(&self) -> Result<PathBuf> {
        maps::exe_path(self.pid)
    }

    fn path_in_root(&self, path: &Path) -> PathBuf {
        maps::in_process_root(self.pid, path)
    }

    fn environment(&self) -> Result<Environment> {
        environment_of(self.pid)
    }

    fn threads(&self) -> Result<Vec<Thread>> {
        let tids = match &self.stopped {
            Some(stopped) => stopped.threads().to_vec(),
            None => procfs::tasks(self.pid).map_err(|e| maps::proc_error(self.pid, e, true))?,
        };
        let mut threads: Vec<Thread> = tids
            .into_iter()
            .map(|tid| Thread {
                tid,
                name: procfs::thread_comm(self.pid, tid),
                state: procfs::thread_stat(self.pid, tid).ok().map(|s| s.state),
                registers: match (&self.stopped, &self.held_by) {
                    (Some(_), _) => registers(tid),
                    // The tracer alone may ask for the registers; the
                    // kernel still tells where a stopped thread's stack is.
                    (None, Some(_)) => procfs::thread_sp_pc(self.pid, tid)
                        .map(|(sp, pc)| Registers::from_ip_sp(pc, sp)),
                    (None, None) => None,
                },
            })
            .collect();
        threads.sort_by_key(|t| (t.tid != self.pid, t.tid));
        Ok(threads)
    }

    fn release(&mut self) -> Result<()> {
        match self.stopped.take() {
            Some(mut stopped) => stopped.resume(),
            None => Ok(()),
        }
    }

    fn liveness(&self) -> Liveness {
        if self.is_alive() {
            Liveness::Running
        } else {
            Liveness::Gone
        }
    }

    fn descendants(&self, limit: usize) -> Result<Vec<Relative>> {
        Ok(descendants(self.pid, limit))
    }

    fn pointer_size(&self) -> u32 {
        // EI_CLASS of the executable: 1 is 32-bit, 2 is 64-bit.
        let mut ident = [0u8; 5];
        let class = std::fs::File::open(format!("/proc/{}/exe", self.pid))
            .and_then(|f| f.read_exact_at(&mut ident, 0))
            .map(|()| ident[4]);
        match class {
            Ok(1) => 4,
            _ => 8,
        }
    }

    fn syscalls(&self) -> u64 {
        self.syscalls.get()
    }

    fn held_by(&self) -> Option<HeldBy> {
        self.held_by.clone()
    }

    fn os_state(&self) -> Option<OsState> {
        Some(self.os_state.clone())
    }
}

/// The debugger that traces `pid` and holds every thread of it in a
/// tracing stop, if one does. Traced by another process but running, it
/// cannot be stopped by us (a task has one tracer) nor read consistently:
/// that is an error which says so. Traced by ourselves, it is left to the
/// attach, which reports it.
fn held_by_debugger(pid: i32) -> Result<Option<HeldBy>> {
    let status = procfs::status(pid).map_err(|e| maps::proc_error(pid, e, false))?;
    let tracer = status.tracer_pid;
    if tracer == 0 || procfs::tgid(tracer) == Some(std::process::id() as i32) {
        return Ok(None);
    }
    let name = procfs::program_name(tracer).unwrap_or_else(|| "?".to_owned());
    let tids = procfs::tasks(pid).map_err(|e| maps::proc_error(pid, e, true))?;
    // 't': tracing stop; a thread exiting meanwhile holds nothing.
    let running = tids.into_iter().any(|tid| {
        procfs::thread_stat(pid, tid).is_ok_and(|s| !matches!(s.state, 't' | 'Z' | 'X'))
    });
    if running {
        return Err(Error::PermissionDenied {
            pid,
            reason: PermissionReason::AlreadyTraced {
                tracer_pid: tracer,
                tracer_name: name,
            },
        });
    }
    // lldb traces through the lldb-server it starts: name lldb too.
    let for_debugger = name
        .contains("server")
        .then(|| procfs::status(tracer).ok())
        .flatten()
        .and_then(|s| {
            Some(format!(
                "{} (pid {})",
                procfs::program_name(s.ppid)?,
                s.ppid
            ))
        });
    Ok(Some(HeldBy {
        pid: tracer,
        name,
        for_debugger,
    }))
}

/// A process named by pid and start time: a later process that reuses the
/// pid is not it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pid: i32,
    /// Clock ticks after boot at which it started.
    pub start_time: u64,
}

impl ProcessIdentity {
    /// The process that has `pid` now.
    pub fn of(pid: i32) -> Result<Self> {
        let stat = procfs::stat(pid).map_err(|e| maps::proc_error(pid, e, false))?;
        Ok(Self {
            pid,
            start_time: stat.start_time,
        })
    }

    /// The pid of the parent of the process that has `pid` now.
    pub fn parent_of(pid: i32) -> Option<i32> {
        procfs::stat(pid).ok().map(|s| s.ppid)
    }

    /// Whether it still runs code (not gone, not a zombie, not replaced).
    pub fn is_alive(&self) -> bool {
        procfs::is_alive(self.pid, self.start_time)
    }
}

/// The registers of a stopped tracee of ours.
#[cfg(target_arch = "x86_64")]
fn registers(tid: i32) -> Option<Registers> {
    let r = nix::sys::ptrace::getregs(Pid::from_raw(tid)).ok()?;
    // user_regs_struct's order (see Registers).
    Some(Registers {
        values: [
            r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx,
            r.rdx, r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base,
            r.gs_base, r.ds, r.es, r.fs, r.gs,
        ],
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn registers(_tid: i32) -> Option<Registers> {
    None
}

/// The descendants of `root` (children, grandchildren...), in no particular
/// order; at most `limit` of them.
fn descendants(root: i32, limit: usize) -> Vec<Relative> {
    let parents: Vec<(i32, i32)> = procfs::all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, procfs::stat(pid).ok()?.ppid)))
        .collect();
    let mut found: Vec<(i32, i32)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in parents.iter().filter(|(_, ppid)| *ppid == parent) {
            if found.len() >= limit || found.iter().any(|&(p, _)| p == pid) || pid == root {
                continue;
            }
            found.push((pid, ppid));
            frontier.push(pid);
        }
    }
    let namespace = procfs::pid_namespace(root);
    found
        .into_iter()
        .map(|(pid, ppid)| Relative {
            pid,
            ppid,
            environment: environment_of(pid).unwrap_or_default(),
            same_pid_namespace: procfs::pid_namespace(pid) == namespace,
        })
        .collect()
}

/// The environment a live process of this machine was started with
/// (for one a debugger holds too: reading it needs no tracing).
pub fn environment_of(pid: i32) -> Result<Environment> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|raw| Environment::parse(&raw))
        .map_err(|e| maps::proc_error(pid, e, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [u8; 6000] = {
        let mut a = [0; 6000];
        let mut i = 0;
        while i < a.len() {
            a[i] = (i * 7 + 3) as u8;
            i += 1;
        }
        a
    };
    static STATIC_KNOWN: [u8; 6000] = KNOWN;

    /// Maps two pages, unmaps the second again and fills the first with 0xab:
    /// returns the address of the hole.
    fn hole_after_page() -> u64 {
        let page = PAGE_SIZE as usize;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), 2 * page, prot, flags, -1, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        let hole = p as usize + page;
        // SAFETY: unmaps the second page of that mapping; nothing refers to it.
        assert_eq!(unsafe { libc::munmap(hole as *mut libc::c_void, page) }, 0);
        // SAFETY: the first page is mapped read-write and only ours. It is
        // leaked on purpose: one page per test run.
        unsafe { p.cast::<u8>().write_bytes(0xab, page) };
        hole as u64
    }

    #[test]
    fn both_read_paths_agree() {
        let me = LiveProcess::attach(std::process::id() as i32, Mode::NoStop).unwrap();
        let hole = hole_after_page();
        // More than IOV_MAX pages, so that process_vm_readv takes several calls.
        let big: Vec<u8> = (0..5 << 20).map(|i: u32| (i % 251) as u8).collect();
        for use_mem in [false, true] {
            me.use_mem.set(use_mem);
            let mut buf = vec![0; KNOWN.len()];
            me.read(STATIC_KNOWN.as_ptr() as u64, &mut buf).unwrap();
            assert_eq!(buf, KNOWN);

            let before = me.syscalls();
            let mut copy = vec![0; big.len()];
            me.read(big.as_ptr() as u64, &mut copy).unwrap();
            assert!(copy == big);
            let calls = me.syscalls() - before;
            assert!(if use_mem { calls >= 1 } else { calls >= 2 }, "{calls}");

            let mut buf = [0; 16];
            assert_eq!(me.read_prefix(hole - 10, &mut buf).unwrap(), 10);
            assert_eq!(buf[..10], [0xab; 10]);
            let err = me.read(hole - 10, &mut buf).unwrap_err();
            assert!(
                matches!(err, Error::Read { len: 16, .. })
                    && err.to_string().contains(&format!("{hole:#x}")),
                "{err}"
            );
            assert_eq!(me.read_prefix(hole, &mut buf).unwrap(), 0);
            assert!(me.read(u64::MAX - 4, &mut buf).is_err());
            me.read(hole, &mut []).unwrap();
        }
    }

    #[test]
    fn no_such_process() {
        for pid in [0, -1, i32::MAX] {
            for mode in [Mode::Stop, Mode::NoStop] {
                let err = LiveProcess::attach(pid, mode).unwrap_err();
                assert!(
                    matches!(err, Error::NoSuchProcess { pid: p } if p == pid),
                    "{err}"
                );
            }
        }
    }
}
