//! Everything known about one object file, independent of where a process
//! loaded it: its symbols (read when opened) and its DWARF types (indexed on
//! the first type query that reaches it, once).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::debug_files::DebugDirs;
use super::dwarf_data::{DwarfData, SectionBytes};
use super::elf::ElfFile;
use super::symtab::{SymDef, SymbolTable};
use super::type_index::TypeIndex;
use super::types::{Found, Resolver, TypeInfo, TypeQuery};
use crate::Result;

/// A defined symbol: its link-time value (st_value, before the load bias)
/// and whether it is GLOBAL/WEAK rather than LOCAL (file-static).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol {
    pub value: u64,
    pub global: bool,
}

impl From<SymDef> for Symbol {
    fn from(def: SymDef) -> Self {
        Self {
            value: def.value,
            global: def.global,
        }
    }
}

/// What building an object's type index found.
#[derive(Debug, Clone)]
pub struct TypeIndexStats {
    /// The file the DWARF came from (the object or a separate debug file).
    pub dwarf_path: Option<PathBuf>,
    /// The dwz supplementary file, if any.
    pub sup_path: Option<PathBuf>,
    /// Distinct (kind, name) pairs indexed.
    pub names: usize,
    pub elapsed: Duration,
}

/// The outcome of one type query within one object, cached.
#[derive(Debug, Clone)]
pub(crate) enum Lookup {
    Found(Arc<TypeInfo>),
    Declared(TypeQuery),
    Missing,
}

#[derive(Debug)]
struct DwarfTypes {
    index: TypeIndex,
    stats: TypeIndexStats,
    resolved: Mutex<HashMap<TypeQuery, Lookup>>,
}

/// One ELF object (executable or shared library) and its separate debug
/// files. Shared between processes through `SymbolCache`.
pub struct ObjectSymbols {
    elf: ElfFile,
    dirs: Arc<DebugDirs>,
    symbols: SymbolTable,
    /// The separate debug file, looked for once: at open time if the object
    /// has no `.symtab` (stripped), else on the first type query.
    debug_file: OnceLock<Option<ElfFile>>,
    /// The DWARF sections, loaded on first use (a type query or a line
    /// lookup), once.
    dwarf: OnceLock<Option<DwarfData>>,
    types: OnceLock<DwarfTypes>,
    /// Why debug files were rejected or DWARF could not be read.
    notes: Mutex<Vec<String>>,
}

impl ObjectSymbols {
    /// Opens `path`, searching `debug_dirs` (then `/usr/lib/debug`) for its
    /// separate debug files.
    pub fn open(path: &Path, debug_dirs: Vec<PathBuf>) -> Result<Self> {
        Self::from_elf(ElfFile::open(path)?, Arc::new(DebugDirs::new(debug_dirs)))
    }

    pub(crate) fn from_elf(elf: ElfFile, dirs: Arc<DebugDirs>) -> Result<Self> {
        let mut this = Self {
            elf,
            dirs,
            symbols: SymbolTable::default(),
            debug_file: OnceLock::new(),
            dwarf: OnceLock::new(),
            types: OnceLock::new(),
            notes: Mutex::new(Vec::new()),
        };
        let mut symbols = SymbolTable::default();
        symbols.add_from(&this.elf.object()?, true);
        // A stripped object keeps only .dynsym; file-statics (MPICH's queue
        // heads among them) are in its debug file's .symtab.
        if !this.elf.has_symtab {
            if let Some(debug) = this.debug_file() {
                symbols.add_from(&debug.object()?, true);
            }
        }
        this.symbols = symbols;
        Ok(this)
    }

    pub fn path(&self) -> &Path {
        self.elf.path()
    }

    pub fn build_id(&self) -> Option<&[u8]> {
        self.elf.build_id.as_deref()
    }

    /// A data symbol (STT_OBJECT, or STT_NOTYPE in a section), preferring a
    /// global definition over a file-static one.
    pub fn data_symbol(&self, name: &str) -> Option<Symbol> {
        self.symbols.data(name).map(Symbol::from)
    }

    /// A function symbol (STT_FUNC or STT_GNU_IFUNC).
    pub fn function_symbol(&self, name: &str) -> Option<Symbol> {
        self.symbols.function(name).map(Symbol::from)
    }

    /// See [`super::load_bias`].
    pub fn load_bias(
        &self,
        lowest_mapping_start: u64,
        that_mapping_file_offset: u64,
    ) -> Result<u64> {
        self.elf
            .load_bias(lowest_mapping_start, that_mapping_file_offset)
    }

    /// A type defined in this object's DWARF alone (a declaration here is
    /// completed only from this object's other units).
    pub fn find_type(&self, name: &str) -> Option<Arc<TypeInfo>> {
        match self.lookup_type(&TypeQuery::parse(name)) {
            Lookup::Found(info) => Some(info),
            Lookup::Declared(_) | Lookup::Missing => None,
        }
    }

    /// Builds the type index now, if not built yet, and says what it found.
    pub fn index_types(&self) -> TypeIndexStats {
        self.types().stats.clone()
    }

    /// Why debug files were passed over or DWARF was unreadable.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.notes).clone()
    }

    pub(crate) fn lookup_type(&self, query: &TypeQuery) -> Lookup {
        let types = self.types();
        if let Some(hit) = lock(&types.resolved).get(query) {
            return hit.clone();
        }
        let lookup = match self.dwarf_data() {
            None => Lookup::Missing,
            Some(data) => {
                let dwarf = data.dwarf();
                match Resolver::new(&dwarf, &types.index).lookup(query) {
                    Ok(Some(Found::Type(info))) => Lookup::Found(Arc::new(info)),
                    Ok(Some(Found::Declared(tag))) => Lookup::Declared(tag),
                    Ok(None) => Lookup::Missing,
                    Err(e) => {
                        self.note(format!(
                            "{}: reading type {}: {e}",
                            data.path().display(),
                            query.name
                        ));
                        Lookup::Missing
                    }
                }
            }
        };
        lock(&types.resolved).insert(query.clone(), lookup.clone());
        lookup
    }

    fn note(&self, note: String) {
        lock(&self.notes).push(note);
    }

    fn debug_file(&self) -> Option<&ElfFile> {
        self.debug_file
            .get_or_init(|| {
                let mut notes = Vec::new();
                let found = self.dirs.debug_file_for(&self.elf, &mut notes);
                lock(&self.notes).extend(notes);
                found
            })
            .as_ref()
    }

    fn types(&self) -> &DwarfTypes {
        self.types.get_or_init(|| {
            let started = Instant::now();
            let data = self.dwarf_data();
            let index = match data {
                Some(data) => TypeIndex::build(&data.dwarf()),
                None => TypeIndex::default(),
            };
            if !index.errors.is_empty() {
                let shown = index.errors.iter().take(5);
                lock(&self.notes).extend(shown.map(|e| format!("{}: {e}", self.path().display())));
            }
            let stats = TypeIndexStats {
                dwarf_path: data.map(|d| d.path().to_owned()),
                sup_path: data.and_then(|d| d.sup_path()).map(Path::to_owned),
                names: index.len(),
                elapsed: started.elapsed(),
            };
            DwarfTypes {
                index,
                stats,
                resolved: Mutex::new(HashMap::new()),
            }
        })
    }

    /// The object's DWARF (its own or its debug file's), loaded once.
    pub(crate) fn dwarf_data(&self) -> Option<&DwarfData> {
        self.dwarf.get_or_init(|| self.load_dwarf()).as_ref()
    }

    /// Whether the link-time address `svma` lies in this object's code.
    pub fn contains_code(&self, svma: u64) -> bool {
        self.elf.code.iter().any(|r| r.contains(&svma))
    }

    /// The link-time address ranges of the object's code segments.
    pub fn code_ranges(&self) -> &[std::ops::Range<u64>] {
        &self.elf.code
    }

    /// The function (from `.symtab` or `.dynsym`, the debug file's
    /// `.symtab` for a stripped object) whose code holds the link-time
    /// address `svma`, and the offset of `svma` into it.
    pub fn function_at(&self, svma: u64) -> Option<(&str, u64)> {
        if !self.contains_code(svma) {
            return None;
        }
        self.symbols
            .function_at(svma)
            .map(|(f, offset)| (&*f.name, offset))
    }

    /// The sections an unwinder needs: `.eh_frame` and its header, and
    /// `.debug_frame` (from the debug file when the object has none).
    pub fn unwind_sections(&self) -> UnwindSections {
        let mut found = UnwindSections::default();
        if let Ok(obj) = self.elf.object() {
            found.eh_frame = section_with_range(&self.elf, &obj, ".eh_frame");
            found.eh_frame_hdr = section_with_range(&self.elf, &obj, ".eh_frame_hdr");
            found.text = section_range(&obj, ".text");
            found.got = section_range(&obj, ".got");
            found.debug_frame = section_with_range(&self.elf, &obj, ".debug_frame").map(|s| s.1);
        }
        if found.debug_frame.is_none() && found.eh_frame.is_none() {
            if let Some(debug) = self.debug_file() {
                if let Ok(obj) = debug.object() {
                    found.debug_frame =
                        section_with_range(debug, &obj, ".debug_frame").map(|s| s.1);
                }
            }
        }
        found
    }

    fn load_dwarf(&self) -> Option<DwarfData> {
        let file = if self.elf.has_dwarf {
            &self.elf
        } else {
            self.debug_file().filter(|debug| debug.has_dwarf)?
        };
        let mut notes = Vec::new();
        let sup = self.dirs.supplementary_for(file, &mut notes);
        lock(&self.notes).extend(notes);
        match DwarfData::load(file, sup.as_ref()) {
            Ok(data) => Some(data),
            Err(e) => {
                self.note(e.to_string());
                None
            }
        }
    }
}

/// What a log wants: not the sections and tables.
impl std::fmt::Debug for ObjectSymbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectSymbols")
            .field("path", &self.path())
            .field("symbols", &self.symbols)
            .field("types", &self.types.get().map(|t| &t.stats))
            .finish_non_exhaustive()
    }
}

/// An object's unwind tables, as link-time address ranges and bytes.
#[derive(Debug, Default)]
pub struct UnwindSections {
    pub eh_frame: Option<(std::ops::Range<u64>, SectionBytes)>,
    pub eh_frame_hdr: Option<(std::ops::Range<u64>, SectionBytes)>,
    pub debug_frame: Option<SectionBytes>,
    pub text: Option<std::ops::Range<u64>>,
    pub got: Option<std::ops::Range<u64>>,
}

fn section_range(obj: &object::File<'_>, name: &str) -> Option<std::ops::Range<u64>> {
    use object::{Object, ObjectSection};
    let section = obj.section_by_name(name)?;
    Some(section.address()..section.address().saturating_add(section.size()))
}

fn section_with_range(
    elf: &ElfFile,
    obj: &object::File<'_>,
    name: &str,
) -> Option<(std::ops::Range<u64>, SectionBytes)> {
    let range = section_range(obj, name)?;
    let bytes = SectionBytes::of(elf, obj, name)?;
    Some((range, bytes))
}

/// Locks `mutex`, ignoring poisoning: the data behind our mutexes are caches
/// and notes that a panicking writer cannot leave half-updated.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
