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
use super::typepack::FoundPack;
use super::types::{Found, Resolver, TypeInfo, TypeQuery};
use crate::hex::hex;
use crate::sync::lock;
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

/// Where an object's type answers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeSource {
    /// DWARF on this machine: the object's own or a debug file's.
    Dwarf(PathBuf),
    /// A type pack for its build-id.
    Pack(PathBuf),
    /// A debug file fetched from a debuginfod server.
    Debuginfod(PathBuf),
    /// Nothing (yet: debuginfod is asked only when a lookup needs it).
    None,
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
    /// The type pack for its build-id, looked for when it has no DWARF here.
    pack: OnceLock<Option<FoundPack>>,
    /// Why a borrowed pack failed its runtime invariants, once it did: it
    /// is not used again (the layouts are another build's), and every
    /// process read through this object says why.
    borrow_refused: OnceLock<String>,
    /// Types a borrowed pack must not answer: the process's own DWARF
    /// describes them (`SymbolIndex::shadow_borrowed`).
    shadowed: Mutex<std::collections::HashSet<String>>,
    /// DWARF fetched from debuginfod, when nothing here has any: tried at
    /// most once, and only when a lookup allows it.
    fetched: OnceLock<Option<DwarfData>>,
    fetched_types: OnceLock<DwarfTypes>,
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
        Self::from_parts(elf, dirs, OnceLock::new())
    }

    fn from_parts(
        elf: ElfFile,
        dirs: Arc<DebugDirs>,
        debug_file: OnceLock<Option<ElfFile>>,
    ) -> Result<Self> {
        let mut this = Self {
            elf,
            dirs,
            symbols: SymbolTable::default(),
            debug_file,
            dwarf: OnceLock::new(),
            types: OnceLock::new(),
            pack: OnceLock::new(),
            borrow_refused: OnceLock::new(),
            shadowed: Mutex::new(Default::default()),
            fetched: OnceLock::new(),
            fetched_types: OnceLock::new(),
            notes: Mutex::new(Vec::new()),
        };
        let mut symbols = SymbolTable::default();
        symbols.add_from(&this.elf.object()?, true);
        // A stripped object keeps only .dynsym; file-statics (MPICH's queue
        // heads among them) are in its debug file's .symtab, or its pack.
        if !this.elf.has_symtab {
            if let Some(debug) = this.debug_file() {
                symbols.add_from(&debug.object()?, true);
            } else if let Some(found) = this.pack().filter(|f| !f.borrowed) {
                for (name, s) in &found.pack.symbols {
                    symbols.add_def(name, s.value, s.global, false);
                }
                for (name, s) in &found.pack.functions {
                    symbols.add_def(name, s.value, s.global, true);
                }
            }
        }
        this.symbols = symbols;
        Ok(this)
    }

    /// Opens `path` with an explicit separate debug file (`typepack
    /// extract --debug-file`), checked to belong to it by build-id.
    pub fn open_with_debug_file(
        path: &Path,
        debug: &Path,
        debug_dirs: Vec<PathBuf>,
    ) -> Result<Self> {
        let elf = ElfFile::open(path)?;
        let debug = ElfFile::open(debug)?;
        if let (Some(a), Some(b)) = (&elf.build_id, &debug.build_id) {
            if a != b {
                return Err(crate::Error::ObjectFile {
                    path: debug.path().to_owned(),
                    detail: format!("build-id {} is not {}'s {}", hex(b), path.display(), hex(a)),
                });
            }
        }
        Self::from_parts(
            elf,
            Arc::new(DebugDirs::new(debug_dirs)),
            OnceLock::from(Some(debug)),
        )
    }

    pub fn path(&self) -> &Path {
        self.elf.path()
    }

    /// The NUL-terminated string at `svma` in the object's file, where a
    /// section with contents holds it (read-only data an MPI exports, such
    /// as MPICH's `MPII_Version_string`), at most `max` bytes.
    pub fn string_at(&self, svma: u64, max: usize) -> Option<String> {
        use object::{Object, ObjectSection};
        let file = self.elf.object().ok()?;
        let section = file
            .sections()
            .find(|s| (s.address()..s.address() + s.size()).contains(&svma))?;
        let data = section.data().ok()?;
        let at = usize::try_from(svma - section.address()).ok()?;
        let bytes = data.get(at..)?;
        let end = bytes.iter().take(max).position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    /// The bytes of the section `name` of the object's file (`.rodata`),
    /// where it has one with contents: for facts an MPI keeps only as data
    /// (a version string no symbol names).
    pub fn section_data(&self, name: &str) -> Option<Vec<u8>> {
        use object::{Object, ObjectSection};
        let file = self.elf.object().ok()?;
        let section = file.section_by_name(name)?;
        section.data().ok().map(<[u8]>::to_vec)
    }

    pub fn build_id(&self) -> Option<&[u8]> {
        self.elf.build_id.as_deref()
    }

    /// Whether it is a 64-bit ELF file (8-byte pointers).
    pub fn is_64(&self) -> bool {
        use object::Object;
        self.elf.object().is_ok_and(|o| o.is_64())
    }

    /// The build-id as lowercase hex.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id().map(hex)
    }

    /// Whether the object has DWARF here (its own or a local debug file's).
    pub fn has_local_dwarf(&self) -> bool {
        self.dwarf_data_local().is_some()
    }

    /// Where its types come from now, without asking debuginfod.
    pub fn type_source(&self) -> TypeSource {
        // Told by the files, without loading their sections: a system
        // library's separate debug file is decompressed (libc's: 13 MB)
        // only when a lookup gets that far.
        match self.dwarf.get() {
            Some(Some(data)) => return TypeSource::Dwarf(data.path().to_owned()),
            Some(None) => {}
            None => {
                if let Some(file) = self.dwarf_file() {
                    return TypeSource::Dwarf(file.path().to_owned());
                }
            }
        }
        if let Some(found) = self.pack() {
            return TypeSource::Pack(found.path.clone());
        }
        match self.fetched.get() {
            Some(Some(data)) => TypeSource::Debuginfod(data.path().to_owned()),
            _ => TypeSource::None,
        }
    }

    /// The type pack for this object's build-id, when it has no DWARF here;
    /// else one borrowed from another build of the same library
    /// ([`super::typepack::BORROWABLE`]), unless it was refused.
    pub fn pack(&self) -> Option<&FoundPack> {
        self.pack
            .get_or_init(|| {
                // Not even when that DWARF fails to load: what answers
                // stays what `type_source` says before anything is loaded.
                if self.dwarf_file().is_some() {
                    return None;
                }
                self.build_id_hex()
                    .and_then(|id| self.dirs.packs.find(&id))
                    .or_else(|| {
                        let name = self.path().file_name()?.to_str()?;
                        self.dirs.packs.find_borrowed(name)
                    })
            })
            .as_ref()
            .filter(|f| !(f.borrowed && self.borrow_refused.get().is_some()))
    }

    /// Leaves `names` to other objects: a borrowed pack stops answering
    /// them.
    pub fn shadow_borrowed(&self, names: impl IntoIterator<Item = String>) {
        lock(&self.shadowed).extend(names);
    }

    /// Stops answering from a borrowed pack that does not fit the running
    /// process, saying why among the object's notes. The caller forgets
    /// what it answered already (`SymbolIndex::refuse_borrowed`).
    pub fn refuse_borrowed(&self, why: String) {
        if self.pack().is_some_and(|f| f.borrowed) && self.borrow_refused.set(why.clone()).is_ok() {
            self.note(why);
        }
    }

    /// Why the borrowed pack was refused, if it was.
    pub fn borrow_refusal(&self) -> Option<&str> {
        self.borrow_refused.get().map(String::as_str)
    }

    /// The dynamic symbols' link-time values, for checking a pack.
    pub fn dynamic_symbol(&self, name: &str) -> Option<Symbol> {
        self.data_symbol(name)
            .or_else(|| self.function_symbol(name))
    }

    /// The link-time value and binding of a symbol in the object's own
    /// `.dynsym` (not its debug file's or a pack's).
    pub fn exported(&self, name: &str) -> Option<Symbol> {
        use object::{Object, ObjectSymbol};
        let obj = self.elf.object().ok()?;
        obj.dynamic_symbols()
            .find(|s| s.is_definition() && s.name() == Ok(name))
            .map(|s| Symbol {
                value: s.address(),
                global: s.is_global(),
            })
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
        match (self.dwarf_data_local(), self.fetched_types.get()) {
            (None, Some(fetched)) => fetched.stats.clone(),
            _ => self.types().stats.clone(),
        }
    }

    /// Why debug files were passed over or DWARF was unreadable.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.notes).clone()
    }

    /// One object's answer: its DWARF here, else its type pack, else (when
    /// `fetch` allows) DWARF fetched from debuginfod.
    pub(crate) fn lookup_type(&self, query: &TypeQuery) -> Lookup {
        self.lookup_type_with(query, false)
    }

    pub(crate) fn lookup_type_with(&self, query: &TypeQuery, fetch: bool) -> Lookup {
        if let Some(data) = self.dwarf_data_local() {
            return self.lookup_in(self.types(), data, query);
        }
        if let Some(found) = self.pack() {
            // A pack holds the names as asked: look for the query as written.
            // (A typedef is asked by its bare name, which is how DLLs ask.)
            let asked = match query.scope {
                super::types::Scope::Any | super::types::Scope::Typedef => query.name.clone(),
                _ => format!("{} {}", scope_word(query.scope), query.name),
            };
            if found.borrowed && lock(&self.shadowed).contains(&asked) {
                return Lookup::Missing;
            }
            return match found.pack.find_type(&asked) {
                Some(info) => Lookup::Found(Arc::new(info)),
                None => Lookup::Missing,
            };
        }
        if fetch || self.fetched.get().is_some() {
            if let Some(data) = self.fetched_dwarf() {
                let types = self
                    .fetched_types
                    .get_or_init(|| self.build_types(Some(data)));
                return self.lookup_in(types, data, query);
            }
        }
        Lookup::Missing
    }

    fn lookup_in(&self, types: &DwarfTypes, data: &DwarfData, query: &TypeQuery) -> Lookup {
        if let Some(hit) = lock(&types.resolved).get(query) {
            return hit.clone();
        }
        let dwarf = data.dwarf();
        let lookup = match Resolver::new(&dwarf, &types.index).lookup(query) {
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
        self.types
            .get_or_init(|| self.build_types(self.dwarf_data_local()))
    }

    fn build_types(&self, data: Option<&DwarfData>) -> DwarfTypes {
        let started = Instant::now();
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
    }

    /// Fetches the object's DWARF from debuginfod (once) when nothing here
    /// has any, type pack or not: packs hold types, not where a function's
    /// parameters are.
    pub(crate) fn fetch_missing_dwarf(&self) {
        if self.dwarf_data_local().is_none() {
            let _ = self.fetched_dwarf();
        }
    }

    /// DWARF fetched from debuginfod (once): the debug file by the object's
    /// build-id, its dwz file by the build-id its altlink names.
    fn fetched_dwarf(&self) -> Option<&DwarfData> {
        self.fetched.get_or_init(|| self.fetch_dwarf()).as_ref()
    }

    fn fetch_dwarf(&self) -> Option<DwarfData> {
        let client = self.dirs.debuginfod.as_ref()?;
        let id = self.elf.build_id.as_deref()?;
        let name = self
            .path()
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let path = client.debuginfo(id, &name)?;
        let file = match self.fetched_elf(&path, id) {
            Ok(file) => file,
            Err(e) => {
                self.note(e);
                return None;
            }
        };
        let mut notes = Vec::new();
        let mut sup = self.dirs.supplementary_for(&file, &mut notes);
        if sup.is_none() {
            if let Some((alt, alt_id)) = &file.altlink {
                let what = format!("{name} dwz {}", alt.display());
                if let Some(p) = client.debuginfo(alt_id, &what) {
                    match self.fetched_elf(&p, alt_id) {
                        Ok(found) => {
                            notes.clear();
                            sup = Some(found);
                        }
                        Err(e) => notes.push(e),
                    }
                }
            }
        }
        lock(&self.notes).extend(notes);
        match DwarfData::load(&file, sup.as_ref()) {
            Ok(data) => Some(data),
            Err(e) => {
                self.note(e.to_string());
                None
            }
        }
    }

    /// A cached download, checked to be the ELF file with build-id `id`
    /// and DWARF (a wrong one is removed from the cache).
    fn fetched_elf(&self, path: &Path, id: &[u8]) -> std::result::Result<ElfFile, String> {
        let refuse = |why: String| {
            let _ = std::fs::remove_file(path);
            Err(format!(
                "debuginfod gave {}: {why}; removed it",
                path.display()
            ))
        };
        match ElfFile::open(path) {
            Ok(elf) if elf.build_id.as_deref() != Some(id) => refuse(format!(
                "build-id {} is not the {} asked for",
                elf.build_id.as_deref().map(hex).unwrap_or_default(),
                hex(id)
            )),
            Ok(elf) if !elf.has_dwarf => refuse("it has no DWARF".into()),
            Ok(elf) => Ok(elf),
            Err(e) => refuse(e.to_string()),
        }
    }

    /// The object's DWARF (its own or its debug file's, or one fetched
    /// from debuginfod earlier), loaded once.
    pub(crate) fn dwarf_data(&self) -> Option<&DwarfData> {
        self.dwarf_data_local()
            .or_else(|| self.fetched.get().and_then(Option::as_ref))
    }

    fn dwarf_data_local(&self) -> Option<&DwarfData> {
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

    /// The first parameter named one of `names` of the function whose code
    /// holds `svma`, where DWARF says it is at that address (see
    /// [`super::params`]), with the `members` of the struct it points to.
    pub fn parameter_at(
        &self,
        svma: u64,
        names: &[&str],
        members: &[&str],
    ) -> Option<super::params::Parameter<'_>> {
        super::params::parameter_at(self.dwarf_data()?, svma, names, members)
    }

    /// Every parameter named one of `names` of the function whose code
    /// holds `svma` that DWARF places at that address, in the order of
    /// `names`.
    pub fn parameters_at(
        &self,
        svma: u64,
        names: &[&str],
        members: &[&str],
    ) -> Vec<super::params::Parameter<'_>> {
        match self.dwarf_data() {
            Some(data) => super::params::parameters_at(data, svma, names, members),
            None => Vec::new(),
        }
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

    /// Whether its DWARF here is in a separate debug file (found by
    /// build-id or debuglink), not in the object itself.
    pub(crate) fn dwarf_is_separate(&self) -> bool {
        !self.elf.has_dwarf && self.dwarf_file().is_some()
    }

    /// The file this object's DWARF is in here: its own, or its separate
    /// debug file's.
    fn dwarf_file(&self) -> Option<&ElfFile> {
        if self.elf.has_dwarf {
            Some(&self.elf)
        } else {
            self.debug_file().filter(|debug| debug.has_dwarf)
        }
    }

    fn load_dwarf(&self) -> Option<DwarfData> {
        let file = self.dwarf_file()?;
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

fn scope_word(scope: super::types::Scope) -> &'static str {
    use super::types::Scope;
    match scope {
        Scope::Any => "",
        Scope::Typedef => "typedef",
        Scope::Struct => "struct",
        Scope::Class => "class",
        Scope::Union => "union",
        Scope::Enum => "enum",
    }
}
