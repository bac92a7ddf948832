//! Snapshot files: what a dump read, saved so that it can be replayed
//! offline with any DLL (`mqs-dump --pid PID --save FILE`, then
//! `mqs-dump --snapshot FILE`). What users attach to a bug report, and what
//! the DLL's replay and fuzz tests run on.
//!
//! A snapshot holds, per process: its place in the job, executable,
//! environment, threads with registers, mapped objects with their
//! build-ids, every page of memory the dump read, and every symbol and
//! type the DLL looked up with the answer it got. Replaying answers lookups
//! from that record first, then from the mapped files themselves where they
//! exist here with the same build-id. Memory the snapshot lacks is an error
//! that names the address, never a guess.
//!
//! Format: the 8 bytes `MQSSNAP\0`, a little-endian u32 version, a u64
//! header length, the header as JSON, then the pages (4096 bytes each) in
//! the order the header lists them.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::members::Member;
use mqs_core::hex::hex;
use mqs_core::interface::{
    Environment, ImageSymbols, MappedObject, Target, Thread, TypeLayout, PAGE_SIZE,
};
use mqs_core::model::Launcher;
use mqs_core::process::{PageCache, SnapshotProcess};
use mqs_core::symbols::{SymbolCache, SymbolIndex};
use mqs_core::{Error, Result};

const MAGIC: &[u8; 8] = b"MQSSNAP\0";
/// Bumped on any change of the header's meaning.
pub const VERSION: u32 = 1;
/// A header larger than this is not believed.
const MAX_HEADER: u64 = 1 << 30;

/// Every lookup a DLL made in one process's image, with its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymbolLog {
    pub symbols: BTreeMap<String, Option<u64>>,
    pub functions: BTreeMap<String, Option<u64>>,
    pub types: BTreeMap<String, Option<TypeLayout>>,
}

/// A log answers alone, for tests and tools that must not look anywhere
/// else: a name it does not hold is not found.
impl ImageSymbols for SymbolLog {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied().flatten()
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.functions.get(name).copied().flatten()
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        self.types.get(name).cloned().flatten()
    }
}

/// Answers lookups from `inner` and writes each answer down.
pub struct RecordingSymbols {
    inner: Rc<dyn ImageSymbols>,
    log: RefCell<SymbolLog>,
}

impl std::fmt::Debug for RecordingSymbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingSymbols").finish_non_exhaustive()
    }
}

impl RecordingSymbols {
    pub fn new(inner: Rc<dyn ImageSymbols>) -> Self {
        Self {
            inner,
            log: RefCell::default(),
        }
    }

    /// What was looked up so far.
    pub fn log(&self) -> SymbolLog {
        self.log.borrow().clone()
    }

    fn note<T: Clone>(
        &self,
        pick: impl FnOnce(&mut SymbolLog) -> &mut BTreeMap<String, Option<T>>,
        name: &str,
        answer: Option<T>,
    ) -> Option<T> {
        let mut log = self.log.borrow_mut();
        pick(&mut log).insert(name.to_string(), answer.clone());
        answer
    }
}

impl ImageSymbols for RecordingSymbols {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.note(|l| &mut l.symbols, name, self.inner.find_symbol(name))
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.note(|l| &mut l.functions, name, self.inner.find_function(name))
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        self.note(|l| &mut l.types, name, self.inner.find_type(name))
    }
}

/// Replays a [`SymbolLog`]; names it does not hold are looked up in the
/// process's mapped files, where they are here unchanged (same build-id).
#[derive(Debug)]
pub struct RecordedSymbols {
    log: SymbolLog,
    objects: Vec<ObjectRecord>,
    debug_dirs: Vec<PathBuf>,
    fallback: OnceCell<Option<SymbolIndex>>,
}

impl RecordedSymbols {
    /// The lookups the recording made (without the fallback to the
    /// mapped files).
    pub fn log(&self) -> &SymbolLog {
        &self.log
    }

    fn fallback(&self) -> Option<&SymbolIndex> {
        self.fallback
            .get_or_init(|| {
                let cache = Arc::new(SymbolCache::new(self.debug_dirs.clone()));
                let unchanged: Vec<MappedObject> = self
                    .objects
                    .iter()
                    .filter(|o| {
                        let file = o.mapped.contents.as_ref().unwrap_or(&o.mapped.path);
                        let here = cache.object(file).ok().map(|f| f.build_id().map(hex));
                        here.is_some_and(|id| id == o.build_id)
                    })
                    .map(|o| o.mapped.clone())
                    .collect();
                SymbolIndex::from_mapped_with_cache(cache, &unchanged).ok()
            })
            .as_ref()
    }
}

impl ImageSymbols for RecordedSymbols {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        match self.log.symbols.get(name) {
            Some(answer) => *answer,
            None => self.fallback()?.find_symbol(name),
        }
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        match self.log.functions.get(name) {
            Some(answer) => *answer,
            None => self.fallback()?.find_function(name),
        }
    }
    fn find_type(&self, name: &str) -> Option<TypeLayout> {
        match self.log.types.get(name) {
            Some(answer) => answer.clone(),
            None => self.fallback()?.find_type(name).map(|t| TypeLayout {
                size: t.size,
                fields: t.fields.clone(),
                handle: None,
            }),
        }
    }
}

/// A mapped object and the build-id its file had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    #[serde(flatten)]
    pub mapped: MappedObject,
    /// Hex; None when the file has none (or could not be read).
    pub build_id: Option<String>,
}

/// One process in a snapshot file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProcessRecord {
    member: Member,
    executable: PathBuf,
    environment: Environment,
    threads: Vec<Thread>,
    pointer_size: u32,
    objects: Vec<ObjectRecord>,
    lookups: SymbolLog,
    /// The DLL the dump used, for the record.
    dll: PathBuf,
    /// Addresses of the pages that follow the header, in order.
    pages: Vec<u64>,
    /// What the OS said the process was doing (absent in files written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    os_state: Option<mqs_core::interface::OsState>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Header {
    version: u32,
    /// The program and version that wrote it.
    written_by: String,
    launcher: Option<Launcher>,
    processes: Vec<ProcessRecord>,
}

/// What a dump of one process read, ready to be written.
#[derive(Debug)]
pub struct Recorded<'a, T: Target> {
    pub member: &'a Member,
    pub target: &'a PageCache<T>,
    pub symbols: &'a RecordingSymbols,
    /// The process's symbol index, for the build-ids of its files (a
    /// replayed snapshot has none: its records carry them).
    pub index: Option<&'a SymbolIndex>,
    pub dll: &'a Path,
}

/// Writes a snapshot of the processes of one dump to `path`.
pub fn save<T: Target>(
    path: &Path,
    launcher: Option<&Launcher>,
    processes: &[Recorded<'_, T>],
) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut records = Vec::new();
    let mut pages = Vec::new();
    for p in processes {
        let build_ids: HashMap<PathBuf, Option<String>> = p
            .index
            .map(SymbolIndex::objects)
            .unwrap_or_default()
            .iter()
            .map(|(o, _)| (o.path().to_path_buf(), o.build_id().map(hex)))
            .collect();
        let objects = p
            .target
            .mapped_objects()?
            .into_iter()
            .map(|mapped| {
                let file = mapped.contents.as_ref().unwrap_or(&mapped.path);
                let build_id = build_ids.get(file).cloned().flatten();
                ObjectRecord { mapped, build_id }
            })
            .collect();
        let read = p.target.pages();
        records.push(ProcessRecord {
            member: p.member.clone(),
            executable: p.target.executable()?,
            environment: p.target.environment().unwrap_or_default(),
            threads: p.target.threads().unwrap_or_default(),
            pointer_size: p.target.pointer_size(),
            objects,
            lookups: p.symbols.log(),
            dll: p.dll.to_path_buf(),
            pages: read.iter().map(|&(addr, _)| addr).collect(),
            os_state: p.target.os_state(),
        });
        pages.extend(read.into_iter().map(|(_, data)| data));
    }
    let header = Header {
        version: VERSION,
        written_by: format!("mqs-dump {}", env!("CARGO_PKG_VERSION")),
        launcher: launcher.cloned(),
        processes: records,
    };
    let json = serde_json::to_vec(&header).map_err(|e| Error::BadInput {
        path: path.to_path_buf(),
        detail: format!("cannot encode the snapshot: {e}"),
    })?;
    // Written to a temporary name first: a failed save never leaves a
    // half-written file under the name asked for.
    let partial = path.with_extension("partial");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&partial).map_err(io)?);
    out.write_all(MAGIC).map_err(io)?;
    out.write_all(&VERSION.to_le_bytes()).map_err(io)?;
    out.write_all(&(json.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&json).map_err(io)?;
    for page in &pages {
        out.write_all(page).map_err(io)?;
    }
    out.flush().map_err(io)?;
    drop(out);
    std::fs::rename(&partial, path).map_err(io)
}

/// One process of a loaded snapshot.
#[derive(Debug)]
pub struct SnapshotEntry {
    pub member: Member,
    pub target: SnapshotProcess,
    pub symbols: RecordedSymbols,
    /// The DLL the recording used.
    pub dll: PathBuf,
}

/// A loaded snapshot file.
#[derive(Debug)]
pub struct Snapshot {
    pub launcher: Option<Launcher>,
    pub processes: Vec<SnapshotEntry>,
}

impl Snapshot {
    /// Reads a snapshot file; `debug_dirs` are searched when the replay
    /// falls back to the mapped files.
    pub fn load(path: &Path, debug_dirs: &[PathBuf]) -> Result<Self> {
        let bad = |detail: String| Error::BadInput {
            path: path.to_path_buf(),
            detail,
        };
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
        let mut fixed = [0u8; 20];
        file.read_exact(&mut fixed)
            .map_err(|_| bad("too short to be an mqs snapshot".into()))?;
        if &fixed[..8] != MAGIC {
            return Err(bad(
                "not an mqs snapshot (write one with mqs-dump --save)".into()
            ));
        }
        let version = u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]);
        if version != VERSION {
            return Err(bad(format!(
                "snapshot format version {version}; this mqs-dump reads version {VERSION}"
            )));
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&fixed[12..20]);
        let len = u64::from_le_bytes(len);
        if len > MAX_HEADER {
            return Err(bad(format!("its header claims {len} bytes")));
        }
        let mut json = vec![0u8; len as usize];
        file.read_exact(&mut json)
            .map_err(|_| bad("it is truncated (in its header)".into()))?;
        let header: Header = serde_json::from_slice(&json)
            .map_err(|e| bad(format!("its header is corrupt: {e}")))?;
        let mut processes = Vec::new();
        for record in header.processes {
            let mut pages = HashMap::with_capacity(record.pages.len());
            for &addr in &record.pages {
                let mut page = vec![0u8; PAGE_SIZE as usize];
                file.read_exact(&mut page)
                    .map_err(|_| bad("it is truncated (in its memory pages)".into()))?;
                if addr % PAGE_SIZE != 0 {
                    return Err(bad(format!("a page at the unaligned address {addr:#x}")));
                }
                pages.insert(addr / PAGE_SIZE, page.into());
            }
            let target = SnapshotProcess {
                pid: record.member.pid,
                executable: record.executable,
                environment: record.environment,
                threads: record.threads,
                mapped_objects: record.objects.iter().map(|o| o.mapped.clone()).collect(),
                pointer_size: record.pointer_size,
                pages,
                os_state: record.os_state,
            };
            processes.push(SnapshotEntry {
                member: record.member,
                target,
                symbols: RecordedSymbols {
                    log: record.lookups,
                    objects: record.objects,
                    debug_dirs: debug_dirs.to_vec(),
                    fallback: OnceCell::new(),
                },
                dll: record.dll,
            });
        }
        Ok(Self {
            launcher: header.launcher,
            processes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed;

    impl ImageSymbols for Fixed {
        fn find_symbol(&self, name: &str) -> Option<u64> {
            (name == "here").then_some(0x1000)
        }
        fn find_function(&self, _: &str) -> Option<u64> {
            None
        }
        fn find_type(&self, name: &str) -> Option<TypeLayout> {
            (name == "t").then(|| TypeLayout {
                size: Some(8),
                fields: vec![("a".into(), 4)],
                handle: None,
            })
        }
    }

    #[test]
    fn lookups_are_recorded_and_replayed() {
        let rec = RecordingSymbols::new(Rc::new(Fixed));
        assert_eq!(rec.find_symbol("here"), Some(0x1000));
        assert_eq!(rec.find_symbol("absent"), None);
        assert!(rec.find_type("t").is_some());
        let replay = RecordedSymbols {
            log: rec.log(),
            objects: vec![],
            debug_dirs: vec![],
            fallback: OnceCell::new(),
        };
        assert_eq!(replay.find_symbol("here"), Some(0x1000));
        assert_eq!(replay.find_symbol("absent"), None);
        assert_eq!(replay.find_type("t").unwrap().field_offset("a"), Some(4));
        // Never recorded, and no files to fall back on.
        assert_eq!(replay.find_function("main"), None);
    }

    #[test]
    fn bad_files_are_refused_with_reasons() {
        let dir = std::env::temp_dir().join(format!("mqs-snap-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x");
        for (bytes, expect) in [
            (&b"short"[..], "too short"),
            (&b"NOTASNAPSHOT12345678901234"[..], "not an mqs snapshot"),
        ] {
            std::fs::write(&file, bytes).unwrap();
            let err = Snapshot::load(&file, &[]).unwrap_err();
            assert!(err.to_string().contains(expect), "{err}");
            assert_eq!(err.exit_code(), mqs_core::exit_code::BAD_INPUT);
        }
        let mut future = MAGIC.to_vec();
        future.extend_from_slice(&99u32.to_le_bytes());
        future.extend_from_slice(&0u64.to_le_bytes());
        std::fs::write(&file, &future).unwrap();
        let err = Snapshot::load(&file, &[]).unwrap_err();
        assert!(err.to_string().contains("version 99"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
