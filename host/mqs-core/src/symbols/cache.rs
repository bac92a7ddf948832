//! Parsed object files shared between processes: the ranks of a job run the
//! same binaries, so each file is opened, read and indexed once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::debug_files::DebugDirs;
use super::elf::ElfFile;
use super::fetch::DebugFileFetcher;
use super::mapped::MappedFile;
use super::object::ObjectSymbols;
use crate::sync::lock;
use crate::Result;

/// Which build of a file: its build-id, or (mtime, size) without one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Identity {
    BuildId(Vec<u8>),
    Stamp(Option<SystemTime>, u64),
}

/// Hands out one `ObjectSymbols` per (path, identity).
pub struct SymbolCache {
    dirs: Arc<DebugDirs>,
    objects: Mutex<HashMap<(PathBuf, Identity), Arc<ObjectSymbols>>>,
}

impl SymbolCache {
    /// `debug_dirs` are searched for separate debug files before
    /// `/usr/lib/debug`.
    pub fn new(debug_dirs: Vec<PathBuf>) -> Self {
        Self {
            dirs: Arc::new(DebugDirs::new(debug_dirs)),
            objects: Mutex::new(HashMap::new()),
        }
    }

    /// Debug directories, type packs and (when given) a fetcher of debug files.
    pub fn with_sources(sources: &SymbolSources) -> Self {
        let packs = super::typepack::TypePacks::standard(sources.typepack_dirs.clone());
        Self {
            dirs: Arc::new(DebugDirs::with(
                sources.debug_dirs.clone(),
                packs,
                sources.fetcher.clone(),
            )),
            objects: Mutex::new(HashMap::new()),
        }
    }

    /// The type pack directories, in search order.
    pub fn typepack_dirs(&self) -> &[PathBuf] {
        self.dirs.packs.dirs()
    }

    /// The files in the type pack directories that are not packs, and why
    /// ("PATH: not JSON: ..."): a broken pack is no pack at all, so a dump
    /// says so rather than leave its library's types unexplained.
    pub fn typepack_notes(&self) -> &[String] {
        self.dirs.packs.notes()
    }

    /// Where debug files are fetched from (debuginfod servers), if asked.
    pub fn fetcher(&self) -> Option<&dyn DebugFileFetcher> {
        self.dirs.debuginfod.as_deref()
    }

    /// The object at `path`, parsed now or earlier.
    pub fn object(&self, path: &Path) -> Result<Arc<ObjectSymbols>> {
        let path = crate::process::canonical(path).unwrap_or_else(|_| path.to_owned());
        self.object_as(&path, &path)
    }

    /// The object read from `file` and known by `name`: a file a process in
    /// a root of its own maps at `name` is read through that root
    /// (/proc/PID/root/...), and named, merged with other ranks' and
    /// matched as the process names it.
    pub fn object_as(&self, file: &Path, name: &Path) -> Result<Arc<ObjectSymbols>> {
        let path = name.to_owned();
        let file = MappedFile::open_as(file, name)?;
        let elf = ElfFile::parse(file.clone())?;
        let identity = match &elf.build_id {
            Some(id) => Identity::BuildId(id.clone()),
            None => {
                let (mtime, size) = file.stamp();
                Identity::Stamp(mtime, size)
            }
        };
        let key = (path, identity);
        if let Some(hit) = lock(&self.objects).get(&key) {
            return Ok(hit.clone());
        }
        // Read outside the lock: a stripped object's debug file may take a
        // while (its CRC covers the whole file).
        let object = Arc::new(ObjectSymbols::from_elf(elf, self.dirs.clone())?);
        Ok(lock(&self.objects).entry(key).or_insert(object).clone())
    }
}

impl SymbolCache {
    /// An image that is no file (the vDSO), from its bytes, kept by its
    /// build-id (every process of a kernel shares one).
    pub(crate) fn image(&self, name: &Path, bytes: Vec<u8>) -> Result<Arc<ObjectSymbols>> {
        let file = MappedFile::from_bytes(name.to_owned(), bytes);
        let elf = ElfFile::parse(file.clone())?;
        let identity = match &elf.build_id {
            Some(id) => Identity::BuildId(id.clone()),
            None => Identity::Stamp(None, file.stamp().1),
        };
        let key = (name.to_owned(), identity);
        if let Some(hit) = lock(&self.objects).get(&key) {
            return Ok(hit.clone());
        }
        let object = Arc::new(ObjectSymbols::from_elf(elf, self.dirs.clone())?);
        Ok(lock(&self.objects).entry(key).or_insert(object).clone())
    }
}

impl std::fmt::Debug for SymbolCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolCache")
            .field("dirs", &self.dirs)
            .field("objects", &lock(&self.objects).len())
            .finish()
    }
}

/// Where symbol lookups may find types besides the objects' own DWARF.
#[derive(Debug, Clone, Default)]
pub struct SymbolSources {
    /// Directories of separate debug files (before `/usr/lib/debug`).
    pub debug_dirs: Vec<std::path::PathBuf>,
    /// Type pack directories searched before the standard ones.
    pub typepack_dirs: Vec<std::path::PathBuf>,
    /// Where to fetch debug files that nothing here has (debuginfod).
    pub fetcher: Option<Arc<dyn DebugFileFetcher>>,
}
