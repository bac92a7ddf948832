//! The interfaces at the bottom of mqs: what a process is to every layer
//! above ([`Target`]: memory, mapped objects, threads and registers,
//! environment, liveness), and what may be looked up in its images
//! ([`ImageSymbols`]: symbols and type layouts). The host's own sources
//! implement them in [`crate::process`] and [`crate::symbols`]; a debugger
//! that embeds mqs implements them for its own processes.

mod environment;
mod image;
mod os_state;
mod threads;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

pub use environment::Environment;
pub use image::{ImageSymbols, TypeLayout};
pub use os_state::OsState;
pub use threads::{Registers, Thread};

/// The granularity of reads and of the cache. Every Linux page size is a
/// multiple of it, so a page of this size is either wholly mapped or not.
pub const PAGE_SIZE: u64 = 4096;

/// Whether the process behind a source still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A live process that still exists (the same one: pid and start time).
    Running,
    /// A live process that exited (or became a zombie) since it was opened.
    Gone,
    /// A record of a process (core file, snapshot): it cannot change.
    Offline,
}

/// A process below another one (a starter's ranks, say), as a live source
/// sees it without attaching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relative {
    pub pid: i32,
    pub ppid: i32,
    pub environment: Environment,
    /// In the PID namespace of the process it is below: false for one in a
    /// container or node started below it, whose pids are that one's own.
    pub same_pid_namespace: bool,
}

/// The debugger that holds a live process stopped under ptrace, when mqs
/// reads that process as the debugger holds it: memory only, without
/// tracing it (only the tracer may ask for its threads' registers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBy {
    /// The tracing task (gdb itself; lldb's `lldb-server`).
    pub pid: i32,
    /// Its program's name.
    pub name: String,
    /// For a debug server (`lldb-server`, `gdbserver`): the debugger that
    /// runs it, as `NAME (pid PID)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_debugger: Option<String>,
}

impl std::fmt::Display for HeldBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)?;
        match &self.for_debugger {
            Some(debugger) => write!(f, " for {debugger}"),
            None => Ok(()),
        }
    }
}

/// Somewhere a process's memory and state can be read from.
pub trait Target {
    /// The process id (for a core file or snapshot: the pid it had).
    fn pid(&self) -> i32;

    /// Fills all of `buf` from `addr`, or fails: a read that comes back short
    /// is an [`Error::Read`], never a partial success.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()>;

    /// The files mapped into the address space: the main executable first,
    /// then the others in address order.
    fn mapped_objects(&self) -> Result<Vec<MappedObject>>;

    /// The path of the program the process runs.
    fn executable(&self) -> Result<PathBuf>;

    /// Where a path the process names (one read from its memory: the DLL its
    /// MPI names, say) is opened from here. A live process in a root of its
    /// own (a chroot, a container) names paths in that root: they are reached
    /// through /proc/PID/root. Other sources give the path itself.
    fn path_in_root(&self, path: &Path) -> PathBuf {
        path.to_path_buf()
    }

    /// The process's environment (as it was started, for a live process).
    fn environment(&self) -> Result<Environment>;

    /// Its threads; registers only where the source has them (a stopped
    /// live process, a core file, a snapshot that recorded them).
    fn threads(&self) -> Result<Vec<Thread>>;

    /// Whether the process still runs.
    fn liveness(&self) -> Liveness;

    /// Processes below this one (children, grandchildren...), at most
    /// `limit`; only live sources know any.
    fn descendants(&self, _limit: usize) -> Result<Vec<Relative>> {
        Ok(Vec::new())
    }

    /// The size of a pointer (and of `long`) in the target, in bytes.
    fn pointer_size(&self) -> u32 {
        8
    }

    /// Lets the process go: a live process is resumed and no longer traced.
    /// Idempotent; sources that hold nothing do nothing.
    fn release(&mut self) -> Result<()> {
        Ok(())
    }

    /// Reads the longest readable prefix of `addr..addr + buf.len()` and
    /// returns its length; a result shorter than `buf` means the byte just past
    /// it is unreadable. Fails only for reasons other than unreadable memory
    /// (the process is gone, access is denied).
    ///
    /// The default goes page by page through [`Target::read`]; sources that can
    /// do better (one system call for many pages) override it.
    fn read_prefix(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let Some(at) = addr.checked_add(done as u64) else {
                break;
            };
            let piece = ((PAGE_SIZE - at % PAGE_SIZE) as usize).min(buf.len() - done);
            match self.read(at, &mut buf[done..done + piece]) {
                Ok(()) => done += piece,
                Err(Error::Read { .. }) => break,
                Err(other) => return Err(other),
            }
        }
        Ok(done)
    }

    /// How many reading system calls this source has made so far; sources
    /// without system calls (a mapped core file) report 0.
    fn syscalls(&self) -> u64 {
        0
    }

    /// Where the kernel's vDSO is mapped, where the source knows: an image
    /// with no file behind it, whose unwind tables a stack caught inside
    /// it (`clock_gettime`) needs.
    fn vdso(&self) -> Option<std::ops::Range<u64>> {
        None
    }

    /// The debugger that holds this live process stopped, when it is read
    /// as that debugger holds it instead of being stopped by us.
    fn held_by(&self) -> Option<HeldBy> {
        None
    }

    /// What the operating system said the process was doing before it was
    /// stopped for reading, where the source knows.
    fn os_state(&self) -> Option<OsState> {
        None
    }
}

/// Reads a NUL-terminated string of at most `max` bytes, page by page so
/// that a string near the end of a mapping does not fail the whole read.
pub fn read_c_string(target: &dyn Target, addr: u64, max: usize) -> Result<String> {
    let mut bytes = Vec::new();
    let mut at = addr;
    while bytes.len() < max {
        let to_page_end = (PAGE_SIZE - at % PAGE_SIZE) as usize;
        let mut chunk = vec![0u8; to_page_end.min(max - bytes.len())];
        target.read(at, &mut chunk)?;
        if let Some(nul) = chunk.iter().position(|&b| b == 0) {
            bytes.extend_from_slice(&chunk[..nul]);
            return Ok(String::from_utf8_lossy(&bytes).into_owned());
        }
        at += chunk.len() as u64;
        bytes.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads a target word of `size` bytes (4 or 8) in host order.
pub fn read_word(target: &dyn Target, addr: u64, size: u32) -> Result<u64> {
    let mut buf = [0u8; 8];
    let n = if size == 4 { 4 } else { 8 };
    target.read(addr, &mut buf[..n])?;
    Ok(if n == 4 {
        u64::from(u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]))
    } else {
        u64::from_ne_bytes(buf)
    })
}

/// Forwards every method, so that references and boxes of targets are
/// targets too.
macro_rules! forward_target {
    ($ty:ty $(, $release:ident)?) => {
        impl<T: Target + ?Sized> Target for $ty {
            $(fn $release(&mut self) -> Result<()> {
                (**self).release()
            })?
    fn pid(&self) -> i32 {
        (**self).pid()
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read(addr, buf)
    }
    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        (**self).mapped_objects()
    }
    fn executable(&self) -> Result<PathBuf> {
        (**self).executable()
    }
    fn path_in_root(&self, path: &Path) -> PathBuf {
        (**self).path_in_root(path)
    }
    fn environment(&self) -> Result<Environment> {
        (**self).environment()
    }
    fn threads(&self) -> Result<Vec<Thread>> {
        (**self).threads()
    }
    fn liveness(&self) -> Liveness {
        (**self).liveness()
    }
    fn descendants(&self, limit: usize) -> Result<Vec<Relative>> {
        (**self).descendants(limit)
    }
    fn pointer_size(&self) -> u32 {
        (**self).pointer_size()
    }
    fn read_prefix(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        (**self).read_prefix(addr, buf)
    }
    fn syscalls(&self) -> u64 {
        (**self).syscalls()
    }
    fn vdso(&self) -> Option<std::ops::Range<u64>> {
        (**self).vdso()
    }
    fn held_by(&self) -> Option<HeldBy> {
        (**self).held_by()
    }
    fn os_state(&self) -> Option<OsState> {
        (**self).os_state()
    }
        }
    };
}

forward_target!(&T);
forward_target!(Box<T>, release);

/// One file mapped into the target, with every range it is mapped at.
///
/// The symbol module computes an object's load bias from it: for an ELF
/// segment with file offset `p_offset` and address `p_vaddr`,
/// `bias = address_of_offset(p_offset) - p_vaddr`. For the usual first
/// segment (`p_offset` 0) that is `file_offset_zero_start - p_vaddr`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappedObject {
    /// The path as the kernel names it (relative to our root), without the
    /// ` (deleted)` marker.
    pub path: PathBuf,
    /// The file was deleted or replaced after it was mapped: the path may now
    /// name another file, or none.
    pub deleted: bool,
    /// Where the file's contents are read when not at `path`: for a deleted
    /// file the kernel's link to the mapping (`/proc/PID/map_files/START-END`;
    /// opening it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE); for a core
    /// file the copy under `--sysroot`, or the `--exe` given.
    pub contents: Option<PathBuf>,
    pub inode: u64,
    /// The lowest start address of any of its mappings.
    pub base: u64,
    /// The file offset mapped at `base`.
    pub base_offset: u64,
    /// The start of the lowest mapping of file offset 0 (the ELF header), if
    /// any: normally equal to `base`.
    pub file_offset_zero_start: Option<u64>,
    /// Every mapping of the file, in address order.
    pub ranges: Vec<MappedRange>,
}

impl MappedObject {
    /// The lowest address at which file offset `offset` is mapped.
    pub fn address_of_offset(&self, offset: u64) -> Option<u64> {
        self.ranges
            .iter()
            .filter(|r| offset >= r.offset && offset - r.offset < r.end - r.start)
            .map(|r| r.start + (offset - r.offset))
            .min()
    }

    /// Whether `addr` lies in one of its mappings.
    pub fn contains(&self, addr: u64) -> bool {
        self.ranges.iter().any(|r| r.start <= addr && addr < r.end)
    }
}

/// One mapping of a file (a line of /proc/PID/maps, an entry of a core's
/// NT_FILE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappedRange {
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The file offset mapped at `start`.
    pub offset: u64,
    pub perms: Perms,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
    /// MAP_SHARED (otherwise private, copy-on-write).
    pub shared: bool,
}
