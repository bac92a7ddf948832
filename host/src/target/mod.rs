//! Memory sources: what the rest of the host reads target memory through.
//!
//! [`Target`] is the one interface: a live process ([`LiveProcess`]) implements
//! it today, a core file will later. [`PageCache`] wraps any target for one
//! stopped snapshot so that the many small reads a message-queue DLL makes cost
//! few system calls.

mod cache;
mod diagnose;
mod live;
mod maps;
mod procfs;
mod ptrace;

use std::path::PathBuf;

use crate::{Error, Result};

pub use cache::{CacheStats, PageCache};
pub use live::{LiveProcess, Mode};
pub use maps::exe_path;
pub use ptrace::install_signal_cleanup;

/// The parent of a process, if it is still there.
pub fn parent_pid(pid: i32) -> Option<i32> {
    procfs::stat(pid).ok().map(|s| s.ppid)
}

/// The descendants of `root` (children, grandchildren...), by pid, in no
/// particular order; at most `limit` of them.
pub fn descendants(root: i32, limit: usize) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = procfs::all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, procfs::stat(pid).ok()?.ppid)))
        .collect();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, _) in parents.iter().filter(|(_, ppid)| *ppid == parent) {
            if found.len() >= limit || found.contains(&pid) || pid == root {
                continue;
            }
            found.push(pid);
            frontier.push(pid);
        }
    }
    found
}

/// The granularity of reads and of the cache. Every Linux page size is a
/// multiple of it, so a page of this size is either wholly mapped or not.
pub const PAGE_SIZE: u64 = 4096;

/// Somewhere target memory can be read from.
pub trait Target {
    /// The process id (for a core file: the pid it was dumped from).
    fn pid(&self) -> i32;

    /// Fills all of `buf` from `addr`, or fails: a read that comes back short
    /// is an [`Error::Read`], never a partial success.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()>;

    /// The files mapped into the address space: the main executable first,
    /// then the others in address order.
    fn mapped_objects(&self) -> Result<Vec<MappedObject>>;

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
}

impl<T: Target + ?Sized> Target for &T {
    fn pid(&self) -> i32 {
        (**self).pid()
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read(addr, buf)
    }
    fn mapped_objects(&self) -> Result<Vec<MappedObject>> {
        (**self).mapped_objects()
    }
    fn read_prefix(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        (**self).read_prefix(addr, buf)
    }
    fn syscalls(&self) -> u64 {
        (**self).syscalls()
    }
}

/// One file mapped into the target, with every range it is mapped at.
///
/// The symbol module computes an object's load bias from it: for an ELF
/// segment with file offset `p_offset` and address `p_vaddr`,
/// `bias = address_of_offset(p_offset) - p_vaddr`. For the usual first
/// segment (`p_offset` 0) that is `file_offset_zero_start - p_vaddr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedObject {
    /// The path as the kernel names it (relative to our root), without the
    /// ` (deleted)` marker.
    pub path: PathBuf,
    /// The file was deleted or replaced after it was mapped: the path may now
    /// name another file, or none.
    pub deleted: bool,
    /// For a deleted file: where its contents can still be read, the
    /// kernel's link to the mapping (`/proc/PID/map_files/START-END`;
    /// opening it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
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

/// One line of /proc/PID/maps that maps a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedRange {
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The file offset mapped at `start`.
    pub offset: u64,
    pub perms: Perms,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
    /// MAP_SHARED (otherwise private, copy-on-write).
    pub shared: bool,
}
