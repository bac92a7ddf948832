//! Read-only memory maps of object files: symbol tables and DWARF are read
//! in place, so tens of MB of debug info cost page faults, not copies.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use memmap2::Mmap;

use crate::{Error, Result};

/// One file mapped into our address space (or, for an image that is no
/// file, such as the kernel's vDSO, its bytes copied from a process).
#[derive(Debug)]
pub(crate) struct MappedFile {
    path: PathBuf,
    /// The root of the process that maps it, when it is read through that
    /// root (`/proc/PID/root`): its debug files are looked for there too.
    root: Option<PathBuf>,
    map: Bytes,
    /// (mtime, size) when mapped: the cache key of files without a build-id.
    stamp: (Option<SystemTime>, u64),
}

#[derive(Debug)]
enum Bytes {
    Map(Mmap),
    Owned(Box<[u8]>),
}

impl MappedFile {
    pub(crate) fn open(path: &Path) -> Result<Arc<Self>> {
        Self::open_as(path, path)
    }

    /// The file at `path`, named `name` (the path a process in another root
    /// maps it at).
    pub(crate) fn open_as(path: &Path, name: &Path) -> Result<Arc<Self>> {
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        // Stat before opening: processes map devices (/dev/zero, RDMA
        // devices) whose open may have side effects.
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Err(Error::ObjectFile {
                path: path.to_owned(),
                detail: "not a regular file".into(),
            });
        }
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        // SAFETY: the map is private and read-only and we never write through
        // it. Another process rewriting or truncating the file while it is
        // mapped could change the bytes under us or raise SIGBUS; every
        // debugger that maps binaries accepts this, and all parsing of the
        // bytes is bounds-checked, so changed contents only give wrong answers.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Ok(Arc::new(Self {
            path: name.to_owned(),
            root: process_root(path),
            map: Bytes::Map(map),
            stamp: (meta.modified().ok(), meta.len()),
        }))
    }

    /// An image read from memory, named `path` in messages.
    pub(crate) fn from_bytes(path: PathBuf, bytes: Vec<u8>) -> Arc<Self> {
        let size = bytes.len() as u64;
        Arc::new(Self {
            path,
            root: None,
            map: Bytes::Owned(bytes.into_boxed_slice()),
            stamp: (None, size),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.map {
            Bytes::Map(map) => map,
            Bytes::Owned(bytes) => bytes,
        }
    }

    pub(crate) fn stamp(&self) -> (Option<SystemTime>, u64) {
        self.stamp
    }
}

/// `/proc/PID/root` when `path` is read through it.
fn process_root(path: &Path) -> Option<PathBuf> {
    let mut parts = path.components().skip(1);
    let (proc_, pid, root) = (parts.next()?, parts.next()?, parts.next()?);
    let pid = pid.as_os_str().to_str()?;
    (proc_.as_os_str() == "proc"
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && root.as_os_str() == "root")
        .then(|| Path::new("/proc").join(pid).join("root"))
}

#[cfg(test)]
mod root_tests {
    use super::*;

    #[test]
    fn the_root_of_a_path_read_through_a_process() {
        assert_eq!(
            process_root(Path::new("/proc/42/root/usr/lib/libc.so.6")),
            Some(PathBuf::from("/proc/42/root"))
        );
        assert_eq!(process_root(Path::new("/proc/42/map_files/1-2")), None);
        assert_eq!(process_root(Path::new("/proc/self/root/x")), None);
        assert_eq!(process_root(Path::new("/usr/lib/libc.so.6")), None);
    }
}
